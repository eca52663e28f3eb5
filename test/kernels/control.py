"""Control flow: for loops with carried values, while/break/continue, if/else, helpers."""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr, scalar

ConstInt = ct.Constant[int]


@ct.kernel
def loop_accumulate(x, out, K: ConstInt):
    i = ct.bid(0)
    acc = ct.zeros((256,), dtype=ct.float32)
    peak = ct.full((256,), -1e30, dtype=ct.float32)
    for k in range(K):
        t = ct.load(x, index=(k, i), shape=(1, 256))
        v = ct.reshape(t, (256,))
        acc = acc + v
        peak = ct.maximum(peak, v)
    ct.store(out, index=(i,), tile=acc / K + peak)


@ct.kernel
def dynamic_loop(x, out, n):
    i = ct.bid(0)
    acc = ct.zeros((128,), dtype=ct.float32)
    for k in range(1, n, 2):
        acc = acc * 0.5 + ct.load(x, index=(k,), shape=(128,))
    ct.store(out, index=(i,), tile=acc)


@ct.kernel
def while_break_continue(x, out, limit):
    acc = ct.zeros((64,), dtype=ct.int32)
    k = 0
    while k < limit:
        k += 1
        t = ct.load(x, index=(k,), shape=(64,))
        if ct.sum(t) < 0:
            continue
        acc = acc + t
        if ct.max(acc) > 1000:
            break
    ct.store(out, index=(ct.bid(0),), tile=acc)


@ct.kernel
def runtime_if(x, out, mode, scale):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(128,))
    if mode == 0:
        r = t * scale
    elif mode == 1:
        r = t + scale
    else:
        r = -t
    if i % 2 == 1:
        r = r * 2.0
    ct.store(out, index=(i,), tile=r)


@ct.kernel
def const_specialize(x, out, OP: ConstInt, T: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,))
    if OP == 0:
        r = abs(t)
    elif OP == 1:
        r = t * t
    else:
        r = ct.sqrt(abs(t))
    ct.store(out, index=(i,), tile=r)


@ct.function
def _clamp(t, lo, hi):
    return ct.minimum(ct.maximum(t, lo), hi)


@ct.function
def _load_scaled(x, i, s):
    return ct.load(x, index=(i,), shape=(64,)) * s


@ct.kernel
def helper_functions(x, out):
    i = ct.bid(0)
    t = _load_scaled(x, i, 3.0)
    ct.store(out, index=(i,), tile=_clamp(t, -1.0, 1.0))


@ct.kernel
def persistent_tiles(x, out, ntiles):
    start = ct.bid(0)
    step = ct.num_blocks(0)
    for t in range(start, ntiles, step):
        v = ct.load(x, index=(t,), shape=(256,))
        ct.store(out, index=(t,), tile=v * 2.0 + 1.0)


@ct.kernel
def grid3d(x, out):
    bx = ct.bid(0)
    by = ct.bid(1)
    bz = ct.bid(2)
    t = ct.load(x, index=(bz, by, bx), shape=(2, 4, 8))
    n = ct.num_blocks(0) + ct.num_blocks(1) * ct.num_blocks(2)
    ct.store(out, index=(bz, by, bx), tile=t + n)


F32 = ct.float32

CASES = [
    KernelCase("loop_accumulate", loop_accumulate, [[arr(F32, 2), arr(F32), 16]]),
    KernelCase("dynamic_loop", dynamic_loop, [[arr(F32), arr(F32), scalar(ct.int32)]]),
    KernelCase("while_break_continue", while_break_continue,
               [[arr(ct.int32), arr(ct.int32), scalar(ct.int32)]]),
    KernelCase("runtime_if", runtime_if, [[arr(F32), arr(F32), scalar(ct.int32), scalar(F32)]]),
    KernelCase("const_specialize", const_specialize,
               [[arr(F32), arr(F32), 0, 128], [arr(F32), arr(F32), 1, 64], [arr(F32), arr(F32), 2, 32]]),
    KernelCase("helper_functions", helper_functions, [[arr(F32), arr(F32)]]),
    KernelCase("persistent_tiles", persistent_tiles, [[arr(F32), arr(F32), scalar(ct.int32)]]),
    KernelCase("grid3d", grid3d, [[arr(F32, 3), arr(F32, 3)]]),
]
