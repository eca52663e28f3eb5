"""TMA rings feeding ``mma.sync`` (sm_90 and later), NVIDIA's form for every aligned
``mma.sync`` GEMM there (lower/tma_ring.py with ``mma_forms.MmaRingStaging``,
codegen/emit_ring.py ``_sync_multiply``).

A K loop multiplying with ``mma.sync`` (every multiply on sm_100 and sm_120, small or
8-bit ones on sm_90) whose tiles TMA can copy TMA-loads them into a ring of mbarrier
stages instead of ``cp.async``-copying them: each tile lands in boxes of rows of at most
128 bytes, in TMA's swizzle of that width, which is the XOR swizzle ``ldmatrix`` reads
without bank conflicts (a 128-column f16 B in two boxes, box after box, as NVIDIA's
sm_120 GEMM lands it).  Each consumer reads its stage with ``ldmatrix``, multiplies,
fences its reads for the async proxy and releases the stage.  As with ``wgmma`` rings, a
top-level K loop's ring is not warp-specialized by default (warp 0 refills; the kernel
keeps its 128 threads and its own register count, so several CTAs share an SM), a
persistent GEMM's is; TILEIRAS_WARP_SPECIALIZE=1 gives NVIDIA's split (a producer warp
group beside the 4 consumer warps, 256 threads, ``setmaxnreg``).

Every kernel is checked against the interpreter in the emulator (TMA bytes land only at
the mbarrier phase completion, the race detector on), with our ``.nv.host`` filling the
tensor maps; planted faults (a missing "full" or "empty" wait) are caught."""
from __future__ import annotations

import re

import pytest

from _rings import emulate_ring, without_wait
from kernels.pipelined import gemm_loop
from tileiras import diffcheck
from tileiras.emulate.launch import EmulationError
from tileiras.emulate.nvhost import is_runnable_here
from tileiras.layout.shared import Swizzle, nvmma_shared
from tileiras.lower.mma_forms import MmaRingStaging
from tileiras.lower.software_pipeline import PipelinePlan
from tileiras.lower.tma_ring import RingPlan
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.text.parser import parse_module

needs_x86 = pytest.mark.skipif(not is_runnable_here(), reason=".nv.host is x86-64 code")
COPY = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"


@pytest.fixture(autouse=True)
def _mma_sync_on_sm100(monkeypatch):
    """These tests are about rings that mma.sync reads; on sm_100 the multiplies they
    build run on tcgen05 by default (test_tcgen05.py), so that is turned off here."""
    monkeypatch.setenv("TILEIRAS_TCGEN05", "0")


def tas_of(text: str, arch: str):
    module = parse_module(text, "k.mlir")
    return run_stages(module, CompileOptions(gpu_name=arch), "tileas", only_needed=True).tas[module.functions[0].name]


def plan_of(text: str, arch: str = "sm_120"):
    (decision,) = tas_of(text, arch).pipelines.values()
    return decision


def ptx_of(text: str, arch: str = "sm_120") -> str:
    return diffcheck.compile_ptx(parse_module(text, "k.mlir"), arch)


def agrees(text: str, extent: int, arch: str) -> list:
    return [r.problem for r in diffcheck.check_module(parse_module(text, "k.mlir"), arch, grid=(2, 2, 1),
                                                      extent=extent)]


# -- the decision -------------------------------------------------------------------------------
def test_an_aligned_f16_mma_sync_k_loop_becomes_a_tma_ring():
    tas = tas_of(gemm_loop(64, 64, 32), "sm_120")
    (plan,) = tas.pipelines.values()
    assert isinstance(plan, RingPlan) and plan.sync and isinstance(plan.staging, MmaRingStaging)
    a, b = plan.staging.a, plan.staging.b
    # A's 64-byte rows in the 64-byte swizzle, B's 128-byte rows in the 128-byte one, B 1024-aligned
    assert (a.swizzle, b.swizzle, a.base, b.base) == (Swizzle.B64, Swizzle.B128, 0, 4096)
    assert plan.box == ((64, 32), (32, 64)) and plan.boxes == (1, 1) and plan.tx_bytes == 8192
    assert [(s.box, s.swizzle) for s in plan.specs] == [((32, 64), 2), ((64, 32), 3)]
    # nothing stays in flight: ldmatrix has read the stage when the multiply is issued
    assert plan.in_flight == 0 and "synchronously" in plan.serial_reason
    # not warp-specialized by default: warp 0 refills, the CTA keeps its 128 threads
    assert (plan.producer_warp, plan.consumers, tas.num_threads) == (-1, 128, 128)
    assert plan.stages == 4 and plan.source == "default (mma.sync consumers)"
    assert not set(plan.loads) & set(tas.tma) and plan.mma not in tas.wgmma_staging
    assert tas.smem_align >= 1024


