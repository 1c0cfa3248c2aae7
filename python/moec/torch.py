"""moec's ops as PyTorch functions (CPU tensors, and CUDA tensors on a machine with a GPU).

The grad ops are plain functions: each takes and returns torch tensors, reads the static values from the
shapes (or takes them as arguments), and runs on the tensors' device, on torch's current stream.

    from moec.torch import moe_token_unpermute_with_routing_map_grad
    permuted_tokens_grad, probs_grad = moe_token_unpermute_with_routing_map_grad(
        grad, sorted_indices, sorted_indices, routing_map=routing_map, permuted_tokens=permuted, probs=probs)

Argument names follow the ops' signatures (``moec list``), which follow CANN's and Paddle's; where Megatron-LM's
``moe_utils`` has the same notion its name is used (tokens, routing_map, probs, drop_and_pad,
num_out_tokens, restore_shape).

Autograd: a forward op and its grad op become one ``torch.autograd.Function`` through ``_paired`` (one line a
pair, see the end of this file) once the forward ops exist (the forward-ops issue): ``y = unpermute(x, ...)``
then ``y.sum().backward()`` runs moec both ways.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import torch as _torch

import moec as _moec

_DTYPES = {_torch.float32: "f32", _torch.float16: "f16", _torch.bfloat16: "bf16"}


def _dtype(t: _torch.Tensor, name: str) -> str:
    if t.dtype not in _DTYPES:
        raise _moec.ArgumentError(f"{name}: expected a float32, float16 or bfloat16 tensor, got {t.dtype}")
    return _DTYPES[t.dtype]


def _target(t: _torch.Tensor) -> str:
    return "cuda" if t.is_cuda else "cpu"


def moe_init_routing_v2_grad(grad_expanded_x: _torch.Tensor, expanded_row_idx: _torch.Tensor, top_k: int,
                             drop_pad_mode: int = 0, active_num: int = 0) -> _torch.Tensor:
    """aclnnMoeInitRoutingV2Grad: the gradient of MoeInitRoutingV2 with respect to x, [N, H].

    ``grad_expanded_x``: [N*K, H] dropless, [active_num, H] active, [E, C, H] drop/pad; ``expanded_row_idx``:
    int32 [N*K]."""
    op = "moe_init_routing_v2_grad"
    kernel = _moec.get(op, _dtype(grad_expanded_x, "grad_expanded_x"), dims={"H": grad_expanded_x.shape[-1]},
                       attrs={"top_k": top_k, "drop_pad_mode": drop_pad_mode, "active_num": active_num},
                       target=_target(grad_expanded_x))
    return kernel(grad_expanded_x, expanded_row_idx)


def moe_token_unpermute_with_routing_map_grad(
        unpermuted_tokens_grad: _torch.Tensor, out_index: _torch.Tensor, permute_token_id: _torch.Tensor,
        routing_map: Optional[_torch.Tensor] = None, permuted_tokens: Optional[_torch.Tensor] = None,
        probs: Optional[_torch.Tensor] = None, drop_and_pad: bool = False,
        num_experts: Optional[int] = None) -> Tuple[_torch.Tensor, Optional[_torch.Tensor]]:
    """aclnnMoeTokenUnpermuteWithRoutingMapGrad: the gradient of Megatron's ``unpermute(permuted_tokens,
    sorted_indices, restore_shape, probs, routing_map, drop_and_pad)`` with respect to the permuted tokens
    and, with ``probs``, to the probs. Returns (permuted_tokens_grad [R, H], probs_grad [T, E] or None).

    Non-pad: ``out_index`` = ``permute_token_id`` = Megatron's sorted_indices. Pad: out_index is the slot of
    each permuted row, permute_token_id its token. ``num_experts`` (E) defaults to the routing map's or the
    probs' second dim, else 1 (E is read only with probs)."""
    op = "moe_token_unpermute_with_routing_map_grad"
    with_, inputs = [], [unpermuted_tokens_grad, out_index, permute_token_id]
    for name, tensor in (("routing_map", routing_map), ("permuted_tokens", permuted_tokens), ("probs", probs)):
        if tensor is not None:
            with_.append(name)
            inputs.append(tensor)
    if num_experts is None:
        source = routing_map if routing_map is not None else probs
        num_experts = source.shape[1] if source is not None else 1
    kernel = _moec.get(op, _dtype(unpermuted_tokens_grad, "unpermuted_tokens_grad"),
                       dims={"H": unpermuted_tokens_grad.shape[1], "E": num_experts},
                       attrs={"drop_and_pad": drop_and_pad}, with_=with_, target=_target(unpermuted_tokens_grad))
    outputs = kernel(*inputs)
    if probs is None:
        return outputs, None
    return outputs


