"""Helpers of the moec Python tests: numpy <-> torch, bitwise comparison."""
import numpy as np


def to_torch(a: np.ndarray, dtype: str = None):
    """A torch tensor of its own with the values of numpy array `a`; `dtype` "bf16": `a` holds bf16 bits."""
    import torch

    if dtype == "bf16" and a.dtype == np.uint16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.array(a, copy=True))


def to_numpy(t) -> np.ndarray:
    """A torch tensor's values as numpy holds them (bf16: its bits, uint16)."""
    import torch

    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def assert_bits_equal(got: np.ndarray, expected: np.ndarray, what: str = ""):
    """Equal shapes, types and bits (so -0.0 is not 0.0, and NaNs compare)."""
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype}, expected {expected.dtype}"
    got_bits = got.view(np.dtype(f"u{got.itemsize}")) if got.dtype != np.bool_ else got
    expected_bits = expected.view(np.dtype(f"u{expected.itemsize}")) if expected.dtype != np.bool_ else expected
    mismatched = np.argwhere(got_bits != expected_bits)
    assert mismatched.size == 0, f"{what}: {len(mismatched)} elements differ, first at {tuple(mismatched[0])}: " \
                                 f"got {got[tuple(mismatched[0])]}, expected {expected[tuple(mismatched[0])]}"


def as_list(outputs):
    return list(outputs) if isinstance(outputs, tuple) else [outputs]
