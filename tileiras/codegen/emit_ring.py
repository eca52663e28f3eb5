"""TMA rings feeding ``wgmma`` (sm_90) or ``mma.sync`` (sm_90 and later): the code of a ``tma_ring.RingPlan``.

With ``mma.sync`` consumers (``RingPlan.sync``) the multiply reads its stage with
``ldmatrix`` where the boxes landed the operands (``_sync_multiply``), fences those reads
for the async proxy and releases the stage at once: no group stays in flight.  The rest
is as described below for ``wgmma``.

An sm_90 ``wgmma`` K loop's plan is a ``RingPlan``: the tiles arrive by TMA, already
in the swizzled layout ``wgmma``'s descriptors read, so no thread touches them.  Each
stage has a "full" mbarrier (the elected thread's ``arrive.expect_tx`` and the boxes'
bytes complete it) and an "empty" one (every thread arrives once the ``wgmma`` that read
the stage has retired; the elected thread waits on it before refilling the stage), each
waited on for the parity of the stage's use: use u of stage s (iteration u S + s) waits
"full" for phase u % 2 and, to refill, "empty" for the release of use u-1, parity
(u-1) % 2, which a fresh mbarrier reports complete at once (as CUTLASS's producer starts
its phase at 1).

* kernel start: thread 0 prefetches the ring's tensor maps (``prefetch.tensormap``);
* prologue (``ring_prologue``): a barrier (earlier users of the shared memory are done),
  then thread 0 initializes the mbarriers ("full": one arrival, "empty": every thread),
  fences the initialization for the async proxy and issues the boxes of iterations
  0 .. S-2 (each stage: ``arrive.expect_tx`` of its bytes, then ``cp.async.bulk.tensor``
  per box completing on the stage's "full" mbarrier); a barrier publishes the mbarriers;
* steady state (``ring_mma``), iteration i: every thread waits on stage i % S's "full"
  mbarrier, ``wgmma`` reads the stage (``emit_mma.warpgroup_multiply``: fence,
  mma_async, commit, ``wait_group`` of the plan's ``in_flight``: with 1, iteration i's
  group still runs while iteration i-1's has retired), every thread arrives on the
  "empty" mbarrier of the stage whose group retired (i-1's, or with ``in_flight`` 0
  i's own), then warp 0 waits on the "empty" mbarrier of stage (i + S-1) % S and its
  thread 0 issues iteration i + S-1 into it (the warp waits as one, so that it reaches
  the next ``.aligned`` instruction converged).  The copies come after the multiply so that the four
  warps of each warpgroup reach the ``.aligned`` ``wgmma`` instructions together (the
  elected thread's warp would lag);
* drain (``ring_drain``): ``wgmma.wait_group 0`` with the accumulator tied through it
  (no instruction touches it before), a barrier, and thread 0 invalidates the mbarriers
  (the next entry of the loop initializes them again, its phases from 0).  A persistent
  ring's last iteration waits for its own group instead (``emit_async.complete_last``: ptxas would
  serialize every ``wgmma`` for copies it makes before a wait after the loop).

Warp-specialized (the plan's ``producer_warp``, NVIDIA's split): after the mbarriers'
barrier the CTA branches.  The producer warp group (the CTA's extra warps) lowers its
registers (``setmaxnreg.dec``); its first warp runs its own loop over the iterations
(the "empty" wait as one warp, then its first thread's ``expect_tx`` and boxes), from
iteration 0 (fresh stages pass their "empty" wait at once), and the group leaves the
kernel (``ret``).  The consumers raise their registers (``setmaxnreg.inc``) and run the
steady state without the refill.  The drain's CTA barrier and every later one need no
named barrier among the consumers: a barrier for all the CTA's threads is released once
the threads that have not exited arrive (PTX ISA, ``exit``).

Persistent (the plan's ``persistent``: the loop runs inside another loop, as a persistent
GEMM's K loop inside its loop over output tiles, NVIDIA's form): the mbarriers lie outside
the scratch region and thread 0 initializes them once, at kernel start (``init_rings``);
a K-tile counter (the ring's uses so far, carried across the loop's entries) turns each
iteration i of an entry into the ring's use c + i, whose stage and parity the waits take.
Per entry: a barrier (the previous tile's epilogue is done with the shared memory), then
thread 0 issues uses c .. c+S-2 (no "empty" wait: the previous entry released every
stage before its drain's barrier); the steady state as above; the drain (``_persistent_drain``)
releases the entry's last stage after ``wait_group 0``, advances the counter by the
entry's trip count and ends with a barrier, so that no copy is in flight and no wgmma
reads a stage when the tile's epilogue runs; nothing is invalidated.

Warp-specialized and persistent (NVIDIA's persistent GEMMs): the CTA splits before the
loop over tiles (``split_roles``, called by that loop's emission): after a barrier, the
producer warp group lowers its registers and its first warp runs the loop over tiles
itself, each tile computing again the ops the K loop's bounds and boxes come from (the
plan's ``producer_ops``) and running its own K loop of "empty" waits and boxes, with its
own K-tile counter; then it leaves.  It thus fills the next tile's stages while the
consumers finish the tile's multiply and its epilogue, which uses no shared memory of the
ring (``tma_ring._producer_slice``).  The consumers raise their registers and run the
loop over tiles without prologue, refills or the drain's barrier; their CTA barriers
from the split on are named barrier 1 for the consumers alone
(``KernelBuilder.barrier_threads``), since the producer warp does not reach them.

A second multiply of A (``RingPlan.second``: a LoRA layer's x @ A beside x @ W) reads A
from the same stage and its own B, boxed into the stage after the first's operands: the
first of the two multiplies emitted waits for the stage, the other releases and refills
it (``ring_mma``).  With ``wgmma`` each multiply commits its own group and waits with
``wait_group 1``, so after the second's wait only its own group still reads the stage;
with ``tcgen05`` the first's MMAs are not committed and the second's commit releases the
stage for both; the drain completes (or reads back) both accumulators.

An 8-bit B that lies K x N (``RingPlan.b_landed``) is copied by the consumers, after the
"full" wait, from where its boxes landed it (MN-major) to where ``wgmma`` reads it
(K-major, in the same stage), then fenced for the async proxy and a barrier of the
consumers passed (``_transpose_b``); the stage's next copy of it is written once every
consumer has released the stage.

A ``tcgen05`` ring whose multiply starts from zeros every iteration (``RingPlan.readback``:
the body scales each K tile's product before adding it) commits its MMAs to the kernel's
tensor-memory mbarrier too, and every warp reads the product back each iteration after a
barrier that keeps the MMAs from overwriting a product still being read.  With two product
buffers (``RingPlan.ahead``) the MMAs of iteration i + 1 are issued, into the other buffer,
once those of iteration i have completed and before the warps read their product, so the
tensor core works while the warps scale and add (``_ahead_iteration``).  The ``wgmma`` form
(``TILEIRAS_PRODUCT_AHEAD=1``) carries the completed product in registers: each iteration
takes it, releases its stage, issues the next iteration's group and completes that group
at the iteration's end (``_wgmma_ahead``, ``emit_control.Frame.ahead_done``).

Iterations past the end issue nothing: their stage's mbarriers are never waited on.
Boxes outside the tensor land as zeros and count their full bytes on the mbarrier.
"""
from __future__ import annotations

