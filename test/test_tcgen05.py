"""Matrix multiplies on ``tcgen05.mma`` (sm_100): ``lower/tensor_memory.py``,
``codegen/emit_tcgen05.py``.

Aligned GEMM K loops become TMA rings whose accumulator stays in tensor memory; a multiply
outside loops stages its operands and multiplies once.  Every kernel runs in the emulator
(tensor memory in flight until the commit's mbarrier phase, ``.aligned`` checks, CTAs in
bursts) and must agree with the interpreter; planted faults must be caught."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tileiras.emulate.ops.tcgen05 import InstructionDescriptor
from tileiras.layout.tensor_core import tcgen05_accumulator, tcgen05_ld_layout, tmem_accumulator
from tileiras.lower.mma_forms import TensorCoreMma


@pytest.mark.parametrize("m, n", [(128, 32), (128, 256), (64, 64), (64, 16)])
def test_accumulator_layout_is_what_tcgen05_ld_reads(m, n):
    layout = tcgen05_accumulator(m, n)
    if m == 128:
        assert layout == tcgen05_ld_layout("32x32b", n, 0).compose(tmem_accumulator(128, n))
    else:
        assert layout == tcgen05_ld_layout("16x32bx2", n // 2, n // 2).compose(tmem_accumulator(64, n))


@pytest.mark.parametrize("m, n", [(128, 64), (256, 32), (64, 64)])
def test_eight_warps_split_the_columns(m, n):
    layout = tcgen05_accumulator(m, n, 8)
    assert layout.is_bijective()
    four = tcgen05_accumulator(m, n // 2, 4)
    for reg in range(four.size("reg")):
        for lane in (0, 5, 17, 31):
            for warp in range(4):
                row, col = four.apply(reg=reg, lane=lane, warp=warp)
                assert layout.apply(reg=reg, lane=lane, warp=warp) == (row, col)
                assert layout.apply(reg=reg, lane=lane, warp=warp + 4) == (row, col + n // 2)


@pytest.mark.parametrize("types, kind, a, b", [("f32.f16.f16.f32", "f16", "f16", "f16"),
                                               ("f32.bf16.bf16.f32", "f16", "bf16", "bf16"),
                                               ("f32.tf32.tf32.f32", "tf32", "tf32", "tf32"),
                                               ("f32.e4m3.e5m2.f32", "f8f6f4", "e4m3", "e5m2")])
def test_instruction_descriptor_decodes_as_the_emulator_reads_it(types, kind, a, b):
    form = TensorCoreMma(types, 16, 16, False, tcgen05=True)
    assert form.tcgen05_kind == kind
    word = form.instruction_descriptor(128, 96, False, True)
    desc = InstructionDescriptor(word, kind)
    assert (desc.m, desc.n, desc.atype, desc.btype, desc.dtype) == (128, 96, a, b, "f32")
    assert (desc.a_mn_major, desc.b_mn_major, desc.negate_a, desc.negate_b) == (False, True, False, False)


# -- compiled kernels ---------------------------------------------------------------------------
cuda_tile = pytest.importorskip("cuda.tile")

from differential import (ALIGNED_EXTENT, EXTENT, Case, cached_export, compare, make_inputs,  # noqa: E402
                          run_interpreter)
from kernels import ALL_CASES  # noqa: E402
from kernels.clusters import CLUSTER_GEMM  # noqa: E402

from tileiras import diffcheck  # noqa: E402
from tileiras.diffcheck import compile_with_host  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

CASES = {c.name: c for c in ALL_CASES}
CASES[CLUSTER_GEMM.name] = CLUSTER_GEMM
RING_KERNELS = ["gemm", "gemm_epilogue", "fp8_gemm", "tf32_gemm", "gemm_at", "gemm_bt", "fp8_gemm_bt",
                "gemm_cluster", "persistent_gemm_f16", "persistent_gemm_bf16"]

#: those whose aligned K loop runs on tcgen05 (the others' reasons: ``tensor_memory``; the
#: multiply's shape, a K loop that does more than load and multiply)
TCGEN05_RINGS = {"gemm", "fp8_gemm", "gemm_at", "gemm_bt", "fp8_gemm_bt", "persistent_gemm_f16", "persistent_gemm_bf16"}


@pytest.fixture(scope="session")
def cache() -> dict:
    return {}


def _case(cache, name: str, aligned: bool, seed: int = 3) -> Case:
    case = CASES[name]
    data = cached_export(cache, case, "sm_100", aligned)
    arrays = make_inputs(case.params[0], np.random.default_rng(seed), ALIGNED_EXTENT if aligned else EXTENT)
    return Case(data, read_bytecode(data).functions[0].name, arrays, (2, 2, 1))


def _run(ptx: str, host, c: Case, burst: bool = True):
    return diffcheck.run_ptx(ptx, c.entry, c.grid, c.args(c.arrays), host_object=host, interleave=2 if burst else None,
                             burst=burst)


@pytest.mark.parametrize("aligned", [False, True], ids=["unaligned", "aligned"])
@pytest.mark.parametrize("name", RING_KERNELS)
def test_tcgen05_kernels_match_the_interpreter(name, aligned, cache):
    c = _case(cache, name, aligned)
    ptx, host = compile_with_host(read_bytecode(c.bytecode), "sm_100")
    if aligned and name in TCGEN05_RINGS:       # the K loop's multiply on tcgen05, fed by a TMA ring
        assert "tcgen05.mma.cta_group::1.kind::" in ptx and "cp.async.bulk.tensor" in ptx
        assert ptx.count("tcgen05.alloc") == 1 and ptx.count("tcgen05.dealloc") == 1
    problem = compare(run_interpreter(c), _run(ptx, host, c))
    assert problem is None, problem


def test_ring_keeps_the_accumulator_in_tensor_memory(cache):
    """The aligned f16 GEMM's K loop issues MMAs only (no mma.sync, no tcgen05.ld inside),
    committing each stage's release; the accumulator is read once, after the loop."""
    c = _case(cache, "gemm", True)
    ptx = compile_with_host(read_bytecode(c.bytecode), "sm_100")[0]
    f16 = [line for line in ptx.splitlines() if "mma.sync" in line and ".f16.f16" in line]
    assert f16 == []
    assert ptx.count("tcgen05.ld.sync.aligned") == 1
    assert "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64" in ptx


