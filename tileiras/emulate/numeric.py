"""Floating-point helpers: rounding modes, flush-to-zero, saturation.

Correct rounding under every mode comes from an exact pair ``hi + lo``: ``hi`` is the
float64 round-to-nearest of the exact result and ``lo`` the (sign of the) remainder
(error-free transforms: TwoSum, Dekker's TwoProduct).  ``round_to`` then rounds the exact
value into the target format, stepping ``hi``'s nearest neighbour one ulp where the mode or
a tie requires it.  float64 results of ``fma`` use TwoProduct + TwoSum and may differ from
the correctly rounded result in rare double-rounding cases.
"""
from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

from .ptxtypes import RAW_DTYPES

F64 = np.dtype(np.float64)
F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)


class Rounding(enum.Enum):
    RN = "rn"
    RZ = "rz"
    RM = "rm"
    RP = "rp"
    RNA = "rna"


ROUNDING_NAMES = {"rn": Rounding.RN, "rz": Rounding.RZ, "rm": Rounding.RM, "rp": Rounding.RP,
                  "rna": Rounding.RNA, "rni": Rounding.RN, "rzi": Rounding.RZ,
                  "rmi": Rounding.RM, "rpi": Rounding.RP}


def rounding_of(parts: list[str], default: Rounding = Rounding.RN) -> Rounding:
    for p in parts[1:]:
        if p in ROUNDING_NAMES:
            return ROUNDING_NAMES[p]
    return default


