"""Tile construction and reshaping: constant, iota, broadcast, reshape, permute, cat,
extract, insert, select; grid queries; assume (a pass-through)."""
from __future__ import annotations

import numpy as np

from ..ir import types as T
from ..tile import ops_control as K
from ..tile import ops_core as C
from .core import impl
from .values import bits_of, decode_dense, dtype_of, from_int, make_int, to_unsigned


def _shape(v) -> tuple[int, ...]:
    t = v.type
    return t.shape if isinstance(t, T.TileType) else ()


@impl(C.ConstantOp)
def _constant(frame, op):
    return (decode_dense(op.value, op.result.type),)


@impl(C.IotaOp)
def _iota(frame, op):
    (n,) = _shape(op.result)
    return (from_int(np.arange(n, dtype=np.uint64), bits_of(op.result.type)),)


@impl(C.BroadcastOp)
def _broadcast(frame, op, x):
    return (np.broadcast_to(x, _shape(op.result)).copy(),)


@impl(C.ReshapeOp)
def _reshape(frame, op, x):
    return (np.reshape(np.ascontiguousarray(x), _shape(op.result)).copy(),)


@impl(C.PermuteOp)
def _permute(frame, op, x):
    return (np.array(np.transpose(x, tuple(op.permutation)), copy=True, order="C"),)


@impl(C.CatOp)
def _cat(frame, op, a, b):
    return (np.concatenate([a, b], axis=op.dim),)


def _slices(indices, sub_shape: tuple[int, ...]) -> tuple[slice, ...]:
    idx = [int(to_unsigned(i)) for i in indices]
    return tuple(slice(i * n, (i + 1) * n) for i, n in zip(idx, sub_shape))


@impl(C.ExtractOp)
def _extract(frame, op, source, *indices):
    return (np.array(source[_slices(indices, _shape(op.result))], copy=True, order="C"),)


@impl(C.InsertOp)
def _insert(frame, op, source, destination, *indices):
    out = np.array(destination, copy=True)
    out[_slices(indices, _shape(op.source))] = source
    return (out,)


@impl(C.SelectOp)
def _select(frame, op, cond, a, b):
    return (np.where(np.asarray(cond, dtype=np.bool_), a, b).astype(np.asarray(a).dtype),)


@impl(C.GetTileBlockIdOp)
def _block_id(frame, op):
    return tuple(make_int(v, bits_of(r.type)) for v, r in zip(frame.block_id, op.results))


@impl(C.GetNumTileBlocksOp)
def _num_blocks(frame, op):
    return tuple(make_int(v, bits_of(r.type)) for v, r in zip(frame.machine.grid, op.results))


@impl(K.AssumeOp)
def _assume(frame, op, value):
    return (value,)


def zeros_of(t: T.Type) -> np.ndarray:
    """A zero tile of type ``t``."""
    return np.zeros(t.shape if isinstance(t, T.TileType) else (), dtype=dtype_of(t))


__all__ = ["zeros_of", "make_int"]
