"""Matrix multiply-accumulate on CUDA cores (mmaf, mmai, mmaf_scaled).

A and B (and mmaf_scaled's block scales) are staged in shared memory; each thread walks
K for the accumulator elements it holds, multiplying and adding in f32 (i32 for
integers) and rounding once to the result type.  Tensor-core lowering (mma.sync,
wgmma, tcgen05) will sit beside this, chosen per architecture and shape.
"""
from __future__ import annotations

from llvmlite import ir

from ..errors import CompileError
from ..ir import types as T
from ..ir.core import Operation
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
    elements it holds, multiplying and adding in f32 (i32 for integers)."""
    b = em.b
    a_t, b_t, c_t = (v.type for v in op.operands[:3])
    lhs, rhs, acc = (em.tile(op, i) for i in range(3))
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
    pre = b.block
    loop = em.llfn.append_basic_block("mma.k")
    done = em.llfn.append_basic_block("mma.done")
    b.branch(loop)
    b.position_at_end(loop)
    k = b.phi(I32)
    k.add_incoming(ir.Constant(I32, 0), pre)
    phis = []
    for v in widened:
        phi = b.phi(acc_ty)
        phi.add_incoming(v, pre)
        phis.append(phi)
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
    nxt = b.add(k, ir.Constant(I32, 1))
    tail = b.block
    k.add_incoming(nxt, tail)
    for phi, v in zip(phis, new):
        phi.add_incoming(v, tail)
    b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(I32, kdim)), loop, done)
    b.position_at_end(done)
    em.put(op.result, TileVal(acc.layout, [v if v.type == out_ty else b.fptrunc(v, out_ty) for v in new]))