def step(x: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """The neighbour of ``x`` (any sign-magnitude float dtype) toward +inf where direction>0,
    toward -inf where direction<0; unchanged where direction==0 or x is NaN."""
    x = np.asarray(x)
    dt = x.dtype
    bits = dt.itemsize * 8
    raw_t = RAW_DTYPES[bits]
    raw = x.view(raw_t).astype(np.uint64)
    sign_bit = np.uint64(1) << np.uint64(bits - 1)
    neg = (raw & sign_bit) != 0
    mag = raw & ~sign_bit
    direction = np.broadcast_to(direction, raw.shape)
    zero = mag == 0
    away = (direction > 0) != neg
    new_mag = np.where(away, mag + np.uint64(1), mag - np.uint64(1))
    new_neg = neg.copy()
    new_mag = np.where(zero, np.uint64(1), new_mag)
    new_neg = np.where(zero, direction < 0, new_neg)
    out = np.where(new_neg, new_mag | sign_bit, new_mag)
    res = out.astype(raw_t).view(dt)
    keep = (direction == 0) | np.isnan(x.astype(np.float64))
    return np.where(keep, x, res).astype(dt)


def nearest(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float64 values rounded to nearest even in ``dtype``, once.  numpy rounds to f16 and
    f32 once, but ml_dtypes' bf16 cast goes through f32 and rounds twice (1 + 2^-8 + 2^-30
    became 1, not 1 + 2^-7; ``cvt.rn.bf16.s32`` of 2^24 + 2^16 + 1 gave 2^24): so the others
    go through f32 rounded to odd (toward zero, the last bit set when inexact), which the
    second rounding to at most 22 significand bits cannot get wrong."""
    if dtype in (F16, F32, F64):
        return x.astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        t = x.astype(F32)
        t = np.where(np.abs(t.astype(F64)) > np.abs(x), step(t, -np.sign(x)), t)
        inexact = (t.astype(F64) != x) & np.isfinite(x)
    return (t.view(np.uint32) | inexact.astype(np.uint32)).view(F32).astype(dtype)


def round_to(hi: np.ndarray, lo, dtype: np.dtype, mode: Rounding) -> np.ndarray:
    """Round the exact value ``hi + lo`` into ``dtype``.  ``hi`` is float64 and the
    round-to-nearest of the exact value; only the sign of ``lo`` matters."""
    hi = np.asarray(hi, F64)
    lo_sign = np.sign(np.asarray(lo, F64))
    exact_lo = not np.any(lo_sign)
    if dtype == F64:
        if mode is Rounding.RN or exact_lo:
            return hi
        below = lo_sign < 0              # exact value is below hi
        return directed(hi, -lo_sign, below, mode)
    r = nearest(hi, dtype)
    if mode is Rounding.RNA:
        return round_half_away(hi, dtype)
    if mode is Rounding.RN and exact_lo:
        return r
    diff = r.astype(F64) - hi
    # sign of (r - exact): r - hi is exact (both on the float64 grid)
    rel = np.where(diff != 0, np.sign(diff), -lo_sign)
    if mode is Rounding.RN:
        toward = np.sign(hi - r.astype(F64))
        other = step(r, np.where(toward == 0, -lo_sign, toward))
        dist_r = np.abs(diff)
        dist_o = np.abs(other.astype(F64) - hi)
        tie = (dist_r == dist_o) & (lo_sign != 0) & np.isfinite(r.astype(F64))
        use_other = tie & (np.sign(other.astype(F64) - r.astype(F64)) == lo_sign)
        return np.where(use_other, other, r).astype(dtype)
    return directed(r, rel, None, mode)


def directed(r: np.ndarray, rel: np.ndarray, _below, mode: Rounding) -> np.ndarray:
    """Given a candidate ``r`` and sign(r - exact), the directed rounding of exact."""
    rf = r.astype(F64)
    if mode is Rounding.RM:
        move = np.where(rel > 0, -1, 0)
    elif mode is Rounding.RP:
        move = np.where(rel < 0, 1, 0)
    else:  # RZ: move toward zero when r is farther from zero than exact
        move = np.where((rel > 0) & (rf > 0), -1, np.where((rel < 0) & (rf < 0), 1, 0))
        move = np.where((rf == 0), 0, move)
    return step(r, move) if np.any(move) else r


def round_half_away(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    r = x.astype(dtype)
    other = step(r, np.sign(x - r.astype(F64)))
    d_r = np.abs(r.astype(F64) - x)
    d_o = np.abs(other.astype(F64) - x)
    pick = (d_o < d_r) | ((d_o == d_r) & (np.abs(other.astype(F64)) > np.abs(r.astype(F64))))
    return np.where(pick, other, r).astype(dtype)


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    err = np.where(np.isfinite(s), err, 0.0)
    return s, err


_SPLIT = 134217729.0  # 2**27 + 1


def split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``p = fl(a*b)`` and the exact error ``a*b - p`` (where representable).

    The Dekker split overflows for operands above about 2**996, so the error
    is computed on the operands' mantissas (frexp, in [0.5, 1)) and scaled
    back: exact whenever ``p`` is a normal number.  Subnormal products keep
    the plain formula, whose operands are then far from overflow."""
    p = a * b
    ma, ea = np.frexp(a)
    mb, eb = np.frexp(b)
    m = ma * mb
    mah, mal = split(ma)
    mbh, mbl = split(mb)
    em = ((mah * mbh - m) + mah * mbl + mal * mbh) + mal * mbl
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        scaled = np.ldexp(em, ea + eb)
        ah, al = split(a)
        bh, bl = split(b)
        small = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    tiny = np.finfo(np.asarray(p).dtype).tiny
    err = np.where(np.abs(p) >= tiny, scaled, np.where((a == 0) | (b == 0), 0.0, small))
    err = np.where(np.isfinite(p), err, 0.0)
    return p, err


def flush(x: np.ndarray, enabled: bool = True) -> np.ndarray:
    """Flush subnormals to sign-preserving zero (``.ftz``)."""
    if not enabled:
        return x
    x = np.asarray(x)
    tiny = x.dtype.type(ml_dtypes.finfo(x.dtype).tiny)
    small = np.abs(x) < tiny
    if not small.any():
        return x
    return np.where(small, np.where(np.signbit(x), x.dtype.type(-0.0), x.dtype.type(0)), x).astype(x.dtype)


def saturate(x: np.ndarray, enabled: bool = True) -> np.ndarray:
    """``.sat``: clamp to [0, 1]; NaN becomes +0."""
    if not enabled:
        return x
    x = np.asarray(x)
    out = np.clip(x, x.dtype.type(0), x.dtype.type(1))
    return np.where(np.isnan(x), x.dtype.type(0), out).astype(x.dtype)
