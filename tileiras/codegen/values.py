"""How Tile IR values live in LLVM IR: element types and distributed tiles."""
from __future__ import annotations

import struct
from typing import Optional, Union

import llvmlite.ir.types as _lltypes
from llvmlite import ir

from ..ir import types as T

# LLVM 22 reads opaque pointers only: make llvmlite print every pointer as ``ptr``.
_lltypes.ir_layer_typed_pointers_enabled = False
from ..layout.linear import LinearLayout
from ..record import field, record


class BFloatType(ir.Type):
    """LLVM's ``bfloat`` (llvmlite.ir has no spelling for it)."""

    null = "0xR0000"

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BFloatType)

    def __hash__(self) -> int:
        return hash("bfloat")

    def format_constant(self, value: float) -> str:
        bits = struct.unpack("<I", struct.pack("<f", value))[0] >> 16
        return f"0xR{bits:04X}"


BF16 = BFloatType()
GPTR = ir.PointerType(addrspace=1)
GENERIC_PTR = ir.PointerType()

_SCALARS: dict[str, ir.Type] = {
    "i1": ir.IntType(1), "i4": ir.IntType(8), "i8": ir.IntType(8), "i16": ir.IntType(16),
    "i32": ir.IntType(32), "i64": ir.IntType(64),
    "f16": ir.HalfType(), "bf16": BF16, "f32": ir.FloatType(), "tf32": ir.FloatType(), "f64": ir.DoubleType(),
    # narrow floats travel as their bit patterns; conversions go through cvt
    "f8E4M3FN": ir.IntType(8), "f8E5M2": ir.IntType(8), "f8E8M0FNU": ir.IntType(8),
    "f4E2M1FN": ir.IntType(8), "fnv8E5M3FNU": ir.IntType(8),
}


def byte_gep(b: ir.IRBuilder, base: ir.Value, offset: ir.Value) -> ir.Value:
    """``base + offset`` bytes, as an opaque pointer in ``base``'s address space
    (llvmlite would otherwise type the result after a global's pointee)."""
    p = b.gep(base, [offset], source_etype=ir.IntType(8))
    p.type = ir.PointerType(addrspace=base.type.addrspace)
    return p


def llvm_type(t: T.Type) -> ir.Type:
    """LLVM type of one element of ``t`` (a scalar, pointer or tile type)."""
    if isinstance(t, T.TileType):
        t = t.element
    if isinstance(t, T.PointerType):
        return GPTR
    if isinstance(t, T.ScalarType):
        return _SCALARS[t.name]
    raise TypeError(f"no LLVM element type for {t}")


def is_native_float(t: T.Type) -> bool:
    """Elements that LLVM computes on as floats (not bit-pattern floats like f8)."""
    e = t.element if isinstance(t, T.TileType) else t
    return isinstance(e, T.ScalarType) and e.name in ("f16", "bf16", "f32", "tf32", "f64")


@record
class TileVal:
    """A tile distributed over the CTA: ``regs[i]`` is the element this thread holds
    at register index ``i`` of ``layout``."""

    layout: LinearLayout
    regs: list[ir.Value]

    @property
    def scalar(self) -> ir.Value:
        """The single element of a rank-0 tile (every thread holds a copy)."""
        return self.regs[0]


@record
class TensorViewVal:
    base: ir.Value                                     # ptr addrspace(1)
    element: T.Type
    shape: list[Union[int, ir.Value]]                  # i64 values or compile-time ints
    strides: list[Union[int, ir.Value]]


@record
class TiledViewVal:
    """partition_view / strided_view / gather_scatter_view over a tensor view."""

    tensor: TensorViewVal
    type: T.Type
    tile_shape: tuple[int, ...]
    dim_map: tuple[int, ...]
    traversal: Optional[tuple[int, ...]] = None       # strided_view steps
    sparse_dim: Optional[int] = None                   # gather_scatter_view
    padding: Optional[T.PaddingValue] = None
    extras: dict = field(default_factory=dict)


Emitted = Union[TileVal, TensorViewVal, TiledViewVal, None]


def smem_type(t: ir.Type) -> ir.Type:
    """The type a register of type ``t`` takes in shared memory: predicates (i1) as bytes."""
    if isinstance(t, ir.IntType) and t.width == 1:
        return ir.IntType(8)
    return t


def to_smem(b: ir.IRBuilder, v: ir.Value, t: ir.Type) -> ir.Value:
    """``v`` as the shared-memory type ``t`` (``smem_type``) it is stored as."""
    return b.zext(v, t) if v.type != t else v


def from_smem(b: ir.IRBuilder, v: ir.Value, t: ir.Type) -> ir.Value:
    """A value loaded from shared memory back as the register type ``t``."""
    return b.trunc(v, t) if v.type != t else v
