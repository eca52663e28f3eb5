"""Load forwarding between constant-trip loops: a second loop reads the tiles the first
one loaded from registers instead of loading them again.

Layer norm walks a row twice over the same column tiles: a loop for the mean and the
variance, then a loop that normalizes.  Both load x at ``[row, j]``.  NVIDIA's tool
unrolls both and its second loop reuses the registers x was loaded into by the first
(aligned f32 n768 sm_80: 9 static loads, ours 12, 1.20x its sectors).  Our loads are
inline asm, which LLVM may not merge, so the decision is made here:

``plan_forwarding`` pairs a weak view load of one ``for`` (the source) with a load of a
later ``for`` of the same block, or a load after the loop in its block (the consumer), when

* both loops have the same constant bounds and step (so trip ``k`` of one is trip ``k``
  of the other), or the load after the loop reads the tile of one trip (its indices are
  the source's with a constant for the induction variable, a value it takes);
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
emits the consumer as a pick among the slots by its own induction variable (after the
loop: the slot of its trip), and marks the loops (``unrolled_loops``) for LLVM to unroll
completely (``llvm.loop.unroll.full``: left to its own threshold it stops at 8 trips);
unrolled, slots and picks fold away and the consumer uses the registers the first loop
loaded into.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

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
    """A consumer load reads the tiles ``source`` loaded in ``loop``: in a second loop,
    trip for trip; after the loop, the tile of one trip."""

    source: Operation          # the load in the first loop
    loop: Operation            # the first loop (a ``for``)
    lower: int                 # its bounds and step (the second loop's too)
    step: int
    trips: int
    consumer_loop: Optional[Operation] = None   # the second loop (None: after the loop)
    trip: int = -1             # after the loop: the trip whose tile the consumer reads


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
    """The loops codegen unrolls completely: both loops of every forwarded load, and the
    streaming loops of few known trips (``stream_pipeline.UnrolledLoop``)."""
    from .stream_pipeline import UnrolledLoop  # noqa: PLC0415  (layout_rules, which it imports, imports this)

    kept = {loop for f in tas.forwarded.values() for loop in (f.loop, f.consumer_loop) if loop is not None}
    return kept | {loop for loop, d in tas.pipelines.items() if isinstance(d, UnrolledLoop)}


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
    """32-bit registers a thread of tile ``v`` (in its layout) takes: one an element, two
    for 64-bit ones (the slots hold elements one by one, narrow ones unpacked)."""
    return tas.layouts[v].size("reg") * -(-element_bytes(v.type) // 4)


def _constant(tas: TileAS, v: Value) -> Optional[int]:
    if isinstance(v.owner, CO.ConstantOp):
        return splat_int(v.owner)
    f = tas.aa.fact(v)
    return f.lower if f.lower is not None and f.lower == f.upper else None


def _plan_block(tas: TileAS, block: Block) -> None:
    """Per loop of ``block`` (the nearest first): the loads of later loops, then the loads
    after it outside loops."""
    loops = [op for op in block.ops if isinstance(op, CF.ForOp) and op not in tas.aa.dead]
    for later_index, second in enumerate(loops):
        for first in reversed(loops[:later_index]):
            _pair_loops(tas, block, first, second)
    for first in reversed(loops):
        _after_loop(tas, block, first)


def _pair_loops(tas: TileAS, block: Block, first: Operation, second: Operation) -> None:
    trips = constant_trips(tas, first)
    if trips is None or trips[2] == 0 or constant_trips(tas, second) != trips:
        return
    if first.attributes.get("unsignedCmp") != second.attributes.get("unsignedCmp"):
        return
    iv = second.regions[0].blocks[0].args[0]
    for load in [op for op in second.regions[0].blocks[0].ops if _candidate(tas, op) and op not in tas.forwarded]:
        _forward(tas, block, first, second, load, lambda y: y is iv,
                 lambda source: Forward(source, first, *trips, consumer_loop=second))


def _after_loop(tas: TileAS, block: Block, first: Operation) -> None:
    """Loads after ``first`` in its block whose indices are the loop's on one trip."""
    trips = constant_trips(tas, first)
    if trips is None or trips[2] == 0:
        return
    lower, step, n = trips
    ops = block.ops
    for load in [op for op in ops[ops.index(first) + 1:] if _candidate(tas, op) and op not in tas.forwarded]:
        for k in range(n):
            if _forward(tas, block, first, load, load, lambda y, k=k: _constant(tas, y) == lower + k * step,
                        lambda source, k=k: Forward(source, first, lower, step, n, trip=k)):
                break


