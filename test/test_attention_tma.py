"""Flash attention's K/V loop on sm_90 as a TMA ring feeding wgmma (lower/attention_tma.py,
codegen/emit_attention_tma.py).

K and V land by TMA, issued by one thread S-1 iterations ahead, straight into the
swizzled layouts the two multiplies' B descriptors read; no thread loads or stores them.
Every kernel is checked against the interpreter in the emulator, which lands a TMA box
only when its mbarrier phase completes (reading it earlier traps), keeps wgmma operands
live until ``wgmma.wait_group`` and runs its shared-memory race detector."""
from __future__ import annotations

import re

import pytest

from kernels.attention import flash_attention
from tileiras import diffcheck
from tileiras.codegen import emit_attention_tma
from tileiras.layout.shared import Swizzle
from tileiras.lower.attention_tma import AttentionRingPlan
from tileiras.remarks import collect
from tileiras.text.parser import parse_module

from test_software_pipeline import plan_of, ptx_of


def problems(text: str, grid=(2, 1, 1), extent: int = 192) -> list:
    module = parse_module(text, "k.mlir")
    return [r.problem for r in diffcheck.check_module(module, "sm_90", grid=grid, extent=extent)]


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
    assert plan.barrier(2, 1) == plan.barriers + 8 * 5
    assert k.map_index != v.map_index and min(k.map_index, v.map_index) >= 0


def test_head_dim_128_lands_two_boxes_a_tile():
    plan = plan_of(flash_attention(d=128), 90)
    k, v = plan.tiles
    assert (k.box, k.boxes, v.box, v.boxes) == ((1, 64, 64), 2, (1, 64, 64), 2)
    assert (k.nbytes, v.nbytes) == (16384, 16384) and plan.stage_bytes == 32768


def test_the_hint_and_a_known_trip_count_set_the_stages():
    assert plan_of(flash_attention(hints="sm_90 = {num_stages = 2}"), 90).stages == 2
    assert plan_of(flash_attention(hints="sm_90 = {num_stages = 4}"), 90).stages == 4
    assert plan_of(flash_attention(trips=1), 90).stages == 2
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


# -- the code -----------------------------------------------------------------------------------
def _loop(ptx: str) -> str:
    """The loop and the drain: from the barrier that starts an iteration (the last before
    the first multiply) to the mbarriers' invalidation."""
    return ptx[ptx.rindex("bar.sync", 0, ptx.index("wgmma.fence")):ptx.index("mbarrier.inval")]


@pytest.mark.parametrize("d, boxes, wgmmas", [(64, 1, 4 + 4), (128, 2, 8 + 4)])
def test_no_thread_touches_k_or_v_in_the_loop(d, boxes, wgmmas):
    ptx = ptx_of(flash_attention(d=d), "sm_90")
    loop = _loop(ptx)
    assert not re.search(r"st\.shared|ld\.shared", loop)
    # the refill: K's and V's boxes of one iteration, 3-D (the tensors' rank)
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.3d", loop)) == 2 * boxes
    # each multiply waits on its own tile's mbarrier; one CTA barrier an iteration, one after
    assert len(re.findall(r"mbarrier\.try_wait\.parity", loop)) == 2
    assert len(re.findall(r"bar\.sync", loop)) == 1 + 1
    # Q @ K^T's K steps (d / 16), P @ V's (64 keys / 16), N at most 256: one wgmma each
    assert len(re.findall(r"wgmma\.mma_async", loop)) == wgmmas
    prologue = ptx[ptx.rindex("fence.mbarrier_init"):ptx.index("wgmma.fence")]
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.3d", prologue)) == 2 * 2 * boxes   # iterations 0, 1
    assert len(re.findall(r"mbarrier\.init", ptx)) == 2 * 3 + 1                # K, V per stage; Q's load
    assert len(re.findall(r"mbarrier\.arrive\.expect_tx", loop)) == 2


@pytest.mark.parametrize("kwargs, grid, extent", [
    ({}, (2, 1, 1), 192),                                   # 3 trips = S, dynamic
    ({}, (1, 1, 1), 512),                                   # 8 trips: phases wrap twice
    ({"causal": True}, (3, 1, 1), 192),                     # 1, 2, 3 trips by block
    ({"trips": 1}, (1, 1, 1), 192),
    ({"trips": 2}, (1, 1, 1), 192),
    ({"d": 128}, (2, 1, 1), 192),
    ({"d": 128, "causal": True}, (4, 1, 1), 256),
    ({"views_in_loop": True}, (2, 1, 1), 192),
    ({"hints": "sm_90 = {num_stages = 2}"}, (1, 1, 1), 256),
])
def test_the_ring_agrees_with_the_interpreter(kwargs, grid, extent):
    assert isinstance(plan_of(flash_attention(**kwargs), 90), AttentionRingPlan)
    assert problems(flash_attention(**kwargs), grid, extent) == [None]


def test_a_missing_mbarrier_wait_is_caught(monkeypatch):
    """P @ V without waiting for V's phase reads the stage while the TMA may still land."""
    real = emit_attention_tma.wait_phase
    waits = []

    def v_unwaited(em, barrier, parity):
        waits.append(barrier)
        if len(waits) % 2:          # K's wait (Q @ K^T comes first); V's is dropped
            real(em, barrier, parity)
    monkeypatch.setattr(emit_attention_tma, "wait_phase", v_unwaited)
    (problem,) = problems(flash_attention())
    assert problem is not None and "cp.async.bulk.tensor" in problem and "wgmma" in problem