def test_unaligned_k_loops_and_the_knob_keep_mma_sync(cache, monkeypatch):
    """Where TMA cannot copy the loop's tiles the multiply stays on mma.sync (its cp.async
    ring); TILEIRAS_TCGEN05=0 turns tcgen05 off everywhere."""
    unaligned = compile_with_host(read_bytecode(_case(cache, "gemm", False).bytecode), "sm_100")[0]
    assert "tcgen05" not in unaligned and "mma.sync" in unaligned
    monkeypatch.setenv("TILEIRAS_TCGEN05", "0")
    off = compile_with_host(read_bytecode(_case(cache, "gemm", True).bytecode), "sm_100")[0]
    assert "tcgen05" not in off and "mma.sync" in off


def test_reading_the_accumulator_before_the_commit_is_caught(cache):
    """Without the commit that tracks the last MMAs the warps' wait would hang or read
    unfinished cells: the emulator must not let it pass; with it, bursts agree."""
    c = _case(cache, "gemm", True)
    ptx, host = compile_with_host(read_bytecode(c.bytecode), "sm_100")
    commits = [m.start() for m in re.finditer(r"tcgen05\.commit[^\n]*\n", ptx)]
    last = commits[-1]
    broken = ptx[:last] + ptx[ptx.index("\n", last) + 1:]
    with pytest.raises(AssertionError, match="faulted in the emulator|deadlock|hang"):
        _run(broken, host, c)


def test_missing_stage_waits_before_inval_are_caught(cache, monkeypatch):
    """The MMAs' commits release the stages asynchronously: invalidating the mbarriers
    without waiting for the last releases is an error the emulator reports."""
    from tileiras.codegen import emit_ring

    c = _case(cache, "gemm", True)
    monkeypatch.setattr(emit_ring, "_released", lambda em, plan: None)
    ptx, host = compile_with_host(read_bytecode(c.bytecode), "sm_100")
    with pytest.raises(AssertionError, match="mbarrier.inval on an mbarrier still in use"):
        _run(ptx, host, c, burst=False)


def test_missing_tensor_memory_fence_wait_is_caught(cache, monkeypatch):
    """Without the wait for the MMAs' mbarrier phase the warps read cells the MMAs still
    write: an error, not stale numbers."""
    from tileiras.codegen import emit_tcgen05

    c = _case(cache, "gemm", True)
    monkeypatch.setattr(emit_tcgen05, "wait_phase", lambda em, barrier, parity: None)
    ptx, host = compile_with_host(read_bytecode(c.bytecode), "sm_100")
    with pytest.raises(AssertionError, match="faulted in the emulator"):
        _run(ptx, host, c, burst=False)


