"""Matrix multiplies on tensor cores: ``mma.sync.m16n8kK`` for f16, bf16, tf32 and 8-bit
float mmaf and 8-bit integer mmai on sm_80 and later (lower/mma_forms.tensor_core_mma,
codegen/emit_mma._tensor_core_mma), and on sm_90 ``wgmma.mma_async.m64nNkK`` for those
with M a multiple of 64 in whole warpgroups (codegen/emit_mma._warpgroup_mma).

The accumulator takes the MMA fragment layout (layout/linear.mma_fragment); A and B go
through shared memory and come back with ldmatrix.  Each kernel is checked against the
interpreter in the emulator, which runs ``mma.sync`` and ``ldmatrix`` as the PTX ISA
defines them (and as NVIDIA's own tensor-core PTX needs them: test_differential)."""
from __future__ import annotations

import numpy as np
import pytest

from tileiras import diffcheck
from tileiras.codegen.ptxas import invoke_ptxas
from tileiras.emulate import launch
from tileiras.layout.linear import mma_blocks, mma_fragment
from tileiras.lower.mma_forms import tensor_core_mma
from tileiras.pipeline import CompileOptions, TargetError, compile_module, run_stages
from tileiras.text.parser import parse_module
from tileiras.tile.traits import is_contraction
from tileiras.tools import find_ptxas


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
def gemm_kernel(m: int, n: int, k: int, ab: str = "f16", acc: str = "f32", rank: int = 2, bt: str = "",
                signs: str = "signed unsigned") -> str:
    """C[bx, by] = A[bx, :K] @ B[:K, by], zero-padded partial tiles.  ``ab`` (and ``bt``
    for B when it differs) names the operand type: tf32 operands are loaded as f32 and
    converted, i8 ones multiply with mmai (``signs``)."""
    bt = bt or ab

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
    stored = {"tf32": "f32"}
    batch = (1,) * (rank - 2)
    a_lines, a_pv, a_args = view("a", stored.get(ab, ab), (*batch, m, k))
    b_lines, b_pv, b_args = view("b", stored.get(bt, bt), (*batch, k, n))
    c_lines, c_pv, c_args = view("c", acc, (*batch, m, n))
    zeros = ", ".join(["%c0"] * (rank - 2))
    pre = zeros + ", " if zeros else ""
    t = lambda *s: "x".join(map(str, s))
    idx = "tile<i32>" + ", tile<i32>" * (rank - 1)
    ta, tb = f"tile<{t(*batch, m, k)}x{ab}>", f"tile<{t(*batch, k, n)}x{bt}>"
    tc = f"tile<{t(*batch, m, n)}x{acc}>"
    body = a_lines + b_lines + c_lines + [
        "%tok = make_token : token",
        "%c0 = constant <i32: 0> : tile<i32>",
        "%bx, %by, %bz = get_tile_block_id : tile<i32>",
        (f"%la, %t1 = load_view_tko weak %a_p[{pre}%bx, %c0] token = %tok : {a_pv}, {idx} -> "
         f"tile<{t(*batch, m, k)}x{stored.get(ab, ab)}>, token"),
        (f"%lb, %t2 = load_view_tko weak %b_p[{pre}%c0, %by] token = %tok : {b_pv}, {idx} -> "
         f"tile<{t(*batch, k, n)}x{stored.get(bt, bt)}>, token")]
    lhs, rhs = "%la", "%lb"
    if ab == "tf32":
        body += [f"%ta = ftof %la : tile<{t(*batch, m, k)}xf32> -> {ta}", f"%tb = ftof %lb : tile<{t(*batch, k, n)}xf32> -> {tb}"]
        lhs, rhs = "%ta", "%tb"
    if ab == "i8":
        body += [f"%z = constant <i32: 5> : {tc}", f"%r = mmai {lhs}, {rhs}, %z {signs} : {ta}, {tb}, {tc}"]
    else:
        body += [f"%z = constant <{acc}: 0.5> : {tc}", f"%r = mmaf {lhs}, {rhs}, %z : {ta}, {tb}, {tc}"]
    body += [f"%st = store_view_tko weak %r, %c_p[{pre}%bx, %by] token = %tok : {tc}, {c_pv}, {idx} -> token",
             "return"]
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k({a_args}, {b_args}, {c_args}) {{\n" + "".join(f"    {x}\n" for x in body) + "  }\n}\n")


