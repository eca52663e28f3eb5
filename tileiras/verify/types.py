"""Type well-formedness: tile shapes, element types, pointers, tensor views and tile views.

Checked where a type is introduced (op results, block arguments, function
signatures, globals), so a bad type is reported once at its definition.
"""
from __future__ import annotations

from typing import Optional

from ..ir import types as T
from ..ir.core import Function, Module, Operation
from ..ir.debug import DebugAttr
from .context import Context, verifies

MAX_TILE_ELEMENTS = 1 << 24
I32_MAX = (1 << 31) - 1
NUMBER_NAMES = ("f16", "bf16", "f32", "tf32", "f64", "f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f4E2M1FN",
                "fnv8E5M3FNU", "i1", "i8", "i16", "i32", "i64")
FLOAT_PADDINGS = (T.PaddingValue.NEG_ZERO, T.PaddingValue.NAN, T.PaddingValue.POS_INF, T.PaddingValue.NEG_INF)


def _is_number(t: T.Type) -> bool:
    return isinstance(t, T.ScalarType) and t.name in NUMBER_NAMES


def _dims(values: tuple[int, ...]) -> str:
    return ", ".join("?" if d == T.DYNAMIC else str(d) for d in values)


def type_problems(t: T.Type) -> list[str]:
    """Every rule ``t`` (and the types inside it) breaks."""
    if isinstance(t, T.TileType):
        return _tile_problems(t)
    if isinstance(t, T.PointerType):
        return _pointer_problems(t)
    if isinstance(t, T.TensorViewType):
        return _tensor_view_problems(t)
    if isinstance(t, (T.PartitionViewType, T.StridedViewType)):
        return _partition_problems(t)
    if isinstance(t, T.GatherScatterViewType):
        return _gather_problems(t)
    return []


def own_type_problems(t: T.Type) -> list[str]:
    """What is wrong with ``t`` itself, its inner types taken as checked (the text
    parser checks each type as it is read, innermost first)."""
    if isinstance(t, T.TileType):
        if isinstance(t.element, T.PointerType) or _is_number(t.element) or t.element == T.I4:
            return tile_shape_problems(t.shape, t.element)
        return [_TILE_ELEMENT]
    if isinstance(t, T.PointerType):
        return [] if not isinstance(t.pointee, T.ScalarType) or _is_number(t.pointee) else _pointer_problems(t)
    if isinstance(t, (T.PartitionViewType, T.StridedViewType, T.GatherScatterViewType)):
        return type_problems(t)[len(_tensor_view_problems(t.tensor_view)):] if not _tensor_view_problems(
            t.tensor_view) else []
    return type_problems(t)


#: NVIDIA's element-type lists in the order its messages name them (13.5 lists fnv8E5M3FNU).
_NUMBERS = " or ".join(NUMBER_NAMES)
_TILE_ELEMENT = f"failed to verify 'elementType': {_NUMBERS} or Pointer type"


def _tile_problems(t: T.TileType) -> list[str]:
    e = t.element
    if isinstance(e, T.PointerType):
        inner = _pointer_problems(e)
    elif not (_is_number(e) or e == T.I4):
        inner = [_TILE_ELEMENT]
    else:
        inner = []
    return inner + tile_shape_problems(t.shape, e)


def tile_shape_problems(shape: tuple[int, ...], element: T.Type) -> list[str]:
    if element == T.F4E2M1FN and (not shape or all(d % 2 for d in shape)):
        return ["F4E2M1FN tiles must have an even number of elements"]
    if any(d <= 0 for d in shape):
        return [f"all dimensions must be positive constants, got {_dims(shape)}"]
    if any(d & (d - 1) for d in shape):
        return [f"all dimensions must be powers of two, got {_dims(shape)}"]
    n = 1
    for d in shape:
        n *= d
    if n > MAX_TILE_ELEMENTS:
        return [f"tile would exceed the maximum of {MAX_TILE_ELEMENTS} elements"]
    return []


def _pointer_problems(t: T.PointerType) -> list[str]:
    if _is_number(t.pointee):
        return []
    return [f"failed to verify 'pointeeType': {_NUMBERS}"]


