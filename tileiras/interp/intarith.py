"""Integer arithmetic, bitwise, shift and comparison ops.

Integers are signless: each op reads its operands as signed or unsigned as its attributes
say, and results wrap to the type's width (two's complement).  Overflow flags
(``no_signed_wrap``...) only promise that no wrap happens; where one does, the interpreter
returns the wrapped value, or, in a ``strict`` launch, raises ``InterpError`` (the result
is undefined).  Where the spec leaves a result undefined the interpreter
picks the value PTX gives: division by zero -> all ones (remainder: the dividend), signed
``MIN / -1`` -> ``MIN`` (remainder 0), shifts by >= the width -> 0 (``shri signed``: the sign).
"""
from __future__ import annotations

import numpy as np

from ..tile import ops_arith as O
from ..tile.enums import ComparisonPredicate, IntegerOverflow, RoundingMode, Signedness
from .core import impl
from .errors import InterpError
from .values import bits_of, from_int, to_signed, to_unsigned


def _width(op) -> int:
    return bits_of(op.results[0].type if op.results else op.lhs.type)


def _operand(x: np.ndarray, bits: int, signedness: Signedness) -> np.ndarray:
    return to_signed(x, bits) if signedness is Signedness.SIGNED else to_unsigned(x)


def _exact(x: np.ndarray, bits: int, signed: bool) -> np.ndarray:
    """Python-int (object) values, so exact results never wrap."""
    return np.asarray(to_signed(x, bits) if signed else to_unsigned(x)).astype(object)


def check_overflow(frame, op, fn, operands: list, bits: int, operand_bits: int = 0) -> None:
    """In a strict launch, raise if ``fn`` applied to the exact signed (unsigned) operand
    values leaves the signed (unsigned) range while the op's flags promise it does not."""
    flags = op.overflow
    if not frame.machine.strict or flags in (None, IntegerOverflow.NONE):
        return
    checks = []
    if flags in (IntegerOverflow.NO_SIGNED_WRAP, IntegerOverflow.NO_WRAP):
        checks.append((True, -(1 << (bits - 1)), (1 << (bits - 1)) - 1, "no_signed_wrap"))
    if flags in (IntegerOverflow.NO_UNSIGNED_WRAP, IntegerOverflow.NO_WRAP):
        checks.append((False, 0, (1 << bits) - 1, "no_unsigned_wrap"))
    for signed, lo, hi, name in checks:
        exact = np.asarray(fn(*[_exact(x, operand_bits or bits, signed) for x in operands]), dtype=object)
        bad = (exact < lo) | (exact > hi)
        if np.any(bad):
            raise InterpError(f"{name} violated: exact result {exact[bad].reshape(-1)[0]} "
                              f"does not fit i{bits}", op)


def _wrapping(fn):
    def run(frame, op, *operands):
        bits = _width(op)
        check_overflow(frame, op, fn, list(operands), bits)
        return (from_int(fn(*[to_unsigned(x) for x in operands]), bits),)
    return run


impl(O.AddIOp)(_wrapping(lambda a, b: a + b))
impl(O.SubIOp)(_wrapping(lambda a, b: a - b))
impl(O.MulIOp)(_wrapping(lambda a, b: a * b))
impl(O.NegIOp)(_wrapping(lambda a: 0 - a))


@impl(O.AbsIOp)
def _absi(frame, op, a):
    bits = _width(op)
    s = to_signed(a, bits)
    return (from_int(np.where(s < 0, np.uint64(0) - s.view(np.uint64), s.view(np.uint64)), bits),)


@impl(O.AndIOp)
def _andi(frame, op, a, b):
    return (np.bitwise_and(a, b),)


@impl(O.OrIOp)
def _ori(frame, op, a, b):
    return (np.bitwise_or(a, b),)


@impl(O.XOrIOp)
def _xori(frame, op, a, b):
    return (np.bitwise_xor(a, b),)


