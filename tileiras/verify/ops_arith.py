"""Arithmetic op rules: rounding modes and modifiers, mma shapes and element types."""
from __future__ import annotations

from ..ir import types as T
from ..ir.core import Operation
from ..tile import ops_arith as A
from ..tile.enums import IntegerOverflow, RoundingMode, Signedness
from .context import Context, verifies
from .diagnostic import quoted

R = RoundingMode
IEEE = (R.NEAREST_EVEN, R.ZERO, R.NEGATIVE_INF, R.POSITIVE_INF)


def _element(op: Operation) -> T.Type:
    return T.element_type(op.results[0].type)


def _rounding_allowed(ctx: Context, op: Operation, mode: object, allowed: tuple[RoundingMode, ...]) -> bool:
    if mode is None or mode in allowed:
        return True
    names = ", ".join(m.keyword for m in allowed)
    ctx.op_error(op, f"invalid rounding mode specified, expect one of [{names}]")
    return False


def _f32_only(ctx: Context, op: Operation, modifier: str) -> None:
    element = _element(op)
    if element != T.F32:
        ctx.op_error(op, f"{modifier} modifier only supported for f32 data type, but got: {quoted(element)}")


def _check_ftz(ctx: Context, op: Operation) -> None:
    if op.attributes.get("flush_to_zero"):
        _f32_only(ctx, op, "flush_to_zero")


@verifies(A.AddFOp, A.SubFOp, A.MulFOp, A.FmaOp)
def check_ieee_rounding(ctx: Context, op: Operation) -> None:
    if _rounding_allowed(ctx, op, op.rounding_mode, IEEE):
        _check_ftz(ctx, op)


@verifies(A.Exp2Op, A.RsqrtOp, A.MaxFOp, A.MinFOp)
def check_ftz_only(ctx: Context, op: Operation) -> None:
    _check_ftz(ctx, op)


@verifies(A.DivFOp)
def check_divf(ctx: Context, op: Operation) -> None:
    mode = op.rounding_mode
    if not _rounding_allowed(ctx, op, mode, IEEE + (R.APPROX, R.FULL)):
        return
    if mode in (R.APPROX, R.FULL):
        _f32_only(ctx, op, mode.keyword)
    _check_ftz(ctx, op)


@verifies(A.SqrtOp)
def check_sqrt(ctx: Context, op: Operation) -> None:
    mode = op.rounding_mode
    if not _rounding_allowed(ctx, op, mode, IEEE + (R.APPROX,)):
        return
    if mode is R.APPROX:
        _f32_only(ctx, op, "approx")
    _check_ftz(ctx, op)


@verifies(A.ExpOp, A.TanHOp)
def check_approx_full(ctx: Context, op: Operation) -> None:
    mode = op.rounding_mode
    if _rounding_allowed(ctx, op, mode, (R.APPROX, R.FULL)) and mode is R.APPROX:
        _f32_only(ctx, op, "approx")


@verifies(A.DivIOp)
def check_divi(ctx: Context, op: Operation) -> None:
    mode = op.rounding
    if not _rounding_allowed(ctx, op, mode, (R.ZERO, R.NEGATIVE_INF, R.POSITIVE_INF)):
        return
    if mode is R.NEGATIVE_INF and op.signedness is Signedness.UNSIGNED:
        ctx.op_error(op, "rounding mode 'negative_inf' is not allowed with 'unsigned' flag")


@verifies(A.NegIOp)
def check_negi(ctx: Context, op: Operation) -> None:
    if op.overflow is IntegerOverflow.NO_UNSIGNED_WRAP:
        ctx.op_error(op, "'no_unsigned_wrap' overflow flag is not supported")


# -- matrix multiply-accumulate ---------------------------------------------------------------
def _shape(t: T.TileType) -> str:
    return ", ".join(str(d) for d in t.shape)


def _check_mma_shapes(ctx: Context, op: Operation) -> bool:
    lhs, rhs, acc = op.lhs.type, op.rhs.type, op.acc.type
    if lhs.rank not in (2, 3):
        ctx.op_error(op, "operands must be 2D or 3D tiles")
        return False
    b = int(lhs.rank == 3)
    pairs = []
    if b:
        pairs += [(("lhs", lhs, 0), ("rhs", rhs, 0)), (("lhs", lhs, 0), ("acc", acc, 0))]
    pairs += [(("lhs", lhs, b + 1), ("rhs", rhs, b)), (("lhs", lhs, b), ("acc", acc, b)),
              (("rhs", rhs, b + 1), ("acc", acc, b + 1))]
    for (an, at, ad), (bn, bt, bd) in pairs:
        if at.shape[ad] != bt.shape[bd]:
            lead = "shape error" if b and ad == 0 else " shape error"
            ctx.op_error(op, f"{lead}: dim {ad} of {an} ({at.shape[ad]}) and dim {bd} of {bn} ({bt.shape[bd]}) "
                             f"must match, but got {an} shape ({_shape(at)}) and {bn} shape ({_shape(bt)})")
            return False
    return True


