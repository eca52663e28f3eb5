"""Flash attention's K/V loop on sm_90 as a TMA ring feeding wgmma (lower/attention_tma.py,
codegen/emit_attention_tma.py).

K and V land by TMA, issued by one thread S iterations ahead, straight into the swizzled
layouts the two multiplies' B descriptors read, and Q once before the loop into the
layout its A descriptors read; no thread loads or stores them.  Stages are handed back
through "empty" mbarriers, not CTA barriers.  Every kernel is checked against the
interpreter in the emulator, which lands a TMA box only when its mbarrier phase
completes (reading it earlier traps), keeps wgmma operands live until
``wgmma.wait_group``, reports deadlocks and runs its shared-memory race detector; the
ring's refills need more trips than ``diffcheck``'s default extents give a 3-D tensor
(``ring_problem``)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kernels.attention import flash_attention
from tileiras import diffcheck
from tileiras.layout.shared import Swizzle
from tileiras.lower.attention_tma import EMPTY, MIN_STAGES, AttentionRingPlan
from tileiras.remarks import collect
from tileiras.text.parser import parse_module

from _rings import assert_attention_refills, attention_loop, drop_attention_wait, release_only_below
from test_software_pipeline import plan_of, ptx_of


#: two consumer warpgroups: a 128-row query block on 8 warps
EIGHT_WARPS = "sm_90 = {num_worker_warps_per_cta = 8}"


def problems(text: str, grid=(2, 1, 1), extent: int = 192) -> list:
    module = parse_module(text, "k.mlir")
    return [r.problem for r in diffcheck.check_module(module, "sm_90", grid=grid, extent=extent)]


def ring_problem(text: str, keys: int, d: int, bm: int = 64, blocks: int = 1, seed: int = 1,
                 arch: str = "sm_90") -> str | None:
    """The interpreter against our PTX in the emulator on one batch of ``keys`` keys and
    ``blocks`` query blocks of ``bm`` rows (Q, K, V, O of shape 1 x keys x d): with the
    default extents ``diffcheck`` shrinks a 3-D tensor's dims under its budget (at most
    128 keys: two iterations), so the ring would never be refilled."""
    module = parse_module(text, "k.mlir")
    rng = np.random.default_rng(seed)
    args = []
    for _ in "qkvo":
        args += [diffcheck.random_array(rng, np.float16, (1, keys, d)), 1, keys, d, keys * d, d]
    ptx, host = diffcheck.compile_with_host(module, arch)
    grid = (blocks, 1, 1)
    expected = diffcheck.run_interpreter(module, "fa", grid, args)
    try:
        got = diffcheck.run_ptx(ptx, "fa", grid, args, host_object=host)
    except Exception as err:  # noqa: BLE001 - the emulator's trap is the answer
        return f"{type(err).__name__}: {err}"
    return diffcheck.compare(expected, got)


# -- the decision -------------------------------------------------------------------------------
def test_k_lands_k_major_and_v_mn_major_in_each_stage():
    plan = plan_of(flash_attention(), 90)
    assert isinstance(plan, AttentionRingPlan)
    k, v = plan.tiles
    # K^T is read through dim_map [0, 2, 1]: the box is in the tensor's order (keys x head
    # dim, one 128-byte swizzle atom wide), landing as B of Q @ K^T K-major; V as B of
    # P @ V MN-major (its head dim is N)
    assert (k.box, k.boxes, k.staging.k_major, k.staging.swizzle) == ((1, 64, 64), 1, True, Swizzle.B128)
    assert (v.box, v.boxes, v.staging.k_major, v.staging.swizzle) == ((1, 64, 64), 1, False, Swizzle.B128)
    assert (k.nbytes, v.nbytes, plan.stage_bytes) == (8192, 8192, 16384)
    # Q staged once at 0 (its wgmma staging), the ring after it, the mbarriers after the ring
    q, p = plan.stagings
    assert q.a is not None and q.a.base == 0 and p.a is None and p.a_registers is not None
    assert (plan.ring_base, k.staging.base, v.staging.base) == (8192, 8192, 16384)
    assert plan.stages == 3 and plan.barriers == 8192 + 3 * 16384
    # per stage: K's and V's "full" mbarrier, then the "empty" one every thread arrives on
    assert plan.barrier(2, 1) == plan.barriers + 8 * 7 and plan.barrier(1, EMPTY) == plan.barriers + 8 * 5
    # Q's mbarrier after the stages'; its tile lands by TMA (one box of 64 rows x 64
    # elements, the 128-byte swizzle) straight in Q's K-major staging
    assert plan.q_barrier == plan.barriers + 8 * 9 and plan.smem_end == plan.q_barrier + 8
    assert plan.consumers == 128
    assert (plan.q.box, plan.q.boxes, plan.q.nbytes, plan.q.staging) == ((1, 64, 64), 1, 8192, q.a)
    assert q.a.k_major and q.a.swizzle == Swizzle.B128 and plan.q.map_index not in (k.map_index, v.map_index)
    assert k.map_index != v.map_index and min(k.map_index, v.map_index) >= 0


def test_head_dim_128_lands_two_boxes_a_tile():
    plan = plan_of(flash_attention(d=128), 90)
    k, v = plan.tiles
    assert (k.box, k.boxes, v.box, v.boxes) == ((1, 64, 64), 2, (1, 64, 64), 2)
    assert (k.nbytes, v.nbytes) == (16384, 16384) and plan.stage_bytes == 32768
    # the modulo schedule's two stages are allowed (S-1 iterations in flight): Q's 16 KB,
    # two stages and their mbarriers fit two CTAs in an SM's 228 KB
    assert (plan.stages, plan.source) == (2, "modulo schedule")
    assert plan.smem_end == 16384 + 2 * 32768 + 2 * 3 * 8 + 8 and 2 * plan.smem_end < 228 * 1024
    assert (plan.q.box, plan.q.boxes, plan.q.nbytes) == ((1, 64, 64), 2, 16384)


def test_the_hint_and_a_known_trip_count_set_the_stages():
    assert plan_of(flash_attention(hints="sm_90 = {num_stages = 2}"), 90).stages == 2
    assert plan_of(flash_attention(hints="sm_90 = {num_stages = 4}"), 90).stages == 4
    assert plan_of(flash_attention(trips=1), 90).stages == 2 == MIN_STAGES
    assert plan_of(flash_attention(trips=2), 90).stages == 2


def test_the_remark_says_pipelined_and_a_refusal_says_why():
    module = parse_module(flash_attention(), "k.mlir")
    texts = [(r.name, r.message) for r in collect(module, "sm_90") if "Pipeline" in r.name]
    assert texts == [("RemarkSoftwarePipelined", "K/V loop software-pipelined with 3 stages")]
    # padded with other than zeros: TMA (and cp.async) fill only zeros
    nan_padded = flash_attention().replace("tile=(1x64x64), tensor_view<?x?x?xf16, strides=[?,?,1]>, dim_map",
                                           "tile=(1x64x64), padding_value = nan, tensor_view<?x?x?xf16, strides=[?,?,1]>,"
                                           " dim_map")
    decision = plan_of(nan_padded, 90)
    assert isinstance(decision, str) and "pads with other than zeros" in decision


def doubled_q(**kwargs) -> str:
    """The kernel with Q doubled before the loop: Q @ K^T's A is no longer a load."""
    text = flash_attention(**kwargs)
    line = next(x for x in text.splitlines() if "%qm = reshape" in x)
    shape = line.rsplit("-> ", 1)[1]
    return text.replace(line, f"{line}\n    %q2 = addf %qm, %qm : {shape}").replace("mmaf %qm,", "mmaf %q2,")


