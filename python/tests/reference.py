"""numpy references of the built-in ops, and random calls routed the way their forward ops route.

Written from the spec (shared/spec/moe-ops.md) and the ops' signatures, independently of moec. The
references compute in float64 and round once to the output type. The random data are small integers and
quarters, so every sum and product the kernels make in f32 is exact: the kernels' rounding then happens once,
as the references', and results compare bit for bit, in f32, f16 and bf16 alike.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import moec


# ------------------------------------------------------------------------------------------------- numbers
def round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to `dtype`, as numpy holds that type (bf16: its bits, uint16)."""
    if dtype == "bf16":
        return moec.to_bf16(values.astype(np.float32))  # exact for our data: f32 holds them, then one rounding
    return values.astype({"f32": np.float32, "f16": np.float16}[dtype])


def as_float(values: np.ndarray, dtype: str) -> np.ndarray:
    """The values of an array of `dtype` (numpy's representation) as float64."""
    return (moec.from_bf16(values) if dtype == "bf16" else values).astype(np.float64)


def small_values(rng, shape, dtype: str) -> np.ndarray:
    """Integers in [-4, 4], in `dtype`."""
    return round_to(rng.integers(-4, 5, size=shape).astype(np.float64), dtype)


def quarters(rng, shape, dtype: str) -> np.ndarray:
    """Multiples of 1/4 in [0, 1], in `dtype`."""
    return round_to(rng.integers(0, 5, size=shape) / 4.0, dtype)


@dataclass
class Call:
    """One call of an op: the request for moec.get, the inputs in order, the expected outputs."""
    op: str
    dtype: str
    dims: dict
    attrs: dict
    with_: list
    inputs: list
    expected: list
    label: str = ""
    extra: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------ moe_init_routing_v2_grad (B2)
def init_routing_v2_row_idx(expert_idx: np.ndarray, mode: str, capacity: int, experts: int) -> np.ndarray:
    """MoeInitRoutingV2's expanded_row_idx for the top-K experts of each token (spec §3.1): the slots sorted
    stably by expert; drop/pad keeps the first `capacity` of each expert at e * C + rank, else -1."""
    flat = expert_idx.reshape(-1)
    order = np.argsort(flat, kind="stable")
    row_idx = np.empty(flat.size, np.int32)
    if mode != "droppad":
        row_idx[order] = np.arange(flat.size, dtype=np.int32)
        return row_idx
    rank = np.zeros(experts, np.int64)
    row_idx[:] = -1
    for j in order:
        e = flat[j]
        if rank[e] < capacity:
            row_idx[j] = e * capacity + rank[e]
        rank[e] += 1
    return row_idx


def init_routing_v2_grad(grad: np.ndarray, row_idx: np.ndarray, top_k: int, drop_pad_mode: int,
                         active_num: int) -> np.ndarray:
    """float64 grad_x [N, H]: each token's live expanded rows summed."""
    rows = grad.reshape(-1, grad.shape[-1])
    n = row_idx.size // top_k
    out = np.zeros((n, rows.shape[1]))
    for i in range(n):
        for k in range(top_k):
            r = row_idx[i * top_k + k]
            live = r >= 0 if drop_pad_mode == 1 else (active_num == 0 or r < active_num)
            if live:
                out[i] += rows[r]
    return out


def init_routing_v2_grad_call(rng, dtype: str, mode: str, n=6, k=2, h=16, experts=4, capacity=3) -> Call:
    expert_idx = np.stack([rng.choice(experts, size=k, replace=False) for _ in range(n)])
    row_idx = init_routing_v2_row_idx(expert_idx, mode, capacity, experts)
    active_num = n * k - 3 if mode == "active" else 0
    rows = {"dropless": (n * k, h), "active": (active_num, h), "droppad": (experts, capacity, h)}[mode]
    grad = small_values(rng, rows, dtype)
    drop_pad_mode = 1 if mode == "droppad" else 0
    expected = init_routing_v2_grad(as_float(grad, dtype), row_idx, k, drop_pad_mode, active_num)
    return Call("moe_init_routing_v2_grad", dtype, {"H": h},
                {"top_k": k, "drop_pad_mode": drop_pad_mode, "active_num": active_num}, [], [grad, row_idx],
                [round_to(expected, dtype)], mode)


# ----------------------------------------------------------- moe_token_unpermute_with_routing_map_grad (A3)
def routing_map_nonpad(rng, t: int, e: int, k: int) -> np.ndarray:
    m = np.zeros((t, e), np.bool_)
    for i in range(t):
        m[i, rng.choice(e, size=k, replace=False)] = True
    return m


def sorted_indices_nonpad(routing_map: np.ndarray) -> np.ndarray:
    """Megatron's permute (spec §2.1, non-pad): slot t*K + k (token t's k-th expert) -> its permuted row,
    the rows laid out expert by expert."""
    expert_major = [t for e in range(routing_map.shape[1]) for t in range(routing_map.shape[0]) if routing_map[t, e]]
    return np.argsort(np.array(expert_major), kind="stable").astype(np.int32)


def pad_indices(routing_map: np.ndarray, capacity: int):
    """Pad mode (spec §2.1/2.2): each expert keeps `capacity` tokens, routed ones first. Returns out_index
    (the permuted row of each slot in token order) and permute_token_id (that slot's token)."""
    sorted_indices = []
    for e in range(routing_map.shape[1]):
        sorted_indices += list(np.argsort(-routing_map[:, e].astype(np.int64), kind="stable")[:capacity])
    sorted_indices = np.array(sorted_indices)
    out_index = np.argsort(sorted_indices, kind="stable").astype(np.int32)
    return out_index, sorted_indices[out_index].astype(np.int32)


