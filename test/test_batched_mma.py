"""Batched (rank-3) matrix multiplies on tensor cores: B x M x K @ B x K x N, each matrix
as the 2-D ``mma.sync`` form (lower/mma_forms.tensor_core_mma, accumulator_layout;
codegen/emit_mma._tensor_core_mma), never ``wgmma``, as NVIDIA's tileiras does on sm_80
and sm_90.  The accumulator is ``tensor_core.batched_fragment``: the 2-D fragment of each
matrix, warps the fragment leaves as copies taking other matrices.  Each kernel is
checked against the interpreter in the emulator."""
from __future__ import annotations

import pytest

from test_tensor_core import gemm_kernel, ptx_of
from tileiras import diffcheck
from tileiras.layout.core import REG, WARP
from tileiras.layout.linear import mma_fragment
from tileiras.layout.tensor_core import batch_slice, batched_fragment
from tileiras.lower.mma_forms import accumulator_layout, tensor_core_mma
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.text.parser import parse_module
from tileiras.tile.traits import is_contraction


def batched_gemm(batch: int, **case) -> str:
    """``gemm_kernel``'s rank-3 kernel with ``batch`` matrices a tile."""
    return gemm_kernel(rank=3, **case).replace("tile=(1x", f"tile=({batch}x").replace("tile<1x", f"tile<{batch}x")


# -- the layout ---------------------------------------------------------------------------------
def test_batched_fragment_puts_copy_warps_on_other_matrices():
    """16x16 has two 8-column blocks for 4 warps: warp bit 1 (a copy in 2-D) takes matrix
    1, matrices 2 and 3 are the registers after the first matrix's 4."""
    frag = mma_fragment((16, 16), 4)
    layout = batched_fragment(frag, 4)
    assert layout.shape == (4, 16, 16) and layout.is_surjective()
    assert layout.bases(WARP) == ((0, 0, 8), (1, 0, 0))
    assert layout.bases(REG) == tuple((0, *b) for b in frag.bases(REG)) + ((2, 0, 0),)
    assert [layout.apply(reg=4 * i)[0] for i in range(2)] == [0, 2]
    assert layout.apply(warp=2, reg=4) == (3, 0, 0)
    assert batch_slice(layout) == frag


@pytest.mark.parametrize("shape, warps, batch", [((64, 32), 4, 4), ((16, 8), 4, 8), ((32, 32), 8, 2),
                                                  ((16, 16), 4, 1)])
def test_batched_fragment_holds_every_element_once_a_matrix(shape, warps, batch):
    frag = mma_fragment(shape, warps)
    layout = batched_fragment(frag, batch)
    assert layout.is_surjective() and batch_slice(layout) == frag
    held = {layout.apply(reg=r, lane=l, warp=w) for r in range(layout.size(REG)) for l in range(32)
            for w in range(warps)}
    assert len(held) == batch * shape[0] * shape[1]


def test_batched_form_is_recorded_with_its_layout():
    module = parse_module(batched_gemm(2, m=64, n=64, k=32, ab="f16"), "k.mlir")
    tas = run_stages(module, CompileOptions(gpu_name="sm_90"), "tileas").tas["k"]
    (op,) = [op for op in tas.aa.live_ops() if is_contraction(op)]
    form = tas.tensor_cores[op]
    assert form.opcode == "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" and not form.warpgroup
    assert tas.mma_layouts[(2, 64, 64)] == accumulator_layout(op, tas.num_warps)
    assert tensor_core_mma(op, 75) is None


# -- code generation ----------------------------------------------------------------------------
CASES = [
    # (batch, gemm_kernel arguments, the mma.sync form, NVIDIA's count of it (tileiras 13.x))
    (1, {"m": 64, "n": 64, "k": 32, "ab": "f16"}, "m16n8k16.row.col.f32.f16.f16.f32", 16),
    (2, {"m": 32, "n": 32, "k": 16, "ab": "f16"}, "m16n8k16.row.col.f32.f16.f16.f32", 4),
    (2, {"m": 64, "n": 64, "k": 32, "ab": "f16"}, "m16n8k16.row.col.f32.f16.f16.f32", 32),
    (4, {"m": 16, "n": 16, "k": 32, "ab": "bf16"}, "m16n8k16.row.col.f32.bf16.bf16.f32", 4),
    (2, {"m": 32, "n": 32, "k": 16, "ab": "f64", "acc": "f64"}, "m8n8k4.row.col.f64.f64.f64.f64", 32),
    (2, {"m": 32, "n": 16, "k": 16, "ab": "tf32"}, "m16n8k8.row.col.f32.tf32.tf32.f32", None),
    (2, {"m": 32, "n": 32, "k": 32, "ab": "i8", "acc": "i32"}, "m16n8k32.row.col.s32.s8.u8.s32", None),
    (8, {"m": 16, "n": 8, "k": 16, "ab": "f16", "acc": "f16"}, "m16n8k16.row.col.f32.f16.f16.f32", None),
]
IDS = [f"b{b}-{c['m']}x{c['n']}x{c['k']}-{c['ab']}-{c.get('acc', 'f32')}" for b, c, _, _ in CASES]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("batch, case, form, nvidia", CASES, ids=IDS)
def test_batched_gemm_uses_mma_sync(batch, case, form, nvidia, arch):
    ptx = ptx_of(batched_gemm(batch, **case), arch)
    issued = ptx.count(f"mma.sync.aligned.{form} ")
    assert issued > 0 and "wgmma" not in ptx and "fma.rn" not in ptx
    if nvidia is not None:      # the K steps of these single-block K loops unrolled, as NVIDIA's are
        assert issued == nvidia


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("batch, case, form, nvidia", CASES, ids=IDS)
def test_batched_gemm_matches_interpreter(batch, case, form, nvidia, arch):
    module = parse_module(batched_gemm(batch, **case), "k.mlir")
    reports = diffcheck.check_module(module, arch, grid=(2, 2, 1), extent=100)
    assert [r.problem for r in reports] == [None]
