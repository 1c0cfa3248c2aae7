"""The spec's worked examples (moe-ops.md §6, tests/data/test_vectors.json, as the C++ op tests read them)
through Python: from numpy and from torch, bit for bit."""
import json

import numpy as np
import pytest

import moec
from conftest import SOURCE_DIR
from util import as_list, assert_bits_equal, to_numpy, to_torch

VECTORS = json.loads((SOURCE_DIR / "tests" / "data" / "test_vectors.json").read_text())


def typed(values, dtype: str) -> np.ndarray:
    a = np.array(values, np.float64)
    return moec.to_bf16(a) if dtype == "bf16" else a.astype(np.float32)


def run_both(kernel, inputs, dtype):
    """The outputs from numpy inputs, after checking torch inputs give the same bits."""
    from_numpy = as_list(kernel(*inputs))
    from_torch = as_list(kernel(*[to_torch(x, dtype) for x in inputs]))
    for a, t in zip(from_numpy, from_torch):
        assert_bits_equal(to_numpy(t), a, "torch vs numpy")
    return from_numpy


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("case", ["dropless", "active5", "droppad_C2", "droppad_C3"])
def test_init_routing_v2_grad(case, dtype):
    c = VECTORS["B_init_routing_v2"]["cases"][case]
    g = c["grad"]
    k, mode, active = g["topK"], c["dropPadMode"], c["activeNum"]
    rows = np.array(g["gradExpandedX_rows"], np.float64)
    h = rows.shape[1]
    if mode == 1:  # [E, C, H]: the vectors list the rows up to the last one read; the rest are never read
        grad = np.full((c["expertNum"] * c["expertCapacity"], h), np.nan)
        grad[: len(rows)] = rows
        grad = grad.reshape(c["expertNum"], c["expertCapacity"], h)
    else:
        grad = rows
    kernel = moec.get("moe_init_routing_v2_grad", dtype, dims={"H": h},
                      attrs={"top_k": k, "drop_pad_mode": mode, "active_num": active}, target="cpu")
    (grad_x,) = run_both(kernel, [typed(grad, dtype), np.array(c["expandedRowIdx"], np.int32)], dtype)
    assert_bits_equal(grad_x, typed(g["gradX"], dtype), f"{case} grad_x")


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("pad", [False, True], ids=["nonpad", "pad"])
@pytest.mark.parametrize("with_probs", [False, True], ids=["noprobs", "probs"])
def test_unpermute_with_routing_map_grad(pad, with_probs, dtype):
    c = VECTORS["A_pad" if pad else "A_nonpad"]
    g = c["grad"]
    routing_map = np.array(c["routingMap"], np.bool_)
    grad = typed(g["unpermutedTokensGrad"], dtype)
    inputs = [grad, np.array(g["outIndex"], np.int32), np.array(g["permuteTokenId"], np.int32)]
    with_ = []
    if with_probs:
        inputs += [routing_map, typed(c["unpermute"]["permutedTokens"], dtype), typed(c["probs"], dtype)]
        with_ = ["routing_map", "permuted_tokens", "probs"]
    kernel = moec.get("moe_token_unpermute_with_routing_map_grad", dtype,
                      dims={"H": grad.shape[1], "E": routing_map.shape[1]}, attrs={"drop_and_pad": pad},
                      with_=with_, target="cpu")
    outputs = run_both(kernel, inputs, dtype)
    expected = np.array(g["permutedTokensGradOut" if with_probs else "permutedTokensGradOut_noprobs"], np.float64)
    if pad and with_probs:
        expected[5, 1] = -0.0  # G[0] = [1, -1] times the filler prob 0: [0, -0]; JSON loses the sign
    assert_bits_equal(outputs[0], typed(expected, dtype), "permuted_tokens_grad")
    if with_probs:
        assert_bits_equal(outputs[1], typed(g["probsGradOut"], dtype), "probs_grad")


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("weighted", [False, True], ids=["sum", "weighted"])
def test_moe_unpermute(weighted, dtype):
    c = VECTORS["C_paddle"]
    u = c["unpermute"]
    xu = typed(u["hidden_states_unzipped"], dtype)
    rowmap = np.array(c["permute"]["zipped_expertwise_rowmap"], np.int32)
    routemap = np.array(c["expert_routemap_topk"], np.int32)
    probs = np.array(c["permute"]["token_prob_unzipped"], np.float32)  # 0.6f and 0.4f exactly
    kernel = moec.get("moe_unpermute", dtype, dims={"H": xu.shape[1], "E": rowmap.shape[1], "K": routemap.shape[1]},
                      attrs={"using_weighted_combine": weighted, "num_experts": c["num_experts"]}, target="cpu")
    hidden, topk = run_both(kernel, [xu, rowmap, routemap, probs], dtype)
    assert_bits_equal(topk, np.array(u["expert_prob_topk"], np.float32), "expert_prob_topk")
    if not weighted:
        assert_bits_equal(hidden, typed(u["unweighted"], dtype), "hidden_states")
    elif dtype == "bf16":  # the spec's figures are bf16's: rne(0.6f * 1 + 0.4f * 2, ...)
        assert_bits_equal(hidden, typed(u["weighted"], dtype), "hidden_states")
    else:  # f32: the op's fma chain, fma(2, 0.4f, fma(1, 0.6f, 0)). Each product and sum here is exact in
        # float64, so rounding it to f32 once is what an fma gives.
        p6, p4 = np.float64(np.float32(0.6)), np.float64(np.float32(0.4))
        token0 = [np.float32(2 * p4 + np.float64(np.float32(1 * p6))),
                  np.float32(4 * p4 + np.float64(np.float32(2 * p6)))]
        assert_bits_equal(hidden, np.array([token0, [3, 4], [5, 6]], np.float32), "hidden_states")
