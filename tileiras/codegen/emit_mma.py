"""Matrix multiply-accumulate (mmaf, mmai, mmaf_scaled).

A and B (and mmaf_scaled's block scales) are staged in shared memory.  f16/bf16 mmaf
whose accumulator TileAS laid out as ``mma.sync`` fragments (``TileAS.tensor_cores``)
runs on tensor cores, ``mma.sync.m16n8k16`` with ldmatrix-fed fragments, on every
architecture from sm_80 (``_tensor_core_mma``), or on sm_90 where TileAS chose the
warpgroup form, ``wgmma.mma_async`` with matrix descriptors over swizzled shared memory
(A from registers where they hold its fragments; ``_warpgroup_mma``).  f64 mmaf runs
as ``mma.sync.m8n8k4`` (DMMA), two a 16x8 accumulator block; batched mmaf as the 2-D
form, one matrix after another; 8-bit mmaf_scaled on sm_12x as the block-scaled
``kind::mxf8f6f4`` form (``_tensor_core_mma``).  The
multiply of a software-pipelined K loop (``TileAS.pipelined``) reads its operands from
the loop's ring of ``cp.async`` stages instead (``emit_async.pipelined_mma``), or on sm_90
from the stage of its TMA ring (``emit_ring.ring_mma``, ``warpgroup_multiply``).
Everything else runs on CUDA cores: each thread walks K for the accumulator elements it
holds as outer products of its rows of A and columns of B read a word or more at a time
(``simt_mma``), multiplying and adding in f32 (i32 for integers) and rounding once to
the result type.  A tcgen05 (sm_100) lowering will sit beside them.
"""
from __future__ import annotations

from typing import Callable, Optional, Union

from llvmlite import ir

from ..errors import CompileError
from ..ir.core import Operation
from ..layout.core import REG
from ..layout.linear import LinearLayout, mma_blocks
from ..layout.shared import Padding
from ..layout.tensor_core import batch_slice
from ..lower.mma_forms import (
    WGMMA_MAX_N,
    MmaSwizzle,
    OperandStaging,
    TensorCoreMma,
    batch_count,
    batch_stride,
    k_steps,
    mma_staging_pitches,
    scale_offsets,
)
from ..lower.attention_tma import AttentionRingPlan
from ..lower.software_pipeline import pipelined_op
from ..lower.tiles import element_bytes
from ..tile import ops_arith as AR
from . import intrinsics as X
from .emit_async import pipelined_mma
from . import smem_copy
from .loops import counted_loop
from .nvvm import I32, KernelEmitter, emits, runtime_mask
from .smem_copy import SharedTile
from .simt_mma import simt_multiply
from .values import TileVal


@emits(AR.MmaFOp, AR.MmaIOp, AR.MmaFScaledOp)
def _mma(em: KernelEmitter, op: Operation) -> None:
    """C += A @ B (optionally batched; mmaf_scaled multiplies A and B by their block
    scales first): in a pipelined K loop's ring where one was planned, else on tensor cores
    where TileAS kept a form (``TileAS.tensor_cores``: the accumulator is laid out as its
    fragments), else on CUDA cores (``simt_mma``)."""
    plan = pipelined_op(em.tas, op)
    if isinstance(plan, AttentionRingPlan):       # sm_90 flash attention's TMA ring
        from . import emit_attention_tma  # noqa: PLC0415  (it builds on warpgroup_multiply)

        emit_attention_tma.pipelined_mma(em, op, plan)
        return
    if plan is not None:
        pipelined_mma(em, op, plan)
        return
    lhs, rhs, acc = (em.tile(op, i) for i in range(3))
    form = em.tas.tensor_cores.get(op)
    if form is not None:
        if form.tcgen05:
            from .emit_tcgen05 import tcgen05_multiply  # noqa: PLC0415  (it builds on this module)

            tcgen05_multiply(em, op, form, lhs, rhs, acc)
        else:
            (_warpgroup_mma if form.warpgroup else _tensor_core_mma)(em, op, form, lhs, rhs, acc)
        return
    simt_multiply(em, op, lhs, rhs, acc)


