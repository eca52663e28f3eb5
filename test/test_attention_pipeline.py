"""Software-pipelined flash-attention K/V loops (lower/attention_pipeline.py, codegen/emit_attention.py).

A flash-attention loop (``kernels.attention.flash_attention``) on sm_80 copies its K and V
tiles with ``cp.async`` into a ring of shared-memory stages, S-1 iterations ahead, K and V
in separate commit groups.  Every kernel is checked against the interpreter in the
emulator, which lands a copy's bytes only at the ``cp.async.wait_group`` that covers it
(reading them earlier traps) and runs its shared-memory race detector; the PTX's
structure is asserted too."""
from __future__ import annotations

import re

import pytest

from kernels.attention import flash_attention
from kernels.pipelined import gemm_loop
from tileiras import diffcheck
from tileiras.lower import attention_pipeline
from tileiras.lower.attention_pipeline import A_BEFORE_LOOP, A_HELD, A_STAGED, AttentionPlan
from tileiras.lower.software_pipeline import PipelinePlan
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.remarks import collect
from tileiras.sched.latency import AMPERE
from tileiras.sched.pipeline import ATT_COPY_K, ATT_PV, attention_schedule
from tileiras.text.parser import parse_module

from test_software_pipeline import plan_of, ptx_of


def problems(text: str, grid=(3, 2, 1), extent: int = 192, arch: str = "sm_80") -> list:
    module = parse_module(text, "k.mlir")
    return [r.problem for r in diffcheck.check_module(module, arch, grid=grid, extent=extent)]


# -- the decision -------------------------------------------------------------------------------
def test_a_flash_attention_loop_is_pipelined_with_k_and_v_in_each_stage():
    plan = plan_of(flash_attention())
    assert isinstance(plan, AttentionPlan)
    k, v = plan.tiles
    # K^T is loaded through dim_map [0, 2, 1]: staged as loaded, 64 keys of 64 head-dim
    # elements (N x K, plain ldmatrix); V as 64 keys (K) of 64 (N), read with .trans
    assert (k.rows, k.cols, k.transposed, v.rows, v.cols, v.transposed) == (64, 64, True, 64, 64, False)
    assert (k.copy_bytes, v.copy_bytes) == (16, 16)
    assert (k.offset, v.offset, plan.stage_bytes) == (0, 8192, 16384)
    # Q (made before the loop) is read into registers once; P is held as S's fragments:
    # the softmax needs no scratch (its row statistics live in the accumulator's row
    # slice: test_row_statistics.py), so the ring starts at 0
    assert plan.a_from == (A_BEFORE_LOOP, A_HELD)
    assert plan.ring_base == 0
    assert plan.source == "modulo schedule" and plan.stages == 2
    assert [plan.pending_before(m) for m in plan.mmas] == [1, 2]


def test_head_dim_128_stages_twice_the_bytes():
    plan = plan_of(flash_attention(d=128))
    k, v = plan.tiles
    assert (k.rows, k.cols, v.rows, v.cols) == (64, 128, 64, 128)
    assert plan.stage_bytes == 2 * 64 * 128 * 2 and plan.ring_base == 0
    assert plan.a_from == (A_BEFORE_LOOP, A_HELD)       # P (64 x 64) rows as O's (64 x 128)


def test_the_schedule_keeps_copies_a_dram_latency_ahead():
    """K's copies issue at cycle 0; P @ V can start only after the copy latency (450 on
    sm_80) plus Q @ K^T and the softmax, so its iteration is stages - 1 intervals later."""
    schedule = attention_schedule((4, 4), (16, 16), (), AMPERE)
    assert schedule.cycle_of[ATT_COPY_K] == 0 and schedule.cycle_of[ATT_PV] >= 450
    assert schedule.num_stages == schedule.stage_of[ATT_PV] + 1 >= 2


def test_the_num_stages_hint_and_a_known_trip_count_set_the_stages():
    assert plan_of(flash_attention(hints="sm_80 = {num_stages = 3}")).stages == 3
    assert plan_of(flash_attention(trips=1, hints="sm_80 = {num_stages = 4}")).stages == 2
    assert plan_of(flash_attention(trips=3, hints="sm_80 = {num_stages = 4}")).stages == 3


def test_the_shared_memory_budget_bounds_the_stages():
    plan = plan_of(flash_attention(d=128, hints="sm_80 = {num_stages = 40}"))
    assert plan.ring_base + plan.stages * plan.stage_bytes <= 166_912
    assert plan.ring_base + (plan.stages + 1) * plan.stage_bytes > 166_912


@pytest.mark.parametrize("change, reason", [
    (("mmaf %p16, %vv, %oscaled", "mmaf %qm, %vv, %oa"), "does not use the first's result"),
    (("continue %onew, %lnew", "%keepv = addf %onew, %onew : tile<64x64xf32>\n    continue %keepv, %lnew"), None),
])
def test_what_is_refused_says_why(change, reason):
    """Independent multiplies could be emitted out of order (the waits count groups in
    order): refused; other ops after the multiplies are fine."""
    plan = plan_of(flash_attention().replace(*change))
    if reason is None:
        assert isinstance(plan, AttentionPlan)
    else:
        assert isinstance(plan, str) and reason in plan


def test_gemm_k_loops_keep_their_plan():
    assert isinstance(plan_of(gemm_loop(64, 64, 32)), PipelinePlan)


def test_the_remark_says_pipelined_with_its_stages():
    module = parse_module(flash_attention(), "k.mlir")
    texts = [r.message for r in collect(module, "sm_80") if r.name == "RemarkSoftwarePipelined"]
    assert texts == ["K/V loop software-pipelined with 2 stages"]