def _tensor_view_problems(t: T.TensorViewType) -> list[str]:
    e = t.element
    if not (_is_number(e) or isinstance(e, T.PointerType)):
        return [f"failed to verify 'elementType': {_NUMBERS} or Pointer type"]
    if len(t.shape) != len(t.strides):
        return [f"expected shape and stride to be of same rank but got shape of rank {len(t.shape)} "
                f"and stride of rank {len(t.strides)}"]
    if any(d <= 0 and d != T.DYNAMIC for d in t.shape):
        return [f"dimensions must have strictly positive constant sizes but got [{_dims(t.shape)}]"]
    if any(d <= 0 and d != T.DYNAMIC for d in t.strides):
        return [f"dimensions must have strictly positive constant strides but got [{_dims(t.strides)}]"]
    return []


def _view_tile_problems(tile: tuple[int, ...], view: T.TensorViewType) -> Optional[str]:
    if not tile:
        return "0-dimension tile shape is not supported"
    if len(tile) != view.rank:
        return (f"expected tensor_view rank and tile rank to match, got tensor_view of rank {view.rank} "
                f"and tiles of rank {len(tile)}")
    return None


def _tile_shape_checks(tile: tuple[int, ...]) -> Optional[str]:
    if any(d <= 0 for d in tile):
        return f"tile shape dimensions must have positive length but got [{_dims(tile)}]"
    if any(d & (d - 1) for d in tile):
        return f"tile shape dimensions must have power of two length but got [{_dims(tile)}]"
    return None


def _padding_problem(padding: Optional[T.PaddingValue], element: T.Type) -> list[str]:
    if padding in FLOAT_PADDINGS and not (isinstance(element, T.ScalarType) and element.is_float):
        return [f"padding_value {padding.keyword} can only be used with floating point element types, got {element}"]
    return []


def _partition_problems(t: "T.PartitionViewType | T.StridedViewType") -> list[str]:
    view = t.tensor_view
    inner = _tensor_view_problems(view)
    if inner:
        return inner
    first = _view_tile_problems(t.tile_shape, view)
    if first:
        return [first]
    if len(t.dim_map) != len(t.tile_shape):
        return [f"expected dim_map to map exactly all {len(t.tile_shape)} dimensions of the tile, "
                f"got {len(t.dim_map)} mappings"]
    shape = _tile_shape_checks(t.tile_shape)
    if shape:
        return [shape]
    used: dict[int, int] = {}
    for tile_dim, target in enumerate(t.dim_map):
        if target < 0:
            return [f"target dimension must not be negative, got {target}"]
        if target >= view.rank:
            return [f"target dimension is outside of tensor view dimensions, expected strictly less than "
                    f"{view.rank}, got {target}"]
        if target in used:
            return [f"target dimension {target} mapped at least twice (for tile dimensions {used[target]} "
                    f"and {tile_dim})"]
        used[target] = tile_dim
    problems = tile_shape_problems(t.tile_shape, view.element) + _padding_problem(t.padding_value, view.element)
    if problems or not isinstance(t, T.StridedViewType):
        return problems
    if len(t.traversal_strides) != len(t.tile_shape):
        return [f"expected {len(t.tile_shape)} traversal strides, got {len(t.traversal_strides)}"]
    if any(s <= 0 for s in t.traversal_strides):
        return [f"traversal strides must be strictly positive but got [{_dims(t.traversal_strides)}]"]
    return []


def _gather_problems(t: T.GatherScatterViewType) -> list[str]:
    view = t.tensor_view
    first = _tensor_view_problems(view) or [p for p in [_view_tile_problems(t.tile_shape, view),
                                                        _tile_shape_checks(t.tile_shape)] if p]
    if first:
        return first[:1]
    if t.sparse_dim >= view.rank:
        return [f"gather dimension is outside of tensor view dimensions, expected strictly less than "
                f"{view.rank}, got {t.sparse_dim}"]
    return tile_shape_problems(t.tile_shape, view.element) + _padding_problem(t.padding_value, view.element)


def check_value_type(ctx: Context, loc: Optional[DebugAttr], t: T.Type) -> None:
    for problem in type_problems(t):
        ctx.emit(loc, problem)


@verifies(Operation)
def check_result_types(ctx: Context, op: Operation) -> None:
    for r in op.results:
        check_value_type(ctx, op.loc, r.type)
    for region in op.regions:
        for block in region.blocks:
            for arg in block.args:
                check_value_type(ctx, op.loc, arg.type)


def check_function_signature(ctx: Context, fn: Function) -> None:
    for t in fn.type.inputs + fn.type.results:
        check_value_type(ctx, fn.loc, t)


def check_globals(ctx: Context, module: Module) -> None:
    for g in module.globals:
        check_value_type(ctx, g.loc, g.type)
