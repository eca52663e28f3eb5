"""Per-dim structure of integer, pointer and mask tiles: runs of consecutive values, what
divides their starts, runs of equal values (as Triton's AxisInfo analysis keeps them).

A pointer tile built from a base, an ``iota`` and broadcasts (a gather of rows whose
columns are contiguous, a Triton-style ``base + offsets`` tile) addresses ``v`` consecutive
elements at a time when its last dim has runs of ``v`` consecutive values whose first
address is ``v * element`` bytes aligned; a mask computed from the same indices then has
runs of ``v`` equal values, so one predicate covers the run.  ``vectorize.pointer_vector``
turns that into the width of a ``load_ptr_tko``/``store_ptr_tko``, as ``allowed_vector``
does for views.

For a value of shape ``s`` and each dim ``d`` (positions counted along ``d``, the other
indices fixed):

* ``contiguity[d] = c``: the positions split into runs of ``c`` starting at multiples of
  ``c``, along which the values step by one (an element, for pointers);
* ``divisibility[d] = k``: a power of two dividing the first value of each such run (in
  bytes for pointers, elements for integers);
* ``constancy[d] = c``: the positions split into runs of ``c`` starting at multiples of
  ``c``, along which the values are equal;
* ``every``: a power of two dividing every element (bytes for pointers).

Integer arithmetic is taken without wrapping, as Triton takes it.  Where it matters it
cannot wrap: a vector access needs its run's first value divisible by the run's length (a
power of two), so the run does not straddle a multiple of 2^31 or 2^32, and neither a
signed nor an unsigned wrap falls inside it.
"""
from __future__ import annotations

from math import gcd
from typing import Optional

from ..ir import types as T
from ..ir.core import Operation, Value
from ..record import record
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile.enums import ComparisonPredicate
from .tileaa import MAX_DIVISOR, TileAA, pow2_divisor, splat_int


@record(frozen=True)
class AxisInfo:
    contiguity: tuple[int, ...]
    divisibility: tuple[int, ...]
    constancy: tuple[int, ...]
    every: int = 1


def unknown(rank: int, every: int = 1) -> AxisInfo:
    return AxisInfo((1,) * rank, (every,) * rank, (1,) * rank, every)


def pow2_floor(n: int) -> int:
    """The largest power of two not above ``n`` (1 for 0)."""
    return 1 << (max(n, 1).bit_length() - 1)


def analyze(aa: TileAA) -> dict[Value, AxisInfo]:
    """``AxisInfo`` of every integer, pointer and i1 value of the function's live ops (block
    arguments: nothing known but their facts)."""
    out: dict[Value, AxisInfo] = {}

    def info(v: Value) -> AxisInfo:
        if v not in out:
            rank = v.type.rank if isinstance(v.type, T.TileType) else 0
            out[v] = unknown(rank, aa.fact(v).divisor if _integral(v) else 1)
        return out[v]

    for op in aa.live_ops():
        for r in op.results:
            if isinstance(r.type, T.TileType) and not _integral(r):     # a padding value
                out[r] = _uniform_rule(op, r, info)
            elif isinstance(r.type, T.TileType):
                got = _rule(op, r, info, aa)
                facts = aa.fact(r).divisor
                if facts > got.every:       # an assumption, a scalar's facts
                    got = AxisInfo(got.contiguity, tuple(max(k, facts) if c == 1 else k for k, c in
                                                         zip(got.divisibility, got.contiguity)),
                                   got.constancy, facts)
                out[r] = got
    return out


