"""A DLPack producer written with ctypes: a third array library, that can also claim its host memory is on a
CUDA device, any one (to check that moec refuses a tensor on the wrong device without a GPU at hand)."""
import ctypes

import numpy as np


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.CFUNCTYPE(None, ctypes.c_void_p))]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

_CODES = {"f": 2, "i": 0, "u": 1}


class Array:
    """Exports a contiguous numpy array's memory through DLPack as device `device_type` (1: CPU, 2: CUDA)
    number `device_id`. The structures live as long as this object; the capsules it makes have no destructor."""

    def __init__(self, array: np.ndarray, device_type: int = 1, device_id: int = 0):
        self.array = np.ascontiguousarray(array)
        self.device_type = device_type
        self.device_id = device_id
        self.exports = 0
        self._shape = (ctypes.c_int64 * self.array.ndim)(*self.array.shape)
        self._managed = []

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)

    def __dlpack__(self, stream=None):
        self.exports += 1
        a = self.array
        m = DLManagedTensor()
        m.dl_tensor.data = a.ctypes.data
        m.dl_tensor.device = DLDevice(self.device_type, self.device_id)
        m.dl_tensor.ndim = a.ndim
        m.dl_tensor.dtype = DLDataType(_CODES[a.dtype.kind], a.dtype.itemsize * 8, 1)
        m.dl_tensor.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        m.dl_tensor.strides = None
        m.dl_tensor.byte_offset = 0
        self._managed.append(m)
        return _capsule_new(ctypes.addressof(m), b"dltensor", None)