def _tensor_core_mma(em: KernelEmitter, op: Operation, form: TensorCoreMma, lhs: TileVal, rhs: TileVal,
                     acc: TileVal) -> None:
    """C += A @ B with ``mma.sync.aligned.m16n8kK`` (``mma_forms.tensor_core_mma``): A and B
    are staged in shared memory row-major, rows padded (``mma_forms.mma_staging_pitches``)
    against bank conflicts, B as N rows of K where TileAS says so (``TileAS.mma_b_rows``:
    its registers run along K); then, per K-step of the instruction, every
    warp multiplies the 16x8 blocks of the accumulator it holds (``mma_fragment``:
    registers ``4 (j + i * column_blocks)`` are block (i, j)), A's fragments for all its
    row blocks first, then one column block's B at a time, so few fragment registers are
    live beside the accumulators.  Fragment addresses are two per-thread bases plus
    constants (``TensorCoreOperands``).  Float sums are f32 (an f16 accumulator rounds
    once at the end, as on CUDA cores); integer sums are i32.

    A batched multiply stages each matrix's A and B after the previous matrix's
    (``mma_forms.batch_stride`` elements apart) and each thread multiplies the matrices
    it holds in turn, each accumulator the matrix's registers of the ``batched_fragment``
    (``batch_slice``), its A and B where its register's batch coordinate says.

    A block-scaled form (``form.kind``, sm_12x ``mmaf_scaled``) stages A's and B's scales
    after the operands (``mma_forms.scale_offsets``) and gives each instruction the
    factors of its rows and columns (``TensorCoreOperands.scales``).

    A multiply TileAS staged in K slices (``TileAS.mma_k_slices``: its whole operands
    would not fit the arch's shared memory) stages and multiplies one slice at a time:
    barrier, the slice's columns of A and rows of B (rows as ``mma_staging_pitches`` pads
    them for the slice), barrier, the slice's K steps; the next slice's barrier keeps its
    stores from overwriting what a slow warp still reads.  The sums stay f32 (i32) from
    one slice to the next and round once at the end."""
    b = em.b
    a_t, b_t = op.lhs.type, op.rhs.type
    k_slice = em.tas.mma_k_slices.get(op)
    b_rows = op in em.tas.mma_b_rows        # B as N rows of K, its registers' way
    a_pitch, b_pitch = mma_staging_pitches(op, k_slice, form, b_rows)
    a_bytes = element_bytes(a_t) * a_t.shape[-2] * a_pitch
    batches, stride = batch_count(op), batch_stride(op, k_slice, form, b_rows)
    a_at = _staged(a_t.shape, element_bytes(a_t), a_pitch, stride, 0, -1, k_slice)
    b_at = _staged(b_t.shape[::-1] if b_rows else b_t.shape, element_bytes(b_t), b_pitch, stride, a_bytes, -2,
                   k_slice)
    if b_rows:
        rhs = TileVal(rhs.layout.permute((1, 0)), rhs.regs)

    layout = batch_slice(acc.layout) if len(acc.layout.shape) == 3 else acc.layout
    per = layout.size(REG)
    out_ty = acc.regs[0].type
    sums = acc.regs if k_slice is None else [_widen(b, form, v) for v in acc.regs]
    kdim = a_t.shape[-1]
    for k0 in range(0, kdim, k_slice or kdim):
        X.barrier(b)
        if k_slice is None:
            smem_copy.store(em, lhs, a_at)
            smem_copy.store(em, rhs, b_at)
        else:
            _stage_k_slice(em, lhs, a_at, -1, k0, k_slice)
            _stage_k_slice(em, rhs, b_at, -2, k0, k_slice)
        scales = scale_offsets(op, form) if form.kind else None
        if scales is not None:      # A's and B's block scales, row-major after the operands
            for i in (3, 4):
                smem_copy.store(em, em.tile(op, i), smem_copy.row_major(op.operands[i].type.shape, 1, scales[i - 3]))
        X.barrier(b)
        out: list[ir.Value] = []
        for i in range(acc.layout.size(REG) // per):
            first = (b.mul(em.coords(acc.layout, i * per)[0], ir.Constant(I32, stride)) if batches > 1
                     else None)
            operands = TensorCoreOperands(em, form, layout, a_pitch, b_pitch, a_bytes, first, b_transposed=b_rows)
            if scales is not None:
                operands.scaled(scales, op.operands[3].type.shape[-1], op.rhs.type.shape[-1])
            out += mma_steps(em, op, form, operands, TileVal(layout, sums[i * per:(i + 1) * per]), k_slice)
        sums = out
    em.put(op.result, TileVal(acc.layout, [v if v.type == out_ty else b.fptrunc(v, out_ty) for v in sums]))


def _widen(b: ir.IRBuilder, form: TensorCoreMma, v: ir.Value) -> ir.Value:
    """An accumulator register in the type ``mma.sync`` sums in (f32; f64, i32 as is)."""
    return v if form.integer or form.bits == 64 or v.type == ir.FloatType() else b.fpext(v, ir.FloatType())


def _staged(shape: tuple[int, ...], esize: int, pitch: int, stride: int, base: int, k_dim: int,
            k_slice: Optional[int]) -> SharedTile:
    """Where ``mma.sync`` reads an operand (A's ``k_dim`` is -1, B's -2): rows of ``pitch``
    elements (``mma_staging_pitches``), the matrices of a batch ``stride`` elements apart
    (``batch_stride``: A and B of one matrix, then the next), the K slice of it with
    ``k_slice``."""
    shape = list(shape)
    if k_slice is not None:
        shape[k_dim] = k_slice
    rows, cols = shape[-2:]
    paddings = [Padding(cols, pitch - cols)] if pitch > cols else []
    if len(shape) == 3 and stride > rows * pitch:
        paddings.append(Padding(rows * cols, stride - rows * pitch))
    return smem_copy.row_major(shape, esize, base, tuple(paddings))


def _stage_k_slice(em: KernelEmitter, tv: TileVal, at: SharedTile, k_dim: int, k0: int, k_slice: int) -> None:
    """Store the elements of ``tv`` whose coordinate along ``k_dim`` (A's -1, B's -2) lies
    in [k0, k0 + k_slice) where ``at`` (the slice) keeps them.  Where lanes and warps set no
    bit of that coordinate above the slice, a register's slice is its constant part's,
    known here; otherwise each store is guarded by the thread's coordinate."""
    b = em.b
    dim = len(tv.layout.shape) + k_dim
    high = ~(k_slice - 1)
    known = not runtime_mask(tv.layout, dim) & high

    def where(reg: int) -> Union[bool, ir.Value]:
        if known:
            return tv.layout.apply(reg=reg)[dim] & high == k0
        return b.icmp_unsigned("==", b.and_(em.coords(tv.layout, reg)[dim], ir.Constant(I32, high)),
                               ir.Constant(I32, k0))

    in_slice = tv.layout.map_coords(lambda c: tuple(x & (k_slice - 1) if d == dim else x for d, x in enumerate(c)),
                                    at.shape)
    smem_copy.store(em, tv, at, where=where, placed=in_slice)


def mma_steps(em: KernelEmitter, op: Operation, form: TensorCoreMma, operands: "TensorCoreOperands",
              acc: TileVal, k_extent: Optional[int] = None) -> list[ir.Value]:
    """The K loop of ``mma.sync`` over the staged operands (``operands``): the
    accumulators, summed in f32 (i32 for integers) and rounded once to their type.
    ``k_extent``: the K the staging holds (a K slice), else all of A's."""
    b = em.b
    sum_ty = I32 if form.integer else ir.DoubleType() if form.bits == 64 else ir.FloatType()
    out_ty = acc.regs[0].type
    sums = [v if v.type == sum_ty else b.fpext(v, sum_ty) for v in acc.regs]

    def step(k0: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
        a_frags = operands.a_fragments(k0)
        out = list(sums)
        for j in range(operands.cols_blocks):
            b_frag = operands.b_fragment(k0, j)
            for i, a_frag in enumerate(a_frags):
                base = 4 * (j + operands.cols_blocks * i)
                scales = operands.scales(k0, i, j) if form.kind else None
                out[base:base + 4] = mma_sync(b, form, a_frag, b_frag, out[base:base + 4], scales)
        return out

    k = k_extent or op.lhs.type.shape[-1]           # K, not the pitch
    sums = counted_loop(em, "mma.k", k, form.k, sums, step)
    return [v if v.type == out_ty else b.fptrunc(v, out_ty) for v in sums]


def _warpgroup_mma(em: KernelEmitter, op: Operation, form: TensorCoreMma, lhs: TileVal, rhs: TileVal,
                   acc: TileVal) -> None:
    """C += A @ B with ``wgmma.mma_async.sync.aligned.m64nNkK`` (``mma_forms.tensor_core_mma``
    chose the warpgroup form): A and B are stored to shared memory as TileAS staged them
    (``mma_forms.wgmma_staging``: K-major or MN-major, swizzled), so a matrix descriptor
    (``_operand_descriptor``) describes each 64-row block of A and each block of B's
    columns; or A stays in the registers that already hold its fragments
    (``staging.a_registers``), packed into 32-bit words.  The accumulator's
    ``mma_fragment`` layout gives each warpgroup 64-row blocks (its registers
    ``4 cols_blocks i`` on) and ``staging.columns`` columns of each, 8-column blocks
    ``staging.spacing`` apart, which is ``wgmma``'s D for each 64-row block.  Per
    iteration of up to ``WGMMA_STEPS`` instruction K steps: ``wgmma.fence``, one
    ``mma_async`` per K step and accumulator block, ``commit_group``, ``wait_group 0``;
    fence and wait take the accumulators (and A's words) as tied operands, so no
    instruction touches them in flight.  With A in registers the K loop is unrolled."""
    b = em.b
    staging = em.tas.wgmma_staging[op]
    X.barrier(b)
    if staging.a is not None:
        stage_operand(em, lhs, staging.a)
    stage_operand(em, rhs, staging.b)
    X.fence_proxy_async(b)        # the generic-proxy stores, before the async proxy reads
    X.barrier(b)
    warpgroup_multiply(em, op, form, staging, lhs, acc)


def warpgroup_multiply(em: KernelEmitter, op: Operation, form: TensorCoreMma, staging, lhs: Optional[TileVal],
                       acc: TileVal, stage: Optional[ir.Value] = None, pending: int = 0,
                       a_fixed: bool = False) -> None:
    """The ``wgmma`` K loop of ``_warpgroup_mma`` over operands already in shared memory
    as ``staging`` places them, ``stage`` (i32 bytes, or none) further on: a TMA ring's
    current stage (``emit_ring.ring_mma``), whose last ``pending`` groups may stay in
    flight (``wgmma.wait_group pending`` after each commit); with ``a_fixed`` only B's
    (flash attention's Q stays where it was staged before the loop, ``emit_attention_tma``)."""
    b = em.b
    layout = acc.layout
    rows_blocks, cols_blocks = mma_blocks(layout)
    n, spacing = staging.columns, staging.spacing
    chunk = min(n, WGMMA_MAX_N)
    row0, col0 = em.coords(layout, 0)
    b_desc = _operand_descriptor(em, staging.b, b.and_(col0, ir.Constant(I32, ~7)), spacing, stage)
    row_offsets = [layout.apply(reg=4 * cols_blocks * i)[0] for i in range(rows_blocks)]
    sum_ty = I32 if form.integer else ir.FloatType()
    sums = [v if v.type == sum_ty else b.fpext(v, sum_ty) for v in acc.regs]
    kdim = op.lhs.type.shape[-1]
    k_step, per_iteration = k_steps(staging.b.elem_bytes, kdim)
    i64 = ir.IntType(64)
    transposed = (staging.a is not None and staging.a.transposed, staging.b.transposed)

    def along_k(desc: ir.Value, operand: OperandStaging, k0: ir.Value) -> ir.Value:
        iteration = b.zext(b.udiv(k0, ir.Constant(I32, per_iteration)), i64)
        return b.add(desc, b.mul(iteration, ir.Constant(i64, operand.offset(0, per_iteration) >> 4)))

    def iteration(sums: list[ir.Value], a_of: Callable[[int, int], object], b_k: ir.Value,
                  a_words: list[ir.Value]) -> list[ir.Value]:
        """One commit group: ``a_of(i, s)`` is block i's A (descriptor or words) at step s.
        K step by K step, each step's blocks one after another (as CUTLASS's mainloops
        order them): consecutive ``wgmma`` accumulate into different registers, so the
        tensor cores need not finish one before starting the next (on an H100 a persistent
        128x128x64 GEMM, two 64-row blocks: 1.24x NVIDIA's time with each block's K steps
        in a row)."""
        fenced = wgmma_fence(b, sums + a_words)
        out, words = fenced[:len(sums)], dict(zip(map(id, a_words), fenced[len(sums):]))
        for s in range(0, per_iteration, k_step):
            for i in range(len(row_offsets)):
                for c in range(0, n, chunk):
                    a = a_of(i, s)
                    a = [words[id(w)] for w in a] if isinstance(a, list) else a
                    pair = (a, _desc_add(b, b_k, staging.b.offset(c // 8 * spacing, s) >> 4))
                    regs = [4 * (j + cols_blocks * i) + e for j in range(c // 8, (c + chunk) // 8) for e in range(4)]
                    new = wgmma(b, form, chunk, [pair], [out[q] for q in regs], transposed)
                    for q, v in zip(regs, new):
                        out[q] = v
        X.asm(b, ir.VoidType(), "wgmma.commit_group.sync.aligned;", "~{memory}", [], side_effect=True)
        return wgmma_wait(b, out, pending)

    if staging.a is None:         # A's fragments in registers: every K step unrolled
        if lhs.layout != em.tas.operand_layout(op, 0):
            raise CompileError(f"internal: A arrives as {lhs.layout}, not the layout its fragments were read from")
        bits = 8 * staging.b.elem_bytes
        words = [[_fragment_words(b, lhs, regs, bits) for regs in block] for block in staging.a_registers]
        for k0 in range(0, kdim, per_iteration):
            step0 = k0 // k_step
            live = [w for block in words for it in block[step0:step0 + per_iteration // k_step] for w in it]
            sums = iteration(sums, lambda i, s, k0=k0: words[i][(k0 + s) // k_step],
                             _desc_add(b, b_desc, staging.b.offset(0, k0) >> 4), live)
    else:
        a_desc = _operand_descriptor(em, staging.a, b.and_(row0, ir.Constant(I32, ~63)), 8, None if a_fixed else stage)

        def step(k0: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
            a_k = along_k(a_desc, staging.a, k0)
            return iteration(sums, lambda i, s: _desc_add(b, a_k, staging.a.offset(row_offsets[i], s) >> 4),
                             along_k(b_desc, staging.b, k0), [])

        sums = counted_loop(em, "wgmma.k", kdim, per_iteration, sums, step)
    out_ty = acc.regs[0].type
    em.put(op.result, TileVal(layout, [v if v.type == out_ty else b.fptrunc(v, out_ty) for v in sums]))


def _fragment_words(b: ir.IRBuilder, tv: TileVal, regs: tuple[int, ...], bits: int) -> list[ir.Value]:
    """A's fragment registers ``regs`` (elements, in the fragment's order) packed into the
    32-bit words ``wgmma`` reads, low bits first."""
    per = 32 // bits
    words = []
    for first in range(0, len(regs), per):
        raw = [tv.regs[r] if isinstance(tv.regs[r].type, ir.IntType) else b.bitcast(tv.regs[r], ir.IntType(bits))
               for r in regs[first:first + per]]
        word = b.zext(raw[0], I32) if bits < 32 else raw[0]
        for e, part in enumerate(raw[1:], 1):
            word = b.or_(word, b.shl(b.zext(part, I32), ir.Constant(I32, e * bits)))
        words.append(word)
    return words


def stage_operand(em: KernelEmitter, tv: TileVal, operand: OperandStaging) -> None:
    """Store an operand's registers where ``operand`` stages it."""
    paddings = () if operand.padding is None else (operand.padding,)
    smem_copy.store(em, tv, SharedTile(operand.tile, operand.elem_bytes, operand.base, paddings))


def _operand_descriptor(em: KernelEmitter, operand: OperandStaging, origin: ir.Value, spacing: int,
                        stage: Optional[ir.Value] = None) -> ir.Value:
    """The descriptor of this warpgroup's first block of ``operand`` at K = 0: its first
    row of A (column of B) is ``origin``, ``origin / operand.origin_unit`` steps of
    ``offset(origin_unit, 0)`` bytes past the operand's start (``stage`` bytes further
    where given); strides from the layout."""
    b = em.b
    start = b.add(b.ptrtoint(em.smem(), I32), ir.Constant(I32, operand.base))
    if stage is not None:
        start = b.add(start, stage)
    unit = operand.origin_unit
    if unit:
        steps = b.lshr(origin, ir.Constant(I32, unit.bit_length() - 1))
        start = b.add(start, b.mul(steps, ir.Constant(I32, operand.offset(unit, 0))))
    return matrix_descriptor(b, start, *operand.strides(spacing), operand.mode)


def _desc_add(b: ir.IRBuilder, desc: ir.Value, units: int) -> ir.Value:
    return b.add(desc, ir.Constant(ir.IntType(64), units)) if units else desc


def matrix_descriptor(b: ir.IRBuilder, start: ir.Value, lbo: int, sbo: int, mode: int = 0) -> ir.Value:
    """A wgmma matrix descriptor (PTX ISA, "Matrix Descriptor Format"): the shared address
    ``start`` (i32) and the leading and stride byte offsets, each in 16-byte units in bits
    0-13, 16-29 and 32-45, base offset 0 (the buffer is aligned to the swizzle's repeat)
    and the swizzle ``mode`` in bits 62-63."""
    i64 = ir.IntType(64)
    address = b.zext(b.and_(b.lshr(start, ir.Constant(I32, 4)), ir.Constant(I32, 0x3FFF)), i64)
    return b.or_(address, ir.Constant(i64, (lbo >> 4) << 16 | (sbo >> 4) << 32 | mode << 62))


def wgmma(b: ir.IRBuilder, form: TensorCoreMma, n: int, pairs: list[tuple[object, ir.Value]], d: list[ir.Value],
          transposed: tuple[bool, bool] = (False, False)) -> list[ir.Value]:
    """``wgmma.mma_async`` of ``form`` for an m64 x ``n`` block, one per (A, B) in ``pairs``
    (A a descriptor, or a list of its fragment's 32-bit words; B a descriptor), into the
    accumulators ``d`` (tied: they stay in their registers); ``scale-d`` is 1; the
    immediates after it: scales of A and B for floats, and for 16-bit types whether A
    (from shared memory) and B are MN-major (``transposed``); none for integers."""
    count = len(d)
    acc = "{" + ", ".join(f"${q}" for q in range(count)) + "}"
    args: list[ir.Value] = []
    classes: list[str] = []
    lines = ["{", ".reg .pred p;", "setp.ne.b32 p, 1, 0;"]
    for a, desc in pairs:
        words = a if isinstance(a, list) else [a]
        names = [f"${count + len(args) + q}" for q in range(len(words))]
        args += words
        classes += ["r" if isinstance(a, list) else "l"] * len(words)
        trans = transposed[1:] if isinstance(a, list) else transposed
        tail = "p" if form.integer else "p, 1, 1" + "".join(f", {int(t)}" for t in trans) if form.bits == 16 else "p, 1, 1"
        a_text = "{" + ", ".join(names) + "}" if isinstance(a, list) else names[0]
        lines.append(f"{form.wgmma_opcode(n)} {acc}, {a_text}, ${count + len(args)}, {tail};")
        args.append(desc)
        classes.append("l")
    lines.append("}")
    reg = X.reg_class(d[0].type)[0]
    constraints = ",".join([f"={reg}"] * count + classes + [str(q) for q in range(count)] + ["~{memory}"])
    result = X.asm(b, ir.LiteralStructType([d[0].type] * count), "\n".join(lines), constraints,
                   [*args, *d], side_effect=True)
    return [b.extract_value(result, q) for q in range(count)]


def tied(b: ir.IRBuilder, text: str, values: list[ir.Value]) -> list[ir.Value]:
    """``text`` as inline asm that takes and gives back ``values`` in the same registers."""
    count = len(values)
    classes = [X.reg_class(v.type)[0] for v in values]
    constraints = ",".join([f"={c}" for c in classes] + [str(q) for q in range(count)] + ["~{memory}"])
    result = X.asm(b, ir.LiteralStructType([v.type for v in values]), text, constraints, values, side_effect=True)
    return [b.extract_value(result, q) for q in range(count)]


def wgmma_fence(b: ir.IRBuilder, accumulators: list[ir.Value]) -> list[ir.Value]:
    """``wgmma.fence``: after it the accumulators (tied through it) may go to mma_async."""
    return tied(b, "wgmma.fence.sync.aligned;", accumulators)


def wgmma_wait(b: ir.IRBuilder, accumulators: list[ir.Value], pending: int = 0) -> list[ir.Value]:
    """``wgmma.wait_group pending``: all but this warp's newest ``pending`` groups have
    completed; the accumulators (tied through it) are read only after a ``wait_group 0``
    (with ``pending`` 1 they go on to the next group's ``wgmma.fence`` untouched)."""
    return tied(b, f"wgmma.wait_group.sync.aligned {pending};", accumulators)


class TensorCoreOperands:
    """Where this thread's mma fragments sit in the row-major A (M x K) and B (K x N)
    that ``_tensor_core_mma`` staged in shared memory, rows ``k`` and ``n`` elements apart
    (the padded pitches), as the PTX ISA fragment tables place them:

    * 16- and 8-bit A: ``ldmatrix.x4``, lane l pointing at row l % 16 of its row block and
      16 bytes further along K for l >= 16 (8-bit elements are pairs of bytes to ldmatrix);
    * 16-bit B: ``ldmatrix.x2.trans`` from 16 K rows (lanes 0-15) at the block's columns;
    * 32-bit (tf32) A and B: one 32-bit load a register;
    * f64 A and B (DMMA): one element of A for each 8-row half of a row block, (g, t) and
      (g + 8, t), and one of B, (t, g), a 64-bit load each;
    * 8-bit B: four byte loads from consecutive K rows a register, packed low byte first;
      where the form says so (``TensorCoreMma.b_matrix8``, sm_100/sm_120) one
      ``ldmatrix.m16n16.x2.trans.b8`` a K step and pair of column blocks instead.

    With ``swizzles`` (a pipelined loop's 16-bit operands, ``mma_forms.MmaSwizzle``) the
    rows are ``k`` and ``n`` elements apart (K and N, or a TMA box's columns where the
    rows are split into boxes, box after box: ``_boxed``) and each lane's column is XORed
    with its row's phase;
    with ``a_columns`` (16-bit, swizzled) A is staged as K rows of M (``k`` is then M) and
    read with ``ldmatrix.x4.trans``, lanes 8i to 8i+7 at the K rows of fragment matrix i;
    with ``b_transposed`` B is staged as N rows of K (``n`` is then K) and read with
    ``ldmatrix`` without ``.trans`` (8-bit: padded rows, one 32-bit word of four K a
    register); B's column blocks are read two at a time where their
    spacing allows (``ldmatrix.x4``, lanes 16-31 at the second block: ``b_fragment`` of an
    odd block returns what its even neighbour's read); ``first`` (elements) is the
    current stage, or ``b_first`` B's alone."""

    def __init__(self, em: KernelEmitter, form: TensorCoreMma, layout: LinearLayout, k: int, n: int,
                 b_offset: int, first: Optional[ir.Value] = None,
                 swizzles: Optional[tuple[MmaSwizzle, MmaSwizzle]] = None, b_transposed: bool = False,
                 b_first: Optional[ir.Value] = None, a_columns: bool = False):
        self.em, self.form, self.k, self.n, self.b_offset = em, form, k, n, b_offset
        self.swizzles, self.b_transposed, self.a_columns = swizzles, b_transposed, a_columns
        b = em.b
        self.esize = form.bits // 8
        self.rows_blocks, self.cols_blocks = mma_blocks(layout)
        lane = em.lane
        g = b.lshr(lane, ir.Constant(I32, 2))
        t = b.and_(lane, ir.Constant(I32, 3))
        row0, col0 = em.coords(layout, 0)              # (g, 2t) of the thread's first block
        block_row = b.sub(row0, g)
        block_col = b.sub(col0, b.shl(t, ir.Constant(I32, 1)))
        self.block_row, self.block_col = block_row, block_col
        if form.bits >= 32:         # tf32 words, f64 elements: A (g, t), B (t, g) of each block
            self.a_base = b.add(b.mul(row0, ir.Constant(I32, k)), t)
            self.b_base = b.add(b.mul(t, ir.Constant(I32, n)), b.add(block_col, g))
        else:
            a_row = b.add(block_row, b.and_(lane, ir.Constant(I32, 15)))
            half = b.mul(b.lshr(lane, ir.Constant(I32, 4)), ir.Constant(I32, 16 // self.esize))
            self.a_base = b.add(b.mul(a_row, ir.Constant(I32, k)), half)
            b_row = b.and_(lane, ir.Constant(I32, 15)) if form.bits == 16 else b.shl(t, ir.Constant(I32, 2))
            b_col = block_col if form.bits == 16 else b.add(block_col, g)
            self.b_base = b.add(b.mul(b_row, ir.Constant(I32, n)), b_col)
        if b_transposed and swizzles is None and self.esize == 1:   # 8-bit B, N rows of K: 4 K at (g, 4t)
            self.b_base = b.add(b.mul(b.add(block_col, g), ir.Constant(I32, n)), b.shl(t, ir.Constant(I32, 2)))
        elif b_transposed and swizzles is None:     # 16-bit B, N rows of K: lane l at row l % 8, K half l / 8
            k_half = b.mul(b.and_(b.lshr(lane, ir.Constant(I32, 3)), ir.Constant(I32, 1)), ir.Constant(I32, 8))
            self.b_base = b.add(b.mul(b.add(block_col, b.and_(lane, ir.Constant(I32, 7))), ir.Constant(I32, n)),
                                k_half)
        if swizzles is not None:    # 16-bit: A's rows from a_base, B's K rows from b_base
            a_sw, b_sw = swizzles
            self.a_base = b.mul(a_row, ir.Constant(I32, k))
            self.a_swizzle = b.xor(half, _phase(b, a_row, a_sw))       # the chunk lanes >= 16 read, swizzled
            self.b_base = b.mul(b_row, ir.Constant(I32, n))
            self.b_swizzle = _phase(b, b_row, b_sw)
            self.b_col = block_col
            self.pairs = _paired_blocks(layout, self.cols_blocks)
            if self.pairs:          # lanes 16-31 read the next column block (ldmatrix.x4)
                self.b_col = b.add(block_col, b.mul(b.lshr(lane, ir.Constant(I32, 4)), ir.Constant(I32, self.pairs)))
            if self.esize == 1 and not b_transposed:    # 8-bit K x N: bytes of rows 4t + e at column g
                self.pairs = 0
                self.b_col = b.add(block_col, g)
                self.b_phases = [_phase(b, b.add(b_row, ir.Constant(I32, e)), b_sw) for e in range(4)]
                if form.b_matrix8:      # or 16 x 16 byte matrices: lane l at K row l, its phase
                    self.b_col, self.b_lane_phase = block_col, _phase(b, lane, b_sw)
                    self.b_base = b.mul(lane, ir.Constant(I32, n))
            if a_columns:           # K rows of M: lane l at K row l % 8 + 8 (l / 16), M half (l / 8) % 2
                k_row = b.add(b.and_(lane, ir.Constant(I32, 7)),
                              b.mul(b.lshr(lane, ir.Constant(I32, 4)), ir.Constant(I32, 8)))
                m_half = b.mul(b.and_(b.lshr(lane, ir.Constant(I32, 3)), ir.Constant(I32, 1)), ir.Constant(I32, 8))
                self.a_base = b.mul(k_row, ir.Constant(I32, k))
                self.a_col = b.add(block_row, m_half)
                self.a_swizzle = _phase(b, k_row, a_sw)
            if b_transposed:        # N rows of K: lanes 0-15 at rows block_col + l % 8, K half l / 8
                n_row = b.and_(lane, ir.Constant(I32, 7))
                self.b_base = b.mul(b.add(self.b_col, n_row), ir.Constant(I32, n))
                k_half = b.mul(b.and_(b.lshr(lane, ir.Constant(I32, 3)), ir.Constant(I32, 1)),
                               ir.Constant(I32, 16 // self.esize))
                self.b_swizzle = b.xor(k_half, _phase(b, n_row, b_sw))
        # 8-bit K x N B read as 16 x 16 byte matrices (``TensorCoreMma.b_matrix8``: the
        # warps' column blocks start 16 bytes aligned): lane l at K row l of the step
        # (lanes 16-31: the second matrix, K 16-31)
        self.b_rows8, self._b8 = None, {}
        if form.b_matrix8 and swizzles is None and not b_transposed and self.esize == 1:
            self.b_rows8 = b.add(b.mul(lane, ir.Constant(I32, n)), block_col)
        if first is not None:       # a pipelined loop's current stage, in elements
            self.a_base, self.b_base = b.add(self.a_base, first), b.add(self.b_base, first)
            if self.b_rows8 is not None:
                self.b_rows8 = b.add(self.b_rows8, first)
        if b_first is not None:     # B alone in a ring stage (``emit_attention``), in elements
            self.b_base = b.add(self.b_base, b_first)
        self.row_offsets = [layout.apply(reg=4 * self.cols_blocks * i)[0] for i in range(self.rows_blocks)]
        self.col_offsets = [layout.apply(reg=4 * j)[1] for j in range(self.cols_blocks)]

    def scaled(self, offsets: tuple[int, int], a_blocks: int, n: int, stage: Optional[ir.Value] = None) -> None:
        """Read block scales too (``mma_forms.scale_offsets``: A's M x ``a_blocks``, B's
        blocks x ``n``, row-major): the factor of row ``g + 8 (t % 2)`` of each row block
        of A and of column ``g`` of each column block of B, as ``scale_vec::1X`` with byte
        and thread selectors 0 takes them (lanes with t >= 2 read a row too, unused).
        ``stage``: a pipelined loop's current stage, in bytes (``offsets`` are from its start)."""
        b, lane = self.em.b, self.em.lane
        g = b.lshr(lane, ir.Constant(I32, 2))
        half = b.mul(b.and_(lane, ir.Constant(I32, 1)), ir.Constant(I32, 8))
        self.scale_offsets, self.scale_blocks, self.scale_n = offsets, a_blocks, n
        self.scale_a = b.mul(b.add(self.block_row, b.add(g, half)), ir.Constant(I32, a_blocks))
        self.scale_b = b.add(self.block_col, g)
        if stage is not None:
            self.scale_a, self.scale_b = b.add(self.scale_a, stage), b.add(self.scale_b, stage)

    def scales(self, k0: ir.Value, i: int, j: int) -> tuple[ir.Value, ir.Value]:
        """(A's, B's) scale registers of row block ``i`` and column block ``j`` at K step ``k0``."""
        b = self.em.b
        block = b.udiv(k0, ir.Constant(I32, self.form.k))
        a_at = b.add(b.add(self.scale_a, block), ir.Constant(I32, self.row_offsets[i] * self.scale_blocks))
        b_at = b.add(b.add(b.mul(block, ir.Constant(I32, self.scale_n)), self.scale_b),
                     ir.Constant(I32, self.col_offsets[j]))
        return tuple(b.zext(b.load(self._slot(at, 0, base, 1), typ=ir.IntType(8)), I32)
                     for at, base in ((a_at, self.scale_offsets[0]), (b_at, self.scale_offsets[1])))

    def _slot(self, base: ir.Value, offset: int, byte_base: int, esize: int) -> ir.Value:
        b = self.em.b
        return self.em.smem_slot(b.add(base, ir.Constant(I32, offset)), esize, byte_base)

    def a_fragments(self, k0: ir.Value) -> list[list[ir.Value]]:
        b, k = self.em.b, self.k
        if self.a_columns:                  # K rows of M, read transposed; K steps of 16 keep the swizzle
            base = b.add(self.a_base, b.mul(k0, ir.Constant(I32, k)))
            return [X.ldmatrix(b, self._slot(b.add(base, _boxed(b, b.add(self.a_col, ir.Constant(I32, r)),
                                                             self.a_swizzle, self.swizzles[0])), 0, 0, 2), 4,
                             trans=True) for r in self.row_offsets]
        if self.swizzles is not None:       # the swizzle repeats within 16 rows: same per row block
            column = _boxed(b, k0, self.a_swizzle, self.swizzles[0])
            return [X.ldmatrix(b, self._slot(b.add(self.a_base, column), r * k, 0, self.esize), 4)
                    for r in self.row_offsets]
        base = b.add(self.a_base, k0)
        if self.form.bits == 64:            # DMMA: rows g and g + 8 of the block, one element each
            return [[b.load(self._slot(base, (r + 8 * h) * k, 0, 8), typ=ir.DoubleType()) for h in range(2)]
                    for r in self.row_offsets]
        if self.form.bits == 32:
            return [[b.load(self._slot(base, (r + 8 * (q % 2)) * k + 4 * (q // 2), 0, 4), typ=I32)
                     for q in range(4)] for r in self.row_offsets]
        return [X.ldmatrix(b, self._slot(base, r * k, 0, self.esize), 4) for r in self.row_offsets]

    def b_fragment(self, k0: ir.Value, j: int) -> list[ir.Value]:
        b, n, c = self.em.b, self.n, self.col_offsets[j]
        if self.b_transposed and self.swizzles is None and self.esize == 2:    # 16-bit, N rows of K
            return X.ldmatrix(b, self._slot(b.add(self.b_base, k0), c * n, self.b_offset, 2), 2)
        if self.b_transposed and self.swizzles is None:     # 8-bit, N rows of K: K 4t.. and 16 + 4t..
            return [b.load(self._slot(b.add(self.b_base, k0), c * n + 16 * q, self.b_offset, 1), typ=I32)
                    for q in range(2)]
        if self.swizzles is not None and self.esize == 1 and not self.b_transposed:
            return self._b8_matrix(k0, c) if self.form.b_matrix8 else self._swizzled_bytes(k0, c)
        if self.swizzles is not None and self.pairs and j % 2:
            return self._next_block         # read with block j - 1's ldmatrix.x4
        count = 4 if self.swizzles is not None and self.pairs else 2
        if self.b_transposed:               # the swizzle repeats within 8 rows: same per column block
            column = _boxed(b, k0, self.b_swizzle, self.swizzles[1])
            regs = X.ldmatrix(b, self._slot(b.add(self.b_base, column), c * n, self.b_offset, self.esize), count)
        elif self.swizzles is not None:     # K steps of 16 rows keep the swizzle
            base = b.add(self.b_base, b.mul(k0, ir.Constant(I32, n)))
            column = _boxed(b, b.add(self.b_col, ir.Constant(I32, c)), self.b_swizzle, self.swizzles[1])
            regs = X.ldmatrix(b, self._slot(b.add(base, column), 0, self.b_offset, 2), count, trans=True)
        if self.swizzles is not None:
            self._next_block = regs[2:]
            return regs[:2]
        if self.b_rows8 is not None:
            return self._b8_matrix(k0, c)
        base = b.add(self.b_base, b.mul(k0, ir.Constant(I32, n)))
        if self.form.bits == 16:
            return X.ldmatrix(b, self._slot(base, c, self.b_offset, 2), 2, trans=True)
        if self.form.bits == 64:
            return [b.load(self._slot(base, c, self.b_offset, 8), typ=ir.DoubleType())]
        if self.form.bits == 32:
            return [b.load(self._slot(base, c + 4 * q * n, self.b_offset, 4), typ=I32) for q in range(2)]
        regs = []
        for q in range(2):
            word: ir.Value = ir.Constant(I32, 0)
            for e in range(4):
                byte = b.load(self._slot(base, c + (16 * q + e) * n, self.b_offset, 1), typ=ir.IntType(8))
                word = b.or_(word, b.shl(b.zext(byte, I32), ir.Constant(I32, 8 * e)))
            regs.append(word)
        return regs


    def _b8_matrix(self, k0: ir.Value, c: int) -> list[ir.Value]:
        """An 8-bit K x N B's fragment of the column block at ``c``: one
        ``ldmatrix.m16n16.x2.trans.b8`` of the 16 columns from ``c`` rounded down to 16
        gives both blocks of that pair (the second block's comes from the cache).  From
        swizzled rows (a TMA ring's boxes) lane l is at K row ``k0 + l``, the pair's 16-byte
        chunk XORed with the row's phase (K steps of 32 keep it: the swizzle repeats within
        8 rows), as NVIDIA's sm_120 fp8 GEMMs read theirs."""
        b = self.em.b
        seg = c - c % 16
        key = (id(k0), seg)
        regs = self._b8.get(key)
        if regs is None:
            if self.swizzles is None:
                at, offset = b.add(self.b_rows8, b.mul(k0, ir.Constant(I32, self.n))), seg
            else:
                row = b.add(self.b_base, b.mul(k0, ir.Constant(I32, self.n)))
                at = b.add(row, _boxed(b, b.add(self.b_col, ir.Constant(I32, seg)), self.b_lane_phase,
                                       self.swizzles[1]))
                offset = 0
            regs = X.ldmatrix_b8(b, self._slot(at, offset, self.b_offset, 1))
            self._b8 = {key: regs}
        half = c % 16 // 8
        return [regs[half], regs[2 + half]]

    def _swizzled_bytes(self, k0: ir.Value, c: int) -> list[ir.Value]:
        """An 8-bit K x N B's fragment of column block ``c`` from swizzled rows (a TMA ring's
        boxes): per register four bytes of K rows 4t + e (+ 16), column g, packed low byte
        first, each row's column XORed with its phase (the swizzle repeats within 8 rows,
        so K steps of 32 and the 16 rows between the two registers keep it)."""
        b, n, swizzle = self.em.b, self.n, self.swizzles[1]
        column = b.add(self.b_col, ir.Constant(I32, c))
        regs = []
        for q in range(2):
            word: ir.Value = ir.Constant(I32, 0)
            for e in range(4):
                row = b.add(self.b_base, b.mul(b.add(k0, ir.Constant(I32, 16 * q + e)), ir.Constant(I32, n)))
                at = b.add(row, _boxed(b, column, self.b_phases[e], swizzle))
                byte = b.load(self._slot(at, 0, self.b_offset, 1), typ=ir.IntType(8))
                word = b.or_(word, b.shl(b.zext(byte, I32), ir.Constant(I32, 8 * e)))
            regs.append(word)
        return regs


def _paired_blocks(layout: LinearLayout, cols_blocks: int) -> int:
    """The column distance between the thread's column blocks 2i and 2i + 1 when it is the
    same for every pair (one ``ldmatrix.x4`` then reads B's fragments of both), else 0."""
    cols = [layout.apply(reg=4 * j)[1] for j in range(cols_blocks)]
    if cols_blocks < 2 or cols_blocks % 2:
        return 0
    deltas = {cols[j + 1] - cols[j] for j in range(0, cols_blocks, 2)}
    return deltas.pop() if len(deltas) == 1 else 0


def _boxed(b: ir.IRBuilder, column: ir.Value, phase: ir.Value, swizzle: MmaSwizzle) -> ir.Value:
    """Element offset, from a row's start, of ``column`` (i32) XORed with the row's
    ``phase``; where the rows are split into boxes (``swizzle.box_cols``, TMA's), the
    column's box comes first, all the box's rows (``rows`` x ``box_cols``) before it."""
    if not swizzle.box_cols:
        return b.xor(column, phase)
    inner = b.and_(column, ir.Constant(I32, swizzle.box_cols - 1))
    box = b.lshr(column, ir.Constant(I32, swizzle.box_cols.bit_length() - 1))
    return b.add(b.xor(inner, phase), b.mul(box, ir.Constant(I32, swizzle.rows * swizzle.box_cols)))


def _phase(b: ir.IRBuilder, row: ir.Value, swizzle: MmaSwizzle) -> ir.Value:
    """The column XOR of ``row`` in ``swizzle`` (elements): vec * ((row / per_phase) % max_phase)."""
    phase = b.and_(b.lshr(row, ir.Constant(I32, swizzle.per_phase.bit_length() - 1)),
                   ir.Constant(I32, swizzle.max_phase - 1))
    return b.mul(phase, ir.Constant(I32, swizzle.vec))


def mma_sync(b: ir.IRBuilder, form: TensorCoreMma, a: list[ir.Value], bb: list[ir.Value], c: list[ir.Value],
             scales: Optional[tuple[ir.Value, ir.Value]] = None) -> list[ir.Value]:
    """One ``mma.sync`` of ``form`` (``mma_forms.TensorCoreMma``): D = A B + C for a warp,
    four A and two B registers and four accumulators a thread; C is tied to D, so the
    accumulators stay in their registers.  f64 (``m8n8k4``): two instructions, rows 0-7
    of the m16n8 block from A's first element into accumulators 0-1, rows 8-15 from its
    second into 2-3 (``tensor_core.dmma_c_layout``), one B element for both."""
    if form.m == 8:
        return [d for h in range(2) for d in _dmma(b, form, a[h], bb[0], c[2 * h:2 * h + 2])]
    ty = I32 if form.integer else ir.FloatType()
    reg = "r" if form.integer else "f"
    text = f"{form.opcode} {{$0, $1, $2, $3}}, {{$4, $5, $6, $7}}, {{$8, $9}}, {{$0, $1, $2, $3}}"
    extra: list[ir.Value] = []
    if scales is not None:      # each scale register with byte and thread selectors 0
        text += ", {$10}, {0, 0}, {$11}, {0, 0}"
        extra = list(scales)
    result = X.asm(b, ir.LiteralStructType([ty] * 4), text + ";",
                   ",".join([f"={reg}"] * 4 + ["r"] * (6 + len(extra)) + ["0", "1", "2", "3"]), [*a, *bb, *extra, *c])
    return [b.extract_value(result, e) for e in range(4)]


def _dmma(b: ir.IRBuilder, form: TensorCoreMma, a: ir.Value, bb: ir.Value, c: list[ir.Value]) -> list[ir.Value]:
    """One f64 ``mma.sync.aligned.m8n8k4``: an A and a B element and two accumulators a
    thread, C tied to D."""
    double = ir.DoubleType()
    text = f"{form.opcode} {{$0, $1}}, {{$2}}, {{$3}}, {{$0, $1}};"
    result = X.asm(b, ir.LiteralStructType([double] * 2), text, "=d,=d,d,d,0,1", [a, bb, *c])
    return [b.extract_value(result, e) for e in range(2)]
