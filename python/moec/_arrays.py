"""Array libraries as moec meets them: which library a call's inputs come from, how to allocate its outputs
with that library, the CUDA stream to run on, and bf16 for numpy (which has no bf16 type).

moec borrows every array through DLPack, so nothing here copies data. Two types need a zero-copy view first:
bool (torch 1.13 and numpy < 1.25 cannot export it; viewed as uint8, which moec reads as bool) and, for numpy,
bf16 (its bits, as uint16).
"""
from __future__ import annotations

import numpy as _np

# moec's element types in the libraries. numpy and cupy have no bf16: bf16 arrays hold its bits as uint16.
_NUMPY_TYPES = {"f32": "float32", "f16": "float16", "bf16": "uint16", "i32": "int32", "i8": "int8", "bool": "bool"}
_TORCH_TYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i32": "int32", "i8": "int8", "bool": "bool"}

_DL_CUDA, _DL_CUDA_MANAGED = 2, 13


def library_of(x) -> str:
    """"torch", "numpy", "cupy", or "other": the top-level module of the array's type."""
    root = type(x).__module__.split(".", 1)[0]
    return root if root in ("torch", "numpy", "cupy") else "other"


def on_cuda(x) -> bool:
    device = getattr(x, "__dlpack_device__", None)
    return device is not None and device()[0] in (_DL_CUDA, _DL_CUDA_MANAGED)


def exportable(x):
    """`x`, or a zero-copy view of it that DLPack can export: bool as uint8, a torch tensor detached."""
    library = library_of(x)
    if library == "torch":
        import torch

        if x.requires_grad:  # moec's kernels are not recorded by autograd; DLPack refuses such a tensor
            x = x.detach()
        return x.view(torch.uint8) if x.dtype == torch.bool else x
    if library in ("numpy", "cupy"):
        return x.view(_np.uint8) if x.dtype == _np.bool_ else x
    return x


def allocator(reference):
    """A function (name, dtype, shape) -> (array, its exportable view) that allocates outputs with the
    library and on the device of `reference`, the call's first input."""
    library = library_of(reference)
    if library == "torch":
        import torch

        def allocate_torch(name, dtype, shape):
            t = torch.empty(tuple(shape), dtype=getattr(torch, _TORCH_TYPES[dtype]), device=reference.device)
            return t, exportable(t)

        return allocate_torch
    if library == "cupy":
        import cupy

        def allocate_cupy(name, dtype, shape):
            with reference.device:
                a = cupy.empty(tuple(shape), dtype=_NUMPY_TYPES[dtype])
            return a, exportable(a)

        return allocate_cupy
    if library == "other" and hasattr(reference, "__array_namespace__"):
        xp = reference.__array_namespace__()  # the array API standard: jax, numpy.array_api, ...

        def allocate_xp(name, dtype, shape):
            if dtype == "bf16" and not hasattr(xp, "bfloat16"):
                raise TypeError(f"moec: output '{name}' is bf16, which {xp.__name__} cannot allocate: pass out=")
            a = xp.empty(tuple(shape), dtype=getattr(xp, _TORCH_TYPES[dtype]), device=reference.device)
            return a, a

        return allocate_xp
    if library == "other" and on_cuda(reference):
        raise TypeError(f"moec: cannot allocate outputs like a {type(reference).__name__} on a GPU: pass out=")

    def allocate_numpy(name, dtype, shape):
        a = _np.empty(tuple(shape), dtype=_NUMPY_TYPES[dtype])
        return a, exportable(a)

    return allocate_numpy


def stream_of(stream, reference) -> int:
    """The CUstream (as an int) to run on: `stream` as given (an int, a torch.cuda.Stream or a cupy Stream),
    else the current stream of the library of `reference` (torch's or cupy's), else 0, the legacy default."""
    if stream is not None:
        for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
            if hasattr(stream, attribute):
                return int(getattr(stream, attribute))
        return int(stream)
    library = library_of(reference)
    if library == "torch" and reference.is_cuda:
        import torch

        return int(torch.cuda.current_stream(reference.device).cuda_stream)
    if library == "cupy":
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    return 0


def to_bf16(a) -> _np.ndarray:
    """bf16 for numpy: the bits of `a` (any float array) rounded to bfloat16, to nearest even, as uint16. NaN
    stays NaN."""
    f = _np.ascontiguousarray(a, dtype=_np.float32)
    bits = f.view(_np.uint32).astype(_np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(_np.uint16)
    nan = _np.isnan(f)
    if nan.any():
        rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(_np.uint16)  # keep a NaN quiet, whatever rounding gives
    return rounded


def from_bf16(bits) -> _np.ndarray:
    """The float32 values of bf16 bits held as uint16 (exact: bf16 widens to float32 without rounding)."""
    u = _np.ascontiguousarray(bits)
    if u.dtype != _np.uint16:
        raise TypeError(f"from_bf16: expected uint16 bf16 bits, got {u.dtype}")
    return (u.astype(_np.uint32) << 16).view(_np.float32)