def _forward(tas: TileAS, block: Block, first: Operation, last: Operation, load: Operation,
             is_iv: Callable[[Value], bool], make: Callable[[Operation], Forward]) -> bool:
    """Forward to ``load`` the tiles of a load of ``first`` that reads the same tile, where
    no write comes between and the budget allows (``last``: the op of ``block`` holding
    ``load``; ``is_iv``: is an index the first loop's induction variable there; ``make``:
    the decision, from the source).  Did it?"""
    body1 = first.regions[0].blocks[0]
    trips = constant_trips(tas, first)[2]
    sources = [op for op in body1.ops if _candidate(tas, op) and not tas.aa.needs_barrier(op)]
    source = next((s for s in sources if _same_access(tas, s, load, body1.args[0], is_iv)), None)
    if source is None:
        return False
    why = _written_between(tas, block, first, last, source, load)
    kept = kept_loads(tas, first)
    if why is None and source not in kept:
        used = sum(tile_registers(tas, s.results[0]) for s in kept) * trips
        need = tile_registers(tas, source.results[0]) * trips
        if used + need > KEEP_REGS:
            why = (f"the tiles of all {trips} trips take {need} registers a thread "
                   f"({used} kept already), over the budget of {KEEP_REGS}")
    if why is not None:
        tas.forward_refused[load] = why
        return False
    tas.forwarded[load] = make(source)
    tas.forward_refused.pop(load, None)
    return True


def _candidate(tas: TileAS, op: Operation) -> bool:
    """A weak view load into registers, emitted as a plain load (a source must wait for no
    write either; a consumer's waits are the writes ``_written_between`` looks at)."""
    return (isinstance(op, MEM.LoadViewTkoOp) and op not in tas.aa.dead and op not in tas.aa.silent
            and op.attributes.get("memory_ordering_semantics") == MemoryOrderingSemantics.WEAK
            and op not in tas.chunked and op not in tas.tma and op.results[0] not in tas.pairs
            and op.results[0].type.element.bitwidth >= 8     # a register an element (emit_control's slots)
            and pipelined_op(tas, op) is None and op.results[0] in tas.layouts)


def _same_access(tas: TileAS, a: Operation, b: Operation, iv_a: Value, is_iv: Callable[[Value], bool]) -> bool:
    """Do loads ``a`` (trip k of its loop) and ``b`` (trip k of its) read the same tile the
    same way?"""
    ra, rb = a.results[0], b.results[0]
    return (ra.type == rb.type and tas.layouts[ra] == tas.layouts[rb]
            and tas.vectors.get(a) == tas.vectors.get(b)
            and a.attributes == b.attributes
            and len(a.index) == len(b.index)
            and _same_value(a.view, b.view, iv_a, is_iv, _DEPTH)
            and all(_same_value(x, y, iv_a, is_iv, _DEPTH) for x, y in zip(a.index, b.index)))


def _same_value(x: Value, y: Value, iv_x: Value, is_iv: Callable[[Value], bool], depth: int) -> bool:
    """Is ``x`` (in the first loop) equal to ``y`` (in the second, or after the loop) on
    the same trip: the same value, the induction variable and what stands for it there
    (``is_iv``), or the same pure op of equal operands."""
    if x is iv_x:
        return is_iv(y)
    if x is y:
        return True
    ox, oy = x.owner, y.owner
    if depth == 0 or not isinstance(ox, Operation) or not isinstance(oy, Operation):
        return False
    if (type(ox) is not type(oy) or ox.regions or oy.regions or not is_pure(ox) or is_memory_op(ox)
            or ox.attributes != oy.attributes or x.type != y.type
            or list(ox.results).index(x) != list(oy.results).index(y)
            or len(ox.operands) != len(oy.operands)):
        return False
    return all(_same_value(u, v, iv_x, is_iv, depth - 1) for u, v in zip(ox.operands, oy.operands))


def _written_between(tas: TileAS, block: Block, first: Operation, last: Operation,
                     source: Operation, load: Operation) -> Optional[str]:
    """Why a write may change what ``load`` reads after ``source`` read it, or None."""
    ops = block.ops
    between = ops[ops.index(first):ops.index(last) + 1]
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
