"""Flash attention's K/V loop as a TMA ring: the code of an ``attention_tma.AttentionRingPlan``.

On sm_90 the multiplies are ``wgmma``, below (with ``plan.s_ahead`` Q @ K^T of iteration
i + 1 is issued at the top of iteration i into a second set of accumulator registers the
loop carries, and runs during iteration i's softmax: ``_wgmma_s_ahead``); on sm_100
``tcgen05.mma`` (S and O in tensor memory, ``emit_tcgen05.attention_multiply``; with ``plan.s_ahead`` thread 0 issues Q @ K^T
of iteration i + 1 as soon as S(i) is read, into S's other buffer, on S's own mbarrier, the
first before the loop: ``_s_ahead``), or where not, as on sm_120 (``plan.sync``),
``mma.sync`` with the same ring: ``ldmatrix`` reads K and V where their boxes landed
(``_sync_multiply``: ``emit_attention.multiply_from_stage``), Q's fragments are read into
registers once in the prologue where its boxes landed (``emit_attention.hoist_landed``) or
from a staging (``hoist_fragments``), and after P @ V each thread fences its reads of the
stage for the async proxy before it releases the stage.

The K and V tiles are TMA boxes one elected thread (thread 0) issues straight into the
swizzled layouts the two ``wgmma`` B descriptors read, so no thread loads or stores them.
Each stage has K's and V's "full" mbarrier (one arrival: the elected thread's
``arrive.expect_tx``, then the boxes' bytes) and an "empty" one (every thread arrives
once the ``wgmma`` that read the stage have retired), as the GEMM ring's
(``emit_ring``): no CTA barrier in the loop.

* prologue (``prologue``, before the loop): a barrier (earlier users of the shared memory
  are done with it); thread 0 initializes the mbarriers, fences the initialization for
  the async proxy, issues Q's boxes (the first multiply's A, loaded before the loop:
  the plan's ``q``) straight into its staging on Q's own mbarrier, then iterations
  0 .. S-1 into the fresh stages (each tile: its bytes announced with
  ``arrive.expect_tx``, then its boxes completing on its mbarrier); a barrier publishes
  the mbarriers, and every thread waits for Q's phase 0.  Where Q does not come so, it
  is stored once from registers into its staging first, with ``fence.proxy.async``
  (the async proxy reads it);
* Q @ K^T (``pipelined_mma`` at the first multiply): every thread waits on K's mbarrier
  of stage i % S for parity (i / S) % 2, ``wgmma`` from Q's staging and the stage;
* the online softmax as unpipelined;
* P @ V (at the second multiply): wait on V's mbarrier of stage i % S, ``wgmma`` with P
  from registers and V from the stage.  Each multiply ends with ``wgmma.wait_group 0``,
  so both that read the stage have retired: every thread arrives on its "empty"
  mbarrier; then the elected thread's warp waits (as one, so that it reaches the next
  ``.aligned`` ``wgmma`` converged) for the phase (i / S) % 2 of that "empty" mbarrier
  (every thread released use i / S of the stage) and its thread 0 issues iteration
  i + S into it.  Iterations i+1 .. i+S-1 are in flight meanwhile: S-1 whole iterations
  hide a copy, and two stages suffice.  The other warps of the elected warp's
  warpgroup go on to the next Q @ K^T, where ``wgmma`` waits for the four warps;
* drain (``drain``, after the loop): a barrier, and thread 0 invalidates the mbarriers
  (the next entry of the loop initializes them again, phases from 0).

Iterations past the end issue nothing (their mbarriers are never waited on), so any
trip count, dynamic ones included, needs nothing more; boxes outside the tensor land as
zeros and count their bytes.  The mbarrier and TMA instructions are ``intrinsics``' and
the phase wait ``emit_tma.wait_phase``, as the GEMM ring's, whose shape this follows
with a second tile and "full" mbarrier per stage.
"""
from __future__ import annotations

from typing import Optional

from llvmlite import ir

from ..ir.core import Operation
from ..lower.attention_tma import BARRIERS_PER_STAGE, EMPTY, AttentionRingPlan, RingBox
from . import device_maps
from . import intrinsics as X
from .emit_async import below, iteration_indices, iteration_number, loop_bounds, registers_if
from .emit_attention import hoist_fragments, hoist_landed, multiply_from_stage
from .emit_mma import stage_operand, warpgroup_multiply, wgmma_wait
from .emit_tcgen05 import attention_multiply, issue_s, read_s, s_buffer
from .emit_tma import wait_phase
from .nvvm import I32, KernelEmitter
from .values import TileVal


