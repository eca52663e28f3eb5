"""Chunked loops: large element-wise tiles computed a chunk of registers at a time.

``plan_chunks`` (after layout assignment) finds stores of large tiles computed
element-wise from loads, constants and scalars used nowhere else, and records each such
group (``ChunkGroup``) with the layout each of its tiles has inside the loop: codegen
emits the group once per chunk of registers, in those layouts.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir import types as T
from ..ir.core import Block, Operation, Value
from ..layout.linear import REG, LinearLayout
from ..record import field, record
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.enums import MemoryOrderingSemantics
from ..tile.traits import is_elementwise, is_plain_load, is_plain_store
from . import vectorize
from .layout_rules import RELABELS
from .tiles import is_tile

if TYPE_CHECKING:
    from .tileas import TileAS

#: A thread's registers of one tile beyond which element-wise work runs in a loop.
CHUNK_REGS = 4
ITER = "iter"


@record
class ChunkGroup:
    """Ops that together compute a large tile element-wise from loads to a store.

    They run in a loop over chunks of the tile's registers: the layout's first
    ``log2(CHUNK_REGS)`` register bits stay registers, the rest become the loop's
    iteration bits (input dim ``iter``), so the code and the registers are those of
    one chunk, whatever the tile size.  Reshapes and permutes inside the group relabel
    coordinates but keep the register order, so every tile of the group is chunked the
    same way (``chunk_layout_of`` its own layout): ``layouts`` records, for every tile the
    group computes, the layout it has inside the loop, which codegen emits the ops in."""

    anchor: Operation                 # the store that ends the group
    ops: list[Operation]              # in block order, anchor last
    chunk_layout: LinearLayout
    regs: int = CHUNK_REGS            # registers of one chunk (a vector access's run at least)
    layouts: dict[Value, LinearLayout] = field(default_factory=dict)   # inside the loop

    @property
    def trips(self) -> int:
        return self.chunk_layout.size(ITER)


def chunk_layout_of(layout: LinearLayout, regs: int = CHUNK_REGS) -> LinearLayout:
    bases = layout.bases(REG)
    k = (regs.bit_length() - 1)
    return layout.with_bases(REG, bases[:k]).with_bases(ITER, bases[k:])


def plan_chunks(tas: TileAS) -> None:
    """Find, in every block, stores of large tiles whose tile is computed element-wise
    from loads, constants and scalars used nowhere else: those become ChunkGroups."""
    users: dict[Value, list[Operation]] = {}
    for op in tas.aa.live_ops():
        for v in op.operands:
            users.setdefault(v, []).append(op)
    for op in tas.aa.function.walk():
        for region in op.regions:
            for block in region.blocks:
                _plan_block(tas, block, users)
    _plan_block(tas, tas.aa.function.entry_block, users)


def _plan_block(tas: TileAS, block: Block, users: dict[Value, list[Operation]]) -> None:
    position = {op: i for i, op in enumerate(block.ops)}
    for store in block.ops:
        if not is_plain_store(store) or store in tas.chunked or (store, 0) in tas.converts:
            continue
        tile = store.operands[0] if isinstance(store, MEM.StorePtrTkoOp) else store.tile
        layout = tas.layouts.get(tile)
        if layout is None or layout.size(REG) <= CHUNK_REGS:
            continue
        group = _collect_group(tas, store, layout, position, users)
        if group is not None:
            ops = sorted(group, key=position.__getitem__)
            widest = max((tas.access_allowed.get(member, 1) for member in ops), default=1)
            regs = max(CHUNK_REGS, min(widest, vectorize.register_run(layout)))
            inside = {r: chunk_layout_of(tas.layouts[r], regs) for member in ops for r in member.results
                      if r in tas.layouts and r.type.rank > 0}
            cg = ChunkGroup(store, ops, chunk_layout_of(layout, regs), regs, inside)
            for member in ops:
                tas.chunked[member] = cg


def _collect_group(tas: TileAS, store: Operation, layout: LinearLayout, position: dict[Operation, int],
                   users: dict[Value, list[Operation]]) -> Optional[set[Operation]]:
    group: set[Operation] = {store}
    work = [(v, layout) for v in store.operands if _is_chunk_tile(tas, v, layout)]
    while work:
        v, layout = work.pop()
        producer = v.owner
        if not isinstance(producer, Operation) or producer in group:
            continue
        if producer not in position or not _chunkable(tas, producer, layout):
            return None
        group.add(producer)
        if isinstance(producer, RELABELS):
            layout = tas.layouts[producer.source]
        work += [(u, layout) for u in producer.operands if _is_chunk_tile(tas, u, layout)]
    # every tile the group computes must be consumed inside it
    for op in group:
        for r in op.results:
            if is_tile(r) and r.type.rank > 0 and any(u not in group for u in users.get(r, ())):
                return None
    return group


def _is_chunk_tile(tas: TileAS, v: Value, layout: LinearLayout) -> bool:
    return is_tile(v) and v.type.rank > 0 and tas.layouts.get(v) == layout


def _chunkable(tas: TileAS, op: Operation, layout: LinearLayout) -> bool:
    if any((op, i) in tas.converts for i in range(len(op.operands))):
        return False
    if is_plain_load(op):
        return (op.attributes.get("memory_ordering_semantics") == MemoryOrderingSemantics.WEAK
                and not tas.aa.needs_barrier(op)
                and all(not is_tile(v) or v.type.rank == 0 or tas.layouts.get(v) == layout
                        for v in op.operands[1:] if not isinstance(v.type, T.TokenType))
                and op not in tas.scratch)
    if isinstance(op, (CO.ConstantOp, CO.IotaOp)):
        return tas.layouts.get(op.result) == layout
    if isinstance(op, RELABELS):
        return tas.layouts.get(op.result) == layout
    if isinstance(op, CO.BroadcastOp):
        return op.source.type.rank == 0 or all(d == 1 for d in op.source.type.shape)
    if is_elementwise(op) and not op.regions:
        return all(tas.layouts.get(r) == layout for r in op.results) and all(
            not is_tile(v) or v.type.rank == 0 or tas.layouts.get(v) == layout for v in op.operands)
    return False
