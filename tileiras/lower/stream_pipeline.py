"""Software pipelining of SIMT streaming loops (softmax, layer norm, reductions) on sm_80-89
and sm_120.

A loop with no tensor-core multiply that loads a tile of a view at its induction variable
every trip (a row loop over column tiles) waits for each trip's global loads before it
computes.  Pipelined, the tiles of trip ``i + S - 1`` are 16-byte (or 4/8-byte)
``cp.async`` copies into a ring of ``S`` shared-memory stages while trip ``i`` computes,
and trip ``i`` reads its tiles from its stage (``codegen.emit_stream`` expands the plan).

Each tile is staged in its own register layout: a thread copies exactly the elements it
will hold, ``copy_bytes`` consecutive registers at a time, to the offsets of a shared
layout (``layout_rules.exchange_layout`` of the tile's layout with itself: row-major, or
the swizzle whose vector reads ``bank_wavefronts`` counts fewest wavefronts for), and reads
them back with vector ``ld.shared`` of the same width.  Where no two threads hold the same
element every thread reads only what it copied: its own ``cp.async.wait_group`` is all the
ordering the ring needs, and reading a stage before refilling the one trip ``i - 1`` read
keeps a thread from overwriting what it has yet to read.  Where threads hold copies
(broadcast layouts, extra warps) only one copies each element and the others read it, so
a barrier follows the wait (``StreamPlan.barrier``).

``plan_stream`` decides once per loop; the plan, or why not, goes into ``TileAS.pipelines``
beside the tensor-core K loops' (``software_pipeline.record_plans``).  A loop is pipelined
when

* its body holds no loop (a nested ring would share the shared memory) and no
  tensor-core multiply, and loads (at its top level) one or more tiles of partition views
  at indices that are the induction variable or values from outside the loop;
* each such load is weak, pads with zeros or not at all (out-of-bounds parts are
  zero-filled copies, src-size 0), reads rows contiguous in memory from a view made
  outside the loop, is not token-ordered with a write, and no op of the body writes the
  view it loads ("the loop writes what it loads");
* each thread's runs of a tile row are at least 4 aligned bytes (``TileAS.access_allowed``);
* two stages fit in the shared memory beside the largest scratch of the kernel's other
  ops (the ring starts after it, so the body's reductions keep their scratch);
* (sm_120) loads ``lower.tma`` gave TMA are the ring's too: one box and its wait a trip
  would leave nothing in flight; the kernel's other TMA buffers (a TMA store's staging) are
  placed again after the rings (``record_streams``).

The stage count is the ``num_stages`` hint, else the modulo schedule's (the copies, their
wait and the body's work, carried from trip to trip, under the architecture's latency
model), at least 2, at most what shared memory holds and a known trip count needs.

On the other TMA targets (sm_90, sm_100: ``record_tma_streams``) such a loop keeps the TMA
loads ``lower.tma`` gave it and issues them ahead (``TmaStream``), as NVIDIA's producer warp
does: each load's boxes for trips 0 .. S-1 go out before the loop, each into a stage of its
own ring of ``S`` buffers with an mbarrier each (``TmaPlan.stages``); trip i waits for its
stage, reads its registers, and once a CTA barrier says every thread has, thread 0 issues
trip i + S's boxes into the same stage; they land while trip i computes and the trips
after it wait.  The loads must meet the conditions above that do not concern cp.async
(``_load_reason``); ``S`` is the ``num_stages`` hint, else one less than the modulo
schedule's ring (a trip's stage is refilled as soon as it is read, not a trip later) or
enough stages to keep ``TMA_BYTES_IN_FLIGHT`` in flight, whichever is more, at least 1
(NVIDIA's persistent RMS norm: one 64 KB stage), at most ``MAX_STAGES``, a known trip count
and what the TMA budget holds.  A kernel with a TMA ring or attention ring keeps one stage:
theirs lie after TMA's buffers, placed once.  The first trips' copies go out as early in
the loop's block as what they need allows (``place_tma_prologues``, after ``order-ops``):
a norm's normalize pass has its first chunks in flight while its statistics pass runs.
"""
from __future__ import annotations

