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

import pytest

from _rings import emulate_ring, without_wait
from kernels.pipelined import gemm_loop
from tileiras import diffcheck
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


@pytest.fixture(autouse=True)
def specialized(monkeypatch):
    """Most tests here read warp-specialized rings, which TILEIRAS_WARP_SPECIALIZE=1 turns
    on (by default a ring is not specialized: test_ring_default.py)."""
    monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", "1")


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
def test_an_aligned_f16_wgmma_k_loop_becomes_a_tma_ring(monkeypatch):
    tas = tas_of(gemm_loop(64, 64, 64))
    (plan,) = tas.pipelines.values()
    # warp-specialized: the consumers hold the SM's registers, the ring its shared memory
    assert isinstance(plan, RingPlan) and plan.source == "shared memory (warp-specialized)" and plan.stages == 8
    monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", "0")
    unspecialized = plan_of(nested(gemm_loop(64, 64, 64)))
    assert unspecialized.source == "measured floor (the modulo schedule's 3)" and unspecialized.stages == 4
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


@pytest.mark.parametrize("ab, k", [("f16", 64), ("f8E4M3FN", 128)])
def test_a_column_major_b_view_is_landed_k_major(ab, k):
    """B read through its dims swapped (``dim_map [1, 0]`` over an N x K tensor, as cuTile
    exports an fp8 GEMM's K-major B): its boxes are N x K as it lies, landed K-major,
    their coordinates the view's indices swapped."""
    text = gemm_loop(64, 64, k, ab=ab, bcol=True)
    plan = plan_of(text)
    assert isinstance(plan, RingPlan), plan
    assert plan.b_columns and not plan.b_transposed and plan.staging.b.k_major
    inner = 128 // (2 if ab == "f16" else 1)
    assert plan.box[1] == (64, inner) and plan.specs[1].box == (inner, 64)


def test_a_column_major_a_view_is_landed_mn_major():
    """A read through its dims swapped (a K x M tensor, as a backward pass's X^T is): boxes
    K x M as it lies, landed MN-major (wgmma's transposed A, 16-bit only)."""
    plan = plan_of(gemm_loop(64, 64, 64, acol=True))
    assert isinstance(plan, RingPlan), plan
    assert plan.a_columns and not plan.staging.a.k_major and plan.staging.a.transposed
    assert plan.box[0] == (64, 64) and plan.specs[0].box == (64, 64)
    fp8 = plan_of(gemm_loop(64, 64, 64, ab="f8E4M3FN", acol=True, bcol=True))     # no MN-major 8-bit A
    assert isinstance(fp8, str) and "no swizzled layout" in fp8, fp8


def test_the_stage_count_comes_from_the_hint_the_trip_count_and_shared_memory():
    assert (plan_of(gemm_loop(64, 64, 64, hints="sm_90 = {num_stages = 5}")).stages, ) == (5, )
    assert plan_of(gemm_loop(64, 64, 64, trips=1, hints="sm_90 = {num_stages = 4}")).stages == 2
    assert plan_of(gemm_loop(64, 64, 64, trips=3, hints="sm_90 = {num_stages = 4}")).stages == 3
    assert plan_of(gemm_loop(64, 64, 64, trips=5)).stages == 5         # specialized: no more than the trips
    assert plan_of(gemm_loop(64, 64, 64, trips=12)).stages == 8        # nor than NVIDIA's 8
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
    # two warpgroups on one 64-row block: their accumulator columns interleave along N
    (gemm_loop(64, 64, 64, hints=WARPS8), "warpgroups interleaved along N"),
])
def test_loops_it_cannot_ring_keep_todays_code(text, reason):
    decision = plan_of(text)
    assert isinstance(decision, str) and reason in decision, decision
    assert "mbarrier.try_wait" not in ptx_of(text) or "st.shared" in ptx_of(text)


def test_an_8_bit_b_lying_k_by_n_is_transposed_in_the_stage():
    """wgmma reads 8-bit operands K-major only: B's boxes land MN-major and the consumers
    copy it K-major within each stage (``RingPlan.b_landed``; once refused)."""
    text = gemm_loop(64, 64, 64, ab="f8E4M3FN")
    plan = plan_of(text)
    assert isinstance(plan, RingPlan) and plan.b_landed is not None and plan.staging.b.k_major
    problems = diffcheck.check_module(parse_module(text, "k.mlir"), "sm_90", grid=(2, 2, 1))
    assert [r.problem for r in problems] == [None]


