"""Tile IR types.

Every type is an immutable, hashable value.  Printing follows NVIDIA's
tileirdisasm spelling (``tile<32x64xf32>``, ``tensor_view<?xf32, strides=[1]>``);
the bytecode encodings live in ``tileiras.reader.types`` / ``tileiras.writer``.
"""
from __future__ import annotations

import enum
from typing import Optional

from ..record import record

#: Marker of a dynamic extent or stride (MLIR's ShapedType::kDynamic, i.e. INT64_MIN).
DYNAMIC = -(1 << 63)


class Type:
    """Base of all Tile IR types."""

    def __str__(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


@record(frozen=True)
class ScalarType(Type):
    """An integer or floating-point element type (``i32``, ``bf16``, ``f8E4M3FN``...)."""

    name: str

    @property
    def is_int(self) -> bool:
        return self.name.startswith("i")

    @property
    def is_float(self) -> bool:
        return not self.is_int

    @property
    def bitwidth(self) -> int:
        return SCALAR_BITWIDTH[self.name]

    def __str__(self) -> str:
        return self.name


SCALAR_BITWIDTH = {
    "i1": 1, "i4": 4, "i8": 8, "i16": 16, "i32": 32, "i64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "tf32": 32, "f64": 64,
    "f8E4M3FN": 8, "f8E5M2": 8, "f8E8M0FNU": 8, "f4E2M1FN": 4, "fnv8E5M3FNU": 8,
}

I1, I4, I8, I16, I32, I64 = (ScalarType(n) for n in ("i1", "i4", "i8", "i16", "i32", "i64"))
F16, BF16, F32, TF32, F64 = (ScalarType(n) for n in ("f16", "bf16", "f32", "tf32", "f64"))
F8E4M3FN, F8E5M2, F8E8M0FNU, F4E2M1FN, FNV8E5M3FNU = (
    ScalarType(n) for n in ("f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f4E2M1FN", "fnv8E5M3FNU"))


class PtrAttr(enum.IntEnum):
    """Pointer classification carried by ptr and tensor_view types (13.4+)."""

    NONE = 0
    UNICAST = 1
    MULTICAST = 2

    @property
    def keyword(self) -> str:
        return self.name.lower()


class PaddingValue(enum.IntEnum):
    ZERO = 0
    NEG_ZERO = 1
    NAN = 2
    POS_INF = 3
    NEG_INF = 4

    @property
    def keyword(self) -> str:
        return self.name.lower()


@record(frozen=True)
class TokenType(Type):
    def __str__(self) -> str:
        return "token"


TOKEN = TokenType()


@record(frozen=True)
class PointerType(Type):
    pointee: Type
    ptr_attr: Optional[PtrAttr] = None

    def __str__(self) -> str:
        if self.ptr_attr is None:
            return f"ptr<{self.pointee}>"
        return f"ptr<{self.pointee}, <{self.ptr_attr.keyword}>>"


def format_dims(dims: tuple[int, ...]) -> str:
    return "x".join("?" if d == DYNAMIC else str(d) for d in dims)


@record(frozen=True)
class TileType(Type):
    element: Type
    shape: tuple[int, ...] = ()

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        if not self.shape:
            return f"tile<{self.element}>"
        return f"tile<{format_dims(self.shape)}x{self.element}>"


@record(frozen=True)
class TensorViewType(Type):
    element: Type
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    ptr_attr: Optional[PtrAttr] = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        dims = format_dims(self.shape)
        head = f"{dims}x{self.element}" if self.shape else str(self.element)
        if self.shape:
            head += ", strides=[" + ",".join("?" if s == DYNAMIC else str(s) for s in self.strides) + "]"
        if self.ptr_attr is not None:
            head += f", #cuda_tile.ptr_attr<{self.ptr_attr.keyword}>"
        return f"tensor_view<{head}>"


def _tile_shape(shape: tuple[int, ...]) -> str:
    return "tile=(" + "x".join(str(d) for d in shape) + ")"


def _padding(p: Optional[PaddingValue]) -> str:
    return "" if p is None else f", padding_value = {p.keyword}"


def _dim_map(dim_map: tuple[int, ...]) -> str:
    if dim_map == tuple(range(len(dim_map))):
        return ""
    return ", dim_map=[" + ", ".join(str(d) for d in dim_map) + "]"


@record(frozen=True)
class PartitionViewType(Type):
    tile_shape: tuple[int, ...]
    tensor_view: TensorViewType
    dim_map: tuple[int, ...]
    padding_value: Optional[PaddingValue] = None

    def __str__(self) -> str:
        return (f"partition_view<{_tile_shape(self.tile_shape)}{_padding(self.padding_value)}, "
                f"{self.tensor_view}{_dim_map(self.dim_map)}>")


@record(frozen=True)
class StridedViewType(Type):
    tile_shape: tuple[int, ...]
    traversal_strides: tuple[int, ...]
    tensor_view: TensorViewType
    dim_map: tuple[int, ...]
    padding_value: Optional[PaddingValue] = None

    def __str__(self) -> str:
        strides = "traversal_strides=[" + ",".join(str(s) for s in self.traversal_strides) + "]"
        return (f"strided_view<{_tile_shape(self.tile_shape)}, {strides}{_padding(self.padding_value)}, "
                f"{self.tensor_view}{_dim_map(self.dim_map)}>")


@record(frozen=True)
class GatherScatterViewType(Type):
    tile_shape: tuple[int, ...]
    tensor_view: TensorViewType
    sparse_dim: int
    padding_value: Optional[PaddingValue] = None

    def __str__(self) -> str:
        return (f"gather_scatter_view<{_tile_shape(self.tile_shape)}{_padding(self.padding_value)}, "
                f"{self.tensor_view}, sparse_dim={self.sparse_dim}>")


@record(frozen=True)
class FunctionType(Type):
    inputs: tuple[Type, ...]
    results: tuple[Type, ...]

    def __str__(self) -> str:
        ins = ", ".join(str(t) for t in self.inputs)
        outs = ", ".join(str(t) for t in self.results)
        if len(self.results) == 1 and not isinstance(self.results[0], FunctionType):
            return f"({ins}) -> {outs}"
        return f"({ins}) -> ({outs})"


ViewType = (PartitionViewType, StridedViewType, GatherScatterViewType)


def element_type(t: Type) -> Type:
    """The element type of a tile or view type; the type itself for scalars."""
    if isinstance(t, (TileType, TensorViewType)):
        return t.element
    if isinstance(t, ViewType):
        return t.tensor_view.element
    return t
