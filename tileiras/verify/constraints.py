"""Operand/result type constraints and multi-field type relations of every op.

This is the verifier's reading of NVIDIA's ODS declarations (``Ops.td``): each
field's allowed type (``operand #1 must be tile of i1 values, but got ...``) and
the relations between fields (``AllTypesMatch``, ``AllShapesMatch``...).  Keys are
the registry's op classes and field names; a ``Match`` may show a field under its
ODS name (``"result=to"``) so messages read like NVIDIA's.
"""
from __future__ import annotations

from typing import Callable, Optional

from ..ir import types as T
from ..record import record
from ..tile import ops_arith as A
from ..tile import ops_control as C
from ..tile import ops_core as K
from ..tile import ops_memory as M

INTS = ("i1", "i8", "i16", "i32", "i64")
BASE_FLOATS = ("f16", "bf16", "f32", "f64")
FLOATS = BASE_FLOATS + ("tf32", "f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f4E2M1FN", "fnv8E5M3FNU")
NUMBERS = INTS + FLOATS
PTR = "ptr"


@record(frozen=True)
class TypeConstraint:
    summary: str
    accepts: Callable[[T.Type], bool]


def _element_name(t: T.Type) -> str:
    if isinstance(t, T.ScalarType):
        return t.name
    if isinstance(t, T.PointerType):
        return PTR
    return ""


def tile_of(elements: tuple[str, ...], rank: Optional[int] = None, summary: str = "tile") -> TypeConstraint:
    names = " or ".join("Pointer type" if e == PTR else e for e in elements)
    head = f"{rank}D {summary}" if rank is not None else summary

    def accepts(t: T.Type) -> bool:
        return (isinstance(t, T.TileType) and _element_name(t.element) in elements
                and (rank is None or t.rank == rank))

    return TypeConstraint(f"{head} of {names} values", accepts)


def _is(*classes: type) -> Callable[[T.Type], bool]:
    return lambda t: isinstance(t, classes)


ANY = TypeConstraint("any type", lambda t: True)
TILE = TypeConstraint("Tile type", _is(T.TileType))
TOKEN = TypeConstraint("cuda tile token type", _is(T.TokenType))
TENSOR_VIEW = TypeConstraint("tensor view type", _is(T.TensorViewType))
TILE_VIEW = TypeConstraint("TileView instance", _is(*T.ViewType))
PARTITION_VIEW = TypeConstraint("partition view type", _is(T.PartitionViewType))
STRIDED_VIEW = TypeConstraint("strided view type", _is(T.StridedViewType))
GATHER_VIEW = TypeConstraint("gather/scatter view type", _is(T.GatherScatterViewType))
INT_TILE = tile_of(INTS)
I1_TILE = tile_of(("i1",))
I8_TILE = tile_of(("i8",))
I64_TILE = tile_of(("i64",))
BASE_FLOAT_TILE = tile_of(BASE_FLOATS)
FLOAT_TILE = tile_of(FLOATS)
NUMBER_TILE = tile_of(NUMBERS)
PTR_TILE = tile_of((PTR,))
INT_OR_I4_TILE = tile_of(INTS + ("i4",))
NUMBER_OR_I4_TILE = tile_of(NUMBERS + ("i4",))
SCALAR_I1 = tile_of(("i1",), rank=0)
SCALAR_I32 = tile_of(("i32",), rank=0)
SCALAR_INT = tile_of(INTS, rank=0)
SCALAR_PTR = tile_of((PTR,), rank=0)
MMAF_OPERAND = tile_of(("f16", "bf16", "f32", "f64", "tf32", "f8E4M3FN", "f8E5M2"), summary="mmaf operand tile type")
MMAF_RESULT = tile_of(("f16", "f32", "f64"), summary="mmaf acc/result tile type")
MMAF_SCALED_OPERAND = tile_of(("f8E4M3FN", "f8E5M2", "f4E2M1FN"), summary="mmaf_scaled operand tile type")
MMAF_SCALED_SCALE = tile_of(("f8E4M3FN", "f8E8M0FNU", "fnv8E5M3FNU"), summary="mmaf_scaled scale tile type")
MMAF_SCALED_RESULT = tile_of(("f32",), summary="mmaf_scaled result tile type")
MMAI_OPERAND = tile_of(("i8",), summary="mmai operand tile type")
MMAI_ACC = tile_of(("i32",), summary="mmai acc tile type")
MMAI_RESULT = tile_of(("i32",), summary="mmai result tile type")
FMA_TILE = tile_of(BASE_FLOATS)


@record(frozen=True)
class Match:
    """A relation between fields: ``kind`` is type/shape/rank/element, or a custom
    message with ``check(types) -> bool`` for NVIDIA's TypesMatchWith traits."""

    kind: str
    fields: tuple[str, ...] = ()
    message: str = ""
    check: Optional[Callable[[list[T.Type]], bool]] = None