def _divide(a: np.ndarray, b: np.ndarray, bits: int, signedness: Signedness,
            rounding: RoundingMode) -> tuple[np.ndarray, np.ndarray]:
    """(quotient, defined) with the quotient rounded as ``rounding`` says."""
    x, y = _operand(a, bits, signedness), _operand(b, bits, signedness)
    x, y = np.broadcast_arrays(x, y)
    zero = y == 0
    overflow = np.zeros_like(zero)
    if signedness is Signedness.SIGNED:
        overflow = (y == -1) & (x == np.int64(-(1 << (bits - 1))))
    safe_y = np.where(zero | overflow, 1, y).astype(y.dtype)
    with np.errstate(all="ignore"):
        q = x // safe_y
        r = x - q * safe_y
    if rounding is RoundingMode.POSITIVE_INF:
        q = q + (r != 0)
    elif rounding is not RoundingMode.NEGATIVE_INF and signedness is Signedness.SIGNED:
        q = q + ((r != 0) & ((x < 0) != (safe_y < 0)))    # floor -> toward zero
    q = np.where(overflow, x, q)
    q = np.where(zero, -1 if q.dtype.kind == "i" else np.uint64(2**64 - 1), q)
    return q, ~zero


@impl(O.DivIOp)
def _divi(frame, op, a, b):
    bits = _width(op)
    rounding = op.rounding if op.rounding is not None else RoundingMode.ZERO
    q, _ = _divide(a, b, bits, op.signedness, rounding)
    return (from_int(q, bits),)


@impl(O.RemIOp)
def _remi(frame, op, a, b):
    bits = _width(op)
    x, y = np.broadcast_arrays(_operand(a, bits, op.signedness), _operand(b, bits, op.signedness))
    q, defined = _divide(a, b, bits, op.signedness, RoundingMode.ZERO)
    with np.errstate(all="ignore"):
        r = x - q * y
    return (from_int(np.where(defined, r, x), bits),)


@impl(O.MaxIOp)
def _maxi(frame, op, a, b):
    bits = _width(op)
    x, y = _operand(a, bits, op.signedness), _operand(b, bits, op.signedness)
    return (from_int(np.maximum(x, y), bits),)


@impl(O.MinIOp)
def _mini(frame, op, a, b):
    bits = _width(op)
    x, y = _operand(a, bits, op.signedness), _operand(b, bits, op.signedness)
    return (from_int(np.minimum(x, y), bits),)


@impl(O.MulhiIOp)
def _mulhii(frame, op, a, b):
    bits = _width(op)
    x, y = to_unsigned(a), to_unsigned(b)
    if bits <= 32:
        return (from_int((x * y) >> np.uint64(bits), bits),)
    lo32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    xl, xh, yl, yh = x & lo32, x >> s32, y & lo32, y >> s32
    ll, lh, hl, hh = xl * yl, xl * yh, xh * yl, xh * yh
    mid = (ll >> s32) + (lh & lo32) + (hl & lo32)
    return (from_int(hh + (lh >> s32) + (hl >> s32) + (mid >> s32), bits),)


@impl(O.ShLIOp)
def _shli(frame, op, a, b):
    bits = _width(op)
    n = to_unsigned(b)
    if np.all(n < np.uint64(bits)):
        check_overflow(frame, op, lambda x, _: x * (1 << np.asarray(n).astype(object)), [a, b], bits)
    big = n >= np.uint64(bits)
    r = to_unsigned(a) << np.where(big, np.uint64(0), n)
    return (from_int(np.where(big, np.uint64(0), r), bits),)


@impl(O.ShRIOp)
def _shri(frame, op, a, b):
    bits = _width(op)
    n = to_unsigned(b)
    n = np.minimum(n, np.uint64(bits - 1 if op.signedness is Signedness.SIGNED else bits))
    if op.signedness is Signedness.SIGNED:
        r = to_signed(a, bits) >> n.astype(np.int64)
    else:
        big = n >= np.uint64(bits)
        r = np.where(big, np.uint64(0), to_unsigned(a) >> np.where(big, np.uint64(0), n))
    return (from_int(r, bits),)


PREDICATES = {
    ComparisonPredicate.EQUAL: np.equal,
    ComparisonPredicate.NOT_EQUAL: np.not_equal,
    ComparisonPredicate.LESS_THAN: np.less,
    ComparisonPredicate.LESS_THAN_OR_EQUAL: np.less_equal,
    ComparisonPredicate.GREATER_THAN: np.greater,
    ComparisonPredicate.GREATER_THAN_OR_EQUAL: np.greater_equal,
}


@impl(O.CmpIOp)
def _cmpi(frame, op, a, b):
    bits = bits_of(op.lhs.type)
    x, y = _operand(a, bits, op.signedness), _operand(b, bits, op.signedness)
    return (np.asarray(PREDICATES[op.comparison_predicate](x, y), dtype=np.bool_),)