def with_warps(text: str, warps: int, arch: str = "sm_90") -> str:
    """``text`` with the ``num_worker_warps_per_cta`` hint on its entry for ``arch``."""
    return text.replace(") {\n", f") optimization_hints=<{arch} = {{num_worker_warps_per_cta = {warps}}}> {{\n", 1)


def ptx_of(text: str, arch: str = "sm_80") -> str:
    return compile_module(parse_module(text, "k.mlir"), CompileOptions(gpu_name=arch), "ptx")


TENSOR_CORE_CASES = [
    # (gemm_kernel arguments, the mma.sync form, ldmatrix used for A / B)
    ({"m": 64, "n": 64, "k": 32, "ab": "f16"}, "m16n8k16.row.col.f32.f16.f16.f32", (True, True)),
    ({"m": 32, "n": 64, "k": 64, "ab": "bf16"}, "m16n8k16.row.col.f32.bf16.bf16.f32", (True, True)),
    ({"m": 64, "n": 32, "k": 16, "ab": "f16", "acc": "f16"}, "m16n8k16.row.col.f32.f16.f16.f32", (True, True)),
    ({"m": 16, "n": 16, "k": 16, "ab": "f16"}, "m16n8k16.row.col.f32.f16.f16.f32", (True, True)),  # warp copies
    ({"m": 128, "n": 16, "k": 32, "ab": "bf16"}, "m16n8k16.row.col.f32.bf16.bf16.f32", (True, True)),
    ({"m": 32, "n": 32, "k": 16, "ab": "tf32"}, "m16n8k8.row.col.f32.tf32.tf32.f32", (False, False)),
    ({"m": 32, "n": 64, "k": 64, "ab": "i8", "acc": "i32"}, "m16n8k32.row.col.s32.s8.u8.s32", (True, False)),
    ({"m": 64, "n": 32, "k": 32, "ab": "i8", "acc": "i32", "signs": "unsigned signed"},
     "m16n8k32.row.col.s32.u8.s8.s32", (True, False)),
    ({"m": 64, "n": 64, "k": 64, "ab": "f8E4M3FN", "bt": "f8E5M2"}, "m16n8k32.row.col.f32.e4m3.e5m2.f32",
     (True, False)),
]
CASE_IDS = [f"{c['m']}x{c['n']}x{c['k']}-{c['ab']}{c.get('bt', '')}-{c.get('acc', 'f32')}{c.get('signs', '')}"
            .replace(" ", "_") for c, _, _ in TENSOR_CORE_CASES]


def arch_for(case: dict) -> str:
    return "sm_120" if case["ab"].startswith("f8") else "sm_80"     # 8-bit float mma.sync: sm_89+, not wgmma


WGMMA_CASES = [
    # (gemm_kernel arguments, warps hint or None, the wgmma N)
    ({"m": 64, "n": 64, "k": 32, "ab": "f16"}, None, 64),
    ({"m": 128, "n": 128, "k": 64, "ab": "f16"}, None, 128),            # two 64-row blocks a warpgroup
    ({"m": 64, "n": 128, "k": 128, "ab": "f16"}, None, 128),            # a K loop (64 a commit group)
    ({"m": 128, "n": 16, "k": 256, "ab": "bf16"}, None, 16),
    ({"m": 64, "n": 256, "k": 16, "ab": "bf16"}, None, 256),
    ({"m": 64, "n": 8, "k": 16, "ab": "f16"}, None, 8),
    ({"m": 64, "n": 32, "k": 64, "ab": "f16", "acc": "f16"}, None, 32),  # f16 sums round once
    ({"m": 256, "n": 32, "k": 32, "ab": "f16"}, 8, 32),                 # a warpgroup a 64-row block, two each
    ({"m": 64, "n": 64, "k": 32, "ab": "bf16"}, 8, 32),                 # warpgroups interleave 8-column blocks
    ({"m": 64, "n": 32, "k": 16, "ab": "f16"}, 12, 16),                 # 4 extra warps: a copy warpgroup
    ({"m": 64, "n": 32, "k": 16, "ab": "tf32"}, None, 32),              # k8, 4-byte core matrix rows
    ({"m": 128, "n": 64, "k": 64, "ab": "tf32"}, None, 64),
    ({"m": 64, "n": 64, "k": 64, "ab": "f8E4M3FN", "bt": "f8E5M2"}, None, 64),   # k32
    ({"m": 64, "n": 32, "k": 128, "ab": "f8E5M2", "acc": "f16"}, None, 32),
    ({"m": 64, "n": 64, "k": 64, "ab": "i8", "acc": "i32"}, None, 64),
    ({"m": 128, "n": 32, "k": 32, "ab": "i8", "acc": "i32", "signs": "unsigned signed"}, None, 32),
]
#: the wgmma type suffix (``.dtype.atype.btype``) and K of each element type
WGMMA_TYPES = {"f16": ("f32.f16.f16", 16), "bf16": ("f32.bf16.bf16", 16), "tf32": ("f32.tf32.tf32", 8),
               "f8E4M3FN": ("f32.e4m3.e5m2", 32), "f8E5M2": ("f32.e5m2.e5m2", 32)}