def same(kind: str, *fields: str) -> Match:
    return Match(kind, fields)


def custom(message: str, check: Callable[[list[T.Type]], bool], *fields: str) -> Match:
    return Match("custom", fields, message, check)


@record(frozen=True)
class Signature:
    fields: dict[str, TypeConstraint]
    matches: tuple[Match, ...] = ()


def sig(*matches: Match, **fields: TypeConstraint) -> Signature:
    return Signature({k.rstrip("_"): v for k, v in fields.items()}, matches)


def _i1_same_shape(types: list[T.Type]) -> bool:
    lhs, result = types
    return isinstance(lhs, T.TileType) and result == T.TileType(T.I1, lhs.shape)


def _pointer_to(types: list[T.Type]) -> bool:
    value, pointers = types
    return (isinstance(value, T.TileType) and isinstance(pointers, T.TileType)
            and pointers.shape == value.shape and isinstance(pointers.element, T.PointerType)
            and pointers.element.pointee == value.element)


def _same_shape(types: list[T.Type]) -> bool:
    a, b = types
    return getattr(a, "shape", None) == getattr(b, "shape", None)


def _float_unary(extra: tuple[Match, ...] = ()) -> Signature:
    return sig(*extra, same("type", "source", "result"), source=BASE_FLOAT_TILE, result=BASE_FLOAT_TILE)


def _float_binary() -> Signature:
    return sig(same("type", "lhs", "rhs", "result"), lhs=BASE_FLOAT_TILE, rhs=BASE_FLOAT_TILE, result=BASE_FLOAT_TILE)


def _int_binary(names: tuple[str, str] = ("lhs", "rhs")) -> Signature:
    a, b = names
    return sig(same("type", a, b, "result"), **{a: INT_TILE, b: INT_TILE, "result": INT_TILE})


_CMP = custom("Result type has i1 element type and same shape as operands",
              _i1_same_shape, "lhs", "result")