# -- the code -----------------------------------------------------------------------------------
def nested(text: str) -> str:
    """``gemm_loop``'s K loop inside a one-trip outer loop: not at the kernel's top level."""
    head = "    %for = for %i in"
    start = text.index(head)
    end = text.index("    }\n", start) + len("    }\n")
    inner = text[start:end].replace("iter_values(%acc = %z)", "iter_values(%acc = %w)")
    acc = re.search(r"-> \((tile<[^)]*>)\)", inner).group(1)
    outer = (f"    %out = for %o in (%c0 to %c1, step %c1) : tile<i32> iter_values(%w = %z) -> ({acc}) {{\n"
             + inner + f"    continue %for : {acc}\n    }}\n")
    return text[:start] + outer + text[end:].replace("store_view_tko weak %for,", "store_view_tko weak %out,")


COPY = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"


def test_warp_specialized_ring_ptx_structure():
    """NVIDIA's split: 256 threads; warps 0-3 consume, warp group 4-7 lowers its registers
    (``setmaxnreg.dec 32``), warp 4 produces (the "empty" wait, then its first thread's
    ``expect_tx`` and boxes) and the group leaves; the consumers raise theirs to the CTA's
    share (``setmaxnreg.inc``, which ptxas takes as the kernel's register count) and per
    iteration wait on "full", multiply leaving one group in flight and release the
    previous stage on "empty" (128 arrivals), with no copy, no CTA barrier and no
    shared-memory access of the operands; after the loop ``wait_group 0`` before anything
    reads the accumulator."""
    text = gemm_loop(64, 64, 64, hints="sm_90 = {num_stages = 4}")
    plan = plan_of(text)
    assert (plan.producer_warp, plan.consumers, plan.registers, plan.specialize_reason) == (4, 128, (32, 248), "")
    assert tas_of(text).num_threads == 256
    ptx = ptx_of(text)
    assert ".reqntid 256" in ptx
    # a "full" (1 arrival) and an "empty" (the 128 consumers) mbarrier per stage
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 1;", ptx)) == 4
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 128;", ptx)) == 4
    assert ptx.count("mbarrier.inval.shared::cta.b64") == 8
    assert len(re.findall(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 %rd\d+, \[%r\d+\], 16384;", ptx)) >= 1
    # the maps prefetched by the producer thread (128) at kernel start
    prefetches = re.findall(r"setp\.eq\.u32 p, %r\d+, 128; @p prefetch\.tensormap \[(%rd\d+)\];", ptx)
    assert len(prefetches) == 2 and ptx.index("prefetch.tensormap") < ptx.index("mbarrier.init")
    for reg, param in zip(prefetches, ("k_param_13", "k_param_14")):
        assert f"mov.b64 {reg}, {param}; cvta.param.u64 {reg}, {reg};" in ptx
    split = ptx.index("setmaxnreg.dec.sync.aligned.u32 32;")
    consumer = ptx[ptx.index("setmaxnreg.inc.sync.aligned.u32 248;"):ptx.index("wgmma.wait_group.sync.aligned 0;")]
    assert ptx.index("mbarrier.init") < split and "ret;" in ptx[split:]
    assert COPY not in consumer and "expect_tx" not in consumer and "bar.sync" not in consumer
    assert "st.shared" not in consumer and "ld.shared" not in consumer
    assert consumer.count("mbarrier.try_wait.parity") == 1 and consumer.count("wgmma.mma_async") == 4
    assert consumer.count("wgmma.commit_group") == 1 and consumer.count("wgmma.wait_group.sync.aligned 1;") == 1
    after = consumer[consumer.index("wgmma.wait_group.sync.aligned 1;"):]
    assert "mbarrier.arrive.shared::cta.b64" in after
    # the producer: every copy outside the consumers' code, after an "empty" wait
    producer = ptx[split:ptx.index("setmaxnreg.inc")] + ptx[ptx.index("wgmma.wait_group.sync.aligned 0;"):]
    assert producer.count(COPY) == ptx.count(COPY) >= 2
    assert producer.index("mbarrier.try_wait.parity") < producer.index("expect_tx") < producer.index(COPY)
    drain = ptx[ptx.index("wgmma.wait_group.sync.aligned 0;"):]
    assert drain.index("bar.sync 0;") < drain.index("mbarrier.inval") < drain.index("st.shared")
    assert ".shared .align 1024" in ptx


def test_ring_ptx_structure_unspecialized(monkeypatch):
    """A ring not warp-specialized (TILEIRAS_WARP_SPECIALIZE=0) inside another loop stays on
    the worker warps (128 threads) and is persistent (test_persistent_ring.py): its mbarriers initialized once, before the outer loop, and
    never invalidated; per entry a barrier, then S-1 stages of one A and one B box (thread
    0, no "empty" wait: the previous entry released every stage); per iteration the "full" wait, wgmma with one group in flight, every
    thread's release of the previous stage, then warp 0's "empty" wait and thread 0's
    refill; no CTA barrier in the loop."""
    monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", "0")
    text = nested(gemm_loop(64, 64, 64, hints="sm_90 = {num_stages = 4}"))
    plan = plan_of(text)
    assert plan.producer_warp == -1 and "turned off" in plan.specialize_reason and plan.persistent
    ptx = ptx_of(text)
    assert ".reqntid 128" in ptx and "setmaxnreg" not in ptx and "mbarrier.inval" not in ptx
    assert ptx.count(COPY) == 2 * 3 + 2
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 128;", ptx)) == 4
    assert ptx.rindex("mbarrier.init") < ptx.index("bar.sync 0;") < ptx.index("mbarrier.arrive.expect_tx") \
        < ptx.index("mbarrier.try_wait.parity")
    loop = ptx[ptx.index("wgmma.fence"):ptx.rindex(COPY) + len(COPY)]
    # persistent: the last iteration waits for its own group, in the loop (_complete_last)
    assert loop.count("wgmma.wait_group.sync.aligned 0;") == 1
    assert loop.count(COPY) == 2 and loop.count("wgmma.mma_async") == 4
    assert "bar.sync" not in loop and loop.count("wgmma.wait_group.sync.aligned 1;") == 1
    after = loop[loop.index("wgmma.wait_group.sync.aligned 1;"):]
    # release (every thread), then warp 0's empty wait, then thread 0's refill
    assert after.index("mbarrier.arrive.shared::cta.b64") < after.index("mbarrier.try_wait.parity") \
        < after.index("mbarrier.arrive.expect_tx") < after.index(COPY)
    assert re.search(r"setp\.eq\.u32 p, %r\d+, 0; @p prefetch\.tensormap", ptx)


def test_a_converted_accumulator_keeps_no_group_in_flight():
    """f16 accumulators are summed in f32 registers and rounded after each multiply: the
    rounding would touch an in-flight group, so each iteration waits for its own."""
    plan = plan_of(gemm_loop(64, 64, 64, acc="f16"))
    assert plan.in_flight == 0 and "converted" in plan.serial_reason
    loop = loop_of(ptx_of(gemm_loop(64, 64, 64, acc="f16")))
    assert "wgmma.wait_group.sync.aligned 1;" not in loop and "mbarrier.arrive.shared::cta.b64" in loop
    assert plan_of(gemm_loop(64, 64, 64)).in_flight == 1


@needs_x86
@pytest.mark.parametrize("case, extents", [
    # (gemm_loop arguments, extents: dynamic K tile counts 1, 2, 3 (S), 4, 6, with K tails;
    # past about 7 tiles the interpreter's f32 sums and the emulated wgmma's differ in the
    # last bits of a few cancelling sums, as they do without the ring)
    ({"m": 64, "n": 64, "k": 64}, (64, 100, 192, 250, 384)),
    ({"m": 64, "n": 64, "k": 64, "hints": "sm_90 = {num_stages = 4}"}, (192, 256)),       # S-1, S
    # the producer wraps around the ring: up to 3 uses of a stage ("empty" parities 1, 0, 1)
    ({"m": 64, "n": 64, "k": 64, "hints": "sm_90 = {num_stages = 2}"}, (384,)),
    ({"m": 64, "n": 64, "k": 64, "hints": "sm_90 = {num_stages = 3}"}, (320,)),
    ({"m": 128, "n": 128, "k": 64, "hints": WARPS8 + ", sm_90 = {num_stages = 2}"}, (320,)),
    ({"m": 64, "n": 64, "k": 64, "trips": 1}, (100,)),
    ({"m": 64, "n": 64, "k": 64, "trips": 5}, (100,)),                  # past the tensor: zero boxes
    ({"m": 64, "n": 128, "k": 64, "ab": "bf16"}, (200,)),
    ({"m": 64, "n": 32, "k": 32}, (100,)),                              # 64-byte swizzles
    ({"m": 64, "n": 64, "k": 64, "nt": True}, (150,)),                  # B K-major
    ({"m": 128, "n": 128, "k": 128, "hints": WARPS8}, (260,)),          # two warpgroups, two boxes
    ({"m": 64, "n": 64, "k": 64, "acc": "f16"}, (100,)),
    ({"m": 64, "n": 64, "k": 64, "join": True}, (130,)),
    ({"m": 64, "n": 64, "k": 128, "ab": "f8E4M3FN", "nt": True}, (300,)),   # fp8, both K-major
    ({"m": 64, "n": 64, "k": 64, "bcol": True}, (150, 250)),            # B's view transposed: K-major
    ({"m": 64, "n": 64, "k": 64, "acol": True}, (150, 250)),            # A's view transposed: MN-major
    ({"m": 128, "n": 64, "k": 32, "acol": True, "nt": True, "hints": WARPS8}, (160,)),
    ({"m": 64, "n": 128, "k": 128, "ab": "f8E4M3FN", "bcol": True}, (300,)),
], ids=lambda v: str(v))
def test_ring_gemm_matches_interpreter(case, extents):
    """Interpreter vs emulated PTX, asynchrony model and race detector on."""
    text = gemm_loop(**case)
    assert isinstance(plan_of(text), RingPlan)
    for extent in extents:
        assert agrees(text, extent) == [None], extent


@needs_x86
@pytest.mark.parametrize("case, extents", [
    ({"m": 64, "n": 64, "k": 64}, (64, 192, 250)),
    ({"m": 128, "n": 128, "k": 128, "hints": WARPS8}, (260,)),
    ({"m": 64, "n": 64, "k": 64, "acc": "f16"}, (100,)),
    ({"m": 64, "n": 64, "k": 64, "hints": "sm_90 = {num_stages = 2}"}, (384,)),     # wraps around
], ids=lambda v: str(v))
@pytest.mark.parametrize("specialize", ["1", "0"])
def test_persistent_ring_matches_interpreter(case, extents, specialize, monkeypatch):
    """The ring inside another loop (persistent): its producer warp running the outer loop
    too, or (TILEIRAS_WARP_SPECIALIZE=0) worker warps only, warp 0 refilling."""
    monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", specialize)
    text = nested(gemm_loop(**case))
    plan = plan_of(text)
    assert plan.persistent and (plan.producer_warp == -1) == (specialize == "0")
    for extent in extents:
        assert agrees(text, extent) == [None], extent


def test_specialized_ring_gemms_keep_nvidias_cta_size():
    """The warp-specialized ring's CTA is the workers plus one warp group, NVIDIA's 256
    threads for 4 workers; 8 workers take 384 threads and a smaller register share."""
    assert [(tas_of(t).num_threads, plan_of(t).registers) for t in
            (gemm_loop(64, 64, 64), gemm_loop(128, 128, 64, hints=WARPS8))] == [(256, (32, 248)), (384, (32, 168))]


def _emulate(text: str, extent: int, edit=None):
    return emulate_ring(text, extent, "sm_90", edit)


def _without_wait(ptx: str, which: str) -> str:
    return without_wait(ptx, which, "wgmma.fence")


@needs_x86
def test_a_missing_full_wait_is_caught():
    """The steady state's "full" wait made to succeed at once: wgmma reads a stage whose
    TMA bytes have not landed, which the emulator traps."""
    text = gemm_loop(64, 64, 64, hints="sm_90 = {num_stages = 3}")
    _emulate(text, 200)
    with pytest.raises(EmulationError, match=r"async: .*wgmma.* reads shared byte"):
        _emulate(text, 200, lambda ptx: _without_wait(ptx, "full"))


@needs_x86
@pytest.mark.parametrize("hints", [", sm_90 = {num_stages = 3}", ", sm_90 = {num_stages = 2}"])
def test_a_refill_without_the_empty_wait_is_caught(hints):
    """Without the "empty" waits the producer refills stages the consumers' wgmma still
    read (in flight, or retired with nothing ordering the refill after it: the race
    detector's catch), or runs a whole ring ahead and arrives on a "full" mbarrier whose
    previous phase's bytes have not landed."""
    text = gemm_loop(128, 64, 64, hints=WARPS8 + hints)
    _emulate(text, 400)
    with pytest.raises(EmulationError, match=r"(async|race): .*cp\.async\.bulk\.tensor.*wgmma|mbarrier: .*expect_tx"):
        _emulate(text, 400, lambda ptx: _without_wait(ptx, "empty"))


@needs_x86
def test_reading_the_accumulator_before_wait_group_0_is_caught():
    """Without the drain's ``wait_group 0`` the epilogue reads registers of the last
    iteration's in-flight wgmma."""
    text = gemm_loop(64, 64, 64)
    _emulate(text, 250)
    with pytest.raises(EmulationError, match=r"async: .*uses %r\d+, a register of the in-flight .*wgmma"):
        _emulate(text, 250, lambda ptx: ptx.replace("wgmma.wait_group.sync.aligned 0;", "", 1))


def test_remarks_say_the_loop_is_a_tma_ring(tmp_path, capsys):
    from tileiras.driver import main as driver_main

    from _build import bytecode_file

    path = bytecode_file(tmp_path, gemm_loop(64, 64, 64, hints="sm_90 = {num_stages = 4}"), name="r.tileir")
    assert driver_main([str(path), "--gpu-name", "sm_90", "-o", str(tmp_path / "k.cubin"), "--remarks=tensorcore"]) == 0
    out = capsys.readouterr().out
    assert "K loop software-pipelined with 4 stages" in out and "TMA ring" in out
    assert "WgmmaInFlight = 1" in out and "WarpSpecialized = producer warp 4" in out
