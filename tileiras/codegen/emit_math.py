"""Float arithmetic and math: add/sub/mul/div/fma/sqrt in every rounding mode and with
flush-to-zero, and the math functions (``exp``, ``sin``, ``pow``...) through libdevice, as
NVIDIA's tileiras lowers them.

Split from ``emit_arith`` along the line where rounding and FTZ matter: default IEEE
rounding is a plain LLVM instruction; other modes and FTZ are spelled in PTX through
``intrinsics``; the math functions are libdevice calls that ``codegen.libdevice`` links and
inlines.  The register mapping and type helpers are ``emit_arith``'s.
"""
from __future__ import annotations

import math
from typing import Callable

from llvmlite import ir

from ..errors import CompileError
from ..ir.core import Operation
from ..tile import ops_arith as AR
from ..tile.enums import RoundingMode
from . import intrinsics as X
from . import libdevice
from .emit_arith import PTX_ROUNDING, F32, map_regs, ptx_float
from .nvvm import KernelEmitter, emits
from .values import BF16, llvm_type

def _float_binary(llvm_op: str, ptx_op: str) -> Callable[[KernelEmitter, Operation], None]:
    def emit(em: KernelEmitter, op: Operation) -> None:
        b = em.b
        mode = op.attributes.get("rounding_mode", RoundingMode.NEAREST_EVEN)
        ftz = bool(op.attributes.get("flush_to_zero"))

        def one(x: ir.Value, y: ir.Value) -> ir.Value:
            if mode == RoundingMode.NEAREST_EVEN and not ftz:
                return getattr(b, llvm_op)(x, y)
            if x.type == BF16 or isinstance(x.type, ir.HalfType):
                return _via_f32(b, lambda u, v: X.fp_asm_binary(b, f"{ptx_op}.{_mode(mode)}{'.ftz' if ftz else ''}.f32", u, v), x, y)
            return X.fp_asm_binary(b, f"{ptx_op}.{_mode(mode)}{'.ftz' if ftz and ptx_float(x.type) == 'f32' else ''}.{ptx_float(x.type)}", x, y)
        map_regs(em, op, one)
    return emit


def _mode(mode: RoundingMode) -> str:
    if mode in PTX_ROUNDING:
        return PTX_ROUNDING[mode]
    if mode == RoundingMode.APPROX:
        return "approx"
    if mode == RoundingMode.FULL:
        return "full"
    raise CompileError(f"rounding mode '{mode.keyword}' is not valid here")


def _via_f32(b: ir.IRBuilder, fn: Callable[..., ir.Value], *xs: ir.Value) -> ir.Value:
    t = xs[0].type
    wide = [b.fpext(x, F32) for x in xs]
    return b.fptrunc(fn(*wide), t)


emits(AR.AddFOp)(_float_binary("fadd", "add"))
emits(AR.SubFOp)(_float_binary("fsub", "sub"))
emits(AR.MulFOp)(_float_binary("fmul", "mul"))


