"""Conversions: bitcast, integer extension/truncation, float<->float, float<->int,
pointer<->int, pack/unpack.

* ``ftof`` rounds once with the op's mode; f8/f4 targets saturate to +-MAX (inf too),
  e4m3 and e5m2 keep NaN (the hardware running NVIDIA's code, not the spec's table: see
  ``floats.E4M3_NAN``), f4 turns it into +MAX; f8E8M0FNU: see ``floats.to_e8m0``.
* ``ftoi`` truncates toward zero and saturates to the target range, NaN -> 0 (what PTX's
  ``cvt.rzi`` does; out-of-range input is undefined in the spec unless ``saturating``).
* ``itof`` rounds to nearest (or the given mode); integers beyond 2^53 round exactly.  To
  the 8- and 4-bit formats it rounds twice, as NVIDIA's code does (see ``_itof_narrow``).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..ir import types as T
from ..tile import ops_core as C
from ..tile.enums import Signedness
from . import floats as F
from .core import impl
from .errors import InterpError
from .values import (UINT_OF_BITS, bitcast_array, bits_of, dtype_of, from_int, scalar_of,
                     to_signed, to_unsigned)


def _result_elem(op) -> T.ScalarType:
    e = scalar_of(op.results[0].type)
    assert isinstance(e, T.ScalarType)
    return e


@impl(C.BitcastOp)
def _bitcast(frame, op, x):
    return (bitcast_array(x, dtype_of(op.results[0].type)),)


@impl(C.ExtIOp)
def _exti(frame, op, x):
    src_bits, dst_bits = bits_of(op.from_.type), _result_elem(op).bitwidth
    if op.signedness is Signedness.SIGNED:
        return (from_int(to_signed(x, src_bits), dst_bits),)
    return (from_int(to_unsigned(x), dst_bits),)


@impl(C.TruncIOp)
def _trunci(frame, op, x):
    from .intarith import check_overflow
    bits = _result_elem(op).bitwidth
    check_overflow(frame, op, lambda v: v, [x], bits, operand_bits=bits_of(op.from_.type))
    return (from_int(to_unsigned(x), bits),)


@impl(C.FToFOp)
def _ftof(frame, op, x):
    dst = _result_elem(op).name
    return (F.to_format(F.to_float64(x), dst, op.rounding_mode),)


@impl(C.FToIOp)
def _ftoi(frame, op, x):
    bits = _result_elem(op).bitwidth
    t = np.trunc(F.to_float64(x))
    nan = np.isnan(t)
    t = np.where(nan, 0.0, t)
    if op.signedness is Signedness.SIGNED:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        inside = np.clip(t, -2.0 ** 63, 9223372036854774784.0).astype(np.int64)
        r = np.where(t >= 2.0 ** (bits - 1), np.int64(hi),
                     np.where(t < -2.0 ** (bits - 1), np.int64(lo), inside))
        return (from_int(r, bits),)
    hi = (1 << bits) - 1
    inside = np.clip(t, 0.0, 18446744073709549568.0).astype(np.uint64)
    big = t >= 2.0 ** bits
    r = np.where(big, np.uint64(hi), np.where(t < 0, np.uint64(0), inside))
    return (from_int(r, bits),)


@impl(C.IToFOp)
def _itof(frame, op, x):
    bits = bits_of(op.from_.type)
    dst = _result_elem(op).name
    v = to_signed(x, bits) if op.signedness is Signedness.SIGNED else to_unsigned(x)
    if dst in _ITOF_VIA:
        return (_itof_narrow(v, dst),)
    if dst == "f8E8M0FNU":
        return (F.to_format(v.astype(np.float64), dst, op.rounding_mode),)
    fmt = F.FORMATS[dst]
    return (_round_integers(v, fmt, op.rounding_mode).astype(fmt.dtype),)


def _round_integers(v: np.ndarray, fmt: F.FloatFormat, mode) -> np.ndarray:
    """Integers ``v`` rounded once to ``fmt`` (float64 values); beyond 2^53, where float64
    itself would round, exactly through ``Fraction``."""
    f = v.astype(np.float64)
    out = F.round_f64(f, fmt, mode)
    big = np.abs(f) >= 2.0 ** 53
    for i in zip(*np.nonzero(big)) if big.ndim else ([()] if big else []):
        out[i] = F.round_fraction(Fraction(int(v[i])), fmt, mode)
    return out


#: The float an integer goes through on its way to an 8- or 4-bit format in NVIDIA's code.
_ITOF_VIA = {"f8E4M3FN": "f16", "f4E2M1FN": "f16", "f8E5M2": "f32", "fnv8E5M3FNU": "f32"}


def _itof_narrow(v: np.ndarray, dst: str) -> np.ndarray:
    """Integers as e4m3, e5m2, e2m1 or UE5M3, as NVIDIA's tileiras 13.5 compiles ``itof``
    (only ``nearest_even`` verifies): ``cvt.rn.f16.{s,u}N`` for e4m3 and e2m1,
    ``cvt.rn.f32.{s,u}N`` for e5m2 and UE5M3, then the format's ``cvt.rn.satfinite``.  The
    hardware running that code is the reference, so the interpreter rounds twice too, rather
    than once as the spec's conversion rule reads.  The two agree on every integer: the
    first rounding is exact up to 2048 (f16) or 2^24 (f32), beyond each format's largest
    value (448, 6; 57344, 114688), and what lies beyond saturates to +-MAX either way,
    f16's infinity included (satfinite)."""
    return F.to_format(_round_integers(v, F.FORMATS[_ITOF_VIA[dst]], None), dst)


@impl(C.IntToPtrOp)
def _int_to_ptr(frame, op, x):
    return (to_unsigned(x),)


@impl(C.PtrToIntOp)
def _ptr_to_int(frame, op, x):
    return (from_int(np.asarray(x, dtype=np.uint64), _result_elem(op).bitwidth),)


@impl(C.PtrToPtrOp)
def _ptr_to_ptr(frame, op, x):
    return (np.asarray(x, dtype=np.uint64).copy(),)


def _to_bytes(x: np.ndarray, elem: T.ScalarType) -> np.ndarray:
    if elem.bitwidth == 4:
        nib = bitcast_array(x, np.dtype(np.uint8)) & np.uint8(0xF) if elem.is_float else \
            np.asarray(x, np.uint8) & np.uint8(0xF)
        return (nib[0::2] | (nib[1::2] << np.uint8(4))).astype(np.uint8)
    if elem.bitwidth < 8:
        raise InterpError(f"pack of {elem} is not supported")
    return np.ascontiguousarray(x).view(np.uint8).copy()


def _from_bytes(b: np.ndarray, elem: T.ScalarType) -> np.ndarray:
    b = np.ascontiguousarray(b, dtype=np.uint8)
    if elem.bitwidth == 4:
        nib = np.stack([b & np.uint8(0xF), b >> np.uint8(4)], axis=-1).reshape(-1)
        return nib.view(dtype_of(elem)) if elem.is_float else nib
    width = 4 if elem.name == "tf32" else elem.bitwidth // 8
    raw = b.view(UINT_OF_BITS[width * 8])
    return raw.view(dtype_of(elem)) if elem.is_float else raw.astype(dtype_of(elem))


@impl(C.PackOp)
def _pack(frame, op, x):
    return (_to_bytes(x, scalar_of(op.source.type)),)


@impl(C.UnpackOp)
def _unpack(frame, op, x):
    return (_from_bytes(x, _result_elem(op)),)
