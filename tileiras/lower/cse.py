"""Common subexpressions: a pure op that computes what an earlier one that dominates it
computed (the same op, operands, attributes and result types) is dropped, its results
replaced by the earlier op's.

cuTile repeats work the compiler should do once: each use of a scalar argument gets its own
``reshape`` and ``broadcast``, a row loaded once and used twice is reshaped twice, the block
id is asked for twice.  LLVM merges the scalar arithmetic this leaves, but not what the
tile lowering makes of it: two layout conversions of the same tile, each re-issuing the
load it comes from (``broadcast_expand``'s row read twice by every thread), two
shared-memory exchanges, two reductions.  Merged here, before TileAA, every later pass sees
one value with all the uses.

Dominance comes from the structure: an op dominates the ops after it in its block and
everything nested in them.  Ops with regions, memory effects (no ``NoMemoryEffect`` trait)
or tokens stay as they are."""
from __future__ import annotations

from typing import Any, Optional

from ..ir import types as T
from ..ir.core import Block, Function, Operation, Value
from ..tile.traits import NoMemoryEffect, has_trait


def eliminate_common_subexpressions(fn: Function) -> int:
    """Merge ``fn``'s repeated pure ops in place; returns how many were dropped."""
    replaced: dict[int, Value] = {}
    return _block(fn.body.blocks[0], [], replaced) if fn.body.blocks else 0


def _block(block: Block, outer: list[dict], replaced: dict[int, Value]) -> int:
    scope: dict[tuple, Operation] = {}
    scopes = [*outer, scope]
    dropped = 0
    kept = []
    for op in block.ops:
        op.operands = [replaced.get(id(v), v) for v in op.operands]
        for region in op.regions:
            for inner in region.blocks:
                dropped += _block(inner, scopes, replaced)
        key = _key(op)
        twin = next((s[key] for s in reversed(scopes) if key in s), None) if key is not None else None
        if twin is None:
            if key is not None:
                scope[key] = op
            kept.append(op)
            continue
        for mine, theirs in zip(op.results, twin.results):
            replaced[id(mine)] = theirs
        dropped += 1
    block.ops = kept
    return dropped


def _key(op: Operation) -> Optional[tuple]:
    """What makes two ops compute the same, or None for an op that may not be merged."""
    if op.regions or not op.results or not has_trait(op, NoMemoryEffect):
        return None
    if any(isinstance(v.type, T.TokenType) for v in (*op.results, *op.operands)):
        return None
    key: Any = (type(op), tuple(id(v) for v in op.operands), op.segments,
                tuple(v.type for v in op.results), tuple(sorted(op.attributes.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key
