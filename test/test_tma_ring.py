"""sm_90 K loops as TMA rings feeding ``wgmma`` straight from the swizzled stages
(lower/tma_ring.py ``RingPlan``, mma_forms.tma_ring_staging, codegen/emit_ring.py).

A GEMM K loop (``kernels.pipelined.gemm_loop``) on sm_90 whose multiply runs as ``wgmma``
TMA-loads A and B into a ring of S stages, S-1 iterations ahead: each box lands in the
128/64/32-byte swizzle the ``wgmma`` descriptors read, so no register touches the tiles;
one "full" mbarrier per stage carries the stage's bytes and phase parity.  Every kernel is
checked against the interpreter in the emulator (TMA bytes land only at the mbarrier phase
completion, wgmma operands are protected until ``wait_group``, shared-memory race detector
on), with our ``.nv.host`` filling the swizzled tensor maps."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kernels.pipelined import gemm_loop
from tileiras import diffcheck
from tileiras.emulate import launch
from tileiras.emulate.launch import EmulationError
from tileiras.emulate.nvhost import is_runnable_here
from tileiras.layout.shared import Swizzle
from tileiras.lower.tma_ring import RingPlan
from tileiras.sched.latency import HOPPER
from tileiras.sched.pipeline import FULL_WAIT, TMA_COPY, WGMMA, tma_ring_schedule
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.text.parser import parse_module

needs_x86 = pytest.mark.skipif(not is_runnable_here(), reason=".nv.host is x86-64 code")
WARPS8 = "sm_90 = {num_worker_warps_per_cta = 8}"


def tas_of(text: str):
    module = parse_module(text, "k.mlir")
    return run_stages(module, CompileOptions(gpu_name="sm_90"), "tileas", only_needed=True).tas[module.functions[0].name]


def plan_of(text: str):
    (decision,) = tas_of(text).pipelines.values()
    return decision


def ptx_of(text: str) -> str:
    return diffcheck.compile_ptx(parse_module(text, "k.mlir"), "sm_90")


def agrees(text: str, extent: int) -> list:
    return [r.problem for r in diffcheck.check_module(parse_module(text, "k.mlir"), "sm_90", grid=(2, 2, 1),
                                                      extent=extent)]


def loop_of(ptx: str) -> str:
    """The PTX from the first mbarrier wait to the mbarriers' invalidation: the steady state."""
    return ptx[ptx.index("mbarrier.try_wait.parity"):ptx.index("mbarrier.inval")]


# -- the decision -------------------------------------------------------------------------------
def test_an_aligned_f16_wgmma_k_loop_becomes_a_tma_ring():
    tas = tas_of(gemm_loop(64, 64, 64))
    (plan,) = tas.pipelines.values()
    assert isinstance(plan, RingPlan) and plan.source == "modulo schedule" and plan.stages == 3
    a, b = plan.staging.a, plan.staging.b
    # A K-major, B (K x N, N contiguous) MN-major, both in 128-byte swizzle atoms: one box each
    assert (a.k_major, a.swizzle, b.k_major, b.swizzle) == (True, Swizzle.B128, False, Swizzle.B128)
    assert plan.box == ((64, 64), (64, 64)) and plan.boxes == (1, 1)
    assert plan.stage_bytes == 16384 and plan.tx_bytes == 16384
    # the maps land the boxes in the same swizzle (tensormap field 3: 128 bytes), box innermost first
    assert [(s.box, s.swizzle) for s in plan.specs] == [((64, 64), 3), ((64, 64), 3)]
    assert [tas.tensor_maps[i] for i in plan.maps] == list(plan.specs)
    # the loads are the ring's, not lower.tma's one-tile buffers
    assert not set(plan.loads) & set(tas.tma)
    assert tas.wgmma_staging[plan.mma] is plan.staging
    assert tas.smem_bytes >= plan.ring_bytes + 8 * plan.stages


def test_wide_tiles_take_several_boxes_of_one_swizzle_atom():
    plan = plan_of(gemm_loop(128, 128, 128, hints=WARPS8))
    assert plan.box == ((128, 64), (128, 64)) and plan.boxes == (2, 2)
    assert plan.staging.b.base == 128 * 128 * 2 and plan.tx_bytes == 2 * 128 * 128 * 2