from typing import Optional

from llvmlite import ir

from ..ir.core import Operation
from ..lower.tma_ring import MAP_BYTES, RingPlan
from . import device_maps, emit_tcgen05, smem_copy
from . import intrinsics as X
from .emit_async import below, complete_last, iteration_number, loop_bounds, registers_if
from .emit_tma import tile_coords, wait_phase
from .nvvm import I32, KernelEmitter
from .smem_copy import SharedTile
from .values import TileVal


def _shared(em: KernelEmitter, offset: ir.Value) -> ir.Value:
    """32-bit shared address ``offset`` (i32) bytes into the kernel's shared memory."""
    return em.b.add(em.b.ptrtoint(em.smem(), I32), offset)


def _stage_barrier(em: KernelEmitter, plan: RingPlan, stage: ir.Value, empty: bool = False) -> ir.Value:
    """Shared address of ``stage``'s "full" (or "empty") mbarrier."""
    b = em.b
    first = plan.barriers + (8 * plan.stages if empty else 0)
    return _shared(em, b.add(ir.Constant(I32, first), b.mul(stage, ir.Constant(I32, 8))))


def _producer_thread(plan: RingPlan) -> int:
    """The thread that issues every copy: the producer warp's first (thread 0 unspecialized)."""
    return 32 * max(plan.producer_warp, 0)


def _elected(em: KernelEmitter, plan: RingPlan) -> ir.Value:
    return em.b.icmp_unsigned("==", em.tid, ir.Constant(I32, _producer_thread(plan)))


def _elected_warp(em: KernelEmitter, plan: RingPlan) -> ir.Value:
    """The elected thread's warp."""
    first = _producer_thread(plan)
    return em.b.icmp_unsigned("<", em.b.sub(em.tid, ir.Constant(I32, first)), ir.Constant(I32, 32))


