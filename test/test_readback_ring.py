"""A read-back ring inside a loop over output tiles: a persistent fp8 GEMM with block scales.

Each K tile's product is multiplied from zeros and scaled before it is added
(``RingPlan.readback``); on sm_100 the MMAs of the next K tile run into a second
tensor-memory buffer while the warps read this one's (``RingPlan.ahead``).  Inside a loop
over tiles the ring is persistent and warp-specialized: its mbarriers live the whole
kernel, the stages' phases and the product buffers' alternation are carried across the
tiles by the ring's K-tile counter, and the tensor-memory mbarrier's phases by its uses.
Each CTA runs several tiles here, so every one of those carries is exercised.
"""
from __future__ import annotations

import warnings

import pytest

ct = pytest.importorskip("cuda.tile")

from _rings import w8a8_agrees  # noqa: E402
from differential import export  # noqa: E402
from kernels._case import KernelCase, arr  # noqa: E402
from kernels.workloads import w8a8_tile  # noqa: E402

from tileiras.lower.tma_ring import RingPlan  # noqa: E402
from tileiras.pipeline import CompileOptions, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

ConstInt = ct.Constant[int]
FP8, F32, BF16 = ct.float8_e4m3fn, ct.float32, ct.bfloat16


@ct.kernel
def persistent_w8a8(a, b, a_scales, b_scales, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """TileGym's W8A8 GEMM (``kernels/workloads.w8a8_block_fp8``) with a CTA looping over
    output tiles, as persistent GEMMs do."""
    tiles_n = ct.num_tiles(c, axis=1, shape=(BM, BN))
    tiles = ct.num_tiles(c, axis=0, shape=(BM, BN)) * tiles_n
    for t in range(ct.bid(0), tiles, ct.num_blocks(0)):
        i, j = t // tiles_n, t % tiles_n
        ct.store(c, index=(i, j), tile=ct.astype(w8a8_tile(a, b, a_scales, b_scales, i, j, BM, BN, BK), c.dtype))


CASE = KernelCase("persistent_w8a8", persistent_w8a8,
                  [[arr(FP8, 2), arr(FP8, 2), arr(F32, 2), arr(F32, 2), arr(BF16, 2), 64, 64, 64]])


def _module(arch: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_bytecode(export(CASE, arch=arch, aligned=True))


@pytest.mark.parametrize("arch", ["sm_90", "sm_100", "sm_120"])
def test_persistent_read_back_rings_agree_across_tiles(arch: str):
    """128 x 192 output (6 tiles of 64 x 64) on 2 CTAs, K of 320 (five trips): each CTA
    runs three tiles through the same ring."""
    module = _module(arch)
    (tas,) = run_stages(module, CompileOptions(gpu_name=arch), "tileas", only_needed=True).tas.values()
    (plan,) = [p for p in tas.pipelines.values() if not isinstance(p, str)]
    assert isinstance(plan, RingPlan) and plan.persistent and plan.specialized
    assert (plan.readback, plan.ahead) == ((True, True) if arch == "sm_100" else (False, False))
    w8a8_agrees(module, arch, (128, 192, 320), 64, (2, 1, 1), 29)
