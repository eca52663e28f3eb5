"""``tcgen05.mma`` (sm_100 family): the code of the multiplies ``lower/tensor_memory`` chose.

Tensor memory is allocated once per CTA (``init_tensor_memory``, at kernel start: warp 0's
``tcgen05.alloc`` of ``TileAS.tmem_alloc`` columns writes its address to the slot in shared
memory, thread 0 initializes the multiplies' mbarrier, a barrier publishes both) and freed
at the kernel's end (``free_tensor_memory``: a barrier, then warp 0's ``tcgen05.dealloc``).
Multiply ``op`` owns columns ``TileAS.tmem_columns[op]`` on; warp ``w`` of the warpgroup
reaches lanes ``32 (w % 4)`` on, so its addresses carry that lane.

A multiply is issued by thread 0 (``_issue``): per instruction K step and block of A's rows,
``tcgen05.mma.cta_group::1.kind::K [d], a-desc, b-desc, idesc, 1`` with sm_100 matrix
descriptors of the staged operands, then ``tcgen05.commit`` to an mbarrier, which
completes once the MMAs have.

* Outside loops (``tcgen05_multiply``): the operands are stored to shared memory as
  ``tcgen05_staging`` places them and the accumulator to tensor memory (``tcgen05.st``),
  fenced for the async proxy and the tensor core (``fence.proxy.async``,
  ``tcgen05.fence::before_thread_sync``, a barrier, ``::after_thread_sync``); thread 0
  multiplies and commits to the kernel's mbarrier; every thread waits for its phase (a
  counter of the uses so far gives the parity) and reads the accumulator back
  (``tcgen05.ld``, ``tcgen05.wait::ld`` with the registers tied through it).
* A TMA ring's K loop (``emit_ring``): before it the accumulator's initial value goes to
  tensor memory (``ring_start``); each iteration thread 0 multiplies from the stage and
  commits to the stage's "empty" mbarrier, which releases it (``ring_step``); after it
  thread 0 commits to the kernel's mbarrier and every thread waits and reads the result
  (``ring_result``).  The registers of the loop-carried accumulator are never touched
  inside the loop.
"""
from __future__ import annotations

from typing import Optional

from llvmlite import ir

from ..ir.core import Operation
from ..layout.shared import Swizzle
from ..lower.mma_forms import OperandStaging, TensorCoreMma, tcgen05_columns, tcgen05_rows
from . import intrinsics as X
from .emit_mma import stage_operand, tied
from .emit_tma import wait_phase
from .nvvm import I32, KernelEmitter
from .values import TileVal

#: the layout field (bits 61-63) of an sm_100 matrix descriptor per swizzle
DESCRIPTOR_LAYOUT = {Swizzle.NONE: 0, Swizzle.B128: 2, Swizzle.B64: 4, Swizzle.B32: 6}
#: the most registers one ``tcgen05.ld``/``st`` of this module moves
CHUNK = 32
I64 = ir.IntType(64)


def _slot(em: KernelEmitter, offset: int = 0) -> ir.Value:
    """32-bit shared address of the tensor-memory slot (the mbarrier; +8 the address)."""
    return em.b.add(em.b.ptrtoint(em.smem(), I32), ir.Constant(I32, em.tas.tmem_slot + offset))


def init_tensor_memory(em: KernelEmitter) -> None:
    """At kernel start: warp 0 allocates the kernel's columns, thread 0 initializes the
    multiplies' mbarrier; a barrier; every thread reads the allocation's address."""
    b, tas = em.b, em.tas
    with b.if_then(b.icmp_unsigned("<", em.tid, ir.Constant(I32, 32))):
        X.asm(b, ir.VoidType(), f"tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [$0], {tas.tmem_alloc};"
              " tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;", "r,~{memory}", [_slot(em, 8)],
              side_effect=True)
    with b.if_then(b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))):
        X.mbarrier_init(b, _slot(em), 1)
        X.fence_mbarrier_init(b)
    _thread_sync(b)
    em.tmem_base = X.asm(b, I32, "ld.shared.b32 $0, [$1];", "=r,r,~{memory}", [_slot(em, 8)], side_effect=True)
    em.tmem_uses = em.pb.alloca(I32, name="tmem.uses")
    em.pb.store(ir.Constant(I32, 0), em.tmem_uses)


