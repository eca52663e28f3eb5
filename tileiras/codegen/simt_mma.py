"""The CUDA-core matrix multiply: mmaf, mmai and mmaf_scaled that no tensor-core form
takes (``emit_mma._mma`` dispatches here).  A and B (and the block scales) are staged in
shared memory; each thread walks K for the accumulator elements it holds as outer
products of its rows of A and columns of B read a word or more at a time
(``_OuterProduct``), multiplying and adding in f32 (f64 for f64, i32 for integers) and
rounding once to the result type.  Block scales are decoded once per scale block."""
from __future__ import annotations

import math
from typing import Optional

from llvmlite import ir

from ..errors import CompileError
from ..ir import types as T
from ..ir.core import Operation
from ..layout.shared import Padding
from ..lower.mma_forms import simt_a_pitch, simt_offsets
from ..lower.tiles import element_bytes
from ..tile import ops_arith as AR
from ..tile.enums import Signedness
from . import intrinsics as X
from . import smem_copy
from .loops import counted_loop
from .nvvm import I32, KernelEmitter
from .values import BF16, TileVal, llvm_type


def _to_acc(b: ir.IRBuilder, v: ir.Value, src: T.ScalarType, acc: ir.Type, signed: bool = True,
            native_f4: bool = True) -> ir.Value:
    if isinstance(acc, ir.IntType):
        return b.sext(v, acc) if signed else b.zext(v, acc)
    if src.name == "f4E2M1FN":
        from .emit_arith import f4_convert  # noqa: PLC0415
        return f4_convert(b, v, src, T.F32, acc, native_f4)
    if src.name in ("f8E4M3FN", "f8E5M2"):
        from .emit_arith import f8_convert  # noqa: PLC0415
        return f8_convert(b, v, src, T.F32, acc)
    if v.type == acc:
        return v
    return b.fpext(v, acc) if not isinstance(v.type, ir.DoubleType) else b.fptrunc(v, acc)


