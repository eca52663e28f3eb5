"""The vocabulary of operand/result type constraints and multi-field type relations.

Each op declares its ``signature`` (``sig(...)``) in its class: NVIDIA's ODS declarations
(``Ops.td``) read as each field's allowed type (``operand #1 must be tile of i1 values,
but got ...``) and the relations between fields (``AllTypesMatch``, ``AllShapesMatch``...),
by field name; a ``Match`` may show a field under its ODS name (``"result=to"``) so
messages read like NVIDIA's.  The verifier checks them (``verify/generic.py``) and the text
parser infers types from them (``text/parser_infer.py``).
"""
from __future__ import annotations

from typing import Callable, Optional

from ..ir import types as T
from ..record import record

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


def pointer_to(types: list[T.Type]) -> bool:
    value, pointers = types
    return (isinstance(value, T.TileType) and isinstance(pointers, T.TileType)
            and pointers.shape == value.shape and isinstance(pointers.element, T.PointerType)
            and pointers.element.pointee == value.element)


def same_shape_of(types: list[T.Type]) -> bool:
    a, b = types
    return getattr(a, "shape", None) == getattr(b, "shape", None)


def float_unary(extra: tuple[Match, ...] = ()) -> Signature:
    return sig(*extra, same("type", "source", "result"), source=BASE_FLOAT_TILE, result=BASE_FLOAT_TILE)


def float_binary() -> Signature:
    return sig(same("type", "lhs", "rhs", "result"), lhs=BASE_FLOAT_TILE, rhs=BASE_FLOAT_TILE, result=BASE_FLOAT_TILE)


def int_binary(names: tuple[str, str] = ("lhs", "rhs")) -> Signature:
    a, b = names
    return sig(same("type", a, b, "result"), **{a: INT_TILE, b: INT_TILE, "result": INT_TILE})


CMP_RESULT = custom("Result type has i1 element type and same shape as operands",
              _i1_same_shape, "lhs", "result")
