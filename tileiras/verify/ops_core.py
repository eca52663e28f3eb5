"""Core op rules: shape manipulation, conversions, reduce/scan combiners, iota, select."""
from __future__ import annotations

from ..ir import attrs as At
from ..ir import types as T
from ..ir.core import Operation
from ..tile import ops_control as C
from ..tile import ops_core as K
from ..tile.enums import RoundingMode
from ..tile.traits import is_pure
from .context import Context, verifies
from .diagnostic import quoted
from .structure import type_list


def _shape(shape: tuple[int, ...]) -> str:
    return ", ".join(str(d) for d in shape)


@verifies(K.BitcastOp)
def check_bitcast(ctx: Context, op: Operation) -> None:
    src, res = op.source.type, op.result.type
    if src.element.bitwidth != res.element.bitwidth:
        ctx.op_error(op, f"types must be equal width, cannot convert {quoted(src)} of width {src.element.bitwidth} "
                         f"to type {quoted(res)} of width {res.element.bitwidth}")


@verifies(K.BroadcastOp)
def check_broadcast(ctx: Context, op: Operation) -> None:
    src, res = op.source.type.shape, op.result.type.shape
    if any(s != r and s != 1 for s, r in zip(src, res)):
        ctx.op_error(op, "expects the shape of source tile to be compatible with that of the result tile, "
                         f"but got: {_shape(src)} and {_shape(res)}")


@verifies(K.CatOp)
def check_cat(ctx: Context, op: Operation) -> None:
    dim = op.dim
    lhs, rhs, res = op.lhs.type.shape, op.rhs.type.shape, op.result.type.shape
    if not 0 <= dim < len(lhs):
        ctx.op_error(op, f"expect dim to be [0, {len(lhs)}), but got: {dim}")
        return
    if lhs[dim] + rhs[dim] != res[dim]:
        ctx.op_error(op, f"invalid concat at position {dim}, expected: {lhs[dim] + rhs[dim]} but got: {res[dim]}")
        return
    for i in range(len(lhs)):
        if i == dim:
            continue
        if lhs[i] != rhs[i]:
            ctx.op_error(op, f"expect lhs and rhs shapes to match at non-concat position {i}, "
                             f"expected: {lhs[i]} but got: {rhs[i]}")
            return
        if lhs[i] != res[i]:
            ctx.op_error(op, f"expect lhs and result shapes to match at non-concat position {i}, "
                             f"expected: {lhs[i]} but got: {res[i]}")
            return


@verifies(K.ConstantOp)
def check_constant(ctx: Context, op: Operation) -> None:
    value = op.value
    if isinstance(value, At.DenseElementsAttr) and value.type != op.result.type:
        ctx.op_error(op, "failed to verify that all of {value, result} have same type")


@verifies(K.ExtractOp)
def check_extract(ctx: Context, op: Operation) -> None:
    src, res = op.source.type, op.result.type
    if src.element != res.element:
        ctx.op_error(op, "source and result element type do not match")
        return
    for i, (s, r) in enumerate(zip(src.shape, res.shape)):
        if s % r:
            ctx.op_error(op, f"source dimension {i} size ({s}) must be evenly divisible by result dimension {i} "
                             f"size ({r})")
            return
    if len(op.indices) != src.rank:
        ctx.op_error(op, f"expected {src.rank} indices, but got {len(op.indices)}")


@verifies(K.InsertOp)
def check_insert(ctx: Context, op: Operation) -> None:
    src, dst = op.source.type, op.destination.type
    if src.element != dst.element:
        ctx.op_error(op, "source and destination element type do not match")
        return
    for i, (s, d) in enumerate(zip(src.shape, dst.shape)):
        if d % s:
            ctx.op_error(op, f"destination dimension {i} size ({d}) must be evenly divisible by source dimension "
                             f"{i} size ({s})")
            return
    if len(op.indices) != dst.rank:
        ctx.op_error(op, f"expected {dst.rank} indices, but got {len(op.indices)}")


@verifies(K.ExtIOp)
def check_exti(ctx: Context, op: Operation) -> None:
    src = op.operands[0].type.element
    if op.result.type.element.bitwidth <= src.bitwidth:
        ctx.op_error(op, "extending to smaller or identical integer")


