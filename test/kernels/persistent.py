"""Persistent GEMMs as TileGym writes them: each CTA takes output tiles in turn
(``range(bid, tiles, num_blocks)``), runs the K loop of each and stores it.  On sm_90 the K
loop is a TMA ring inside the loop over tiles (``lower/tma_ring.py``: a persistent ring,
its mbarriers initialized once and its phases carried across tiles).

``CASES`` are small enough for the differential tests' 112-element inputs to hold more
tiles than the grid has CTAs and more K tiles than the ring has stages (64x32x16 tiles: 8
output tiles of 7 K tiles; 64x64x16: 4 of 7).  ``persistent_gemm`` with NVIDIA-like
128x128x64 tiles is exported by ``test_persistent_ring.py``."""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr

ConstInt = ct.Constant[int]


@ct.kernel
def persistent_gemm(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    """``c = a @ b``, the CTAs taking c's tiles in turn (row-major tile order)."""
    tiles_m = ct.num_tiles(c, axis=0, shape=(TM, TN))
    tiles_n = ct.num_tiles(c, axis=1, shape=(TM, TN))
    for tile in range(ct.bid(0), tiles_m * tiles_n, ct.num_blocks(0)):
        i = tile // tiles_n
        j = tile % tiles_n
        acc = ct.full((TM, TN), 0.0, dtype=ct.float32)
        for k in range(ct.num_tiles(a, axis=1, shape=(TM, TK))):
            ta = ct.load(a, index=(i, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
            tb = ct.load(b, index=(k, j), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(ta, tb, acc)
        ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


#: the same on two warpgroups (one a 64-row half of each 128-row tile): the planted-fault
#: tests' kernel, whose warpgroups read each stage apart from the warp that refills it
persistent_gemm_8_warps = ct.kernel(persistent_gemm._annotated_function.pyfunc, num_worker_warps=8)
#: the same on one warpgroup, as NVIDIA's tileiras builds TileGym's 128x128 tiles (our
#: default for them is two: ``cta_size.wgmma_pair``)
persistent_gemm_4_warps = ct.kernel(persistent_gemm._annotated_function.pyfunc, num_worker_warps=4)

F16, BF16 = ct.float16, ct.bfloat16


def persistent_case(name: str, dtype, tm: int, tn: int, tk: int) -> KernelCase:
    return KernelCase(name, persistent_gemm, [[arr(dtype, 2), arr(dtype, 2), arr(dtype, 2), tm, tn, tk]])


CASES = (
    persistent_case("persistent_gemm_f16", F16, 64, 32, 16),
    persistent_case("persistent_gemm_bf16", BF16, 64, 64, 16),
)