@emits(AR.DivFOp)
def _divf(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    mode = op.rounding_mode
    ftz = ".ftz" if op.flush_to_zero else ""

    def one(x: ir.Value, y: ir.Value) -> ir.Value:
        if mode == RoundingMode.NEAREST_EVEN and not ftz:
            return b.fdiv(x, y)
        if ptx_float(x.type) in ("f16", "bf16"):
            return _via_f32(b, lambda u, v: X.fp_asm_binary(b, f"div.{_mode(mode)}{ftz}.f32", u, v), x, y)
        if ptx_float(x.type) == "f64":
            return X.fp_asm_binary(b, f"div.{PTX_ROUNDING.get(mode, 'rn')}.f64", x, y)
        return X.fp_asm_binary(b, f"div.{_mode(mode)}{ftz}.f32", x, y)
    map_regs(em, op, one)


@emits(AR.FmaOp)
def _fma(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    mode = op.rounding_mode
    ftz = ".ftz" if op.flush_to_zero else ""

    def one(x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
        if mode == RoundingMode.NEAREST_EVEN and not ftz:
            return X.math_call(b, f"llvm.fma.{_intrinsic_suffix(x.type)}", [x, y, z])
        if ptx_float(x.type) in ("f16", "bf16"):
            return _via_f32(b, lambda u, v, w: X.fp_asm_ternary(b, f"fma.{_mode(mode)}{ftz}.f32", u, v, w), x, y, z)
        return X.fp_asm_ternary(b, f"fma.{_mode(mode)}{ftz if ptx_float(x.type) == 'f32' else ''}.{ptx_float(x.type)}", x, y, z)
    map_regs(em, op, one)


def _intrinsic_suffix(t: ir.Type) -> str:
    return {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64"}[ptx_float(t)]


@emits(AR.NegFOp)
def _negf(em: KernelEmitter, op: Operation) -> None:
    map_regs(em, op, lambda x: em.b.fneg(x))


@emits(AR.AbsFOp)
def _absf(em: KernelEmitter, op: Operation) -> None:
    map_regs(em, op, lambda x: X.math_call(em.b, f"llvm.fabs.{_intrinsic_suffix(x.type)}", [x]))


def _float_unary_intrinsic(name: str) -> Callable[[KernelEmitter, Operation], None]:
    def emit(em: KernelEmitter, op: Operation) -> None:
        map_regs(em, op, lambda x: X.math_call(em.b, f"llvm.{name}.{_intrinsic_suffix(x.type)}", [x]))
    return emit


emits(AR.FloorOp)(_float_unary_intrinsic("floor"))
emits(AR.CeilOp)(_float_unary_intrinsic("ceil"))


@emits(AR.SqrtOp)
def _sqrt(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    mode = op.attributes.get("rounding_mode", RoundingMode.NEAREST_EVEN)
    ftz = ".ftz" if op.flush_to_zero else ""

    def one(x: ir.Value) -> ir.Value:
        if mode == RoundingMode.NEAREST_EVEN and not ftz:
            return X.math_call(b, f"llvm.sqrt.{_intrinsic_suffix(x.type)}", [x])
        kind = ptx_float(x.type)
        if kind in ("f16", "bf16"):
            return _via_f32(b, lambda u: X.fp_asm_unary(b, f"sqrt.{_mode(mode)}{ftz}.f32", u), x)
        return X.fp_asm_unary(b, f"sqrt.{_mode(mode)}{ftz if kind == 'f32' else ''}.{kind}", x)
    map_regs(em, op, one)


# -- math: libdevice, as NVIDIA's tileiras calls it; the PTX approximations for rounding<approx> --
def _libdevice(base: str) -> Callable[[KernelEmitter, Operation], None]:
    """``base`` (``exp``, ``pow``...) through libdevice's f32 (``__nv_expf``) or f64 (``__nv_exp``)
    function; f16 and bf16 are widened to f32 and the result rounded back, as NVIDIA's.  The
    first operand's type names the function (``fpowi``'s exponent is an i32); flush_to_zero
    (f32 only) selects libdevice's FTZ code."""
    def emit(em: KernelEmitter, op: Operation) -> None:
        b = em.b
        ftz = bool(op.attributes.get("flush_to_zero"))

        def one(*xs: ir.Value) -> ir.Value:
            t = xs[0].type
            if isinstance(t, ir.HalfType) or t == BF16:
                wide = [b.fpext(x, F32) if x.type == t else x for x in xs]
                return b.fptrunc(libdevice.call(b, libdevice.f32_or_f64(base, F32), wide, ftz), t)
            return libdevice.call(b, libdevice.f32_or_f64(base, t), xs, ftz)
        map_regs(em, op, one)
    return emit


def _is_approx_f32(op: Operation) -> bool:
    return (op.attributes.get("rounding_mode") == RoundingMode.APPROX
            and isinstance(llvm_type(op.result.type), ir.FloatType))


def _approx_or_libdevice(base: str, approx: Callable[[ir.IRBuilder, ir.Value], ir.Value]):
    """rounding<approx> (f32 only) is ``approx``; every other mode is libdevice's ``base``."""
    accurate = _libdevice(base)

    def emit(em: KernelEmitter, op: Operation) -> None:
        if _is_approx_f32(op):
            map_regs(em, op, lambda x: approx(em.b, x))
        else:
            accurate(em, op)
    return emit


# exp: ex2.approx of x*log2(e); tanh: tanh.approx
emits(AR.ExpOp)(_approx_or_libdevice(
    "exp", lambda b, x: X.approx_f32(b, "ex2", b.fmul(x, ir.Constant(F32, math.log2(math.e))))))
emits(AR.TanHOp)(_approx_or_libdevice("tanh", lambda b, x: X.approx_f32(b, "tanh", x)))
emits(AR.Exp2Op)(_libdevice("exp2"))
emits(AR.RsqrtOp)(_libdevice("rsqrt"))
emits(AR.LogOp)(_libdevice("log"))
emits(AR.Log2Op)(_libdevice("log2"))
emits(AR.SinOp)(_libdevice("sin"))
emits(AR.CosOp)(_libdevice("cos"))
emits(AR.TanOp)(_libdevice("tan"))
emits(AR.SinHOp)(_libdevice("sinh"))
emits(AR.CosHOp)(_libdevice("cosh"))
emits(AR.FPowFOp)(_libdevice("pow"))
emits(AR.FPowIOp)(_libdevice("powi"))
emits(AR.Atan2Op)(_libdevice("atan2"))   # atan2(x, y) = atan(x / y): the first operand is the numerator
emits(AR.RemFOp)(_libdevice("fmod"))


@emits(AR.MaxFOp, AR.MinFOp)
def _minmaxf(em: KernelEmitter, op: Operation) -> None:
    """LLVM's maxnum/maximum (``max.f32``, ``max.NaN.f32``); with flush_to_zero on f32,
    ``max.ftz[.NaN].f32`` as NVIDIA's (a subnormal operand counts as zero of its sign)."""
    which = "max" if isinstance(op, AR.MaxFOp) else "min"
    nan = bool(op.attributes.get("propagate_nan"))
    name = f"{which}imum" if nan else f"{which}num"

    def one(x: ir.Value, y: ir.Value) -> ir.Value:
        if op.attributes.get("flush_to_zero") and isinstance(x.type, ir.FloatType):
            return X.fp_asm_binary(em.b, f"{which}.ftz{'.NaN' if nan else ''}.f32", x, y)
        return X.math_call(em.b, f"llvm.{name}.{_intrinsic_suffix(x.type)}", [x, y])
    map_regs(em, op, one)