def _use(b: ir.IRBuilder, plan: RingPlan, j: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(stage, parity of its use) of iteration ``j`` (i32): j % S and (j / S) % 2."""
    stages = ir.Constant(I32, plan.stages)
    return b.urem(j, stages), b.and_(b.udiv(j, stages), ir.Constant(I32, 1))


def _release(em: KernelEmitter, plan: RingPlan, stage: ir.Value) -> None:
    """This thread is done with ``stage``: its ``wgmma`` that read it has retired.  With a
    multicast operand the stage is refilled by every CTA of the cluster: the thread tells
    each of them (its "empty" mbarrier in every CTA)."""
    barrier = _stage_barrier(em, plan, stage, empty=True)
    if plan.multicast:
        for rank in range(plan.multicast):
            X.mbarrier_arrive_remote(em.b, barrier, rank)
        return
    X.asm(em.b, ir.IntType(64), "mbarrier.arrive.shared::cta.b64 $0, [$1];", "=l,r,~{memory}", [barrier],
          side_effect=True)


def _refill(em: KernelEmitter, plan: RingPlan, iv: ir.Value, j: ir.Value) -> None:
    """(The elected thread's warp) iteration ``j``'s boxes (its induction value ``iv``),
    once every thread has released the stage's previous use.  The whole warp waits, so
    that it stays converged for the next ``.aligned`` instruction: only the copies
    themselves are the elected thread's."""
    b = em.b
    stage, parity = _use(b, plan, j)
    wait_phase(em, _stage_barrier(em, plan, stage, empty=True), b.xor(parity, ir.Constant(I32, 1)))
    with b.if_then(_elected(em, plan)):
        ring_issue(em, plan, iv, stage)


def _refill_ahead(em: KernelEmitter, plan: RingPlan, iv: ir.Value, j: ir.Value, ub: ir.Value, step: ir.Value,
                 elected: bool = False, use: Optional[ir.Value] = None) -> None:
    """(Unspecialized) iteration ``j`` + S-1's boxes (induction value ``iv`` S-1 steps on)
    where there is such an iteration, into the stage iteration j - 1 released (``use``:
    the ring's use j + S-1, where the caller has it); with ``elected`` only the elected
    thread's warp takes part (else the caller's branch is warp 0's)."""
    b = em.b
    ahead_iv = b.add(iv, b.mul(step, ir.Constant(iv.type, plan.stages - 1)))
    if elected:
        warp = _elected_warp(em, plan)
        more = b.and_(warp, below(em, plan, ahead_iv, ub))
    else:
        more = below(em, plan, ahead_iv, ub)
    with b.if_then(more):
        _refill(em, plan, ahead_iv, use if use is not None else b.add(j, ir.Constant(I32, plan.stages - 1)))


def ring_issue(em: KernelEmitter, plan: RingPlan, iv: ir.Value, stage: ir.Value) -> None:
    """(The elected thread) the boxes of the tiles iteration ``iv`` loads into ``stage``:
    the stage's bytes announced on its mbarrier, then one ``cp.async.bulk.tensor`` per
    box, box ``q`` of an operand a swizzle atom's row (``box[k][1]`` elements) further
    along its contiguous dim and one box's bytes further in the stage."""
    b = em.b
    block = plan.loop.regions[0].blocks[0]
    barrier = _stage_barrier(em, plan, stage)
    X.mbarrier_expect_tx(b, barrier, plan.tx_bytes)
    stage_base = _shared(em, b.mul(stage, ir.Constant(I32, plan.stage_bytes)))
    for k, (ld, operand) in enumerate(zip(plan.all_loads, plan.operands)):
        tmap = device_maps.map_address(em, plan.maps[k], plan.specs[k])
        indices = [iv if v is block.args[0] else em.values[v].scalar for v in ld.index]
        *outer, row, col = tile_coords(b, indices, tuple(ld.results[0].type.shape))     # a batch's dims first
        if plan.columns(k):     # the view's dims are the tensor's swapped
            row, col = col, row
        rows, inner = plan.box[k]
        base = stage_base
        if k == plan.shared_operand:    # this CTA's slice of each box's rows, to every CTA
            part = rows // plan.multicast
            rank = X.sreg(b, "cluster.ctaid.x", plan.multicast)
            row = b.add(row, b.mul(rank, ir.Constant(I32, part)))
            base = b.add(base, b.mul(rank, ir.Constant(I32, part * inner * operand.elem_bytes)))
        for q in range(plan.boxes[k]):
            dst = b.add(base, ir.Constant(I32, operand.base + q * rows * inner * operand.elem_bytes))
            inner_at = b.add(col, ir.Constant(I32, q * inner)) if q else col
            X.bulk_tensor_load(b, dst, tmap, [inner_at, row, *outer[::-1]], barrier,
                               plan.multicast if k == plan.shared_operand else 0)


def build_maps(em: KernelEmitter, plan: RingPlan) -> None:
    """(After a barrier: the ring's shared memory is free; in the prologue, or once before
    loop ``plan.maps_at``) the issuing warp builds the maps of the operands whose views the
    kernel made (``codegen.device_maps``), each assembled in its area at ``map_staging``."""
    maps = [(plan.specs[k], _shared(em, ir.Constant(I32, plan.map_staging + MAP_BYTES * i)))
            for i, k in enumerate(plan.device_maps)]
    device_maps.build_maps(em, maps, _elected_warp(em, plan), _elected(em, plan))


def _prefetch_maps(em: KernelEmitter, plan: RingPlan) -> None:
    """At kernel start (the entry block), the elected thread prefetches the ring's tensor
    maps (``prefetch.tensormap``, as NVIDIA's producers do), so that the first boxes do
    not wait for the descriptors to come from the parameter space.  Maps the kernel
    builds are not there yet."""
    pb = em.pb
    for k in sorted({m for m in plan.maps if m >= 0}):
        tmap = device_maps.map_address(em, k, b=pb)
        X.asm(pb, ir.VoidType(), f"{{ .reg .pred p; setp.eq.u32 p, $1, {_producer_thread(plan)}; "
              "@p prefetch.tensormap [$0]; }", "l,r,~{memory}", [tmap, em.tid], side_effect=True)


def cluster_exit(em: KernelEmitter) -> None:
    """Before the kernel ends: where a persistent ring multicasts, the CTA waits for the
    others of its cluster (none may still arrive on its mbarriers or copy into its stages
    once it has exited).  Not ``.aligned``: a ``return`` may end the kernel in a branch."""
    if any(isinstance(p, RingPlan) and p.persistent and p.multicast for p in em.tas.pipelines.values()):
        X.cluster_barrier(em.b, aligned=False)


def init_rings(em: KernelEmitter) -> None:
    """At kernel start, the persistent rings' (``RingPlan.persistent``): thread 0
    initializes their mbarriers, a barrier publishes them, and each ring's K-tile counter
    (the uses of its stages so far, an i32 slot LLVM keeps in a register) starts at 0."""
    rings = [plan for plan in em.tas.pipelines.values() if isinstance(plan, RingPlan) and plan.persistent]
    if not rings:
        return
    b = em.b
    with b.if_then(b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))):
        for plan in rings:
            _init_barriers(em, plan)
    if any(plan.multicast for plan in rings):   # every CTA's, before any box lands in it
        X.cluster_barrier(b)
    else:
        X.barrier(b)
    for plan in rings:
        slot = em.pb.alloca(I32, name="ring.count")
        em.pb.store(ir.Constant(I32, 0), slot)
        em.ring_counters[plan.loop] = slot


