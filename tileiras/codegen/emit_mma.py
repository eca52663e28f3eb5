"""Matrix multiply-accumulate (mmaf, mmai, mmaf_scaled).

A and B (and mmaf_scaled's block scales) are staged in shared memory.  f16/bf16 mmaf
whose accumulator TileAS laid out as ``mma.sync`` fragments (``tileas.tensor_core_layout``)
runs on tensor cores, ``mma.sync.m16n8k16`` with ldmatrix-fed fragments, on every
architecture from sm_80 (``_tensor_core_mma``).  Everything else runs on CUDA cores: each
thread walks K for the accumulator elements it holds, multiplying and adding in f32 (i32
for integers) and rounding once to the result type.  wgmma (sm_90) and tcgen05 (sm_100)
lowerings will sit beside ``_tensor_core_mma``, chosen per architecture and shape.
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from ..errors import CompileError
from ..ir import types as T
from ..ir.core import Operation
from ..layout.linear import mma_blocks
from ..lower.tileas import element_bytes
from ..tile import ops_arith as AR
from ..tile.enums import Signedness
from . import intrinsics as X
from .emit_shape import _spill
from .nvvm import I32, KernelEmitter, emits
from .values import BF16, TileVal, llvm_type


def _to_acc(b: ir.IRBuilder, v: ir.Value, src: T.ScalarType, acc: ir.Type, signed: bool = True,
            native_f4: bool = True) -> ir.Value:
    if isinstance(acc, ir.IntType):
        return b.sext(v, acc) if signed else b.zext(v, acc)
    if src.name == "f4E2M1FN":
        from .emit_arith import f4_convert  # noqa: PLC0415
        return f4_convert(b, v, src, T.F32, acc, native_f4)
    if src.name in ("f8E4M3FN", "f8E5M2"):
        from .emit_arith import _f8_convert  # noqa: PLC0415
        return _f8_convert(b, v, src, T.F32, acc)
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


@emits(AR.MmaFOp, AR.MmaIOp, AR.MmaFScaledOp)
def _mma(em: KernelEmitter, op: Operation) -> None:
    """C += A @ B (optionally batched; mmaf_scaled multiplies A and B by their block
    scales first), through shared memory: each thread walks K for the accumulator
    elements it holds, multiplying and adding in f32 (i32 for integers).  Accumulators
    that TileAS laid out as ``mma.sync`` fragments run on tensor cores instead."""
    b = em.b
    a_t, b_t, c_t = (v.type for v in op.operands[:3])
    lhs, rhs, acc = (em.tile(op, i) for i in range(3))
    if isinstance(op, AR.MmaFOp) and em.tas.mma_layouts.get(tuple(c_t.shape)) == acc.layout:
        _tensor_core_mma(em, op, lhs, rhs, acc)
        return
    rank = c_t.rank
    kdim = a_t.shape[-1]
    a_bytes = element_bytes(a_t) * a_t.num_elements
    scaled = isinstance(op, AR.MmaFScaledOp)
    X.barrier(b)
    _spill(em, lhs, a_t)
    _spill(em, rhs, b_t, offset=a_bytes)
    if scaled:
        sa_t, sb_t = op.operands[3].type, op.operands[4].type
        scale_t = T.element_type(sa_t)
        if scale_t.name not in _SCALES or T.element_type(sb_t) != scale_t:
            raise CompileError(f"'{op.name}' with {scale_t} scales is not supported yet")
        sa_off = a_bytes + element_bytes(b_t) * b_t.num_elements
        sb_off = sa_off + sa_t.num_elements
        _spill(em, em.tile(op, 3), sa_t, offset=sa_off)
        _spill(em, em.tile(op, 4), sb_t, offset=sb_off)
        block_a, block_b = kdim // sa_t.shape[-1], kdim // sb_t.shape[-2]
    X.barrier(b)
    out_ty = acc.regs[0].type
    # sums run in f32 (f64 for f64, i32 for integers) and round once to the result type
    acc_ty = out_ty if isinstance(out_ty, (ir.IntType, ir.DoubleType)) else ir.FloatType()
    a_elem, b_elem = T.element_type(a_t), T.element_type(b_t)
    signed = (op.attributes.get("signedness_lhs", Signedness.SIGNED) == Signedness.SIGNED,
              op.attributes.get("signedness_rhs", Signedness.SIGNED) == Signedness.SIGNED)
    coords = [em.coords(acc.layout, r) for r in range(len(acc.regs))]
    widened = [v if v.type == acc_ty else b.fpext(v, acc_ty) for v in acc.regs]

    def step(k: ir.Value, phis: list[ir.Value]) -> list[ir.Value]:
        new = []
        for c, phi in zip(coords, phis):
            batch = c[:rank - 2]
            m, n = c[rank - 2], c[rank - 1]
            a_idx = em.flat_index([*batch, m, k], a_t.shape)
            b_idx = em.flat_index([*batch, k, n], b_t.shape)
            native = em.target.arch >= 100
            av = _to_acc(b, b.load(em.smem_slot(a_idx, element_bytes(a_t)), typ=llvm_type(a_t)), a_elem, acc_ty, signed[0],
                         native)
            bv = _to_acc(b, b.load(em.smem_slot(b_idx, element_bytes(b_t), a_bytes), typ=llvm_type(b_t)), b_elem,
                         acc_ty, signed[1], native)
            if scaled:
                ka = b.udiv(k, ir.Constant(I32, block_a))
                kb = b.udiv(k, ir.Constant(I32, block_b))
                sa_idx = em.flat_index([*batch, m, ka], sa_t.shape)
                sb_idx = em.flat_index([*batch, kb, n], sb_t.shape)
                i8 = ir.IntType(8)
                av = b.fmul(av, _scale_to_f32(b, b.load(em.smem_slot(sa_idx, 1, sa_off), typ=i8), scale_t))
                bv = b.fmul(bv, _scale_to_f32(b, b.load(em.smem_slot(sb_idx, 1, sb_off), typ=i8), scale_t))
            if isinstance(acc_ty, ir.IntType):
                new.append(b.add(phi, b.mul(av, bv)))
            else:
                new.append(X.math_call(b, f"llvm.fma.{'f64' if isinstance(acc_ty, ir.DoubleType) else 'f32' if isinstance(acc_ty, ir.FloatType) else 'f16'}", [av, bv, phi]))
        return new

    new = counted_loop(em, "mma.k", kdim, 1, widened, step)
    em.put(op.result, TileVal(acc.layout, [v if v.type == out_ty else b.fptrunc(v, out_ty) for v in new]))


def _tensor_core_mma(em: KernelEmitter, op: Operation, lhs: TileVal, rhs: TileVal, acc: TileVal) -> None:
    """C += A @ B with ``mma.sync.aligned.m16n8k16`` (f16 or bf16 operands, f32 sums):
    A and B are staged in shared memory row-major and their fragments read with
    ``ldmatrix`` (B's transposed on the way); then, per
    16-deep step of K, every warp multiplies the 16x8 blocks of the accumulator it holds
    (``mma_fragment``: registers ``4 (j + i * column_blocks)`` are block (i, j)).  An f16
    accumulator is summed in f32 and rounded once, as on CUDA cores."""
    b = em.b
    a_t, b_t, c_t = (v.type for v in op.operands[:3])
    n, k = c_t.shape[1], a_t.shape[-1]
    kind = T.element_type(a_t).name
    a_bytes = element_bytes(a_t) * a_t.num_elements
    X.barrier(b)
    _spill(em, lhs, a_t)
    _spill(em, rhs, b_t, offset=a_bytes)
    X.barrier(b)
    rows_blocks, cols_blocks = mma_blocks(acc.layout)
    g = b.lshr(em.lane, ir.Constant(I32, 2))
    two_t = b.shl(b.and_(em.lane, ir.Constant(I32, 3)), ir.Constant(I32, 1))
    # this thread's first A row and B column (block 0): (g, 2t) of its first 16x8 block;
    # the other blocks are at constant offsets, so every fragment is one shared load at
    # a constant offset from two base indices
    row0, col0 = em.coords(acc.layout, 0)
    k_const = ir.Constant(I32, k)
    # ldmatrix rows of A: lane l gives row l % 16 of its block, K columns 8 (l / 16) on
    lane = em.lane
    a_row = b.add(b.sub(row0, g), b.and_(lane, ir.Constant(I32, 15)))
    a_base = b.add(b.mul(a_row, k_const), b.shl(b.lshr(lane, ir.Constant(I32, 4)), ir.Constant(I32, 3)))
    # ldmatrix.trans rows of B: lane l (< 16) gives K row l of the 16 at its block's columns
    b_base = b.add(b.mul(b.and_(em.lane, ir.Constant(I32, 15)), ir.Constant(I32, n)), b.sub(col0, two_t))
    row_offsets = [acc.layout.apply(reg=4 * cols_blocks * i)[0] for i in range(rows_blocks)]
    col_offsets = [acc.layout.apply(reg=4 * j)[1] for j in range(cols_blocks)]
    f32 = ir.FloatType()
    out_ty = acc.regs[0].type
    sums = [v if v.type == f32 else b.fpext(v, f32) for v in acc.regs]

    def step(k0: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
        a_k, b_k = b.add(a_base, k0), b.add(b_base, b.mul(k0, ir.Constant(I32, n)))

        # A's fragments for every row block, then one column block's B at a time: few
        # fragment registers are live beside the accumulators
        a_frags = [ldmatrix(b, em.smem_slot(b.add(a_k, ir.Constant(I32, r * k)), 2), 4) for r in row_offsets]
        out = list(sums)
        for j, c in enumerate(col_offsets):
            b_frag = ldmatrix(b, em.smem_slot(b.add(b_k, ir.Constant(I32, c)), 2, a_bytes), 2, trans=True)
            for i, a_frag in enumerate(a_frags):
                base = 4 * (j + cols_blocks * i)
                out[base:base + 4] = mma_m16n8k16(b, kind, a_frag, b_frag, out[base:base + 4])
        return out

    sums = counted_loop(em, "mma.k", k, 16, sums, step)
    em.put(op.result, TileVal(acc.layout, [v if v.type == out_ty else b.fptrunc(v, out_ty) for v in sums]))


def counted_loop(em: KernelEmitter, name: str, stop: int, stride: int, init: list[ir.Value],
                 step: Callable[[ir.Value, list[ir.Value]], list[ir.Value]]) -> list[ir.Value]:
    """``step(i, values)`` for i = 0, stride, ... below ``stop``, threading ``values`` from
    ``init`` through an LLVM loop (straight-line code for a single step)."""
    b = em.b
    if stop <= stride:
        return step(ir.Constant(I32, 0), init)
    pre = b.block
    loop = em.llfn.append_basic_block(name)
    done = em.llfn.append_basic_block(f"{name}.done")
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(I32)
    i.add_incoming(ir.Constant(I32, 0), pre)
    phis = []
    for v in init:
        phi = b.phi(v.type)
        phi.add_incoming(v, pre)
        phis.append(phi)
    new = step(i, phis)
    nxt = b.add(i, ir.Constant(I32, stride))
    tail = b.block
    i.add_incoming(nxt, tail)
    for phi, v in zip(phis, new):
        phi.add_incoming(v, tail)
    b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(I32, stop)), loop, done)
    b.position_at_end(done)
    return new


def ldmatrix(b: ir.IRBuilder, row: ir.Value, count: int, trans: bool = False) -> list[ir.Value]:
    """``ldmatrix.sync.aligned.m8n8.x<count>{.trans}.shared.b16``: ``count`` 8x8 blocks of
    16-bit elements whose rows lanes ``8i`` to ``8i + 7`` point at (``row``, a shared
    address); lane l gets row l / 4, columns 2 (l % 4) and the next of each block, or with
    ``.trans`` the same of the transposed block.  x4 on a row-major A gives each lane its
    mma A fragment; x2.trans on a row-major K x N piece of B its B fragment."""
    regs = ", ".join(f"${q}" for q in range(count))
    text = f"ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16 {{{regs}}}, [${count}];"
    result = X.asm(b, ir.LiteralStructType([I32] * count), text, ",".join(["=r"] * count + ["r"]),
                   [b.ptrtoint(row, I32)], side_effect=True)
    return [b.extract_value(result, q) for q in range(count)]


def mma_m16n8k16(b: ir.IRBuilder, kind: str, a: list[ir.Value], bb: list[ir.Value], c: list[ir.Value]) -> list[ir.Value]:
    """One ``mma.sync.aligned.m16n8k16.row.col.f32.<kind>.<kind>.f32``: D = A B + C for a
    warp, four A and two B registers (two elements each) and four f32 accumulators a
    thread; C is tied to D, so the accumulators stay in their registers."""
    f32 = ir.FloatType()
    text = (f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 "
            "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$0, $1, $2, $3};")
    result = X.asm(b, ir.LiteralStructType([f32] * 4), text, "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3", [*a, *bb, *c])
    return [b.extract_value(result, e) for e in range(4)]
