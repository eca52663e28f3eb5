"""Memory op rules: memory model (ordering/scope), view indexing, tensor views, atomics."""
from __future__ import annotations

from typing import Optional

from ..ir import types as T
from ..ir.core import Operation
from ..tile import ops_memory as M
from ..tile.enums import AtomicRMWMode, MemoryOrderingSemantics, MemoryScope, MultimemReductionKind
from .context import Context, verifies
from .diagnostic import quoted

O = MemoryOrderingSemantics
_LOAD_ORDERINGS = (O.WEAK, O.RELAXED, O.ACQUIRE)
_STORE_ORDERINGS = (O.WEAK, O.RELAXED, O.RELEASE)
_ATOMIC_ORDERINGS = (O.RELAXED, O.ACQUIRE, O.RELEASE, O.ACQ_REL)


def _one_of(orderings: tuple[O, ...]) -> str:
    names = [o.keyword for o in orderings]
    return ", ".join(names[:-1]) + ", or " + names[-1]


def _check_memory_model(ctx: Context, op: Operation, allowed: tuple[O, ...], what: str) -> None:
    ordering = op.memory_ordering_semantics
    if ordering is None:
        return
    if ordering not in allowed:
        ctx.op_error(op, f"expect one of: {_one_of(allowed)}, but got: {ordering.keyword}")
        return
    scope = op.attributes.get("memory_scope")
    if ordering is O.WEAK and scope is not None:
        ctx.op_error(op, f"weak {what} must not have memory scope")
    elif ordering is not O.WEAK and scope is None:
        ctx.op_error(op, f"memory scope is required for {ordering.keyword} {what}")


def _multicast_pointer(t: T.Type) -> bool:
    """A tile of multicast pointers: the address of a multimem (multicast) object."""
    e = T.element_type(t)
    return isinstance(e, T.PointerType) and e.ptr_attr is T.PtrAttr.MULTICAST


def _multicast_view(t: T.Type) -> bool:
    return isinstance(t, T.ViewType) and t.tensor_view.ptr_attr is T.PtrAttr.MULTICAST


@verifies(M.LoadPtrTkoOp)
def check_load_ptr(ctx: Context, op: Operation) -> None:
    if _multicast_pointer(op.source.type):
        ctx.op_error(op, "multicast pointer is not allowed")
        return
    _check_memory_model(ctx, op, _LOAD_ORDERINGS, "load")


@verifies(M.StorePtrTkoOp)
def check_store_ptr(ctx: Context, op: Operation) -> None:
    if _multicast_pointer(op.destination.type):
        ctx.op_error(op, "multicast pointer is not allowed")
        return
    _check_memory_model(ctx, op, _STORE_ORDERINGS, "store")


@verifies(M.AllocaOp)
def check_alloca(ctx: Context, op: Operation) -> None:
    alignment = op.alignment
    if alignment <= 0 or alignment & (alignment - 1):
        ctx.op_error(op, "'alignment' must be power of two")
        return
    pointee = op.result.type.element.pointee
    natural = (_mlir_bitwidth(pointee) + 7) // 8
    if alignment < natural:
        ctx.op_error(op, f"'alignment' ({alignment}) must be at least the natural size ({natural} bytes) for "
                         f"element type {quoted(pointee)}")


def _mlir_bitwidth(t: T.Type) -> int:
    """MLIR's ``getIntOrFloatBitWidth``: tf32 counts its 19 significant bits."""
    return 19 if t == T.TF32 else t.bitwidth


# -- views ---------------------------------------------------------------------------------
def view_tile_type(view: T.Type) -> Optional[T.TileType]:
    if isinstance(view, T.ViewType):
        return T.TileType(view.tensor_view.element, tuple(view.tile_shape))
    return None


def _check_view_indices(ctx: Context, op: Operation, tile: Optional[T.Type]) -> bool:
    view = op.view.type
    rank = len(view.tile_shape)
    indices = list(op.index)
    if len(indices) != rank:
        ctx.op_error(op, f"expected {rank} index operands (based on view type), got {len(indices)}")
        return False
    expected = view_tile_type(view)
    if tile is not None and tile != expected:
        ctx.op_error(op, f"expected tile type to be {quoted(expected)} (based on view type), got {quoted(tile)}")
        return False
    gather = isinstance(view, T.GatherScatterViewType)
    base: Optional[T.Type] = None
    for i, v in enumerate(indices):
        t = v.type
        if gather and i == view.sparse_dim and isinstance(t, T.TileType) and t.rank == 1:
            continue
        if not isinstance(t, T.TileType) or t.rank != 0:
            ctx.op_error(op, f"expected index type to be a scalar tile, got {quoted(t)}")
            return False
        if base is None:
            base = t
        elif t != base:
            ctx.op_error(op, f"expected index type {i} to be the same as other index types ({quoted(base)}), "
                             f"got {quoted(t)}")
            return False
    return True


