"""reduce and scan with their combiner regions.

Evaluation order (the interpreter's fixed choice; the spec leaves it open): sequential,
left to right along ``dim`` (right to left for ``scan ... reverse``), starting from the
identity: ``acc = identity; for j in order: acc = body(x[j], acc)`` with the body's
arguments bound as ``[x0[j], acc0, x1[j], acc1, ...]`` for reduce; a scan binds the earlier
value first, ``[acc0, x0[j], ...]``, as NVIDIA's PTX does (a ``subi %lhs, %rhs`` scan
compiles to ``sub`` of the value shuffled up from the lower lane minus the lane's own), which
tells a non-commutative combiner's results apart.  The combiner runs once per position
along ``dim``, on all positions of the other dimensions at once (the body's rank-0 ops are
applied element-wise to those tiles).

Two shortcuts give the same values without a region run per position (a 32768-wide row is
otherwise 32768 runs of the body):

* a combiner that is one op the interpreter evaluates associatively and commutatively, bit
  for bit (``ASSOCIATIVE``: min/max, wrapping integer add/mul, bitwise ops), runs its body
  ``log2(n)`` times on halves of the tile (a pairwise tree; a doubling scan), then once with
  the identity;
* an ``addf`` combiner on f32/f64 with round-to-nearest and no flushing, on finite values, is
  ``np.add.accumulate``: sequential in the same order, each step one IEEE addition, which is
  what the exactly rounded ``addf`` gives for finite operands (non-finite ones take the
  general path, whose NaN encodings are the interpreter's own).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir.core import Operation
from ..tile import ops_arith as O
from ..tile import ops_control as CF
from ..tile import ops_core as C
from ..tile.enums import IntegerOverflow
from . import floats as F
from .core import TermKind, impl
from .errors import InterpError
from .values import decode_scalar_attr, scalar_of

#: Combiner ops whose interpreter semantics are exactly associative and commutative.
ASSOCIATIVE = (O.MaxFOp, O.MinFOp, O.MaxIOp, O.MinIOp, O.AndIOp, O.OrIOp, O.XOrIOp, O.AddIOp, O.MulIOp)


def _identities(op) -> list[np.ndarray]:
    return [decode_scalar_attr(a, scalar_of(v.type))
            for a, v in zip(getattr(op.identities, "elements", op.identities), op.operand_group(0))]


def _combine(frame, op, elements: list[np.ndarray], accs: list[np.ndarray],
             earlier_first: bool = False) -> list[np.ndarray]:
    pairs = zip(accs, elements) if earlier_first else zip(elements, accs)
    args = [v for pair in pairs for v in pair]
    term = frame.run_region(op.body, args)
    if term.kind is not TermKind.YIELD or len(term.values) != len(accs):
        raise InterpError("combiner region must yield one value per operand", op)
    shape = np.broadcast_shapes(elements[0].shape, accs[0].shape)
    return [np.broadcast_to(np.asarray(v), shape).astype(a.dtype) for v, a in zip(term.values, accs)]


def single_combiner(op) -> Optional[Operation]:
    """The combiner's only op when the body is ``yield OP(arg0, arg1)`` over one operand."""
    if len(op.results) != 1 or len(op.body.blocks) != 1:
        return None
    block = op.body.blocks[0]
    if len(block.args) != 2 or len(block.ops) != 2:
        return None
    inner, term = block.ops
    if not isinstance(term, CF.YieldOp) or len(inner.results) != 1 or list(term.operands) != [inner.results[0]]:
        return None
    if len(inner.operands) != 2 or set(inner.operands) != set(block.args):
        return None
    return inner


def _is_tree_safe(frame, inner: Operation) -> bool:
    """Reassociating cannot change the values, nor (strict launches) the overflow checks."""
    if not isinstance(inner, ASSOCIATIVE):
        return False
    flags = inner.overflow if isinstance(inner, (O.AddIOp, O.MulIOp)) else None
    return not (frame.machine.strict and flags not in (None, IntegerOverflow.NONE))


def _is_sequential_sum(inner: Operation, x: np.ndarray, identity: np.ndarray) -> bool:
    if not isinstance(inner, O.AddFOp) or not F.is_nearest(inner.rounding_mode):
        return False
    if x.dtype == np.float32:
        if inner.flush_to_zero:
            return False
    elif x.dtype != np.float64:
        return False
    return bool(np.isfinite(identity).all() and np.isfinite(x).all())


def _prefix_sums(x: np.ndarray, identity: np.ndarray, dim: int) -> np.ndarray:
    """``identity + x[0] + x[1] + ...`` along ``dim``, one rounding a step, every prefix."""
    start = np.broadcast_to(identity, x.shape[:dim] + (1,) + x.shape[dim + 1:])
    return np.add.accumulate(np.concatenate([start, x], axis=dim), axis=dim)


