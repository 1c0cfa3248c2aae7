"""Every built-in op, in a mode or two, from numpy and from torch: the same bits as the numpy reference
(reference.py) on fresh random data, outputs of the inputs' array type."""
import numpy as np
import pytest
import torch

import moec
import reference as ref
from util import as_list, assert_bits_equal, to_numpy, to_torch

CASES = [
    (ref.init_routing_v2_grad_call, {"mode": "dropless"}, ("f32", "bf16", "f16")),
    (ref.init_routing_v2_grad_call, {"mode": "active"}, ("f32", "bf16")),
    (ref.init_routing_v2_grad_call, {"mode": "droppad"}, ("f32", "bf16")),
    (ref.unpermute_grad_call, {"pad": False, "with_probs": False, "drop_slots": 2}, ("f32",)),
    (ref.unpermute_grad_call, {"pad": False, "with_probs": True}, ("f32", "bf16")),
    (ref.unpermute_grad_call, {"pad": True, "with_probs": False}, ("f32",)),
    (ref.unpermute_grad_call, {"pad": True, "with_probs": True}, ("f32", "bf16")),
    (ref.moe_unpermute_call, {"weighted": False}, ("f32",)),
    (ref.moe_unpermute_call, {"weighted": True}, ("f32", "bf16")),
    (ref.moe_unpermute_call, {"weighted": True, "mix": False, "single_row_copy": True}, ("bf16",)),
]
PARAMS = [pytest.param(make, kwargs, dtype,
                       id="-".join([make.__name__[:-5], *(f"{k}={v}" for k, v in kwargs.items()), dtype]))
          for make, kwargs, dtypes in CASES for dtype in dtypes]


def kernel_for(call: ref.Call) -> moec.Kernel:
    return moec.get(call.op, call.dtype, dims=call.dims, attrs=call.attrs, with_=call.with_, target="cpu")


@pytest.mark.parametrize("make,kwargs,dtype", PARAMS)
def test_numpy_and_torch_give_the_reference(make, kwargs, dtype, rng):
    call = make(rng, dtype, **kwargs)
    kernel = kernel_for(call)
    assert len(kernel.outputs) == len(call.expected)

    from_numpy = as_list(kernel(*call.inputs))
    for name, got, expected in zip(kernel.outputs, from_numpy, call.expected):
        assert isinstance(got, np.ndarray), name
        assert_bits_equal(got, expected, f"numpy {call.op} {call.label} {name}")

    from_torch = as_list(kernel(*[to_torch(x, dtype) for x in call.inputs]))
    for name, got, expected in zip(kernel.outputs, from_torch, call.expected):
        assert isinstance(got, torch.Tensor), name
        assert_bits_equal(to_numpy(got), expected, f"torch {call.op} {call.label} {name}")


def test_a_new_token_count_reuses_the_kernel(rng):
    """Token counts are runtime dims: another batch size runs on the same kernel object."""
    small = ref.init_routing_v2_grad_call(rng, "f32", "dropless", n=3)
    large = ref.init_routing_v2_grad_call(rng, "f32", "dropless", n=40)
    kernel = kernel_for(small)
    for call in (small, large, small):
        assert_bits_equal(kernel(*call.inputs), call.expected[0], f"n={call.inputs[1].size // 2}")


def test_the_default_target_is_cuda_if_a_device_is_found_else_the_cpu(rng):
    call = ref.init_routing_v2_grad_call(rng, "f32", "dropless")
    kernel = moec.get(call.op, call.dtype, dims=call.dims, attrs=call.attrs)
    if moec.cuda_available():
        assert kernel.target.startswith("ptx-sm_")
    else:
        assert kernel.target == "cpu"
        assert_bits_equal(kernel(*call.inputs), call.expected[0], "default target")


def test_the_ascend_simulator_runs_numpy_arrays(rng):
    """target="ascend-sim": the tiled Ascend kernels, core by core on the UB simulator, on host arrays."""
    call = ref.init_routing_v2_grad_call(rng, "f32", "dropless")
    kernel = moec.get(call.op, call.dtype, dims=call.dims, attrs=call.attrs, target="ascend-sim", chip="910b")
    assert kernel.target == "ascend-sim-910b"
    assert_bits_equal(kernel(*call.inputs), call.expected[0], "ascend-sim")


def test_bf16_helpers_round_to_nearest_even():
    values = np.array([1.0, 1.00390625, 1.01171875, -2.5, 0.0, -0.0, np.inf, 3.0e38], np.float32)
    bits = moec.to_bf16(values)
    assert bits.dtype == np.uint16
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1); 1 + 3 * 2^-8: to even (1 + 2^-6).
    assert moec.from_bf16(bits)[:7].tolist() == [1.0, 1.0, 1.015625, -2.5, 0.0, -0.0, np.inf]
    assert np.signbit(moec.from_bf16(bits)[5])
    assert np.isnan(moec.from_bf16(moec.to_bf16(np.array([np.nan], np.float32))))[0]
    torch_bits = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert (bits == torch_bits).all()  # torch's rounding agrees