def test_narrow_rows_take_the_narrower_swizzles():
    plan = plan_of(gemm_loop(64, 32, 32))
    assert (plan.staging.a.swizzle, plan.staging.b.swizzle) == (Swizzle.B64, Swizzle.B64)
    assert [s.swizzle for s in plan.specs] == [2, 2] and plan.box == ((64, 32), (32, 32))


def test_a_transposed_b_is_landed_k_major():
    plan = plan_of(gemm_loop(64, 64, 64, nt=True))
    assert plan.b_transposed and plan.staging.b.k_major and plan.box[1] == (64, 64)


def test_the_stage_count_comes_from_the_hint_the_trip_count_and_shared_memory():
    assert (plan_of(gemm_loop(64, 64, 64, hints="sm_90 = {num_stages = 5}")).stages, ) == (5, )
    assert plan_of(gemm_loop(64, 64, 64, trips=1, hints="sm_90 = {num_stages = 4}")).stages == 2
    assert plan_of(gemm_loop(64, 64, 64, trips=3, hints="sm_90 = {num_stages = 4}")).stages == 3
    # 40 hinted: as many as fit beside C's 64 KiB TMA store buffer
    tas = tas_of(gemm_loop(128, 128, 64, hints="sm_90 = {num_stages = 40, num_worker_warps_per_cta = 8}"))
    (plan,) = tas.pipelines.values()
    assert plan.stages == 5 and tas.smem_bytes <= 232_448 < tas.smem_bytes + plan.stage_bytes


def test_the_ring_schedule_keeps_a_box_a_dram_latency_ahead_of_its_wgmma():
    schedule = tma_ring_schedule(2, 4, HOPPER)
    assert schedule.cycle_of[WGMMA] - schedule.cycle_of[TMA_COPY] >= 480
    assert schedule.cycle_of[FULL_WAIT] > schedule.cycle_of[TMA_COPY]
    assert schedule.num_stages == 3
    # more wgmma work per iteration: fewer iterations in flight
    assert tma_ring_schedule(4, 32, HOPPER).num_stages < schedule.num_stages


@pytest.mark.parametrize("text, reason", [
    (gemm_loop(64, 64, 64, align=0), "cannot be copied by TMA"),
    (gemm_loop(64, 64, 64, ab="f8E4M3FN"), "an 8-bit B that is not transposed"),
    # two warpgroups on one 64-row block: their accumulator columns interleave along N
    (gemm_loop(64, 64, 64, hints=WARPS8), "warpgroups interleaved along N"),
])
def test_loops_it_cannot_ring_keep_todays_code(text, reason):
    decision = plan_of(text)
    assert isinstance(decision, str) and reason in decision, decision
    assert "mbarrier.try_wait" not in ptx_of(text) or "st.shared" in ptx_of(text)