def test_q_made_otherwise_is_staged_from_registers():
    plan = plan_of(doubled_q(), 90)
    assert isinstance(plan, AttentionRingPlan) and plan.q is None and plan.stagings[0].a is not None
    assert plan.smem_end == plan.q_barrier
    ptx = ptx_of(doubled_q(), "sm_90")
    before = ptx[:ptx.index("wgmma.fence")]
    assert re.search(r"st\.shared", before) and "fence.proxy.async" in before


# -- the code -----------------------------------------------------------------------------------
@pytest.mark.parametrize("d, boxes, wgmmas", [(64, 1, 4 + 4), (128, 2, 8 + 4)])
def test_no_thread_touches_k_or_v_in_the_loop(d, boxes, wgmmas):
    ptx = ptx_of(flash_attention(d=d), "sm_90")
    plan = plan_of(flash_attention(d=d), 90)
    # where S runs an iteration ahead, S(0) is multiplied (and waited for) before the loop
    after = ptx.index("wgmma.wait_group.sync.aligned 0") if plan.s_ahead else 0
    loop = attention_loop(ptx, "wgmma.fence", "wgmma.wait_group", after)
    stages = plan.stages
    assert not re.search(r"st\.shared|ld\.shared", loop)
    assert_attention_refills(loop, boxes)
    assert len(re.findall(r"mbarrier\.arrive\.expect_tx", loop)) == 2
    # Q @ K^T's K steps (d / 16), P @ V's (64 keys / 16), N at most 256: one wgmma each
    assert len(re.findall(r"wgmma\.mma_async", loop)) == wgmmas
    prologue = ptx[ptx.rindex("fence.mbarrier_init"):ptx.index("wgmma.fence")]
    # Q's boxes, then iterations 0 .. S-1 into the fresh stages
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.3d", prologue)) == boxes + 2 * stages * boxes
    assert len(re.findall(r"mbarrier\.init", ptx)) == 3 * stages + 1            # K, V, empty per stage; Q's
    assert len(re.findall(r"mbarrier\.inval", ptx)) == 3 * stages + 1
    # no thread loads or stores Q: TMA lands it in the staging its descriptors read, so
    # nothing in shared memory is written by the generic proxy before the loop
    before = ptx[:ptx.index("wgmma.fence")]
    assert not re.search(r"st\.shared|ld\.shared", before) and "fence.proxy.async" not in before


