"""The sm_90 TMA ring nothing configures (``TILEIRAS_WARP_SPECIALIZE`` unset): not
warp-specialized, at least ``UNSPECIALIZED_MIN_STAGES`` stages where shared memory and the
trips allow, one wgmma group in flight, the worker warps taking turns at the refills.  On an
H100 (bench/results, the 128x128x32 GEMMs of bench/gpu.py) this ran in 0.94-0.98x the time
of the warp-specialized 8-stage ring, and 4 stages in 0.87x the time of the modulo
schedule's 3 at 4096^3.  The specialized form (``=1``) is tested in test_tma_ring.py."""
from __future__ import annotations

import re

import pytest

from kernels.pipelined import gemm_loop
from test_tma_ring import agrees, needs_x86, plan_of, ptx_of
from tileiras.lower.tma_ring import SPECIALIZE_BY_DEFAULT, UNSPECIALIZED_MIN_STAGES, RingPlan


@pytest.fixture(autouse=True)
def unset(monkeypatch):
    monkeypatch.delenv("TILEIRAS_WARP_SPECIALIZE", raising=False)


def test_a_top_level_gemm_ring_is_not_specialized_by_default():
    plan = plan_of(gemm_loop(64, 64, 64))
    assert isinstance(plan, RingPlan)
    assert (plan.producer_warp, plan.specialize_reason) == (-1, SPECIALIZE_BY_DEFAULT)
    assert plan.stages == UNSPECIALIZED_MIN_STAGES == 4
    assert plan.source == "measured floor (the modulo schedule's 3)"
    assert plan.in_flight == 1
    ptx = ptx_of(gemm_loop(64, 64, 64))
    assert ".reqntid 128" in ptx and "setmaxnreg" not in ptx
    assert "wgmma.wait_group.sync.aligned 1;" in ptx
    assert len(re.findall(r"mbarrier\.init", ptx)) >= 2 * 4          # a full and an empty one per stage


def test_the_floor_gives_way_to_trips_and_hints():
    assert plan_of(gemm_loop(64, 64, 64, trips=3)).stages == 3
    assert plan_of(gemm_loop(64, 64, 64, trips=2)).stages == 2
    assert plan_of(gemm_loop(64, 64, 64, hints="sm_90 = {num_stages = 3}")).stages == 3


@pytest.mark.parametrize("value, specialized", [("1", True), ("0", False), ("off", False)])
def test_the_knob_turns_it_on_or_off(monkeypatch, value, specialized):
    monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", value)
    plan = plan_of(gemm_loop(64, 64, 64))
    assert (plan.producer_warp >= 0) == specialized
    if not specialized:
        assert plan.specialize_reason == "turned off (TILEIRAS_WARP_SPECIALIZE=0)"


@needs_x86
@pytest.mark.parametrize("case, extents", [
    # dynamic K tile counts 1, 2, 3, 4 (S), 5 and 6, with K tails
    ({"m": 64, "n": 64, "k": 64}, (64, 100, 192, 256, 300, 384)),
    ({"m": 64, "n": 64, "k": 64, "ab": "bf16"}, (250,)),
    ({"m": 64, "n": 64, "k": 64, "trips": 3}, (192,)),
], ids=lambda v: str(v))
def test_the_default_ring_matches_the_interpreter(case, extents):
    """Interpreter vs emulated PTX with the asynchrony model and race detector on."""
    text = gemm_loop(**case)
    assert plan_of(text).producer_warp == -1
    for extent in extents:
        assert agrees(text, extent) == [None], extent