@pytest.mark.parametrize("case, tcgen05", [
    ({"m": 64, "n": 128, "k": 64, "ab": "i8", "acc": "i32"}, False),     # no integer tcgen05 form here
    ({"m": 64, "n": 256, "k": 64, "ab": "f8E5M2"}, True),      # 8-bit B K x N: MN-major, as NVIDIA's fp8 GEMMs
    ({"m": 64, "n": 128, "k": 128}, True),
    ({"m": 128, "n": 64, "k": 64, "nt": True}, True),          # B N x K, permuted in the loop
])
def test_k_loops_tcgen05_cannot_read_keep_the_mma_sync_ring(case, tcgen05):
    """The tcgen05 decision foresees the ring: a loop whose operands no tcgen05 form reads
    keeps the mma.sync ring (not an unpipelined tcgen05 multiply); the others take a
    tcgen05 ring, and agree with the interpreter."""
    from kernels.pipelined import gemm_loop
    from tileiras.lower.tma_ring import RingPlan
    from tileiras.pipeline import CompileOptions, run_stages
    from tileiras.text.parser import parse_module

    text = gemm_loop(**case)
    module = parse_module(text, "k.mlir")
    tas = run_stages(module, CompileOptions(gpu_name="sm_100"), "tileas", only_needed=True).tas[module.functions[0].name]
    (plan,) = tas.pipelines.values()
    assert isinstance(plan, RingPlan) and plan.tcgen05 == tcgen05 and plan.sync != tcgen05
    problems = diffcheck.check_module(parse_module(text, "k.mlir"), "sm_100", grid=(2, 2, 1))
    assert [r.problem for r in problems] == [None]


def test_persistent_ring_reconverges_the_warp_before_tensor_memory(cache):
    """A persistent warp-specialized GEMM: thread 0 ends each tile in its TMA store's branch
    while the rest of warp 0 starts the next tile; ``bar.warp.sync`` before the ``.aligned``
    ``tcgen05.st``/``ld`` brings the warp together (the emulator waits there for every
    live lane, as the GPU does).  Taken out, the emulator traps the store run by part of
    the warp; in, the kernel agrees with the interpreter, its CTAs in bursts."""
    c = _case(cache, "persistent_gemm_f16", True)
    ptx, host = compile_with_host(read_bytecode(c.bytecode), "sm_100")
    assert "setmaxnreg" in ptx and ptx.count("tcgen05.mma.cta_group::1") > 0
    broken = ptx.replace("bar.warp.sync -1;", "")
    assert broken != ptx
    with pytest.raises(AssertionError, match="not all 32"):
        _run(broken, host, c, burst=False)
    assert compare(run_interpreter(c), _run(ptx, host, c)) is None


def test_a_warp_outside_its_tensor_memory_quarter_is_caught(cache):
    """Warp w of a warpgroup reaches tensor-memory lanes 32 (w % 4) on only: our addresses
    carry that lane (``shl 21``).  With every warp's address at lane 0 the emulator traps
    the first ``tcgen05.st``/``ld`` of warps 1-3."""
    c = _case(cache, "gemm", True)
    ptx, host = compile_with_host(read_bytecode(c.bytecode), "sm_100")
    broken, n = re.subn(r"(shl\.b32\s+%r\d+, %r\d+, )21;", r"\g<1>0;", ptx)
    assert n == 1
    with pytest.raises(AssertionError, match="outside its quarter"):
        _run(broken, host, c, burst=False)


@pytest.mark.parametrize("arch, instruction, shape", [
    ("sm_100", "Tensor-core SM100", "[64, 32, 16]"), ("sm_90", "Tensor-core SM90", "[64, 32, 16]")])
def test_remark_names_the_instruction_of_the_split_block(arch, instruction, shape, cache, tmp_path, capsys):
    """NVIDIA's remark for a 64x64 GEMM in a cluster of two: each CTA's instruction is M64
    N32 (``NumCTAs = 1`` on sm_100: cta_group::1).  The remarks run the passes on the
    program as read: on the compiled module (already split) they split it again (N16)."""
    from tileiras import driver

    path = tmp_path / "k.tileir"
    path.write_bytes(cached_export(cache, CLUSTER_GEMM, arch, True))
    assert driver.main([str(path), f"--gpu-name={arch}", "-o", str(tmp_path / "k.cubin"),
                        "--remarks=tensorcore"]) == 0
    out = capsys.readouterr().out
    assert f"Instruction = {instruction}" in out and f"Shape = {shape}" in out
    assert ("NumCTAs = 1" in out) == (arch == "sm_100")