def _unicast_view_access(ctx: Context, op: Operation, tile: Optional[T.Type]) -> bool:
    """Indices, then no multicast view: only the multimem ops reach multicast memory."""
    if not _check_view_indices(ctx, op, tile):
        return False
    if _multicast_view(op.view.type):
        ctx.op_error(op, "multicast ptr_attr is not allowed")
        return False
    return True


@verifies(M.LoadViewTkoOp)
def check_load_view(ctx: Context, op: Operation) -> None:
    if _unicast_view_access(ctx, op, op.results[0].type):
        _check_memory_model(ctx, op, _LOAD_ORDERINGS, "load")


@verifies(M.StoreViewTkoOp)
def check_store_view(ctx: Context, op: Operation) -> None:
    if _unicast_view_access(ctx, op, op.tile.type):
        _check_memory_model(ctx, op, _STORE_ORDERINGS, "store")


# -- multimem --------------------------------------------------------------------------------
#: NVIDIA's checks, in the order tileiras 13.5 applies them (each stops at its first
#: problem; measured by giving it ops with two problems at a time): element type, total
#: size, multicast pointer, partition view, reduction kind, unit stride, memory model.
_MULTIMEM_FLOATS = ("f16", "bf16", "f32", "f64")
_BITWISE = (MultimemReductionKind.AND, MultimemReductionKind.OR, MultimemReductionKind.XOR,
            MultimemReductionKind.UMIN, MultimemReductionKind.UMAX)
_MINMAX = (MultimemReductionKind.MIN, MultimemReductionKind.MAX)


def _multimem_element_problem(tile: T.TileType) -> Optional[str]:
    e = tile.element
    if isinstance(e, T.ScalarType) and e.is_int:
        if e.bitwidth not in (32, 64):
            return f"multimem requires 32- or 64-bit integer/index element types; got {e.bitwidth} bits"
        return None
    if isinstance(e, T.ScalarType) and e.is_float:
        if e.name not in _MULTIMEM_FLOATS:
            return "multimem supports only f16, bf16, f32, and f64 floating-point element types"
        total = tile.num_elements * e.bitwidth
        if total % 32:
            return ("multimem op requires tile total size to be a multiple of 4 bytes for float element types; "
                    f"got {tile.num_elements} element(s) of {e.bitwidth} bits (total {total} bits)")
        return None
    return "multimem expects integer, index, or standard floating-point tensor elements"


def _multimem_view_problem(view: T.Type) -> Optional[str]:
    attr = view.tensor_view.ptr_attr if isinstance(view, T.ViewType) else None
    if attr is not T.PtrAttr.MULTICAST:
        return f"expected a multicast pointer, but got {attr.keyword if attr is not None else 'none'}"
    if not isinstance(view, T.PartitionViewType):
        return f"multimem view operations support only partition_view; got {quoted(view)}"
    return None


def _multimem_reduction_problem(op: Operation, element: T.Type) -> Optional[str]:
    kind = op.reduction
    if not element.is_float:
        return None
    if kind in _BITWISE:
        return "and/or/xor/umin/umax reductions require integer element types"
    if isinstance(op, M.MultimemReduceViewTkoOp) and kind is not MultimemReductionKind.ADD:
        return "supports only add for floating-point element types"
    if kind in _MINMAX and element.name not in ("f16", "bf16"):
        return f"min/max supports f16 and bf16 float types only; got '{element}'"
    return None


def _multimem_stride_problem(view: T.PartitionViewType) -> Optional[str]:
    """16-bit floats travel in pairs (PTX has no scalar f16 multimem access): the pairs
    must be contiguous along exactly one unit-stride dim."""
    if view.tensor_view.element.name not in ("f16", "bf16"):
        return None
    units = sum(1 for s in view.tensor_view.strides if s == 1)
    if units != 1:
        return f"f16/bf16 multimem views must have exactly one element stride statically known to equal 1; got {units}"
    return None


def _check_multimem(ctx: Context, op: Operation, tile: T.Type) -> bool:
    if not _check_view_indices(ctx, op, tile):
        return False
    view = op.view.type
    problem = (_multimem_element_problem(tile) or _multimem_view_problem(view)
               or (_multimem_reduction_problem(op, tile.element) if hasattr(op, "reduction") else None)
               or _multimem_stride_problem(view))
    if problem:
        ctx.op_error(op, problem)
        return False
    return True