def moe_unpermute(hidden_states_unzipped: _torch.Tensor, zipped_expertwise_rowmap: _torch.Tensor,
                  expert_routemap_topk: _torch.Tensor, token_prob_unzipped: _torch.Tensor,
                  total_zipped_tokens: int = -1, num_experts: int = -1, using_mix_precision: bool = True,
                  using_weighted_combine: bool = False,
                  paddle_single_row_copy: bool = False) -> Tuple[_torch.Tensor, _torch.Tensor]:
    """paddle.nn.functional.moe_unpermute: each token's hidden state combined from its expert rows in
    ascending expert order, and its top-k probs restored. Returns (hidden_states [T, H], expert_prob_topk
    [T, K] float32). The rowmap is int32 [T, E], the routemap int32 [T, K], the probs float32 [R]."""
    op = "moe_unpermute"
    kernel = _moec.get(op, _dtype(hidden_states_unzipped, "hidden_states_unzipped"),
                       dims={"H": hidden_states_unzipped.shape[1], "E": zipped_expertwise_rowmap.shape[1],
                             "K": expert_routemap_topk.shape[1]},
                       attrs={"total_zipped_tokens": total_zipped_tokens, "num_experts": num_experts,
                              "using_mix_precision": using_mix_precision,
                              "using_weighted_combine": using_weighted_combine,
                              "paddle_single_row_copy": paddle_single_row_copy},
                       target=_target(hidden_states_unzipped))
    return kernel(hidden_states_unzipped, zipped_expertwise_rowmap, expert_routemap_topk, token_prob_unzipped)


def _paired(name: str, forward: Callable, backward: Callable, differentiable: Tuple[int, ...]) -> Callable:
    """A function that runs ``forward`` and differentiates through ``backward`` (a torch.autograd.Function).

    ``forward(*args)`` returns ``(outputs, saved)``: the output tensor (or a tuple of them) and a tuple of the
    tensors the backward needs. ``backward(saved, grads)`` gets those tensors and the outputs' gradients
    (contiguous) and returns one gradient per position in ``differentiable``, the positions of the arguments
    that have one; the other arguments get None."""

    class Function(_torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            outputs, saved = forward(*args)
            ctx.save_for_backward(*saved)
            ctx.nargs = len(args)
            return outputs

        @staticmethod
        def backward(ctx, *grads):
            grads = tuple(g.contiguous() if g is not None else None for g in grads)
            computed = backward(ctx.saved_tensors, grads)
            result = [None] * ctx.nargs
            for position, grad in zip(differentiable, computed):
                result[position] = grad
            return tuple(result)

    Function.__name__ = Function.__qualname__ = name
    return Function.apply


# Forward op <-> grad op pairs, one line each, as the forward ops land:
#   unpermute = _paired("unpermute", _unpermute_forward, _unpermute_backward, differentiable=(0, 3))


def _with_signatures():
    """Each function's docstring ends with its op as ``moec list`` prints it."""
    import textwrap

    for function in (moe_init_routing_v2_grad, moe_token_unpermute_with_routing_map_grad, moe_unpermute):
        function.__doc__ += "\n\n    The op, as ``moec list`` prints it:\n\n" + \
            textwrap.indent(_moec.signature(function.__name__), "        ") + "\n"


_with_signatures()
