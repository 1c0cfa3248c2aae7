"""No copies: moec reads the caller's input memory and writes out= arrays in place."""
import numpy as np
import pytest
import torch

import fake_dlpack
import moec
import reference as ref
from util import assert_bits_equal, to_numpy, to_torch


def pointer(x) -> int:
    return x.data_ptr() if isinstance(x, torch.Tensor) else x.__array_interface__["data"][0]


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_moec_sees_the_callers_memory(library):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    if library == "torch":
        a = torch.from_numpy(a)
    seen = moec.view(a)
    assert seen["data"] == pointer(a)
    assert seen["dtype"] == "f32" and seen["shape"] == (4, 6) and seen["device"] == "host"
    column = a[1:, 2:5]  # a view into the same memory, not contiguous
    seen = moec.view(column)
    assert seen["data"] == pointer(a) + (6 + 2) * 4
    assert seen["shape"] == (3, 3) and seen["strides"] == (6, 1)
    flags = np.array([True, False, True])
    if library == "torch":
        flags = torch.from_numpy(flags)
    seen = moec.view(flags)  # bool goes through a uint8 view of the same bytes
    assert seen["data"] == pointer(flags) and seen["dtype"] == "bool"


@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_out_arrays_are_written_in_place(library, dtype, rng):
    call = ref.unpermute_grad_call(rng, dtype, pad=False, with_probs=True)
    kernel = moec.get(call.op, dtype, dims=call.dims, attrs=call.attrs, with_=call.with_, target="cpu")
    inputs = call.inputs
    out = [np.full(e.shape, 0x7FC0 if dtype == "bf16" else np.nan, e.dtype) for e in call.expected]
    if library == "torch":
        inputs = [to_torch(x, dtype) for x in inputs]
        out = [to_torch(o, dtype) for o in out]
    before = [pointer(o) for o in out]
    result = kernel(*inputs, out=out)
    assert result is out
    assert [pointer(o) for o in out] == before
    for got, expected in zip(out, call.expected):
        assert_bits_equal(to_numpy(got) if library == "torch" else got, expected)


def test_a_single_out_array(rng):
    call = ref.init_routing_v2_grad_call(rng, "f32", "dropless")
    kernel = moec.get(call.op, "f32", dims=call.dims, attrs=call.attrs, target="cpu")
    out = np.empty_like(call.expected[0])
    assert kernel(*call.inputs, out=out) is out
    assert_bits_equal(out, call.expected[0])


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_an_out_array_that_aliases_an_input_is_refused(library, rng):
    """The runtime refuses an output that shares memory with an input: it could only know if it got the
    caller's input pointers, not copies."""
    call = ref.init_routing_v2_grad_call(rng, "f32", "dropless")
    grad, idx = call.inputs
    if library == "torch":
        grad, idx = to_torch(grad), to_torch(idx)
    kernel = moec.get(call.op, "f32", dims=call.dims, attrs=call.attrs, target="cpu")
    n = call.expected[0].shape[0]
    with pytest.raises(moec.ArgumentError, match=r"output 'grad_x' overlaps input 'grad_expanded_x'"):
        kernel(grad, idx, out=grad[:n])


def test_a_third_dlpack_library(rng):
    """Any DLPack producer: inputs borrowed from it (the capsule taken once per call), outputs as numpy."""
    call = ref.init_routing_v2_grad_call(rng, "f32", "dropless")
    kernel = moec.get(call.op, "f32", dims=call.dims, attrs=call.attrs, target="cpu")
    grad, idx = (fake_dlpack.Array(x) for x in call.inputs)
    got = kernel(grad, idx)
    assert isinstance(got, np.ndarray)
    assert_bits_equal(got, call.expected[0])
    assert grad.exports == 1 and idx.exports == 1