#: Input element type -> allowed accumulator/result element types (NVIDIA's table).
MMAF_ACCUMULATORS: dict[str, tuple[str, ...]] = {
    "f4E2M1FN": ("f16", "f32"), "f8E4M3FN": ("f16", "f32"), "f8E5M2": ("f16", "f32"),
    "f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "f32": ("f32",), "f64": ("f64",),
}


@verifies(A.MmaFOp)
def check_mmaf(ctx: Context, op: Operation) -> None:
    if not _check_mma_shapes(ctx, op):
        return
    source = op.lhs.type.element
    acc = op.acc.type.element
    allowed = MMAF_ACCUMULATORS.get(str(source))
    if allowed is None:
        ctx.op_error(op, f"unsupported input element type: {quoted(source)}")
    elif str(acc) not in allowed:
        names = ", ".join(f"'{a}'" for a in allowed)
        ctx.op_error(op, f"unsupported combination of element types. Input type {quoted(source)} expects "
                         f"accumulator/result type to be one of {{{names}}}, but got {quoted(acc)}")


@verifies(A.MmaIOp)
def check_mma_shapes(ctx: Context, op: Operation) -> None:
    _check_mma_shapes(ctx, op)


def _dim_mismatch(a: tuple[str, T.TileType, int], b: tuple[str, T.TileType, int]) -> str:
    (an, at, ad), (bn, bt, bd) = a, b
    if at.shape[ad] == bt.shape[bd]:
        return ""
    return (f"shape error: dim {ad} of {an} ({at.shape[ad]}) and dim {bd} of {bn} ({bt.shape[bd]}) must match, "
            f"but got {an} shape ({_shape(at)}) and {bn} shape ({_shape(bt)})")


def _scaled_problem(op: Operation) -> str:
    lhs, rhs, ls, rs = op.lhs.type, op.rhs.type, op.lhs_scale.type, op.rhs_scale.type
    b = int(lhs.rank == 3)
    row, col = b, b + 1
    pairs = [(("lhs", lhs, 0), ("lhs_scale", ls, 0)), (("rhs", rhs, 0), ("rhs_scale", rs, 0))] if b else []
    pairs += [(("lhs", lhs, row), ("lhs_scale", ls, row)), (("rhs", rhs, col), ("rhs_scale", rs, col)),
              (("lhs_scale", ls, col), ("rhs_scale", rs, row))]
    for x, y in pairs:
        problem = _dim_mismatch(x, y)
        if problem:
            return problem
    element, scale = str(lhs.element), str(ls.element)
    if scale in ("f8E4M3FN", "fnv8E5M3FNU") and element != "f4E2M1FN":
        return (f"unsupported combination of element types. Scale type '{scale}' expects lhs and rhs element "
                f"types to be 'f4E2M1FN', but got {quoted(lhs.element)}")
    if scale == "f8E8M0FNU" and element not in ("f8E4M3FN", "f8E5M2", "f4E2M1FN"):
        return (f"unsupported combination of element types. Scale type 'f8E8M0FNU' expects lhs and rhs element "
                f"types to be one of {{'f8E4M3FN', 'f8E5M2', 'f4E2M1FN'}}, but got {quoted(lhs.element)}")
    k, scale_k = lhs.shape[col], ls.shape[col]
    if k % scale_k:
        return (f"shape error: dim {col} of lhs_scale ({scale_k}) must be a divisor of dim {col} of lhs ({k}), "
                f"but got lhs_scale shape ({_shape(ls)}) and lhs shape ({_shape(lhs)})")
    block = k // scale_k
    if element in ("f8E4M3FN", "f8E5M2") and block != 32:
        return ("shape error: f8 element type requires block scale factor of lhs_scale and rhs_scale to be 32, "
                f"but got {block}")
    if element == "f4E2M1FN" and scale == "f8E4M3FN" and block != 16:
        return ("shape error: f4E2M1FN element type with f8E4M3FN scales requires block scale factor of lhs_scale "
                f"and rhs_scale to be 16, but got {block}")
    if element == "f4E2M1FN" and scale in ("f8E8M0FNU", "fnv8E5M3FNU") and block not in (16, 32):
        return (f"shape error: f4E2M1FN element type with {scale} scales requires block scale factor of "
                f"lhs_scale and rhs_scale to be 16 or 32, but got {block}")
    return ""


@verifies(A.MmaFScaledOp)
def check_mmaf_scaled(ctx: Context, op: Operation) -> None:
    if not _check_mma_shapes(ctx, op):
        return
    problem = _scaled_problem(op)
    if problem:
        ctx.op_error(op, problem)