def _init_barriers(em: KernelEmitter, plan: RingPlan) -> None:
    """(Thread 0) every stage's "full" mbarrier (one arrival) and "empty" one (every
    consumer), fenced for the async proxy."""
    b = em.b
    for s in range(plan.stages):
        X.mbarrier_init(b, _stage_barrier(em, plan, ir.Constant(I32, s)), 1)
        X.mbarrier_init(b, _stage_barrier(em, plan, ir.Constant(I32, s), empty=True), plan.empty_arrivals)
    X.fence_mbarrier_init(b)


def _first_use(em: KernelEmitter, plan: RingPlan) -> ir.Value:
    """The ring's use (i32) that this entry of a persistent ring's loop starts at: the
    K-tile counter, which the drain advances by the entry's trip count."""
    return em.b.load(em.ring_counters[plan.loop])


def ring_prologue(em: KernelEmitter, plan: RingPlan) -> Optional[list[ir.Value]]:
    """Before the loop: the ring's prologue (``_prologue``), then, where the ring computes
    each iteration's product an iteration ahead (``RingPlan.ahead``), the first
    iteration's: ``tcgen05`` MMAs issued, or a ``wgmma`` group completed, whose registers
    the loop carries (returned)."""
    _prologue(em, plan)
    if plan.ahead and not plan.tcgen05:
        return _first_product(em, plan)
    if plan.ahead:
        b = em.b
        lb, ub, _ = loop_bounds(em, plan)
        first = _first_use(em, plan) if plan.persistent else ir.Constant(I32, 0)
        with b.if_then(b.and_(b.icmp_unsigned("<", em.tid, ir.Constant(I32, 32)), below(em, plan, lb, ub))):
            _issue_ahead(em, plan, first)


def _first_product(em: KernelEmitter, plan: RingPlan) -> list[ir.Value]:
    """(``wgmma``, ``ahead``) The product of the ring's use 0, complete; zeros where the
    loop does not run."""
    from .emit_mma import wgmma_wait  # noqa: PLC0415  (emit_mma dispatches here)

    b = em.b
    lb, ub, _ = loop_bounds(em, plan)
    return registers_if(b, below(em, plan, lb, ub), lambda: wgmma_wait(b, _product(em, plan, ir.Constant(I32, 0)), 0),
                        em.tile(plan.mma, 2).regs)


def _product(em: KernelEmitter, plan: RingPlan, j: ir.Value, guard: Optional[ir.Value] = None) -> list[ir.Value]:
    """(``wgmma``, ``ahead``) The multiply of the ring's use ``j`` from zeros, its stage's
    boxes waited for (only where ``guard``, an i1, holds, where given), B transposed first
    where it lands MN-major; its group left in flight: the product's registers."""
    from .emit_mma import warpgroup_multiply  # noqa: PLC0415  (emit_mma dispatches here)

    b, op = em.b, plan.mma
    stage, parity = _use(b, plan, j)
    if guard is None:
        wait_phase(em, _stage_barrier(em, plan, stage), parity)
    else:
        with b.if_then(guard):
            wait_phase(em, _stage_barrier(em, plan, stage), parity)
    shift = b.mul(stage, ir.Constant(I32, plan.stage_bytes))
    if plan.b_landed is not None:
        _transpose_b(em, plan, shift)
    warpgroup_multiply(em, op, em.tas.tensor_cores[op], plan.staging, None, em.tile(op, 2), shift, 1)
    return list(em.values[op.result].regs)


