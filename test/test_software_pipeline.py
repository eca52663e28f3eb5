"""Software-pipelined tensor-core K loops (lower/software_pipeline.py, codegen/emit_async.py).

A GEMM K loop (``kernels.pipelined.gemm_loop``) on sm_80 copies its A and B tiles with
``cp.async`` into a ring of shared-memory stages, S-1 iterations ahead of the multiply.
Every kernel is checked against the interpreter in the emulator, which lands a copy's
bytes only at the ``cp.async.wait_group`` that covers it (reading them earlier traps) and
runs its shared-memory race detector; the PTX's structure is asserted too."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kernels.pipelined import gemm_loop
from tileiras import diffcheck
from tileiras.driver import main as driver_main
from tileiras.emulate import launch
from tileiras.emulate.launch import EmulationError
from tileiras.layout.shared import bank_wavefronts
from tileiras.lower.software_pipeline import PipelinePlan
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.sched.latency import AMPERE
from tileiras.sched.pipeline import COPY_A, MMA, pipeline_schedule
from tileiras.text.parser import parse_module

from _build import bytecode_file


def plan_of(text: str, arch: int = 80):
    module = parse_module(text, "k.mlir")
    tas = run_stages(module, CompileOptions(gpu_name=f"sm_{arch}"), "tileas", only_needed=True).tas
    (decision,) = tas[module.functions[0].name].pipelines.values()
    return decision


def ptx_of(text: str, arch: str = "sm_80") -> str:
    return diffcheck.compile_ptx(parse_module(text, "k.mlir"), arch)


def agrees(text: str, extent: int, arch: str = "sm_80") -> list:
    module = parse_module(text, "k.mlir")
    return [r.problem for r in diffcheck.check_module(module, arch, grid=(2, 2, 1), extent=extent)]


def count(ptx: str, pattern: str) -> int:
    return len(re.findall(pattern, ptx))


# -- the decision -------------------------------------------------------------------------------
def test_an_aligned_f16_k_loop_is_pipelined_with_16_byte_copies():
    plan = plan_of(gemm_loop(64, 64, 32))
    assert isinstance(plan, PipelinePlan)
    assert plan.copy_bytes == (16, 16)
    assert plan.source == "modulo schedule" and plan.stages >= 2
    # rows unpadded (XOR-swizzled): A 64 x 32, B 32 x 64 halves per stage
    assert (plan.a_pitch, plan.b_pitch, plan.stage_bytes) == (32, 64, 2 * (64 * 32 + 32 * 64))
    a, b = plan.swizzles
    assert (a.per_phase, a.max_phase, b.per_phase, b.max_phase) == (2, 4, 1, 8)


@pytest.mark.parametrize("m, n, k", [(64, 64, 32), (128, 128, 32), (16, 16, 16), (32, 64, 64), (64, 32, 16)])
def test_swizzled_stages_take_their_copies_without_bank_conflicts(m, n, k):
    """Each 16-byte copy request (8 lanes a phase) of A's and B's copy layouts into the
    swizzled stage takes the one wavefront a phase needs (``bank_wavefronts``)."""
    plan = plan_of(gemm_loop(m, n, k))
    for layout, swizzle in zip(plan.copy_layouts, plan.swizzles):
        waves = bank_wavefronts(layout, swizzle.layout(), 2, 8)
        phases = -(-layout.size("lane") // 8)
        assert set(waves) == {phases}, (layout, waves)


@pytest.mark.parametrize("m, n, k, nt", [(64, 64, 32, False), (128, 128, 32, False), (16, 16, 16, False),
                                         (32, 64, 64, False), (64, 64, 32, True), (32, 128, 64, True)])
def test_swizzled_fragment_loads_have_no_bank_conflicts(m, n, k, nt):
    """The emulator counts the wavefronts of every ldmatrix from the swizzled stages."""
    module = parse_module(gemm_loop(m, n, k, nt=nt), "k.mlir")
    fn = module.functions[0]
    ptx = diffcheck.compile_ptx(module, "sm_80")
    assert "cp.async" in ptx
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), 128)
    shared = launch(ptx, fn.name, (1, 1, 1), args, traffic=True).check().traffic.shared_loads
    assert shared.requests > 0 and shared.conflicts == 0


def test_the_stage_count_is_the_modulo_schedule_of_copies_wait_and_multiply():
    """A copy lands a DRAM latency (450 cycles on sm_80) after its issue; the loop starts an
    iteration every II cycles (the multiply's tensor-pipe time or its accumulator
    recurrence), so about 500 / II iterations are in flight, one stage each."""
    small = pipeline_schedule((2, 2), 16, AMPERE)          # 64x64x32 f16, 4 warps
    assert small.ii == 32 + 15 * 8 and small.num_stages == 4
    assert small.cycle_of[COPY_A] == 0 and small.cycle_of[MMA] >= 450
    # 128x128x32: a multiply longer than the copy: one stage would do (the plan takes 2)
    assert pipeline_schedule((4, 4), 64, AMPERE).num_stages == 1
    assert pipeline_schedule((1, 1), 1, AMPERE).num_stages == 16     # 16x16x16: many tiny iterations


def test_joined_load_tokens_do_not_stop_pipelining():
    assert isinstance(plan_of(gemm_loop(64, 64, 32, join=True)), PipelinePlan)


def test_a_transposed_b_is_staged_as_loaded_and_read_without_trans():
    plan = plan_of(gemm_loop(64, 64, 32, nt=True))
    assert plan.b_transposed and (plan.a_pitch, plan.b_pitch) == (32, 32)      # B: 64 rows (N) of 32 (K)
    ptx = ptx_of(gemm_loop(64, 64, 32, nt=True))
    # B's fragments of two 8-column blocks a time: ldmatrix.x4 as A's, without .trans
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx and ".x2" not in ptx and ".trans" not in ptx
    assert "st.shared" not in ptx[:ptx.rindex("mma.sync")]   # only the epilogue's exchange stores


def test_the_num_stages_hint_sets_the_stage_count():
    plan = plan_of(gemm_loop(64, 64, 32, hints="sm_80 = {num_stages = 3}"))
    assert (plan.stages, plan.source) == (3, "num_stages hint")


def test_a_known_trip_count_bounds_the_stages():
    assert plan_of(gemm_loop(64, 64, 32, trips=1, hints="sm_80 = {num_stages = 4}")).stages == 2
    assert plan_of(gemm_loop(64, 64, 32, trips=3, hints="sm_80 = {num_stages = 4}")).stages == 3


def test_the_shared_memory_budget_bounds_the_stages():
    plan = plan_of(gemm_loop(128, 128, 64, hints="sm_80 = {num_stages = 40}"))
    assert plan.stages * plan.stage_bytes <= 166_912 < (plan.stages + 1) * plan.stage_bytes


def test_8_byte_aligned_tiles_are_copied_with_cp_async_ca():
    """Pointers, shapes and strides known multiples of 8 (bytes for the pointers): 8-byte copies."""
    text = gemm_loop(64, 64, 32, align=8)
    assert plan_of(text).copy_bytes == (8, 8)
    ptx = ptx_of(text)
    assert count(ptx, r"cp\.async\.ca\.shared\.global \[[^]]+\], \[[^]]+\], 8, ") > 0 and "cp.async.cg" not in ptx


def test_8bit_b_rows_are_copied_8_bytes_at_a_time():
    plan = plan_of(gemm_loop(32, 64, 64, ab="i8", acc="i32"))
    assert plan.copy_bytes == (16, 8)       # B's rows are padded by 8 bytes (mma_staging_pitches)
    assert plan.b_pitch == 64 + 8


@pytest.mark.parametrize("text, reason", [
    (gemm_loop(64, 64, 32, align=0), "narrower than 4 bytes"),
    # tf32: the f32 tiles are rounded (ftof) in the loop, which a copy cannot do
    (gemm_loop(32, 32, 16, ab="tf32"), "operands are not tiles the loop loads"),
])
def test_loops_it_cannot_pipeline_keep_todays_code(text, reason):
    decision = plan_of(text)
    assert isinstance(decision, str) and reason in decision
    ptx = ptx_of(text)
    assert "cp.async" not in ptx and "st.shared" in ptx and "mma.sync" in ptx
    assert agrees(text, 100) == [None]


def test_arithmetic_on_the_accumulator_beside_the_multiply_keeps_the_ring():
    """Pure ops that need no shared memory may stand beside the loads and the multiply
    (``k_loop_body.extra_reason``): the ring's waits and barriers do not concern them."""
    text = gemm_loop(64, 64, 32).replace("continue %r", "%r2 = addf %r, %r : tile<64x64xf32>\n    continue %r2")
    assert isinstance(plan_of(text), PipelinePlan)
    assert "cp.async" in ptx_of(text)
    assert agrees(text, 100) == [None]


