"""Software pipelining of SIMT streaming loops (softmax, layer norm, reductions) on sm_80-89
and sm_120.

A loop with no tensor-core multiply that loads a tile of a view at its induction variable
every trip (a row loop over column tiles) waits for each trip's global loads before it
computes.  Pipelined, the tiles of trip ``i + S - 1`` are 16-byte (or 4/8-byte)
``cp.async`` copies into a ring of ``S`` shared-memory stages while trip ``i`` computes,
and trip ``i`` reads its tiles from its stage (``codegen.emit_stream`` expands the plan).

Each tile is staged in its own register layout: a thread copies exactly the elements it
will hold, ``copy_bytes`` consecutive registers at a time, to the offsets of a shared
layout (``exchanges.exchange_layout`` of the tile's layout with itself: row-major, or
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

On sm_90 and sm_100 such loops keep their TMA loads and issue them ahead instead
(``tma_stream``).
"""
from __future__ import annotations

from typing import Optional, Union

from ..ir.core import Operation, Value
from ..layout.core import LANE, REG, WARP, LinearLayout
from ..layout.shared import bank_wavefronts, shared_identity
from ..record import record
from ..sched.ddg import known_trips, trip_count, work_of
from ..sched.latency import classify, model_for
from ..sched.modulo import SchedulingError
from ..sched.pipeline import stream_schedule
from ..target import smem_limit, stages_hint
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_memory as MEM
from ..tile.enums import MemoryOrderingSemantics
from ..tile.traits import DATA_RESOURCES, is_plain_load, writes
from .attention_pipeline import inside_value
from .forwarding import tile_registers
from .exchanges import swizzled_exchange
from .k_loop_body import view_copy_reason
from .software_pipeline import NARROWEST_COPY, WIDEST_COPY, clamped_stages
from .tiles import element_bytes
from .tma import plan_again, streaming_loop

#: the architectures whose streaming loops this pipelines (``cp.async`` without TMA rings)
STREAM_ARCHS = (80, 86, 87, 89, 120, 121)
#: where a ring and its stages' tiles start (bytes): whole 128-byte bank lines
RING_ALIGN = 128
#: the deepest ring the modulo schedule may ask for
MAX_STAGES = 8
#: a streaming loop of at most this many known trips, whose loaded tiles of every trip
#: together take at most ``UNROLL_REGISTERS`` registers a thread, is unrolled (``UnrolledLoop``)
UNROLL_TRIPS = 16
UNROLL_REGISTERS = 64


@record(frozen=True)
class UnrolledLoop:
    """A streaming loop of few known trips that LLVM unrolls completely (``unrolled``): all
    its trips' loads, independent of the work that carries from trip to trip, go out before
    the first trip's work, as NVIDIA's tileiras issues them (loop_accumulate k4096: 16
    direct loads), with neither a ring's copies and waits (1.47x NVIDIA's executed
    instructions on sm_80) nor a load a trip waited on (sm_90's rolled loop)."""

    trips: int
    registers: int


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
    return [op for op in _body(loop) if isinstance(op, MEM.LoadViewTkoOp) and streaming_loop(op) is loop]


def is_stream_loop(tas, loop: CF.ForOp) -> bool:
    """Is ``loop`` one this module decides: no tensor-core multiply in it, a tile loaded at
    its induction variable?"""
    return (not any(op in tas.tensor_cores or isinstance(op, (AR.MmaFOp, AR.MmaIOp)) for op in loop.walk())
            and bool(streamed_loads(loop)))


def unrolled(tas, loop: CF.ForOp, arch: int) -> Optional[UnrolledLoop]:
    """The ``UnrolledLoop`` a streaming loop takes instead of a ring or a TMA stream: at
    most ``UNROLL_TRIPS`` known trips, no loop in its body, no tile it loads through TMA,
    at most ``UNROLL_REGISTERS`` registers a thread for all its trips' loaded tiles, and no
    ``num_stages`` hint for the target (which asks for a ring)."""
    if not known_trips(loop, tas.aa) or stages_hint(tas.aa.function.hints, arch) or _holds_loop(loop):
        return None
    trips = trip_count(loop, tas.aa)
    loads = streamed_loads(loop)
    if not 2 <= trips <= UNROLL_TRIPS or any(ld in tas.tma for ld in loads):
        return None
    # every load of the body counts, gathers through pointer tiles too: unrolled, ptxas
    # issues all the trips' loads before the first trip's work
    every = [op for op in _body(loop) if is_plain_load(op)]
    registers = trips * sum(tile_registers(tas, ld.results[0]) for ld in every)
    return UnrolledLoop(trips, registers) if registers <= UNROLL_REGISTERS else None