def _wgmma_ahead(em: KernelEmitter, op: Operation, plan: RingPlan, iv: ir.Value, j: ir.Value, ub: ir.Value,
                 step: ir.Value) -> None:
    """Iteration ``j`` of a ``wgmma`` ring that computes each product an iteration ahead:
    its product is the registers the loop carries (complete: the previous iteration's end,
    or the prologue, waited for it), so every thread releases its stage at once; warp 0
    refills the stage iteration j - 1 released; then the group of use j + 1 is issued
    (its boxes waited for where there is an iteration j + 1; in the last iteration it reads
    the stage's old tiles, no copy being in flight there, and its result is not used) and
    runs while the body uses product j; it completes at the iteration's end
    (``Frame.ahead_done``: ``wait_group 0``)."""
    from .emit_mma import wgmma_wait  # noqa: PLC0415  (emit_mma dispatches here)

    b = em.b
    frame = next(f for f in reversed(em.frames) if f.op is plan.loop)
    product = list(frame.ahead)
    _release(em, plan, _use(b, plan, j)[0])
    if not plan.specialized:
        _refill_ahead(em, plan, iv, j, ub, step, elected=True)
    frame.ahead_next = _product(em, plan, b.add(j, ir.Constant(I32, 1)), below(em, plan, b.add(iv, step), ub))
    frame.ahead_done = lambda regs: wgmma_wait(b, regs, 0)
    em.put(op.result, TileVal(em.tile(op, 2).layout, product))


def _issue_ahead(em: KernelEmitter, plan: RingPlan, j: ir.Value) -> None:
    """(Warp 0) the MMAs of the ring's use ``j`` once its stage has landed, into product
    buffer j % 2, committed to the stage's "empty" mbarrier and the kernel's."""
    stage, parity = _use(em.b, plan, j)
    wait_phase(em, _stage_barrier(em, plan, stage), parity)
    emit_tcgen05.ring_step(em, plan.mma, plan, stage, _stage_barrier(em, plan, stage, empty=True),
                           emit_tcgen05.product_buffer(em, plan.mma, j))


def _prologue(em: KernelEmitter, plan: RingPlan) -> None:
    """Before the loop: the tensor maps prefetched at kernel start, a barrier (earlier
    users of the shared memory are done with it: a persistent ring's previous entry and
    the tile epilogue after it), the mbarriers (thread 0; a persistent ring's were
    initialized at kernel start, ``init_rings``), then the boxes of the loop's first S-1
    iterations or, warp-specialized, the producer's branch (``_produce``).  No "empty"
    wait: the stages are fresh, or (persistent: uses c .. c+S-2 of the ring, c the K-tile
    counter) every earlier use was released before the previous drain's barrier."""
    _prefetch_maps(em, plan)
    if plan.tcgen05 and not plan.readback:      # the accumulators' initial values, into tensor memory
        initial = [(op, em.values[plan.loop.initValues[c]]) for op, c in plan.accumulators]
        emit_tcgen05.ring_start(em, initial, plan.outer is not None)
    if plan.outer is not None:      # the producer fills the stages (``split_roles``)
        return
    b = em.b
    lb, ub, step = loop_bounds(em, plan)
    X.barrier(b)
    if plan.device_maps and plan.maps_at is None:
        build_maps(em, plan)
    first = _first_use(em, plan) if plan.persistent else None

    def issue_first() -> None:
        for s in range(plan.stages - 1):
            iv = b.add(lb, b.mul(step, ir.Constant(step.type, s))) if s else lb
            with b.if_then(below(em, plan, iv, ub)):
                use = ir.Constant(I32, s)
                ring_issue(em, plan, iv, use if first is None else _use(b, plan, b.add(first, use))[0])

    thread0 = b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))
    with b.if_then(thread0):
        if first is None:
            _init_barriers(em, plan)
        # a multicast ring's fresh mbarriers must reach every CTA first (below); a
        # persistent one's were, at kernel start, and the previous entry ended on a
        # cluster barrier
        if not plan.specialized and (not plan.multicast or first is not None):
            issue_first()
    if first is not None:
        return
    if plan.multicast:              # every CTA's mbarriers initialized before any box lands
        X.cluster_barrier(b)
        if not plan.specialized:
            with b.if_then(thread0):
                issue_first()
    else:
        X.barrier(b)                # the mbarriers are initialized for every thread
    if plan.specialized:
        _produce(em, plan)


def _setmaxnreg(b: ir.IRBuilder, action: str, count: int) -> None:
    X.asm(b, ir.VoidType(), f"setmaxnreg.{action}.sync.aligned.u32 {count};", "~{memory}", [], side_effect=True)


def _produce(em: KernelEmitter, plan: RingPlan) -> None:
    """The warp-specialized split: the producer warp group (threads from ``consumers``
    on) lowers its registers, its first warp runs the producer loop (per iteration j:
    the "empty" wait, then the elected thread's boxes into stage j % S) and the group
    leaves the kernel; the consumers raise their registers and go on to the loop."""
    lb, ub, step = loop_bounds(em, plan)
    _split(em, plan, lambda: _produce_k(em, plan, lb, ub, step, ir.Constant(I32, 0)))


def _produce_k(em: KernelEmitter, plan: RingPlan, lb: ir.Value, ub: ir.Value, step: ir.Value,
               first: ir.Value) -> ir.Value:
    """(The producer warp) the K loop's iterations from ``lb``: the "empty" wait and the
    boxes of each into the ring's use ``first`` + i; the use after the last."""
    def iteration(iv: ir.Value, j: ir.Value) -> ir.Value:
        _refill(em, plan, iv, j)
        return em.b.add(j, ir.Constant(I32, 1))
    return _loop(em, "ring.produce", lb, bool(plan.loop.attributes.get("unsignedCmp")), ub, step, first, iteration)


