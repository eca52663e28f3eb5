"""The CUDA-core matrix multiply (``emit_mma._OuterProduct``): multiplies that no tensor-core
form takes (f32 operands, tiles too small for a fragment, batched f16 of a few rows,
block-scaled fp8 where the hardware has no form for the block size) walk K as outer
products.  A thread reads each of its accumulator rows of A and column runs of B once per
step, a word or more at a time (fp8 widened in pairs), and decodes block scales once per
scale block, not once per multiply-add.  Each kernel agrees with the interpreter in the
emulator, and its K loop has no byte-wide shared-memory reads of fp8 operands."""
from __future__ import annotations

import re

import numpy as np
import pytest

from test_mma_scaled import ptx_of, scaled_gemm
from test_tensor_core import gemm_kernel
from tileiras import diffcheck
from tileiras.emulate.launch import launch
from tileiras.ir.core import Operation
from tileiras.layout.linear import outer_product
from tileiras.pipeline import CompileOptions, compile_module, run_stages
from tileiras.text.parser import parse_module
from tileiras.tile import ops_arith as AR
from tileiras.tile import ops_memory as MEM

CASES = {
    "f32": (lambda: gemm_kernel(32, 32, 32, "f32", "f32"), "sm_80"),
    "f32-blocked": (lambda: gemm_kernel(128, 128, 32, "f32", "f32"), "sm_90"),
    "f16-small": (lambda: gemm_kernel(4, 4, 16, "f16", "f32"), "sm_80"),
    "f16-batched": (lambda: gemm_kernel(8, 8, 16, "f16", "f32", rank=3), "sm_80"),
    "e4m3-block16": (lambda: scaled_gemm(64, 64, 64, block=16), "sm_120"),
    "e5m2-block32": (lambda: scaled_gemm(32, 32, 64, "f8E5M2"), "sm_100"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_simt_multiply_matches_interpreter(case):
    make, arch = CASES[case]
    module = parse_module(make(), "k.mlir")
    reports = diffcheck.check_module(module, arch, grid=(2, 2, 1), extent=100)
    assert [r.problem for r in reports] == [None]


@pytest.mark.parametrize("case", ["e4m3-block16", "e5m2-block32"])
def test_fp8_operands_are_read_in_words_and_widened_in_pairs(case):
    make, arch = CASES[case]
    ptx = ptx_of(make(), arch)
    decodes = ptx.count("0f7FC00000")           # a block scale decoded (code 0xFF is NaN)
    assert decodes and ptx.count("ld.shared.b8") <= decodes   # byte reads are scales only
    pairs = len(re.findall(r"cvt\.rn\.f16x2\.e[45]m[23]x2", ptx))
    assert pairs and ptx.count("cvt.f32.f16") == 2 * pairs


@pytest.mark.parametrize("case", ["e4m3-block16", "e5m2-block32"])
def test_block_scales_are_decoded_once_per_block(case):
    """A scale holds for 16 or 32 K steps and is decoded once for them.  Decoded at every
    K step, a thread's outer product of r rows and c columns has r + c decodes for r x c
    multiply-adds (here at most 2 multiply-adds a decode); once a block, the K steps of a
    word (8 fp8 values) at least multiply that by 8."""
    make, arch = CASES[case]
    ptx = ptx_of(make(), arch)
    assert ptx.count("fma.rn.f32") >= 4 * ptx.count("0f7FC00000")


def _aligned(text: str, name: str) -> str:
    """``text`` with view ``name``'s base 16-byte aligned and its extents and stride
    multiples of 16 (``assume div_by<16>``), as cuTile exports ordinary tensors."""
    old = f"make_tensor_view %{name}, shape = [%{name}_d0, %{name}_d1], strides = [%{name}_s0, 1]"
    assert old in text
    elem = re.search(rf"%{name}: tile<ptr<(\w+)>>", text).group(1)
    facts = [f"%{name}_al = assume div_by<16>, %{name} : tile<ptr<{elem}>>"] + [
        f"%{name}_{v}_al = assume div_by<16>, %{name}_{v} : tile<i32>" for v in ("d0", "d1", "s0")]
    new = (f"make_tensor_view %{name}_al, shape = [%{name}_d0_al, %{name}_d1_al], "
           f"strides = [%{name}_s0_al, 1]")
    lines = text.replace(old, new).split("\n")
    at = next(i for i, line in enumerate(lines) if f"make_tensor_view %{name}_al" in line)
    lines[at:at] = ["    " + f for f in facts]
    return "\n".join(lines)


def test_e8m0_scales_go_through_tma():
    """A tile of UE8M0 block scales is bytes to a tensor map, as fp8 operands are: B's
    aligned 2x64 scales are copied by TMA on sm_100 (NVIDIA's tool does the same), and the
    result still agrees with the interpreter."""
    text = _aligned(scaled_gemm(64, 64, 64), "sb")
    ptx = ptx_of(text, "sm_100")
    assert ptx.count(".param .align 64 .b8") == 1
    assert "cp.async.bulk.tensor.2d.shared::cta.global" in ptx
    reports = diffcheck.check_module(parse_module(text, "k.mlir"), "sm_100", grid=(2, 2, 1), extent=128)
    assert [r.problem for r in reports] == [None]


def _tileas(text: str, arch: str):
    (tas,) = run_stages(parse_module(text, "k.mlir"), CompileOptions(gpu_name=arch), "tileas").tas.values()
    return tas


def _loads(tas) -> dict[tuple[int, ...], Operation]:
    return {tuple(op.results[0].type.shape): op for op in tas.aa.function.walk() if isinstance(op, MEM.LoadViewTkoOp)}


def test_replicated_scale_tiles_are_loaded_by_the_first_copy_s_warps():
    """A's 64x2 scales over 256 threads are held twice (warps 4-7 repeat warps 0-3); only
    the multiply's staging reads them, so warps 0-3 load and stage them alone
    (``TileAS.warp_owned``), as NVIDIA's one warpgroup does: half the requests.  A and B,
    held once, load in every warp."""
    text = scaled_gemm(64, 64, 64)
    tas = _tileas(text, "sm_100")
    loads = _loads(tas)
    assert set(tas.warp_owned) == {loads[(64, 2)], loads[(2, 64)]}
    assert "warp_owned = true" in compile_module(parse_module(text, "k.mlir"), CompileOptions(gpu_name="sm_100"), "tileas")
    reports = diffcheck.check_module(parse_module(text, "k.mlir"), "sm_100", grid=(2, 2, 1), extent=100)
    assert [r.problem for r in reports] == [None]


def test_scalar_operand_loads_of_a_simt_multiply_cover_rows_with_lanes():
    """Unaligned fp8 operands load a byte at a time; a warp's lanes then cover 32
    consecutive bytes of a row (one sector a request), not 4-byte runs of 2 rows (4
    sectors: mma_scaled_mx sm_100, 1.69x NVIDIA's sectors before)."""
    tas = _tileas(scaled_gemm(64, 64, 64), "sm_100")
    operands = [op for op in tas.aa.function.walk()
                if isinstance(op, MEM.LoadViewTkoOp) and op.results[0].type.shape == (64, 64)]
    assert len(operands) == 2
    for op in operands:
        assert tuple(tas.layouts[op.results[0]].bases("lane")) == ((0, 1), (0, 2), (0, 4), (0, 8), (0, 16))


def _block(layout) -> tuple[int, int]:
    """(rows, columns) of the accumulator block one thread holds."""
    regs = layout.bases("reg")
    return 1 << sum(1 for b in regs if b[0]), 1 << sum(1 for b in regs if b[1])


def test_outer_product_blocks_make_a_k_step_cheapest():
    """128x128 over 128 threads: 8 rows x 16 columns a thread (8 reads of A and 4 of B a
    K step, against 32 + 1 for a 32 x 4 block); block-scaled fp8 64x64 over 256 threads,
    where each value read costs two more instructions, stays 4 x 4; a tile smaller than
    the CTA gets none."""
    assert _block(outer_product((128, 128), 4)) == (8, 16)
    assert _block(outer_product((64, 64), 8, value_cost=2)) == (4, 4)
    assert _block(outer_product((64, 64), 8)) == (2, 8)
    assert outer_product((8, 8), 4) is None


def test_f32_multiply_reads_shared_memory_in_few_wavefronts():
    """A 128x128x32 f32 multiply on CUDA cores: each warp reads 8 rows of A (4 distinct a
    warp, in different banks) and 4 16-byte runs of B a K step: 12 wavefronts, 1536 for the
    CTA, no bank conflicts (32 x 4 blocks took 4608)."""
    module = parse_module(gemm_kernel(128, 128, 32, "f32", "f32"), "k.mlir")
    tas = _tileas(gemm_kernel(128, 128, 32, "f32", "f32"), "sm_80")
    (mma,) = [op for op in tas.aa.function.walk() if isinstance(op, AR.MmaFOp)]
    assert _block(tas.layouts[mma.result]) == (8, 16)
    ptx = diffcheck.compile_ptx(module, "sm_80")
    args = diffcheck.synthesize_args(module.functions[0], np.random.default_rng(1), 128)
    traffic = launch(ptx, "k", (1, 1, 1), args, traffic=True).traffic
    assert traffic.shared_loads.wavefronts <= 1536 and traffic.shared_loads.conflicts == 0