def _holds_loop(loop: CF.ForOp) -> bool:
    return any(isinstance(op, (CF.ForOp, CF.LoopOp)) for top in _body(loop) for op in top.walk())


def plan_stream(tas, loop: CF.ForOp, arch: int) -> Union[StreamPlan, UnrolledLoop, str]:
    """The loop's ``StreamPlan``, its ``UnrolledLoop``, or the reason it is not pipelined
    (a sentence)."""
    unroll = unrolled(tas, loop, arch)
    if unroll is not None:
        return unroll
    if _holds_loop(loop):
        return "the loop body holds a loop"
    if any(f.loop is loop or f.consumer_loop is loop for f in tas.forwarded.values()):
        return "its tiles are kept in registers for a later loop, or read from an earlier one's (forward-loads)"
    loads = streamed_loads(loop)
    for ld in loads:
        reason = load_reason(tas, ld, loop)
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


def load_reason(tas, ld: Operation, loop: CF.ForOp, later_writes: bool = False) -> Optional[str]:
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
    tensor = tensor_of(ld.view)
    for op in loop.walk():
        if op is not ld and writes(op, *DATA_RESOURCES):
            view = getattr(op, "view", None)
            if view is None or tensor_of(view) is tensor:
                return True
    return False


def tensor_of(view: Value) -> Value:
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
    return scheduled_stages(tas, loop, arch, copies, {t.load for t in tiles})


def scheduled_stages(tas, loop: CF.ForOp, arch: int, copies: int, loads: set) -> tuple[int, str]:
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
    other op's scratch) as the first load's scratch, so the allocation covers it."""
    if arch not in STREAM_ARCHS:
        return
    decide_loops(tas, arch, plan_stream)
    streams = [d for d in tas.pipelines.values() if isinstance(d, StreamPlan)]
    for decision in streams:
        first = decision.loads[0]
        tas.scratch[first] = max(tas.scratch.get(first, 0), decision.smem_end)
    if streams and tas.tma:         # TMA's buffers (and loads a ring took back) after the rings
        plan_again(tas, arch, {ld for d in streams for ld in d.loads})


def record_unrolled(tas, arch: int) -> None:
    """Where no ring or TMA stream is planned (sm_90/sm_100 without TMA loads): the
    streaming loops of few known trips are unrolled (``unrolled``)."""
    for loop in [op for op in tas.aa.live_ops() if isinstance(op, CF.ForOp)]:
        if loop not in tas.pipelines and is_stream_loop(tas, loop):
            unroll = unrolled(tas, loop, arch)
            if unroll is not None:
                tas.pipelines[loop] = unroll


def stream_plan(tas, op: Operation) -> Optional[StreamPlan]:
    """The ``StreamPlan`` whose loop or load ``op`` is, or None."""
    plan = tas.pipelined.get(op)
    return plan if isinstance(plan, StreamPlan) else None


def decide_loops(tas, arch: int, plan) -> None:
    """``plan(tas, loop, arch)`` for each streaming loop not yet decided: the decision into
    ``tas.pipelines``, a plan's loop and loads into ``tas.pipelined``."""
    for loop in [op for op in tas.aa.live_ops() if isinstance(op, CF.ForOp)]:
        if loop in tas.pipelines or not is_stream_loop(tas, loop):
            continue
        decision = plan(tas, loop, arch)
        tas.pipelines[loop] = decision
        if not isinstance(decision, (str, UnrolledLoop)):
            for op in (loop, *decision.loads):
                tas.pipelined[op] = decision
