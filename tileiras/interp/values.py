"""How Tile IR values are represented in the interpreter.

* A tile is a numpy array of its shape (rank 0 = a 0-d array).
  - integers (signless) are held zero-extended in unsigned containers:
    i1 -> ``bool``, i4/i8 -> ``uint8``, i16 -> ``uint16``, i32 -> ``uint32``, i64 -> ``uint64``;
    signed meaning is applied by each op through ``to_signed``.
  - floats use numpy / ml_dtypes: f16, f32, f64, bf16 (``ml_dtypes.bfloat16``), f8E4M3FN,
    f8E5M2, f8E8M0FNU, f4E2M1FN; tf32 is held in ``float32`` with values rounded to tf32;
    fnv8E5M3FNU as its bit patterns (``FNV8E5M3FNU``).
  - pointers are ``uint64`` byte addresses into ``memory.Memory``.
* A token is ``TOKEN_VALUE``; views are the dataclasses of ``views.py``.
* 4-bit elements (f4E2M1FN, i4) are packed in memory two to a byte, the lower-indexed element
  in the low nibble (spec 5.2.2).  Their memory addresses are counted in *nibbles*
  (``2 * byte address + 1`` for the high nibble; see ``memory.Memory``).  A kernel argument
  array of a 4-bit numpy dtype (``ml_dtypes.float4_e2m1fn``, ``int4``, ``uint4``: one element a
  byte in numpy) is mapped packed (``pack_nibbles``) and unpacked back after the launch.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ..ir import attrs as A
from ..ir import types as T
from .errors import InterpError

TOKEN_VALUE = "token"

_INT_CONTAINERS = {1: np.dtype(np.bool_), 4: np.dtype(np.uint8), 8: np.dtype(np.uint8),
                   16: np.dtype(np.uint16), 32: np.dtype(np.uint32), 64: np.dtype(np.uint64)}

#: fnv8E5M3FNU (NVIDIA's UE5M3 scale format) has no numpy or ml_dtypes type: its elements are
#: held as their bit patterns in a one-byte structured dtype of their own, which numpy refuses to
#: compute on and which ``floats.to_float64`` recognizes and decodes (``astype`` gives codes).
FNV8E5M3FNU = np.dtype([("fnv8E5M3FNU", np.uint8)])

FLOAT_DTYPES: dict[str, np.dtype] = {
    "f16": np.dtype(np.float16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
    "tf32": np.dtype(np.float32), "bf16": np.dtype(ml_dtypes.bfloat16),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn), "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "f8E8M0FNU": np.dtype(ml_dtypes.float8_e8m0fnu), "f4E2M1FN": np.dtype(ml_dtypes.float4_e2m1fn),
    "fnv8E5M3FNU": FNV8E5M3FNU,
}

#: Unsigned integer dtype of each storage width in bits (for bit reinterpretation).
UINT_OF_BITS = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32),
                64: np.dtype(np.uint64)}


def scalar_of(t: T.Type) -> T.Type:
    """The element type of a tile type (the type itself otherwise)."""
    return t.element if isinstance(t, T.TileType) else t


def dtype_of(t: T.Type) -> np.dtype:
    """numpy dtype holding elements of type ``t`` (a tile, scalar or pointer type)."""
    e = scalar_of(t)
    if isinstance(e, T.PointerType):
        return np.dtype(np.uint64)
    if isinstance(e, T.ScalarType):
        if e.is_int:
            return _INT_CONTAINERS[e.bitwidth]
        if e.name in FLOAT_DTYPES:
            return FLOAT_DTYPES[e.name]
    raise InterpError(f"element type {e} is not supported by the interpreter")


def is_subbyte(e: T.Type) -> bool:
    """4-bit elements (f4E2M1FN, i4): two to a byte in memory."""
    e = scalar_of(e)
    return isinstance(e, T.ScalarType) and e.bitwidth == 4


def is_nibble_dtype(dt: np.dtype) -> bool:
    """numpy dtypes of 4-bit values (one a byte in numpy, packed two a byte in memory)."""
    return np.dtype(dt) in NIBBLE_DTYPES


NIBBLE_DTYPES = (np.dtype(ml_dtypes.float4_e2m1fn), np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4))


def pack_nibbles(x: np.ndarray) -> np.ndarray:
    """Elements of a 4-bit dtype (row-major) packed two to a byte, element ``2i`` in the low
    nibble of byte ``i`` (an odd count leaves the last high nibble zero)."""
    nib = np.ascontiguousarray(x).reshape(-1).view(np.uint8) & np.uint8(0xF)
    if nib.size % 2:
        nib = np.append(nib, np.uint8(0))
    return (nib[0::2] | (nib[1::2] << np.uint8(4))).astype(np.uint8)


def unpack_nibbles(packed: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Inverse of ``pack_nibbles``: ``shape`` elements of ``dtype`` from packed bytes."""
    b = np.asarray(packed, np.uint8).reshape(-1)
    nib = np.stack([b & np.uint8(0xF), b >> np.uint8(4)], axis=-1).reshape(-1)
    n = int(np.prod(shape, dtype=np.int64))
    return nib[:n].copy().view(dtype).reshape(shape)


