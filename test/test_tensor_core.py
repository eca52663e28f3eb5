"""Matrix multiplies on tensor cores: ``mma.sync.m16n8k16`` for f16/bf16 mmaf on sm_80 and
later (lower/tileas.tensor_core_layout, codegen/emit_mma._tensor_core_mma).

The accumulator takes the MMA fragment layout (layout/linear.mma_fragment); A and B go
through shared memory and come back with ldmatrix.  Each kernel is checked against the
interpreter in the emulator, which runs ``mma.sync`` and ``ldmatrix`` as the PTX ISA
defines them (and as NVIDIA's own tensor-core PTX needs them: test_differential)."""
from __future__ import annotations

import re

import pytest

from tileiras import diffcheck
from tileiras.layout.linear import mma_blocks, mma_fragment
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.text.parser import parse_module


# -- the fragment layout ----------------------------------------------------------------------
def test_fragment_layout_is_the_mma_accumulator_layout():
    """Block (0, 0) of warp 0 is the PTX ISA's m16n8 C fragment: register e of lane l holds
    row l / 4 + 8 (e / 2), column 2 (l % 4) + e % 2."""
    layout = mma_fragment((64, 64), 4)
    assert layout.is_surjective()
    for lane in range(32):
        for e in range(4):
            assert layout.apply(reg=e, lane=lane) == (lane // 4 + 8 * (e // 2), 2 * (lane % 4) + e % 2)
    # 4 warps over the four 16-row blocks; each warp's 8 column blocks are its registers
    assert [layout.apply(warp=w) for w in range(4)] == [(0, 0), (16, 0), (32, 0), (48, 0)]
    assert mma_blocks(layout) == (1, 8)
    assert [layout.apply(reg=4 * j) for j in range(8)] == [(0, 8 * j) for j in range(8)]


def test_fragment_layout_splits_columns_when_rows_run_out():
    layout = mma_fragment((16, 64), 4)
    assert layout.is_surjective()
    assert [layout.apply(warp=w) for w in range(4)] == [(0, 0), (0, 8), (0, 16), (0, 24)]
    assert mma_blocks(layout) == (1, 2)


def test_warps_beyond_the_blocks_hold_copies():
    layout = mma_fragment((16, 16), 4)
    assert layout.is_surjective()
    assert [layout.apply(warp=w) for w in range(4)] == [(0, 0), (0, 8), (0, 0), (0, 8)]
    assert layout.broadcast_mask("warp") == 0b10


# -- code generation --------------------------------------------------------------------------
def gemm_kernel(m: int, n: int, k: int, ab: str = "f16", acc: str = "f32", rank: int = 2) -> str:
    """C[bx, by] = A[bx, :K] @ B[:K, by], zero-padded partial tiles."""
    def view(name: str, elem: str, tile: tuple[int, ...]) -> tuple[list[str], str, str]:
        dims = "x".join("?" * len(tile))
        tv = f"tensor_view<{dims}x{elem}, strides=[{','.join(['?'] * (len(tile) - 1) + ['1'])}]>"
        pv = f"partition_view<tile=({'x'.join(map(str, tile))}), padding_value = zero, {tv}>"
        shape = ", ".join(f"%{name}_d{i}" for i in range(len(tile)))
        strides = ", ".join([f"%{name}_s{i}" for i in range(len(tile) - 1)] + ["1"])
        lines = [f"%{name}_v = make_tensor_view %{name}, shape = [{shape}], strides = [{strides}] : tile<i32> -> {tv}",
                 f"%{name}_p = make_partition_view %{name}_v : {pv}"]
        return lines, pv, ", ".join([f"%{name}: tile<ptr<{elem}>>"]
                                    + [f"%{name}_d{i}: tile<i32>" for i in range(len(tile))]
                                    + [f"%{name}_s{i}: tile<i32>" for i in range(len(tile) - 1)])
    batch = (1,) * (rank - 2)
    a_lines, a_pv, a_args = view("a", ab, (*batch, m, k))
    b_lines, b_pv, b_args = view("b", ab, (*batch, k, n))
    c_lines, c_pv, c_args = view("c", acc, (*batch, m, n))
    zeros = ", ".join(["%c0"] * (rank - 2))
    pre = zeros + ", " if zeros else ""
    t = lambda *s: "x".join(map(str, s))   # noqa: E731
    idx = "tile<i32>" + ", tile<i32>" * (rank - 1)
    body = a_lines + b_lines + c_lines + [
        "%tok = make_token : token",
        "%c0 = constant <i32: 0> : tile<i32>",
        "%bx, %by, %bz = get_tile_block_id : tile<i32>",
        f"%ta, %t1 = load_view_tko weak %a_p[{pre}%bx, %c0] token = %tok : {a_pv}, {idx} -> tile<{t(*batch, m, k)}x{ab}>, token",
        f"%tb, %t2 = load_view_tko weak %b_p[{pre}%c0, %by] token = %tok : {b_pv}, {idx} -> tile<{t(*batch, k, n)}x{ab}>, token",
        f"%z = constant <{acc}: 0.5> : tile<{t(*batch, m, n)}x{acc}>",
        f"%r = mmaf %ta, %tb, %z : tile<{t(*batch, m, k)}x{ab}>, tile<{t(*batch, k, n)}x{ab}>, tile<{t(*batch, m, n)}x{acc}>",
        f"%st = store_view_tko weak %r, %c_p[{pre}%bx, %by] token = %tok : tile<{t(*batch, m, n)}x{acc}>, {c_pv}, {idx} -> token",
        "return"]
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k({a_args}, {b_args}, {c_args}) {{\n" + "".join(f"    {x}\n" for x in body) + "  }\n}\n")


def ptx_of(text: str, arch: str = "sm_80") -> str:
    return compile_module(parse_module(text, "k.mlir"), CompileOptions(gpu_name=arch), "ptx")


TENSOR_CORE_CASES = [
    # (M, N, K, operands, accumulator)
    (64, 64, 32, "f16", "f32"),
    (32, 64, 64, "bf16", "f32"),
    (64, 32, 16, "f16", "f16"),
    (16, 16, 16, "f16", "f32"),        # fewer 16x8 blocks than warps: copies
    (128, 16, 32, "bf16", "f32"),
]


@pytest.mark.parametrize("m, n, k, ab, acc", TENSOR_CORE_CASES)
def test_tensor_core_gemm_uses_mma_sync(m, n, k, ab, acc):
    ptx = ptx_of(gemm_kernel(m, n, k, ab, acc))
    blocks = (m // 16) * (n // 8)
    mmas = re.findall(rf"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.{ab}\.{ab}\.f32", ptx)
    # every warp runs its blocks for each 16-deep step of K (loops may be unrolled)
    assert len(mmas) >= max(1, blocks // 4)
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16" in ptx
    assert "fma.rn.f32" not in ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100", "sm_120"])
@pytest.mark.parametrize("m, n, k, ab, acc", TENSOR_CORE_CASES)
def test_tensor_core_gemm_matches_interpreter(m, n, k, ab, acc, arch):
    module = parse_module(gemm_kernel(m, n, k, ab, acc), "k.mlir")
    reports = diffcheck.check_module(module, arch, grid=(2, 2, 1), extent=100)
    assert [r.problem for r in reports] == [None]


@pytest.mark.parametrize("case", [
    {"m": 64, "n": 64, "k": 32, "ab": "f32", "acc": "f32"},          # f32 operands: CUDA cores
    {"m": 64, "n": 64, "k": 8, "ab": "f16", "acc": "f32"},           # K below one m16n8k16 step
    {"m": 64, "n": 64, "k": 32, "ab": "f16", "acc": "f32", "rank": 3},  # batched: not yet
])
def test_other_matrix_multiplies_stay_on_cuda_cores(case):
    ptx = ptx_of(gemm_kernel(**case))
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    assert "fma.rn.f32" in ptx


def test_cuda_core_fallback_still_matches_interpreter():
    module = parse_module(gemm_kernel(64, 64, 8, "f16", "f32"), "k.mlir")
    assert [r.problem for r in diffcheck.check_module(module, "sm_80", grid=(2, 2, 1), extent=100)] == [None]
