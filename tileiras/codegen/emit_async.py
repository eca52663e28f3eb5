"""Software-pipelined tensor-core K loops: the code of a ``software_pipeline.PipelinePlan``.

The plan's two view loads become ``cp.async`` copies into a ring of ``S`` shared-memory
stages; the loop is expanded as

* prologue (``prologue``, before the loop): a barrier (earlier users of the shared
  memory are done with it), then the copies of iterations 0 .. S-2 into stages 0 .. S-2,
  one commit group each;
* steady state (``pipelined_mma``, where the multiply stands): ``cp.async.wait_group
  S-2`` (this thread's copies of iteration i have landed), ``bar.sync`` (so have every
  thread's, and every thread is done reading stage (i-1) % S), the copies of iteration
  i + S-1 into stage (i + S-1) % S = (i-1) % S and their commit, then ``ldmatrix`` and
  ``mma.sync`` from stage i % S while those copies fly;
* drain (``drain``, after the loop): ``cp.async.wait_group 0`` and a barrier, so that no
  copy lands in shared memory that later code reuses.

On sm_90 a ``wgmma`` K loop's plan is a ``tma_ring.RingPlan``, expanded by ``emit_ring``;
where TMA cannot copy its tiles, a ``PipelinePlan`` with a ``staging``: the same ring, its
copies landing in the swizzled layouts ``wgmma``'s descriptors read, each thread's copies
fenced for the async proxy (``fence.proxy.async``) before the barrier, and ``wgmma`` (one
commit group, ``wait_group 0``, so every warpgroup is done with stage i % S before the
next iteration's barrier lets its copies in) instead of ``ldmatrix`` and ``mma.sync``.

On sm_80, copies of an iteration past the loop's end (trip counts below S, the last S-1
iterations) and the parts of a tile outside the tensor are issued with src-size 0: they
read nothing and fill zeros, so the group count stays the same every iteration and the
trip count may be dynamic.  Threads that hold copies of a tile's elements (broadcast
layouts, extra warps) issue nothing for them (``owner_predicate``).
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Callable, Optional

from llvmlite import ir

from ..ir.core import Operation
from ..record import record
from ..lower.attention_pipeline import AttentionPlan
from ..lower.software_pipeline import PipelinePlan
from ..lower.tma_ring import RingPlan
from ..lower.tiles import element_bytes
from . import intrinsics as X
from . import smem_copy
from .emit_memory import Access
from .nvvm import I32, KernelEmitter
from .values import TileVal


def loop_bounds(em: KernelEmitter, plan) -> tuple[ir.Value, ir.Value, ir.Value]:
    """The loop's lower bound, upper bound and step (emitted before the loop)."""
    return tuple(em.scalar(plan.loop, i) for i in range(3))  # type: ignore[return-value]


def iteration_number(em: KernelEmitter, plan) -> ir.Value:
    """The trip number i (i32) of the induction variable of ``plan.loop`` (any pipelined
    loop's plan: attention rings, streamed loops)."""
    b = em.b
    lb, _, step = loop_bounds(em, plan)
    iv = em.values[plan.loop.regions[0].blocks[0].args[0]].scalar
    i = b.udiv(b.sub(iv, lb), step)
    return b.trunc(i, I32) if i.type != I32 else i


def below(em: KernelEmitter, plan, iv: ir.Value, ub: ir.Value) -> ir.Value:
    """Does iteration value ``iv`` run (the loop's own comparison)?"""
    if plan.loop.attributes.get("unsignedCmp"):
        return em.b.icmp_unsigned("<", iv, ub)
    return em.b.icmp_signed("<", iv, ub)


def _copy(b: ir.IRBuilder, nbytes: int, dst: ir.Value, src: ir.Value, src_bytes: ir.Value,
          owner) -> None:
    """One ``cp.async`` of ``nbytes`` (``.cg`` for 16, bypassing L1 as NVIDIA's GEMMs do;
    ``.ca`` for 4 and 8) from global ``src`` to shared ``dst`` (i32), of which
    ``src_bytes`` are read and the rest zero-filled; only where ``owner`` (or always)."""
    cache = "cg" if nbytes == 16 else "ca"
    copy = f"cp.async.{cache}.shared.global [$0], [$1], {nbytes}, $2;"
    args = [dst, b.ptrtoint(src, ir.IntType(64)), src_bytes]
    if owner is None:
        X.asm(b, ir.VoidType(), copy, "r,l,r,~{memory}", args, side_effect=True)
        return
    text = "{\n.reg .pred p;\nsetp.ne.b32 p, $3, 0;\n@p " + copy + "\n}"
    X.asm(b, ir.VoidType(), text, "r,l,r,r,~{memory}", [*args, b.zext(owner, I32)], side_effect=True)

