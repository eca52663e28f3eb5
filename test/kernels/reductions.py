"""Reductions and scans, built-in and with custom combiner functions."""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr

ConstInt = ct.Constant[int]


@ct.kernel
def row_reductions(x, osum, omax, omin, oprod, oarg):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(16, 64))
    ct.store(osum, index=(i,), tile=ct.sum(t, axis=1))
    ct.store(omax, index=(i,), tile=ct.max(t, axis=1))
    ct.store(omin, index=(i,), tile=ct.min(t, axis=1))
    ct.store(oprod, index=(i,), tile=ct.prod(t, axis=1))
    ct.store(oarg, index=(i,), tile=ct.argmax(t, axis=1))


@ct.kernel
def col_reductions(x, out, total):
    i = ct.bid(0)
    t = ct.load(x, index=(0, i), shape=(32, 32))
    s = ct.sum(t, axis=0, keepdims=True)
    ct.store(out, index=(0, i), tile=s)
    ct.store(total, index=(i,), tile=ct.reshape(ct.sum(t), (1,)))


@ct.kernel
def int_reductions(x, omax, omin, oarg):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(8, 32))
    ct.store(omax, index=(i,), tile=ct.max(t, axis=1))
    ct.store(omin, index=(i,), tile=ct.min(t, axis=1) + ct.sum(t, axis=1))
    ct.store(oarg, index=(i,), tile=ct.argmin(t, axis=1))


def _absmax(a, b):
    return ct.maximum(abs(a), abs(b))


@ct.kernel
def custom_reduce(x, out):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(4, 64))
    r = ct.reduce(t, axis=1, func=_absmax, identity=0.0)
    ct.store(out, index=(i,), tile=r)


@ct.kernel
def scans(x, ocs, ocp, orev):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(8, 64))
    ct.store(ocs, index=(i, 0), tile=ct.cumsum(t, axis=1))
    ct.store(ocp, index=(i, 0), tile=ct.cumprod(t, axis=0))
    ct.store(orev, index=(i, 0), tile=ct.cumsum(t, axis=1, reverse=True))


def _running_max(a, b):
    return ct.maximum(a, b)


@ct.kernel
def custom_scan(x, out):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(16, 16))
    ct.store(out, index=(i, 0), tile=ct.scan(t, axis=1, func=_running_max, identity=-2147483648))


@ct.kernel
def softmax_rows(x, out, N: ConstInt):
    i = ct.bid(0)
    t = ct.astype(ct.load(x, index=(i, 0), shape=(1, N)), ct.float32)
    m = ct.max(t, axis=1, keepdims=True)
    e = ct.exp(t - m)
    s = ct.sum(e, axis=1, keepdims=True)
    ct.store(out, index=(i, 0), tile=ct.astype(e / s, out.dtype))


@ct.kernel
def layernorm(x, w, b, out, eps: ct.Constant[float]):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(2, 256))
    mean = ct.sum(t, axis=1, keepdims=True) / 256.0
    d = t - mean
    var = ct.sum(d * d, axis=1, keepdims=True) / 256.0
    g = ct.load(w, index=(0,), shape=(256,))
    h = ct.load(b, index=(0,), shape=(256,))
    y = d * ct.rsqrt(var + eps) * ct.reshape(g, (1, 256)) + ct.reshape(h, (1, 256))
    ct.store(out, index=(i, 0), tile=y)


F32 = ct.float32

CASES = [
    KernelCase("row_reductions", row_reductions,
               [[arr(F32, 2), arr(F32), arr(F32), arr(F32), arr(F32), arr(ct.int32)]]),
    KernelCase("col_reductions", col_reductions, [[arr(F32, 2), arr(F32, 2), arr(F32)]]),
    KernelCase("int_reductions", int_reductions,
               [[arr(ct.int32, 2), arr(ct.int32), arr(ct.int32), arr(ct.int32)],
                [arr(ct.int64, 2), arr(ct.int64), arr(ct.int64), arr(ct.int32)]]),
    KernelCase("custom_reduce", custom_reduce, [[arr(F32, 2), arr(F32)]]),
    KernelCase("scans", scans, [[arr(F32, 2), arr(F32, 2), arr(F32, 2), arr(F32, 2)]]),
    KernelCase("custom_scan", custom_scan, [[arr(ct.int32, 2), arr(ct.int32, 2)]]),
    KernelCase("softmax_rows", softmax_rows,
               [[arr(ct.float16, 2), arr(ct.float16, 2), 512], [arr(F32, 2), arr(F32, 2), 1024]]),
    KernelCase("layernorm", layernorm, [[arr(F32, 2), arr(F32), arr(F32), arr(F32, 2), 1e-5]]),
]