def unpermute_grad(g, out_index, token_id, routing_map, permuted, probs, pad: bool, experts: int):
    """float64 (permuted_tokens_grad [R, H], probs_grad [T, E] or None)."""
    t, h = g.shape
    r = out_index.size
    dy = np.zeros((r, h))
    dp = None if probs is None else np.zeros((t, experts))
    if pad:
        cap = r // experts
        for i in range(r):
            tok, row = token_id[i], out_index[i]
            if row < 0:
                continue
            e = row // cap
            dy[row] = g[tok] if probs is None else g[tok] * probs[tok, e]
            if probs is not None:
                dp[tok, e] = permuted[row] @ g[tok]
        return dy, dp
    k = r // t
    for i in range(t):
        chosen = np.flatnonzero(routing_map[i]) if routing_map is not None else [None] * k
        for j in range(k):
            row = out_index[i * k + j]
            if row < 0:
                continue
            if probs is None:
                dy[row] = g[i]
            else:
                dy[row] = g[i] * probs[i, chosen[j]]
                dp[i, chosen[j]] = permuted[row] @ g[i]
    return dy, dp


def unpermute_grad_call(rng, dtype: str, pad: bool, with_probs: bool, t=6, e=4, k=2, h=16, capacity=3,
                        drop_slots=0) -> Call:
    if pad:
        routing_map = rng.random((t, e)) < 0.4
        out_index, token_id = pad_indices(routing_map, capacity)
    else:
        routing_map = routing_map_nonpad(rng, t, e, k)
        out_index = sorted_indices_nonpad(routing_map)
        out_index[rng.choice(out_index.size, size=drop_slots, replace=False)] = -1  # slots dropped: -1
        token_id = out_index.copy()
    r = out_index.size
    g = small_values(rng, (t, h), dtype)
    inputs, with_ = [g, out_index, token_id], []
    permuted = probs = None
    if with_probs:
        permuted = small_values(rng, (r, h), dtype)
        probs = quarters(rng, (t, e), dtype)
        inputs += [routing_map, permuted, probs]
        with_ = ["routing_map", "permuted_tokens", "probs"]
    dy, dp = unpermute_grad(as_float(g, dtype), out_index, token_id, routing_map,
                            None if permuted is None else as_float(permuted, dtype),
                            None if probs is None else as_float(probs, dtype), pad, e)
    expected = [round_to(dy, dtype)] + ([round_to(dp, dtype)] if with_probs else [])
    label = ("pad" if pad else "nonpad") + ("_probs" if with_probs else "")
    return Call("moe_token_unpermute_with_routing_map_grad", dtype, {"H": h, "E": e}, {"drop_and_pad": pad},
                with_, inputs, expected, label)


# -------------------------------------------------------------------------------------- moe_unpermute (C2)
def paddle_permute(rng, t: int, e: int, k: int, alignment: int):
    """Paddle's moe_permute (spec §4.1) on a random top-K routing with some -1 slots: the expert-wise rowmap
    [T, E] (-1: not routed), the routemap [T, K], and the unzipped row count (expert blocks padded)."""
    routemap = np.full((t, k), -1, np.int32)
    for i in range(t):
        chosen = rng.choice(e, size=k, replace=False)
        keep = rng.random(k) < 0.8
        routemap[i, keep] = chosen[keep]
    counts = np.array([(routemap == x).sum() for x in range(e)])
    padded = (counts + alignment - 1) // alignment * alignment
    offset = np.concatenate([[0], np.cumsum(padded)[:-1]])
    rowmap = np.full((t, e), -1, np.int32)
    used = np.zeros(e, np.int64)
    for i in range(t):
        for j in range(k):
            x = routemap[i, j]
            if x >= 0:
                rowmap[i, x] = offset[x] + used[x]
                used[x] += 1
    return rowmap, routemap, int(padded.sum())


def moe_unpermute(xu, rowmap, routemap, probs, weighted: bool, single_row_copy: bool):
    """float64 (hidden_states [T, H], expert_prob_topk [T, K])."""
    t, e = rowmap.shape
    out = np.zeros((t, xu.shape[1]))
    for i in range(t):
        rows = [rowmap[i, x] for x in range(e) if rowmap[i, x] >= 0]
        if single_row_copy and len(rows) == 1:
            out[i] = xu[rows[0]]
            continue
        for r in rows:
            out[i] += xu[r] * probs[r] if weighted else xu[r]
    topk = np.zeros(routemap.shape)
    for i in range(t):
        for j in range(routemap.shape[1]):
            x = routemap[i, j]
            r = rowmap[i, x] if x >= 0 else -1
            topk[i, j] = probs[r] if r >= 0 else 0.0
    return out, topk


def moe_unpermute_call(rng, dtype: str, weighted: bool, mix: bool = True, single_row_copy: bool = False, t=6, e=4,
                       k=2, h=16, alignment=2) -> Call:
    rowmap, routemap, r = paddle_permute(rng, t, e, k, alignment)
    xu = small_values(rng, (r, h), dtype)
    probs = quarters(rng, (r,), "f32")
    out, topk = moe_unpermute(as_float(xu, dtype), rowmap, routemap, probs.astype(np.float64), weighted,
                              single_row_copy)
    label = ("weighted" if weighted else "sum") + ("" if mix else "_nomix") + ("_quirk" if single_row_copy else "")
    return Call("moe_unpermute", dtype, {"H": h, "E": e, "K": k},
                {"using_weighted_combine": weighted, "using_mix_precision": mix,
                 "paddle_single_row_copy": single_row_copy, "total_zipped_tokens": t},
                [], [xu, rowmap, routemap, probs], [round_to(out, dtype), topk.astype(np.float32)], label)
