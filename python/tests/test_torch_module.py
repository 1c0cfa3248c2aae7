"""moec.torch: the grad ops as torch functions, and the autograd pairing a forward op will use."""
import numpy as np
import pytest
import torch

import moec.torch as mt
import reference as ref
from util import assert_bits_equal, to_numpy, to_torch


def torch_inputs(call):
    return [to_torch(x, call.dtype) for x in call.inputs]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("mode", ["dropless", "droppad"])
def test_moe_init_routing_v2_grad(mode, dtype, rng):
    call = ref.init_routing_v2_grad_call(rng, dtype, mode)
    grad, idx = torch_inputs(call)
    got = mt.moe_init_routing_v2_grad(grad, idx, top_k=call.attrs["top_k"], drop_pad_mode=call.attrs["drop_pad_mode"])
    assert isinstance(got, torch.Tensor) and got.dtype == grad.dtype
    assert_bits_equal(to_numpy(got), call.expected[0])


@pytest.mark.parametrize("pad", [False, True], ids=["nonpad", "pad"])
@pytest.mark.parametrize("with_probs", [False, True], ids=["noprobs", "probs"])
def test_moe_token_unpermute_with_routing_map_grad(pad, with_probs, rng):
    call = ref.unpermute_grad_call(rng, "f32", pad, with_probs)
    inputs = torch_inputs(call)
    optional = dict(zip(["routing_map", "permuted_tokens", "probs"], inputs[3:]))
    grads = mt.moe_token_unpermute_with_routing_map_grad(*inputs[:3], **optional, drop_and_pad=pad)
    assert len(grads) == 2
    assert_bits_equal(to_numpy(grads[0]), call.expected[0])
    if with_probs:
        assert_bits_equal(to_numpy(grads[1]), call.expected[1])
    else:
        assert grads[1] is None


def test_moe_unpermute(rng):
    call = ref.moe_unpermute_call(rng, "bf16", weighted=True)
    hidden, topk = mt.moe_unpermute(*torch_inputs(call), using_weighted_combine=True)
    assert hidden.dtype == torch.bfloat16 and topk.dtype == torch.float32
    assert_bits_equal(to_numpy(hidden), call.expected[0])
    assert_bits_equal(to_numpy(topk), call.expected[1])


# ---------------------------------------------------------------------------------------- autograd pairing
def unpermute_torch(permuted_tokens, sorted_indices, probs, routing_map):
    """Megatron's non-pad unpermute with probs, in plain torch (spec §2.2): token t sums its K permuted rows
    sorted_indices[t*K + k], each weighted by its prob (the token-major masked select of the probs)."""
    tokens, hidden = routing_map.shape[0], permuted_tokens.shape[1]
    weights = probs.masked_select(routing_map)
    rows = permuted_tokens[sorted_indices.long()] * weights.unsqueeze(1)
    return rows.view(tokens, -1, hidden).sum(1)


def test_a_paired_function_runs_moecs_grad_op_under_autograd(rng):
    """_paired makes the autograd.Function a forward op will get. With a plain torch forward for now, its
    backward is moec's A3 grad op, and it agrees with torch.autograd of the plain torch composition."""

    def forward(permuted_tokens, sorted_indices, probs, routing_map):
        with torch.no_grad():
            out = unpermute_torch(permuted_tokens, sorted_indices, probs, routing_map)
        return out, (permuted_tokens, sorted_indices, probs, routing_map)

    def backward(saved, grads):
        permuted_tokens, sorted_indices, probs, routing_map = saved
        return mt.moe_token_unpermute_with_routing_map_grad(
            grads[0], sorted_indices, sorted_indices, routing_map=routing_map, permuted_tokens=permuted_tokens,
            probs=probs)

    unpermute = mt._paired("unpermute", forward, backward, differentiable=(0, 2))
    call = ref.unpermute_grad_call(rng, "f32", pad=False, with_probs=True)
    _, sorted_indices, _, routing_map, permuted, probs = torch_inputs(call)
    seed = torch.from_numpy(ref.small_values(rng, (routing_map.shape[0], permuted.shape[1]), "f32"))

    ours = [permuted.clone().requires_grad_(), probs.clone().requires_grad_()]
    y = unpermute(ours[0], sorted_indices, ours[1], routing_map)
    (y * seed).sum().backward()

    theirs = [permuted.clone().requires_grad_(), probs.clone().requires_grad_()]
    y_ref = unpermute_torch(theirs[0], sorted_indices, theirs[1], routing_map)
    (y_ref * seed).sum().backward()

    assert torch.equal(y, y_ref)
    for a, b, name in zip(ours, theirs, ["permuted_tokens", "probs"]):
        # Small integers and quarters: both sides are exact, so within any tolerance and bit for bit.
        torch.testing.assert_close(a.grad, b.grad, rtol=1.3e-6, atol=1e-5, msg=name)
        assert torch.equal(a.grad, b.grad), name
