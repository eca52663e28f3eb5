"""Registers and spills of TileGym's persistent norms (``kernels/norms.py``) at TileGym's
shapes: bf16 rows of 2048..8192, TILE_M 4 rows a trip, or one row a trip in chunks of 2048.

Each case pins what ptxas -v reports for our PTX, measured against NVIDIA's tileiras 13.5
on the same bytecode with the same ptxas flags (``bench/code_quality.py``), 2026-11-27.
Where ours is within NVIDIA's registers + 10% the bound keeps it there; where it is not
(aligned sm_80 tiles of four whole rows: NVIDIA holds each thread's 16 columns of all four
rows, so the weight row takes 16 registers; we hold 64 columns of one row, and the weight
row's 64 are loaded again every trip), the bound is our measurement.

The spill bounds pin the sinking of a layout conversion's shared-memory reads (order.py):
the weight row converted to the tile's layout every trip was read whole, beside the tile.
The aligned layer norms pin the reload of loop-invariant rows (``recompute_plan``): a
layer norm's weight and bias rows were converted every trip, the weight's registers live
across the bias's conversion (bf16 4x2048 sm_80: 191 registers, NVIDIA 107, now 112).
"""
from __future__ import annotations

import warnings

import pytest

pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels import norms as K  # noqa: E402

from tileiras.codegen.ptxas import invoke_ptxas  # noqa: E402
from tileiras.pipeline import CompileOptions, compile_module  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

RMS_2048 = K.rms_case("rms_norm_4x2048", K.BF16, 4, 2048)
RMS_4096 = K.rms_case("rms_norm_4x4096", K.BF16, 4, 4096)
RMS_8192 = K.rms_case("rms_norm_4x8192", K.BF16, 4, 8192)
LAYER_2048 = K.layer_case("layer_norm_4x2048", K.BF16, 2048, 4, 2048)
LAYER_4096 = K.layer_case("layer_norm_4x4096", K.BF16, 4096, 4, 4096)
RMS_CHUNKED = K.rms_chunked_case("rms_norm_chunked_2048", K.BF16, 2048)
LAYER_CHUNKED = K.layer_chunked_case("layer_norm_chunked_2048", K.BF16, 2048)

#: (case, arch, aligned, most registers, most spilled bytes stored and loaded): the comment
#: says NVIDIA's registers/spilled bytes, then ours before a conversion's reads were sunk
#: and loop-invariant rows were reloaded every trip (layout_rules.recompute_plan)
CASES = [
    (RMS_2048, "sm_80", False, 132, 0),         # NVIDIA 167/0; ours 127/0
    (RMS_2048, "sm_80", True, 132, 0),          # NVIDIA 84/0; ours 110/0 (the gap above; 128
                                                # since the reload: ptxas's choice, 90 suffice
                                                # under .maxnreg where 96 did)
    (RMS_4096, "sm_80", True, 132, 0),          # NVIDIA 137/0; ours 254/0, 162/0, 127/0 on 8
                                                # warps (cta_size.wide_loop_tiles)
    (RMS_4096, "sm_90", False, 130, 0),         # NVIDIA 251/192; ours 205/0, 123/0 on 8 warps
    (RMS_8192, "sm_80", False, 215, 0),         # NVIDIA 255/2312; ours 255/3176, 255/1008,
                                                # 209/0 on 8 warps
    (RMS_8192, "sm_80", True, 236, 0),          # NVIDIA 232/0; ours 255/348, 230/0 on 8 warps
    (RMS_8192, "sm_120", False, 205, 0),        # NVIDIA 255/2696; ours 255/3192, 255/1040,
                                                # 197/0 on 8 warps
    (RMS_8192, "sm_90", True, 230, 0),          # NVIDIA 168/0 on 384 threads; ours 255/1440
                                                # (the tile in shared memory, read twice,
                                                # there), 255/600, 207/0 on 8 warps
                                                # (cta_size.wide_loop_tiles), 225/0 with the
                                                # next block's TMA issued a trip ahead
                                                # (tma_stream.TmaStream), 209/0
    (RMS_8192, "sm_100", True, 215, 0),         # NVIDIA 168/12 on 384 threads; ours 255/564,
                                                # 209/0 on 8 warps
    (RMS_8192, "sm_120", True, 220, 0),         # NVIDIA 168/0 on 384 threads; ours 255/536,
                                                # 214/0 on 8 warps
    (LAYER_2048, "sm_80", True, 117, 0),        # NVIDIA 107/0; ours 191/0
    (LAYER_2048, "sm_120", True, 100, 0),       # NVIDIA 255/0; ours 233/0
    (LAYER_2048, "sm_120", False, 195, 0),      # NVIDIA 246/0; ours 185/0
    (LAYER_4096, "sm_80", True, 120, 0),        # NVIDIA 193/0; ours 255/656 (the gap above),
                                                # 255/0, 114/0 on 8 warps
    (LAYER_4096, "sm_90", False, 190, 0),       # NVIDIA 255/2060; ours 255/744, 184/0 on 8 warps
    (LAYER_4096, "sm_120", True, 130, 0),       # NVIDIA 168/0; ours 255/264, 128/0, 89/0 on 8
    (RMS_CHUNKED, "sm_80", True, 80, 0),        # NVIDIA 104/0; ours 75/0
    (RMS_CHUNKED, "sm_90", True, 66, 0),        # NVIDIA 255/0; ours 47/0, 62/0 with its column
                                                # loops' tiles TMA-streamed 8 and 4 stages deep
    (LAYER_CHUNKED, "sm_120", True, 118, 0),    # NVIDIA 255/0; ours 112/0
]


