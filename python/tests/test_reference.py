"""The numpy references of reference.py agree with the spec's own models (shared/spec/ref_impl.py, pure
Python, written for the spec's worked examples), on the same random routings. Skipped where the spec folder
is not next to the checkout ($MOEC_SPEC_DIR names another)."""
import importlib.util
import os

import numpy as np
import pytest

import reference as ref
from conftest import SOURCE_DIR

SPEC_DIR = os.environ.get("MOEC_SPEC_DIR", str(SOURCE_DIR.parent / "shared" / "spec"))
REF_IMPL = os.path.join(SPEC_DIR, "ref_impl.py")
pytestmark = pytest.mark.skipif(not os.path.exists(REF_IMPL), reason=f"no {REF_IMPL}")


@pytest.fixture(scope="module")
def spec():
    loaded = importlib.util.spec_from_file_location("ref_impl", REF_IMPL)
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


@pytest.mark.parametrize("mode", ["dropless", "active", "droppad"])
def test_init_routing_v2_grad(spec, mode, rng):
    call = ref.init_routing_v2_grad_call(rng, "f32", mode, n=7, k=3, experts=5, capacity=2)
    grad, row_idx = call.inputs
    a = call.attrs
    rows = grad.reshape(-1, grad.shape[-1]).astype(np.float64).tolist()
    expected = spec.init_routing_v2_grad(rows, row_idx.tolist(), a["top_k"], a["drop_pad_mode"], a["active_num"])
    assert np.array_equal(call.expected[0], np.array(expected, np.float32))
    # The routing too: MoeInitRoutingV2's expanded_row_idx for the same experts.
    experts = np.stack([rng.choice(5, size=3, replace=False) for _ in range(7)])
    x = np.zeros((7, 1)).tolist()
    _, spec_idx, _ = spec.init_routing_v2(x, experts.tolist(), 0, 2, 5, 1 if mode == "droppad" else 0)
    assert ref.init_routing_v2_row_idx(experts, mode, 2, 5).tolist() == spec_idx


@pytest.mark.parametrize("pad", [False, True], ids=["nonpad", "pad"])
@pytest.mark.parametrize("with_probs", [False, True], ids=["noprobs", "probs"])
def test_unpermute_with_routing_map_grad(spec, pad, with_probs, rng):
    call = ref.unpermute_grad_call(rng, "f32", pad, with_probs)
    g, out_index, token_id = call.inputs[:3]
    routing_map, permuted, probs = (call.inputs[3:] + [None] * 3)[:3]
    as_list = lambda a: None if a is None else a.astype(np.float64).tolist()  # noqa: E731
    dy, dp = spec.unpermute_with_routing_map_grad(
        as_list(g), out_index.tolist(), token_id.tolist(), None if routing_map is None else routing_map.tolist(),
        as_list(permuted), as_list(probs), pad, num_experts=call.dims["E"])
    assert np.array_equal(call.expected[0], np.array(dy, np.float32))
    if with_probs:
        assert np.array_equal(call.expected[1], np.array(dp, np.float32))


def test_the_routings_are_the_forward_ops(spec, rng):
    """reference.py's permutes route as the spec's: Megatron's sorted indices (non-pad), the pad layout."""
    m = ref.routing_map_nonpad(rng, 6, 5, 2)
    tokens = np.zeros((6, 1)).tolist()
    _, _, sorted_out = spec.permute_with_routing_map(tokens, m.astype(int).tolist(), None, 12, False)
    assert ref.sorted_indices_nonpad(m).tolist() == sorted_out
    m = rng.random((6, 4)) < 0.4
    _, _, sorted_indices = spec.permute_with_routing_map(tokens, m.astype(int).tolist(), None, 12, True)
    _, order, token_id, _ = spec.unpermute_with_routing_map(np.zeros((12, 1)).tolist(), sorted_indices, None, None,
                                                            True, (6, 1))
    out_index, permute_token_id = ref.pad_indices(m, 3)
    assert out_index.tolist() == order and permute_token_id.tolist() == token_id


@pytest.mark.parametrize("weighted", [False, True], ids=["sum", "weighted"])
def test_moe_unpermute(spec, weighted, rng):
    call = ref.moe_unpermute_call(rng, "f32", weighted=weighted)
    xu, rowmap, routemap, probs = call.inputs
    hidden, topk = spec.paddle_moe_unpermute(xu.astype(np.float64).tolist(), rowmap.tolist(), routemap.tolist(),
                                             probs.astype(np.float64).tolist(), rowmap.shape[0], rowmap.shape[1],
                                             weighted=weighted, emulate_single_copy_quirk=False)
    assert np.array_equal(call.expected[0], np.array(hidden, np.float32))
    assert np.array_equal(call.expected[1], np.array(topk, np.float32))
