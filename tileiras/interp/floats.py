"""Exact floating-point rounding for every Tile IR float format.

All results are computed exactly and rounded once:

* ``round_f64(x, fmt, mode)`` rounds float64 values (exact inputs) to ``fmt`` with any IEEE
  rounding mode, vectorized, with IEEE overflow (to inf or max finite, by mode) or, for the
  8- and 4-bit formats, saturation to +-MAX (infinities too); NaN stays NaN in e4m3 and e5m2
  (below) and becomes +MAX in e2m1, which has no NaN.
* Arithmetic on formats narrower than f64 first forms a float64 *round-to-odd* approximation of
  the exact result (``sticky``: the exact value's error sign folded into the last bit), which
  then rounds correctly to any format with <= 51 significand bits in any mode.
* float64 results under directed rounding, and fused multiply-add on float64, go through
  ``fractions.Fraction`` element by element.

Transcendental functions are evaluated in float64 and rounded to nearest (the GPU's ``full``
and ``approx`` modes are approximations within a few ulp; the interpreter returns the nearly
correctly rounded value).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Optional

import numpy as np

from ..tile.enums import RoundingMode
from .values import FLOAT_DTYPES, FNV8E5M3FNU


@dataclass(frozen=True)
class FloatFormat:
    name: str
    precision: int          # significand bits, the implicit one included
    emin: int               # exponent of the smallest normal number
    max_finite: float
    has_inf: bool
    saturating: bool        # conversions saturate to +-max_finite (8- and 4-bit formats)
    nan_to_max: bool        # NaN converts to +max_finite (no NaN encoding used)

    @property
    def dtype(self) -> np.dtype:
        return FLOAT_DTYPES[self.name]


# NaN -> f8E4M3FN is NaN (0x7F here), not the +MAX_NORM of the spec's
# table (5.1.3): the hardware running NVIDIA's code is the ground truth.  NVIDIA's tileiras
# 13.5 converts f32, f16, bf16 and f64 (rounded to odd in f32 first) to e4m3 and e5m2 with a
# bare ``cvt.rn.satfinite.{e4m3x2,e5m2x2}.{f32,f16x2}`` and nothing around it for NaN, and the
# PTX ISA (cvt, ``.satfinite``) says "if the input value is NaN, then the result is NaN in the
# specified destination format"; only finite overflow and infinities clamp to +-MAX_NORM.
# CUDA's own conversion (cuda_fp8.hpp) gives 0x7F | sign too.  So NaN stays NaN in both fp8
# formats (which NaN, sign and payload, is left open), as in the emulator running our PTX or
# NVIDIA's; e2m1 has no NaN and gives +MAX.
FORMATS = {
    "f16": FloatFormat("f16", 11, -14, 65504.0, True, False, False),
    "bf16": FloatFormat("bf16", 8, -126, (2 - 2**-7) * 2.0**127, True, False, False),
    "f32": FloatFormat("f32", 24, -126, float(np.finfo(np.float32).max), True, False, False),
    "tf32": FloatFormat("tf32", 11, -126, (2 - 2**-10) * 2.0**127, True, False, False),
    "f64": FloatFormat("f64", 53, -1022, float(np.finfo(np.float64).max), True, False, False),
    "f8E4M3FN": FloatFormat("f8E4M3FN", 4, -6, 448.0, False, True, False),
    "f8E5M2": FloatFormat("f8E5M2", 3, -14, 57344.0, True, True, False),
    "f4E2M1FN": FloatFormat("f4E2M1FN", 2, 0, 6.0, False, True, True),
    "fnv8E5M3FNU": FloatFormat("fnv8E5M3FNU", 4, -14, 1.75 * 2.0**16, False, True, False),
}

NEAREST = (None, RoundingMode.NEAREST_EVEN, RoundingMode.APPROX, RoundingMode.FULL)
F32_MIN_NORMAL = 2.0 ** -126


def is_nearest(mode: Optional[RoundingMode]) -> bool:
    return mode in NEAREST


def _round_integer(q: np.ndarray, neg: np.ndarray, mode: Optional[RoundingMode]) -> np.ndarray:
    if is_nearest(mode):
        return np.rint(q)
    if mode is RoundingMode.ZERO or mode is RoundingMode.NEAREST_INT_TO_ZERO:
        return np.trunc(q)
    if mode is RoundingMode.POSITIVE_INF:
        return np.where(neg, np.floor(q), np.ceil(q))
    if mode is RoundingMode.NEGATIVE_INF:
        return np.where(neg, np.ceil(q), np.floor(q))
    if mode is RoundingMode.NEAREST_AWAY:
        return np.floor(q + 0.5)
    raise ValueError(f"unsupported rounding mode {mode}")


def _overflow_to_inf(neg: np.ndarray, mode: Optional[RoundingMode]) -> np.ndarray:
    """Where an overflowing IEEE result becomes inf (else the largest finite number)."""
    if is_nearest(mode) or mode is RoundingMode.NEAREST_AWAY:
        return np.ones_like(neg)
    if mode is RoundingMode.POSITIVE_INF:
        return ~neg
    if mode is RoundingMode.NEGATIVE_INF:
        return neg
    return np.zeros_like(neg)


def round_f64(x: np.ndarray, fmt: FloatFormat, mode: Optional[RoundingMode] = None) -> np.ndarray:
    """Round exact float64 values to ``fmt``; returns float64 values representable in ``fmt``."""
    x = np.asarray(x, dtype=np.float64)
    if fmt.name == "f64":
        return x.copy()
    neg = np.signbit(x)
    ax = np.abs(x)
    with np.errstate(all="ignore"):
        _, e = np.frexp(ax)
        lead = np.maximum(e.astype(np.int64) - 1, fmt.emin)
        ulp_exp = lead - (fmt.precision - 1)
        q = np.ldexp(ax, -ulp_exp)
        r = np.ldexp(_round_integer(q, neg, mode), ulp_exp)
        over = np.isfinite(ax) & (r > fmt.max_finite)
        if fmt.saturating:
            r = np.where(over | np.isinf(ax), fmt.max_finite, r)
        else:
            r = np.where(over, np.where(_overflow_to_inf(neg, mode), np.inf, fmt.max_finite), r)
            r = np.where(np.isinf(ax), np.inf, r)
        r = np.copysign(r, np.where(neg, -1.0, 1.0))
        nan = np.isnan(x)
        if fmt.nan_to_max:
            r = np.where(nan, fmt.max_finite, r)
        else:
            r = np.where(nan, np.nan, r)
    return r


def to_format(x: np.ndarray, name: str, mode: Optional[RoundingMode] = None) -> np.ndarray:
    """Round float64 values (exact) into an array of float type ``name``."""
    if name == "f8E8M0FNU":
        return to_e8m0(x, mode)
    if name == "fnv8E5M3FNU":
        return to_fnv8(x, mode)
    fmt = FORMATS[name]
    return round_f64(x, fmt, mode).astype(fmt.dtype)


def to_e8m0(x: np.ndarray, mode: Optional[RoundingMode]) -> np.ndarray:
    """f8E8M0FNU (a power of two 2^-127..2^127, NaN = 0xFF) of |x|: rounding ``zero`` takes the
    power of two at or below, ``positive_inf`` the one at or above; zero and anything up to
    2^-127 give the smallest value, larger ones and infinities 2^127 (the format has neither
    zero nor sign).  That is ``cvt.{rz,rp}.satfinite.ue8m0x2.f32``, what NVIDIA's tileiras
    emits; it rounds an f64 source to f32 first in the same direction (``cvt.{rz,rp}.f32.f64``),
    so does this (exact for every narrower source): a negative f64 just above a power of two
    in magnitude rounds toward it there, and ``positive_inf`` then keeps that power."""
    x = round_f64(np.asarray(x, dtype=np.float64), FORMATS["f32"], mode)
    with np.errstate(all="ignore"):
        m, e = np.frexp(np.abs(x))
        exp = e.astype(np.int64) - 1
        if mode is RoundingMode.POSITIVE_INF:
            exp = exp + (m != 0.5)
        biased = np.clip(exp + 127, 0, 254)
        biased = np.where(np.abs(x) == 0, 0, biased)
        biased = np.where(np.isinf(x), 254, biased)
        biased = np.where(np.isnan(x), 255, biased)
    return biased.astype(np.uint8).view(FLOAT_DTYPES["f8E8M0FNU"])


def _fnv8_values() -> np.ndarray:
    """The value of every fnv8E5M3FNU code: no sign bit, 5 exponent bits (bias 15), 3 mantissa
    bits, subnormals below 2^-14, no infinity, NaN only at 0xFF (so 0xFE = 1.75 * 2^16 is the
    largest value): cuTile's bytecode float spec for it (emin -14, emax 16, NaN only all ones)."""
    codes = np.arange(256)
    exp, mant = codes >> 3, (codes & 7).astype(np.float64)
    values = np.where(exp == 0, np.ldexp(mant / 8, -14), np.ldexp(1 + mant / 8, exp - 15))
    values[0xFF] = np.nan
    return values


