"""Tensor views and the views that tile them, and the view-based memory ops.

* ``tensor_view``: base address, shape, strides (in elements; dynamic ones bound by
  ``make_tensor_view``'s operands, read as unsigned).
* ``partition_view`` / ``strided_view``: tile ``t`` of index ``I`` covers, along tile dim ``i``,
  tensor dim ``dim_map[i]`` at coordinates ``I[i] * step[i] + t[i]`` where ``step`` is the tile
  size (partition) or the traversal stride (strided).  The index space is
  ``ceildiv(shape[dim_map[i]], step[i])``.
* ``gather_scatter_view``: the index at ``sparse_dim`` is a 1-D tile of coordinates, the
  others are element offsets of a contiguous block.
* 4-bit elements (f4E2M1FN) are addressed in nibbles: element offset ``o`` of a tensor at byte
  ``base`` is nibble ``2 * base + o`` (the spec packs element ``2i`` into the low nibble).
* Elements outside the tensor read as the view's padding value (zero when it has none, a
  choice of the interpreter: the spec leaves them unspecified) and are not written by stores.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..ir import types as T
from ..tile import ops_memory as M
from ..tile.enums import AtomicRMWMode, MultimemReductionKind
from .core import impl
from .errors import InterpError
from .memory import apply_rmw, atomic_update
from .values import TOKEN_VALUE, dtype_of, from_int, is_subbyte, storage_bytes, to_unsigned


@dataclass(frozen=True)
class TensorView:
    base: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    element: T.ScalarType


@dataclass(frozen=True)
class TiledView:
    """A partition_view or strided_view."""

    tensor: TensorView
    tile_shape: tuple[int, ...]
    steps: tuple[int, ...]
    dim_map: tuple[int, ...]
    padding: Optional[T.PaddingValue]

    def index_space(self) -> tuple[int, ...]:
        return tuple(-(-self.tensor.shape[d] // s) for d, s in zip(self.dim_map, self.steps))


@dataclass(frozen=True)
class GatherScatterView:
    tensor: TensorView
    tile_shape: tuple[int, ...]
    sparse_dim: int
    padding: Optional[T.PaddingValue]

    def index_space(self) -> tuple[int, ...]:
        return self.tensor.shape


def _scalar_int(x) -> int:
    return int(to_unsigned(np.asarray(x)).reshape(-1)[0])


@impl(M.MakeTensorViewOp)
def _make_tensor_view(frame, op, *operands):
    t = op.result.type
    dyn_shape = iter(_scalar_int(frame.get(v)) for v in op.dynamicShape)
    dyn_strides = iter(_scalar_int(frame.get(v)) for v in op.dynamicStrides)
    shape = tuple(next(dyn_shape) if d == T.DYNAMIC else d for d in t.shape)
    strides = tuple(next(dyn_strides) if s == T.DYNAMIC else s for s in t.strides)
    base = _scalar_int(frame.get(op.base))
    return (TensorView(base, shape, strides, t.element),)


@impl(M.MakePartitionViewOp)
def _make_partition_view(frame, op, tv):
    t = op.result.type
    return (TiledView(tv, t.tile_shape, t.tile_shape, t.dim_map, t.padding_value),)


@impl(M.MakeStridedViewOp)
def _make_strided_view(frame, op, tv):
    t = op.result.type
    return (TiledView(tv, t.tile_shape, t.traversal_strides, t.dim_map, t.padding_value),)


@impl(M.MakeGatherScatterViewOp)
def _make_gather_view(frame, op, tv):
    t = op.result.type
    return (GatherScatterView(tv, t.tile_shape, t.sparse_dim, t.padding_value),)


def _as_tiled(view) -> TiledView:
    if isinstance(view, TensorView):  # the whole tensor is the only tile
        rank = len(view.shape)
        return TiledView(view, view.shape, view.shape, tuple(range(rank)), None)
    return view


def element_coordinates(view, index: list) -> tuple[TensorView, list[np.ndarray]]:
    """Per tensor dim, the (broadcastable) coordinates of every tile element."""
    if isinstance(view, GatherScatterView):
        tv, shape = view.tensor, view.tile_shape
        coords: list[np.ndarray] = []
        for d, (n, ix) in enumerate(zip(shape, index)):
            axis_shape = [1] * len(shape)
            axis_shape[d] = n
            if d == view.sparse_dim:
                c = to_unsigned(np.asarray(ix)).reshape(-1)
            else:
                c = np.uint64(_scalar_int(ix)) + np.arange(n, dtype=np.uint64)
            coords.append(c.reshape(axis_shape))
        return tv, coords
    view = _as_tiled(view)
    tv, shape = view.tensor, view.tile_shape
    coords = [None] * len(tv.shape)  # type: ignore[list-item]
    for i, (n, step, d) in enumerate(zip(shape, view.steps, view.dim_map)):
        axis_shape = [1] * len(shape)
        axis_shape[i] = n
        start = np.uint64(_scalar_int(index[i])) * np.uint64(step)
        coords[d] = (start + np.arange(n, dtype=np.uint64)).reshape(axis_shape)
    return tv, coords


def element_addresses(view, index: list) -> tuple[np.ndarray, np.ndarray, TensorView]:
    """(addresses, in-bounds mask, tensor view) of every element of the indexed tile
    (nibble addresses for 4-bit elements)."""
    tv, coords = element_coordinates(view, index)
    tile_shape = np.broadcast_shapes(*[c.shape for c in coords]) if coords else ()
    inside = np.ones(tile_shape, bool)
    offset = np.zeros(tile_shape, np.uint64)
    for c, n, s in zip(coords, tv.shape, tv.strides):
        inside &= c < np.uint64(n)
        offset = offset + np.where(c < np.uint64(n), c, np.uint64(0)) * np.uint64(s)
    if is_subbyte(tv.element):
        return np.uint64(2 * tv.base) + offset, inside, tv
    size = np.uint64(storage_bytes(tv.element))
    return np.uint64(tv.base) + offset * size, inside, tv


_PADDING = {T.PaddingValue.ZERO: 0.0, T.PaddingValue.NEG_ZERO: -0.0, T.PaddingValue.NAN: np.nan,
            T.PaddingValue.POS_INF: np.inf, T.PaddingValue.NEG_INF: -np.inf}


def padding_tile(view, shape, element: T.ScalarType) -> np.ndarray:
    pad = getattr(view, "padding", None)
    if pad is None or element.is_int:
        return np.zeros(shape, dtype=dtype_of(element))
    return np.full(shape, _PADDING[pad]).astype(dtype_of(element))


def load_tile(frame, view, index: list) -> np.ndarray:
    addrs, inside, tv = element_addresses(view, index)
    data = frame.machine.memory.load(addrs, tv.element, inside)
    return np.where(inside, data, padding_tile(view, addrs.shape, tv.element)).astype(data.dtype)


@impl(M.LoadViewTkoOp)
def _load_view(frame, op, *operands):
    tile = load_tile(frame, frame.get(op.view), [frame.get(v) for v in op.index])
    return tile.reshape(op.tile.type.shape), TOKEN_VALUE


@impl(M.StoreViewTkoOp)
def _store_view(frame, op, *operands):
    addrs, inside, tv = element_addresses(frame.get(op.view), [frame.get(v) for v in op.index])
    value = np.asarray(frame.get(op.tile)).reshape(addrs.shape)
    frame.machine.memory.store(addrs, value, tv.element, inside)
    return (TOKEN_VALUE,)


def reduce_into_view(frame, view, index: list, value: np.ndarray, mode: AtomicRMWMode) -> None:
    addrs, inside, tv = element_addresses(view, index)
    flat = np.asarray(value).reshape(-1)
    atomic_update(frame.machine.memory, addrs, tv.element,
                  lambda i, old: apply_rmw(mode, old, flat[i:i + 1], tv.element), inside)


@impl(M.AtomicRedViewTkoOp)
def _atomic_red_view(frame, op, *operands):
    reduce_into_view(frame, frame.get(op.view), [frame.get(v) for v in op.index],
                     frame.get(op.value), op.mode)
    return (TOKEN_VALUE,)


def _results_of_ints(op, values: tuple[int, ...]) -> tuple:
    out = []
    for r, v in zip(op.results, values):
        out.append(from_int(np.array(v, dtype=np.uint64), r.type.element.bitwidth))
    return tuple(out)


@impl(M.GetIndexSpaceShapeOp)
def _index_space_shape(frame, op, view):
    space = view.shape if isinstance(view, TensorView) else view.index_space()
    return _results_of_ints(op, space)


@impl(M.GetTensorShapeOp)
def _tensor_shape(frame, op, view):
    tv = view if isinstance(view, TensorView) else view.tensor
    return _results_of_ints(op, tv.shape)


# -- multimem ops: the interpreter models a single device, so the multicast group has one
# -- member: a load-reduce is a load, a reduce is an atomic reduction, a store is a store.

_MULTIMEM_MODE = {
    MultimemReductionKind.ADD: AtomicRMWMode.ADD, MultimemReductionKind.MIN: AtomicRMWMode.MIN,
    MultimemReductionKind.MAX: AtomicRMWMode.MAX, MultimemReductionKind.AND: AtomicRMWMode.AND,
    MultimemReductionKind.OR: AtomicRMWMode.OR, MultimemReductionKind.XOR: AtomicRMWMode.XOR,
    MultimemReductionKind.UMIN: AtomicRMWMode.UMIN, MultimemReductionKind.UMAX: AtomicRMWMode.UMAX,
}


@impl(M.MultimemLoadReduceViewTkoOp)
def _multimem_load(frame, op, *operands):
    tile = load_tile(frame, frame.get(op.view), [frame.get(v) for v in op.index])
    return tile.reshape(op.reduced_values.type.shape), TOKEN_VALUE


@impl(M.MultimemStoreViewTkoOp)
def _multimem_store(frame, op, *operands):
    addrs, inside, tv = element_addresses(frame.get(op.view), [frame.get(v) for v in op.index])
    frame.machine.memory.store(addrs, np.asarray(frame.get(op.tile)).reshape(addrs.shape), tv.element, inside)
    return (TOKEN_VALUE,)


@impl(M.MultimemReduceViewTkoOp)
def _multimem_reduce(frame, op, *operands):
    mode = _MULTIMEM_MODE[op.reduction]
    if mode is AtomicRMWMode.ADD and frame.get(op.view).tensor.element.is_float:
        mode = AtomicRMWMode.ADDF
    reduce_into_view(frame, frame.get(op.view), [frame.get(v) for v in op.index], frame.get(op.tile), mode)
    return (TOKEN_VALUE,)


__all__ = ["TensorView", "TiledView", "GatherScatterView", "InterpError"]