# -- the code -----------------------------------------------------------------------------------
def test_ring_ptx_structure():
    """Prologue: S-1 stages of one A and one B box; steady state: one stage's two boxes,
    the mbarrier wait on the stage's parity, wgmma from descriptors, no register of A or
    B stored to (or read from) shared memory."""
    ptx = ptx_of(gemm_loop(64, 64, 64, hints="sm_90 = {num_stages = 4}"))
    copy = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
    assert ptx.count(copy) == 2 * 3 + 2
    assert ptx.count("mbarrier.init.shared::cta.b64") == 4 == ptx.count("mbarrier.inval.shared::cta.b64")
    assert ptx.count("mbarrier.arrive.expect_tx.shared::cta.b64") == 4
    assert len(re.findall(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 %rd\d+, \[%r\d+\], 16384;", ptx)) == 4
    loop = loop_of(ptx)
    assert "st.shared" not in loop and "ld.shared" not in loop
    assert loop.count(copy) == 2 and loop.count("wgmma.mma_async") == 4
    assert "wgmma.wait_group.sync.aligned 0;" in loop and "wgmma.commit_group" in loop
    # the descriptors' swizzle field (bits 62-63): 1, the 128-byte swizzle
    assert ".shared .align 1024" in ptx


@needs_x86
@pytest.mark.parametrize("case, extents", [
    # (gemm_loop arguments, extents: dynamic K tile counts 1, 2, 3 (S), 4, 6, with K tails;
    # past about 7 tiles the interpreter's f32 sums and the emulated wgmma's differ in the
    # last bits of a few cancelling sums, as they do without the ring)
    ({"m": 64, "n": 64, "k": 64}, (64, 100, 192, 250, 384)),
    ({"m": 64, "n": 64, "k": 64, "hints": "sm_90 = {num_stages = 4}"}, (192, 256)),       # S-1, S
    ({"m": 64, "n": 64, "k": 64, "trips": 1}, (100,)),
    ({"m": 64, "n": 64, "k": 64, "trips": 5}, (100,)),                  # past the tensor: zero boxes
    ({"m": 64, "n": 128, "k": 64, "ab": "bf16"}, (200,)),
    ({"m": 64, "n": 32, "k": 32}, (100,)),                              # 64-byte swizzles
    ({"m": 64, "n": 64, "k": 64, "nt": True}, (150,)),                  # B K-major
    ({"m": 128, "n": 128, "k": 128, "hints": WARPS8}, (260,)),          # two warpgroups, two boxes
    ({"m": 64, "n": 64, "k": 64, "acc": "f16"}, (100,)),
    ({"m": 64, "n": 64, "k": 64, "join": True}, (130,)),
    ({"m": 64, "n": 64, "k": 128, "ab": "f8E4M3FN", "nt": True}, (300,)),   # fp8, both K-major
], ids=lambda v: str(v))
def test_ring_gemm_matches_interpreter(case, extents):
    """Interpreter vs emulated PTX, asynchrony model and race detector on."""
    text = gemm_loop(**case)
    assert isinstance(plan_of(text), RingPlan)
    for extent in extents:
        assert agrees(text, extent) == [None], extent


@needs_x86
def test_a_missing_mbarrier_wait_is_caught():
    """The steady state's try_wait made to succeed at once: wgmma reads a stage whose TMA
    bytes have not landed, which the emulator traps."""
    text = gemm_loop(64, 64, 64, hints="sm_90 = {num_stages = 3}")
    module = parse_module(text, "k.mlir")
    fn = module.functions[0]
    ptx, host = diffcheck.compile_with_host(module, "sm_90")
    wait = re.search(r"\{ \.reg \.pred %p; mbarrier\.try_wait\.parity[^}]*selp\.b32 (%r\d+), 1, 0, %p; \}", ptx)
    assert wait and ptx.count("mbarrier.try_wait") == 1 and "wgmma.mma_async" in ptx[wait.end():]
    broken = ptx.replace(wait.group(0), f"mov.b32 {wait.group(1)}, 1;")
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), 200)
    launch(ptx, fn.name, (1, 1, 1), args, host_object=host).check()
    with pytest.raises(EmulationError, match=r"async: .*wgmma.* reads shared byte"):
        launch(broken, fn.name, (1, 1, 1), diffcheck.synthesize_args(fn, np.random.default_rng(1), 200),
               host_object=host).check()


@needs_x86
def test_a_missing_release_barrier_is_caught():
    """Two warpgroups: without the steady state's barrier, the elected thread's TMA
    refills a stage the other warpgroup's wgmma may still read."""
    text = gemm_loop(128, 64, 64, hints=WARPS8 + ", sm_90 = {num_stages = 2}")
    module = parse_module(text, "k.mlir")
    fn = module.functions[0]
    ptx, host = diffcheck.compile_with_host(module, "sm_90")
    start = ptx.index("mbarrier.try_wait.parity")
    release = ptx.rindex("bar.sync 0;", 0, start)
    broken = ptx[:release] + ptx[release:].replace("bar.sync 0;", "", 1)
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), 400)
    launch(ptx, fn.name, (1, 1, 1), args, host_object=host).check()
    with pytest.raises(EmulationError):
        launch(broken, fn.name, (1, 1, 1), diffcheck.synthesize_args(fn, np.random.default_rng(1), 400),
               host_object=host).check()


def test_remarks_say_the_loop_is_a_tma_ring(tmp_path, capsys):
    from tileiras.driver import main as driver_main

    from _build import bytecode_file

    path = bytecode_file(tmp_path, gemm_loop(64, 64, 64, hints="sm_90 = {num_stages = 4}"), name="r.tileir")
    assert driver_main([str(path), "--gpu-name", "sm_90", "-o", str(tmp_path / "k.cubin"), "--remarks=tensorcore"]) == 0
    out = capsys.readouterr().out
    assert "K loop software-pipelined with 4 stages" in out and "TMA ring" in out