@verifies(K.TruncIOp)
def check_trunci(ctx: Context, op: Operation) -> None:
    if op.result.type.element.bitwidth >= op.operands[0].type.element.bitwidth:
        ctx.op_error(op, "truncating to larger or identical integer")


#: (largest exponent, smallest exponent, precision) of each float type, for APFloat's
#: "is every value of A representable in B" test that tells widening conversions apart.
_FLOAT_SEMANTICS = {
    "f16": (15, -14, 11), "bf16": (127, -126, 8), "f32": (127, -126, 24), "tf32": (127, -126, 11),
    "f64": (1023, -1022, 53), "f8E4M3FN": (8, -6, 4), "f8E5M2": (15, -14, 3), "f8E8M0FNU": (127, -127, 1),
    "f4E2M1FN": (2, 0, 2), "fnv8E5M3FNU": (16, -14, 4),
}
_LOW_PRECISION = ("f8E4M3FN", "f8E5M2", "f4E2M1FN", "fnv8E5M3FNU")
_IEEE = (RoundingMode.NEAREST_EVEN, RoundingMode.ZERO, RoundingMode.NEGATIVE_INF, RoundingMode.POSITIVE_INF)


def _widens(src: str, dst: str) -> bool:
    (smax, smin, sp), (dmax, dmin, dp) = _FLOAT_SEMANTICS[src], _FLOAT_SEMANTICS[dst]
    return dmax >= smax and dmin <= smin and dp >= sp


def _ftof_rounding_problem(src: str, dst: str, mode: RoundingMode) -> str:
    """The rounding modes tileiras 13.5 accepts for each kind of float conversion
    (measured; the 13.3 sources accepted nearest_even only)."""
    R = RoundingMode
    if dst == "f8E8M0FNU":
        return "" if mode in (R.ZERO, R.POSITIVE_INF) else (
            "invalid rounding mode specified for conversion to f8E8M0FNU. Only 'zero' and 'positive_inf' are supported")
    if dst in _LOW_PRECISION:
        return "" if mode is R.NEAREST_EVEN else (
            "invalid rounding mode specified for conversion to low-precision type. Only 'nearest_even' is supported")
    if (src, dst) == ("f64", "f32"):
        return "" if mode in _IEEE else (
            "invalid rounding mode specified for conversion from f64 to f32. Only 'nearest_even', 'zero', "
            "'negative_inf', and 'positive_inf' are supported")
    if (src, dst) == ("f32", "tf32"):
        return "" if mode in (R.NEAREST_EVEN, R.ZERO, R.NEAREST_AWAY) else (
            "invalid rounding mode specified for conversion from f32 to tf32. Only 'nearest_even', 'zero', and "
            "'nearest_away' are supported")
    if src in _FLOAT_SEMANTICS and dst in _FLOAT_SEMANTICS and _widens(src, dst):
        return "" if mode in _IEEE + (R.NEAREST_AWAY,) else (
            "invalid rounding mode specified for widening conversion. Only IEEE float rounding modes are supported: "
            "'nearest_even', 'zero', 'negative_inf', 'positive_inf', 'nearest_away'")
    return "" if mode in (R.NEAREST_EVEN, R.ZERO) else (
        "invalid rounding mode specified. Only 'nearest_even' and 'zero' are supported for narrowing conversions to "
        "standard types")


@verifies(K.FToFOp)
def check_ftof(ctx: Context, op: Operation) -> None:
    src, dst = op.operands[0].type.element, op.result.type.element
    if op.operands[0].type == op.result.type:
        ctx.op_error(op, "converting tiles must not be a no-op")
        return
    if op.rounding_mode is not None:
        problem = _ftof_rounding_problem(str(src), str(dst), op.rounding_mode)
        if problem:
            ctx.op_error(op, problem)


@verifies(K.FToIOp)
def check_ftoi(ctx: Context, op: Operation) -> None:
    if op.rounding_mode not in (None, RoundingMode.NEAREST_INT_TO_ZERO):
        ctx.op_error(op, "invalid rounding mode specified. Only 'nearest_int_to_zero' is supported")