@pytest.mark.parametrize("kwargs, grid, extent", [
    ({}, (2, 1, 1), 192),                                   # 2 trips (dynamic), 96 keys: zero-padded
    ({"causal": True}, (3, 1, 1), 192),                     # 1 or 2 trips by block
    ({"trips": 1}, (1, 1, 1), 192),
    ({"trips": 2}, (1, 1, 1), 192),
    ({"d": 128}, (2, 1, 1), 192),
    ({"views_in_loop": True}, (2, 1, 1), 192),
])
def test_the_ring_agrees_with_the_interpreter(kwargs, grid, extent):
    assert isinstance(plan_of(flash_attention(**kwargs), 90), AttentionRingPlan)
    assert problems(flash_attention(**kwargs), grid, extent) == [None]


@pytest.mark.parametrize("kwargs, keys, blocks, stages", [
    ({}, 512, 1, 3),                                        # 8 trips: each stage refilled twice
    ({}, 192, 1, 3),                                        # S trips: nothing refilled
    ({"causal": True}, 256, 4, 3),                          # 1 .. 4 trips by block
    ({"d": 128}, 384, 1, 2),                                # two stages, 6 trips
    ({"d": 128, "causal": True}, 192, 3, 2),
    ({"hints": "sm_90 = {num_stages = 2}"}, 320, 1, 2),
    ({"bm": 128, "hints": EIGHT_WARPS}, 512, 1, 3),         # two warpgroups release each stage
    ({"bm": 128, "d": 128, "hints": EIGHT_WARPS}, 384, 2, 2),
    ({"doubled_q": True}, 320, 1, 3),                       # Q staged from registers
])
def test_many_trips_agree_with_the_interpreter(kwargs, keys, blocks, stages):
    kwargs = dict(kwargs)
    text = doubled_q(**kwargs) if kwargs.pop("doubled_q", False) else flash_attention(**kwargs)
    assert plan_of(text, 90).stages == stages
    assert ring_problem(text, keys, kwargs.get("d", 64), kwargs.get("bm", 64), blocks) is None


@pytest.mark.parametrize("dropped", ["q", "k0", "k", "v"])
def test_a_missing_mbarrier_wait_is_caught(monkeypatch, dropped):
    """Q @ K^T without waiting for Q's boxes, S(0) (before the loop) or S(i + 1) (in it)
    without waiting for K's, or P @ V without waiting for V's phase, reads shared memory
    while the TMA may still land."""
    assert plan_of(flash_attention(), 90).s_ahead
    drop_attention_wait(monkeypatch, dropped, s_ahead=True)
    problem = ring_problem(flash_attention(), 512, 64)
    assert problem is not None and "cp.async.bulk.tensor" in problem and "wgmma" in problem


@pytest.mark.parametrize("d", [64, 128])
def test_a_missing_release_is_caught(monkeypatch, d):
    """Two warpgroups (a 128-row query block on 8 warps), the second's threads never
    releasing a stage: the refill's "empty" wait never completes, and the emulator says
    the kernel hangs there rather than letting the copies overwrite the stage."""
    release_only_below(monkeypatch, 128)
    problem = ring_problem(flash_attention(d=d, bm=128, hints=EIGHT_WARPS), 384, d, 128)
    assert problem is not None and "deadlock" in problem and "mbarrier" in problem


@pytest.mark.parametrize("d", [64, 128])
def test_a_refill_without_the_empty_wait_is_caught(monkeypatch, d):
    """Two warpgroups: the refill of a stage issued without waiting for every thread's
    release overwrites K while the other warpgroup's Q @ K^T may still read it."""
    text = flash_attention(d=d, bm=128, hints=EIGHT_WARPS)
    drop_attention_wait(monkeypatch, "empty", s_ahead=plan_of(text, 90).s_ahead)
    problem = ring_problem(text, 384, d, 128)
    assert problem is not None and "race" in problem and "cp.async.bulk.tensor" in problem
    assert "wgmma" in problem and "thread [128, 0, 0]" in problem


