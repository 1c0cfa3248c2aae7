"""moec: JIT-compiled Mixture-of-Experts token-routing kernels, called on numpy, torch or any DLPack array.

    import numpy as np, moec
    k = moec.get("moe_init_routing_v2_grad", dtype="f32", dims={"H": 64}, attrs={"top_k": 2}, target="cpu")
    grad_x = k(grad_expanded_x, expanded_row_idx)        # a numpy array, since the inputs are numpy arrays

- ``get`` compiles a specialization on first use and caches it in memory and on disk ($MOEC_CACHE_DIR), as
  the C++ ``moec::Runtime`` does; token counts are runtime arguments, so a new batch size never recompiles.
- A kernel takes its inputs through DLPack without copying them, checks every call (dtypes, shapes,
  ``require``s, index ranges) and returns outputs allocated with the inputs' library on their device
  (``out=`` writes into arrays of the caller's instead).
- Errors carry the runtime's messages: ``ArgumentError`` and ``DslError`` are ValueErrors (a bad call, a
  request the op does not allow, a bad .moe), ``CompileError`` is a RuntimeError; CUDA driver failures are
  RuntimeErrors. A call that fails its checks leaves its outputs untouched.
- bf16 and numpy: numpy has no bf16, so a numpy bf16 tensor is its bits in a uint16 array (``to_bf16`` makes
  them from floats, ``from_bf16`` reads them); a bf16 kernel takes uint16 arrays for its bf16 tensors and
  returns uint16 arrays. torch has bf16: ``torch.bfloat16`` tensors go in and come out as they are.
- bool tensors (a routing map) may be bool, uint8 or int8 arrays, 0 or 1.
- The GIL is released while a kernel compiles and while it runs. On CUDA a kernel runs on the caller's
  current stream (torch's or cupy's, from the inputs' library) unless ``stream=`` names one.

``list_ops``, ``emit`` and ``plan`` give what ``moec list``, ``moec emit`` and ``moec plan`` print.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Optional

from . import _arrays, _moec
from ._arrays import from_bf16, to_bf16
from ._moec import ArgumentError, CompileError, DslError

for _error in (ArgumentError, CompileError, DslError):
    _error.__module__ = __name__  # moec.ArgumentError, as users name them

__all__ = ["get", "Kernel", "list_ops", "signature", "emit", "plan", "Plan", "view", "cuda_available",
           "to_bf16", "from_bf16", "ArgumentError", "CompileError", "DslError"]


def _ints(values: Optional[Mapping[str, int]]) -> dict:
    return {name: int(value) for name, value in (values or {}).items()}  # bools are 0 and 1


class Kernel:
    """A compiled specialization of an op. Call it with the op's inputs in declaration order (the optional
    ones it was requested ``with_``): ``outputs = kernel(*inputs, out=None, stream=None)``.

    Returns the output when the call has one, else a tuple in declaration order. ``out``: the output array (or
    a sequence of them) to write instead. ``stream`` (CUDA): a CUstream as an int, a torch.cuda.Stream or a
    cupy Stream; default: the inputs' library's current stream.

    ``kernel.signature`` (and this object's ``__doc__``) is the op as ``moec list`` prints it.
    """

    def __init__(self, compiled: "_moec.Kernel"):
        self._kernel = compiled
        self.__doc__ = f"{compiled.op} ({compiled.dtype}, {compiled.target}): kernel(" + \
            ", ".join(compiled.inputs) + ") -> " + ", ".join(compiled.outputs) + "\n\n" + compiled.signature

    op = property(lambda self: self._kernel.op, doc="the op's name or .moe path, as requested")
    dtype = property(lambda self: self._kernel.dtype, doc="the op's element type T: 'f32', 'bf16', 'f16'")
    target = property(lambda self: self._kernel.target, doc="'cpu', 'ptx-sm_90', 'ascend-sim-910b' ...")
    inputs = property(lambda self: self._kernel.inputs, doc="the inputs a call takes, in order")
    outputs = property(lambda self: self._kernel.outputs, doc="the outputs a call returns, in order")
    dtypes = property(lambda self: self._kernel.dtypes, doc="each tensor's element type, by name")
    statics = property(lambda self: self._kernel.statics, doc="the static dims and attributes compiled in")
    attrs = property(lambda self: self._kernel.attrs, doc="the runtime attributes each call gets")
    signature = property(lambda self: self._kernel.signature, doc="the op as `moec list` prints it")

    def __call__(self, *inputs, out=None, stream=None):
        if not inputs:
            raise ArgumentError(f"{self.op}: expected {len(self.inputs)} inputs ({', '.join(self.inputs)}), got 0")
        reference = inputs[0]
        exportable = [_arrays.exportable(x) for x in inputs]
        on_gpu = self._kernel.on_gpu
        cu_stream = _arrays.stream_of(stream, reference) if on_gpu else 0
        # DLPack's stream argument: 1 names the legacy default stream (0 is not allowed).
        dlpack_stream = (cu_stream or 1) if on_gpu else None
        if out is not None:
            single = len(self.outputs) == 1 and not isinstance(out, (list, tuple))
            given = [out] if single else list(out)
            self._kernel.run(exportable, [_arrays.exportable(o) for o in given], cu_stream, dlpack_stream, None)
            return out
        results = self._kernel.run(exportable, None, cu_stream, dlpack_stream, _arrays.allocator(reference))
        return results[0] if len(results) == 1 else tuple(results)

    def __repr__(self):
        return f"<moec.Kernel {self.op} {self.dtype} on {self.target}: ({', '.join(self.inputs)}) -> " \
               f"({', '.join(self.outputs)})>"


def get(op: str, dtype: str = "f32", dims: Optional[Mapping[str, int]] = None,
        attrs: Optional[Mapping[str, int]] = None, with_: Iterable[str] = (), target: Optional[str] = None, *,
        arch: Optional[str] = None, chip: str = "910b", schedule: Optional[str] = None) -> Kernel:
    """The kernel of ``op`` (a built-in op's name or a .moe file) specialized for ``dtype``, the static
    ``dims``, the ``attrs`` (static ones compiled in, runtime ones passed to every call) and the optional
    inputs ``with_`` the calls will pass. Compiled on first use, then cached in memory and on disk.

    ``target``: "cpu", "cuda" (PTX for ``arch``, default the device's), "ascend-sim" (the tiled Ascend kernels
    for ``chip``, run on the UB simulator, host arrays); None: CUDA if a device is found, else the CPU.
    ``schedule``: a config as ``moec tune`` prints it ("vector=8,threads=1,rows=16,unroll=4"); None: the
    compiler's choice, or the tuned winner of the call's token bucket.

    Raises ArgumentError (a ValueError) for a request the op does not allow, DslError for a bad .moe,
    CompileError (a RuntimeError) when compiling fails. The built-in ops (``moec list``):

    """
    compiled = _moec.get(op, dtype, _ints(dims), _ints(attrs), list(with_), target or "", arch or "", chip,
                         schedule)
    return Kernel(compiled)


def list_ops() -> dict:
    """The built-in ops, by name: each as ``moec list`` prints it (signature, dims, attrs, tensors)."""
    return dict(_moec.list_ops())


def signature(op: str) -> str:
    """``op`` (a built-in op's name or a .moe file) as ``moec list`` prints it."""
    return _moec.signature(op)


def emit(op: str, stage: Optional[str] = None, target: str = "cpu", *, arch: str = "sm_90", chip: str = "910b",
         chip_file: Optional[str] = None, dtype: str = "f32", dims: Optional[Mapping[str, int]] = None,
         attrs: Optional[Mapping[str, int]] = None, with_: Iterable[str] = (), schedule: Optional[str] = None,
         dump_dir: Optional[str] = None) -> str:
    """The text of one stage of ``op`` compiled for ``target``, as ``moec emit`` prints it.

    ``stage``: ast, gen, moe, loops, llvm, ptx (target "ptx") or asm (target "cpu"); default the target's
    last. ``target``: "cpu", "ptx" (for ``arch``), "ptx-emu" or "ascend" (for ``chip`` or ``chip_file``; stages
    ast, gen, moe, loops). ``dims`` and ``attrs``: the static values (``--dim``, ``--attr``); ``with_``: the
    optional tensors (``--with``); ``schedule``: a config as ``moec tune`` prints it; ``dump_dir``: also write
    every stage there (``--dump-dir``). Errors name the command's option: ``ArgumentError: --dim: ...``.
    """
    return _moec.emit(op, stage, target, arch, chip, chip_file, dtype, _ints(dims), _ints(attrs), list(with_),
                      schedule, dump_dir)


class Plan:
    """An Ascend tiling plan (``moec plan``): ``table`` (what the command prints), ``json`` (the dict
    ``--json`` writes) and ``header`` (the C header of TilingData structs ``--header`` writes)."""

    def __init__(self, table: str, json_text: str, header: str):
        import json

        self.table, self.json_text, self.header = table, json_text, header
        self.json = json.loads(json_text)

    def __str__(self):
        return self.table

    def __repr__(self):
        return f"<moec.Plan {self.json.get('op', '')} on {self.json.get('chip', '')}>"


def plan(op: str, dtype: str = "f32", dims: Optional[Mapping[str, int]] = None,
         attrs: Optional[Mapping[str, int]] = None, with_: Iterable[str] = (), *, chip: str = "910b",
         chip_file: Optional[str] = None, live_rows: Optional[Mapping[str, int]] = None,
         config: Optional[str] = None) -> Plan:
    """The Ascend tiling plan of one call of ``op``, as ``moec plan --target ascend`` makes it. ``dims``: every
    dim the kernels use, runtime ones included (a plan depends on the call's shapes); ``live_rows``: per
    kernel, how many of its guarded rows do work; ``config``: the UB plan's knobs
    ("buffers=2,chunk=4096,rows=64"; default the tuned config of the call's tokens, else the compiler's)."""
    return Plan(*_moec.plan(op, chip, chip_file, dtype, _ints(dims), _ints(attrs), list(with_),
                            _ints(live_rows), config))


def view(x) -> dict:
    """What moec sees of an array through DLPack: its data pointer, dtype, shape, strides (None: row-major)
    and device ("host" or "cuda"). No copy is made. A uint16 array reads as bf16 bits."""
    return _moec.view(_arrays.exportable(x))


def cuda_available() -> bool:
    """Whether a CUDA driver and device were found (the default target is then CUDA)."""
    return _moec.cuda_available()


def _ops_text() -> str:
    try:
        return "\n\n".join("    " + text.replace("\n", "\n    ") for text in _moec.list_ops().values())
    except Exception:  # the docstring is a convenience; an error belongs to the call that needs the ops
        return ""


get.__doc__ += _ops_text() + "\n"