@verifies(K.IToFOp)
def check_itof(ctx: Context, op: Operation) -> None:
    if op.result.type.element == T.F8E8M0FNU:
        ctx.op_error(op, "integer to f8E8M0FNU conversion is not supported, please first convert to another "
                         "float type")
    elif op.rounding_mode not in (None, RoundingMode.NEAREST_EVEN):
        ctx.op_error(op, "invalid rounding mode specified. Only 'nearest_even' is supported")


@verifies(K.IotaOp)
def check_iota(ctx: Context, op: Operation) -> None:
    t = op.result.type
    if t.rank != 1:
        ctx.op_error(op, "expects result type to be 1-d tile")
    elif t.element.bitwidth < 64 and t.shape[0] > (1 << t.element.bitwidth):
        ctx.op_error(op, f"the number of elements {t.shape[0]} exceeds the maximum value of element type "
                         f"{quoted(t.element)}")


@verifies(K.PermuteOp)
def check_permute(ctx: Context, op: Operation) -> None:
    src = op.source.type.shape
    perm = tuple(op.permutation or ())
    rank = len(src)
    if rank < 2:
        ctx.op_error(op, f"expects at least rank 2, but got: {rank}")
    elif len(perm) != rank:
        ctx.op_error(op, f"expect permutation size ({len(perm)}) to equal the rank of the source ({rank})")
    elif len(set(perm)) != len(perm):
        ctx.op_error(op, "expect permutation elements to be unique")
    else:
        for i, p in enumerate(perm):
            if not 0 <= p < rank:
                ctx.op_error(op, f"permutation element at index {i} ({p}) is out of bound [0, {rank})")
                return
        res = op.result.type.shape
        for i, p in enumerate(perm):
            if res[i] != src[p]:
                ctx.op_error(op, f"result shape invalid at index {i}, expected: {src[p]}, but got: {res[i]}")
                return


@verifies(K.ReshapeOp)
def check_reshape(ctx: Context, op: Operation) -> None:
    if op.source.type.num_elements != op.result.type.num_elements:
        ctx.op_error(op, "expected source tile and result tile to have the same number of elements")


@verifies(K.SelectOp)
def check_select(ctx: Context, op: Operation) -> None:
    if op.result.type.element == T.F4E2M1FN:
        ctx.op_error(op, "cannot operate on sub-byte type F4E2M1FN")


def _packed_bits(t: T.TileType) -> int:
    e = t.element
    width = 1 if e == T.I1 else 32 if e == T.TF32 else e.bitwidth
    return t.num_elements * width


@verifies(K.PackOp, K.UnpackOp)
def check_pack(ctx: Context, op: Operation) -> None:
    src, res = op.source.type, op.result.type
    if src.rank != 1:
        ctx.op_error(op, "expects source and result to be rank-1 tiles")
    elif src.element.bitwidth == res.element.bitwidth:
        ctx.op_error(op, "expects source and result to have different element type widths")
    elif _packed_bits(src) % 8:
        ctx.op_error(op, "expects source tile to be byte-aligned")
    elif _packed_bits(res) % 8:
        ctx.op_error(op, "expects result tile to be byte-aligned")
    elif _packed_bits(src) != _packed_bits(res):
        ctx.op_error(op, f"expects source and result to have the same size in bytes, but got source tile size "
                         f"{_packed_bits(src) // 8} bytes and result tile size {_packed_bits(res) // 8} bytes")


# -- reduce / scan -------------------------------------------------------------------------
def _identity_type(a: object) -> T.Type | None:
    return getattr(a, "type", None)