# -- Q @ K^T an iteration ahead (s_ahead) -------------------------------------------------------
def test_s_runs_ahead_where_the_ring_has_three_stages(monkeypatch):
    """S(i + 1) is issued at the top of iteration i, so its K tile must have landed then:
    with three stages it was issued two iterations earlier; with two, only at the end of
    iteration i - 1, and the multiply would wait on the copy (d = 128: two stages fit)."""
    assert plan_of(flash_attention(), 90).s_ahead
    assert plan_of(flash_attention(causal=True), 90).s_ahead
    assert not plan_of(flash_attention(d=128), 90).s_ahead
    assert not plan_of(flash_attention(hints="sm_90 = {num_stages = 2}"), 90).s_ahead
    assert plan_of(flash_attention(d=128, hints="sm_90 = {num_stages = 3}"), 90).s_ahead
    plan = plan_of(flash_attention(), 90)
    assert not plan.tcgen05 and not plan.s_committed and plan.smem_end == plan.q_barrier + 8   # no S mbarrier
    monkeypatch.setenv("TILEIRAS_S_AHEAD", "0")
    assert not plan_of(flash_attention(), 90).s_ahead


def test_s_of_the_next_iteration_runs_during_the_softmax():
    """In the loop S(i + 1)'s wgmma are committed and left in flight (``wait_group 1``)
    before the softmax's first exp2; nothing waits for them until P @ V's ``wait_group 0``
    (then a second one hands the registers to the next iteration)."""
    ptx = ptx_of(flash_attention(), "sm_90")
    prologue_wait = ptx.index("wgmma.wait_group.sync.aligned 0")
    assert ptx.index("wgmma.commit_group", ptx.index("wgmma.fence")) < prologue_wait   # S(0) before the loop
    loop = attention_loop(ptx, "wgmma.fence", "wgmma.wait_group", prologue_wait)
    first_exp = loop.index("ex2.approx")
    head = loop[:first_exp]
    assert len(re.findall(r"wgmma\.mma_async", head)) == 4 and head.count("wgmma.commit_group") == 1
    assert "wgmma.wait_group.sync.aligned 1" in head and "wgmma.wait_group.sync.aligned 0" not in head
    tail = loop[first_exp:]
    assert len(re.findall(r"wgmma\.mma_async", tail)) == 4                       # P @ V
    assert len(re.findall(r"wgmma\.wait_group\.sync\.aligned 0", tail)) == 2


@pytest.mark.parametrize("kwargs, keys, blocks", [
    ({}, 512, 1), ({"causal": True}, 320, 5), ({"bm": 128, "hints": EIGHT_WARPS}, 448, 1),
    ({"d": 128, "hints": "sm_90 = {num_stages = 3}"}, 384, 1), ({"trips": 3}, 192, 1),
])
def test_s_ahead_agrees_with_the_interpreter(kwargs, keys, blocks):
    """Three to eight trips, causal blocks of 1 .. 5 trips (dynamic counts), two warpgroups, head dim 128:
    the last iteration's extra multiply (no K(i + 1)) reads a stage no copy is in flight
    to, and its result is not used."""
    text = flash_attention(**kwargs)
    assert plan_of(text, 90).s_ahead
    assert ring_problem(text, keys, kwargs.get("d", 64), kwargs.get("bm", 64), blocks) is None


def test_without_s_ahead_the_ring_still_agrees(monkeypatch):
    monkeypatch.setenv("TILEIRAS_S_AHEAD", "0")
    assert not plan_of(flash_attention(), 90).s_ahead
    assert ring_problem(flash_attention(), 512, 64) is None
    assert ring_problem(flash_attention(causal=True), 256, 64, 64, 4) is None


def test_reading_s_before_its_wait_is_caught(monkeypatch):
    """Plant: the softmax reads S(i + 1)'s registers, still being written by its wgmma,
    instead of the carried S(i): the emulator says so rather than handing back stale or
    partial sums."""
    from tileiras.codegen import emit_attention_tma
    from tileiras.codegen.values import TileVal

    real = emit_attention_tma._wgmma_s_ahead

    def early(em, op, plan, i):
        real(em, op, plan, i)
        frame = emit_attention_tma._loop_frame(em, plan)
        em.put(op.result, TileVal(em.tile(op, 2).layout, list(frame.ahead_next)))
    monkeypatch.setattr(emit_attention_tma, "_wgmma_s_ahead", early)
    problem = ring_problem(flash_attention(), 256, 64)
    assert problem is not None and "in-flight" in problem and "before wgmma.wait_group" in problem, problem