def free_tensor_memory(em: KernelEmitter) -> None:
    """At the kernel's end: every thread is done with tensor memory, warp 0 frees it."""
    b = em.b
    _thread_sync(b)
    with b.if_then(b.icmp_unsigned("<", em.tid, ir.Constant(I32, 32))):
        X.asm(b, ir.VoidType(), f"tcgen05.dealloc.cta_group::1.sync.aligned.b32 $0, {em.tas.tmem_alloc};",
              "r,~{memory}", [em.tmem_base], side_effect=True)


def _fence(b: ir.IRBuilder, which: str) -> None:
    X.asm(b, ir.VoidType(), f"tcgen05.fence::{which}_thread_sync;", "~{memory}", [], side_effect=True)


def _converge(b: ir.IRBuilder) -> None:
    """The warp converged (``bar.warp.sync``) for the ``.aligned`` tensor-memory accesses
    after code where thread 0 went its own way (the MMAs' branch, an epilogue's TMA store)."""
    X.asm(b, ir.VoidType(), "bar.warp.sync -1;", "~{memory}", [], side_effect=True)


def _thread_sync(b: ir.IRBuilder) -> None:
    """A CTA barrier ordering tensor-core work on both sides of it."""
    _fence(b, "before")
    X.barrier(b)
    _fence(b, "after")


# -- accumulator in and out of tensor memory ---------------------------------------------------
def _chunks(em: KernelEmitter, op: Operation, column: Optional[ir.Value] = None
            ) -> list[tuple[ir.Value, int, str, int, Optional[int]]]:
    """(tensor-memory address of this warp, first register, shape, registers, the split
    operand of ``16x32bx2`` or None) of each ``tcgen05.ld``/``st`` that moves ``op``'s
    accumulator (``tcgen05_accumulator``: with 8 warps, warps 4-7 the second half of the
    columns), ``column`` columns further (a second buffer) where given."""
    b = em.b
    m, n = op.result.type.shape
    groups = em.tas.num_warps // 4
    per_group = n // groups
    quarter = b.and_(b.lshr(em.tid, ir.Constant(I32, 5)), ir.Constant(I32, 3))
    base = b.add(em.tmem_base, b.shl(quarter, ir.Constant(I32, 21)))     # lane 32 (w % 4)
    if column is not None:
        base = b.add(base, column)
    if groups > 1:          # em.warp: the layouts' warp (copies in extra warps mirror it)
        base = b.add(base, b.mul(b.lshr(em.warp, ir.Constant(I32, 2)), ir.Constant(I32, per_group)))
    first = em.tas.tmem_columns[op]
    out = []
    if m == 64:        # lanes 16-31 of each warp read the rows' second half (columns c/2 on)
        per = per_group // 2
        x = min(CHUNK, per)
        for c in range(0, per, x):
            out.append((b.add(base, ir.Constant(I32, first + c)), c, f"16x32bx2.x{x}", x, per))
        return out
    x = min(CHUNK, per_group)
    for block in range(m // 128):
        for c in range(0, per_group, x):
            out.append((b.add(base, ir.Constant(I32, first + block * n + c)), block * per_group + c,
                        f"32x32b.x{x}", x, None))
    return out


def _store_accumulator(em: KernelEmitter, op: Operation, acc: TileVal) -> None:
    """``acc``'s registers (``tcgen05_accumulator`` layout) into ``op``'s columns."""
    b = em.b
    words = [v if isinstance(v.type, ir.IntType) else b.bitcast(v, I32) for v in acc.regs]
    _converge(b)
    for addr, first, shape, x, split in _chunks(em, op):
        regs = ", ".join(f"${1 + q}" for q in range(x))
        half = f", {split}" if split is not None else ""
        X.asm(b, ir.VoidType(), f"tcgen05.st.sync.aligned.{shape}.b32 [$0]{half}, {{{regs}}};",
              ",".join(["r"] * (x + 1)) + ",~{memory}", [addr, *words[first:first + x]], side_effect=True)
    X.asm(b, ir.VoidType(), "tcgen05.wait::st.sync.aligned;", "~{memory}", [], side_effect=True)


def _load_accumulator(em: KernelEmitter, op: Operation, like: TileVal, column: Optional[ir.Value] = None
                      ) -> TileVal:
    """``op``'s columns (``column`` further) read back into registers of ``like``'s layout
    and types, tied through ``tcgen05.wait::ld`` so that nothing reads them earlier."""
    b = em.b
    words: list[Optional[ir.Value]] = [None] * len(like.regs)
    for addr, first, shape, x, split in _chunks(em, op, column):
        outs = ", ".join(f"${q}" for q in range(x))
        half = f", {split}" if split is not None else ""
        result = X.asm(b, ir.LiteralStructType([I32] * x),
                       f"tcgen05.ld.sync.aligned.{shape}.b32 {{{outs}}}, [${x}]{half};",
                       ",".join(["=r"] * x + ["r"]) + ",~{memory}", [addr], side_effect=True)
        for q in range(x):
            words[first + q] = b.extract_value(result, q)
    done = tied(b, "tcgen05.wait::ld.sync.aligned;", words)
    return TileVal(like.layout, [w if r.type == I32 else b.bitcast(w, r.type) for w, r in zip(done, like.regs)])


# -- the multiply ----------------------------------------------------------------------------
def _descriptor(b: ir.IRBuilder, start: ir.Value, operand: OperandStaging) -> ir.Value:
    """An sm_100 matrix descriptor (PTX ISA, "Shared memory descriptor"): start address,
    leading and stride byte offsets in 16-byte units (bits 0-13, 16-29, 32-45), the
    version 1 (bits 46-48), base offset 0 (stages are aligned to the swizzle's repeat) and
    the swizzle (bits 61-63)."""
    lbo, sbo = operand.strides(8)
    address = b.zext(b.and_(b.lshr(start, ir.Constant(I32, 4)), ir.Constant(I32, 0x3FFF)), I64)
    return b.or_(address, ir.Constant(I64, (lbo >> 4) << 16 | (sbo >> 4) << 32 | 1 << 46
                                      | DESCRIPTOR_LAYOUT[operand.swizzle] << 61))


def _issue(em: KernelEmitter, op: Operation, form: TensorCoreMma, staging, stage: Optional[ir.Value],
           barrier: Optional[ir.Value], **how) -> None:
    """Thread 0 issues ``op``'s MMAs and their commit (``_issue_mmas``, ``how`` its options)."""
    b = em.b
    with b.if_then(b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))):
        _issue_mmas(em, op, form, staging, stage, barrier, **how)