from math import prod
from typing import Optional, Union

from ..ir.core import Operation, Value
from ..knobs import knobs
from ..layout.core import LANE, REG, WARP, LinearLayout
from ..layout.shared import bank_wavefronts, shared_identity
from ..record import record
from ..sched.ddg import work_of
from ..sched.latency import classify, model_for
from ..sched.modulo import SchedulingError
from ..sched.pipeline import stream_schedule
from ..target import smem_limit, stages_hint
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_memory as MEM
from ..tile.enums import MemoryOrderingSemantics
from ..tile.traits import DATA_RESOURCES, Resource, writes
from .attention_pipeline import inside_value
from .layout_rules import swizzled_exchange
from .software_pipeline import (NARROWEST_COPY, WIDEST_COPY, clamped_stages, known_trips, trip_count,
                                view_copy_reason)
from .tiles import element_bytes
from .tma import MIN_ARCH as MIN_TMA_ARCH
from .tma import plan_again, plan_tma

#: the architectures whose streaming loops this pipelines (``cp.async`` without TMA rings)
STREAM_ARCHS = (80, 86, 87, 89, 120, 121)
#: where a ring and its stages' tiles start (bytes): whole 128-byte bank lines
RING_ALIGN = 128
#: the deepest ring the modulo schedule may ask for
MAX_STAGES = 8
#: bytes a TMA-streamed loop keeps in flight at least (stages of small tiles): about what
#: one SM needs to draw its share of an H100's DRAM bandwidth across the load latency
#: (~25 bytes/ns for ~1 us); NVIDIA's chunked RMS norm keeps 6 stages of 4 KB per load
TMA_BYTES_IN_FLIGHT = 32 * 1024


@record(frozen=True)
class StreamTile:
    """One loaded tile in the ring: ``load``'s tile lands ``offset`` bytes into each stage,
    its elements at the offsets ``shared`` (offset -> coordinates) gives, each thread
    copying and reading runs of ``copy_bytes`` consecutive registers of ``layout`` (the
    tile's own register layout)."""
    load: Operation
    layout: LinearLayout
    shared: LinearLayout
    copy_bytes: int
    offset: int

    @property
    def nbytes(self) -> int:
        return self.load.results[0].type.num_elements * element_bytes(self.load.results[0].type)


@record(frozen=True)
class StreamPlan:
    """How one streaming loop is pipelined: ``tiles`` (``loads`` their loads) copied into a
    ring of ``stages`` stages of ``stage_bytes`` from byte ``ring_base``; ``barrier``: a
    ``bar.sync`` follows each trip's wait (threads read what others copied).  ``source``
    says where the stage count came from."""
    loop: CF.ForOp
    loads: tuple[Operation, ...]
    tiles: tuple[StreamTile, ...]
    stages: int
    stage_bytes: int
    ring_base: int
    barrier: bool
    source: str

    @property
    def ring_bytes(self) -> int:
        return self.stages * self.stage_bytes

    @property
    def smem_end(self) -> int:
        return self.ring_base + self.ring_bytes


