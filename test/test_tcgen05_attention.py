"""Flash attention's K/V loop on ``tcgen05.mma`` (sm_100 family): lower/attention_tma.py
``tcgen05_attention_reason`` and ``plan_attention_ring``, codegen/emit_tcgen05.py
``attention_multiply``.

The ring is the sm_90 one (K and V land by TMA S iterations ahead, in the swizzled
layouts the B descriptors read; Q lands once before the loop); the multiplies are issued
by thread 0 into tensor memory, S = Q @ K^T starting from zeros (nothing stored first),
O = P @ V + O * alpha from O's rescaled registers (``tcgen05.st``); P is stored every
iteration where A's descriptors read it; every thread waits for the commit and reads the
result back (``tcgen05.ld``), then releases the stage.  Q @ K^T of iteration i + 1 is
issued as soon as S(i) is read, into a second S buffer, on its own mbarrier, so that the
tensor core computes it during the softmax of iteration i.

Every kernel is checked against the interpreter in the emulator, CTAs in bursts: tensor
memory cells land only at the waits that cover them, a box only when its mbarrier phase
completes, and the race detector sees the async proxy's reads of shared memory; planted
missing waits, fences and barriers are caught."""
from __future__ import annotations

import re

import numpy as np
import pytest
from llvmlite import ir

from differential import ALIGNED_EXTENT, Case, cached_export, compare, make_inputs, run_interpreter
from kernels import ALL_CASES
from kernels.attention import flash_attention
from tileiras import diffcheck
from tileiras.codegen import emit_tcgen05
from tileiras.diffcheck import compile_with_host
from tileiras.layout.shared import Swizzle
from tileiras.lower.attention_tma import AttentionRingPlan, tcgen05_attention_reason
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.reader import read_bytecode
from tileiras.remarks import collect
from tileiras.text.parser import parse_module
from tileiras.tile.ops_control import ForOp

CASES = {c.name: c for c in ALL_CASES}


def _tas(text: str, arch: str = "sm_100"):
    module = parse_module(text, "k.mlir")
    return run_stages(module, CompileOptions(gpu_name=arch), "tileas", only_needed=True).tas[module.functions[0].name]


def _problems(text: str, burst: bool = True, extent: int = 192) -> list:
    module = parse_module(text, "k.mlir")
    return [r.problem for r in diffcheck.check_module(module, "sm_100", grid=(2, 1, 1), extent=extent,
                                                       interleave=2 if burst else None, burst=burst)]


# -- the decision -------------------------------------------------------------------------------
def test_both_multiplies_run_on_tcgen05_fed_by_the_ring():
    tas = _tas(flash_attention())
    (plan,) = tas.pipelines.values()
    assert isinstance(plan, AttentionRingPlan) and plan.sync is None
    s, o = plan.mmas
    assert tas.tensor_cores[s].tcgen05 and tas.tensor_cores[o].tcgen05
    # S starts from zeros (its first MMA does not read tensor memory); O from its registers.
    # Q @ K^T is issued an iteration ahead, into two buffers of S (64 columns each), then
    # O's 64: a 256-column allocation; S's MMAs commit to their own mbarrier, the last
    assert plan.zero_start == (True, False) and plan.s_ahead
    assert (tas.tmem_columns[s], tas.tmem_columns[o], tas.tmem_alloc) == (0, 128, 256)
    assert plan.smem_end == plan.s_barrier + 8 == plan.q_barrier + 16
    q, p = plan.stagings[0].a, plan.stagings[1].a
    k, v = plan.tiles
    # the softmax's scratch, then Q (landed by TMA, K-major), P (stored every iteration,
    # K-major), then the ring: K lands K-major (keys x head dim), V MN-major, both in the
    # 128-byte swizzle; the bases are 1024-byte aligned (the swizzle's repeat)
    assert plan.q is not None and plan.q.staging.base == q.base
    assert q.base < p.base < plan.ring_base == k.staging.base < v.staging.base
    assert all(x % 1024 == 0 for x in (q.base, p.base, plan.ring_base, v.staging.base))
    assert (q.k_major, p.k_major, k.staging.k_major, v.staging.k_major) == (True, True, True, False)
    assert {q.swizzle, p.swizzle, k.staging.swizzle, v.staging.swizzle} == {Swizzle.B128}
    assert plan.stages >= 2 and plan.consumers == 256