def commit(b: ir.IRBuilder) -> None:
    X.asm(b, ir.VoidType(), "cp.async.commit_group;", "~{memory}", [], side_effect=True)

def wait_group(b: ir.IRBuilder, pending: int) -> None:
    """``cp.async.wait_group pending``: all but this thread's newest ``pending`` groups landed."""
    X.asm(b, ir.VoidType(), f"cp.async.wait_group {pending};", "~{memory}", [], side_effect=True)

def issue_stage(em: KernelEmitter, plan: PipelinePlan, iv: ir.Value, stage: ir.Value, runs: ir.Value,
                deferred: Optional[list] = None) -> None:
    """The copies of the tiles iteration ``iv`` loads into ``stage`` (i32), reading
    nothing where ``runs`` is false, then their commit.  A block-scaled multiply's A
    scales are loaded too (``scale_rows``) and stored to the stage at once, or, given
    ``deferred``, by the callables appended to it (after the iteration's multiply)."""
    b = em.b
    stage_base = b.mul(stage, ir.Constant(I32, plan.stage_bytes))
    operands = [(ld, pitch, nbytes, layout, plan.landed(k), k and plan.b_columns, plan.operand_bytes(k))
                for k, (ld, pitch, nbytes, layout) in enumerate(zip(plan.loads, (plan.a_pitch, plan.b_pitch),
                                                                    plan.copy_bytes, plan.copy_layouts))]
    second = plan.second
    if second is not None:          # a second multiply's B, laid out as the first's
        operands.append((second.load, second.pitch, second.copy, second.layout,
                         second.swizzle.layout() if second.swizzle else None, False, second.at))
    for ld, pitch, nbytes, layout, landed, swap, at in operands:
        to_offset = layout.invert_and_compose(landed) if landed is not None else None

        def offset_of(r: int, layout=layout, pitch=pitch, to_offset=to_offset, swap=swap) -> ir.Value:
            if to_offset is not None:       # the swizzled layout's offset of the chunk
                return em.coords(to_offset, r)[0]
            row, col = em.coords(layout, r)
            if swap:                        # B's columns are the stage's rows
                row, col = col, row
            return b.add(b.mul(row, ir.Constant(I32, pitch)), col)

        copy_tile(em, plan.loop, ld, iv, layout, offset_of, nbytes, b.add(stage_base, ir.Constant(I32, at)), runs)
    if plan.scales:
        store = scale_rows(em, plan, iv, stage_base, runs)
        if deferred is None:
            store()
        else:
            deferred.append(store)
    commit(b)


def scale_rows(em: KernelEmitter, plan: PipelinePlan, iv: ir.Value, stage_base: ir.Value, runs: ir.Value):
    """A block-scaled multiply's scales for iteration ``iv`` into the stage at
    ``stage_base``: B's by ``cp.async`` in the stage's group; A's (rows of a few bytes, too
    narrow for ``cp.async``) loaded by each thread now, zeros where the tile leaves the
    tensor or ``runs`` is false; the callable that stores them to the stage, row-major."""
    b = em.b
    sa, sb = plan.scales.loads
    la, lb = plan.scales.layouts
    n = sb.results[0].type.shape[-1]

    def b_offset(r: int) -> ir.Value:
        row, col = em.coords(lb, r)
        return b.add(b.mul(row, ir.Constant(I32, n)), col)
    copy_tile(em, plan.loop, sb, iv, lb, b_offset, plan.scales.copy, b.add(stage_base, ir.Constant(I32, plan.scales.at[1])),
              runs)
    access = iteration_access(em, plan.loop, sa, iv, la)
    owner = em.owner_predicate(la)
    byte = ir.IntType(8)
    loaded = [X.predicated_load(b, byte, 1, access.addresses[r], b.and_(access.masks[r], runs),
                                [ir.Constant(byte, 0)], "global", access.offsets[r])[0] for r in range(la.size("reg"))]
    at = smem_copy.row_major(sa.results[0].type.shape, 1, plan.scales.at[0])
    return lambda: smem_copy.store(em, TileVal(la, loaded), at, where=None if owner is None else lambda reg: owner,
                                   shift=stage_base)


