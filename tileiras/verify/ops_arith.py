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


@verifies(A.MmaIOp, A.MmaFScaledOp)
def check_mma_shapes(ctx: Context, op: Operation) -> None:
    _check_mma_shapes(ctx, op)