def _split(em: KernelEmitter, plan: RingPlan, produce) -> None:
    """The CTA's branch into roles: the producer warp group (threads from ``consumers`` on)
    lowers its registers (``setmaxnreg.dec``), its first warp runs ``produce()`` and the
    group leaves the kernel; the consumers raise theirs and go on."""
    b = em.b
    producer = em.llfn.append_basic_block("ring.producer")
    consumer = em.llfn.append_basic_block("ring.consumer")
    b.cbranch(b.icmp_unsigned(">=", em.tid, ir.Constant(I32, plan.consumers)), producer, consumer)
    b.position_at_end(producer)
    _setmaxnreg(b, "dec", plan.registers[0])
    with b.if_then(_elected_warp(em, plan)):
        produce()
    b.ret_void()
    b.position_at_end(consumer)
    _setmaxnreg(b, "inc", plan.registers[1])


def ring_mma(em: KernelEmitter, op: Operation, plan: RingPlan) -> None:
    """Iteration i of the ring: wait for stage i % S, multiply from it with ``wgmma``
    (``in_flight`` groups left running), release the stage whose group retired, refill
    stage (i + S-1) % S with iteration i + S-1 once every thread has released it.  With a
    second multiply of A (``RingPlan.second``) the first of the two emitted waits for the
    stage and the other, after both have multiplied, releases and refills: each one's
    ``wait_group`` retires the groups before its own, so once the second has waited only
    its own group may still read the stage."""
    from .emit_mma import warpgroup_multiply  # noqa: PLC0415  (emit_mma dispatches here)

    b = em.b
    lb, ub, step = loop_bounds(em, plan)
    iv = em.values[plan.loop.regions[0].blocks[0].args[0]].scalar
    i = iteration_number(em, plan)
    waited = em.ring_stages.pop(plan.loop, None)    # the stage the iteration's other multiply waited for
    if waited is None:
        j = b.add(_first_use(em, plan), i) if plan.persistent else i      # the ring's use
        stage, parity = _use(b, plan, j)
    else:
        (j, stage), parity = waited, None
    last = plan.second is None or waited is not None       # the iteration's last multiply
    if not last:
        em.ring_stages[plan.loop] = (j, stage)
    if plan.ahead and not plan.tcgen05:
        _wgmma_ahead(em, op, plan, iv, j, ub, step)
        return
    if plan.tcgen05:
        _tcgen05_iteration(em, op, plan, iv, j, (stage, parity), ub, step, last)
        return
    if parity is not None:
        wait_phase(em, _stage_barrier(em, plan, stage), parity)
    if plan.b_landed is not None:
        _transpose_b(em, plan, b.mul(stage, ir.Constant(I32, plan.stage_bytes)))
    form = em.tas.tensor_cores[op]
    if plan.sync:
        _sync_multiply(em, op, plan, stage)
    else:
        warpgroup_multiply(em, op, form, plan.staging_of(op), None, em.tile(op, 2),
                           b.mul(stage, ir.Constant(I32, plan.stage_bytes)), plan.in_flight)
    if not last:
        return
    if _completes_in_loop(plan):
        complete_last(em, op, plan)
    ahead = b.add(j, ir.Constant(I32, plan.stages - 1))
    if plan.in_flight:              # iteration i-1's group has retired (none before i = 0)
        with b.if_then(b.icmp_unsigned("!=", i, ir.Constant(I32, 0))):
            _release(em, plan, _use(b, plan, ahead)[0])
    else:
        _release(em, plan, stage)
    if plan.specialized:            # the producer warp refills
        return
    _refill_ahead(em, plan, iv, j, ub, step, elected=True, use=ahead)


def _tcgen05_iteration(em: KernelEmitter, op: Operation, plan: RingPlan, iv: ir.Value, j: ir.Value,
                       use: tuple[ir.Value, Optional[ir.Value]], ub: ir.Value, step: ir.Value, last: bool) -> None:
    """A multiply of iteration ``j`` of a tcgen05 ring (``use``: its stage, and the parity to
    wait for, None where the iteration's other multiply waited): only warp 0 takes part,
    as NVIDIA's MMA warp does.  It waits for the stage, its thread 0 issues the MMAs and
    (the iteration's ``last`` multiply) commits the stage's release to its "empty"
    mbarrier, then (unspecialized) the warp refills stage (j + S-1) % S.  The other warps
    have nothing to do until the drain reads the accumulator: they neither spin on the
    stage's mbarrier nor touch the accumulator's registers."""
    b = em.b
    stage, parity = use
    if plan.ahead:
        _ahead_iteration(em, op, plan, iv, j, ub, step)
        return
    if plan.readback:               # the previous product read by every warp before the MMAs overwrite it
        emit_tcgen05.product_free(em, plan.consumers if plan.specialized else 0)
    with b.if_then(b.icmp_unsigned("<", em.tid, ir.Constant(I32, 32))):
        if parity is not None:
            wait_phase(em, _stage_barrier(em, plan, stage), parity)
        empty = _stage_barrier(em, plan, stage, empty=True) if last else None
        emit_tcgen05.ring_step(em, op, plan, stage, empty)
        if last and not plan.specialized:
            _refill_ahead(em, plan, iv, j, ub, step)
    if plan.readback:
        emit_tcgen05.wait_product(em)
        emit_tcgen05.read_product(em, op)
    else:
        em.put(op.result, em.tile(op, 2))