def iteration_access(em: KernelEmitter, loop: Operation, ld: Operation, iv: ir.Value, layout) -> Access:
    """The global accesses of ``layout``'s registers to the tile ``ld`` (in ``loop``) loads
    at iteration value ``iv`` (a ``unit_reshape``'s B: ``layout`` over its K x N)."""
    indices = iteration_indices(em, loop, ld, iv)
    if ld.view not in em.values:        # a loop-invariant view made in the loop, not reached yet
        em.emit_op(ld.view.owner)
    shape = ld.results[0].type.shape
    if layout.rank != len(shape):
        layout = layout.reshape(shape)
    return Access(em, em.values[ld.view], layout, indices)


def iteration_indices(em: KernelEmitter, loop: Operation, ld: Operation, iv: ir.Value) -> list[ir.Value]:
    """The indices of the view load ``ld`` (in ``loop``) at iteration value ``iv``: the
    induction variable's, values made before the loop, and those the body computes from
    them (``TileAS.index_slices``: computed again here; a shuffle among them must run in
    whole warps)."""
    block = loop.regions[0].blocks[0]
    computed = em.tas.index_slices.get(ld)
    with _sliced(em, loop, computed, iv, {}) if computed is not None else nullcontext():
        return [iv if v is block.args[0] else em.values[v].scalar for v in ld.index]


@record
class GatheredAccess:
    """A gathered tile's per-register addresses and masks (``Access``'s fields)."""
    addresses: list
    offsets: list
    masks: list


def hoist_addresses(em: KernelEmitter, plan) -> None:
    """Before the loop: the tiles a gathered A's copies start from, computed once in the
    layouts the plan's ``AddressSlice`` says (``hoisted``), kept for every copy."""
    addresses = getattr(plan, "a_addresses", None)
    if addresses is None:
        return
    with em.emitted_again(addresses.hoisted):
        em.hoisted_addresses[plan.loads[0]] = {v: em.values[v] for v in addresses.hoisted}


def gathered_access(em: KernelEmitter, plan, ld: Operation, iv: ir.Value) -> GatheredAccess:
    """The pointers and mask of the gathered A at iteration value ``iv``: the loop body's
    address ops emitted again (``AddressSlice.inner``) with ``iv`` for the induction
    variable and the hoisted tiles (``hoist_addresses``) for theirs."""
    with _sliced(em, plan.loop, plan.a_addresses, iv, em.hoisted_addresses[ld]):
        ptrs = em.values[ld.source]
        masks = em.values[ld.mask].regs if ld.mask is not None else [ir.Constant(ir.IntType(1), 1)] * len(ptrs.regs)
        return GatheredAccess(list(ptrs.regs), [0] * len(ptrs.regs), list(masks))


def _sliced(em: KernelEmitter, loop: Operation, slice_, iv: ir.Value, hoisted: dict):
    """``KernelEmitter.emitted_again`` of ``slice_.inner`` (an ``AddressSlice``) with ``iv``
    for the loop's induction variable and ``hoisted`` (value -> TileVal) for the tiles made
    before the loop."""
    arg = loop.regions[0].blocks[0].args[0]
    return em.emitted_again(slice_.inner, given={arg: TileVal(em.tas.layouts[arg], [iv]), **hoisted})


