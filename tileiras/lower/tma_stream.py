"""TMA streams: streaming loops on sm_90 and sm_100 issue their TMA loads trips ahead.

A loop that ``stream_pipeline`` would stream through a ``cp.async`` ring on sm_80-89 and
sm_120 (no tensor-core multiply; tiles of partition views loaded at its induction variable)
keeps, on the other TMA targets, the TMA loads ``lower.tma`` gave it and issues them ahead
(``TmaStream``), as NVIDIA's producer warp does: each load's boxes for trips 0 .. S-1 go out
before the loop, each into a stage of its own ring of ``S`` buffers with an mbarrier each
(``TmaPlan.stages``); trip i waits for its stage, reads its registers, and once a CTA
barrier says every thread has, thread 0 issues trip i + S's boxes into the same stage
(``codegen.emit_tma``); they land while trip i computes and the trips after it wait.

The loads must meet ``stream_pipeline``'s conditions that do not concern cp.async
(``stream_pipeline.load_reason``; a write token-ordered after a load does not matter, as the
trip reads its tile before its other ops), and no ``continue`` or ``break`` may end a trip
before them.  ``S`` is the ``num_stages`` hint, else one less than the modulo schedule's
ring (a trip's stage is refilled as soon as it is read, not a trip later) or enough stages
to keep ``TMA_BYTES_IN_FLIGHT`` in flight, whichever is more, at least 1 (NVIDIA's
persistent RMS norm: one 64 KB stage), at most ``MAX_STAGES``, a known trip count and what
the TMA budget holds.  A kernel with a TMA ring or attention ring keeps one stage: theirs
lie after TMA's buffers, placed once.

The first trips' copies go out as early in the loop's block as what they need allows
(``place_tma_prologues``, after ``order-ops``): a norm's normalize pass has its first chunks
in flight while its statistics pass runs.
"""
from __future__ import annotations

from math import prod
from typing import Optional, Union

from ..ir.core import Operation
from ..knobs import knobs
from ..record import record
from ..target import stages_hint
from ..tile import ops_control as CF
from ..tile import ops_memory as MEM
from ..tile.enums import MemoryOrderingSemantics
from ..tile.traits import DATA_RESOURCES, Resource, writes
from .software_pipeline import known_trips, trip_count
from .stream_pipeline import (MAX_STAGES, STREAM_ARCHS, UnrolledLoop, decide_loops, load_reason, record_unrolled,
                              scheduled_stages, streamed_loads, tensor_of, unrolled)
from .tma import MIN_ARCH as MIN_TMA_ARCH
from .tma import last_store, plan_tma

#: bytes a TMA-streamed loop keeps in flight at least (stages of small tiles): about what
#: one SM needs to draw its share of an H100's DRAM bandwidth across the load latency
#: (~25 bytes/ns for ~1 us); NVIDIA's chunked RMS norm keeps 6 stages of 4 KB per load
TMA_BYTES_IN_FLIGHT = 32 * 1024


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
    """Decide every streaming loop of a TMA target that ``stream_pipeline.record_streams``
    does not take (sm_90, sm_100), and record it as that does; the TMA plans of the loads
    it streams are planned again with their stages.  A loop of few known trips whose
    loads do not go through TMA is unrolled (``stream_pipeline.unrolled``), as there."""
    if arch in STREAM_ARCHS or arch < MIN_TMA_ARCH:
        return
    if not tas.tma or not knobs.tma_stream:
        record_unrolled(tas, arch)
        return
    decide_loops(tas, arch, _plan_tma_stream)


def _plan_tma_stream(tas, loop: CF.ForOp, arch: int) -> Union[TmaStream, UnrolledLoop, str]:
    """The loop's ``TmaStream``, its loads' plans replaced in ``tas.tma``, its
    ``UnrolledLoop`` (``stream_pipeline.unrolled``), or why not."""
    unroll = unrolled(tas, loop, arch)
    if unroll is not None:
        return unroll
    if any(f.loop is loop or f.consumer_loop is loop for f in tas.forwarded.values()):
        return "its tiles are kept in registers for a later loop, or read from an earlier one's (forward-loads)"
    loads = [ld for ld in streamed_loads(loop) if ld in tas.tma]
    if not loads:
        return "no tile it loads at its induction variable goes through TMA"
    for ld in loads:
        reason = load_reason(tas, ld, loop, later_writes=True) or _ends_trip_before(loop, ld)
        if reason:
            return reason
    trips = trip_count(loop, tas.aa) if known_trips(loop, tas.aa) else None
    if trips is not None and trips < 2:
        return "it runs once"
    boxes = sum(prod(tas.tma[ld].boxes) for ld in loads)
    wanted, source = scheduled_stages(tas, loop, arch, boxes, set(loads))
    if not stages_hint(tas.aa.function.hints, arch):
        wanted -= 1         # the schedule's ring refills a stage a trip after it is read; this one at once
        covering = -(-TMA_BYTES_IN_FLIGHT // sum(tas.tma[ld].nbytes for ld in loads))
        if covering > wanted:
            wanted, source = covering, f"{TMA_BYTES_IN_FLIGHT // 1024} KB in flight"
    stages = max(1, min(wanted, MAX_STAGES, trips or wanted))
    if any(not isinstance(d, (str, TmaStream, UnrolledLoop)) for d in tas.pipelines.values()):
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
    plans, maps, end = plan_tma(tas.aa, list(tas.tma), f"sm_{arch}", tas.scratch_bytes, None, wanted,
                                last_store(tas, list(tas.tma)))
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
        tensors = {tensor_of(ld.view) for ld in plan.loads}
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
            if view is None or tensor_of(view) in tensors:
                return True
    return False