# -- the code -----------------------------------------------------------------------------------
def test_k_and_v_travel_in_separate_groups_with_their_own_waits():
    ptx = ptx_of(flash_attention())
    # 64 x 64 halves = 512 16-byte pieces a tile, 4 a thread: prologue K(0), V(0); loop K, V
    assert len(re.findall(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16, ", ptx)) == 16
    assert ptx.count("cp.async.commit_group;") == 4
    waits = re.findall(r"cp\.async\.wait_group (\d+);", ptx)
    assert waits == ["1", "2", "0"]         # K(i) before Q @ K^T, V(i) before P @ V, drain
    # Q's fragments once (4 K steps of ldmatrix.x4), K^T's with plain ldmatrix.x4 (4 K steps,
    # 8 column blocks two at a time), V's with .trans; P's from registers, not shared memory
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 4 + 16
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 16
    # the only stores to shared memory are Q's, before the loop: its 32 halves a thread as
    # 8 runs of 4 (the fragment's consecutive columns, 8 bytes at a time), and after it the
    # output's exchange (its fragment pairs, in the drained ring's bytes), read back for
    # 16-byte global stores, as NVIDIA's epilogue stores it
    assert re.findall(r"st\.shared\.[\w.]+", ptx) == ["st.shared.v4.b16"] * 8 + ["st.shared.b32"] * 16
    assert ptx.count("st.global.v4.b32") == 4 and ptx.count("st.global.b32") == 0


def test_three_stages_wait_for_three_and_four_groups():
    ptx = ptx_of(flash_attention(hints="sm_80 = {num_stages = 3}"))
    assert re.findall(r"cp\.async\.wait_group (\d+);", ptx) == ["3", "4", "0"]
    assert ptx.count("cp.async.commit_group;") == 6


@pytest.mark.parametrize("kwargs, grid, extent", [
    ({}, (3, 2, 1), 192),                                       # dynamic trips: 3
    ({"causal": True}, (3, 2, 1), 192),                         # trips 1, 2, 3 by block
    ({"trips": 1}, (1, 2, 1), 64),
    ({"trips": 2}, (1, 2, 1), 128),
    ({"hints": "sm_80 = {num_stages = 3}"}, (2, 1, 1), 320),  # 5 trips through 3 stages
    ({"hints": "sm_80 = {num_stages = 3}", "causal": True}, (4, 1, 1), 256),   # trips 1..4 < and > S
    ({}, (2, 1, 1), 96),                                        # a K/V tail: zero-filled rows
])
def test_interpreter_and_emulator_agree_with_asynchrony_and_races_checked(kwargs, grid, extent):
    assert isinstance(plan_of(flash_attention(**kwargs)), AttentionPlan)
    assert problems(flash_attention(**kwargs), grid, extent) == [None]


def test_views_made_in_the_loop_are_made_where_the_copies_are_issued():
    """Bytecode 13.1 makes K's and V's partition views in the loop body (of tensor views
    from outside it): the prologue and the refill of Q @ K^T make them early."""
    text = flash_attention(causal=True, views_in_loop=True)
    assert isinstance(plan_of(text), AttentionPlan)
    assert problems(text, (3, 1, 1), 192) == [None]


def test_head_dim_128_agrees():
    assert problems(flash_attention(d=128, causal=True), (2, 1, 1), 128) == [None]


@pytest.mark.parametrize("arch", ["sm_86", "sm_89"])
def test_other_sm8x_targets_agree(arch):
    assert isinstance(plan_of(flash_attention(causal=True), int(arch[3:])), AttentionPlan)
    assert problems(flash_attention(causal=True), (2, 1, 1), 128, arch) == [None]


def test_an_a_staged_every_iteration_agrees(monkeypatch):
    """P not taken from its registers (as for an A in another layout) is staged in the
    scratch region below the ring every iteration, between two barriers."""
    monkeypatch.setattr(attention_pipeline, "a_in_registers", lambda tas, mma: False)
    plan = plan_of(flash_attention(causal=True))
    assert plan.a_from == (A_BEFORE_LOOP, A_STAGED) and plan.ring_base == 64 * 64 * 2
    assert problems(flash_attention(causal=True), (3, 1, 1), 192) == [None]


def test_on_sm_120_the_ring_takes_k_and_v_from_tma(monkeypatch):
    """sm_120's TMA plan gives K's and V's loads boxes; the cp.async ring (by default a TMA
    ring: test_attention_sync_ring.py) copies them instead, and Q's load and O's store keep
    TMA, their buffers after the ring."""
    monkeypatch.setenv("TILEIRAS_MMA_TMA_RING", "0")
    module = parse_module(flash_attention(causal=True), "k.mlir")
    tas = run_stages(module, CompileOptions(gpu_name="sm_120"), "tileas", only_needed=True).tas["fa"]
    (plan,) = tas.pipelines.values()
    assert isinstance(plan, AttentionPlan)
    assert tas.tma and not set(plan.loads) & set(tas.tma)
    assert min(p.buffer for p in tas.tma.values()) >= plan.smem_end
    assert problems(flash_attention(causal=True), (3, 1, 1), 192, "sm_120") == [None]


def test_a_missing_wait_for_v_is_caught(monkeypatch):
    """With V(i)'s group allowed to be pending at P @ V, its ldmatrix reads a stage whose
    copy has not landed: the emulator's asynchrony model traps."""
    real = AttentionPlan.pending_before
    monkeypatch.setattr(AttentionPlan, "pending_before", lambda self, mma: real(self, mma) + (mma is self.mmas[1]))
    (problem,) = problems(flash_attention(), (2, 1, 1), 128)
    assert problem is not None and "async" in problem and "ldmatrix" in problem