def _transpose_b(em: KernelEmitter, plan: RingPlan, shift: ir.Value) -> None:
    """(Every consumer, the stage ``shift`` bytes in landed) B copied from where its boxes
    landed it (MN-major) to where ``wgmma`` reads it (K-major, ``plan.staging.b``): each
    thread reads its runs of ``plan.transpose_layout`` and writes them byte by byte; the
    writes (and the reads, before the stage's refill) fenced for the async proxy, and a
    barrier of the consumers before any warp group's ``wgmma`` reads what the others
    wrote."""
    b, layout, landed, wanted = em.b, plan.transpose_layout, plan.b_landed, plan.staging.b
    i8 = ir.IntType(8)
    regs = smem_copy.load(em, layout, SharedTile(landed.tile, 1, landed.base), i8, shift=shift)
    smem_copy.store(em, TileVal(layout, regs), SharedTile(wanted.tile, 1, wanted.base), shift=shift)
    X.fence_proxy_async(b)
    X.barrier(b, plan.consumers if plan.specialized else 0)      # (the producer warps do not take part)


def _ahead_iteration(em: KernelEmitter, op: Operation, plan: RingPlan, iv: ir.Value, j: ir.Value, ub: ir.Value,
                     step: ir.Value) -> None:
    """Iteration ``j`` of a ring whose MMAs run an iteration ahead (``RingPlan.ahead``; use
    j's were issued by the prologue or iteration j - 1): every thread waits for them; a
    barrier (every warp has read use j - 1's product out of the other buffer); warp 0
    refills the stage use j - 1 released (unspecialized) and issues use j + 1's MMAs into
    that buffer; then every thread reads use j's product while they run."""
    b = em.b
    emit_tcgen05.wait_product(em)
    emit_tcgen05.product_free(em, plan.consumers if plan.specialized else 0)
    next_iv = b.add(iv, step)
    with b.if_then(b.icmp_unsigned("<", em.tid, ir.Constant(I32, 32))):
        if not plan.specialized:
            _refill_ahead(em, plan, iv, j, ub, step)
        with b.if_then(below(em, plan, next_iv, ub)):
            _issue_ahead(em, plan, b.add(j, ir.Constant(I32, 1)))
    emit_tcgen05.read_product(em, op, emit_tcgen05.product_buffer(em, op, j))


def _sync_multiply(em: KernelEmitter, op: Operation, plan: RingPlan, stage: ir.Value) -> None:
    """``mma.sync`` from ``stage``: ``ldmatrix`` reads the operands where the boxes landed
    them (``MmaRingStaging``: TMA's swizzles, box after box), then a proxy fence orders
    those reads (generic proxy) before the stage's refill (the async proxy writes it once
    every consumer has released it), as NVIDIA's consumers fence before they arrive."""
    from .emit_mma import TensorCoreOperands, mma_steps  # noqa: PLC0415  (emit_mma dispatches here)

    b, staging = em.b, plan.staging
    form, acc = em.tas.tensor_cores[op], em.tile(op, 2)
    first = b.mul(stage, ir.Constant(I32, plan.stage_bytes // staging.a.elem_bytes))
    operands = TensorCoreOperands(em, form, acc.layout, staging.a.form.pitch, staging.b.form.pitch,
                                  staging.b.base, first, staging.swizzles, staging.b_k_rows,
                                  a_columns=staging.a_columns)
    em.put(op.result, TileVal(acc.layout, mma_steps(em, op, form, operands, acc)))
    X.fence_proxy_async(b)


def _completes_in_loop(plan: RingPlan) -> bool:
    """Does the loop's last iteration wait for its own group (``emit_async.complete_last``), not the
    drain?  Where a group stays in flight and the loop is persistent: its result joins a
    tile's accumulator that skipped the loop."""
    return bool(plan.in_flight) and plan.persistent and not plan.tcgen05


def ring_drain(em: KernelEmitter, plan: RingPlan) -> None:
    """After the loop: the groups still in flight complete (the accumulator, tied through
    ``wait_group 0``, becomes the loop's result); every warpgroup is done with the ring;
    the mbarriers invalidated."""
    from .emit_mma import wgmma_wait  # noqa: PLC0415  (emit_mma dispatches here)

    b = em.b
    em.ring_stages.pop(plan.loop, None)     # (the loop is emitted again only anew)
    if plan.tcgen05:
        if not plan.readback:       # (a read-back product was the body's each trip)
            emit_tcgen05.ring_result(em, plan)
    elif plan.in_flight and not _completes_in_loop(plan):
        results = [plan.loop.results[c] for _, c in plan.accumulators]
        accs = [em.values[result] for result in results]
        done = wgmma_wait(b, [r for acc in accs for r in acc.regs])
        for result, acc in zip(results, accs):
            em.put(result, TileVal(acc.layout, done[:len(acc.regs)]))
            done = done[len(acc.regs):]
    if plan.persistent:
        _persistent_drain(em, plan)
        return
    if plan.tcgen05:
        _released(em, plan)
    if plan.multicast:              # no CTA arrives on this one's mbarriers any more
        X.cluster_barrier(b)
    else:
        X.barrier(b)
    with b.if_then(b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))):
        for s in range(plan.stages):
            for empty in (False, True):
                X.asm(b, ir.VoidType(), "mbarrier.inval.shared::cta.b64 [$0];", "r,~{memory}",
                      [_stage_barrier(em, plan, ir.Constant(I32, s), empty)], side_effect=True)


