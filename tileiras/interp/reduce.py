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
"""
from __future__ import annotations

import numpy as np

from ..tile import ops_core as C
from .core import TermKind, impl
from .errors import InterpError
from .values import decode_scalar_attr, scalar_of


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
    shape = elements[0].shape
    return [np.broadcast_to(np.asarray(v), shape).astype(a.dtype) for v, a in zip(term.values, accs)]


@impl(C.ReduceOp)
def _reduce(frame, op, *tiles):
    dim = op.dim
    tiles = [np.asarray(t) for t in tiles]
    out_shape = tiles[0].shape[:dim] + tiles[0].shape[dim + 1:]
    accs = [np.broadcast_to(i, out_shape).astype(t.dtype) for i, t in zip(_identities(op), tiles)]
    for j in range(tiles[0].shape[dim]):
        accs = _combine(frame, op, [np.take(t, j, axis=dim) for t in tiles], accs)
    return tuple(np.array(a, copy=True) for a in accs)


@impl(C.ScanOp)
def _scan(frame, op, *tiles):
    dim = op.dim
    tiles = [np.asarray(t) for t in tiles]
    n = tiles[0].shape[dim]
    out_shape = tiles[0].shape[:dim] + tiles[0].shape[dim + 1:]
    accs = [np.broadcast_to(i, out_shape).astype(t.dtype) for i, t in zip(_identities(op), tiles)]
    outs = [np.empty_like(t) for t in tiles]
    order = range(n - 1, -1, -1) if op.reverse else range(n)
    for j in order:
        accs = _combine(frame, op, [np.take(t, j, axis=dim) for t in tiles], accs, earlier_first=True)
        for o, a in zip(outs, accs):
            index = [slice(None)] * o.ndim
            index[dim] = j
            o[tuple(index)] = a
    return tuple(outs)