def test_the_landed_layouts_are_what_the_tensor_maps_write():
    """Each operand's layout (offset -> element) is the one a tensor map with its swizzle
    writes its boxes in (``nvmma_shared``), and is ``ldmatrix``'s XOR swizzle: a row of
    128 bytes has its 16-byte chunk c at c ^ (row % 8)."""
    plan = plan_of(gemm_loop(128, 128, 32))
    a, b = plan.staging.a, plan.staging.b
    assert a.layout == nvmma_shared((128, 32), 2, Swizzle.B64)
    assert b.layout == nvmma_shared((32, 128), 2, Swizzle.B128)
    assert (b.form.box_cols, b.form.pitch, plan.boxes, plan.box[1]) == (64, 64, (1, 2), (32, 64))
    offset_of = {b.layout.apply(offset=o): o for o in range(32 * 128)}
    for row, col in ((0, 0), (3, 8), (5, 70), (31, 127)):
        box, inner = divmod(col, 64)
        chunk = (inner // 8) ^ (row % 8)
        assert offset_of[(row, col)] == box * 32 * 64 + row * 64 + chunk * 8 + col % 8


@pytest.mark.parametrize("case, arch", [
    ({"m": 64, "n": 64, "k": 64, "nt": True}, "sm_120"),      # B N x K, permuted in the loop
    ({"m": 64, "n": 64, "k": 64, "bcol": True}, "sm_120"),    # B read through dim_map [1, 0]
    ({"m": 64, "n": 128, "k": 128}, "sm_100"),                # A's rows 256 bytes: two boxes
    ({"m": 32, "n": 64, "k": 64}, "sm_90"),                   # too few rows for wgmma
    ({"m": 64, "n": 64, "k": 64, "ab": "f8E4M3FN", "bcol": True}, "sm_120"),   # cuTile's fp8 GEMM
    ({"m": 64, "n": 32, "k": 64, "ab": "i8", "acc": "i32", "bcol": True}, "sm_120"),
    ({"m": 64, "n": 32, "k": 64, "ab": "i8", "acc": "i32"}, "sm_120"),     # K x N: read a byte at a time
])
def test_other_operand_forms_are_landed_for_ldmatrix(case, arch):
    plan = plan_of(gemm_loop(**case), arch)
    assert isinstance(plan, RingPlan) and plan.sync, plan
    assert plan.staging.b_k_rows == bool(case.get("nt") or case.get("bcol"))
    assert plan.boxes[0] == case["k"] * 2 // 128 or plan.boxes[0] == 1


@pytest.mark.parametrize("case, arch, reason", [
    ({"m": 64, "n": 64, "k": 64, "ab": "f8E4M3FN", "bcol": True, "acol": True}, "sm_120", "column-major A"),
])
def test_loops_no_ring_lands_for_mma_sync_keep_the_cp_async_ring(case, arch, reason):
    plan = plan_of(gemm_loop(**case), arch)
    assert isinstance(plan, PipelinePlan) or reason in plan, plan


def test_a_column_major_a_lands_as_k_rows_of_m_read_transposed():
    """A read through its dims swapped (a K x M tensor, a backward pass's X^T): its boxes
    are K x M as it lies, in TMA's swizzle of M's rows, and ``ldmatrix.trans`` reads A's
    fragments from them."""
    text = gemm_loop(128, 128, 32, acol=True)
    plan = plan_of(text)
    assert plan.sync and plan.a_columns and plan.staging.a_columns
    assert plan.box[0] == (32, 64) and plan.boxes[0] == 2 and plan.specs[0].box == (64, 32)
    assert plan.staging.a.layout == nvmma_shared((32, 128), 2, Swizzle.B128)
    loop = ptx_of(text)
    loop = loop[loop.index("mbarrier.try_wait.parity"):loop.index("mbarrier.inval")]
    # A: 2 row blocks a warp, 2 K steps, transposed; B: 16 column blocks in pairs, 2 K steps
    assert loop.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 4 + 16
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" not in loop


@pytest.mark.parametrize("arch", ["sm_120"])
def test_an_8bit_k_by_n_b_is_read_from_its_swizzled_rows(arch: str):
    """Before sm_100 no ``ldmatrix`` transposes bytes (an unpipelined multiply then packs
    each B register from four K rows' bytes of one column, ``ld.shared.b8``).  On
    sm_100 and sm_120 one ``ldmatrix.m16n16.x2.trans.b8`` reads a K step of two column
    blocks, lane l at K row l, its 16-byte chunk XORed with the row's phase (NVIDIA's sm_120
    fp8 GEMMs: no byte loads)."""
    text = gemm_loop(64, 32, 64, ab="i8", acc="i32")
    plan = plan_of(text, arch)
    assert plan.sync and not plan.staging.b_k_rows and plan.staging.b.swizzle is Swizzle.B32
    loop = ptx_of(text, arch)
    loop = loop[loop.index("mbarrier.try_wait.parity"):loop.index("mbarrier.inval")]
    loads = len(re.findall(r"ld\.shared\.(?:u|b)8", loop))
    matrices = loop.count("ldmatrix.sync.aligned.m16n16.x2.trans.shared.b8")
    assert not loads and matrices and matrices % 2 == 0     # K steps of 32: two a trip


def test_the_knobs_turn_the_ring_off_and_its_specialization_on(monkeypatch):
    """TILEIRAS_WARP_SPECIALIZE=1: NVIDIA's split, a producer warp group beside the 4
    consumer warps (256 threads) and the ring deepened to what shared memory holds."""
    text = gemm_loop(64, 64, 32)
    assert "not by default" in plan_of(text).specialize_reason
    monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", "1")
    plan = plan_of(text)
    assert plan.sync and (plan.producer_warp, plan.consumers, plan.registers) == (4, 128, (32, 248))
    assert plan.stages == 8 and tas_of(text, "sm_120").num_threads == 256
    monkeypatch.setenv("TILEIRAS_MMA_TMA_RING", "0")
    assert isinstance(plan_of(text), PipelinePlan)


# -- the code -----------------------------------------------------------------------------------
def test_warp_specialized_mma_sync_ring_ptx_structure(monkeypatch):
    """(TILEIRAS_WARP_SPECIALIZE=1) The consumers wait on "full", read the stage with ``ldmatrix`` (no copy, no CTA
    barrier), multiply, fence their reads for the async proxy and arrive on "empty"; the
    producer warp's first thread issues every box after its "empty" wait."""
    monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", "1")
    ptx = ptx_of(gemm_loop(128, 128, 32, hints="sm_120 = {num_stages = 4}"))
    assert ".reqntid 256" in ptx and "cp.async.cg" not in ptx
    consumer = ptx[ptx.index("setmaxnreg.inc"):]
    consumer = consumer[:consumer.index("mbarrier.inval")]
    loop = consumer[consumer.index("mbarrier.try_wait.parity"):consumer.rindex("mbarrier.arrive.shared::cta.b64")]
    loop += "mbarrier.arrive.shared::cta.b64"
    assert COPY not in consumer and "bar.sync" not in loop and "expect_tx" not in consumer
    assert loop.index("ldmatrix.sync.aligned.m8n8.x4.shared.b16") < loop.index("mma.sync.aligned.m16n8k16") \
        < loop.index("fence.proxy.async.shared::cta") < loop.index("mbarrier.arrive.shared::cta.b64")
    # each warp 32 rows x 128 columns: B 16 column blocks read in pairs, A 2 row blocks, 2 K steps
    assert loop.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 16
    assert loop.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 4
    # the producer's code (LLVM may place parts of its loop after the consumers'): per stage
    # A's box and B's two
    producer = ptx[ptx.index("setmaxnreg.dec"):ptx.index("setmaxnreg.inc")]
    assert ptx.count(COPY) % 3 == 0 and COPY in producer
    assert producer.index("mbarrier.try_wait.parity") < producer.index("expect_tx") < producer.index(COPY)
    expects = re.findall(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 %rd\d+, \[%r\d+\], (\d+);", ptx)
    assert expects and set(expects) == {"16384"} and 3 * len(expects) == ptx.count(COPY)   # a stage's bytes


def test_unspecialized_ring_refills_from_warp_0():
    ptx = ptx_of(gemm_loop(64, 64, 32, hints="sm_120 = {num_stages = 3}"))
    assert ".reqntid 128" in ptx and "setmaxnreg" not in ptx
    loop = ptx[ptx.index("mbarrier.try_wait.parity"):ptx.index("mbarrier.inval")]
    # per iteration: full wait, reads, multiply, release, then warp 0's empty wait and refill
    assert loop.index("ldmatrix") < loop.index("mbarrier.arrive.shared::cta.b64") \
        < loop.index("mbarrier.arrive.expect_tx") < loop.index(COPY)


@needs_x86
@pytest.mark.parametrize("case, arch", [
    ({"m": 64, "n": 64, "k": 32}, "sm_120"),
    ({"m": 128, "n": 128, "k": 32}, "sm_120"),
    ({"m": 64, "n": 64, "k": 64, "nt": True}, "sm_120"),
    ({"m": 64, "n": 64, "k": 64, "bcol": True, "ab": "bf16"}, "sm_120"),
    ({"m": 64, "n": 128, "k": 128}, "sm_100"),
    ({"m": 32, "n": 64, "k": 64}, "sm_90"),
    ({"m": 64, "n": 64, "k": 32, "trips": 1}, "sm_120"),        # fewer trips than stages
    ({"m": 64, "n": 64, "k": 32, "hints": "sm_120 = {num_stages = 2}"}, "sm_120"),
    ({"m": 64, "n": 64, "k": 64, "ab": "f8E4M3FN", "bcol": True}, "sm_120"),
    ({"m": 32, "n": 64, "k": 64, "ab": "f8E5M2", "bcol": True}, "sm_100"),
    ({"m": 64, "n": 64, "k": 256, "ab": "f8E4M3FN", "nt": True}, "sm_120"),  # 256-byte rows: two boxes each
    ({"m": 64, "n": 32, "k": 64, "ab": "i8", "acc": "i32", "bcol": True}, "sm_120"),
    ({"m": 64, "n": 64, "k": 32, "acol": True}, "sm_120"),             # A K x M: ldmatrix.trans
    ({"m": 128, "n": 128, "k": 32, "acol": True}, "sm_120"),           # ... in two boxes of M
    ({"m": 32, "n": 64, "k": 64, "acol": True, "nt": True}, "sm_90"),
    ({"m": 64, "n": 32, "k": 64, "ab": "i8", "acc": "i32"}, "sm_120"),       # 8-bit K x N B: byte loads
    ({"m": 32, "n": 32, "k": 32, "ab": "i8", "acc": "i32"}, "sm_90"),
    ({"m": 64, "n": 256, "k": 64, "ab": "f8E5M2"}, "sm_100"),                 # ... in two boxes of N
])
def test_mma_sync_ring_gemm_matches_interpreter(case, arch):
    """Dynamic trip counts (the views' K tiles) with K tails (boxes partly outside the
    tensor land zeros), against the interpreter."""
    text = gemm_loop(**case)
    assert plan_of(text, arch).sync
    for extent in (48, 200):
        assert agrees(text, extent, arch) == [None], extent


@needs_x86
def test_specialized_mma_sync_ring_matches_interpreter(monkeypatch):
    monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", "1")
    text = gemm_loop(64, 128, 32, hints="sm_120 = {num_stages = 3}")
    assert plan_of(text).producer_warp == 4
    for extent in (48, 300):
        assert agrees(text, extent, "sm_120") == [None], extent


# -- planted faults -----------------------------------------------------------------------------
@needs_x86
def test_a_missing_full_wait_is_caught():
    """``ldmatrix`` reading a stage whose TMA bytes have not landed is trapped."""
    text = gemm_loop(64, 64, 32, hints="sm_120 = {num_stages = 3}")
    emulate_ring(text, 200, "sm_120")
    with pytest.raises(EmulationError, match=r"async: .*ldmatrix.* reads shared byte"):
        emulate_ring(text, 200, "sm_120", lambda ptx: without_wait(ptx, "full", "ldmatrix"))


@needs_x86
def test_a_refill_without_the_empty_wait_is_caught():
    """Without the "empty" waits the producer's boxes overwrite stages the consumers may
    still be reading (the race detector's catch), or it runs a ring ahead and arrives on
    a "full" mbarrier whose previous phase's bytes have not landed."""
    text = gemm_loop(64, 64, 32, hints="sm_120 = {num_stages = 2}")
    emulate_ring(text, 400, "sm_120")
    with pytest.raises(EmulationError, match=r"(async|race): .*(cp\.async\.bulk\.tensor|ldmatrix)|mbarrier: .*expect_tx"):
        emulate_ring(text, 400, "sm_120", lambda ptx: without_wait(ptx, "empty", "ldmatrix"))


def test_remarks_say_the_loop_is_a_tma_ring_read_with_ldmatrix(tmp_path, capsys):
    from tileiras.driver import main as driver_main

    from _build import bytecode_file

    path = bytecode_file(tmp_path, gemm_loop(64, 64, 32), name="r.tileir")
    assert driver_main([str(path), "--gpu-name", "sm_120", "-o", str(tmp_path / "k.cubin"), "--remarks=tensorcore"]) == 0
    out = capsys.readouterr().out
    assert "K loop software-pipelined with 4 stages" in out and "TMA ring into ldmatrix's swizzled operands" in out
    assert "WgmmaInFlight" not in out and "WarpSpecialized = no (not by default" in out
