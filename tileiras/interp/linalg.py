"""Matrix multiply-accumulate: mmaf, mmaf_scaled, mmai.

mmaf/mmaf_scaled: products and sums are formed in float64 (exact products for every input
format narrower than f32) and the sum plus ``acc`` is rounded once, to nearest, to the
result type.  The GPU's tensor cores accumulate in an unspecified order and precision (and
``fast_acc`` lowers it further); compare with a tolerance.  mmai is exact: i8 x i8 products
summed in 64 bits, plus the signed i32 ``acc``, wrapped to i32.
"""
from __future__ import annotations

import numpy as np

from ..tile import ops_arith as O
from ..tile.enums import Signedness
from . import floats as F
from .core import impl
from .values import bits_of, from_int, scalar_of, to_signed, to_unsigned


def _round_to(result: np.ndarray, op) -> np.ndarray:
    name = scalar_of(op.results[0].type).name
    return F.to_format(result, name) if name != "f64" else result


@impl(O.MmaFOp)
def _mmaf(frame, op, a, b, c):
    r = np.matmul(a.astype(np.float64), b.astype(np.float64)) + c.astype(np.float64)
    return (_round_to(r, op),)


@impl(O.MmaFScaledOp)
def _mmaf_scaled(frame, op, a, b, c, a_scale, b_scale):
    k = a.shape[-1]
    va, vb = k // a_scale.shape[-1], k // b_scale.shape[-2]
    sa = np.repeat(F.to_float64(a_scale), va, axis=-1)
    sb = np.repeat(F.to_float64(b_scale), vb, axis=-2)
    r = np.matmul(a.astype(np.float64) * sa, b.astype(np.float64) * sb) + c.astype(np.float64)
    return (_round_to(r, op),)


@impl(O.MmaIOp)
def _mmai(frame, op, a, b, c):
    def read(x, signedness):
        bits = bits_of(op.lhs.type)
        return to_signed(x, bits) if signedness is Signedness.SIGNED else to_unsigned(x).astype(np.int64)
    r = np.matmul(read(a, op.signedness_lhs), read(b, op.signedness_rhs)) + to_signed(c, 32)
    return (from_int(r, bits_of(op.results[0].type)),)
