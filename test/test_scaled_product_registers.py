"""Two consumer warp groups for K loops that hold each K tile's product beside the
accumulator (``cta_size.scaled_products``).

An fp8 GEMM with block scales (TileGym's W8A8 form, ``kernels/workloads.w8a8_block_fp8``,
and DeepSeek's, ``fp8_block_scaled_gemm``) multiplies each K tile from zeros and scales the
product before adding it: with 128x128 tiles a thread of 4 warps holds 128 f32 registers of
accumulator and 128 of product.  Ours took 255 registers and spilled 400-910 bytes a thread
on sm_90 and sm_120; NVIDIA's tileiras runs these on two consumer warp groups (384 threads
with its producer's, 168 registers).  On 8 warps ours takes 157-202 and spills nothing
(``ptxas -v``, the real tool's flags, 2026-11-29).  sm_100 reads the product back from
tensor memory in chunks (149 registers on 4 warps) and keeps its size; so does a loop whose
multiply accumulates into the carried value.
"""
from __future__ import annotations

import warnings

import pytest

ct = pytest.importorskip("cuda.tile")

from _rings import w8a8_agrees  # noqa: E402
from differential import export  # noqa: E402
from kernels._case import KernelCase, arr  # noqa: E402
from kernels.workloads import fp8_block_scaled_gemm, lora_linear, w8a8_block_fp8  # noqa: E402

from tileiras.codegen.ptxas import invoke_ptxas  # noqa: E402
from tileiras.pipeline import CompileOptions, compile_module, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

FP8, F32, BF16 = ct.float8_e4m3fn, ct.float32, ct.bfloat16


NAMES = {w8a8_block_fp8: "w8a8", fp8_block_scaled_gemm: "block_scaled"}


def _case(kernel, tile: int) -> KernelCase:
    return KernelCase(NAMES[kernel], kernel, [[arr(FP8, 2), arr(FP8, 2), arr(F32, 2), arr(F32, 2), arr(BF16, 2),
                                                 tile, tile, tile]])


def _module(case: KernelCase, arch: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_bytecode(export(case, arch=arch, aligned=True))


def _warps(case: KernelCase, arch: str) -> tuple[int, int]:
    (tas,) = run_stages(_module(case, arch), CompileOptions(gpu_name=arch), "tileas", only_needed=True).tas.values()
    return tas.num_warps, tas.extra_warps


def test_scaled_products_take_two_warp_groups_where_registers_hold_them():
    for kernel in (w8a8_block_fp8, fp8_block_scaled_gemm):
        assert _warps(_case(kernel, 128), "sm_90") == (8, 0)
        assert _warps(_case(kernel, 128), "sm_120") == (8, 0)
        # tcgen05, the product in tensor memory: 4 workers and NVIDIA's MMA warp group, as before
        assert _warps(_case(kernel, 128), "sm_100") == (8, 0)
        assert _warps(_case(kernel, 64), "sm_90") == (4, 0)        # 32 registers of product
    lora = KernelCase("lora", lora_linear, [[arr(BF16, 2)] * 5 + [128, 128, 64, 16]])
    assert _warps(lora, "sm_90") == (4, 0)                          # both products carried


#: (kernel, arch, most registers, NVIDIA's registers and spilled bytes; ours on 4 warps)
BOUNDS = [
    (w8a8_block_fp8, "sm_90", 170),             # NVIDIA 168/824; ours 255/400
    (w8a8_block_fp8, "sm_120", 210),            # NVIDIA 168/24; ours 255/428
    (fp8_block_scaled_gemm, "sm_90", 190),      # NVIDIA 168/800; ours 255/908
    (fp8_block_scaled_gemm, "sm_120", 190),     # NVIDIA 168/2956; ours 255/580
]


@pytest.mark.parametrize("kernel,arch,regs", BOUNDS, ids=[f"{NAMES[k]}-{a}" for k, a, _ in BOUNDS])
def test_no_spills(kernel, arch: str, regs: int):
    ptx = compile_module(_module(_case(kernel, 128), arch), CompileOptions(gpu_name=arch), "ptx")
    (stats,) = invoke_ptxas(ptx, arch, 3, verbose=True).stats.values()
    assert stats.registers <= regs and stats.spill_stores + stats.spill_loads == 0


def test_two_warpgroups_of_wgmma_agree_with_the_interpreter():
    """sm_90, 128x128x128 fp8 tiles, K of 384 (three trips), one output tile: each warp
    group multiplies and scales its 64 rows."""
    ptx = w8a8_agrees(_module(_case(w8a8_block_fp8, 128), "sm_90"), "sm_90", (128, 128, 384), 128, (1, 1, 1), 23)
    assert ".reqntid 256" in ptx and "wgmma.mma_async" in ptx