def _issue_mmas(em: KernelEmitter, op: Operation, form: TensorCoreMma, staging, stage: Optional[ir.Value],
                barrier: Optional[ir.Value], multicast: int = 0, a_fixed: bool = False, zero_start: bool = False,
                column: Optional[ir.Value] = None, also: Optional[ir.Value] = None) -> None:
    """(Run by thread 0) every ``tcgen05.mma`` of ``op`` from its operands staged as
    ``staging`` (``stage`` bytes further: a ring's stage; B's only with ``a_fixed``), then
    the commit to ``barrier`` (with ``multicast`` to that mbarrier in each of the cluster's
    first ``multicast`` CTAs).  ``zero_start``: the first K step does not read the
    accumulator (D = A @ B); ``column``: D that many columns further (a second buffer);
    ``also``: a second mbarrier the MMAs commit to (in this CTA alone)."""
    b = em.b
    (m, k), n = op.lhs.type.shape, op.rhs.type.shape[-1]
    rows = tcgen05_rows(op)
    fixed = base = b.ptrtoint(em.smem(), I32)
    if stage is not None:
        base = b.add(base, stage)
    a_desc = _descriptor(b, b.add(fixed if a_fixed else base, ir.Constant(I32, staging.a.base)), staging.a)
    b_desc = _descriptor(b, b.add(base, ir.Constant(I32, staging.b.base)), staging.b)
    idesc = ir.Constant(I32, form.instruction_descriptor(rows, n, staging.a.transposed, staging.b.transposed))
    text = ("{ .reg .pred p; setp.ne.b32 p, $4, 0; "
            f"tcgen05.mma.cta_group::1.kind::{form.tcgen05_kind} [$0], $1, $2, $3, p; }}")
    d_base = em.tmem_base if column is None else b.add(em.tmem_base, column)
    _fence(b, "after")
    for k0 in range(0, k, form.k):
        b_at = b.add(b_desc, ir.Constant(I64, staging.b.offset(0, k0) >> 4))
        for block in range(m // rows):
            a_at = b.add(a_desc, ir.Constant(I64, staging.a.offset(block * rows, k0) >> 4))
            d = b.add(d_base, ir.Constant(I32, em.tas.tmem_columns[op] + block * n))
            accumulate = ir.Constant(I32, int(k0 > 0 or not zero_start))
            X.asm(b, ir.VoidType(), text, "r,l,l,r,r,~{memory}", [d, a_at, b_at, idesc, accumulate],
                  side_effect=True)
    commit = "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster"
    if barrier is None:             # (another multiply's commit follows)
        return
    if multicast:
        X.asm(b, ir.VoidType(), f"{commit}.multicast::cluster.b64 [$0], $1;", "r,h,~{memory}",
              [barrier, ir.Constant(ir.IntType(16), (1 << multicast) - 1)], side_effect=True)
    else:
        X.asm(b, ir.VoidType(), f"{commit}.b64 [$0];", "r,~{memory}", [barrier], side_effect=True)
    if also is not None:
        X.asm(b, ir.VoidType(), f"{commit}.b64 [$0];", "r,~{memory}", [also], side_effect=True)


def _wait_multiplies(em: KernelEmitter) -> None:
    """Every thread waits for the next phase of the kernel's mbarrier (its uses so far
    give the parity), then orders its tensor-memory reads after the MMAs."""
    b = em.b
    uses = b.load(em.tmem_uses)
    _waited(em, _slot(em), b.and_(uses, ir.Constant(I32, 1)))
    b.store(b.add(uses, ir.Constant(I32, 1)), em.tmem_uses)


def _waited(em: KernelEmitter, barrier: ir.Value, parity: ir.Value) -> None:
    """Every thread waits for phase ``parity`` of the mbarrier the MMAs committed to, the
    warp converged again (thread 0 comes from the MMAs' branch), and orders its
    tensor-memory reads after them."""
    wait_phase(em, barrier, parity)
    _converge(em.b)
    _fence(em.b, "after")


def tcgen05_multiply(em: KernelEmitter, op: Operation, form: TensorCoreMma, lhs: TileVal, rhs: TileVal,
                     acc: TileVal) -> None:
    """C = A @ B + C outside a ring: operands to shared memory, C to tensor memory, thread
    0 multiplies, every thread reads the result back."""
    b = em.b
    staging = em.tas.wgmma_staging[op]
    X.barrier(b)                   # earlier users of the scratch region are done
    stage_operand(em, lhs, staging.a)
    stage_operand(em, rhs, staging.b)
    _store_accumulator(em, op, acc)
    X.fence_proxy_async(b)         # the generic-proxy stores, before the tensor core reads them
    _thread_sync(b)
    _issue(em, op, form, staging, None, _slot(em))
    _wait_multiplies(em)
    em.put(op.result, _load_accumulator(em, op, acc))


# -- in a TMA ring -------------------------------------------------------------------------------
def ring_start(em: KernelEmitter, accumulators: list[tuple[Operation, TileVal]], plan_outer: bool = False
               ) -> None:
    """Before a ring's loop: each multiply's accumulator's initial value into tensor memory,
    ordered before the MMAs by the ring prologue's barrier, or (``plan_outer``: a
    warp-specialized persistent ring, whose consumers run no prologue) by a barrier of the
    consumers."""
    for op, acc in accumulators:
        _store_accumulator(em, op, acc)
    if plan_outer:          # no barrier of the prologue follows: one among the consumers
        _thread_sync(em.b)
    else:
        _fence(em.b, "before")


def ring_step(em: KernelEmitter, op: Operation, plan, stage: ir.Value, empty: Optional[ir.Value],
              column: Optional[ir.Value] = None) -> None:
    """One multiply of an iteration (warp 0, ``emit_ring``): thread 0 multiplies from
    ``stage`` and commits to its "empty" mbarrier (every CTA's where a box is multicast),
    which releases the stage once the MMAs are done with it; no commit where ``empty`` is
    None (the iteration's other multiply, issued after these, commits for both).  A
    ``readback`` ring's MMAs start from zeros and commit to the kernel's mbarrier too,
    whose phase tells every warp that the product is there (``read_product``), into its
    buffer ``column`` columns on where given (``RingPlan.ahead``)."""
    b = em.b
    offset = b.mul(stage, ir.Constant(I32, plan.stage_bytes))
    _issue(em, op, em.tas.tensor_cores[op], plan.staging_of(op), offset, empty, multicast=plan.multicast,
           zero_start=plan.readback, also=_slot(em) if plan.readback else None, column=column)


def product_free(em: KernelEmitter, threads: int) -> None:
    """(A ``readback`` ring, before an iteration's MMAs) every warp has read the previous
    iteration's product out of the columns the MMAs overwrite: a barrier of the ``threads``
    consumers (named barrier 1; 0: the whole CTA) between the tensor-core fences."""
    b = em.b
    _fence(b, "before")
    X.barrier(b, threads)
    _fence(b, "after")


def wait_product(em: KernelEmitter) -> None:
    """(A ``readback`` ring, every thread) the iteration's MMAs have completed: the next
    phase of the kernel's mbarrier, which each iteration's MMAs commit to once."""
    _wait_multiplies(em)


def read_product(em: KernelEmitter, op: Operation, column: Optional[ir.Value] = None) -> None:
    """(A ``readback`` ring, every thread, its MMAs waited for) their product read back
    (from the buffer ``column`` columns on): the multiply's result.  The warp converges
    first: warp 0 may come from issuing MMAs (thread 0's branch)."""
    _converge(em.b)
    em.put(op.result, _load_accumulator(em, op, em.tile(op, 2), column))


def product_buffer(em: KernelEmitter, op: Operation, j: ir.Value) -> ir.Value:
    """Columns from ``op``'s first to the product buffer of the ring's use ``j``
    (``RingPlan.ahead``: two buffers, alternating)."""
    b = em.b
    return b.mul(b.and_(j, ir.Constant(I32, 1)), ir.Constant(I32, tcgen05_columns(op)))


def ring_result(em: KernelEmitter, plan) -> None:
    """After a ring's loop: thread 0 commits (the last MMAs) to the kernel's mbarrier,
    every thread waits and reads the accumulators, the loop's results."""
    b = em.b
    with b.if_then(b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))):
        X.asm(b, ir.VoidType(), "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [$0];",
              "r,~{memory}", [_slot(em)], side_effect=True)
    _wait_multiplies(em)
    for op, c in plan.accumulators:
        result = plan.loop.results[c]
        em.put(result, _load_accumulator(em, op, em.values[result]))


