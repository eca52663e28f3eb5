"""Known-answer tests of the interpreter for tricky Tile IR semantics: rounding modes,
flush-to-zero, fp8 saturation and NaN, float->int saturation, signed vs unsigned ops,
integer wrap-around, NaN handling of min/max, strided and gather/scatter views, printf."""
from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

from tileiras.interp import cutile_args, run  # noqa: E402
from tileiras.interp.testing import array, export, scalar  # noqa: E402

RM = ct.RoundingMode
F32 = np.float32


def f32_bits(x) -> int:
    return int(np.asarray(x, F32).view(np.uint32))


def f32_round(value: Fraction, mode: str) -> np.float32:
    """Reference directed rounding of an exact rational to f32 (normal range only)."""
    lo = np.float32(float(value))          # within one ulp of value
    while Fraction(float(lo)) > value:
        lo = np.nextafter(lo, F32(-np.inf))
    while Fraction(float(np.nextafter(lo, F32(np.inf)))) <= value:
        lo = np.nextafter(lo, F32(np.inf))
    hi = lo if Fraction(float(lo)) == value else np.nextafter(lo, F32(np.inf))
    if mode == "up":
        return hi
    if mode == "down":
        return lo
    return lo if value >= 0 else hi       # toward zero


# --- rounding modes -------------------------------------------------------------------

@ct.kernel
def rounding_ops(x, y, out):
    a = ct.load(x, index=(0,), shape=(8,))
    b = ct.load(y, index=(0,), shape=(8,))
    ct.store(out, index=(0, 0), tile=ct.reshape(ct.add(a, b, rounding_mode=RM.RZ), (1, 8)))
    ct.store(out, index=(1, 0), tile=ct.reshape(ct.add(a, b, rounding_mode=RM.RP), (1, 8)))
    ct.store(out, index=(2, 0), tile=ct.reshape(ct.add(a, b, rounding_mode=RM.RM), (1, 8)))
    ct.store(out, index=(3, 0), tile=ct.reshape(ct.truediv(a, b, rounding_mode=RM.RZ), (1, 8)))
    ct.store(out, index=(4, 0), tile=ct.reshape(ct.truediv(a, b, rounding_mode=RM.RP), (1, 8)))
    ct.store(out, index=(5, 0), tile=ct.reshape(ct.mul(a, b, rounding_mode=RM.RM), (1, 8)))
    ct.store(out, index=(6, 0), tile=ct.reshape(ct.sqrt(a, rounding_mode=RM.RZ), (1, 8)))
    ct.store(out, index=(7, 0), tile=ct.reshape(ct.sqrt(a, rounding_mode=RM.RP), (1, 8)))


def test_float_rounding_modes_f32():
    data = export(rounding_ops, array(ct.float32), array(ct.float32), array(ct.float32, 2))
    x = np.array([1.0, -1.0, 2.0, 1.0, 3.0, 10.0, 0.1, 7.0], F32)
    y = np.array([2**-30, -2**-30, 3.0, 3.0, 7.0, 0.3, 0.7, -2**-25], F32)
    out = np.zeros((8, 8), F32)
    run(data, None, 1, cutile_args(x, y, out))
    fx, fy = [Fraction(float(v)) for v in x], [Fraction(float(v)) for v in y]
    for row, (fn, mode) in enumerate([(lambda a, b: a + b, "zero"), (lambda a, b: a + b, "up"),
                                      (lambda a, b: a + b, "down"), (lambda a, b: a / b, "zero"),
                                      (lambda a, b: a / b, "up"), (lambda a, b: a * b, "down")]):
        expect = [f32_round(fn(a, b), mode) for a, b in zip(fx, fy)]
        assert [f32_bits(v) for v in out[row]] == [f32_bits(v) for v in expect], row
    # sqrt: the exact root lies strictly between the RZ and RP results unless it is exact
    for v, rz, rp in zip(x, out[6], out[7]):
        if v < 0:
            assert np.isnan(rz) and np.isnan(rp)
            continue
        exact = Fraction(float(v))
        assert Fraction(float(rz)) ** 2 <= exact <= Fraction(float(rp)) ** 2
        assert rp == rz or np.nextafter(rz, F32(np.inf)) == rp
    assert out[0, 0] == 1.0 and out[1, 0] == np.nextafter(F32(1), F32(2)) and out[2, 0] == 1.0


@ct.kernel
def ftz_ops(x, y, out):
    a = ct.load(x, index=(0,), shape=(4,))
    b = ct.load(y, index=(0,), shape=(4,))
    ct.store(out, index=(0, 0), tile=ct.reshape(ct.mul(a, b, flush_to_zero=True), (1, 4)))
    ct.store(out, index=(1, 0), tile=ct.reshape(ct.mul(a, b), (1, 4)))