def _check_aggregate(ctx: Context, op: Operation, matching_results: bool) -> bool:
    operands = op.operands
    results = op.results
    if not operands:
        ctx.op_error(op, "expect at least 1 operand")
        return False
    if len(operands) != len(results):
        ctx.op_error(op, "expect same number of operands and results")
        return False
    identities = op.identities.elements if isinstance(op.identities, At.ArrayAttr) else op.identities
    if identities is not None:
        if len(identities) != len(operands):
            ctx.op_error(op, f"expect identities to match the number of operands but got: {len(operands)} operands "
                             f"and {len(identities)} identities")
            return False
        for i, (v, ident) in enumerate(zip(operands, identities)):
            element, it = v.type.element, _identity_type(ident)
            if {str(element), str(it)} == {"f16", "bf16"}:
                continue
            if it is not None and element != it:
                ctx.op_error(op, f"expect same type for operand at index: {i} and identity at index: {i} "
                                 f"but got: {quoted(element)} and {quoted(it)}")
                return False
    rank = operands[0].type.rank
    if not 0 <= op.dim < rank:
        ctx.op_error(op, f"dimension ({op.dim}) is out of bound [0, {rank})")
        return False
    if matching_results:
        for i, (v, r) in enumerate(zip(operands, results)):
            if v.type != r.type:
                ctx.op_error(op, f"expect same type for operand at index: {i} and result at index: {i}")
                return False
    else:
        inferred = [T.TileType(v.type.element, v.type.shape[:op.dim] + v.type.shape[op.dim + 1:]) for v in operands]
        actual = [r.type for r in results]
        if inferred != actual:
            ctx.op_error(op, f"inferred type(s) {type_list(inferred)} are incompatible with return type(s) of "
                             f"operation {type_list(actual)}")
            ctx.op_error(op, "failed to infer returned types")  # MLIR's InferTypeOpInterface adds this
            return False
    return True


def _check_combiner(ctx: Context, op: Operation) -> None:
    n = len(op.operands)
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        return
    block = op.regions[0].blocks[0]
    if not block.ops:
        ctx.op_error(op, "expect non-empty block")
        return
    args = [a.type for a in block.args]
    if len(args) != 2 * n:
        ctx.op_error(op, f"expect {2 * n} block arguments but got: {len(args)}")
        return
    for i, t in enumerate(args):
        if not (isinstance(t, T.TileType) and t.rank == 0):
            ctx.op_error(op, f"expect 0-rank tile type at index: {i} but got: {quoted(t)}")
            return
    for i in range(0, 2 * n, 2):
        a, b = args[i].element, args[i + 1].element
        if a != b:
            ctx.op_error(op, f"expect same element type for block argument at index: {i} and {i + 1} but got: "
                             f"{quoted(a)} and {quoted(b)}")
            return
    for i, v in enumerate(op.operands):
        if v.type.element != args[2 * i].element:
            ctx.op_error(op, f"expect same type for operand at index: {i} and block argument at index: {2 * i} "
                             f"but got: {quoted(v.type.element)} and {quoted(args[2 * i].element)}")
            return
    term = block.ops[-1]
    if isinstance(term, C.YieldOp):
        if len(term.operands) != n:
            ctx.op_error(op, f"expect number of terminators operands ({len(term.operands)}) to match number of "
                             f"operands ({n})")
            return
        for i, (v, y) in enumerate(zip(op.operands, term.operands)):
            ye = T.element_type(y.type)
            if v.type.element != ye:
                ctx.op_error(op, f"expect same type for operand at index: {i} and terminator argument at index: "
                                 f"{i} but got: {quoted(v.type.element)} and {quoted(ye)}")
                return
    for inner in block.ops[:-1]:
        if not is_pure(inner):
            ctx.op_error(inner, f"only pure operations are allowed inside '{op.definition.full_name}'")


@verifies(K.ReduceOp)
def check_reduce(ctx: Context, op: Operation) -> None:
    if _check_aggregate(ctx, op, matching_results=False):
        _check_combiner(ctx, op)


@verifies(K.ScanOp)
def check_scan(ctx: Context, op: Operation) -> None:
    if _check_aggregate(ctx, op, matching_results=True):
        _check_combiner(ctx, op)



# -- print ---------------------------------------------------------------------------------
#: Characters that end a printf conversion (``%S`` is CUDA's wide string).
_CONVERSIONS = "diuoxXeEfFgGaAcsSpn%"