def copy_tile(em: KernelEmitter, loop: Operation, ld: Operation, iv: ir.Value, layout, offset_of, nbytes: int,
              base: ir.Value, runs: ir.Value) -> None:
    """``cp.async`` copies of the tile ``ld`` (in ``loop``) loads at iteration value
    ``iv``: each ``nbytes`` run of ``layout``'s registers (over the tile's dims) starting
    at register ``r`` lands at byte ``base`` (i32, from the start of shared memory) plus
    ``offset_of(r)`` elements; out-of-bounds runs, and all where ``runs`` is false, read
    nothing and fill zeros."""
    b = em.b
    plan = em.tas.pipelined.get(ld)
    if getattr(plan, "a_addresses", None) is not None and ld is plan.loads[0]:
        access = gathered_access(em, plan, ld, iv)
    else:
        access = iteration_access(em, loop, ld, iv, layout)
    esize = element_bytes(ld.results[0].type)
    chunk = nbytes // esize
    owner = em.owner_predicate(layout)
    for r in em.unique_regs(layout):
        if r % chunk:
            continue
        dst = b.add(b.add(b.ptrtoint(em.smem(), I32), base), b.mul(offset_of(r), ir.Constant(I32, esize)))
        src = access.addresses[r]
        if access.offsets[r]:
            src = b.gep(src, [ir.Constant(ir.IntType(64), access.offsets[r])], source_etype=ir.IntType(8))
        ok = b.and_(access.masks[r], runs)
        _copy(b, nbytes, dst, src, b.select(ok, ir.Constant(I32, nbytes), ir.Constant(I32, 0)), owner)

def prologue(em: KernelEmitter, plan) -> Optional[list[ir.Value]]:
    """Before the loop: the copies of its first S-1 iterations, a group each; the registers
    the loop carries beside its results where a TMA ring computes each product an
    iteration ahead (``emit_ring.ring_prologue``)."""
    if isinstance(plan, RingPlan):
        from .emit_ring import ring_prologue  # noqa: PLC0415  (emit_ring builds on this module)

        return ring_prologue(em, plan)
    issue = issue_stage
    b = em.b
    lb, ub, step = loop_bounds(em, plan)
    hoist_addresses(em, plan)
    X.barrier(b)
    if isinstance(plan, AttentionPlan):     # K's and V's groups, Q's fragments (``emit_attention``)
        from .emit_attention import hoist_fragments, issue  # noqa: PLC0415  (it builds on copy_tile)

        hoist_fragments(em, plan.mmas, plan.a_from, plan.a_swizzles)
    for s in range(plan.ahead):
        iv = b.add(lb, b.mul(step, ir.Constant(step.type, s))) if s else lb
        issue(em, plan, iv, ir.Constant(I32, s), below(em, plan, iv, ub))

def registers_if(b: ir.IRBuilder, cond: ir.Value, make: Callable[[], list[ir.Value]],
                 otherwise: list[ir.Value]) -> list[ir.Value]:
    """The registers ``make()`` emits code for under ``cond`` (an i1), where it holds, else
    ``otherwise``'s (zeros of a register's type where that type differs): the first
    product of a loop that computes each an iteration ahead, where the loop may not run."""
    before = b.block
    with b.if_then(cond):
        made = make()
        then = b.block
    merged = []
    for reg, other in zip(made, otherwise):
        phi = b.phi(reg.type)
        phi.add_incoming(reg, then)
        phi.add_incoming(other if other.type == reg.type else ir.Constant(reg.type, 0.0), before)
        merged.append(phi)
    return merged


def complete_last(em: KernelEmitter, op: Operation, plan) -> None:
    """(A ``wgmma`` K loop leaving a group in flight) its last iteration waits for its group
    itself (``wait_group 0``, the accumulator tied through it), so that the loop's result
    leaves complete.  With the wait after the loop's exit instead, where the result joins
    the accumulator of an entry with no iterations, ptxas may copy the in-flight registers
    into the joined ones before that wait: it then serializes every ``wgmma`` of the kernel
    (its C7514 note; on an H100 a persistent 128x128x64 GEMM took 1.24x NVIDIA's time so)."""
    from .emit_mma import wgmma_wait  # noqa: PLC0415  (emit_mma dispatches here)

    b = em.b
    _, ub, step = loop_bounds(em, plan)
    iv = em.values[plan.loop.regions[0].blocks[0].args[0]].scalar
    tv = em.values[op.result]
    before = b.block
    last = em.llfn.append_basic_block("wgmma.last")
    join = em.llfn.append_basic_block("wgmma.join")
    b.cbranch(below(em, plan, b.add(iv, step), ub), join, last)
    b.position_at_end(last)
    done = wgmma_wait(b, tv.regs)
    b.branch(join)
    b.position_at_end(join)
    regs = []
    for early, complete in zip(tv.regs, done):
        phi = b.phi(early.type)
        phi.add_incoming(early, before)
        phi.add_incoming(complete, last)
        regs.append(phi)
    em.put(op.result, TileVal(tv.layout, regs))


