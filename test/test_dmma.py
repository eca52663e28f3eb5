"""f64 matrix multiplies on tensor cores (DMMA): ``mma.sync.aligned.m8n8k4.row.col.f64``
on sm_80 and later, as NVIDIA's tileiras emits for f64 mmaf (lower/mma_forms.DMMA,
codegen/emit_mma: two m8n8k4 a 16x8 block of the ``mma_fragment`` accumulator).

The fragment layouts (layout/tensor_core.dmma_*) are checked against the PTX ISA's
figures and the emulator's DMMA (emulate/ops/mma.compile_dmma); each kernel is checked
against the interpreter in the emulator."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kernels.pipelined import gemm_loop
from test_tensor_core import gemm_kernel, ptx_of
from tileiras import diffcheck
from tileiras.emulate import launch
from tileiras.emulate.ops import mma
from tileiras.layout.core import LANE, REG
from tileiras.layout.tensor_core import dmma_a_layout, dmma_b_layout, dmma_c_layout, mma_c_layout
from tileiras.lower.mma_forms import DMMA, dmma_pitch
from tileiras.lower.software_pipeline import PipelinePlan
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.text.parser import parse_module

OPCODE = "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"


# -- the fragment layouts -----------------------------------------------------------------------
def test_dmma_fragments_written_out():
    """PTX ISA, "Matrix Fragments for mma.m8n8k4 with .f64 floating point type": lane 13
    (groupID 3, threadID_in_group 1) holds A (3, 1), B (1, 3) and C (3, 2), (3, 3)."""
    a, b, c = dmma_a_layout(), dmma_b_layout(), dmma_c_layout()
    assert all(x.is_bijective() for x in (a, b, c))
    assert a.apply(lane=13) == (3, 1) and b.apply(lane=13) == (1, 3)
    assert [c.apply(reg=i, lane=13) for i in range(2)] == [(3, 2), (3, 3)]
    assert a.ins == ((REG, ()), (LANE, ((0, 1), (0, 2), (1, 0), (2, 0), (4, 0))))


def test_dmma_fragments_are_the_emulators():
    (ar, ac), (br, bc), (cr, cc) = mma.dmma_positions()
    a, b, c = dmma_a_layout(), dmma_b_layout(), dmma_c_layout()
    for lane in range(32):
        assert a.apply(lane=lane) == (ar[lane], ac[lane])
        assert b.apply(lane=lane) == (br[lane], bc[lane])
        for e in range(2):
            assert c.apply(reg=e, lane=lane) == (cr[e, lane], cc[e, lane])


def test_two_dmma_accumulators_make_an_m16n8_block():
    """Registers 0-1 of an m16n8 accumulator are the DMMA accumulator of rows 0-7, 2-3
    that of rows 8-15: codegen runs one m8n8k4 per half."""
    c16, c8 = mma_c_layout(), dmma_c_layout()
    for lane in range(32):
        for half in range(2):
            for e in range(2):
                row, col = c8.apply(reg=e, lane=lane)
                assert c16.apply(reg=2 * half + e, lane=lane) == (row + 8 * half, col)


@pytest.mark.parametrize("cols", [4, 8, 16, 32, 64, 100])
def test_dmma_pitch_is_4_mod_16(cols):
    pitch = dmma_pitch(cols)
    assert cols <= pitch < cols + 16 and pitch % 16 == 4
    # a half warp's 16 fragment elements (g < 4, t < 4) meet 16 different 8-byte bank pairs
    assert len({(g * pitch + t) % 16 for g in range(4) for t in range(4)}) == 16


# -- code generation ----------------------------------------------------------------------------
SHAPES = [(16, 8, 4), (32, 32, 16), (64, 64, 32), (16, 16, 8), (128, 16, 8), (32, 128, 64)]


@pytest.mark.parametrize("m, n, k", SHAPES)
def test_f64_gemm_uses_dmma(m, n, k):
    """Two m8n8k4 per 16x8 accumulator block a warp holds and K step of 4 (4 warps; fewer
    blocks than warps: copies), the K loop kept or unrolled in whole steps."""
    blocks = (m // 16) * (n // 8) // min(4, (m // 16) * (n // 8))
    for arch in ("sm_80", "sm_90", "sm_120"):
        ptx = ptx_of(gemm_kernel(m, n, k, "f64", "f64"), arch)
        issued = ptx.count(OPCODE)
        assert issued % (2 * blocks) == 0 and 2 * blocks <= issued <= 2 * blocks * k // 4
        assert "fma.rn.f64" not in ptx and "wgmma" not in ptx


def test_dmma_count_matches_nvidias():
    """NVIDIA's tileiras (13.x) issues 16 and 128 m8n8k4 for these two tiles on sm_80 and
    sm_90; ours unrolls the K steps of a single-block K the same way."""
    assert ptx_of(gemm_kernel(32, 32, 16, "f64", "f64")).count(OPCODE) == 16
    assert ptx_of(gemm_kernel(64, 64, 32, "f64", "f64"), "sm_90").count(OPCODE) == 128


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_f64_gemm_matches_interpreter(m, n, k, arch):
    module = parse_module(gemm_kernel(m, n, k, "f64", "f64"), "k.mlir")
    reports = diffcheck.check_module(module, arch, grid=(2, 2, 1), extent=100)
    assert [r.problem for r in reports] == [None]


@pytest.mark.parametrize("m, n, k", [(16, 8, 2), (16, 4, 4), (8, 8, 4)])
def test_f64_shapes_off_the_instruction_stay_on_cuda_cores(m, n, k):
    ptx = ptx_of(gemm_kernel(m, n, k, "f64", "f64"))
    assert "mma.sync" not in ptx and "fma.rn.f64" in ptx


def test_dmma_form():
    assert DMMA.opcode == OPCODE and (DMMA.k, DMMA.bits, DMMA.m, DMMA.warpgroup) == (4, 64, 8, False)


def test_dmma_fragment_loads_have_no_bank_conflicts():
    """The f64 rows are padded to 4 mod 16 elements (``dmma_pitch``): each half warp's
    fragment load meets 16 different bank pairs; the emulator counts wavefronts."""
    module = parse_module(gemm_kernel(64, 64, 32, "f64", "f64"), "k.mlir")
    fn = module.functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), 128)
    ptx = diffcheck.compile_ptx(module, "sm_80")
    shared = launch(ptx, fn.name, (1, 1, 1), args, traffic=True).check().traffic.shared_loads
    assert shared.requests > 0 and shared.conflicts == 0


# -- a K loop: pipelined through cp.async stages -------------------------------------------------
@pytest.mark.parametrize("case, extents", [
    ({"m": 32, "n": 32, "k": 16}, (100, 48)),
    ({"m": 64, "n": 64, "k": 16, "trips": 3}, (100,)),
    ({"m": 32, "n": 32, "k": 16, "align": 0}, (100,)),       # 8-byte cp.async.ca
])
def test_pipelined_f64_k_loop_matches_interpreter(case, extents):
    text = gemm_loop(ab="f64", acc="f64", **case)
    module = parse_module(text, "k.mlir")
    tas = run_stages(module, CompileOptions(gpu_name="sm_80"), "tileas", only_needed=True).tas
    (plan,) = tas[module.functions[0].name].pipelines.values()
    assert isinstance(plan, PipelinePlan) and plan.a_pitch == dmma_pitch(case["k"])
    ptx = diffcheck.compile_ptx(module, "sm_80")
    assert OPCODE in ptx and re.search(r"cp\.async\.c[ag]", ptx) and "fma.rn.f64" not in ptx
    for extent in extents:
        reports = diffcheck.check_module(module, "sm_80", grid=(2, 2, 1), extent=extent)
        assert [r.problem for r in reports] == [None], extent


# -- NVIDIA's DMMA PTX: the emulator's m8n8k4 is the hardware's ----------------------------------
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvidias_dmma_ptx_matches_interpreter(arch, real_tileiras, tmp_path):
    """NVIDIA's tileiras puts the f64 GEMM on m8n8k4 too; its PTX, emulated, agrees with
    the interpreter and with ours (``diffcheck``'s third opinion): the emulator's DMMA
    fragments are the ones NVIDIA's code is written for."""
    import subprocess

    from tileiras.diffcheck import ThirdOpinion
    from tileiras.writer import write_bytecode

    module = parse_module(gemm_kernel(32, 32, 16, "f64", "f64"), "k.mlir")
    src, cubin = tmp_path / "k.tileir", tmp_path / "k.cubin"
    src.write_bytes(write_bytecode(module))
    subprocess.run([real_tileiras, str(src), "--gpu-name", arch, "--lineinfo", "-o", str(cubin)], check=True)
    nvidia = ThirdOpinion.read(str(cubin))
    assert nvidia.ptx.count(OPCODE) == 16
    reports = diffcheck.check_module(module, arch, grid=(2, 2, 1), extent=100, nvidia=nvidia)
    assert [r.problem for r in reports] == [None]