def _released(em: KernelEmitter, plan: RingPlan) -> None:
    """(Thread 0, before the mbarriers are invalidated) the MMAs' commits have arrived on
    every stage's "empty" mbarrier: the phase of each stage's last use of the n iterations
    has completed (use ``j`` of stage ``j % S``, the last ``s + S ((n - 1 - s) / S)``)."""
    b = em.b
    n = iteration_number(em, plan)      # at the loop's exit: its trip count
    with b.if_then(b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))):
        for s in range(plan.stages):
            used = ir.Constant(I32, s)
            with b.if_then(b.icmp_unsigned(">", n, used)):
                last = b.add(used, b.mul(b.udiv(b.sub(b.sub(n, ir.Constant(I32, 1)), used),
                                                ir.Constant(I32, plan.stages)), ir.Constant(I32, plan.stages)))
                wait_phase(em, _stage_barrier(em, plan, used, empty=True), _use(b, plan, last)[1])


def _persistent_drain(em: KernelEmitter, plan: RingPlan) -> None:
    """After a persistent ring's loop (its groups complete): every thread releases the
    stage of the entry's last use, which no later iteration released (with a group left
    in flight), the K-tile counter advances by the entry's n trips, and a barrier keeps
    later users of the shared memory (the tile's epilogue) from the stages until every
    warpgroup is done with them.  The mbarriers stay for the next entry."""
    b = em.b
    n = iteration_number(em, plan)      # at the loop's exit: its trip count
    first = _first_use(em, plan)
    last = b.add(first, n)
    if plan.in_flight and not plan.tcgen05:
        with b.if_then(b.icmp_unsigned("!=", n, ir.Constant(I32, 0))):
            _release(em, plan, _use(b, plan, b.sub(last, ir.Constant(I32, 1)))[0])
    b.store(last, em.ring_counters[plan.loop])
    if plan.outer is None:          # warp-specialized: the epilogue uses none of the ring
        # multicast: the next entry's first boxes go to every CTA's stages, which all
        # their consumers must have released
        (X.cluster_barrier if plan.multicast else X.barrier)(b)


def split_roles(em: KernelEmitter, plan: RingPlan) -> None:
    """Before the loop over tiles of a warp-specialized persistent ring (``plan.outer``):
    a barrier (the code before is done with the shared memory), then the producer warp
    group's branch (``_produce_tiles``, then it leaves) and the consumers' (registers
    raised, CTA barriers counting only them from here on)."""
    X.barrier(em.b)
    saved = dict(em.values)
    _split(em, plan, lambda: _produce_tiles(em, plan))
    em.values.clear()               # the producer's values exist in its branch alone
    em.values.update(saved)
    em.b.barrier_threads = plan.consumers


def _loop(em: KernelEmitter, name: str, start: ir.Value, unsigned: bool, bound: ir.Value, step: ir.Value,
          count: ir.Value, body) -> ir.Value:
    """A counted loop of the producer: ``body(value, count)`` runs for ``start``, ``start +
    step``, ... while below ``bound`` (compared as the loop being copied compares) and
    returns the count for the next trip; the count after the last trip is returned."""
    b = em.b
    entry = b.block
    head = em.llfn.append_basic_block(name)
    inside = em.llfn.append_basic_block(f"{name}.body")
    done = em.llfn.append_basic_block(f"{name}.done")
    b.branch(head)
    b.position_at_end(head)
    value = b.phi(start.type, name=f"{name}.iv")
    counted = b.phi(I32, name=f"{name}.count")
    value.add_incoming(start, entry)
    counted.add_incoming(count, entry)
    more = b.icmp_unsigned("<", value, bound) if unsigned else b.icmp_signed("<", value, bound)
    b.cbranch(more, inside, done)
    b.position_at_end(inside)
    following = body(value, counted)
    value.add_incoming(b.add(value, step), b.block)
    counted.add_incoming(following, b.block)
    b.branch(head)
    b.position_at_end(done)
    return counted


def _produce_tiles(em: KernelEmitter, plan: RingPlan) -> None:
    """(The producer warp) per trip of the loop over tiles: its induction value, the ops
    the K loop's bounds and boxes come from, then per K iteration the "empty" wait and the
    boxes into the ring's use c + i (c the producer's own K-tile counter, advanced as the
    consumers advance theirs)."""
    outer = plan.outer
    arg = outer.regions[0].blocks[0].args[0]
    lb, ub, step = (em.scalar(outer, i) for i in range(3))

    def tile(t: ir.Value, count: ir.Value) -> ir.Value:
        em.put(arg, TileVal(em.result_layout(arg), [t]))
        for op in plan.producer_ops:
            em.emit_op(op)
        return _produce_k(em, plan, *loop_bounds(em, plan), count)

    _loop(em, "ring.tiles", lb, bool(outer.attributes.get("unsignedCmp")), ub, step, ir.Constant(I32, 0), tile)