def test_refusals_keep_mma_sync_with_a_reason():
    """Where Q, P and two stages cannot fit, the loop stays on mma.sync; a loop that is not
    attention's is left to the K loop's rules."""
    tas = _tas(flash_attention(bm=128, bn=128, d=256))
    (loop,) = [op for op in tas.aa.function.walk() if isinstance(op, ForOp)]
    assert tcgen05_attention_reason(tas, loop, 100) == "Q, P and two stages of K and V would not fit in shared memory"
    assert not any(f.tcgen05 for f in tas.tensor_cores.values())


def test_the_knob_turns_it_off(monkeypatch):
    monkeypatch.setenv("TILEIRAS_TCGEN05", "0")
    (plan,) = _tas(flash_attention()).pipelines.values()
    assert isinstance(plan, AttentionRingPlan) and plan.sync is not None


def test_remarks_name_tcgen05():
    module = parse_module(flash_attention(), "k.mlir")
    remarks = collect(module, "sm_100")
    (ring,) = [r for r in remarks if r.name == "RemarkSoftwarePipelined"]
    assert ("Copies", "TMA ring into tcgen05.mma's swizzled operands (K/V)") in ring.args
    assert ("Accumulators", "S and O in tensor memory; Q @ K^T issued an iteration ahead, into a second S buffer"
            ) in ring.args
    shapes = [dict(r.args) for r in remarks if r.name == "RemarkTensorCoreMMA"]
    assert [(a["Instruction"], a["Shape"]) for a in shapes] == [("Tensor-core SM100", "[64, 64, 16]")] * 2


def test_the_plan_is_printed_and_parsed():
    from tileiras.lower.tileas_format import format_tileas
    from tileiras.lower.tileas_parse import parse_tileas

    tas = _tas(flash_attention())
    text = format_tileas(tas)
    assert "zero_start = [true, false]" in text
    back = parse_tileas(text, tas.aa)
    (plan,) = back.pipelines.values()
    assert plan.zero_start == (True, False) and format_tileas(back) == text


# -- the code -----------------------------------------------------------------------------------
def test_the_loop_issues_mmas_and_moves_s_and_o_through_tensor_memory():
    ptx = diffcheck.compile_ptx(parse_module(flash_attention(), "k.mlir"), "sm_100")
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    # K = 64 in steps of 16, one 64-row block: four MMAs per multiply; S(0) before the
    # loop, S(i + 1) and P(i) @ V(i) in it
    mmas = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], %rd\d+, %rd\d+, %r\d+, p", ptx)
    assert len(mmas) == 12
    # S's first MMA does not accumulate (its enable-input-d predicate is from 0), the rest do
    values = dict(re.findall(r"mov\.b32\s+(%r\d+), (\d+);", ptx))
    enables = [values[r] for r in re.findall(r"setp\.ne\.b32 p, (%r\d+), 0; tcgen05\.mma", ptx)]
    assert enables == ["0", "1", "1", "1"] * 2 + ["1"] * 4
    # only O goes into tensor memory (16 columns a warp, two halves of 16 rows); S and O
    # come back; three commits (S before the loop, S and O in it)
    assert ptx.count("tcgen05.st.sync.aligned.16x32bx2.x16.b32") == 1
    assert ptx.count("tcgen05.ld.sync.aligned.16x32bx2.x16.b32") == 2
    assert ptx.count("tcgen05.commit.cta_group::1") == 3
    # in the loop, S(i + 1) is issued before the softmax's exponentials of iteration i
    loop = ptx[ptx.index("tcgen05.ld.sync.aligned.16x32bx2"):]
    assert loop.index("tcgen05.mma") < loop.index("ex2.approx")


# -- against the interpreter ----------------------------------------------------------------------
@pytest.mark.parametrize("shape", [
    {}, {"causal": True}, {"d": 128}, {"trips": 3}, {"bn": 128}, {"bm": 128}, {"d": 256},
    {"bm": 128, "bn": 128, "d": 128}, {"views_in_loop": True}, {"bn": 256}],
    ids=["64x64x64", "causal", "d128", "trips3", "bn128", "bm128", "d256", "128x128x128", "views_in_loop", "bn256"])
def test_shapes_match_the_interpreter(shape):
    """Every shape issues Q @ K^T an iteration ahead but bn = 256, whose second S buffer
    (256 columns) would not fit in tensor memory beside the first and O's."""
    tas = _tas(flash_attention(**shape))
    assert all(f.tcgen05 for f in tas.tensor_cores.values())
    (plan,) = tas.pipelines.values()
    assert plan.s_ahead == (shape != {"bn": 256})
    assert _problems(flash_attention(**shape)) == [None]