@verifies(C.PrintTkoOp)
def check_print(ctx: Context, op: Operation) -> None:
    text = op.attributes.get("str", "")
    expected = 0
    pos = 0
    while pos < len(text):
        if text[pos] != "%":
            pos += 1
            continue
        end = next((i for i in range(pos + 1, len(text)) if text[i] in _CONVERSIONS), None)
        if end is None:
            ctx.op_error(op, "found unterminated format expression")
            return
        if end == pos + 1 and text[end] == "%":  # an escaped '%'
            pos += 2
            continue
        expected += 1
        pos += 1
    if expected != len(op.args):
        ctx.op_error(op, f"incorrect number of operands: expected {expected}, found {len(op.args)}")


# -- assume predicates ---------------------------------------------------------------------
_MAX_DIVISOR = 1 << 62


def _int_or_pointer(t: T.Type) -> bool:
    return isinstance(t, T.PointerType) or (isinstance(t, T.ScalarType) and t.is_int)


def _div_by_problem(p: At.DivByAttr, t: T.Type) -> str:
    name = "'cuda_tile.div_by'"
    d = p.divisor
    if d <= 0 or d & (d - 1):
        return f"{name} divisor must be a power of 2"
    if (p.every is None) != (p.along is None):
        return f"{name} 'every'/'along' must be used in combination"
    if d > _MAX_DIVISOR:
        return f"{name} divisor is too large"
    if isinstance(t, T.TensorViewType):
        return f"{name} 'every'/'along' cannot be used if the constrained value is a tensor_view" \
            if p.every is not None else ""
    if not isinstance(t, T.TileType):
        return f"{name} is valid only for tile of integer/pointer or tensor_view values"
    if t.rank == 0 and p.every is not None:
        return f"{name} 'every'/'along' cannot be used if the constrained value is a 0D tile"
    if not _int_or_pointer(t.element):
        return f"{name} is valid only for tile of integer/pointer or tensor_view values"
    if p.every is None:
        return ""
    if not 0 <= p.along < t.rank:
        return f"{name} every_dim ({p.along}) must be >= 0 and < tile rank ({t.rank})"
    if not 0 <= p.every <= t.shape[p.along]:
        return (f"expected {name} every_dim to be within 0 and the size of the respective dimension "
                f"({t.shape[p.along]})")
    return ""


def _same_elements_problem(p: At.SameElementsAttr, t: T.Type) -> str:
    name = "'cuda_tile.same_elements'"
    if not isinstance(t, T.TileType) or not _int_or_pointer(t.element):
        return f"{name} is valid only for tile of integer/pointer values"
    if len(p.values) != t.rank:
        return f"expected number of values in {name} ({len(p.values)}) to match rank of constrained tile ({t.rank})"
    for i, (v, size) in enumerate(zip(p.values, t.shape)):
        if not 0 <= v <= size:
            return f"expected {name} value {i} to be within 0 and the size of the respective dimension ({size})"
    return ""


def _bounded_problem(p: At.BoundedAttr, t: T.Type) -> str:
    name = "'cuda_tile.bounded'"
    if not (isinstance(t, T.TileType) and isinstance(t.element, T.ScalarType) and t.element.is_int):
        return f"{name} is valid only for tile of integer values"
    width = t.element.bitwidth
    lo, hi = (-1, 0) if width == 1 else (-(1 << (width - 1)), (1 << (width - 1)) - 1)
    if p.lower is not None and not lo <= p.lower <= hi:
        return f"{name} expects lower bound to be within [{lo}, {hi}]"
    if p.upper is not None and not lo <= p.upper <= hi:
        return f"{name} expects upper bound to be within [{lo}, {hi}]"
    if p.lower is not None and p.upper is not None and p.lower > p.upper:
        return f"{name} expects lower bound to be less than or equal to upper bound"
    return ""


_PREDICATE_RULES = {At.DivByAttr: _div_by_problem, At.SameElementsAttr: _same_elements_problem,
                    At.BoundedAttr: _bounded_problem}


@verifies(C.AssumeOp)
def check_assume(ctx: Context, op: Operation) -> None:
    predicate = op.attributes.get("predicate")
    rule = _PREDICATE_RULES.get(type(predicate))
    problem = rule(predicate, op.value.type) if rule is not None else ""
    if problem:
        ctx.op_error(op, problem)