# -- flash attention's TMA ring ----------------------------------------------------------------
def attention_multiply(em: KernelEmitter, op: Operation, plan, k: int, stage: ir.Value) -> None:
    """Multiply ``k`` of an attention ring's iteration (``emit_attention_tma``: every thread
    has waited for its tile of the stage ``stage`` bytes in): P @ V first stores P where
    its staging says (``tcgen05.mma`` reads A from shared memory only); the accumulator
    goes to tensor memory unless it starts as zeros (``plan.zero_start``: the first MMA
    does not read it); thread 0 multiplies, A from its fixed staging (Q before the loop,
    P), B from the stage, and commits to the kernel's mbarrier; every thread waits and
    reads the result back.  That wait also means the stage and P's staging are free.  A
    barrier orders what the warps stored before the MMAs; where nothing was (S from
    zeros), none is needed (the race detector checks tensor memory too)."""
    b = em.b
    staging = plan.stagings[k]
    if k:
        stage_operand(em, em.tile(op, 0), staging.a)
        X.fence_proxy_async(b)      # the generic-proxy stores, before the tensor core reads them
    acc = em.tile(op, 2)
    if not plan.zero_start[k]:
        _store_accumulator(em, op, acc)
    if k or not plan.zero_start[k]:     # the stores, before thread 0's MMAs read them
        _thread_sync(b)
    # (Q @ K^T from zeros stores nothing: the last P @ V's barrier already ordered every
    # warp's reads of S before these MMAs overwrite it, the prologue's the first time)
    _issue(em, op, em.tas.tensor_cores[op], staging, stage, _slot(em), a_fixed=True, zero_start=plan.zero_start[k])
    _wait_multiplies(em)
    em.put(op.result, _load_accumulator(em, op, acc))


