"""order-ops: when each op of a block is emitted, decided once and recorded in TileAS.

TileAS decides *how* each op runs; this pass decides *when*, so that code generation only
walks the recorded order.  Ops without side effects (and weak loads no write waits for) are
emitted where their result is first needed, not where they stand: a tile stays in registers
only from its first to its last use.  Everything else keeps block order, and each op's
inputs are emitted just before it, those that wait for a pending load first (a load
branches around its access, so what is emitted before it lands in an earlier block and stays
live across the load: gather_scatter, a store's addresses computed before the loads of its
values).  A deferred op that nothing needs is not emitted at all.

The order is ``TileAS.emission``: op -> its position among the ops emitted in its block
(``emitted_ops``).  A chunked loop (``chunks.ChunkGroup``) is emitted where its anchor stands;
its other members are numbered within the loop, in the order their results are needed
(``demand_order``).  Only the blocks code generation walks op by op get an order: the
function's body and the regions of control flow (``if``, ``for``, ``loop``: ``OpClass.CONTROL``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from ..ir.core import Block, Operation, Value
from ..tile import ops_core as _CO
from ..tile import ops_memory as _MEM
from ..tile.enums import MemoryOrderingSemantics
from ..tile.traits import OpClass, is_plain_load, is_pure, is_terminator, latency_class

if TYPE_CHECKING:
    from .chunks import ChunkGroup
    from .tileas import TileAS

#: Scans (a combiner region, no side effects): emitted, as pure ops are, where their result
#: is first needed.  A store of one scan's result then goes before a later scan through
#: shared memory instead of after it, and the first scan's values do not wait in registers
#: across the second's barriers (scans_builtin i32 16x16 sm_90: 34 -> 30).  Reductions stay
#: where they stand: deferred, they gave as many kernels more registers as fewer
#: (custom_reduce f32 4x64 16 -> 17-18 on sm_90/100/120, 16 -> 15 on sm_80).
DEFERRABLE_SCANS = (_CO.ScanOp,)


def reads(tas: TileAS, op: Operation) -> list[Value]:
    """The values ``op``'s emitter reads: its operands, but for an extract that picks from an
    operand of a ``cat`` (tileas.pick_sources), that operand, for an operand computed again
    in another layout (layout_rules.recompute_plan), what that starts from, and for a
    gathered tile or a tile at a computed index that a ``cp.async`` ring copies, nothing."""
    if (isinstance(op, _MEM.LoadPtrTkoOp) and op in tas.pipelined) or op in tas.index_slices:
        return []       # a ring's copies compute its addresses, or its index (gathered_copy)
    source = tas.pick_sources.get(op)
    operands = list(op.operands) if source is None else [source, *op.operands[1:]]
    out = []
    for i, v in enumerate(operands):
        plan = tas.recomputed.get((op, i))
        # a value computed again for this use: only what its recomputation starts from
        out += [v] if plan is None else [w for p in plan for w in p.owner.operands if w not in plan]
    return out + captured(op)


def captured(op: Operation) -> list[Value]:
    """The values the ops inside ``op``'s regions use that are defined outside them: a
    deferred op with a region needs them emitted as it needs its operands."""
    nested = list(op.walk())[1:]
    inside = {r for o in nested for r in o.results}
    inside.update(a for o in op.walk() for region in o.regions for block in region.blocks for a in block.args)
    return [v for v in dict.fromkeys(u for o in nested for u in o.operands) if v not in inside]


def is_deferrable(tas: TileAS, op: Operation) -> bool:
    """May ``op`` be emitted where its result is first needed rather than where it stands?"""
    if isinstance(op, _MEM.JoinTokensOp):
        # emitted when its token is used: joining a weak load's token must not force the
        # load (a use recomputed in another layout may have left it unused)
        return True
    if is_plain_load(op):  # weak loads not ordered after a write may be emitted later
        return (op.attributes.get("memory_ordering_semantics") == MemoryOrderingSemantics.WEAK
                and not tas.aa.needs_barrier(op))
    if isinstance(op, DEFERRABLE_SCANS):
        return True
    return is_pure(op) and not op.regions and not is_terminator(op)


def writes_memory(op: Operation) -> bool:
    return not is_pure(op) and not is_plain_load(op)


def block_order(tas: TileAS, block: Block) -> list[Operation]:
    """The ops of ``block`` in the order they are emitted (a chunk anchor stands for its loop)."""
    order: list[Operation] = []
    deferred: dict[Operation, None] = {}   # insertion-ordered set
    producer: dict[Value, Operation] = {}

    def materialize(v: Value) -> None:
        op = producer.get(v)
        if op is not None and op in deferred:
            del deferred[op]
            for u in loads_first(reads(tas, op)):
                materialize(u)
            order.append(op)

    def loads_first(values: Sequence[Value]) -> list[Value]:
        memo: dict[Value, bool] = {}

        def waits(v: Value) -> bool:
            if v not in memo:
                op = producer.get(v)
                memo[v] = False
                memo[v] = op is not None and op in deferred and (
                    is_plain_load(op) or any(waits(u) for u in reads(tas, op)))
            return memo[v]
        return sorted(values, key=lambda v: not waits(v))

    for op in block.ops:
        if op in tas.aa.dead:
            continue
        group = tas.chunked.get(op)
        if group is not None:
            if op is group.anchor:
                members = set(group.ops)
                for member in group.ops:
                    for v in member.operands:
                        if v.owner not in members:
                            materialize(v)
                order.append(op)
            continue
        if is_deferrable(tas, op):
            deferred[op] = None
            producer.update((r, op) for r in op.results)
            continue
        if op.regions:  # values may be used anywhere inside: emit everything pending
            for pending in list(deferred):
                for r in pending.results:
                    materialize(r)
        for u in loads_first(reads(tas, op)):
            materialize(u)
        if writes_memory(op):  # loads stay before the writes token-ordered after them
            ordered = tas.aa.deps.get(op, ())
            for pending in [d for d in deferred if is_plain_load(d) and d in ordered]:
                for r in pending.results:
                    materialize(r)
        order.append(op)
    return order


def demand_order(ops: Sequence[Operation], read: Callable[[Operation], list[Value]]) -> list[Operation]:
    """``ops`` (a chunked loop's, anchor last) in the order their results are needed: each
    op right after what it reads, depth-first from the anchor, as ``block_order`` orders the
    ops outside such loops.  In block order every load of a chunk comes before the
    arithmetic that combines them; on demand each load is followed by what combines it
    with the ones before.  padding_modes f32 64x32 (six loads of one tile added up, the
    store guarded whole, emit_memory.guard_whole_store): 51 -> 50 registers on sm_120
    (NVIDIA 47), 49 -> 47 on sm_90 and sm_100, 48 -> 46 on sm_80; ew_arith f16 t1024 34 ->
    35 (NVIDIA 40..50)."""
    producer = {r: op for op in ops for r in op.results}
    order: list[Operation] = []
    seen = {ops[-1]}
    stack = [(ops[-1], iter(read(ops[-1])))]   # depth-first without Python recursion
    while stack:
        op, pending = stack[-1]
        u = next((producer[v] for v in pending if v in producer and producer[v] not in seen), None)
        if u is None:
            order.append(op)
            stack.pop()
        else:
            seen.add(u)
            stack.append((u, iter(read(u))))
    # the group is what the anchor reaches (chunks._collect_group); else block order
    return order if len(order) == len(ops) else list(ops)


def record_emission_order(tas: TileAS) -> None:
    """The pass: ``tas.emission`` for the function's body and every block it emits op by op."""
    emission: dict[Operation, int] = {}
    blocks = [tas.aa.function.entry_block]
    while blocks:
        block = blocks.pop()
        for i, op in enumerate(block_order(tas, block)):
            emission[op] = i
            group = tas.chunked.get(op)
            if group is not None:
                inside = demand_order(group.ops, lambda o: reads(tas, o))
                emission.update((member, j) for j, member in enumerate(inside) if member is not op)
        for op in block.ops:
            if op.regions and latency_class(op) is OpClass.CONTROL and op not in tas.aa.dead:
                blocks.extend(b for region in op.regions for b in region.blocks)
    tas.emission = emission


def emitted_ops(tas: TileAS, block: Block) -> list[Operation]:
    """``block``'s ops in emission order: those ``record_emission_order`` numbered there,
    without the members of chunked loops (their anchor stands for the loop)."""
    here = [op for op in block.ops if op in tas.emission
            and (op not in tas.chunked or tas.chunked[op].anchor is op)]
    return sorted(here, key=tas.emission.__getitem__)


def chunk_ops(tas: TileAS, group: ChunkGroup) -> list[Operation]:
    """A chunked loop's ops in emission order, its anchor last."""
    members = [op for op in group.ops if op is not group.anchor]
    return sorted(members, key=tas.emission.__getitem__) + [group.anchor]
