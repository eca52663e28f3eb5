"""Transcendental and power functions.

Every function is evaluated in float64 and rounded to the result type to nearest (f16/bf16
are "emulated in f32" on the GPU; the interpreter's f64 evaluation is at least as accurate).
The ``approx``/``full`` modes of exp/tanh/divf are treated as accurate evaluation.
``flush_to_zero`` (f32 only) flushes subnormal inputs and results.
"""
from __future__ import annotations

import numpy as np

from ..tile import ops_arith as O
from . import floats as F
from .core import impl
from .values import scalar_of, to_signed, bits_of


def _evaluate(fn, args: list[np.ndarray], op, ftz: bool = False) -> np.ndarray:
    name = scalar_of(op.results[0].type).name
    dtype = args[0].dtype
    if ftz and name == "f32":
        args = [F.flush_subnormal(a) for a in args]
    with np.errstate(all="ignore"):
        r = fn(*[np.asarray(a).astype(np.float64) for a in args])
    out = F.to_format(r, name) if name != "f64" else r
    out = np.asarray(out).astype(dtype)
    if ftz and name == "f32":
        out = F.flush_subnormal(out)
    return out


def _unary(fn, ftz_attr: bool = False):
    def run(frame, op, a):
        return (_evaluate(fn, [a], op, bool(op.flush_to_zero) if ftz_attr else False),)
    return run


impl(O.ExpOp)(_unary(np.exp))
impl(O.Exp2Op)(_unary(np.exp2, ftz_attr=True))
impl(O.LogOp)(_unary(np.log))
impl(O.Log2Op)(_unary(np.log2))
impl(O.SinOp)(_unary(np.sin))
impl(O.CosOp)(_unary(np.cos))
impl(O.TanOp)(_unary(np.tan))
impl(O.SinHOp)(_unary(np.sinh))
impl(O.CosHOp)(_unary(np.cosh))
impl(O.TanHOp)(_unary(np.tanh))
impl(O.RsqrtOp)(_unary(lambda x: 1.0 / np.sqrt(x), ftz_attr=True))


@impl(O.Atan2Op)
def _atan2(frame, op, x, y):
    # atan2(x, y) is the angle of x / y: the first operand is the numerator (C's atan2 order).
    return (_evaluate(np.arctan2, [x, y], op),)


@impl(O.FPowFOp)
def _powf(frame, op, x, e):
    return (_evaluate(np.power, [x, e], op),)


@impl(O.FPowIOp)
def _powi(frame, op, x, e):
    n = to_signed(e, bits_of(op.exponent.type)).astype(np.float64)
    return (_evaluate(lambda a: np.power(a, n), [x], op),)