def test_flush_to_zero():
    data = export(ftz_ops, array(ct.float32), array(ct.float32), array(ct.float32, 2))
    tiny = F32(2**-140)                                  # subnormal input
    x = np.array([tiny, 2**-70, -(2**-70), 3.0], F32)
    y = np.array([2.0, 2**-60, 2**-60, 2.0], F32)     # 2^-130 results are subnormal
    out = np.zeros((2, 4), F32)
    run(data, None, 1, cutile_args(x, y, out))
    np.testing.assert_array_equal(out[0], [0.0, 0.0, -0.0, 6.0])
    assert np.signbit(out[0, 2]) and not np.signbit(out[0, 1])
    np.testing.assert_array_equal(out[1], [F32(2**-139), F32(2**-130), -F32(2**-130), 6.0])


# --- conversions ----------------------------------------------------------------------

@ct.kernel
def to_fp8(x, o1, o2):
    t = ct.load(x, index=(0,), shape=(16,))
    ct.store(o1, index=(0,), tile=ct.astype(t, ct.float8_e4m3fn))
    ct.store(o2, index=(0,), tile=ct.astype(t, ct.float8_e5m2))


def test_fp8_saturation_and_nan():
    data = export(to_fp8, array(ct.float32), array(ct.float8_e4m3fn), array(ct.float8_e5m2))
    x = np.array([500, -1e6, np.inf, -np.inf, np.nan, 0.3, 448, 464, 470, 1e-9, -0.0, 1.0,
                  57344, 61440, 65536, 2.0**-9], F32)
    o1 = np.zeros(16, ml_dtypes.float8_e4m3fn)
    o2 = np.zeros(16, ml_dtypes.float8_e5m2)
    run(data, None, 1, cutile_args(x, o1, o2))
    e4 = o1.astype(np.float64)
    np.testing.assert_array_equal(e4[:4], [448, -448, 448, -448])        # saturate, inf too
    assert np.isnan(e4[4])               # NaN stays NaN, as PTX's cvt .satfinite (not the spec's MAX)
    np.testing.assert_array_equal(e4[5:], [0.3125, 448, 448, 448, 0, -0.0, 1, 448, 448, 448, 2.0**-9])
    e5 = o2.astype(np.float64)
    np.testing.assert_array_equal(e5[:4], [512, -57344, 57344, -57344])
    assert np.isnan(e5[4])                                               # e5m2 keeps NaN
    np.testing.assert_array_equal(e5[5:], [0.3125, 448, 448, 448, 0, -0.0, 1, 57344, 57344, 57344,
                                           2.0**-9])


@ct.kernel
def float_to_int(x, o32, ou8):
    t = ct.load(x, index=(0,), shape=(8,))
    ct.store(o32, index=(0,), tile=ct.astype(t, ct.int32))
    ct.store(ou8, index=(0,), tile=ct.astype(t, ct.uint8))


def test_float_to_int_truncates_and_saturates():
    data = export(float_to_int, array(ct.float32), array(ct.int32), array(ct.uint8))
    x = np.array([2.7, -2.7, 1e10, -1e10, np.nan, 300.5, -0.5, 255.9], F32)
    o32, ou8 = np.zeros(8, np.int32), np.zeros(8, np.uint8)
    run(data, None, 1, cutile_args(x, o32, ou8))
    np.testing.assert_array_equal(o32, [2, -2, 2**31 - 1, -2**31, 0, 300, 0, 255])
    np.testing.assert_array_equal(ou8, [2, 0, 255, 0, 0, 255, 0, 255])


@ct.kernel
def int_to_float(x, o32, o16):
    t = ct.load(x, index=(0,), shape=(4,))
    ct.store(o32, index=(0,), tile=ct.astype(t, ct.float32))
    ct.store(o16, index=(0,), tile=ct.astype(t, ct.float16))


def test_int_to_float_rounds_to_nearest_even():
    data = export(int_to_float, array(ct.int64), array(ct.float32), array(ct.float16))
    x = np.array([2**24 + 1, 2**24 + 3, 2**60 + 2**36 + 1, 70000], np.int64)
    o32, o16 = np.zeros(4, F32), np.zeros(4, np.float16)
    run(data, None, 1, cutile_args(x, o32, o16))
    np.testing.assert_array_equal(o32, [2**24, 2**24 + 4, 2**60 + 2**37, 70000])
    np.testing.assert_array_equal(o16[3], np.inf)       # beyond f16's range