def _stats(case, arch: str, aligned: bool):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = export(case, arch=arch, aligned=aligned)
    ptx = compile_module(read_bytecode(data), CompileOptions(gpu_name=arch), "ptx")
    (kernel,) = invoke_ptxas(ptx, arch, 3, verbose=True).stats.values()
    return kernel


@pytest.mark.parametrize("case, arch, aligned, regs, spilled", CASES,
                         ids=[f"{c.name}-{a}-{'aligned' if al else 'unaligned'}" for c, a, al, _, _ in CASES])
def test_persistent_norm_registers(case, arch: str, aligned: bool, regs: int, spilled: int):
    kernel = _stats(case, arch, aligned)
    assert kernel.registers <= regs
    assert kernel.spill_stores + kernel.spill_loads <= spilled


def test_row_blocks_too_wide_for_four_warps_take_eight():
    """``cta_size.wide_loop_tiles``: a loop's 4 x 8192 or 4 x 4096 tile (128 registers a
    thread or more on 4 warps) runs on 8 warps on every arch, as NVIDIA's 384 threads spread
    it on sm_90+ (on an H200 TileGym's persistent RMS norm went from 2.63x NVIDIA's time
    to 1.31x; on 4 warps ours spilled on sm_80, sm_100 and sm_120); 4 x 2048 keeps 4."""
    from tileiras.pipeline import run_stages

    def warps(case, arch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = export(case, arch=arch, aligned=True)
        (tas,) = run_stages(read_bytecode(data), CompileOptions(gpu_name=arch), "tileas", only_needed=True).tas.values()
        return tas.num_warps + tas.extra_warps

    for arch in ("sm_80", "sm_90", "sm_100", "sm_120"):
        assert warps(RMS_8192, arch) == 8, arch
        assert warps(LAYER_4096, arch) == 8, arch
    assert warps(RMS_4096, "sm_90") == 8
    assert warps(RMS_2048, "sm_90") == 4 and warps(LAYER_2048, "sm_80") == 4


def test_the_knob_keeps_four_warps(monkeypatch: pytest.MonkeyPatch):
    """``TILEIRAS_WIDE_LOOP_WARPS=0``: the CTA keeps NVIDIA's sm_80 size (and the spills)."""
    monkeypatch.setenv("TILEIRAS_WIDE_LOOP_WARPS", "0")
    kernel = _stats(RMS_8192, "sm_80", True)
    assert kernel.spill_stores + kernel.spill_loads > 0          # 255 registers, 348 bytes spilled
    monkeypatch.delenv("TILEIRAS_WIDE_LOOP_WARPS")
    kernel = _stats(RMS_8192, "sm_80", True)
    assert kernel.spill_stores + kernel.spill_loads == 0


@pytest.mark.parametrize("case, arch, aligned", [(RMS_8192, "sm_90", True), (RMS_8192, "sm_80", False),
                                                (LAYER_4096, "sm_100", True)],
                         ids=["rms_8192-sm_90", "rms_8192-sm_80-unaligned", "layer_4096-sm_100"])
def test_the_eight_warp_row_blocks_agree_with_the_interpreter(case, arch: str, aligned: bool):
    from tileiras import diffcheck

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = export(case, arch=arch, aligned=aligned)
    reports = diffcheck.check_module(read_bytecode(data), arch, grid=(2, 1, 1))
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]
