"""Load forwarding between constant-trip loops: a second loop reads the tiles the first
one loaded from registers instead of loading them again.

Layer norm walks a row twice over the same column tiles: a loop for the mean and the
variance, then a loop that normalizes.  Both load x at ``[row, j]``.  NVIDIA's tool
unrolls both and its second loop reuses the registers x was loaded into by the first
(aligned f32 n768 sm_80: 9 static loads, ours 12, 1.20x its sectors).  Our loads are
inline asm, which LLVM may not merge, so the decision is made here:

``plan_forwarding`` pairs a weak view load of one ``for`` (the source) with a load of a
later ``for`` of the same block (the consumer) when

* both loops have the same constant bounds and step (so trip ``k`` of one is trip ``k``
  of the other);
* the loads read the same view at the same indices: the partition views and indices are
  the same values, or computed by the same pure ops from the same values, each loop's
  induction variable standing for the other's; same tile type, layout and access width;
* no write between them may change what the consumer reads: none is token-ordered
  before the consumer that is not before the source (TileAA's token chains: under Tile
  IR's memory model a load observes only the writes its token orders it after), and
  none, whatever its token, stores through the same tensor view (the program-order
  reading, which the interpreter follows);
* the tiles of all trips fit a register budget: trips x the tile's 32-bit registers a
  thread, summed over the loads a loop keeps, at most ``KEEP_REGS``.  Refusals are
  recorded (``forward_refused``) with the reason, for the remarks.

Codegen keeps each source's tile of every trip as loop-carried registers of the first
loop (emit_control: one slot per trip, written when the induction variable says so),
emits the consumer as a pick among the slots by its own induction variable, and marks
both loops (``unrolled_loops``) for LLVM to unroll completely (``llvm.loop.unroll.full``:
left to its own threshold it stops at 8 trips); unrolled, slots and picks fold away and the
second loop uses the registers the first loaded into.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir import types as T
from ..ir.core import Block, Operation, Value
from ..record import record
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.enums import MemoryOrderingSemantics
from ..tile.traits import is_pure
from .software_pipeline import pipelined_op
from .tileaa import is_memory_op, is_write, splat_int
from .tiles import element_bytes

if TYPE_CHECKING:
    from .tileas import TileAS

#: 32-bit registers a thread the kept tiles of one loop may take (all trips, all loads).
#: Unrolled, the second loop's other loads are hoisted too, so a kernel's registers grow
#: by more than the kept ones (two-pass layer norm, 1x256 f32 tiles, sm_80, ptxas -v,
#: forwarded / not: 4 trips (8 kept) 31 / 27, 8 (16) 48 / 34, 16 (32) 80 / 34, 32 (64)
#: 144 / 34): 16 keeps a kernel near its registers without forwarding.
KEEP_REGS = 16
#: How deep ``same_value`` follows index and view computations.
_DEPTH = 8


@record(frozen=True)
class Forward:
    """A consumer load reads the tiles ``source`` loaded in ``loop``, trip for trip."""

    source: Operation          # the load in the first loop
    loop: Operation            # the first loop (a ``for``)
    consumer_loop: Operation   # the second
    lower: int                 # both loops' bounds and step
    step: int
    trips: int


def plan_forwarding(tas: TileAS) -> None:
    """Record, for every block, the loads of a later ``for`` that read a tile an earlier
    ``for`` of the block loaded (``tas.forwarded``), and why candidates were refused
    (``tas.forward_refused``)."""
    for op in list(tas.aa.live_ops()):
        for region in op.regions:
            for block in region.blocks:
                _plan_block(tas, block)
    _plan_block(tas, tas.aa.function.entry_block)


def kept_loads(tas: TileAS, loop: Operation) -> list[Operation]:
    """The loads of ``loop`` whose tiles of every trip a later loop reads, in order."""
    return list(dict.fromkeys(f.source for f in tas.forwarded.values() if f.loop is loop))


def unrolled_loops(tas: TileAS) -> set[Operation]:
    """The loops codegen unrolls completely: both loops of every forwarded load."""
    return {loop for f in tas.forwarded.values() for loop in (f.loop, f.consumer_loop)}


def constant_trips(tas: TileAS, loop: Operation) -> Optional[tuple[int, int, int]]:
    """(lower bound, step, trips) of a ``for`` whose bounds and step are constants."""
    bounds = [_constant(tas, v) for v in loop.operands[:3]]
    if any(b is None for b in bounds):
        return None
    lower, upper, step = bounds
    if step <= 0:
        return None
    return lower, step, max(0, -(-(upper - lower) // step))


def tile_registers(tas: TileAS, v: Value) -> int:
    """32-bit registers a thread of tile ``v`` (in its layout) takes."""
    elements = tas.layouts[v].size("reg")
    return -(-elements * element_bytes(v.type) // 4)


def _constant(tas: TileAS, v: Value) -> Optional[int]:
    if isinstance(v.owner, CO.ConstantOp):
        return splat_int(v.owner)
    f = tas.aa.fact(v)
    return f.lower if f.lower is not None and f.lower == f.upper else None


def _plan_block(tas: TileAS, block: Block) -> None:
    loops = [op for op in block.ops if isinstance(op, CF.ForOp) and op not in tas.aa.dead]
    for later_index, second in enumerate(loops):
        for first in reversed(loops[:later_index]):
            _pair_loops(tas, block, first, second)


def _pair_loops(tas: TileAS, block: Block, first: Operation, second: Operation) -> None:
    trips = constant_trips(tas, first)
    if trips is None or trips[2] == 0 or constant_trips(tas, second) != trips:
        return
    if first.attributes.get("unsignedCmp") != second.attributes.get("unsignedCmp"):
        return
    body1, body2 = first.regions[0].blocks[0], second.regions[0].blocks[0]
    sources = [op for op in body1.ops if _candidate(tas, op) and not tas.aa.needs_barrier(op)]
    kept = kept_loads(tas, first)
    for load in [op for op in body2.ops if _candidate(tas, op) and op not in tas.forwarded]:
        source = next((s for s in sources if _same_access(tas, s, load, body1.args[0], body2.args[0])), None)
        if source is None:
            continue
        why = _written_between(tas, block, first, second, source, load)
        if why is None and source not in kept:
            used = sum(tile_registers(tas, s.results[0]) for s in kept) * trips[2]
            need = tile_registers(tas, source.results[0]) * trips[2]
            if used + need > KEEP_REGS:
                why = (f"the tiles of all {trips[2]} trips take {need} registers a thread "
                       f"({used} kept already), over the budget of {KEEP_REGS}")
        if why is not None:
            tas.forward_refused[load] = why
            continue
        if source not in kept:
            kept.append(source)
        tas.forwarded[load] = Forward(source, first, second, trips[0], trips[1], trips[2])
        tas.forward_refused.pop(load, None)


def _candidate(tas: TileAS, op: Operation) -> bool:
    """A weak view load into registers, emitted as a plain load (a source must wait for no
    write either; a consumer's waits are the writes ``_written_between`` looks at)."""
    return (isinstance(op, MEM.LoadViewTkoOp) and op not in tas.aa.dead and op not in tas.aa.silent
            and op.attributes.get("memory_ordering_semantics") == MemoryOrderingSemantics.WEAK
            and op not in tas.chunked and op not in tas.tma
            and pipelined_op(tas, op) is None and op.results[0] in tas.layouts)


def _same_access(tas: TileAS, a: Operation, b: Operation, iv_a: Value, iv_b: Value) -> bool:
    """Do loads ``a`` (trip k of its loop) and ``b`` (trip k of its) read the same tile the
    same way?"""
    ra, rb = a.results[0], b.results[0]
    return (ra.type == rb.type and tas.layouts[ra] == tas.layouts[rb]
            and tas.vectors.get(a) == tas.vectors.get(b)
            and a.attributes == b.attributes
            and len(a.index) == len(b.index)
            and _same_value(a.view, b.view, iv_a, iv_b, _DEPTH)
            and all(_same_value(x, y, iv_a, iv_b, _DEPTH) for x, y in zip(a.index, b.index)))


def _same_value(x: Value, y: Value, iv_x: Value, iv_y: Value, depth: int) -> bool:
    """Is ``x`` (in the first loop) equal to ``y`` (in the second) on the same trip: the
    same value, the two induction variables, or the same pure op of equal operands."""
    if x is y:
        return x is not iv_x and x is not iv_y
    if x is iv_x and y is iv_y:
        return True
    ox, oy = x.owner, y.owner
    if depth == 0 or not isinstance(ox, Operation) or not isinstance(oy, Operation):
        return False
    if (type(ox) is not type(oy) or ox.regions or oy.regions or not is_pure(ox) or is_memory_op(ox)
            or ox.attributes != oy.attributes or x.type != y.type
            or list(ox.results).index(x) != list(oy.results).index(y)
            or len(ox.operands) != len(oy.operands)):
        return False
    return all(_same_value(u, v, iv_x, iv_y, depth - 1) for u, v in zip(ox.operands, oy.operands))


def _written_between(tas: TileAS, block: Block, first: Operation, second: Operation,
                     source: Operation, load: Operation) -> Optional[str]:
    """Why a write may change what ``load`` reads after ``source`` read it, or None."""
    ops = block.ops
    between = ops[ops.index(first):ops.index(second) + 1]
    ordered = tas.aa.deps.get(load, frozenset()) - tas.aa.deps.get(source, frozenset())
    tensor = _tensor_view(source.view)
    for outer in between:
        for op in outer.walk():
            if not is_write(op) or op in tas.aa.dead:
                continue
            if op in ordered:
                return f"'{op.name}' is token-ordered between the loads"
            if tensor is not None and _tensor_view(getattr(op, "view", None)) is tensor:
                return f"'{op.name}' stores through the same tensor view between the loads"
    return None


def _tensor_view(view: Optional[Value]) -> Optional[Value]:
    """The tensor view a partition view is made of (None when not a ``make_*_view``)."""
    if view is None or not isinstance(view.owner, Operation) or not view.owner.operands:
        return None
    tensor = view.owner.operands[0]
    return tensor if isinstance(tensor.type, T.TensorViewType) else None
