"""Flash attention's K/V loop on sm_90 as a TMA ring: the code of an ``attention_tma.AttentionRingPlan``.

The K and V tiles are TMA boxes one elected thread (thread 0) issues straight into the
swizzled layouts the two ``wgmma`` B descriptors read, so no thread loads or stores them:

* prologue (``prologue``, before the loop): a barrier (earlier users of the shared memory
  are done with it); Q (the first multiply's A, made before the loop) stored once into
  its staging, and ``fence.proxy.async`` (the async proxy reads it); thread 0
  initializes K's and V's "full" mbarrier of every stage (arrival count 1), fences the
  initialization for the async proxy and issues iterations 0 .. S-2 (each tile: its
  bytes announced with ``arrive.expect_tx``, then its boxes completing on its mbarrier);
  a barrier publishes Q and the mbarriers;
* Q @ K^T (``pipelined_mma`` at the first multiply): a barrier (every warp's ``wgmma``
  of iteration i-1 completed: each multiply ends with ``wgmma.wait_group 0``, so stage
  (i-1) % S is free), every thread waits on K's mbarrier of stage i % S for parity
  (i / S) % 2, ``wgmma`` from Q's staging and the stage;
* the online softmax as unpipelined;
* P @ V (at the second multiply): wait on V's mbarrier of stage i % S, ``wgmma`` with P
  from registers and V from the stage; then thread 0 issues iteration i + S-1 into
  stage (i-1) % S, which the barrier freed.  The copies come last so that the next
  ``.aligned`` ``wgmma`` follows a barrier: the elected thread's warp, behind the others
  by the copies' instructions, meets them there (``attention_tma`` keeps S - 2 further
  iterations in flight meanwhile: 3 stages where shared memory allows);
* drain (``drain``, after the loop): a barrier, and thread 0 invalidates the mbarriers
  (the next entry of the loop initializes them again, phases from 0).

Iterations past the end issue nothing (their mbarriers are never waited on), so any
trip count, dynamic ones included, needs nothing more; boxes outside the tensor land as
zeros and count their bytes.  The mbarrier and TMA instructions are ``intrinsics``' and
the phase wait ``emit_tma.wait_phase``, as the GEMM ring's (``emit_async.ring_*``),
whose shape this follows with a second tile and mbarrier per stage.
"""
from __future__ import annotations

from llvmlite import ir

from ..ir.core import Operation
from ..lower.attention_tma import FULL_BARRIERS_PER_STAGE, AttentionRingPlan, RingBox
from . import intrinsics as X
from .abi import param_name
from .emit_async import below, loop_bounds
from .emit_attention import iteration_number
from .emit_mma import stage_operand, warpgroup_multiply
from .emit_tma import wait_phase
from .nvvm import I32, KernelEmitter


def _shared(em: KernelEmitter, offset: ir.Value) -> ir.Value:
    """32-bit shared address ``offset`` (i32) bytes into the kernel's shared memory."""
    return em.b.add(em.b.ptrtoint(em.smem(), I32), offset)


def _full(em: KernelEmitter, plan: AttentionRingPlan, stage: ir.Value, tile: int) -> ir.Value:
    """Shared address of ``stage``'s "full" mbarrier of tile ``tile`` (0: K, 1: V)."""
    b = em.b
    per_stage = ir.Constant(I32, FULL_BARRIERS_PER_STAGE * 8)
    return _shared(em, b.add(ir.Constant(I32, plan.barrier(0, tile)), b.mul(stage, per_stage)))


def _all_full(em: KernelEmitter, plan: AttentionRingPlan) -> list[ir.Value]:
    """Every "full" mbarrier of the ring: K's and V's of each stage."""
    return [_full(em, plan, ir.Constant(I32, s), k) for s in range(plan.stages) for k in range(len(plan.tiles))]


def _elected(em: KernelEmitter) -> ir.Value:
    return em.b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))


