"""Kernels kept out of ``ALL_CASES`` whose NVIDIA PTX alone is checked against the interpreter
(test_differential.py) for what it exercises in the emulator: a GEMM launched in clusters
(``num_ctas=2``: sm_100 multicasts its TMA boxes), and an MX fp8 GEMM in a K loop (sm_120
reads its B with ``ldmatrix.m16n16.trans.b8``)."""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr, scalar


@ct.kernel(num_ctas=2)
def gemm_cluster(a, b, bias, c):
    pid_m = ct.bid(0)
    pid_n = ct.bid(1)
    acc = ct.zeros((64, 64), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(64, 32))):
        ta = ct.load(a, index=(pid_m, k), shape=(64, 32), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, pid_n), shape=(32, 64), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    bv = ct.load(bias, index=(pid_n,), shape=(64,))
    r = acc + ct.reshape(ct.astype(bv, ct.float32), (1, 64))
    ct.store(c, index=(pid_m, pid_n), tile=ct.astype(ct.maximum(r, 0.0), c.dtype))


CLUSTER_GEMM = KernelCase("gemm_cluster", gemm_cluster,
                          [[arr(ct.float16, 2), arr(ct.float16, 2), arr(ct.float16), arr(ct.float16, 2)]])

#: the same tile block on one CTA (what a cluster's CTAs share between them)
ONE_CTA_GEMM = KernelCase("gemm_one_cta", ct.kernel(gemm_cluster._annotated_function.pyfunc),
                          CLUSTER_GEMM.params)


@ct.kernel
def mx_f8_gemm(a, sa, b, sb, c):
    """e4m3 operands with e8m0 block scales (32 elements a block), K in 64-wide steps."""
    acc = ct.zeros((64, 64), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(64, 64))):
        ta = ct.load(a, index=(ct.bid(0), k), shape=(64, 64), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, ct.bid(1)), shape=(64, 64), padding_mode=ct.PaddingMode.ZERO)
        tsa = ct.load(sa, index=(ct.bid(0), k), shape=(64, 2), padding_mode=ct.PaddingMode.ZERO)
        tsb = ct.load(sb, index=(k, ct.bid(1)), shape=(2, 64), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma_scaled(ta, tsa, tb, tsb, acc)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=acc)


MX_F8_GEMM = KernelCase("mx_f8_gemm", mx_f8_gemm,
                        [[arr(ct.float8_e4m3fn, 2), arr(ct.float8_e8m0fnu, 2), arr(ct.float8_e4m3fn, 2),
                          arr(ct.float8_e8m0fnu, 2), arr(ct.float32, 2)]])


@ct.kernel(num_ctas=2)
def cluster_rows(x, w, out):
    """Eight rows a tile block, each scaled by its own norm: the rows split between the
    cluster's two CTAs (the reduction is along the other dim), ``w`` whole in both."""
    i = ct.bid(0)
    t = ct.astype(ct.load(x, index=(i, 0), shape=(8, 128), padding_mode=ct.PaddingMode.ZERO), ct.float32)
    s = ct.sum(t * t, axis=1, keepdims=True)
    wv = ct.astype(ct.load(w, index=(0,), shape=(128,)), ct.float32)
    y = t * ct.rsqrt(s + 1e-6) * ct.reshape(wv, (1, 128))
    ct.store(out, index=(i, 0), tile=ct.astype(y, out.dtype))


CLUSTER_ROWS = KernelCase("cluster_rows", cluster_rows,
                          [[arr(ct.float16, 2), arr(ct.float16), arr(ct.float16, 2)]])


@ct.kernel(num_ctas=2)
def cluster_loop(x, out):
    """A row loop carrying two accumulators (a loop-carried split) into one store."""
    i = ct.bid(0)
    acc = ct.zeros((1, 256), dtype=ct.float32)
    big = ct.full((1, 256), -3.0e38, dtype=ct.float32)
    for k in range(4):
        t = ct.load(x, index=(i, k), shape=(1, 256), padding_mode=ct.PaddingMode.ZERO)
        acc = acc + t
        big = ct.maximum(big, t)
    ct.store(out, index=(i, 0), tile=acc + big)


CLUSTER_LOOP = KernelCase("cluster_loop", cluster_loop, [[arr(ct.float32, 2), arr(ct.float32, 2)]])


@ct.kernel(num_ctas=2)
def cluster_gather(x, out):
    """Indices from ``arange``: each CTA's block of them is its own ``iota`` plus its rank's
    offset; the gather and scatter go through pointer tiles."""
    i = ct.bid(0)
    idx = i * 128 + ct.arange(128, dtype=ct.int32)
    t = ct.gather(x, idx)
    ct.scatter(out, idx, t * 2.0 + ct.astype(idx, ct.float32))


CLUSTER_GATHER = KernelCase("cluster_gather", cluster_gather, [[arr(ct.float32), arr(ct.float32)]])


@ct.kernel(num_ctas=2)
def cluster_total(x, out):
    """A whole tile reduced to one value: nothing to split, the first CTA does it all."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(256,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(i,), tile=ct.reshape(ct.sum(t), (1,)))


CLUSTER_TOTAL = KernelCase("cluster_total", cluster_total, [[arr(ct.float32), arr(ct.float32)]])


@ct.kernel(num_ctas=2)
def persistent_cluster_gemm(a, b, c):
    """TileGym's persistent GEMM in clusters of two: each cluster takes c's tiles in turn."""
    tiles_m, tiles_n = ct.num_tiles(c, axis=0, shape=(64, 64)), ct.num_tiles(c, axis=1, shape=(64, 64))
    for tile in range(ct.bid(0), tiles_m * tiles_n, ct.num_blocks(0)):
        pid_m, pid_n = tile // tiles_n, tile % tiles_n
        acc = ct.zeros((64, 64), dtype=ct.float32)
        for k in range(ct.num_tiles(a, axis=1, shape=(64, 32))):
            ta = ct.load(a, index=(pid_m, k), shape=(64, 32), padding_mode=ct.PaddingMode.ZERO)
            tb = ct.load(b, index=(k, pid_n), shape=(32, 64), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(ta, tb, acc)
        ct.store(c, index=(pid_m, pid_n), tile=ct.astype(acc, c.dtype))


PERSISTENT_CLUSTER_GEMM = KernelCase("persistent_cluster_gemm", persistent_cluster_gemm,
                                     [[arr(ct.float16, 2), arr(ct.float16, 2), arr(ct.float16, 2)]])


@ct.kernel(num_ctas=2)
def cluster_loop_total(x, out, limit: float):
    """A row carried through a loop that breaks on the running sum of its elements: the
    sum, a scalar, needs the whole row in every CTA (the split is refused)."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(128,), padding_mode=ct.PaddingMode.ZERO)
    s = 0.0
    for k in range(8):
        t = t * 0.5 + 1.0
        s = s + ct.sum(t)
        if s > limit:
            break
    ct.store(out, index=(i,), tile=t + s)


CLUSTER_LOOP_TOTAL = KernelCase("cluster_loop_total", cluster_loop_total,
                                [[arr(ct.float32), arr(ct.float32), scalar(ct.float32)]])