def storage_bytes(e: T.Type) -> int:
    """Bytes one element of ``e`` occupies in memory (pointers: 8; i1: 1; tf32: 4)."""
    if isinstance(e, T.PointerType):
        return 8
    assert isinstance(e, T.ScalarType)
    if e.bitwidth < 8:
        if e.name == "i1":
            return 1
        raise InterpError(f"{e} elements take half a byte: their addresses are counted in nibbles")
    return 4 if e.name == "tf32" else e.bitwidth // 8


def is_int(t: T.Type) -> bool:
    e = scalar_of(t)
    return isinstance(e, T.ScalarType) and e.is_int


def bits_of(t: T.Type) -> int:
    e = scalar_of(t)
    assert isinstance(e, T.ScalarType)
    return e.bitwidth


def mask_of(bits: int) -> np.uint64:
    return np.uint64((1 << bits) - 1)


def to_unsigned(x: np.ndarray) -> np.ndarray:
    """An integer tile as ``uint64`` (its zero-extended value)."""
    return np.asarray(x).astype(np.uint64)


def to_signed(x: np.ndarray, bits: int) -> np.ndarray:
    """An integer tile of width ``bits`` as ``int64`` (its sign-extended value)."""
    u = np.asarray(x).astype(np.uint64)
    if bits == 64:
        return u.view(np.int64)
    shift = np.uint64(64 - bits)
    return (u << shift).view(np.int64) >> np.int64(64 - bits)


def from_int(x: Any, bits: int) -> np.ndarray:
    """Wrap integers (any numpy integer array or Python ints) to ``bits`` and store them in the
    container of that width."""
    arr = np.asarray(x)
    if arr.dtype == object:
        arr = np.vectorize(lambda v: int(v) & ((1 << 64) - 1), otypes=[np.uint64])(arr)
    elif arr.dtype.kind == "i":
        arr = arr.astype(np.int64).view(np.uint64)
    u = arr.astype(np.uint64) & mask_of(bits)
    return u.astype(_INT_CONTAINERS[bits])


def make_int(value: int, bits: int, shape: tuple[int, ...] = ()) -> np.ndarray:
    """A tile of ``shape`` filled with the Python int ``value`` wrapped to ``bits``."""
    v = np.uint64(value & ((1 << 64) - 1)) & mask_of(bits)
    return np.full(shape, v, dtype=np.uint64).astype(_INT_CONTAINERS[bits])


def decode_dense(attr: A.DenseElementsAttr, result_type: T.Type) -> np.ndarray:
    """The value of a dense constant (full or splat) as a tile of ``result_type``."""
    elem = scalar_of(result_type)
    shape = result_type.shape if isinstance(result_type, T.TileType) else ()
    assert isinstance(elem, T.ScalarType) and isinstance(attr.data, bytes)
    data = attr.data
    n = int(np.prod(shape, dtype=np.int64))
    if elem.bitwidth == 4:
        raw = np.frombuffer(data, dtype=np.uint8)
        if len(raw) * 2 == n:  # packed nibbles, lower index in the low bits
            raw = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(-1)
        raw = raw & np.uint8(0xF)
        values = raw.view(FLOAT_DTYPES[elem.name]) if elem.is_float else raw
    elif elem.name == "i1":
        values = np.array(A.i1_elements(data, n), dtype=np.uint8) != 0
    else:
        width = storage_bytes(elem)
        raw = np.frombuffer(data, dtype=UINT_OF_BITS[width * 8])
        values = raw.view(dtype_of(elem)) if elem.is_float else raw.astype(dtype_of(elem))
    if values.size == 1 and n != 1:
        return np.full(shape, values[0], dtype=values.dtype)
    return values.reshape(shape).copy()


def decode_scalar_attr(attr: A.Attribute, elem: T.Type) -> np.ndarray:
    """A 0-d tile from an ``IntegerAttr`` / ``FloatAttr`` (reduce and scan identities)."""
    if isinstance(attr, A.IntegerAttr):
        return make_int(attr.value, bits_of(attr.type))
    if isinstance(attr, A.FloatAttr):
        e = scalar_of(attr.type)
        assert isinstance(e, T.ScalarType)
        width = storage_bytes(e) * 8
        return np.array(attr.bits, dtype=UINT_OF_BITS[width]).view(dtype_of(e)).reshape(())
    if isinstance(attr, A.BoolAttr):
        return np.array(attr.value, dtype=np.bool_)
    raise InterpError(f"unsupported identity attribute {attr!r}")


def bitcast_array(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    """Reinterpret the bits of equal-width elements (handles the bool container of i1)."""
    x = np.array(x, copy=True, order="C")
    shape = x.shape
    if x.dtype == np.bool_:
        x = x.astype(np.uint8)
    if dst == np.bool_:
        return (x.view(np.uint8) != 0).reshape(shape)
    return x.view(dst).reshape(shape)
