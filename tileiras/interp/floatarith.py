"""Floating-point arithmetic: add/sub/mul/div/fma/sqrt with every rounding mode and
flush-to-zero, min/max with both NaN conventions, comparisons, abs/neg/floor/ceil/rem.

Results are exact-then-rounded-once (see ``floats.py``): for formats narrower than f64 the
exact result is carried as a float64 round-to-odd value; f64 uses numpy for round-to-nearest
and exact rationals for the directed modes and for fma.  ``approx``/``full`` modes (divf)
return the correctly rounded quotient.  ``flush_to_zero`` (f32 only) flushes subnormal inputs,
then rounds, then flushes a subnormal result.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional

import numpy as np

from ..tile import ops_arith as O
from ..tile.enums import ComparisonOrdering, ComparisonPredicate, RoundingMode
from . import floats as F
from .core import impl
from .intarith import PREDICATES
from .values import scalar_of


def elem_name(op) -> str:
    return scalar_of(op.results[0].type).name


def _f64(x: np.ndarray) -> np.ndarray:
    return F.to_float64(x)


def _sign(x: np.ndarray) -> np.ndarray:
    return np.sign(np.nan_to_num(x, nan=0.0))


def _sticky_result(kind: str, args: list[np.ndarray]) -> np.ndarray:
    """A float64 round-to-odd value of the exact result (operands narrower than f64)."""
    with np.errstate(all="ignore"):
        if kind == "add":
            t, err = F.two_sum(args[0], args[1])
            return F.sticky(t, _sign(err))
        if kind == "sub":
            t, err = F.two_sum(args[0], -args[1])
            return F.sticky(t, _sign(err))
        if kind == "mul":
            return args[0] * args[1]  # exact: 2 x 24 significand bits fit in 53
        if kind == "div":
            a, b = args
            t = a / b
            p, pe = F.two_product(t, b)
            rem = (a - p) - pe
            return F.sticky(t, _sign(rem) * _sign(b))
        if kind == "fma":
            t, err = F.two_sum(args[0] * args[1], args[2])
            return F.sticky(t, _sign(err))
        if kind == "sqrt":
            t = np.sqrt(args[0])
            p, pe = F.two_product(t, t)
            return F.sticky(t, _sign((args[0] - p) - pe))
    raise AssertionError(kind)


_NATIVE = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "sqrt": np.sqrt,
}
_EXACT = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "fma": lambda a, b, c: a * b + c,
}


def _nearest_scalar(kind: str):
    def fn(*v: float) -> float:
        with np.errstate(all="ignore"):
            if kind == "fma":
                return float(np.float64(v[0]) * np.float64(v[1]) + np.float64(v[2]))
            return float(_NATIVE[kind](*[np.float64(x) for x in v]))
    return fn


def _sqrt_f64(x: np.ndarray, mode: Optional[RoundingMode]) -> np.ndarray:
    with np.errstate(all="ignore"):
        t = np.sqrt(x)
    if F.is_nearest(mode):
        return t
    out = t.copy()
    for i in np.ndindex(t.shape):
        v = float(t[i])
        if not math.isfinite(v) or v == 0:
            continue
        sq, exact = Fraction(v) ** 2, Fraction(float(x[i]))
        if sq == exact:
            continue
        want_up = mode is RoundingMode.POSITIVE_INF
        if sq < exact and want_up:
            out[i] = np.nextafter(v, np.inf)
        elif sq > exact and not want_up:
            out[i] = np.nextafter(v, -np.inf)
    return out


def float_op(kind: str, args: list[np.ndarray], name: str, mode: Optional[RoundingMode],
             ftz: bool = False) -> np.ndarray:
    """Evaluate ``kind`` on float tiles of type ``name``, rounded once with ``mode``."""
    dtype = args[0].dtype
    if ftz and name == "f32":
        args = [F.flush_subnormal(a) for a in args]
    x = [_f64(a) for a in args]
    if name == "f64":
        if kind == "sqrt":
            r = _sqrt_f64(x[0], mode)
        elif F.is_nearest(mode) and kind != "fma":
            with np.errstate(all="ignore"):
                r = _NATIVE[kind](*x)
        else:
            r = F.exact_elementwise(_EXACT[kind], _nearest_scalar(kind), x, F.FORMATS["f64"], mode)
    else:
        r = F.round_f64(_sticky_result(kind, x), F.FORMATS[name], mode)
    r = _negative_zero_sum(kind, x, r, mode)
    out = np.asarray(r).astype(dtype)
    if ftz and name == "f32":
        out = F.flush_subnormal(out)
    return out


def _negative_zero_sum(kind: str, x: list[np.ndarray], r: np.ndarray,
                       mode: Optional[RoundingMode]) -> np.ndarray:
    """IEEE: an exact zero sum of non-zero-sign-agreeing terms is -0 when rounding down."""
    if mode is not RoundingMode.NEGATIVE_INF or kind not in ("add", "sub", "fma"):
        return r
    if kind == "fma":
        terms = [x[0] * x[1], x[2]]
    else:
        terms = [x[0], x[1] if kind == "add" else -x[1]]
    both_pos_zero = (terms[0] == 0) & (terms[1] == 0) & ~np.signbit(terms[0]) & ~np.signbit(terms[1])
    return np.where((r == 0) & ~both_pos_zero, -0.0, r)


def _binary(kind: str):
    def run(frame, op, a, b):
        return (float_op(kind, [a, b], elem_name(op), op.rounding_mode, bool(op.flush_to_zero)),)
    return run


impl(O.AddFOp)(_binary("add"))
impl(O.SubFOp)(_binary("sub"))
impl(O.MulFOp)(_binary("mul"))
impl(O.DivFOp)(_binary("div"))


@impl(O.FmaOp)
def _fma(frame, op, a, b, c):
    return (float_op("fma", [a, b, c], elem_name(op), op.rounding_mode, bool(op.flush_to_zero)),)


@impl(O.SqrtOp)
def _sqrt(frame, op, a):
    return (float_op("sqrt", [a], elem_name(op), op.rounding_mode, bool(op.flush_to_zero)),)


def _min_max(a: np.ndarray, b: np.ndarray, is_max: bool, propagate_nan: bool,
             ftz: bool, name: str) -> np.ndarray:
    if ftz and name == "f32":
        a, b = F.flush_subnormal(a), F.flush_subnormal(b)
    x, y = np.broadcast_arrays(_f64(a), _f64(b))
    pick_x = (x > y) if is_max else (x < y)
    both_zero = (x == 0) & (y == 0)
    # +0 is greater than -0
    zero_pick_x = ~np.signbit(x) if is_max else np.signbit(x)
    r = np.where(both_zero, np.where(zero_pick_x, x, y), np.where(pick_x, x, y))
    nx, ny = np.isnan(x), np.isnan(y)
    if propagate_nan:
        r = np.where(nx | ny, np.nan, r)
    else:
        r = np.where(nx, np.where(ny, np.nan, y), np.where(ny, x, r))
    return r.astype(a.dtype)


@impl(O.MaxFOp)
def _maxf(frame, op, a, b):
    return (_min_max(a, b, True, bool(op.propagate_nan), bool(op.flush_to_zero), elem_name(op)),)


@impl(O.MinFOp)
def _minf(frame, op, a, b):
    return (_min_max(a, b, False, bool(op.propagate_nan), bool(op.flush_to_zero), elem_name(op)),)


@impl(O.CmpFOp)
def _cmpf(frame, op, a, b):
    x, y = _f64(a), _f64(b)
    with np.errstate(invalid="ignore"):
        r = PREDICATES[op.comparison_predicate](x, y)
    unordered = np.isnan(x) | np.isnan(y)
    if op.comparison_ordering is ComparisonOrdering.UNORDERED:
        r = r | unordered
    else:
        r = r & ~unordered
    if op.comparison_predicate is ComparisonPredicate.NOT_EQUAL and \
            op.comparison_ordering is ComparisonOrdering.ORDERED:
        r = r & ~unordered
    return (np.asarray(r, dtype=np.bool_),)


@impl(O.NegFOp)
def _negf(frame, op, a):
    return (np.negative(a),)


@impl(O.AbsFOp)
def _absf(frame, op, a):
    return (np.abs(a),)


@impl(O.FloorOp)
def _floor(frame, op, a):
    return (np.floor(_f64(a)).astype(a.dtype),)


@impl(O.CeilOp)
def _ceil(frame, op, a):
    return (np.ceil(_f64(a)).astype(a.dtype),)


@impl(O.RemFOp)
def _remf(frame, op, a, b):
    with np.errstate(all="ignore"):
        return (np.fmod(_f64(a), _f64(b)).astype(a.dtype),)