@verifies(M.MultimemLoadReduceViewTkoOp)
def check_multimem_load(ctx: Context, op: Operation) -> None:
    if _check_multimem(ctx, op, op.results[0].type):
        _check_memory_model(ctx, op, _LOAD_ORDERINGS, "load")


@verifies(M.MultimemStoreViewTkoOp)
def check_multimem_store(ctx: Context, op: Operation) -> None:
    if _check_multimem(ctx, op, op.tile.type):
        _check_memory_model(ctx, op, _STORE_ORDERINGS, "store")


@verifies(M.MultimemReduceViewTkoOp)
def check_multimem_reduce(ctx: Context, op: Operation) -> None:
    if _check_multimem(ctx, op, op.tile.type) and op.memory_ordering_semantics not in (O.RELAXED, O.RELEASE):
        ctx.op_error(op, "memory ordering semantics must be one of: relaxed, release")


@verifies(M.MakeTensorViewOp)
def check_make_tensor_view(ctx: Context, op: Operation) -> None:
    view = op.result.type
    pointee = op.base.type.element.pointee
    if view.element != pointee:
        ctx.op_error(op, f"expected pointer to {quoted(view.element)} to build tensor_view of this type, "
                         f"got {quoted(pointee)}")
        return
    for what, values, dims in (("shape", op.dynamicShape, view.shape), ("stride", op.dynamicStrides, view.strides)):
        want = sum(d == T.DYNAMIC for d in dims)
        if want != len(values):
            ctx.op_error(op, f"expected {want} dynamic {what} operands, got {len(values)}")
            return
    values = list(op.dynamicShape) + list(op.dynamicStrides)
    for i, v in enumerate(values):
        if v.type != values[0].type:
            what = "shape" if i < len(op.dynamicShape) else "stride"
            k = i if i < len(op.dynamicShape) else i - len(op.dynamicShape)
            ctx.op_error(op, f"expected dynamic {what} index {k} to be of the same type as the other dynamic "
                             f"values ({quoted(values[0].type)}), got {quoted(v.type)}")
            return


@verifies(M.MakePartitionViewOp, M.MakeStridedViewOp, M.MakeGatherScatterViewOp)
def check_make_view(ctx: Context, op: Operation) -> None:
    given, wanted = op.tensor_view.type, op.result.type.tensor_view
    if given != wanted:
        ctx.op_error(op, f"expected the type of the provided tensor_view value ({quoted(given)}) to be the same as "
                         f"the view's tensor_view type ({quoted(wanted)})")


@verifies(M.GetTensorShapeOp)
def check_get_tensor_shape(ctx: Context, op: Operation) -> None:
    rank = op.src.type.rank
    if len(op.results) != rank:
        ctx.op_error(op, f"expected {rank} results due to tensor rank, but got {len(op.results)}")


@verifies(M.GetIndexSpaceShapeOp)
def check_get_index_space_shape(ctx: Context, op: Operation) -> None:
    rank = len(op.src.type.tile_shape)
    if len(op.results) != rank:
        ctx.op_error(op, f"expected {rank} results due to view index space rank, but got {len(op.results)}")


@verifies(M.JoinTokensOp)
def check_join_tokens(ctx: Context, op: Operation) -> None:
    if len(op.tokens) < 2:
        ctx.op_error(op, "expect two or more tokens")


# -- atomics ---------------------------------------------------------------------------------
#: What each read-modify-write mode accepts (measured with tileiras 13.5 for every mode and
#: element type): addf takes the four base floats, xchg any 32/64-bit integer or float
#: (tf32 excluded), every other mode i32/i64 only.
_ADDF_ELEMENTS = ("f16", "bf16", "f32", "f64")
_XCHG_ELEMENTS = ("i32", "i64", "f32", "f64")
_INT_ELEMENTS = ("i32", "i64")


def _rmw_mode_problem(mode: Optional[AtomicRMWMode], element: T.Type) -> Optional[str]:
    name = str(element)
    if mode is None:
        return None
    if mode is AtomicRMWMode.ADDF:
        return None if name in _ADDF_ELEMENTS else "'addf' works only with floats f16, bf16, f32, and f64"
    if mode is AtomicRMWMode.XCHG:
        return None if name in _XCHG_ELEMENTS else "'xchg' works only with integers or float of 32 or 64 bitwidth"
    return None if name in _INT_ELEMENTS else f"'{mode.keyword}' works only with integers i32 and i64"