def _tree_reduce(frame, op, x: np.ndarray, identity: np.ndarray, dim: int) -> np.ndarray:
    while x.shape[dim] > 1:
        n = x.shape[dim]
        pairs = n - n % 2
        left = np.take(x, np.arange(0, pairs, 2), axis=dim)
        right = np.take(x, np.arange(1, pairs, 2), axis=dim)
        (folded,) = _combine(frame, op, [left], [right])
        x = np.concatenate([folded, np.take(x, [n - 1], axis=dim)], axis=dim) if n % 2 else folded
    out_shape = x.shape[:dim] + x.shape[dim + 1:]
    acc = np.broadcast_to(identity, out_shape).astype(x.dtype)
    if x.shape[dim] == 0:
        return acc
    return _combine(frame, op, [np.take(x, 0, axis=dim)], [acc])[0]


def _doubling_scan(frame, op, x: np.ndarray, identity: np.ndarray, dim: int) -> np.ndarray:
    """Inclusive scan in ``log2(n)`` steps (Hillis-Steele), then the identity folded in front."""
    n = x.shape[dim]
    step = 1
    while step < n:
        earlier = np.take(x, np.arange(0, n - step), axis=dim)
        later = np.take(x, np.arange(step, n), axis=dim)
        (upd,) = _combine(frame, op, [later], [earlier], earlier_first=True)
        x = np.concatenate([np.take(x, np.arange(step), axis=dim), upd], axis=dim)
        step *= 2
    acc = np.broadcast_to(np.expand_dims(identity, dim) if identity.ndim else identity, x.shape).astype(x.dtype)
    return _combine(frame, op, [x], [acc], earlier_first=True)[0]


def _fast_reduce(frame, op, tiles: list[np.ndarray], identities: list[np.ndarray]) -> Optional[np.ndarray]:
    inner = single_combiner(op)
    if inner is None:
        return None
    x, identity, dim = tiles[0], identities[0], op.dim
    if _is_tree_safe(frame, inner):
        return _tree_reduce(frame, op, x, identity, dim)
    if _is_sequential_sum(inner, x, identity):
        return np.take(_prefix_sums(x, identity, dim), -1, axis=dim)
    return None


@impl(C.ReduceOp)
def _reduce(frame, op, *tiles):
    dim = op.dim
    tiles = [np.asarray(t) for t in tiles]
    identities = _identities(op)
    fast = _fast_reduce(frame, op, tiles, identities)
    if fast is not None:
        return (np.array(fast, copy=True),)
    out_shape = tiles[0].shape[:dim] + tiles[0].shape[dim + 1:]
    accs = [np.broadcast_to(i, out_shape).astype(t.dtype) for i, t in zip(identities, tiles)]
    for j in range(tiles[0].shape[dim]):
        accs = _combine(frame, op, [np.take(t, j, axis=dim) for t in tiles], accs)
    return tuple(np.array(a, copy=True) for a in accs)


def _fast_scan(frame, op, tiles: list[np.ndarray], identities: list[np.ndarray]) -> Optional[np.ndarray]:
    inner = single_combiner(op)
    if inner is None:
        return None
    x, identity, dim = tiles[0], identities[0], op.dim
    if op.reverse:
        x = np.flip(x, axis=dim)
    if _is_tree_safe(frame, inner):
        out = _doubling_scan(frame, op, x, identity, dim)
    elif _is_sequential_sum(inner, x, identity):
        out = np.take(_prefix_sums(x, identity, dim), np.arange(1, x.shape[dim] + 1), axis=dim)
    else:
        return None
    return np.ascontiguousarray(np.flip(out, axis=dim) if op.reverse else out)


@impl(C.ScanOp)
def _scan(frame, op, *tiles):
    dim = op.dim
    tiles = [np.asarray(t) for t in tiles]
    identities = _identities(op)
    fast = _fast_scan(frame, op, tiles, identities)
    if fast is not None:
        return (fast,)
    n = tiles[0].shape[dim]
    out_shape = tiles[0].shape[:dim] + tiles[0].shape[dim + 1:]
    accs = [np.broadcast_to(i, out_shape).astype(t.dtype) for i, t in zip(identities, tiles)]
    outs = [np.empty_like(t) for t in tiles]
    order = range(n - 1, -1, -1) if op.reverse else range(n)
    for j in order:
        accs = _combine(frame, op, [np.take(t, j, axis=dim) for t in tiles], accs, earlier_first=True)
        for o, a in zip(outs, accs):
            index = [slice(None)] * o.ndim
            index[dim] = j
            o[tuple(index)] = a
    return tuple(outs)