def _issue_tile(em: KernelEmitter, plan: AttentionRingPlan, k: int, tile: RingBox, iv: ir.Value,
                stage: ir.Value) -> None:
    """(The elected thread) iteration ``iv``'s boxes of ``tile`` into ``stage``: its bytes
    announced on its mbarrier, then box ``q`` one swizzle atom further along the tensor's
    contiguous dim and one box's bytes further in the stage."""
    b = em.b
    barrier = _full(em, plan, stage, k)
    X.mbarrier_expect_tx(b, barrier, tile.nbytes)
    tmap = X.tensor_map_address(b, param_name(em.fn.name, len(em.fn.entry_block.args) + tile.map_index))
    block = plan.loop.regions[0].blocks[0]
    shape = tile.load.view.type.tile_shape
    indices = [iv if v is block.args[0] else em.values[v].scalar for v in tile.load.index]
    starts = []
    for j in tile.dims:                 # tensor order: the tile dim indexing each tensor dim
        index = b.trunc(indices[j], I32) if indices[j].type.width > 32 else indices[j]
        starts.append(b.mul(index, ir.Constant(I32, shape[j])))
    coords = list(reversed(starts))     # innermost first
    box_bytes = tile.nbytes // tile.boxes
    base = _shared(em, b.add(ir.Constant(I32, tile.staging.base), b.mul(stage, ir.Constant(I32, plan.stage_bytes))))
    for q in range(tile.boxes):
        dst = b.add(base, ir.Constant(I32, q * box_bytes)) if q else base
        at = [b.add(coords[0], ir.Constant(I32, q * tile.box[-1])) if q else coords[0], *coords[1:]]
        X.bulk_tensor_load(b, dst, tmap, at, barrier)


def _issue(em: KernelEmitter, plan: AttentionRingPlan, iv: ir.Value, stage: ir.Value) -> None:
    for k, tile in enumerate(plan.tiles):
        _issue_tile(em, plan, k, tile, iv, stage)


def prologue(em: KernelEmitter, plan: AttentionRingPlan) -> None:
    """Before the loop: Q staged, the mbarriers, and the boxes of the first S-1 iterations."""
    b = em.b
    lb, ub, step = loop_bounds(em, plan)
    X.barrier(b)                    # earlier users of the shared memory are done with it
    q = plan.stagings[0].a
    if q is not None:               # Q, made before the loop: staged once, read by every iteration
        stage_operand(em, em.tile(plan.mmas[0], 0), q)
        X.fence_proxy_async(b)
    with b.if_then(_elected(em)):
        for barrier in _all_full(em, plan):
            X.mbarrier_init(b, barrier, 1)
        X.fence_mbarrier_init(b)
        for s in range(plan.stages - 1):
            iv = b.add(lb, b.mul(step, ir.Constant(step.type, s))) if s else lb
            with b.if_then(below(em, plan, iv, ub)):
                _issue(em, plan, iv, ir.Constant(I32, s))
    X.barrier(b)                    # Q and the mbarriers, for every thread


def pipelined_mma(em: KernelEmitter, op: Operation, plan: AttentionRingPlan) -> None:
    """One of the loop's two multiplies: wait for its tile of stage i % S and multiply
    from it; Q @ K^T first waits for every warp to be done with iteration i-1, and P @ V
    then refills the stage that freed with iteration i + S-1."""
    b = em.b
    k = plan.mmas.index(op)
    i = iteration_number(em, plan)
    stages = ir.Constant(I32, plan.stages)
    if k == 0:
        X.barrier(b)                # every warp's wgmma of iteration i-1 has completed
    stage = b.urem(i, stages)
    wait_phase(em, _full(em, plan, stage, k), b.and_(b.udiv(i, stages), ir.Constant(I32, 1)))
    staging = plan.stagings[k]
    lhs = em.tile(op, 0) if staging.a is None else None
    warpgroup_multiply(em, op, em.tas.tensor_cores[op], staging, lhs, em.tile(op, 2),
                       b.mul(stage, ir.Constant(I32, plan.stage_bytes)), a_fixed=True)
    if k == 1:
        _, ub, step = loop_bounds(em, plan)
        iv = em.values[plan.loop.regions[0].blocks[0].args[0]].scalar
        ahead = b.add(iv, b.mul(step, ir.Constant(iv.type, plan.stages - 1)))
        with b.if_then(b.and_(_elected(em), below(em, plan, ahead, ub))):
            _issue(em, plan, ahead, b.urem(b.add(i, ir.Constant(I32, plan.stages - 1)), stages))


def drain(em: KernelEmitter, plan: AttentionRingPlan) -> None:
    """After the loop: every warp is done with the ring; the mbarriers invalidated."""
    X.barrier(em.b)
    with em.b.if_then(_elected(em)):
        for barrier in _all_full(em, plan):
            X.asm(em.b, ir.VoidType(), "mbarrier.inval.shared::cta.b64 [$0];", "r,~{memory}", [barrier],
                  side_effect=True)