SIGNATURES: dict[type, Signature] = {
    # -- arith ------------------------------------------------------------------------
    **{cls: _float_unary() for cls in (A.AbsFOp, A.CeilOp, A.CosOp, A.CosHOp, A.ExpOp, A.Exp2Op, A.FloorOp,
                                       A.LogOp, A.Log2Op, A.NegFOp, A.RsqrtOp, A.SinOp, A.SinHOp, A.SqrtOp,
                                       A.TanOp, A.TanHOp)},
    **{cls: _float_binary() for cls in (A.AddFOp, A.SubFOp, A.MulFOp, A.DivFOp, A.RemFOp, A.MaxFOp, A.MinFOp)},
    A.Atan2Op: sig(same("type", "x", "y", "result"), x=BASE_FLOAT_TILE, y=BASE_FLOAT_TILE, result=BASE_FLOAT_TILE),
    A.FPowFOp: sig(same("type", "result", "source", "exponent"), same("rank", "source", "exponent", "result"),
                   source=BASE_FLOAT_TILE, exponent=BASE_FLOAT_TILE, result=BASE_FLOAT_TILE),
    A.FPowIOp: sig(same("type", "source", "result"), same("shape", "source", "exponent"),
                   source=BASE_FLOAT_TILE, exponent=INT_TILE, result=BASE_FLOAT_TILE),
    A.FmaOp: sig(same("type", "lhs", "rhs", "acc", "result"), lhs=FMA_TILE, rhs=FMA_TILE, acc=FMA_TILE, result=FMA_TILE),
    A.AbsIOp: sig(same("type", "source", "result"), source=INT_TILE, result=INT_TILE),
    A.NegIOp: sig(same("type", "source", "result"), source=INT_TILE, result=INT_TILE),
    **{cls: _int_binary() for cls in (A.AddIOp, A.SubIOp, A.MulIOp, A.DivIOp, A.RemIOp, A.AndIOp, A.OrIOp,
                                      A.XOrIOp, A.ShLIOp, A.ShRIOp, A.MaxIOp, A.MinIOp)},
    A.MulhiIOp: _int_binary(("x", "y")),
    A.CmpFOp: sig(same("type", "lhs", "rhs"), _CMP, lhs=BASE_FLOAT_TILE, rhs=BASE_FLOAT_TILE, result=I1_TILE),
    A.CmpIOp: sig(same("type", "lhs", "rhs"), _CMP, lhs=INT_TILE, rhs=INT_TILE, result=I1_TILE),
    A.MmaFOp: sig(same("type", "acc", "result"), Match("element", ("lhs", "rhs")), same("rank", "lhs", "rhs", "acc"),
                  lhs=MMAF_OPERAND, rhs=MMAF_OPERAND, acc=MMAF_RESULT, result=MMAF_RESULT),
    A.MmaFScaledOp: sig(same("type", "acc", "result"), Match("element", ("lhs", "rhs")),
                        Match("element", ("lhs_scale", "rhs_scale")),
                        same("rank", "lhs", "rhs", "acc", "lhs_scale", "rhs_scale"),
                        lhs=MMAF_SCALED_OPERAND, rhs=MMAF_SCALED_OPERAND, acc=MMAF_SCALED_RESULT,
                        lhs_scale=MMAF_SCALED_SCALE, rhs_scale=MMAF_SCALED_SCALE, result=MMAF_SCALED_RESULT),
    A.MmaIOp: sig(same("type", "acc", "result"), Match("element", ("lhs", "rhs")), same("rank", "lhs", "rhs", "acc"),
                  lhs=MMAI_OPERAND, rhs=MMAI_OPERAND, acc=MMAI_ACC, result=MMAI_RESULT),
    # -- core ---------------------------------------------------------------------------
    K.BitcastOp: sig(same("shape", "source", "result"), source=NUMBER_TILE, result=NUMBER_TILE),
    K.BroadcastOp: sig(Match("same_element"), same("rank", "source", "result"), source=TILE, result=TILE),
    K.CatOp: sig(same("rank", "lhs", "rhs", "result"), Match("element", ("lhs", "rhs", "result")),
                 lhs=TILE, rhs=TILE, result=TILE),
    K.ConstantOp: sig(result=NUMBER_TILE),
    K.ExtIOp: sig(same("shape", "from", "result=to"), from_=INT_OR_I4_TILE, result=INT_OR_I4_TILE),
    K.TruncIOp: sig(same("shape", "from", "result=to"), from_=INT_OR_I4_TILE, result=INT_OR_I4_TILE),
    K.FToFOp: sig(same("shape", "from", "result=to"), from_=FLOAT_TILE, result=FLOAT_TILE),
    K.FToIOp: sig(same("shape", "from", "result=to"), from_=FLOAT_TILE, result=INT_TILE),
    K.IToFOp: sig(same("shape", "from", "result=to"), from_=INT_TILE, result=FLOAT_TILE),
    K.ExtractOp: sig(same("rank", "source", "result"), source=TILE, indices=SCALAR_I32, result=TILE),
    K.InsertOp: sig(same("rank", "source", "destination"), same("type", "destination", "result"),
                    source=TILE, destination=TILE, indices=SCALAR_I32, result=TILE),
    K.GetGlobalOp: sig(result=SCALAR_PTR),
    K.GetNumTileBlocksOp: sig(gridSize_x=SCALAR_I32, gridSize_y=SCALAR_I32, gridSize_z=SCALAR_I32),
    K.GetTileBlockIdOp: sig(blockId_x=SCALAR_I32, blockId_y=SCALAR_I32, blockId_z=SCALAR_I32),
    K.IntToPtrOp: sig(same("shape", "source", "result"), source=I64_TILE, result=PTR_TILE),
    K.PtrToIntOp: sig(same("shape", "source", "result"), source=PTR_TILE, result=I64_TILE),
    K.PtrToPtrOp: sig(same("shape", "source", "result"), source=PTR_TILE, result=PTR_TILE),
    K.IotaOp: sig(result=INT_TILE),
    K.OffsetOp: sig(Match("same_shape_all"), same("type", "result", "ptr"), ptr=PTR_TILE, offset=INT_TILE,
                    result=PTR_TILE),
    K.PackOp: sig(same("rank", "source", "result"), source=NUMBER_OR_I4_TILE, result=I8_TILE),
    K.UnpackOp: sig(same("rank", "source", "result"), source=I8_TILE, result=NUMBER_OR_I4_TILE),
    K.PermuteOp: sig(Match("element", ("source", "result")), same("rank", "source", "result"), source=TILE, result=TILE),
    K.ReshapeOp: sig(Match("same_element"), source=TILE, result=TILE),
    K.ReduceOp: sig(Match("same_operand_shape"), operands=TILE, results=TILE),
    K.ScanOp: sig(Match("same_operand_shape"), operands=TILE, results=TILE),
    K.SelectOp: sig(same("type", "val_if_true", "val_if_false", "result"),
                    same("shape", "cond", "val_if_true", "val_if_false", "result"),
                    cond=I1_TILE, val_if_true=TILE, val_if_false=TILE, result=TILE),
    # -- control ------------------------------------------------------------------------
    C.AssertOp: sig(condition=I1_TILE),
    C.AssumeOp: sig(same("type", "value", "result")),
    C.ForOp: sig(same("type", "lowerBound", "upperBound", "step"),
                 lowerBound=SCALAR_INT, upperBound=SCALAR_INT, step=SCALAR_INT),
    C.IfOp: sig(condition=SCALAR_I1),
    C.PrintTkoOp: sig(args=TILE, token=TOKEN, result_token=TOKEN),
    C.GdcLaunchDependentsTkoOp: sig(token=TOKEN, result_token=TOKEN),
    C.GdcWaitTkoOp: sig(token=TOKEN, result_token=TOKEN),
    # -- memory -------------------------------------------------------------------------
    M.AllocaOp: sig(result=SCALAR_PTR),
    M.AtomicCASTkoOp: sig(same("shape", "pointers", "cmp", "val", "result"), same("type", "cmp", "val", "result"),
                          pointers=PTR_TILE, cmp=TILE, val=TILE, mask=I1_TILE, token=TOKEN, result=TILE,
                          result_token=TOKEN),
    M.AtomicRMWTkoOp: sig(same("shape", "pointers", "arg", "result"), same("type", "arg", "result"),
                          pointers=PTR_TILE, arg=TILE, mask=I1_TILE, token=TOKEN, result=TILE, result_token=TOKEN),
    M.AtomicRedViewTkoOp: sig(view=TILE_VIEW, index=INT_TILE, value=TILE, token=TOKEN, result_token=TOKEN),
    M.GetIndexSpaceShapeOp: sig(src=TILE_VIEW, results=SCALAR_INT),
    M.GetTensorShapeOp: sig(src=TENSOR_VIEW, results=SCALAR_INT),
    M.JoinTokensOp: sig(tokens=TOKEN, result=TOKEN),
    M.LoadPtrTkoOp: sig(custom("`source` type is expected a pointer type of `result` type", _pointer_to,
                               "result", "source"),
                        custom("shape of 'mask' must match the shape of 'source'", _same_shape, "source", "mask"),
                        custom("type of 'paddingValue' must match the type of 'result'",
                               lambda ts: ts[0] == ts[1], "result", "paddingValue"),
                        source=PTR_TILE, mask=I1_TILE, paddingValue=NUMBER_TILE, token=TOKEN, result=TILE,
                        result_token=TOKEN),
    M.LoadViewTkoOp: sig(view=TILE_VIEW, index=INT_TILE, token=TOKEN, tile=TILE, result_token=TOKEN),
    M.MakeGatherScatterViewOp: sig(tensor_view=TENSOR_VIEW, result=GATHER_VIEW),
    M.MakePartitionViewOp: sig(tensor_view=TENSOR_VIEW, result=PARTITION_VIEW),
    M.MakeStridedViewOp: sig(tensor_view=TENSOR_VIEW, result=STRIDED_VIEW),
    M.MakeTensorViewOp: sig(base=SCALAR_PTR, dynamicShape=SCALAR_INT, dynamicStrides=SCALAR_INT, result=TENSOR_VIEW),
    M.MakeTokenOp: sig(result=TOKEN),
    M.MemoryFenceAliasTkoOp: sig(token=TOKEN, result_token=TOKEN),
    M.MultimemLoadReduceViewTkoOp: sig(view=TILE_VIEW, index=INT_TILE, token=TOKEN, reduced_values=TILE,
                                       result_token=TOKEN),
    M.MultimemReduceViewTkoOp: sig(view=TILE_VIEW, tile=TILE, index=INT_TILE, token=TOKEN, result_token=TOKEN),
    M.MultimemStoreViewTkoOp: sig(view=TILE_VIEW, tile=TILE, index=INT_TILE, token=TOKEN, result_token=TOKEN),
    M.StorePtrTkoOp: sig(custom("`destination` type is expected a pointer type of `value` type", _pointer_to,
                                "value", "destination"),
                         custom("shape of 'destination' must match the shape of 'mask'", _same_shape,
                                "mask", "destination"),
                         destination=PTR_TILE, value=TILE, mask=I1_TILE, token=TOKEN, result_token=TOKEN),
    M.StoreViewTkoOp: sig(tile=TILE, view=TILE_VIEW, index=INT_TILE, token=TOKEN, result_token=TOKEN),
}


#: Integer attributes NVIDIA confines (``ConfinedAttr<I64Attr, [IntMinValue<0>]>``...):
#: op class -> attribute -> (lowest value, ODS summary).
_I64_MIN_0 = (0, "64-bit signless integer attribute whose minimum value is 0")
_I32_NON_NEGATIVE = (0, "32-bit signless integer attribute whose value is non-negative")
ATTR_MINIMUMS: dict[type, dict[str, tuple[int, str]]] = {
    M.AllocaOp: {"num_elem": _I64_MIN_0, "alignment": _I64_MIN_0},
    K.ReduceOp: {"dim": _I32_NON_NEGATIVE},
    K.ScanOp: {"dim": _I32_NON_NEGATIVE},
}