WGMMA_IDS = [f"{c['m']}x{c['n']}x{c['k']}-{c['ab']}{c.get('bt', '')}-{c.get('acc', 'f32')}{c.get('signs', '')}-w{w}"
             .replace(" ", "_") for c, w, _ in WGMMA_CASES]


def wgmma_text(case: dict, warps) -> str:
    text = gemm_kernel(**case)
    return with_warps(text, warps) if warps else text


@pytest.mark.parametrize("case, warps, n", WGMMA_CASES, ids=WGMMA_IDS)
def test_sm90_gemm_uses_wgmma(case, warps, n):
    """fence, one mma_async per k16 step and 64-row block, commit, wait 0 (per 4 k16 steps
    in a K loop, which LLVM may unroll); A and B from shared memory through descriptors:
    no mma.sync, no ldmatrix."""
    ptx = ptx_of(wgmma_text(case, warps), "sm_90")
    if case["ab"] == "i8":
        signs = ["s8" if s == "signed" else "u8" for s in case.get("signs", "signed unsigned").split()]
        types, k = f"s32.{signs[0]}.{signs[1]}", 32
    else:
        types, k = WGMMA_TYPES[case["ab"]]
    blocks = case["m"] // 64 // max(1, (warps or 4) // 4) or 1
    issued = ptx.count(f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{types} ")
    assert issued in (blocks * min(case["k"] // k, 4), blocks * case["k"] // k)
    for line in ("wgmma.fence.sync.aligned;", "wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;",
                 "fence.proxy.async.shared::cta;", ".target sm_90a"):
        assert line in ptx
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx and "fma.rn.f32" not in ptx


@pytest.mark.parametrize("case, warps, n", WGMMA_CASES, ids=WGMMA_IDS)
def test_sm90_wgmma_gemm_matches_interpreter(case, warps, n):
    """Partial tiles (extent 100) are zero-padded; the emulator decodes the descriptors,
    runs each warpgroup's wgmma and traps on accumulators read before the wait."""
    module = parse_module(wgmma_text(case, warps), "k.mlir")
    reports = diffcheck.check_module(module, "sm_90", grid=(2, 2, 1), extent=100)
    assert [r.problem for r in reports] == [None]


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (nvidia-cuda-nvcc)")
@pytest.mark.parametrize("case, warps, n", WGMMA_CASES[::2], ids=WGMMA_IDS[::2])
def test_sm90_wgmma_assembles(case, warps, n):
    result = invoke_ptxas(ptx_of(wgmma_text(case, warps), "sm_90"), "sm_90")
    assert result.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("m, n, k", [(64, 64, 32), (128, 128, 64)])
def test_wgmma_staging_stores_spread_over_the_banks(m, n, k):
    """The staging TileAS picks for the operands (mma_forms.wgmma_staging) keeps the
    stores within 3x the ideal wavefronts (without it B's lanes along N meet one bank:
    12x on 128x128x64); the emulator counts the wavefronts."""
    module = parse_module(gemm_kernel(m, n, k, "f16"), "k.mlir")
    fn = module.functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), 128)
    ptx = diffcheck.compile_ptx(module, "sm_90")
    assert "wgmma.mma_async" in ptx
    stores = launch(ptx, fn.name, (1, 1, 1), args, traffic=True).check().traffic.shared_stores
    assert stores.requests > 0 and stores.wavefronts <= 3 * stores.ideal_wavefronts


@pytest.mark.parametrize("case, warps", [
    ({"m": 32, "n": 64, "k": 32, "ab": "f16"}, None),      # M below a warpgroup's 64 rows
    ({"m": 64, "n": 64, "k": 32, "ab": "f16"}, 2),         # fewer warps than a warpgroup
    ({"m": 64, "n": 64, "k": 32, "ab": "f16"}, 6),         # a partial warpgroup of extra warps
    ({"m": 32, "n": 32, "k": 64, "ab": "i8", "acc": "i32"}, None),
])
def test_other_sm90_tensor_core_gemms_keep_mma_sync(case, warps):
    ptx = ptx_of(wgmma_text(case, warps), "sm_90")
    assert "wgmma" not in ptx and "mma.sync.aligned.m16n8k" in ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_100", "sm_120"])
def test_wgmma_only_on_sm90(arch):
    ptx = ptx_of(gemm_kernel(128, 128, 64, "f16"), arch)
    assert "wgmma" not in ptx


@pytest.mark.parametrize("case, form, ldmatrix", TENSOR_CORE_CASES, ids=CASE_IDS)
def test_tensor_core_gemm_uses_mma_sync(case, form, ldmatrix):
    ptx = ptx_of(gemm_kernel(**case), arch_for(case))
    assert f"mma.sync.aligned.{form} " in ptx
    assert ("ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx) == ldmatrix[0]
    assert ("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16" in ptx) == ldmatrix[1]
    assert "fma.rn.f32" not in ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100", "sm_120"])
@pytest.mark.parametrize("case, form, ldmatrix", TENSOR_CORE_CASES, ids=CASE_IDS)
def test_tensor_core_gemm_matches_interpreter(case, form, ldmatrix, arch):
    if arch == "sm_80" and case["ab"].startswith("f8"):
        pytest.skip("8-bit float mma needs sm_89")
    module = parse_module(gemm_kernel(**case), "k.mlir")
    reports = diffcheck.check_module(module, arch, grid=(2, 2, 1), extent=100)
    assert [r.problem for r in reports] == [None]


def test_8bit_floats_stay_off_tensor_cores_below_sm_89():
    """The target check refuses 8-bit floats below sm_89 (as NVIDIA's tileiras does, exit
    code 5), and the tensor-core choice alone would not put them on tensor cores there."""
    module = parse_module(gemm_kernel(64, 64, 64, "f8E4M3FN"), "k.mlir")
    with pytest.raises(TargetError, match="Incompatibility with architecture 'sm_80'"):
        compile_module(module, CompileOptions(gpu_name="sm_80"), "ptx")
    aa = run_stages(module, CompileOptions(gpu_name="sm_89"), "tileaa").aa["k"]
    mma = [op for op in aa.live_ops() if is_contraction(op)]
    assert [tensor_core_mma(op, 80) for op in mma] == [None]
    assert tensor_core_mma(mma[0], 89).opcode == "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"


@pytest.mark.parametrize("case", [
    {"m": 64, "n": 64, "k": 32, "ab": "f32", "acc": "f32"},          # f32 operands: CUDA cores
    {"m": 64, "n": 64, "k": 8, "ab": "f16", "acc": "f32"},           # K below one m16n8k16 step
])
def test_other_matrix_multiplies_stay_on_cuda_cores(case):
    ptx = ptx_of(gemm_kernel(**case))
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    assert "fma.rn.f32" in ptx


def test_cuda_core_fallback_still_matches_interpreter():
    module = parse_module(gemm_kernel(64, 64, 8, "f16", "f32"), "k.mlir")
    assert [r.problem for r in diffcheck.check_module(module, "sm_80", grid=(2, 2, 1), extent=100)] == [None]


@pytest.mark.parametrize("case, form, ldmatrix", TENSOR_CORE_CASES, ids=CASE_IDS)
def test_fragment_loads_have_no_bank_conflicts(case, form, ldmatrix):
    """The staged rows are padded (mma_forms.mma_staging_pitches) so that the fragment loads
    (ldmatrix phases, tf32 words, 8-bit B bytes) meet no shared-memory bank twice; the
    emulator counts the wavefronts each warp's request takes."""
    module = parse_module(gemm_kernel(**case), "k.mlir")
    fn = module.functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), 128)
    ptx = diffcheck.compile_ptx(module, arch_for(case))
    shared = launch(ptx, fn.name, (1, 1, 1), args, traffic=True).check().traffic.shared_loads
    assert shared.requests > 0 and shared.conflicts == 0
