"""A kernel launched in clusters (``num_ctas=2``), kept out of ``ALL_CASES``: only NVIDIA's
sm_100 PTX for it is checked (test_differential.py), whose TMA boxes are multicast."""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr


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