def drain(em: KernelEmitter, plan) -> None:
    """After the loop: the copies still in flight (past the end: zero fills) land before
    anything else uses the shared memory."""
    if isinstance(plan, RingPlan):
        from .emit_ring import ring_drain  # noqa: PLC0415  (emit_ring builds on this module)

        ring_drain(em, plan)
        return
    em.ring_stages.pop(plan.loop, None)     # (the loop is emitted again only anew)
    wait_group(em.b, 0)
    X.barrier(em.b)

def steady_state(em: KernelEmitter, plan: PipelinePlan, deferred: Optional[list] = None) -> ir.Value:
    """In iteration i: wait for its stage, issue the copies of iteration i + S-1 into the
    stage iteration i-1 read; the byte offset of stage i % S, which the multiply reads
    (``deferred``: ``issue_stage``'s)."""
    b = em.b
    lb, ub, step = loop_bounds(em, plan)
    iv = em.values[plan.loop.regions[0].blocks[0].args[0]].scalar
    wait_group(b, plan.ahead - 1)
    if plan.staging is not None:    # the copies (generic proxy) before wgmma reads (async proxy)
        X.fence_proxy_async(b)
    X.barrier(b)
    i = b.udiv(b.sub(iv, lb), step)
    if i.type != I32:
        i = b.trunc(i, I32)
    stages = ir.Constant(I32, plan.stages)
    ahead = b.add(iv, b.mul(step, ir.Constant(iv.type, plan.ahead)))
    issue_stage(em, plan, ahead, b.urem(b.add(i, ir.Constant(I32, plan.ahead)), stages),
                below(em, plan, ahead, ub), deferred)
    return b.mul(b.urem(i, stages), ir.Constant(I32, plan.stage_bytes))

def pipelined_mma(em: KernelEmitter, op: Operation, plan) -> None:
    """The multiply of a pipelined loop: the steady state's waits and copies, then
    ``mma.sync`` with fragments read from the current stage (``emit_mma.mma_steps``)."""
    from .emit_mma import TensorCoreOperands, mma_steps, warpgroup_multiply  # noqa: PLC0415  (emit_mma dispatches here)

    if isinstance(plan, RingPlan):
        from .emit_ring import ring_mma  # noqa: PLC0415  (emit_ring builds on this module)

        ring_mma(em, op, plan)
        return
    if isinstance(plan, AttentionPlan):
        from . import emit_attention  # noqa: PLC0415

        emit_attention.pipelined_mma(em, op, plan)
        return

    form = em.tas.tensor_cores[op]
    acc = em.tile(op, 2)
    deferred: list = []
    # the first of the loop's multiplies emitted waits for the stage; a second of A reads it too
    stage_bytes = em.ring_stages.get(plan.loop)
    if stage_bytes is None:
        stage_bytes = em.ring_stages[plan.loop] = steady_state(em, plan, deferred)
    if plan.staging is not None:
        warpgroup_multiply(em, op, form, plan.staging, None, acc, stage_bytes, plan.in_flight)
        if plan.in_flight:
            complete_last(em, op, plan)
        return
    first = em.b.udiv(stage_bytes, ir.Constant(I32, element_bytes(op.lhs.type)))
    second = plan.second if plan.second is not None and op is plan.second.mma else None
    if second is None:
        operands = TensorCoreOperands(em, form, acc.layout, plan.a_pitch, plan.b_pitch, plan.a_bytes, first,
                                      plan.swizzles, plan.b_k_rows, a_columns=plan.a_columns)
    else:                       # A's fragments as the first multiply reads them, its own B's
        swizzles = (plan.swizzles[0], second.swizzle) if plan.swizzles else None
        operands = TensorCoreOperands(em, form, acc.layout, plan.a_pitch, second.pitch, second.at, first, swizzles)
    if plan.scales:
        operands.scaled(plan.scales.at, op.operands[3].type.shape[-1], op.rhs.type.shape[-1], stage_bytes)
    em.put(op.result, TileVal(acc.layout, mma_steps(em, op, form, operands, acc)))
    for store in deferred:      # A's scales of the stage iteration i + S-1 fills, read by now
        store()