#: float64 value of each fnv8E5M3FNU code (increasing up to 0xFE).
FNV8_VALUES = _fnv8_values()


def to_fnv8(x: np.ndarray, mode: Optional[RoundingMode]) -> np.ndarray:
    """fnv8E5M3FNU codes of float64 values: rounded with ``mode``, saturating to the largest
    value (infinity too), NaN -> 0xFF; negative values become +0 (the nearest value of an
    unsigned format; PTX's ``cvt.rn.satfinite.ue5m3x2.f32`` is what NVIDIA emits for sm_107,
    unchecked on hardware)."""
    r = round_f64(x, FORMATS["fnv8E5M3FNU"], mode)
    with np.errstate(invalid="ignore"):
        r = np.where(r < 0, 0.0, r)
    codes = np.searchsorted(FNV8_VALUES[:0xFF], np.nan_to_num(r))
    return np.where(np.isnan(r), 0xFF, codes).astype(np.uint8).view(FNV8E5M3FNU)


def to_float64(x: np.ndarray) -> np.ndarray:
    """float64 values of a float tile (fnv8E5M3FNU codes decoded)."""
    x = np.asarray(x)
    if x.dtype == FNV8E5M3FNU:
        return FNV8_VALUES[x.view(np.uint8)]
    with np.errstate(invalid="ignore"):  # a signalling NaN widens to a quiet one
        return x.astype(np.float64)


