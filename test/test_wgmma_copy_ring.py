"""sm_90 ``wgmma`` K loops that TMA does not feed: a ring of ``cp.async`` stages instead.

A grouped GEMM makes its operands' views at run time from its table of arrays, so no tensor
map exists at launch: by default the kernel builds them itself (``test_device_maps.py``);
with ``TILEIRAS_DEVICE_TENSOR_MAPS=0``, as here, no TMA ring can copy its tiles.  The loop
is still pipelined: its tiles are copied by 16-byte
``cp.async`` straight into the swizzled layouts ``wgmma``'s descriptors read
(``software_pipeline._wgmma_copy_ring``), each thread fencing its copies for the async
proxy before the barrier (``emit_async``).  The emulator checks each of the three orders
this relies on: a planted fault in any of them is caught."""
from __future__ import annotations

import re
from collections import Counter

import pytest

pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels.lists import GROUPED_MATMUL_WIDE  # noqa: E402

from tileiras import diffcheck  # noqa: E402
from tileiras.codegen import emit_async  # noqa: E402
from tileiras.codegen import intrinsics as X  # noqa: E402
from tileiras.lower.software_pipeline import PipelinePlan  # noqa: E402
from tileiras.pipeline import CompileOptions, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

_module = []


@pytest.fixture(autouse=True)
def no_device_maps(monkeypatch):
    monkeypatch.setenv("TILEIRAS_DEVICE_TENSOR_MAPS", "0")


def module():
    if not _module:
        _module.append(read_bytecode(export(GROUPED_MATMUL_WIDE, "sm_90")))
    return _module[0]


def plan() -> PipelinePlan:
    (tas,) = run_stages(module(), CompileOptions(gpu_name="sm_90"), "tileas").tas.values()
    (decision,) = tas.pipelines.values()
    assert isinstance(decision, PipelinePlan), decision
    return decision


def test_the_loop_is_a_copy_ring_in_wgmma_layouts():
    p = plan()
    assert p.staging is not None and p.staging.a is not None
    assert p.copy_bytes == (16, 16)
    assert p.stages >= 2 and p.stage_bytes % p.staging.align == 0
    # A (64 x 32 f16: 64-byte rows) and B (32 x 64, N contiguous: 128-byte rows), swizzled
    assert (p.staging.a.swizzle.width, p.staging.b.swizzle.width) == (64, 128)
    assert not p.staging.b.k_major


def test_ptx_copies_fences_and_multiplies():
    ptx = diffcheck.compile_ptx(module(), "sm_90")
    counts = Counter(re.findall(r"cp\.async\.cg|cp\.async\.wait_group \d+|fence\.proxy\.async|wgmma\.mma_async|"
                                r"mma\.sync|ld\.global\.v\d\.b\d+|ld\.global\.b\d+", ptx))
    p = plan()
    stages = p.stages
    assert counts["wgmma.mma_async"] == 2 and counts["mma.sync"] == 0
    # a wgmma group stays in flight: the copies go S-2 iterations ahead (the stage the
    # previous group reads is still busy), each 2 copies of A and 2 of B a thread: the
    # prologue's S-2 stages and the loop's one
    assert (p.in_flight, p.ahead, p.serial_reason) == (1, stages - 2, "")
    assert counts["cp.async.cg"] == 4 * (stages - 1)
    assert counts[f"cp.async.wait_group {stages - 3}"] == 1 and counts["fence.proxy.async"] == 1
    assert "wgmma.wait_group.sync.aligned 1;" in ptx
    # the last iteration waits for its own group, in the loop (emit_async.complete_last)
    assert ptx.count("wgmma.wait_group.sync.aligned 0;") == 1
    # the only global loads left read the groups' table rows (the operands arrive by cp.async)
    assert set(k for k in counts if k.startswith("ld.global")) == {"ld.global.b64"}


