"""Debug print/assert, tuple parameters, kernel hints, byte packing, empty kernels."""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr, scalar


@ct.kernel
def debug_print(x, n):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(8,))
    ct.print(f"block {i} n={n} tile={t}")
    ct.printf("%d: %f\n", i, ct.sum(t))


@ct.kernel
def debug_assert(x, out):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(16,))
    ct.assert_(t >= 0, "negative input")
    ct.assert_(ct.sum(t) < 1000000)
    ct.store(out, index=(i,), tile=t + 1)


@ct.kernel
def tuple_params(pair, scales, out):
    i = ct.bid(0)
    a = ct.load(pair[0], index=(i,), shape=(64,))
    b = ct.load(pair[1], index=(i,), shape=(64,))
    ct.store(out, index=(i,), tile=a * scales[0] + b * scales[1])


@ct.kernel(num_ctas=2, occupancy=2)
def kernel_hints(x, out):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(256,))
    ct.store(out, index=(i,), tile=t * t)


@ct.kernel(num_worker_warps=8)
def worker_warps(x, out):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(64, 64))
    ct.store(out, index=(i, 0), tile=ct.exp(t))


@ct.kernel
def pack_bytes(x, out_bytes, out_back):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(64,))
    b = ct.pack_to_bytes(t)
    ct.store(out_bytes, index=(i,), tile=b)
    ct.store(out_back, index=(i,), tile=ct.unpack_from_bytes(b, ct.float16))


@ct.kernel
def empty_kernel(x):
    pass


@ct.kernel
def store_scalar(out, value):
    ct.store(out, index=(ct.bid(0),), tile=value)


F32 = ct.float32

CASES = [
    KernelCase("debug_print", debug_print, [[arr(F32), scalar(ct.int32)]]),
    KernelCase("debug_assert", debug_assert, [[arr(ct.int32), arr(ct.int32)]]),
    KernelCase("tuple_params_v2", tuple_params,
               [[(arr(F32), arr(F32)), (scalar(F32), scalar(F32)), arr(F32)]], calling_convention="v2"),
    KernelCase("kernel_hints", kernel_hints, [[arr(F32), arr(F32)]]),
    KernelCase("worker_warps", worker_warps, [[arr(F32, 2), arr(F32, 2)]]),
    KernelCase("pack_bytes", pack_bytes, [[arr(ct.float16), arr(ct.uint8), arr(ct.float16)]]),
    KernelCase("empty_kernel", empty_kernel, [[arr(F32)]]),
    KernelCase("store_scalar", store_scalar, [[arr(ct.int64, index_dtype=ct.int64), scalar(ct.int64)],
                                              [arr(ct.float64), scalar(ct.float64)]]),
]
