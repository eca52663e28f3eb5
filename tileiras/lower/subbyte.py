"""Byte pairs for 4-bit tiles (f4E2M1FN, i4).

Memory holds two 4-bit elements a byte (spec 5.2.2).  A thread that holds both elements of a
byte loads and stores the byte whole; when the two elements of a byte sit in two threads,
every store is a read-modify-write of the other nibble (``atom.and`` + ``atom.or``, see
codegen/subbyte.py).  NVIDIA's tileiras (13.5, read from its PTX) gives each thread a pair:

* tiles tied to a 4-bit tile by element-wise ops (the f32 tile an f4 tile is converted from,
  the f16 tiles computed from a loaded f4 tile...) hold at least two consecutive elements a
  thread along the dim in which the 4-bit view has a static unit stride, even when the tile
  has fewer elements than twice the threads (the rest of the threads hold copies);
* a 4-bit tile stored in a layout without such pairs (after a permute, say) is first
  redistributed through shared memory into one with them.

``plan_pairs`` finds those tiles and their pair dims; TileAS builds the layouts.
"""
from __future__ import annotations

from typing import Optional

from ..ir import types as T
from ..ir.core import Function, Value
from ..layout.linear import LANE, REG, WARP, LinearLayout
from ..tile import ops_memory as MEM
from ..tile.traits import is_elementwise


def is_subbyte(t: T.Type) -> bool:
    e = t.element if isinstance(t, T.TileType) else t
    return isinstance(e, T.ScalarType) and e.bitwidth == 4


def unit_dim(view: T.Type) -> Optional[int]:
    """The tile dim of a view whose tensor dim has the static stride 1 (the last such dim;
    None when no stride is known to be 1, or only the gathered dim of a gather view)."""
    if isinstance(view, (T.PartitionViewType, T.StridedViewType)):
        dims = [k for k, d in enumerate(view.dim_map) if view.tensor_view.strides[d] == 1]
    elif isinstance(view, T.GatherScatterViewType):
        dims = [k for k, s in enumerate(view.tensor_view.strides) if s == 1 and k != view.sparse_dim]
    else:
        return None
    return dims[-1] if dims else None


def holds_pairs(layout: LinearLayout, dim: int) -> bool:
    """Does each thread hold elements ``2i`` and ``2i + 1`` along ``dim`` together?"""
    steps_one = any(b[dim] == 1 and sum(map(abs, b)) == 1 for b in layout.bases(REG))
    return steps_one and all(b[dim] % 2 == 0 for name in (LANE, WARP) for b in layout.bases(name))


def plan_pairs(fn: Function) -> dict[Value, int]:
    """Every tile tied by same-shape element-wise ops to a 4-bit tile, with the dim its
    layout should pair along: the unit-stride dim of a 4-bit store of the group, else of a
    4-bit load, else the last dim."""
    parent: dict[Value, Value] = {}

    def find(v: Value) -> Value:
        while parent.setdefault(v, v) is not v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    tiles: list[Value] = []
    for op in fn.walk():
        for v in (*op.operands, *op.results):
            if isinstance(v.type, T.TileType) and v.type.rank > 0 and v not in parent:
                parent[v] = v
                tiles.append(v)
        if is_elementwise(op) and op.results and isinstance(op.results[0].type, T.TileType):
            shape = op.results[0].type.shape
            for v in (*op.operands, *op.results[1:]):
                if isinstance(v.type, T.TileType) and v.type.shape == shape and shape:
                    parent[find(v)] = find(op.results[0])

    dims: dict[Value, int] = {}
    accesses = [(op.tile, op.view) for op in fn.walk() if isinstance(op, MEM.StoreViewTkoOp)]
    accesses += [(op.tile, op.view) for op in fn.walk() if isinstance(op, MEM.LoadViewTkoOp)]
    for tile, view in accesses:
        d = unit_dim(view.type)
        if is_subbyte(tile.type) and d is not None:
            dims.setdefault(find(tile), d)
    for v in tiles:
        if is_subbyte(v.type):
            dims.setdefault(find(v), v.type.rank - 1)
    return {v: dims[find(v)] for v in tiles if find(v) in dims}
