"""TMA rings feeding ``wgmma`` (sm_90): the code of a ``tma_ring.RingPlan``.

An sm_90 ``wgmma`` K loop's plan is a ``RingPlan``: the tiles arrive by TMA, already
in the swizzled layout ``wgmma``'s descriptors read, so no thread touches them:

* prologue (``ring_prologue``): a barrier, then thread 0 initializes one "full" mbarrier
  per stage (arrival count 1), fences the initialization for the async proxy and issues
  the boxes of iterations 0 .. S-2 (each stage: ``arrive.expect_tx`` of the stage's
  bytes, then ``cp.async.bulk.tensor`` per box completing on that mbarrier); a barrier
  publishes the mbarriers;
* steady state (``ring_mma``): a barrier (every warpgroup's ``wgmma`` of iteration i-1
  has completed: each ends with ``wgmma.wait_group 0``), every thread waits on stage
  i % S's mbarrier for phase parity (i / S) % 2 (``try_wait.parity``), ``wgmma`` reads
  the stage (``emit_mma.warpgroup_multiply``: fence, mma_async, commit, wait_group 0),
  then thread 0 issues iteration i + S-1 into stage (i-1) % S, which the barrier freed.
  The copies come after the multiply so that the four warps of each warpgroup reach
  the ``.aligned`` ``wgmma`` instructions together (the elected thread's warp would lag);
  S-2 further stages are in flight meanwhile;
* drain (``ring_drain``): a barrier, and thread 0 invalidates the mbarriers (the next
  entry of the loop initializes them again, its phases from 0).

Iterations past the end issue nothing: their stage's mbarrier is never waited on.  Boxes
outside the tensor land as zeros and count their full bytes on the mbarrier.
"""
from __future__ import annotations

from llvmlite import ir

from ..ir.core import Operation
from ..lower.tma_ring import RingPlan
from . import intrinsics as X
from .abi import param_name
from .emit_async import below, loop_bounds
from .emit_tma import tile_coords, wait_phase
from .nvvm import I32, KernelEmitter


def _shared(em: KernelEmitter, offset: ir.Value) -> ir.Value:
    """32-bit shared address ``offset`` (i32) bytes into the kernel's shared memory."""
    return em.b.add(em.b.ptrtoint(em.smem(), I32), offset)


def _full_barrier(em: KernelEmitter, plan: RingPlan, stage: ir.Value) -> ir.Value:
    b = em.b
    return _shared(em, b.add(ir.Constant(I32, plan.barriers), b.mul(stage, ir.Constant(I32, 8))))


def _elected(em: KernelEmitter) -> ir.Value:
    """The thread that initializes the mbarriers and issues every copy: thread 0."""
    return em.b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))


def ring_issue(em: KernelEmitter, plan: RingPlan, iv: ir.Value, stage: ir.Value) -> None:
    """(The elected thread) the boxes of the tiles iteration ``iv`` loads into ``stage``:
    the stage's bytes announced on its mbarrier, then one ``cp.async.bulk.tensor`` per
    box, box ``q`` of an operand a swizzle atom's row (``box[k][1]`` elements) further
    along its contiguous dim and one box's bytes further in the stage."""
    b = em.b
    block = plan.loop.regions[0].blocks[0]
    barrier = _full_barrier(em, plan, stage)
    X.mbarrier_expect_tx(b, barrier, plan.tx_bytes)
    stage_base = _shared(em, b.mul(stage, ir.Constant(I32, plan.stage_bytes)))
    for k, (ld, operand) in enumerate(zip(plan.loads, (plan.staging.a, plan.staging.b))):
        tmap = X.tensor_map_address(b, param_name(em.fn.name, len(em.fn.entry_block.args) + plan.maps[k]))
        indices = [iv if v is block.args[0] else em.values[v].scalar for v in ld.index]
        row, col = tile_coords(b, indices, tuple(ld.results[0].type.shape))
        rows, inner = plan.box[k]
        for q in range(plan.boxes[k]):
            dst = b.add(stage_base, ir.Constant(I32, operand.base + q * rows * inner * operand.elem_bytes))
            inner_at = b.add(col, ir.Constant(I32, q * inner)) if q else col
            X.bulk_tensor_load(b, dst, tmap, [inner_at, row], barrier)


def ring_prologue(em: KernelEmitter, plan: RingPlan) -> None:
    """Before the loop: the mbarriers, and the boxes of its first S-1 iterations."""
    b = em.b
    lb, ub, step = loop_bounds(em, plan)
    X.barrier(b)                    # earlier users of the shared memory are done with it
    with b.if_then(_elected(em)):
        for s in range(plan.stages):
            X.mbarrier_init(b, _full_barrier(em, plan, ir.Constant(I32, s)), 1)
        X.fence_mbarrier_init(b)
        for s in range(plan.stages - 1):
            iv = b.add(lb, b.mul(step, ir.Constant(step.type, s))) if s else lb
            with b.if_then(below(em, plan, iv, ub)):
                ring_issue(em, plan, iv, ir.Constant(I32, s))
    X.barrier(b)                    # the mbarriers are initialized for every thread


def ring_mma(em: KernelEmitter, op: Operation, plan: RingPlan) -> None:
    """Iteration i of the ring: wait for stage i % S, multiply from it with ``wgmma``,
    refill stage (i-1) % S (released by the barrier) with iteration i + S-1."""
    from .emit_mma import warpgroup_multiply  # noqa: PLC0415  (emit_mma dispatches here)

    b = em.b
    lb, ub, step = loop_bounds(em, plan)
    iv = em.values[plan.loop.regions[0].blocks[0].args[0]].scalar
    i = b.udiv(b.sub(iv, lb), step)
    if i.type != I32:
        i = b.trunc(i, I32)
    stages = ir.Constant(I32, plan.stages)
    X.barrier(b)                    # every warpgroup's wgmma of iteration i-1 has completed
    stage = b.urem(i, stages)
    parity = b.and_(b.udiv(i, stages), ir.Constant(I32, 1))
    wait_phase(em, _full_barrier(em, plan, stage), parity)
    form = em.tas.tensor_cores[op]
    warpgroup_multiply(em, op, form, plan.staging, None, em.tile(op, 2),
                       b.mul(stage, ir.Constant(I32, plan.stage_bytes)))
    ahead = b.add(iv, b.mul(step, ir.Constant(iv.type, plan.stages - 1)))
    with b.if_then(b.and_(_elected(em), below(em, plan, ahead, ub))):
        ring_issue(em, plan, ahead, b.urem(b.add(i, ir.Constant(I32, plan.stages - 1)), stages))


def ring_drain(em: KernelEmitter, plan: RingPlan) -> None:
    """After the loop: every warpgroup is done with the ring; the mbarriers invalidated."""
    b = em.b
    X.barrier(b)
    with b.if_then(_elected(em)):
        for s in range(plan.stages):
            X.asm(b, ir.VoidType(), "mbarrier.inval.shared::cta.b64 [$0];", "r,~{memory}",
                  [_full_barrier(em, plan, ir.Constant(I32, s))], side_effect=True)
