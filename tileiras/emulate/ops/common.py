"""Helpers shared by the instruction families: n-ary element-wise instructions."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..operands import reader, writer
from ..ptxtypes import PtxType


def elementwise(ctx, ins, ty: PtxType, fn: Callable, nsrc: int, out_ty: PtxType | None = None,
                src_types: tuple | None = None) -> Callable:
    """``d = fn(a, b, ...)`` with each source read as ``ty`` (or ``src_types[i]``)."""
    types = src_types or (ty,) * nsrc
    srcs = [reader(ctx, op, t) for op, t in zip(ins.operands[1:1 + nsrc], types)]
    write = writer(ctx, ins.operands[0], out_ty or ty)
    if nsrc == 1:
        (s0,) = srcs
        return lambda m, idx: write(m, idx, fn(s0(m, idx)))
    if nsrc == 2:
        s0, s1 = srcs
        return lambda m, idx: write(m, idx, fn(s0(m, idx), s1(m, idx)))
    if nsrc == 3:
        s0, s1, s2 = srcs
        return lambda m, idx: write(m, idx, fn(s0(m, idx), s1(m, idx), s2(m, idx)))
    return lambda m, idx: write(m, idx, fn(*[s(m, idx) for s in srcs]))


def as_array(x, n: int | None = None) -> np.ndarray:
    x = np.asarray(x)
    if n is not None and x.ndim == 0:
        return np.broadcast_to(x, (n,))
    return x


def broadcast_all(*xs) -> list:
    shape = np.broadcast_shapes(*[np.shape(x) for x in xs])
    return [np.broadcast_to(np.asarray(x), shape) for x in xs]