def _check_atomic_ordering(ctx: Context, op: Operation) -> bool:
    ordering = op.memory_ordering_semantics
    if ordering is not None and ordering not in _ATOMIC_ORDERINGS:
        ctx.op_error(op, "memory ordering semantics must be one of: "
                         + ", ".join(o.keyword for o in _ATOMIC_ORDERINGS))
        return False
    return True


@verifies(M.AtomicRMWTkoOp)
def check_atomic_rmw(ctx: Context, op: Operation) -> None:
    if _multicast_pointer(op.pointers.type):
        ctx.op_error(op, "multicast pointer is not supported for atomic_rmw")
        return
    pointee = op.pointers.type.element.pointee
    element = op.arg.type.element
    if pointee != element:
        ctx.op_error(op, f"expected pointee type ({quoted(pointee)}) to match element type of 'arg' "
                         f"({quoted(element)})")
        return
    if op.mask is not None and op.mask.type.shape != op.arg.type.shape:
        ctx.op_error(op, "failed to verify that all of {pointers, arg, mask} have same shape")
        return
    problem = _rmw_mode_problem(op.mode, element)
    if problem:
        ctx.op_error(op, problem)
        return
    _check_atomic_ordering(ctx, op)


@verifies(M.AtomicCASTkoOp)
def check_atomic_cas(ctx: Context, op: Operation) -> None:
    if _multicast_pointer(op.pointers.type):
        ctx.op_error(op, "multicast pointer is not supported for atomic_cas")
        return
    pointee = op.pointers.type.element.pointee
    element = op.val.type.element
    if pointee != element:
        ctx.op_error(op, f"expected pointee type ({quoted(pointee)}) to match element type of 'val' "
                         f"({quoted(element)})")
        return
    if str(element) not in _XCHG_ELEMENTS:  # tf32 counts 19 bits in MLIR
        ctx.op_error(op, "expect only float or integer types with 32 or 64 bit")
        return
    if op.mask is not None and op.mask.type.shape != op.val.type.shape:
        ctx.op_error(op, "failed to verify that all of {pointers, val, cmp and mask} have same shape")
        return
    _check_atomic_ordering(ctx, op)


@verifies(M.AtomicRedViewTkoOp)
def check_atomic_red_view(ctx: Context, op: Operation) -> None:
    view = op.view.type
    if _multicast_view(view):
        ctx.op_error(op, "multicast ptr_attr is not allowed")
        return
    if isinstance(view, T.GatherScatterViewType):
        ctx.op_error(op, "gather_scatter_view is not supported; use partition_view instead")
        return
    if view.padding_value is not None:
        ctx.op_error(op, "views with padding_value are not supported for atomic reductions")
        return
    element = op.value.type.element
    if view.tensor_view.element != element:
        ctx.op_error(op, f"view element type ({quoted(view.tensor_view.element)}) must match value element type "
                         f"({quoted(element)})")
        return
    tile = tuple(view.tile_shape)
    if tile != op.value.type.shape:
        ctx.op_error(op, f"view tile shape {', '.join(map(str, tile))} must match value shape "
                         f"{', '.join(map(str, op.value.type.shape))} for element-wise atomic operations")
        return
    if op.mode is AtomicRMWMode.XCHG:
        ctx.op_error(op, "atomic_red_view_tko op cannot use xchg operation")
        return
    problem = _rmw_mode_problem(op.mode, element)
    if problem:
        ctx.op_error(op, problem)
        return
    if op.memory_ordering_semantics is not O.RELAXED:
        ctx.op_error(op, "only 'relaxed' memory ordering is supported for view-based atomic reductions")
        return
    if op.attributes.get("memory_scope") is MemoryScope.SYS:
        ctx.op_error(op, "memory scope 'sys' is not supported for view-based atomic reductions; use 'tl_blk' or "
                         "'device' for TMA compatibility")
        return
    if len(op.index) != len(tile):
        ctx.op_error(op, f"expected {len(tile)} index operand(s) for view with tile rank {len(tile)}, "
                         f"got {len(op.index)}")
        return
    for i, v in enumerate(op.index):
        t = v.type
        if isinstance(t, T.TileType) and t.rank != 0:
            ctx.op_error(op, f"index operand {i} must be a scalar tile (rank 0), got shape {_dims(t.shape)}")
            return
        if isinstance(t, T.TileType) and not (isinstance(t.element, T.ScalarType) and t.element.is_int):
            ctx.op_error(op, f"index operand {i} must be a scalar integer tile, got element type {t.element}")
            return


def _dims(shape: tuple[int, ...]) -> str:
    return ", ".join(str(d) for d in shape)