def s_buffer(em: KernelEmitter, plan, i: ir.Value) -> ir.Value:
    """Columns from S's first to the buffer of iteration number ``i`` (``s_ahead``: two
    buffers, alternating)."""
    b = em.b
    return b.mul(b.and_(i, ir.Constant(I32, 1)), ir.Constant(I32, tcgen05_columns(plan.mma)))


def issue_s(em: KernelEmitter, plan, stage: ir.Value, column: ir.Value, barrier: ir.Value) -> None:
    """(Thread 0, in the caller's branch) Q @ K^T from Q's staging and K in the stage
    ``stage`` bytes in, from zeros into S's buffer ``column`` columns on, committed to
    ``barrier`` (``s_ahead``)."""
    op = plan.mma
    _issue_mmas(em, op, em.tas.tensor_cores[op], plan.stagings[0], stage, barrier, a_fixed=True, zero_start=True,
                column=column)


def read_s(em: KernelEmitter, plan, barrier: ir.Value, parity: ir.Value, column: ir.Value) -> None:
    """Every thread waits for the phase ``parity`` of S's mbarrier and reads S back from
    its buffer ``column`` columns on: the first multiply's result (``s_ahead``)."""
    _waited(em, barrier, parity)
    op = plan.mma
    em.put(op.result, _load_accumulator(em, op, em.tile(op, 2), column))