def _e8m0_to_f32(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    """2**(bits - 127): the exponent field alone; 0 is 2**-127 (subnormal), 255 NaN."""
    i32 = ir.IntType(32)
    e = b.zext(bits, i32)
    value = b.shl(e, ir.Constant(i32, 23))
    value = b.select(b.icmp_unsigned("==", e, ir.Constant(i32, 0)), ir.Constant(i32, 0x00400000), value)
    value = b.select(b.icmp_unsigned("==", e, ir.Constant(i32, 255)), ir.Constant(i32, 0x7FC00000), value)
    return b.bitcast(value, ir.FloatType())


def _scale_to_f32(b: ir.IRBuilder, bits: ir.Value, scale: T.ScalarType) -> ir.Value:
    """A block scale (e8m0; e4m3 or UE5M3 for f4 operands) as f32."""
    if scale.name == "f8E4M3FN":
        return _to_acc(b, bits, scale, ir.FloatType())
    if scale.name == "fnv8E5M3FNU":  # exact in bf16, so in f32
        return b.fpext(X.cvt_from_ue5m3(b, bits, BF16), ir.FloatType())
    return _e8m0_to_f32(b, bits)


_SCALES = ("f8E8M0FNU", "f8E4M3FN", "fnv8E5M3FNU")


def simt_multiply(em: KernelEmitter, op: Operation, lhs: TileVal, rhs: TileVal, acc: TileVal) -> None:
    """C += A @ B on CUDA cores (mmaf_scaled multiplies A and B by their block scales
    first), through shared memory."""
    b = em.b
    a_t, b_t = op.operands[0].type, op.operands[1].type
    kdim = a_t.shape[-1]
    a_pitch = simt_a_pitch(op, acc.layout, em.tas.arch)    # A's rows padded where lanes' rows share banks
    b_off, *scale_offs, _ = simt_offsets(op, a_pitch)
    scaled = isinstance(op, AR.MmaFScaledOp)
    X.barrier(b)
    pad = (Padding(kdim, a_pitch - kdim),) if a_pitch > kdim else ()
    _stage(em, lhs, smem_copy.row_major(a_t.shape, element_bytes(a_t), 0, pad))
    _stage(em, rhs, smem_copy.row_major(b_t.shape, element_bytes(b_t), b_off))
    if scaled:
        sa_t, sb_t = op.operands[3].type, op.operands[4].type
        scale_t = T.element_type(sa_t)
        if scale_t.name not in _SCALES or T.element_type(sb_t) != scale_t:
            raise CompileError(f"'{op.name}' with {scale_t} scales is not supported yet")
        sa_off, sb_off = scale_offs
        _stage(em, em.tile(op, 3), smem_copy.row_major(sa_t.shape, 1, sa_off))
        _stage(em, em.tile(op, 4), smem_copy.row_major(sb_t.shape, 1, sb_off))
        block_a, block_b = kdim // sa_t.shape[-1], kdim // sb_t.shape[-2]
    X.barrier(b)
    out_ty = acc.regs[0].type
    # sums run in f32 (f64 for f64, i32 for integers) and round once to the result type
    acc_ty = out_ty if isinstance(out_ty, (ir.IntType, ir.DoubleType)) else ir.FloatType()
    signed = (op.attributes.get("signedness_lhs", Signedness.SIGNED) == Signedness.SIGNED,
              op.attributes.get("signedness_rhs", Signedness.SIGNED) == Signedness.SIGNED)
    widened = [v if v.type == acc_ty else b.fpext(v, acc_ty) for v in acc.regs]
    # a block scale holds for ``block`` K steps: decoded once per block, not per step
    block = math.gcd(block_a, block_b) if scaled else kdim
    plan = _OuterProduct(em, op, acc, acc_ty, signed, a_pitch, b_off, block)
    if scaled:

        def decoded(coords: list[ir.Value], shape: tuple[int, ...], offset: int) -> ir.Value:
            """The staged scale at ``coords`` as f32."""
            code = b.load(em.smem_slot(em.flat_index(coords, shape), 1, offset), typ=ir.IntType(8))
            return _scale_to_f32(b, code, scale_t)

        def scale_block(blk: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
            k0 = b.mul(blk, ir.Constant(I32, block))
            ka, kb = b.udiv(k0, ir.Constant(I32, block_a)), b.udiv(k0, ir.Constant(I32, block_b))
            plan.scale([decoded([*bt, m, ka], sa_t.shape, sa_off) for bt, m in plan.row_coords],
                       [decoded([*bt, kb, b.add(n, ir.Constant(I32, j))], sb_t.shape, sb_off)
                        for bt, n in plan.col_coords for j in range(plan.vec)])
            return counted_loop(em, "mma.k", block, plan.chunk, sums, lambda k, s: plan.step(b.add(k0, k), s))

        new = counted_loop(em, "mma.kb", kdim // block, 1, widened, scale_block)
    else:
        new = counted_loop(em, "mma.k", kdim, plan.chunk, widened, plan.step)
    em.put(op.result, TileVal(acc.layout, [v if v.type == out_ty else b.fptrunc(v, out_ty) for v in new]))


def _stage(em: KernelEmitter, tv: TileVal, at: smem_copy.SharedTile) -> None:
    """Store an operand to shared memory from the warps holding the first copy of its
    elements: the others' copies are the same values (and where the operand's load is
    ``TileAS.warp_owned``, never loaded)."""
    owner = em.warp_owner(tv.layout)
    smem_copy.store(em, tv, at, where=None if owner is None else (lambda reg: owner))


class _OuterProduct:
    """The CUDA-core multiply of ``_mma``: at each K step a thread forms the outer product
    of the A values of its accumulator rows and the B values of its columns.  Operands are
    read up to 16 bytes at a time: A's row ``chunk`` K steps at once, B's row the ``vec``
    consecutive columns the thread holds (``largest_vectorization`` of the accumulator
    layout); each row and column value is read and widened once per step (fp8 in pairs,
    one ``cvt.rn.f16x2`` each, as NVIDIA's tool widens them), not once per accumulator
    element.  ``chunk`` is bounded so that the widened values of one step stay within
    ``BUDGET`` registers, half of it for a thread holding more than 64 accumulators.
    Block scales (``scale``) are decoded once per scale block by the caller and multiply each widened value, A's and B's, before the multiply-adds."""

    WORD = 16               # bytes of one shared-memory read
    BUDGET = 64             # widened operand values live in one step (half over 64 accumulators)

    def __init__(self, em: KernelEmitter, op: Operation, acc: TileVal, acc_ty: ir.Type,
                 signed: tuple[bool, bool], a_pitch: int, b_offset: int, period: int):
        a_t, b_t = op.operands[0].type, op.operands[1].type
        self.em, self.acc_ty, self.signed, self.b_offset = em, acc_ty, signed, b_offset
        self.a_pitch = a_pitch        # elements from one row of A to the next
        self.a_t, self.b_t = a_t, b_t
        self.a_ty, self.b_ty = llvm_type(a_t), llvm_type(b_t)
        self.a_elem, self.b_elem = T.element_type(a_t), T.element_type(b_t)
        self.a_esize, self.b_esize = element_bytes(a_t), element_bytes(b_t)
        rank = a_t.rank
        layout = acc.layout
        vec = layout.largest_vectorization(rank - 1, max(1, self.WORD // self.b_esize))
        while vec > 1 and (b_t.shape[-1] % vec or b_offset % (vec * self.b_esize)):
            vec //= 2           # a run of B's row must start aligned to its bytes
        self.vec = vec
        rows: dict[tuple[int, ...], int] = {}           # constant coordinates -> row index
        cols: dict[tuple[int, ...], int] = {}
        row_regs: list[int] = []                         # each row's first register
        col_regs: list[int] = []
        self.where: list[tuple[int, int, int]] = []     # register -> (row, column group, column in group)
        for r in range(len(acc.regs)):
            c = layout.apply(reg=r)
            row = rows.setdefault((*c[:rank - 2], c[rank - 2]), len(rows))
            col = cols.setdefault((*c[:rank - 2], c[rank - 1] - c[rank - 1] % self.vec), len(cols))
            if row == len(row_regs):
                row_regs.append(r)
            if col == len(col_regs):
                col_regs.append(r)
            self.where.append((row, col, c[rank - 1] % self.vec))
        self.row_coords = [self._split(em.coords(layout, r), rank, 2) for r in row_regs]
        self.col_coords = [self._split(em.coords(layout, r), rank, 1) for r in col_regs]
        chunk = max(1, self.WORD // self.a_esize)
        budget = self.BUDGET if len(acc.regs) <= 64 else self.BUDGET // 2   # 128x128 f32: 166 registers, not 254
        while chunk > 1 and (period % chunk or (len(rows) + len(cols) * self.vec) * chunk > budget):
            chunk //= 2
        self.chunk = chunk
        self.row_scales: Optional[list[ir.Value]] = None
        self.col_scales: Optional[list[ir.Value]] = None

    @staticmethod
    def _split(coords: list[ir.Value], rank: int, which: int) -> tuple[list[ir.Value], ir.Value]:
        """(batch coordinates, the row (``which`` 2) or column (1) coordinate)."""
        return coords[:rank - 2], coords[rank - which]

    def scale(self, rows: list[ir.Value], cols: list[ir.Value]) -> None:
        """Block scales of the rows and of the columns (``vec`` per column group) for the
        steps that follow."""
        self.row_scales, self.col_scales = rows, cols

    def _read(self, index: ir.Value, count: int, ty: ir.Type, elem: T.ScalarType, esize: int, signed: bool,
              base: int) -> list[ir.Value]:
        """``count`` consecutive elements from element ``index`` (aligned to ``count``), widened."""
        em, b = self.em, self.em.b
        slot = em.smem_slot(index, esize, base)
        raw = [b.load(slot, typ=ty)] if count == 1 else [
            b.extract_element(v, ir.Constant(I32, j))
            for v in [b.load(slot, typ=ir.VectorType(ty, count), align=esize * count)] for j in range(count)]
        native = em.target.arch >= 100
        if elem.name in ("f8E4M3FN", "f8E5M2") and not isinstance(self.acc_ty, ir.IntType) and count > 1:
            from .emit_arith import f8_pair_widened  # noqa: PLC0415

            out: list[ir.Value] = []
            for j in range(0, count, 2):
                out.extend(f8_pair_widened(b, raw[j], raw[j + 1], elem, self.acc_ty))
            return out
        return [_to_acc(b, v, elem, self.acc_ty, signed, native) for v in raw]

    def step(self, k0: ir.Value, phis: list[ir.Value]) -> list[ir.Value]:
        em, b = self.em, self.em.b
        a_shape, b_shape = self.a_t.shape, self.b_t.shape
        a_vals = [self._read(b.add(b.mul(em.flat_index([*bt, m], a_shape[:-1]), ir.Constant(I32, self.a_pitch)), k0),
                             self.chunk, self.a_ty, self.a_elem, self.a_esize,
                             self.signed[0], 0) for bt, m in self.row_coords]
        b_vals = []
        for kk in range(self.chunk):
            k = k0 if kk == 0 else b.add(k0, ir.Constant(I32, kk))
            b_vals.append([v for bt, n in self.col_coords
                           for v in self._read(em.flat_index([*bt, k, n], b_shape), self.vec, self.b_ty, self.b_elem,
                                               self.b_esize, self.signed[1], self.b_offset)])
        if self.row_scales is not None:
            a_vals = [[b.fmul(v, s) for v in row] for row, s in zip(a_vals, self.row_scales)]
            b_vals = [[b.fmul(v, s) for v, s in zip(col, self.col_scales)] for col in b_vals]
        out = list(phis)
        fma = f"llvm.fma.{'f64' if isinstance(self.acc_ty, ir.DoubleType) else 'f32'}"
        for kk in range(self.chunk):
            for r, (row, col, j) in enumerate(self.where):
                av, bv = a_vals[row][kk], b_vals[kk][col * self.vec + j]
                out[r] = (b.add(out[r], b.mul(av, bv)) if isinstance(self.acc_ty, ir.IntType)
                          else X.math_call(b, fma, [av, bv, out[r]]))
        return out