def _align(n: int) -> int:
    return -(-n // RING_ALIGN) * RING_ALIGN


def _body(loop: CF.ForOp) -> list[Operation]:
    return [op for op in loop.regions[0].blocks[0].ops if not isinstance(op, (CF.ContinueOp, MEM.JoinTokensOp))]


def streamed_loads(loop: CF.ForOp) -> list[Operation]:
    """The view loads at the top level of the loop body indexed by its induction variable."""
    iv = loop.regions[0].blocks[0].args[0]
    return [op for op in _body(loop) if isinstance(op, MEM.LoadViewTkoOp) and any(i is iv for i in op.index)]


def is_stream_loop(tas, loop: CF.ForOp) -> bool:
    """Is ``loop`` one this module decides: no tensor-core multiply in it, a tile loaded at
    its induction variable?"""
    return (not any(op in tas.tensor_cores or isinstance(op, (AR.MmaFOp, AR.MmaIOp)) for op in loop.walk())
            and bool(streamed_loads(loop)))


def plan_stream(tas, loop: CF.ForOp, arch: int) -> Union[StreamPlan, str]:
    """The loop's ``StreamPlan``, or the reason it is not pipelined (a sentence)."""
    if any(isinstance(op, (CF.ForOp, CF.LoopOp)) for top in _body(loop) for op in top.walk()):
        return "the loop body holds a loop"
    if any(f.loop is loop or f.consumer_loop is loop for f in tas.forwarded.values()):
        return "its tiles are kept in registers for a later loop, or read from an earlier one's (forward-loads)"
    loads = streamed_loads(loop)
    for ld in loads:
        reason = _load_reason(tas, ld, loop)
        if reason:
            return reason
    tiles: list[StreamTile] = []
    offset = 0
    for ld in loads:
        tile = _stream_tile(tas, ld, offset)
        if isinstance(tile, str):
            return tile
        tiles.append(tile)
        offset += _align(tile.nbytes)
    stage_bytes = offset
    others = max((n for op, n in tas.scratch.items() if op not in loads), default=0)
    ring_base = _align(others)
    fit = (smem_limit(f"sm_{arch}") - ring_base) // stage_bytes
    if fit < 2:
        return (f"tiles too large for shared memory: two stages of {stage_bytes} bytes do not fit beside "
                f"{ring_base} bytes of scratch")
    wanted, source = _wanted_stages(tas, loop, arch, tiles)
    stages = clamped_stages(tas, loop, wanted, fit)
    barrier = any(_shares_elements(tas, t.layout) for t in tiles)
    return StreamPlan(loop, tuple(loads), tuple(tiles), stages, stage_bytes, ring_base, barrier, source)


def _load_reason(tas, ld: Operation, loop: CF.ForOp, later_writes: bool = False) -> Optional[str]:
    """Why the load cannot be copied trips early, or None.  ``later_writes``: a write its
    token orders after it does not matter (a TMA stream reads each trip's tile before the
    trip's other ops, and a load issued early still comes before the writes ordered after
    it; what must not move is a load ordered after a write)."""
    reason = view_copy_reason(ld)
    if reason:
        return reason
    if ld.attributes.get("memory_ordering_semantics", MemoryOrderingSemantics.WEAK) != MemoryOrderingSemantics.WEAK:
        return "a load is ordered"
    if ld in tas.chunked:
        return "a load is chunked"
    if element_bytes(ld.results[0].type) * 8 != ld.results[0].type.element.bitwidth:
        return "a loaded tile's elements are narrower than a byte"
    if inside_value(ld.view, loop):
        return "a load's view is made inside the loop"
    if any(i is not loop.regions[0].blocks[0].args[0] and inside_value(i, loop) for i in ld.index):
        return "a load's index is computed inside the loop (not the induction variable)"
    if not tas.users(ld.results[0]):
        return "a loaded tile is not used"
    if tas.aa.needs_barrier(ld) or (tas.aa.observed_by_write(ld) and not later_writes) \
            or writes_loaded_tensor(loop, ld):
        return "the loop writes what it loads"
    return None


def writes_loaded_tensor(loop: Operation, ld: Operation) -> bool:
    """Does an op of ``loop`` write through a view of the tensor view ``ld`` loads from
    (or through no view at all: a pointer store or atomic may write anywhere)?"""
    tensor = _tensor_of(ld.view)
    for op in loop.walk():
        if op is not ld and writes(op, *DATA_RESOURCES):
            view = getattr(op, "view", None)
            if view is None or _tensor_of(view) is tensor:
                return True
    return False


def _tensor_of(view: Value) -> Value:
    """The tensor view a partition view is made of (else the view itself)."""
    owner = view.owner
    return owner.tensor_view if isinstance(owner, MEM.MakePartitionViewOp) else view


def _stream_tile(tas, ld: Operation, offset: int) -> Union[StreamTile, str]:
    """How ``ld``'s tile is staged (in its register layout, widest copies), or why not."""
    tile = ld.results[0]
    layout = tas.layouts[tile]
    esize = element_bytes(tile.type)
    allowed = min(tas.access_allowed.get(ld, 1), WIDEST_COPY // esize)
    shared, width = _shared_layout(layout, esize, allowed)
    if width * esize < NARROWEST_COPY:
        return ("a thread's run of a tile row is narrower than 4 bytes or not aligned "
                "(cp.async copies 4, 8 or 16)")
    return StreamTile(ld, layout, shared, width * esize, offset)


def _shared_layout(layout: LinearLayout, esize: int, allowed: int) -> tuple[LinearLayout, int]:
    """The shared layout of the tile (row-major or ``swizzled_exchange``'s, whichever
    ``bank_wavefronts`` counts fewer wavefronts for) and its copies' width in elements:
    the widest power of two of consecutive registers that are consecutive offsets (so
    consecutive along the contiguous last dim: one global run) the facts allow."""
    best: Optional[tuple[int, int, LinearLayout]] = None
    candidates = [shared_identity(layout.shape)]
    swizzled = swizzled_exchange(layout, layout, esize)
    if swizzled is not None:
        candidates.append(swizzled)
    for shared in candidates:
        width = layout.invert_and_compose(shared).largest_vectorization(0, max(1, allowed))
        waves = sum(bank_wavefronts(layout, shared, esize, width))
        key = (-width, waves)
        if best is None or key < best[:2]:
            best = (*key, shared)
    assert best is not None
    return best[2], -best[0]


def _shares_elements(tas, layout: LinearLayout) -> bool:
    """Do threads hold copies of the same element (or warps hold nothing)?  Then threads
    read what another copied, and a barrier must follow the wait."""
    return bool(layout.broadcast_mask(LANE) or layout.broadcast_mask(WARP)) or layout.size(WARP) < tas.num_warps or tas.extra_warps > 0


def _wanted_stages(tas, loop: CF.ForOp, arch: int, tiles: list[StreamTile]) -> tuple[int, str]:
    """The ``num_stages`` hint, else the stage count of the modulo schedule of one trip:
    the copies, their wait, and the body's work carried to the next trip."""
    copies = sum(t.layout.size(REG) * element_bytes(t.load.results[0].type) // t.copy_bytes for t in tiles)
    return _scheduled_stages(tas, loop, arch, copies, {t.load for t in tiles})


def _scheduled_stages(tas, loop: CF.ForOp, arch: int, copies: int, loads: set) -> tuple[int, str]:
    """``_wanted_stages`` of a trip that issues ``copies`` copies for ``loads``."""
    hinted = stages_hint(tas.aa.function.hints, arch)
    if hinted:
        return hinted, "num_stages hint"
    threads = tas.layout_threads
    work = tuple((classify(op), work_of(op, threads), 1) for top in _body(loop) if top not in loads
                 for op in top.walk() if op is top or not op.regions)
    try:
        schedule = stream_schedule(copies, work, model_for(arch))
    except SchedulingError:
        return 2, "default (no modulo schedule)"
    return min(schedule.num_stages, MAX_STAGES), "modulo schedule"


def record_streams(tas, arch: int) -> None:
    """Decide every streaming loop (sm_80-89, sm_120) and record it in ``tas``: the decision
    in ``pipelines``, a plan's loop and loads in ``pipelined``, and its ring (after every
    other op's scratch) as the first load's scratch, so the allocation covers it.  On the
    other TMA targets: ``record_tma_streams``."""
    if arch not in STREAM_ARCHS:
        record_tma_streams(tas, arch)
        return
    _decide_loops(tas, arch, plan_stream)
    streams = [d for d in tas.pipelines.values() if isinstance(d, StreamPlan)]
    for decision in streams:
        first = decision.loads[0]
        tas.scratch[first] = max(tas.scratch.get(first, 0), decision.smem_end)
    if streams and tas.tma:         # TMA's buffers (and loads a ring took back) after the rings
        plan_again(tas, arch, {ld for d in streams for ld in d.loads})


def stream_plan(tas, op: Operation) -> Optional[StreamPlan]:
    """The ``StreamPlan`` whose loop or load ``op`` is, or None."""
    plan = tas.pipelined.get(op)
    return plan if isinstance(plan, StreamPlan) else None


@record(frozen=True)
class TmaStream:
    """A streaming loop on a TMA target whose view loads ``loads`` (TMA loads of
    ``lower.tma``) are each issued ``stages`` trips ahead into a ring of that many buffers
    (their ``TmaPlan.stages``).  ``source`` says where the stage count came from.
    ``prologue_at``: the op of the loop's block before which the copies of its first trips
    go out (``place_tma_prologues``), else None: right before the loop."""
    loop: CF.ForOp
    loads: tuple[Operation, ...]
    stages: int
    source: str
    prologue_at: Optional[Operation] = None


def record_tma_streams(tas, arch: int) -> None:
    """Decide every streaming loop of a TMA target that ``record_streams`` does not take
    (sm_90, sm_100), and record it as ``record_streams`` does; the TMA plans of the loads
    it streams are planned again with their stages."""
    if arch in STREAM_ARCHS or arch < MIN_TMA_ARCH or not tas.tma or not knobs.tma_stream:
        return
    _decide_loops(tas, arch, _plan_tma_stream)


def _decide_loops(tas, arch: int, plan) -> None:
    """``plan(tas, loop, arch)`` for each streaming loop not yet decided: the decision into
    ``tas.pipelines``, a plan's loop and loads into ``tas.pipelined``."""
    for loop in [op for op in tas.aa.live_ops() if isinstance(op, CF.ForOp)]:
        if loop in tas.pipelines or not is_stream_loop(tas, loop):
            continue
        decision = plan(tas, loop, arch)
        tas.pipelines[loop] = decision
        if not isinstance(decision, str):
            for op in (loop, *decision.loads):
                tas.pipelined[op] = decision


def _plan_tma_stream(tas, loop: CF.ForOp, arch: int) -> Union[TmaStream, str]:
    """The loop's ``TmaStream``, its loads' plans replaced in ``tas.tma``, or why not."""
    if any(f.loop is loop or f.consumer_loop is loop for f in tas.forwarded.values()):
        return "its tiles are kept in registers for a later loop, or read from an earlier one's (forward-loads)"
    loads = [ld for ld in streamed_loads(loop) if ld in tas.tma]
    if not loads:
        return "no tile it loads at its induction variable goes through TMA"
    for ld in loads:
        reason = _load_reason(tas, ld, loop, later_writes=True) or _ends_trip_before(loop, ld)
        if reason:
            return reason
    trips = trip_count(loop, tas.aa) if known_trips(loop, tas.aa) else None
    if trips is not None and trips < 2:
        return "it runs once"
    boxes = 0
    for ld in loads:
        boxes += prod(tas.tma[ld].boxes)
    wanted, source = _scheduled_stages(tas, loop, arch, boxes, set(loads))
    if not stages_hint(tas.aa.function.hints, arch):
        wanted -= 1         # the schedule's ring refills a stage a trip after it is read; this one at once
        covering = -(-TMA_BYTES_IN_FLIGHT // sum(tas.tma[ld].nbytes for ld in loads))
        if covering > wanted:
            wanted, source = covering, f"{TMA_BYTES_IN_FLIGHT // 1024} KB in flight"
    stages = max(1, min(wanted, MAX_STAGES, trips or wanted))
    if any(not isinstance(d, (str, TmaStream)) for d in tas.pipelines.values()):
        stages, source = 1, "one stage (the kernel's rings lie after TMA's buffers)"
    while stages > 1 and not _restaged(tas, arch, {ld: stages for ld in loads}):
        stages -= 1
    return TmaStream(loop, tuple(loads), stages, source)


def _ends_trip_before(loop: CF.ForOp, ld: Operation) -> Optional[str]:
    """Why a trip may not reach ``ld`` (an op before it holds a ``continue`` or ``break``:
    that trip would neither wait for its stage nor refill it), or None."""
    for top in loop.regions[0].blocks[0].ops:
        if top is ld:
            return None
        if may_leave(top):
            return "a trip may end before a load it streams (a continue or break ahead of it)"
    return None


def may_leave(op: Operation) -> bool:
    """May control leave ``op``'s block from inside it: a ``return`` anywhere, or a ``break``
    or ``continue`` of the loop around that block (not of a loop inside ``op``)?"""
    def leaves(o: Operation, own_loop: bool) -> bool:
        for region in o.regions:
            for block in region.blocks:
                for inner in block.ops:
                    if isinstance(inner, CF.ReturnOp) or (not own_loop and isinstance(inner, (CF.BreakOp, CF.ContinueOp))):
                        return True
                    if leaves(inner, own_loop or isinstance(inner, (CF.ForOp, CF.LoopOp))):
                        return True
        return False
    return leaves(op, isinstance(op, (CF.ForOp, CF.LoopOp)))


def _restaged(tas, arch: int, stages: dict[Operation, int]) -> bool:
    """Plan the kernel's TMA loads and stores again with ``stages`` (and the stages other
    streams gave theirs); keep the plan and say yes if every op keeps TMA."""
    wanted = {op: p.stages for op, p in tas.tma.items() if p.stages > 1} | stages
    plans, maps, end = plan_tma(tas.aa, list(tas.tma), f"sm_{arch}", tas.scratch_bytes, None, wanted)
    if set(plans) != set(tas.tma):
        return False
    tas.tma, tas.tensor_maps, tas.tma_end = plans, maps, end
    return True


def tma_stream(tas, op: Operation) -> Optional[TmaStream]:
    """The ``TmaStream`` whose loop or load ``op`` is, or None."""
    plan = tas.pipelined.get(op)
    return plan if isinstance(plan, TmaStream) else None


def place_tma_prologues(tas) -> None:
    """Where each ``TmaStream``'s first copies go out: as early in its loop's block (in
    emission order) as the values they need allow (the loop's bounds and step, the loads'
    views and other indices), and not above an op that may write what they load (a write
    through another view of a loaded tensor or through a pointer, an atomic) or that orders
    memory (an acquire, a fence).  A second pass over a row (a norm's normalize loop) then
    has its first chunks in flight while the first pass runs, not only once it has ended.
    Run after ``order-ops``: the order decides what is emitted before what."""
    from .emission_order import emitted_ops  # noqa: PLC0415 (emission_order is a later pass's)

    for loop, plan in list(tas.pipelines.items()):
        if not isinstance(plan, TmaStream) or loop not in tas.emission:
            continue
        order = emitted_ops(tas, loop.parent)
        iv = loop.regions[0].blocks[0].args[0]
        needed = {*loop.operands[:3], *(v for ld in plan.loads for v in (ld.view, *ld.index) if v is not iv)}
        tensors = {_tensor_of(ld.view) for ld in plan.loads}
        at = order.index(loop)
        while at > 0 and not _blocks_prologue(order[at - 1], needed, tensors):
            at -= 1
        if order[at] is loop:
            continue
        placed = TmaStream(plan.loop, plan.loads, plan.stages, plan.source, order[at])
        tas.pipelines[loop] = placed
        for op in (loop, *plan.loads):
            tas.pipelined[op] = placed


def _blocks_prologue(op: Operation, needed: set, tensors: set) -> bool:
    """May a stream's first copies not go out before ``op``?  (Also where ``op`` may leave
    the block: its copies would then land with no trip to wait for them.)"""
    if any(r in needed for r in op.results) or may_leave(op):
        return True
    for inner in op.walk():
        ordering = inner.attributes.get("memory_ordering_semantics", MemoryOrderingSemantics.WEAK)
        if ordering != MemoryOrderingSemantics.WEAK or isinstance(inner, (MEM.AtomicRMWTkoOp, MEM.AtomicCASTkoOp)) \
                or writes(inner, Resource.EXECUTION):       # a fence, a grid dependency wait
            return True
        if writes(inner, *DATA_RESOURCES):
            view = getattr(inner, "view", None)
            if view is None or _tensor_of(view) in tensors:
                return True
    return False