@pytest.mark.parametrize("warps, source", [(4, "measured floor (the modulo schedule's 2)"), (None, "modulo schedule")])
def test_a_large_tile_takes_the_measured_floor_of_stages(warps, source):
    """128x128x32 tiles (bench/gpu.py's grouped GEMM) on one warpgroup (a hint of 4 warps):
    the modulo schedule's 2 stages would leave no copy in flight beside the wgmma group;
    the ring takes 4, two copies ahead.  On the default two warpgroups
    (``cta_size.wgmma_pair``) each thread issues half the copies, and the modulo schedule
    itself gives 4."""
    import cuda.tile as ct
    from kernels.lists import grouped_matmul

    from tileiras.lower.software_pipeline import WGMMA_COPY_MIN_STAGES

    kernel = grouped_matmul if warps is None else ct.kernel(grouped_matmul._annotated_function.pyfunc,
                                                            num_worker_warps=warps)
    big = GROUPED_MATMUL_WIDE.__class__(f"grouped_matmul_128_{warps}", kernel,
                                        [[*GROUPED_MATMUL_WIDE.params[0][:3], 128, 128, 32]])
    m = read_bytecode(export(big, "sm_90"))
    (tas,) = run_stages(m, CompileOptions(gpu_name="sm_90"), "tileas").tas.values()
    (p,) = tas.pipelines.values()
    assert tas.num_warps == (warps or 8)
    assert (p.stages, p.in_flight, p.ahead) == (WGMMA_COPY_MIN_STAGES, 1, 2) == (4, 1, 2)
    assert p.source == source
    reports = diffcheck.check_module(m, "sm_90", grid=(2, 2, 3), extent=150)
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]


@pytest.mark.parametrize("extent", [40, 200])
def test_agrees_on_every_group(extent):
    """Three groups of different K (tails; trip counts below and above the stage count)."""
    reports = diffcheck.check_module(module(), "sm_90", grid=(2, 2, 3), extent=extent)
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]


def _late_wait(monkeypatch):
    real = emit_async.wait_group
    monkeypatch.setattr(emit_async, "wait_group", lambda b, pending: real(b, pending + 1 if pending else 0))


def _no_fence(monkeypatch):
    monkeypatch.setattr(X, "fence_proxy_async", lambda b: None)


def _no_barrier(monkeypatch):
    real = emit_async.steady_state

    def steady_state(em, p, *rest):
        barrier = X.barrier
        X.barrier = lambda b: None
        try:
            return real(em, p, *rest)
        finally:
            X.barrier = barrier
    monkeypatch.setattr(emit_async, "steady_state", steady_state)


@pytest.mark.parametrize("plant, caught", [
    (_late_wait, "before cp.async.wait_group"),          # wgmma reads a stage still landing
    (_no_fence, "through the async proxy"),              # cp.async writes unseen by wgmma
    (_no_barrier, "no barrier or mbarrier ordering"),    # another thread's copies unordered
])
def test_a_missing_order_is_caught(monkeypatch, plant, caught):
    plant(monkeypatch)
    (report,) = diffcheck.check_module(module(), "sm_90", grid=(2, 2, 3), extent=200)
    assert report.problem is not None and caught in report.problem, report.problem


def test_copies_one_iteration_further_ahead_race_with_the_group_in_flight(monkeypatch):
    """With a group in flight the refill must skip the stage the previous iteration's
    wgmma still reads: going S-1 ahead (as with no group in flight) overwrites it."""
    monkeypatch.setattr(PipelinePlan, "ahead", property(lambda self: self.stages - 1))
    (report,) = diffcheck.check_module(module(), "sm_90", grid=(2, 2, 3), extent=200)
    assert re.search(r"cp\.async.* overwrites shared byte .*wgmma.* before wgmma.wait_group", report.problem or "")


@pytest.mark.parametrize("case", [
    {"m": 64, "n": 64, "k": 64},
    {"m": 64, "n": 64, "k": 64, "nt": True},
    {"m": 64, "n": 64, "k": 64, "bcol": True},
    {"m": 64, "n": 128, "k": 128, "ab": "f8E4M3FN", "bcol": True},
    {"m": 64, "n": 64, "k": 64, "acol": True},
], ids=str)
def test_every_operand_order_lands_where_the_descriptors_read(monkeypatch, case):
    """The TMA ring refused (as for a grouped GEMM's views): row-major, transposed and
    column-major B (fp8's K-major one) go through the copy ring and agree."""
    from kernels.pipelined import gemm_loop

    from tileiras.lower import tma_ring
    from tileiras.text.parser import parse_module

    monkeypatch.setattr(tma_ring, "plan_ring", lambda tas, loop, arch: "no TMA (test)")
    text = gemm_loop(**case)
    m = parse_module(text, "k.mlir")
    (tas,) = run_stages(m, CompileOptions(gpu_name="sm_90"), "tileas").tas.values()
    (decision,) = tas.pipelines.values()
    assert isinstance(decision, PipelinePlan) and decision.staging is not None, decision
    assert decision.b_columns == bool(case.get("bcol"))
    for extent in (100, 200):       # (longer K: a few cancelling f32 sums differ in their last bits)
        reports = diffcheck.check_module(m, "sm_90", grid=(2, 2, 1), extent=extent)
        assert [r.problem for r in reports] == [None], extent