@pytest.mark.parametrize("aligned", [False, True], ids=["unaligned", "aligned"])
def test_cutile_flash_attention_matches_the_interpreter(aligned):
    """cuTile's export (TileGym's shape): aligned, both multiplies on tcgen05; unaligned
    (no TMA) on mma.sync."""
    case = CASES["flash_attn"]
    data = cached_export({}, case, "sm_100", aligned)
    module = read_bytecode(data)
    ptx, host = compile_with_host(module, "sm_100")
    assert ("tcgen05.mma" in ptx) == aligned and ("mma.sync" in ptx) != aligned
    arrays = make_inputs(case.params[0], np.random.default_rng(5), ALIGNED_EXTENT)
    c = Case(data, module.functions[0].name, arrays, (2, 2, 1))
    got = diffcheck.run_ptx(ptx, c.entry, c.grid, c.args(c.arrays), host_object=host, interleave=2, burst=True)
    assert compare(run_interpreter(c), got) is None


# -- planted faults -------------------------------------------------------------------------------
def test_reading_o_before_its_commit_is_caught(monkeypatch):
    """Without P @ V's wait each thread reads O's cells before the MMAs wrote them."""
    monkeypatch.setattr(emit_tcgen05, "_wait_multiplies", lambda em: None)
    (problem,) = _problems(flash_attention(), burst=False)
    assert problem is not None and "tcgen05.ld" in problem


def test_reading_s_before_its_commit_is_caught(monkeypatch):
    """S(i) is read where its mbarrier phase says the MMAs an iteration ago are done;
    without that wait the cells are still in flight."""
    from tileiras.codegen import emit_attention_tma

    def read_s_without_waiting(em, plan, barrier, parity, column):
        em.put(plan.mma.result, emit_tcgen05._load_accumulator(em, plan.mma, em.tile(plan.mma, 2), column))
    monkeypatch.setattr(emit_attention_tma, "read_s", read_s_without_waiting)
    (problem,) = _problems(flash_attention(), burst=False)
    assert problem is not None and "tcgen05.ld" in problem


def test_one_buffer_of_s_is_a_tensor_memory_race(monkeypatch):
    """With one S buffer, thread 0 would issue S(i + 1) over S(i) while the other warps may
    still be reading it: the race detector's tensor-memory check names the MMA and the
    load, though the emulator happened to run the loads first."""
    from tileiras.codegen import emit_attention_tma

    monkeypatch.setattr(emit_attention_tma, "s_buffer", lambda em, plan, i: ir.Constant(ir.IntType(32), 0))
    (problem,) = _problems(flash_attention(), burst=False)
    assert problem is not None and problem.count("tensor-memory race") == 1
    assert "tcgen05.mma" in problem and "tcgen05.ld" in problem


def test_p_stored_without_the_proxy_fence_is_caught(monkeypatch):
    """P's generic-proxy stores must be fenced before the tensor core (async proxy) reads
    them: the race detector names the MMA."""
    from tileiras.codegen import intrinsics

    class WithoutProxyFence:        # emit_tcgen05's intrinsics, less fence.proxy.async
        def __getattr__(self, name):
            return getattr(intrinsics, name)

        @staticmethod
        def fence_proxy_async(b):
            pass
    monkeypatch.setattr(emit_tcgen05, "X", WithoutProxyFence())
    (problem,) = _problems(flash_attention(), burst=False)
    assert problem is not None and "race" in problem and "tcgen05.mma" in problem


def test_p_stored_without_the_barrier_is_caught(monkeypatch):
    """Thread 0 must not issue P @ V before every thread has stored its part of P."""
    syncs = []
    real = emit_tcgen05._thread_sync

    def third_dropped(b):
        syncs.append(b)
        if len(syncs) != 2:         # tensor memory's, then P @ V's (Q @ K^T from zeros needs none)
            real(b)
    monkeypatch.setattr(emit_tcgen05, "_thread_sync", third_dropped)
    (problem,) = _problems(flash_attention(), burst=False)
    assert problem is not None and "race" in problem and "st.shared" in problem


def test_sm_120_and_sm_90_are_unchanged():
    """tcgen05 is sm_100's: sm_90 keeps wgmma, sm_120 mma.sync reading the ring."""
    assert all(f.warpgroup and not f.tcgen05 for f in _tas(flash_attention(), "sm_90").tensor_cores.values())
    (plan,) = _tas(flash_attention(), "sm_120").pipelines.values()
    assert plan.sync is not None