def _uniform_rule(op: Operation, r: Value, info) -> AxisInfo:
    """Constancy only, for values that are neither integers nor pointers (a load's padding
    tile): splat constants, broadcasts and reshapes."""
    shape = tuple(r.type.shape)
    if isinstance(op, CO.ConstantOp):
        data = getattr(op.value, "data", None)
        width = max(1, getattr(r.type.element, "bitwidth", 8) // 8)
        if isinstance(data, bytes) and len(data) % width == 0 and len({data[i:i + width] for i in range(0, len(data), width)}) == 1:
            return AxisInfo((1,) * len(shape), (1,) * len(shape), shape)
        return unknown(len(shape))
    if isinstance(op, CO.ReshapeOp):
        return _reshape(info(op.source), tuple(op.source.type.shape), shape)
    if isinstance(op, CO.BroadcastOp):
        return _broadcast(info(op.source), tuple(op.source.type.shape), shape)
    return unknown(len(shape))


def _integral(v: Value) -> bool:
    t = v.type
    el = t.element if isinstance(t, T.TileType) else t
    return isinstance(el, T.PointerType) or (isinstance(el, T.ScalarType) and el.is_int)


def access_element_bytes(t: T.Type) -> Optional[int]:
    """Bytes of an element that vector accesses move (8- to 64-bit scalars; None for
    sub-byte ones, booleans, pointers)."""
    bits = t.bitwidth if isinstance(t, T.ScalarType) else 0
    return bits // 8 if bits in (8, 16, 32, 64) else None


def _rule(op: Operation, r: Value, info, aa: TileAA) -> AxisInfo:
    shape = tuple(r.type.shape)
    rank = len(shape)
    if isinstance(op, CO.IotaOp):
        return AxisInfo((shape[0],), (MAX_DIVISOR,), (1,), 1)
    if isinstance(op, CO.ConstantOp):
        splat = splat_int(op)
        if splat is None:
            return unknown(rank)
        k = pow2_divisor(splat)
        return AxisInfo((1,) * rank, (k,) * rank, shape, k)
    if isinstance(op, (CF.AssumeOp,)):
        return info(op.value)
    if isinstance(op, (CO.ExtIOp, CO.TruncIOp)):
        return info(op.operands[0])
    if isinstance(op, CO.ReshapeOp):
        return _reshape(info(op.source), tuple(op.source.type.shape), shape)
    if isinstance(op, CO.BroadcastOp):
        return _broadcast(info(op.source), tuple(op.source.type.shape), shape)
    if isinstance(op, AR.AddIOp):
        return _add(info(op.lhs), info(op.rhs), 1)
    if isinstance(op, CO.OffsetOp):
        el = op.ptr.type.element if isinstance(op.ptr.type, T.TileType) else op.ptr.type
        eb = access_element_bytes(el.pointee) if isinstance(el, T.PointerType) else None
        if eb is None:
            return unknown(rank)
        return _add(info(op.ptr), info(op.offset), eb)
    if isinstance(op, AR.SubIOp):
        a, b = info(op.lhs), info(op.rhs)
        return AxisInfo(tuple(gcd(x, y) for x, y in zip(a.contiguity, b.constancy)),
                        tuple(min(x, y) for x, y in zip(a.divisibility, b.divisibility)),
                        tuple(gcd(x, y) for x, y in zip(a.constancy, b.constancy)), min(a.every, b.every))
    if isinstance(op, (AR.MulIOp, AR.ShLIOp)):
        a, b = info(op.lhs), info(op.rhs)
        if isinstance(op, AR.ShLIOp):
            amount = _splat_of(op.rhs)
            if amount is None or not 0 <= amount < 63:
                return unknown(rank)
            factor = 1 << amount
        else:
            if _splat_of(op.rhs) == 1:
                return a
            if _splat_of(op.lhs) == 1:
                return b
            factor = b.every
        every = min(a.every * factor, MAX_DIVISOR)
        return AxisInfo((1,) * rank, (every,) * rank,
                        tuple(gcd(x, y) for x, y in zip(a.constancy, b.constancy)), every)
    if isinstance(op, AR.CmpIOp):
        return _compare(op, info(op.lhs), info(op.rhs), rank)
    if isinstance(op, (AR.AndIOp, AR.OrIOp)) and r.type.element == T.I1:
        a, b = info(op.lhs), info(op.rhs)
        return AxisInfo((1,) * rank, (1,) * rank, tuple(gcd(x, y) for x, y in zip(a.constancy, b.constancy)))
    if isinstance(op, CO.SelectOp):
        c, a, b = info(op.cond), info(op.val_if_true), info(op.val_if_false)
        const = tuple(gcd(gcd(x, y), z) for x, y, z in zip(c.constancy, a.constancy, b.constancy))
        every = min(a.every, b.every)
        return AxisInfo((1,) * rank, (every,) * rank, const, every)
    return unknown(rank)


def _splat_of(v: Value) -> Optional[int]:
    while not v.is_block_argument and isinstance(v.owner, (CO.BroadcastOp, CO.ReshapeOp)):
        v = v.owner.source
    return splat_int(v.owner) if not v.is_block_argument and isinstance(v.owner, CO.ConstantOp) else None


def _add(a: AxisInfo, b: AxisInfo, scale: int) -> AxisInfo:
    """``a + b * scale`` (``scale``: bytes of a pointer's element; 1 for integers)."""
    return AxisInfo(
        tuple(max(gcd(ac, bk), gcd(ak, bc))
              for ac, ak, bc, bk in zip(a.contiguity, a.constancy, b.contiguity, b.constancy)),
        tuple(min(x, min(y * scale, MAX_DIVISOR)) for x, y in zip(a.divisibility, b.divisibility)),
        tuple(gcd(x, y) for x, y in zip(a.constancy, b.constancy)),
        min(a.every, min(b.every * scale, MAX_DIVISOR)))


def _reshape(a: AxisInfo, src: tuple[int, ...], dst: tuple[int, ...]) -> AxisInfo:
    """Unit dims added or removed: the other dims keep theirs; anything else: unknown."""
    if [d for d in src if d != 1] != [d for d in dst if d != 1]:
        return unknown(len(dst), a.every)
    kept = [k for k, d in enumerate(src) if d != 1]
    cont, div, const = [], [], []
    it = iter(kept)
    for d in dst:
        if d == 1:
            cont.append(1), div.append(a.every), const.append(1)
        else:
            k = next(it)
            cont.append(a.contiguity[k]), div.append(a.divisibility[k]), const.append(a.constancy[k])
    return AxisInfo(tuple(cont), tuple(div), tuple(const), a.every)


def _broadcast(a: AxisInfo, src: tuple[int, ...], dst: tuple[int, ...]) -> AxisInfo:
    if len(src) != len(dst):
        if src == ():
            return AxisInfo((1,) * len(dst), (a.every,) * len(dst), dst, a.every)
        return unknown(len(dst), a.every)
    cont, div, const = [], [], []
    for k, (s, d) in enumerate(zip(src, dst)):
        if s == 1 and d != 1:
            cont.append(1), div.append(a.every), const.append(d)
        else:
            cont.append(a.contiguity[k]), div.append(a.divisibility[k]), const.append(a.constancy[k])
    return AxisInfo(tuple(cont), tuple(div), tuple(const), a.every)


#: ``x < n`` is the same over a run of x aligned to its length when n is a multiple of it
_LESS = {ComparisonPredicate.LESS_THAN: False, ComparisonPredicate.GREATER_THAN_OR_EQUAL: False,
         ComparisonPredicate.GREATER_THAN: True, ComparisonPredicate.LESS_THAN_OR_EQUAL: True}


def _compare(op: AR.CmpIOp, a: AxisInfo, b: AxisInfo, rank: int) -> AxisInfo:
    const = []
    swapped = _LESS.get(op.comparison_predicate)
    for d in range(rank):
        c = gcd(a.constancy[d], b.constancy[d])
        if swapped is not None:
            x, y = (b, a) if swapped else (a, b)     # x contiguous, y constant along d
            if x.contiguity[d] > 1 and y.constancy[d] > 1:
                run = min(pow2_floor(x.contiguity[d]), x.divisibility[d], y.every, pow2_floor(y.constancy[d]))
                c = max(c, run)
        const.append(c)
    return AxisInfo((1,) * rank, (1,) * rank, tuple(const))