def flush_subnormal(x: np.ndarray) -> np.ndarray:
    """Sign-preserving flush of f32 subnormals to zero."""
    x = np.asarray(x)
    tiny = (x != 0) & (np.abs(x.astype(np.float64)) < F32_MIN_NORMAL)
    return np.where(tiny, np.copysign(np.zeros_like(x), x), x).astype(x.dtype)


# --- round-to-odd building blocks ------------------------------------------------------

def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s + err == a + b exactly (Knuth), float64."""
    with np.errstate(all="ignore"):
        s = a + b
        bb = s - a
        err = (a - (s - bb)) + (b - bb)
    return s, err


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):
        c = 134217729.0 * a  # 2^27 + 1
        hi = c - (c - a)
    return hi, a - hi


def two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p + err == a * b exactly (Dekker), float64 without overflow."""
    with np.errstate(all="ignore"):
        p = a * b
        ah, al = _split(a)
        bh, bl = _split(b)
        err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, err


def sticky(t: np.ndarray, err_sign: np.ndarray) -> np.ndarray:
    """Round-to-odd: where the exact value is t + (something of sign ``err_sign``) and t's last
    bit is even, step t one ulp towards the exact value."""
    with np.errstate(all="ignore"):
        inexact = np.isfinite(t) & (err_sign != 0) & np.isfinite(err_sign)
        even = (t.view(np.uint64) & np.uint64(1)) == 0
        fix = inexact & even
        toward = np.where(err_sign > 0, np.inf, -np.inf)
        return np.where(fix, np.nextafter(t, toward), t)


# --- exact per-element fallback -------------------------------------------------------

def round_fraction(v: Fraction, fmt: FloatFormat, mode: Optional[RoundingMode]) -> float:
    """Round an exact rational to ``fmt`` (finite non-zero ``v``)."""
    neg = v < 0
    a = -v if neg else v
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    ulp_exp = max(e, fmt.emin) - (fmt.precision - 1)
    q = a / Fraction(2) ** ulp_exp
    n = q.numerator // q.denominator
    rem = q - n
    if is_nearest(mode):
        up = rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1)
    elif mode is RoundingMode.NEAREST_AWAY:
        up = rem >= Fraction(1, 2)
    elif mode is RoundingMode.POSITIVE_INF:
        up = rem > 0 and not neg
    elif mode is RoundingMode.NEGATIVE_INF:
        up = rem > 0 and neg
    else:
        up = False
    n += int(up)
    try:
        r = math.ldexp(n, ulp_exp)
    except OverflowError:
        r = math.inf
    if r > fmt.max_finite:
        inf = bool(_overflow_to_inf(np.array(neg), mode)) and not fmt.saturating
        r = math.inf if inf else fmt.max_finite
    return -r if neg else r


def exact_elementwise(fn: Callable[..., Fraction], nearest: Callable[..., float],
                      args: list[np.ndarray], fmt: FloatFormat,
                      mode: Optional[RoundingMode]) -> np.ndarray:
    """Apply an exact rational ``fn`` element by element and round each result once.
    Non-finite operands, and exact zeros, take ``nearest``'s IEEE result."""
    flat = [np.broadcast_to(np.asarray(a, np.float64), np.broadcast(*args).shape).ravel() for a in args]
    out = np.empty(flat[0].shape, np.float64)
    for i in range(out.size):
        vals = [f[i] for f in flat]
        ref = nearest(*vals)
        if all(math.isfinite(v) for v in vals):
            try:
                exact = fn(*[Fraction(v) for v in vals])
            except (ZeroDivisionError, ValueError):
                out[i] = ref
                continue
            out[i] = ref if exact == 0 else round_fraction(exact, fmt, mode)
        else:
            out[i] = ref
    return out.reshape(np.broadcast(*args).shape)