def _shared(em: KernelEmitter, offset: ir.Value) -> ir.Value:
    """32-bit shared address ``offset`` (i32) bytes into the kernel's shared memory."""
    return em.b.add(em.b.ptrtoint(em.smem(), I32), offset)


def _full(em: KernelEmitter, plan: AttentionRingPlan, stage: ir.Value, tile: int) -> ir.Value:
    """Shared address of ``stage``'s "full" mbarrier of tile ``tile`` (0: K, 1: V), or
    its "empty" one (``tile`` ``EMPTY``)."""
    b = em.b
    per_stage = ir.Constant(I32, BARRIERS_PER_STAGE * 8)
    return _shared(em, b.add(ir.Constant(I32, plan.barrier(0, tile)), b.mul(stage, per_stage)))


def _all_barriers(em: KernelEmitter, plan: AttentionRingPlan) -> list[tuple[ir.Value, int]]:
    """Every mbarrier of the ring with its arrival count: K's and V's "full" ones (the
    elected thread's) and the "empty" one (every thread's) of each stage, and Q's."""
    stages = [(_full(em, plan, ir.Constant(I32, s), k), plan.consumers if k == EMPTY else 1)
              for s in range(plan.stages) for k in range(BARRIERS_PER_STAGE)]
    return (stages + ([(_q_barrier(em, plan), 1)] if plan.q else [])
            + ([(_s_barrier(em, plan), 1)] if plan.s_committed else []))


def _s_barrier(em: KernelEmitter, plan: AttentionRingPlan) -> ir.Value:
    return _shared(em, ir.Constant(I32, plan.s_barrier))


def _issue_s(em: KernelEmitter, plan: AttentionRingPlan, j: ir.Value) -> None:
    """(Thread 0) Q @ K^T of iteration number ``j`` (``s_ahead``): once K(j) has landed in
    its stage (phase (j / S) % 2 of the stage's "full" mbarrier), into S's buffer j % 2."""
    b = em.b
    stage, parity = _stage_of(em, plan, j)
    wait_phase(em, _full(em, plan, stage, 0), parity)
    issue_s(em, plan, b.mul(stage, ir.Constant(I32, plan.stage_bytes)), s_buffer(em, plan, j), _s_barrier(em, plan))