# -- the code -----------------------------------------------------------------------------------
def test_pipelined_ptx_structure():
    """Prologue: S-1 groups; steady state: wait_group S-2, the copies of one stage (64x32
    and 32x64 halves: 2 + 2 16-byte copies a thread), commit; drain: wait_group 0.  No
    register is stored to shared memory in the loop (only the epilogue's exchange does,
    for its 16-byte global stores)."""
    text = gemm_loop(64, 64, 32, hints="sm_80 = {num_stages = 3}")
    ptx = ptx_of(text)
    assert count(ptx, r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16, %r\d+;") == 3 * 4
    assert count(ptx, r"cp\.async\.commit_group;") == 3
    assert count(ptx, r"cp\.async\.wait_group 1;") == 1
    assert count(ptx, r"cp\.async\.wait_group 0;") == 1
    assert "st.shared" not in ptx[:ptx.rindex("mma.sync")]
    assert re.findall(r"st\.global(\.v\d)?", ptx) and set(re.findall(r"st\.global(\.v\d)?", ptx)) == {".v4"}
    assert count(ptx, r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16") > 0
    assert count(ptx, r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16") > 0 and ".x2" not in ptx
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx


CASES = [
    # (gemm_loop arguments, extents: the dynamic K tile counts they give)
    ({"m": 64, "n": 64, "k": 32}, (16, 48, 112, 208)),               # trips 1, 2, 4 (S), 7; K tails
    ({"m": 64, "n": 64, "k": 32, "hints": "sm_80 = {num_stages = 3}"}, (64,)),  # trips S-1
    ({"m": 32, "n": 64, "k": 64, "ab": "bf16"}, (100,)),
    ({"m": 64, "n": 32, "k": 16, "acc": "f16"}, (100,)),
    ({"m": 32, "n": 64, "k": 64, "ab": "i8", "acc": "i32"}, (100,)),
    ({"m": 16, "n": 16, "k": 16}, (48,)),                            # warps hold copies: owners copy
    ({"m": 64, "n": 64, "k": 32, "trips": 1}, (100,)),
    ({"m": 64, "n": 64, "k": 32, "trips": 2}, (100,)),
    ({"m": 64, "n": 64, "k": 32, "trips": 5}, (100,)),                # past the tensor: zero fills
    ({"m": 64, "n": 64, "k": 32, "align": 0}, (100,)),          # not pipelined
    ({"m": 64, "n": 64, "k": 32, "align": 8}, (100,)),               # 8-byte cp.async.ca
    ({"m": 64, "n": 64, "k": 32, "join": True}, (100,)),              # tokens joined in the loop
    ({"m": 64, "n": 64, "k": 32, "nt": True}, (48, 112)),            # B loaded N x K, transposed
    ({"m": 32, "n": 128, "k": 64, "ab": "bf16", "nt": True}, (100,)),
    ({"m": 16, "n": 16, "k": 16, "nt": True}, (48,)),
]


@pytest.mark.parametrize("case, extents", CASES, ids=[str(i) for i in range(len(CASES))])
def test_pipelined_gemm_matches_interpreter(case, extents):
    """Interpreter vs emulated PTX, asynchrony model and race detector on."""
    text = gemm_loop(**case)
    for extent in extents:
        assert agrees(text, extent) == [None], extent


@pytest.mark.parametrize("arch", ["sm_86", "sm_89"])
def test_other_ampere_and_ada_chips_pipeline_too(arch):
    text = gemm_loop(32, 64, 64, nt=True)
    assert isinstance(plan_of(text, int(arch[3:])), PipelinePlan)
    assert "cp.async.cg" in ptx_of(text, arch)
    assert agrees(text, 100, arch) == [None]


@pytest.mark.parametrize("arch, case", [
    ("sm_120", {"m": 64, "n": 64, "k": 32}),
    ("sm_100", {"m": 64, "n": 64, "k": 32, "nt": True}),
    ("sm_90", {"m": 16, "n": 16, "k": 16}),            # too small for wgmma: mma.sync
])
def test_where_tma_would_load_the_tiles_the_ring_copies_them(arch, case, monkeypatch):
    """sm_90 and later give these tiles TMA (lower/tma.py): one synchronous box and wait a
    trip.  With TMA rings for mma.sync turned off (by default they take such loops:
    test_mma_tma_ring.py) the cp.async ring takes the loads back and copies them S-1
    iterations ahead; the kernel's other TMA transfers (the C tile's bulk store) are
    placed after the ring."""
    monkeypatch.setenv("TILEIRAS_MMA_TMA_RING", "0")
    monkeypatch.setenv("TILEIRAS_TCGEN05", "0")      # sm_100's multiply on mma.sync (else: tcgen05)
    text = gemm_loop(**case)
    decision = plan_of(text, int(arch[3:]))
    assert isinstance(decision, PipelinePlan) and decision.staging is None
    ptx = ptx_of(text, arch)
    assert count(ptx, r"cp\.async\.cg\.shared\.global") > 0 and "mbarrier" not in ptx
    assert count(ptx, r"cp\.async\.bulk\.tensor\.\dd\.shared::cta\.global") == 0      # no TMA load left
    assert count(ptx, r"cp\.async\.bulk\.tensor\.\dd\.global\.shared::cta") > 0       # the store's
    for extent in (48, 208):
        assert agrees(text, extent, arch) == [None], extent


@pytest.mark.parametrize("arch, case, swizzled", [
    ("sm_80", {"m": 64, "n": 64, "k": 32}, True),
    ("sm_120", {"m": 64, "n": 64, "k": 64, "ab": "f8E4M3FN"}, False),
    ("sm_100", {"m": 32, "n": 64, "k": 64, "ab": "f8E5M2"}, False),
    ("sm_120", {"m": 64, "n": 32, "k": 64, "ab": "i8", "acc": "i32"}, False),
])
def test_a_column_major_b_is_copied_along_k_into_n_rows_of_k(arch, case, swizzled, tmp_path, capsys, monkeypatch):
    """B read through its dims swapped (``dim_map [1, 0]``: cuTile's K-major B, as fp8 GEMMs
    keep theirs): copied in runs along K into N rows of K, as a transposed B is staged;
    16-bit rows are swizzled and read with ``ldmatrix``, 8-bit ones padded and read a
    32-bit word (four K) a register.  (On sm_90 and later a TMA ring takes these loops
    by default: test_mma_tma_ring.py; here the cp.async ring.)"""
    monkeypatch.setenv("TILEIRAS_MMA_TMA_RING", "0")
    text = gemm_loop(**case, bcol=True)
    plan = plan_of(text, int(arch[3:]))
    assert isinstance(plan, PipelinePlan), plan
    assert plan.b_columns and plan.b_k_rows and not plan.b_transposed
    assert (plan.swizzles is not None) == swizzled and plan.b_pitch >= case["k"]
    assert plan.copy_layouts[1].apply(reg=1) == (1, 0)        # a copy's elements run along K
    ptx = ptx_of(text, arch)
    assert count(ptx, r"cp\.async\.cg\.shared\.global") > 0
    if not swizzled:
        assert count(ptx, r"ld\.shared\.(b|u)32") > 0 and "ld.shared.u8" not in ptx
    for extent in (48, 200):
        assert agrees(text, extent, arch) == [None], extent
    source = bytecode_file(tmp_path, text, name="k.tileir")
    assert driver_main([str(source), "--gpu-name", arch, "-o", str(tmp_path / "k.cubin"), "--remarks=tensorcore"]) == 0
    assert "B = column-major view (dim_map [1, 0]): copied along K into N rows of K" in capsys.readouterr().out


@pytest.mark.parametrize("arch, case", [
    ("sm_80", {"m": 64, "n": 64, "k": 32}),
    ("sm_80", {"m": 128, "n": 128, "k": 32}),
    ("sm_86", {"m": 32, "n": 64, "k": 64, "nt": True}),
])
def test_a_column_major_a_is_copied_along_m_into_k_rows_of_m(arch, case):
    """A read through its dims swapped (a K x M tensor, as a backward pass's X^T is): its
    16-bit tile is copied in runs along M into swizzled K rows of M and read with
    ``ldmatrix.x4.trans``; 8-bit ones are not pipelined (no transposing ldmatrix)."""
    text = gemm_loop(**case, acol=True)
    plan = plan_of(text, int(arch[3:]))
    assert isinstance(plan, PipelinePlan), plan
    assert plan.a_columns and plan.a_pitch == case["m"] and plan.a_bytes == case["m"] * case["k"] * 2
    assert plan.copy_layouts[0].apply(reg=1) == (1, 0)        # a copy's elements run along M
    ptx = ptx_of(text, arch)
    assert count(ptx, r"cp\.async\.cg\.shared\.global") > 0
    assert count(ptx, r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans") > 0
    for extent in (48, 200):
        assert agrees(text, extent, arch) == [None], extent
    eight = plan_of(gemm_loop(64, 64, 64, ab="f8E4M3FN", bcol=True, acol=True), 89)
    assert eight == "a column-major A is read (with ldmatrix.trans) only for 16-bit elements"


def test_a_missing_wait_is_caught():
    """The steady state's wait_group removed: the multiply reads a stage whose copies have
    not landed, which the emulator traps."""
    text = gemm_loop(64, 64, 32, hints="sm_80 = {num_stages = 3}")
    module = parse_module(text, "k.mlir")
    fn = module.functions[0]
    ptx = diffcheck.compile_ptx(module, "sm_80")
    broken = ptx.replace("cp.async.wait_group 1;", "")
    assert broken != ptx
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), 100)
    launch(ptx, fn.name, (1, 1, 1), args).check()
    with pytest.raises(EmulationError, match=r"async: .*ldmatrix.* reads shared byte .*\(cp\.async\.cg"):
        launch(broken, fn.name, (1, 1, 1), diffcheck.synthesize_args(fn, np.random.default_rng(1), 100)).check()


def test_remarks_say_per_loop_whether_it_was_pipelined(tmp_path, capsys):
    pipelined = bytecode_file(tmp_path, gemm_loop(64, 64, 32, hints="sm_80 = {num_stages = 3}"), name="p.tileir")
    plain = bytecode_file(tmp_path, gemm_loop(64, 64, 32, align=0), name="u.tileir")
    outputs = []
    for path in (pipelined, plain):
        assert driver_main([str(path), "--gpu-name", "sm_80", "-o", str(tmp_path / "k.cubin"),
                            "--remarks=tensorcore"]) == 0
        outputs.append(capsys.readouterr().out)
    assert "K loop software-pipelined with 3 stages" in outputs[0]
    assert "K loop not software-pipelined" in outputs[1] and "narrower than 4 bytes" in outputs[1]