@ct.kernel
def bits(x, out):
    t = ct.load(x, index=(0,), shape=(4,))
    ct.store(out, index=(0,), tile=ct.bitcast(t, ct.int32))


def test_bitcast_keeps_bits():
    data = export(bits, array(ct.float32), array(ct.int32))
    x = np.array([1.0, -0.0, np.inf, -2.5], F32)
    out = np.zeros(4, np.int32)
    run(data, None, 1, cutile_args(x, out))
    np.testing.assert_array_equal(out, x.view(np.int32))


# --- integers: signedness and wrap-around -------------------------------------------

@ct.kernel
def int_ops(x, y, out):
    a = ct.load(x, index=(0,), shape=(8,))
    b = ct.load(y, index=(0,), shape=(8,))
    ct.store(out, index=(0, 0), tile=ct.reshape(a // b, (1, 8)))
    ct.store(out, index=(1, 0), tile=ct.reshape(a % b, (1, 8)))
    ct.store(out, index=(2, 0), tile=ct.reshape(a >> 4, (1, 8)))
    ct.store(out, index=(3, 0), tile=ct.reshape(ct.astype(a < b, out.dtype), (1, 8)))
    ct.store(out, index=(4, 0), tile=ct.reshape(a + b, (1, 8)))
    ct.store(out, index=(5, 0), tile=ct.reshape(a * b, (1, 8)))
    ct.store(out, index=(6, 0), tile=ct.reshape(ct.maximum(a, b), (1, 8)))
    ct.store(out, index=(7, 0), tile=ct.reshape(a - b, (1, 8)))


def _int_ops_expected(a: np.ndarray, b: np.ndarray, dtype) -> np.ndarray:
    bits = np.dtype(dtype).itemsize * 8
    wrap = lambda v: np.array([int(t) % (1 << bits) for t in v], dtype=np.uint64).astype(  # noqa: E731
        np.dtype(dtype).str.replace("i", "u")).view(dtype)
    A, B = [int(v) for v in a], [int(v) for v in b]
    floor = [p // q for p, q in zip(A, B)]             # cuTile's // and % are floor-based
    return np.stack([wrap(floor), wrap([p - q * f for p, q, f in zip(A, B, floor)]),
                     wrap([p >> 4 for p in A]), wrap([int(p < q) for p, q in zip(A, B)]),
                     wrap([p + q for p, q in zip(A, B)]), wrap([p * q for p, q in zip(A, B)]),
                     wrap([max(p, q) for p, q in zip(A, B)]), wrap([p - q for p, q in zip(A, B)])])


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64"])
def test_signed_vs_unsigned_integer_ops(dtype):
    data = export(int_ops, array(getattr(ct, dtype)), array(getattr(ct, dtype)), array(getattr(ct, dtype), 2))
    info = np.iinfo(dtype)
    bits = info.bits

    def wrapped(values):  # negative values wrap for unsigned types
        return np.array([v % (1 << bits) for v in values], dtype=np.uint64).astype(
            np.dtype(dtype).str.replace("i", "u")).view(dtype)
    a = wrapped([7, -7, 7, -7, int(info.max), int(info.min), -1, 1 << 20])
    b = wrapped([2, 2, -2, -2, 1, -1, 1, 3])
    out = np.zeros((8, 8), dtype)
    run(data, None, 1, cutile_args(a, b, out))
    expect = _int_ops_expected(a, b, dtype)
    if info.min:  # MIN // -1 overflows: the interpreter returns MIN (PTX behaviour)
        expect[0, 5], expect[1, 5] = info.min, 0
    np.testing.assert_array_equal(out, expect)


def test_integer_overflow_wraps():
    data = export(int_ops, array(ct.int32), array(ct.int32), array(ct.int32, 2))
    a = np.array([2**31 - 1, -2**31, 65536, 3, 0, 0, 0, 0], np.int32)
    b = np.array([1, 1, 65536, 2**30, 1, 1, 1, 1], np.int32)
    out = np.zeros((8, 8), np.int32)
    run(data, None, 1, cutile_args(a, b, out))
    np.testing.assert_array_equal(out[4, :4], [-2**31, -2**31 + 1, 131072, 2**30 + 3])
    np.testing.assert_array_equal(out[5, :4], [2**31 - 1, -2**31, 0, -2**30])
    np.testing.assert_array_equal(out[7, :2], [2**31 - 2, 2**31 - 1])


# --- min / max with NaN and signed zeros ----------------------------------------------

@ct.kernel
def minmax(x, y, out):
    a = ct.load(x, index=(0,), shape=(4,))
    b = ct.load(y, index=(0,), shape=(4,))
    ct.store(out, index=(0, 0), tile=ct.reshape(ct.maximum(a, b), (1, 4)))
    ct.store(out, index=(1, 0), tile=ct.reshape(ct.maximum(a, b, propagate_nan=True), (1, 4)))
    ct.store(out, index=(2, 0), tile=ct.reshape(ct.minimum(a, b), (1, 4)))
    ct.store(out, index=(3, 0), tile=ct.reshape(ct.minimum(a, b, propagate_nan=True), (1, 4)))


def test_min_max_nan_and_signed_zero():
    data = export(minmax, array(ct.float32), array(ct.float32), array(ct.float32, 2))
    x = np.array([np.nan, 1.0, -0.0, np.nan], F32)
    y = np.array([2.0, np.nan, 0.0, np.nan], F32)
    out = np.zeros((4, 4), F32)
    run(data, None, 1, cutile_args(x, y, out))
    np.testing.assert_array_equal(out[0, :2], [2.0, 1.0])
    assert np.isnan(out[1, :2]).all() and np.isnan(out[:, 3]).all()
    np.testing.assert_array_equal(out[2, :2], [2.0, 1.0])
    assert not np.signbit(out[0, 2]) and np.signbit(out[2, 2])   # max(-0, +0) = +0, min = -0


# --- views ----------------------------------------------------------------------------

@ct.kernel
def strided_tiles(x, out):
    tv = x.tiled_view((2, 4), traversal_steps=(1, 4))
    i = ct.bid(0)
    ct.store(out, index=(i, 0), tile=tv.load((i, 0)))


def test_strided_view_overlapping_tiles():
    """The cuTile docs' example: traversal steps (1, 4) advance one row per tile."""
    data = export(strided_tiles, array(ct.int32, 2), array(ct.int32, 2))
    x = np.arange(16, dtype=np.int32).reshape(4, 4)
    out = np.full((8, 4), -1, np.int32)
    run(data, None, 4, cutile_args(x, out))
    np.testing.assert_array_equal(out[0:2], [[0, 1, 2, 3], [4, 5, 6, 7]])
    np.testing.assert_array_equal(out[2:4], [[4, 5, 6, 7], [8, 9, 10, 11]])
    np.testing.assert_array_equal(out[4:6], [[8, 9, 10, 11], [12, 13, 14, 15]])
    # the last tile (rows 3..4) is half outside the array: padding is unspecified (0 here)
    np.testing.assert_array_equal(out[6], [12, 13, 14, 15])


@ct.kernel
def adv_gather(x, rows, out, col):
    r = ct.load(rows, index=(0,), shape=(8,))
    t = ct.load_advanced_indexing(x, (r, ct.Slice(col, 16)), padding_mode=ct.PaddingMode.NEG_INF)
    ct.store_advanced_indexing(out, (r, ct.Slice(0, 16)), t * 2.0)


def test_gather_scatter_view_rows():
    data = export(adv_gather, array(ct.float32, 2), array(ct.int32), array(ct.float32, 2),
                  scalar(ct.int32))
    x = np.arange(10 * 24, dtype=F32).reshape(10, 24)
    rows = np.array([3, 0, 9, 12, 5, -1, 7, 2], np.int32)   # 12 and -1 are out of bounds
    out = np.full((10, 16), 5.0, F32)
    run(data, None, 1, cutile_args(x, rows, out, 12))
    for k, r in enumerate(rows):
        if 0 <= r < 10:
            expect = np.concatenate([x[r, 12:24], np.full(4, -np.inf, F32)]) * 2
            np.testing.assert_array_equal(out[r], expect)
    untouched = [r for r in range(10) if r not in rows]
    np.testing.assert_array_equal(out[untouched], 5.0)


# --- printf ---------------------------------------------------------------------------

@ct.kernel
def print_formats(x, y):
    a = ct.load(x, index=(0,), shape=(1,))
    b = ct.load(y, index=(0,), shape=(1,))
    ct.printf("d=%d u=%u x=%x ld=%lld e=%.3e\n", ct.reshape(a, ()), ct.reshape(a, ()),
              ct.reshape(a, ()), ct.reshape(b, ()), ct.astype(ct.reshape(a, ()), ct.float32))


def test_printf_conversions():
    data = export(print_formats, array(ct.int32), array(ct.int64))
    printed: list[str] = []
    run(data, None, 1, cutile_args(np.array([-5], np.int32), np.array([-2**40], np.int64)), printed=printed)
    assert printed == [f"d=-5 u={2**32 - 5} x=fffffffb ld={-2**40} e=-5.000e+00\n"]