def test_only_the_mma_warp_waits_for_the_stages(cache):
    """In a tcgen05 ring only warp 0 waits on each stage's "full" mbarrier (its thread 0
    issues the MMAs), as NVIDIA's MMA warp does: the other warps neither spin on the
    stages nor run the loop's multiply.  So the CTA's mbarrier waits are a handful per K
    iteration, not one per thread (256 threads here)."""
    from tileiras.emulate import launch

    c = _case(cache, "gemm", True)
    ptx, host = compile_with_host(read_bytecode(c.bytecode), "sm_100")
    result = launch(ptx, c.entry, c.grid, c.args(c.arrays), host_object=host)
    counts = result.instruction_counts
    waits = sum(n for name, n in counts.items() if name.startswith("mbarrier.try_wait"))
    mmas = sum(n for name, n in counts.items() if name.startswith("tcgen05.mma"))
    ctas = c.grid[0] * c.grid[1] * c.grid[2]
    assert mmas > 0
    # per CTA: warp 0's waits on the stages and the refills' (at least one try each) plus
    # every thread's single wait for the accumulator, far below every thread waiting per trip
    assert waits < ctas * 256 + 64 * mmas       # every thread each trip: > ctas * 256 + 128 * mmas


@pytest.mark.parametrize("case", [
    {"m": 128, "n": 256, "k": 64},                                  # 256 tensor-memory columns
    {"m": 256, "n": 64, "k": 64},                                   # two 128-row blocks
    {"m": 64, "n": 256, "k": 64},                                   # M = 64 (16x32bx2), widest N
    {"m": 128, "n": 16, "k": 64},                                   # 8 columns a warpgroup
    {"m": 64, "n": 64, "k": 64, "acol": True},                      # A M-major (MN-major descriptor)
    {"m": 128, "n": 64, "k": 128, "ab": "f8E4M3FN", "bcol": True},  # kind::f8f6f4, B K-major
], ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_tcgen05_ring_shapes_match_the_interpreter(case):
    """The accumulator layouts (blocks of rows, warpgroups over the columns, M = 64's
    split lanes), the operands' major-ness and the kinds, each a tcgen05 ring, against
    the interpreter with K tails, CTAs in bursts."""
    from kernels.pipelined import gemm_loop
    from tileiras.lower.tma_ring import RingPlan
    from tileiras.pipeline import CompileOptions, run_stages
    from tileiras.text.parser import parse_module

    text = gemm_loop(**case)
    module = parse_module(text, "k.mlir")
    tas = run_stages(module, CompileOptions(gpu_name="sm_100"), "tileas", only_needed=True).tas[module.functions[0].name]
    (plan,) = tas.pipelines.values()
    assert isinstance(plan, RingPlan) and plan.tcgen05
    reports = diffcheck.check_module(parse_module(text, "k.mlir"), "sm_100", grid=(2, 2, 1), interleave=1, burst=True)
    assert [r.problem for r in reports] == [None]


def test_tensor_memory_decisions_are_printed_and_parsed(cache):
    """``--emit=tileas`` shows the allocation and its shared slot in the header and each
    tcgen05 multiply's first column; the parser reads them back."""
    from tileiras.lower.tileas_format import format_tileas
    from tileiras.lower.tileas_parse import parse_tileas
    from tileiras.pipeline import CompileOptions, run_stages

    c = run_stages(read_bytecode(_case(cache, "gemm", True).bytecode), CompileOptions(gpu_name="sm_100"), "tileas")
    fn = c.module.functions[0]
    tas = c.tas[fn.name]
    text = format_tileas(tas)
    assert f" tmem={tas.tmem_alloc}@{tas.tmem_slot} " in text.splitlines()[0] and tas.tmem_alloc == 64
    assert "tcgen05 = true" in text and "tmem = 0" in text
    back = parse_tileas(text, c.aa[fn.name])
    assert (back.tmem_alloc, back.tmem_slot) == (tas.tmem_alloc, tas.tmem_slot)
    assert list(back.tmem_columns.values()) == [0] and format_tileas(back) == text