def _stage_of(em: KernelEmitter, plan: AttentionRingPlan, i: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(stage, phase parity of its mbarriers) of iteration number ``i``: i % S, (i / S) % 2."""
    b = em.b
    stages = ir.Constant(I32, plan.stages)
    return b.urem(i, stages), b.and_(b.udiv(i, stages), ir.Constant(I32, 1))


def _q_barrier(em: KernelEmitter, plan: AttentionRingPlan) -> ir.Value:
    return _shared(em, ir.Constant(I32, plan.q_barrier))


def _elected(em: KernelEmitter) -> ir.Value:
    return em.b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))


def _issue_tile(em: KernelEmitter, tile: RingBox, base: ir.Value, barrier: ir.Value, at: dict) -> None:
    """(The elected thread) the boxes of ``tile`` at shared address ``base``, its indices
    the values ``at`` gives (the loop's induction variable: an iteration's) or their own:
    its bytes announced on ``barrier``, then box ``q`` one swizzle atom further along the
    tensor's contiguous dim and one box's bytes further in shared memory."""
    b = em.b
    X.mbarrier_expect_tx(b, barrier, tile.nbytes)
    tmap = device_maps.map_address(em, tile.map_index)
    shape = tile.load.view.type.tile_shape
    indices = [at[v] if v in at else em.values[v].scalar for v in tile.load.index]
    starts = []
    for j in tile.dims:                 # tensor order: the tile dim indexing each tensor dim
        index = b.trunc(indices[j], I32) if indices[j].type.width > 32 else indices[j]
        starts.append(b.mul(index, ir.Constant(I32, shape[j])))
    coords = list(reversed(starts))     # innermost first
    box_bytes = tile.nbytes // tile.boxes
    for q in range(tile.boxes):
        dst = b.add(base, ir.Constant(I32, q * box_bytes)) if q else base
        at = [b.add(coords[0], ir.Constant(I32, q * tile.box[-1])) if q else coords[0], *coords[1:]]
        X.bulk_tensor_load(b, dst, tmap, at, barrier)


def _iteration_at(em: KernelEmitter, plan: AttentionRingPlan, iv: ir.Value) -> dict:
    """The K/V loads' indices of iteration value ``iv`` that are not made before the loop:
    the induction variable, and a page id the body computes (``iteration_indices``: in
    whole warps, before the elected thread issues the boxes)."""
    arg = plan.loop.regions[0].blocks[0].args[0]
    at = {arg: iv}
    for tile in plan.tiles:     # K's and V's page ids are one value: computed once
        if tile.load in em.tas.index_slices and not all(v in at for v in tile.load.index):
            at.update(zip(tile.load.index, iteration_indices(em, plan.loop, tile.load, iv)))
    return at


def _issue(em: KernelEmitter, plan: AttentionRingPlan, at: dict, stage: ir.Value) -> None:
    """(The elected thread) the K and V boxes of the iteration whose indices ``at`` gives
    (``_iteration_at``) into ``stage``."""
    b = em.b
    offset = b.mul(stage, ir.Constant(I32, plan.stage_bytes))
    for k, tile in enumerate(plan.tiles):
        base = _shared(em, b.add(ir.Constant(I32, tile.staging.base), offset))
        _issue_tile(em, tile, base, _full(em, plan, stage, k), at)


def prologue(em: KernelEmitter, plan: AttentionRingPlan) -> Optional[list[ir.Value]]:
    """Before the loop: the mbarriers, Q (its boxes, or staged from registers), and the
    boxes of the first S iterations; every thread waits for Q's boxes.  Where ``wgmma``
    computes S an iteration ahead, S(0)'s registers, which the loop carries (the caller
    makes them its header's phis: ``ahead``)."""
    b = em.b
    lb, ub, step = loop_bounds(em, plan)
    X.barrier(b)                    # earlier users of the shared memory are done with it
    if plan.sync is not None:
        if plan.q is None:          # mma.sync: Q's fragments read once into registers
            hoist_fragments(em, plan.mmas, plan.sync.a_from, plan.sync.a_swizzles, fence=True)
    elif plan.stagings[0].a is not None and plan.q is None:     # Q, made before the loop: staged once
        stage_operand(em, em.tile(plan.mmas[0], 0), plan.stagings[0].a)
        X.fence_proxy_async(b)
    ivs = [b.add(lb, b.mul(step, ir.Constant(step.type, s))) if s else lb for s in range(plan.stages)]
    ats = [_iteration_at(em, plan, iv) for iv in ivs]
    with b.if_then(_elected(em)):
        for barrier, count in _all_barriers(em, plan):
            X.mbarrier_init(b, barrier, count)
        X.fence_mbarrier_init(b)
        if plan.q is not None:      # Q's boxes straight into its staging, read by every iteration
            q_at = _shared(em, ir.Constant(I32, plan.q.staging.base))
            _issue_tile(em, plan.q, q_at, _q_barrier(em, plan), {})
        for s, (iv, at) in enumerate(zip(ivs, ats)):
            with b.if_then(below(em, plan, iv, ub)):
                _issue(em, plan, at, ir.Constant(I32, s))
    X.barrier(b)                    # Q and the mbarriers, for every thread
    if plan.q is not None:
        wait_phase(em, _q_barrier(em, plan), ir.Constant(I32, 0))
        if plan.sync is not None:   # mma.sync: Q's fragments read once into registers
            hoist_landed(em, plan.mmas[0], plan.q.staging)
    if plan.s_ahead and plan.tcgen05:   # the first Q @ K^T, read in iteration 0
        with b.if_then(b.and_(_elected(em), below(em, plan, lb, ub))):
            _issue_s(em, plan, ir.Constant(I32, 0))
    elif plan.s_ahead:
        return _first_s(em, plan)
    return None


def pipelined_mma(em: KernelEmitter, op: Operation, plan: AttentionRingPlan) -> None:
    """One of the loop's two multiplies: wait for its tile of stage i % S and multiply
    from it; after P @ V every thread releases the stage, and the elected thread refills
    it with iteration i + S once all have."""
    b = em.b
    k = plan.mmas.index(op)
    i = iteration_number(em, plan)
    if k == 0 and plan.s_ahead:     # S(i) was issued an iteration ago: read it, issue S(i + 1)
        if plan.tcgen05:
            _s_ahead(em, plan, i)
        else:
            _wgmma_s_ahead(em, op, plan, i)
        return
    stage, parity = _stage_of(em, plan, i)
    wait_phase(em, _full(em, plan, stage, k), parity)
    if plan.sync is not None:
        _sync_multiply(em, op, plan, k, stage)
    elif plan.tcgen05:
        attention_multiply(em, op, plan, k, b.mul(stage, ir.Constant(I32, plan.stage_bytes)))
    else:
        _warpgroup_multiply(em, plan, op, k, stage)
    if k == 1:
        if plan.s_ahead and not plan.tcgen05:  # S(i + 1) completed with P @ V (wait_group 0)
            frame = _loop_frame(em, plan)
            frame.ahead_next = wgmma_wait(b, frame.ahead_next, 0)
        _refill(em, plan, stage, parity)


def _loop_frame(em: KernelEmitter, plan: AttentionRingPlan):
    """The ``emit_control.Frame`` of the ring's loop (its ``ahead`` phis: S(i))."""
    return next(f for f in reversed(em.frames) if f.op is plan.loop)


def _warpgroup_multiply(em: KernelEmitter, plan: AttentionRingPlan, op: Operation, k: int, stage: ir.Value,
                        pending: int = 0) -> None:
    """Multiply ``k`` as ``wgmma`` from ``stage`` (A from its staging or registers), its
    last ``pending`` groups left in flight."""
    staging = plan.stagings[k]
    lhs = em.tile(op, 0) if staging.a is None else None
    warpgroup_multiply(em, op, em.tas.tensor_cores[op], staging, lhs, em.tile(op, 2),
                       em.b.mul(stage, ir.Constant(I32, plan.stage_bytes)), pending=pending, a_fixed=True)


def _wgmma_s(em: KernelEmitter, plan: AttentionRingPlan, op: Operation, stage: ir.Value) -> list[ir.Value]:
    """Q @ K^T from ``stage``'s K into fresh accumulators (S starts as zeros), its
    ``wgmma`` committed and left in flight; their registers (``op``'s result stays)."""
    kept = em.values.get(op.result)
    _warpgroup_multiply(em, plan, op, 0, stage, pending=1)
    regs = em.values[op.result].regs
    if kept is not None:
        em.put(op.result, kept)
    return regs


def _first_s(em: KernelEmitter, plan: AttentionRingPlan) -> list[ir.Value]:
    """Before the loop (``wgmma``, ``s_ahead``): S(0), once K(0) has landed, complete;
    zeros where the loop does not run."""
    b = em.b
    lb, ub, _ = loop_bounds(em, plan)
    op, zero = plan.mmas[0], ir.Constant(I32, 0)

    def first() -> list[ir.Value]:
        wait_phase(em, _full(em, plan, zero, 0), zero)
        return wgmma_wait(b, _wgmma_s(em, plan, op, zero), 0)

    return registers_if(b, below(em, plan, lb, ub), first, em.tile(op, 2).regs)


def _wgmma_s_ahead(em: KernelEmitter, op: Operation, plan: AttentionRingPlan, i: ir.Value) -> None:
    """Q @ K^T of iteration ``i`` when ``wgmma`` computes it an iteration ahead: S(i) is
    the registers the loop carries (complete: the last iteration's P @ V waited for
    them); S(i + 1) is issued now from K(i + 1)'s stage, once its boxes have landed, and
    runs on the tensor core during this iteration's softmax, completing with P @ V.  In
    the last iteration there is no K(i + 1): the multiply reads the stage's old K (no
    copy is in flight there) and its result is not used."""
    b = em.b
    frame = _loop_frame(em, plan)
    em.put(op.result, TileVal(em.tile(op, 2).layout, list(frame.ahead)))
    _, ub, step = loop_bounds(em, plan)
    iv = em.values[plan.loop.regions[0].blocks[0].args[0]].scalar
    stage, parity = _stage_of(em, plan, b.add(i, ir.Constant(I32, 1)))
    with b.if_then(below(em, plan, b.add(iv, step), ub)):
        wait_phase(em, _full(em, plan, stage, 0), parity)
    frame.ahead_next = _wgmma_s(em, plan, op, stage)


def _s_ahead(em: KernelEmitter, plan: AttentionRingPlan, i: ir.Value) -> None:
    """Q @ K^T of iteration ``i`` when the ring issues it an iteration ahead: every thread
    waits for S(i) (phase i % 2 of S's mbarrier) and reads it from buffer i % 2; then
    thread 0 issues S(i + 1), where there is an iteration i + 1, into the other buffer,
    which every warp finished reading in iteration i - 1 (P @ V's barrier since orders
    that), so that the tensor core computes it during this iteration's softmax."""
    b = em.b
    read_s(em, plan, _s_barrier(em, plan), b.and_(i, ir.Constant(I32, 1)), s_buffer(em, plan, i))
    _, ub, step = loop_bounds(em, plan)
    iv = em.values[plan.loop.regions[0].blocks[0].args[0]].scalar
    with b.if_then(b.and_(_elected(em), below(em, plan, b.add(iv, step), ub))):
        _issue_s(em, plan, b.add(i, ir.Constant(I32, 1)))


def _sync_multiply(em: KernelEmitter, op: Operation, plan: AttentionRingPlan, k: int, stage: ir.Value) -> None:
    """Multiply ``k`` as ``mma.sync``, ``ldmatrix`` reading B where its boxes landed in
    ``stage`` (A as the cp.async ring's: ``emit_attention.multiply_from_stage``); after P @ V
    a proxy fence orders this thread's reads of the stage (generic proxy) before its
    refill (the async proxy writes it once every thread has released it)."""
    b = em.b
    tile, sync = plan.tiles[k], plan.sync
    form = tile.staging.form
    base = b.add(ir.Constant(I32, tile.staging.base), b.mul(stage, ir.Constant(I32, plan.stage_bytes)))
    first = b.udiv(base, ir.Constant(I32, form.esize))
    multiply_from_stage(em, op, sync.a_from[k], sync.a_swizzles[k], form, sync.transposed[k], first, False)
    if k == 1:
        X.fence_proxy_async(b)


def release(em: KernelEmitter, empty: ir.Value) -> None:
    """This thread arrives on the "empty" mbarrier ``empty``: its ``wgmma`` that read the
    stage have retired."""
    X.asm(em.b, ir.IntType(64), "mbarrier.arrive.shared::cta.b64 $0, [$1];", "=l,r,~{memory}", [empty],
          side_effect=True)


def _refill(em: KernelEmitter, plan: AttentionRingPlan, stage: ir.Value, parity: ir.Value) -> None:
    """After iteration i's P @ V (both its ``wgmma`` retired: ``wait_group 0``): this
    thread releases ``stage``; the elected thread's warp waits until every thread has
    (phase ``parity`` of the "empty" mbarrier: use i / S of the stage) and its thread 0
    issues iteration i + S into the stage."""
    b = em.b
    empty = _full(em, plan, stage, EMPTY)
    release(em, empty)
    _, ub, step = loop_bounds(em, plan)
    iv = em.values[plan.loop.regions[0].blocks[0].args[0]].scalar
    ahead = b.add(iv, b.mul(step, ir.Constant(iv.type, plan.stages)))
    first_warp = b.icmp_unsigned("<", em.tid, ir.Constant(I32, 32))
    with b.if_then(b.and_(first_warp, below(em, plan, ahead, ub))):
        wait_phase(em, empty, parity)
        at = _iteration_at(em, plan, ahead)     # the whole warp: a page id's shuffle
        with b.if_then(_elected(em)):
            _issue(em, plan, at, stage)


def drain(em: KernelEmitter, plan: AttentionRingPlan) -> None:
    """After the loop: every warp is done with the ring; the mbarriers invalidated."""
    X.barrier(em.b)
    with em.b.if_then(_elected(em)):
        for barrier, _ in _all_barriers(em, plan):
            X.asm(em.b, ir.VoidType(), "mbarrier.inval.shared::cta.b64 [$0];", "r,~{memory}", [barrier],
                  side_effect=True)
