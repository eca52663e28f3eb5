"""A tile block divided among the CTAs of its cluster (``num_ctas=2``, sm_90+):
``lower/cluster_split.py``.

Each kernel runs in the emulator on a grid of clusters and must agree with the interpreter,
which runs the program as written (one tile block, no clusters); the PTX must show the
division (the CTA's rank in its addressing, no CTA sent to the end idle) or, where the
pass refuses, the first CTA doing the whole block as before."""
from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("cuda.tile")

from differential import (ALIGNED_EXTENT, EXTENT, Case, cached_export, compare, extent_of, make_inputs,  # noqa: E402
                          run_compiled, run_interpreter)
from kernels.clusters import (CLUSTER_GATHER, CLUSTER_GEMM, CLUSTER_LOOP, CLUSTER_ROWS, CLUSTER_TOTAL,  # noqa: E402
                              PERSISTENT_CLUSTER_GEMM)

from tileiras.diffcheck import compile_with_host  # noqa: E402
from tileiras.pipeline import CompileOptions  # noqa: E402
from tileiras.lower.cluster_split import split_cluster  # noqa: E402
from tileiras.pipeline import run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.tile.ops_internal import ClusterRankOp  # noqa: E402

SPLIT = [CLUSTER_GEMM, CLUSTER_ROWS, CLUSTER_LOOP, CLUSTER_GATHER, PERSISTENT_CLUSTER_GEMM]


@pytest.fixture(scope="session")
def cache() -> dict:
    return {}


def _ptx(data: bytes, arch: str) -> str:
    return compile_with_host(read_bytecode(data), arch)[0]


def _bursty(ptx: str, host, c: Case):
    """``ptx`` run on ``c`` with its CTAs interleaved in bursts (seed 1)."""
    from tileiras import diffcheck

    return diffcheck.run_ptx(ptx, c.entry, c.grid, c.args(c.arrays), host_object=host, interleave=1, burst=True)


@pytest.mark.parametrize("aligned", [False, True], ids=["unaligned", "aligned"])
@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
@pytest.mark.parametrize("case", SPLIT + [CLUSTER_TOTAL], ids=lambda c: c.name)
def test_split_kernel_matches_interpreter(case, arch, aligned, cache):
    data = cached_export(cache, case, arch, aligned)
    entry = read_bytecode(data).functions[0].name
    arrays = make_inputs(case.params[0], np.random.default_rng(7), ALIGNED_EXTENT if aligned else EXTENT)
    for grid in ((2, 2, 1), (3, 1, 1)):
        c = Case(data, entry, arrays, grid)
        problem = compare(run_interpreter(c), run_compiled(c, arch))
        assert problem is None, f"grid {grid}: {problem}"


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
@pytest.mark.parametrize("case", SPLIT, ids=lambda c: c.name)
def test_split_kernels_use_both_ctas(case, arch, cache):
    ptx = _ptx(cached_export(cache, case, arch, True), arch)
    assert ".reqnctapercluster 2" in ptx
    rank = re.findall(r"mov\.u32\s+(%r\d+), %cluster_ctaid\.x;", ptx)
    assert len(rank) >= 1
    # the rank feeds the addressing, not a branch to the end
    uses = [ln for ln in ptx.splitlines() if any(re.search(re.escape(r) + r"\b", ln) for r in rank)
            and "mov.u32" not in ln]
    assert uses and not any(ln.lstrip().startswith("setp.ne") for ln in uses), uses


def test_refused_split_keeps_the_first_cta(cache):
    """A tile reduced to one stored value has nothing to divide: the first CTA of each
    cluster does the block, the other ends at once (as before the pass)."""
    data = cached_export(cache, CLUSTER_TOTAL, "sm_90", True)
    split = split_cluster(read_bytecode(data).functions[0], 2)
    assert split.ctas == 0 and split.reason == "a stored tile of shape [1] is not split"
    ptx = _ptx(data, "sm_90")
    assert re.search(r"mov\.u32\s+(%r\d+), %cluster_ctaid\.x;\s+setp\.ne\.b32\s+%p\d+, \1, 0;", ptx)


def _compiled(data: bytes, arch: str):
    c = run_stages(read_bytecode(data), CompileOptions(gpu_name=arch), "tileas")
    return c, c.module.functions[0]


def test_gemm_splits_n_on_sm90_and_m_on_sm100(cache, monkeypatch):
    """wgmma computes m64 blocks: a 64-row GEMM tile keeps its rows on sm_90 and splits its
    64 columns (NVIDIA's tool: ``wgmma...m64n32k16``, A multicast); so does sm_100, whose
    tcgen05.mma takes M of 64 or more (M64 N32); with mma.sync (tcgen05 off) it splits M."""
    for arch, mma in (("sm_90", "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16"),
                      ("sm_100", "tcgen05.mma.cta_group::1.kind::f16")):
        data = cached_export(cache, CLUSTER_GEMM, arch, True)
        c, fn = _compiled(data, arch)
        assert c.cluster_splits[fn.name].stores == (1,)
        assert c.tas[fn.name].cluster_split == 2
        assert mma in _ptx(data, arch)
    monkeypatch.setenv("TILEIRAS_TCGEN05", "0")
    c, fn = _compiled(cached_export(cache, CLUSTER_GEMM, "sm_100", True), "sm_100")
    assert c.cluster_splits[fn.name].stores == (0,)
    from tileiras.tile.ops_arith import MmaFOp

    (mma,) = [op for op in fn.walk() if isinstance(op, MmaFOp)]
    assert mma.result.type.shape == (32, 64) and mma.lhs.type.shape == (32, 32) and mma.rhs.type.shape == (32, 64)


def test_split_is_printed_and_parsed(cache):
    from tileiras.lower.tileas_format import format_tileas
    from tileiras.lower.tileas_parse import parse_tileas

    c, fn = _compiled(cached_export(cache, CLUSTER_LOOP, "sm_90", True), "sm_90")
    text = format_tileas(c.tas[fn.name])
    assert " cluster_split=2 " in text.splitlines()[0]
    assert "cluster_rank" in text
    assert parse_tileas(text, c.aa[fn.name]).cluster_split == 2


def test_loop_carried_values_split_alike(cache):
    """The loop's two accumulators, its block arguments and results, and the loads in it
    are the CTA's half of the 1x256 row."""
    from tileiras.tile.ops_control import ForOp

    _, fn = _compiled(cached_export(cache, CLUSTER_LOOP, "sm_90", True), "sm_90")
    (loop,) = [op for op in fn.walk() if isinstance(op, ForOp)]
    assert [r.type.shape for r in loop.results] == [(1, 128), (1, 128)]
    assert [a.type.shape for a in loop.body.blocks[0].args[1:]] == [(1, 128), (1, 128)]
    assert sum(isinstance(op, ClusterRankOp) for op in fn.walk()) == 1


def test_sm80_and_single_cta_kernels_are_not_split(cache):
    c, fn = _compiled(cached_export(cache, CLUSTER_LOOP, "sm_80", True), "sm_80")
    assert not c.cluster_splits and c.tas[fn.name].cluster_split == 0
    assert not any(isinstance(op, ClusterRankOp) for op in fn.walk())


def test_internal_op_is_never_written():
    from tileiras.ir import types as T
    from tileiras.ir.core import Block, Function, Region
    from tileiras.ir.types import FunctionType
    from tileiras.ir.core import Module
    from tileiras.ir.version import Version
    from tileiras.tile.ops_control import ReturnOp
    from tileiras.writer import write_bytecode
    from tileiras.writer.pools import WriteError

    block = Block()
    block.append(ClusterRankOp(attributes={"size": 2}, result_types=[T.TileType(T.I32)]))
    block.append(ReturnOp())
    fn = Function("k", FunctionType((), ()), Region([block]), is_entry=True)
    with pytest.raises(WriteError, match="compiler-internal"):
        write_bytecode(Module(Version(13, 1), [fn]))


# -- the operand every CTA reads whole: multicast --------------------------------------------
def _ring(data: bytes, arch: str):
    from tileiras.lower.tma_ring import RingPlan

    c, fn = _compiled(data, arch)
    (ring,) = [p for p in c.tas[fn.name].pipelines.values() if isinstance(p, RingPlan)]
    return ring


@pytest.mark.parametrize("arch, shared, tcgen05", [("sm_90", 0, True), ("sm_100", 1, False), ("sm_100", 0, True)])
def test_whole_operand_is_multicast(arch, shared, tcgen05, cache, monkeypatch):
    """sm_90 keeps wgmma's 64 rows (N split: A whole), sm_100 tcgen05's too, sm_100 with
    mma.sync splits M (B whole); each CTA issues half of every box of the whole operand's
    rows to both CTAs, and releases a stage on the "empty" mbarrier of both (tcgen05: its
    MMAs' commit, multicast to both)."""
    monkeypatch.setenv("TILEIRAS_TCGEN05", "1" if tcgen05 else "0")
    data = cached_export(cache, CLUSTER_GEMM, arch, True)
    ring = _ring(data, arch)
    assert (ring.shared_operand, ring.multicast) == (shared, 2)
    rows, _ = ring.box[shared]
    assert ring.specs[shared].box[1] == rows // 2 and ring.specs[1 - shared].box[1] == ring.box[1 - shared][0]
    ptx = _ptx(data, arch)
    assert ".multicast::cluster [" in ptx
    assert ptx.count("barrier.cluster.wait.acquire.aligned;") == 2     # after the init, before the inval
    if ring.tcgen05:
        assert "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64" in ptx
        assert ring.empty_arrivals == 2
    else:
        assert "mbarrier.arrive.shared::cluster.b64" in ptx
    assert re.search(rf"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], {ring.empty_arrivals};", ptx)


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_cluster_moves_the_sectors_one_cta_would(arch, cache):
    """Split and multicast, a cluster of two reads each tile of A and B from global memory
    once, as one CTA computing the whole block does (without multicast both CTAs read the
    whole operand: 1.47x the sectors).  Where N is split (sm_90, and sm_100's tcgen05) the
    bias row takes a few more sectors a cluster: 8 on sm_90 (each CTA's 32 columns read by
    its 128 threads), 16 on sm_100, whose tcgen05 accumulator gives each warp all 32
    columns of a row, so each of the 8 warps reads the CTA's bias slice (1.5% of the total)."""
    from kernels.clusters import ONE_CTA_GEMM

    from tileiras.emulate import launch

    sectors = []
    for case in (CLUSTER_GEMM, ONE_CTA_GEMM):
        data = cached_export(cache, case, arch, True)
        module = read_bytecode(data)
        ptx, host = compile_with_host(module, arch)
        c = Case(data, module.functions[0].name,
                 make_inputs(case.params[0], np.random.default_rng(3), 128), (2, 2, 1))
        t = launch(ptx, c.entry, c.grid, c.args(c.arrays), host_object=host, traffic=True).check().traffic
        sectors.append((t.loads.sectors, t.stores.sectors))
    (ours, stored), (one, one_stored) = sectors
    assert stored == one_stored and one <= ours <= one + (32 if arch == "sm_90" else 64)


PLANTS = {
    # a CTA's boxes reach the other's mbarriers before that one initialized them
    "init": lambda p: p.replace("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;",
                                "", 1),
    # each CTA counts only its own consumers' releases: it refills the other's stage early
    "release": lambda p: re.sub(r"mapa\.shared::cluster\.u32 %ra, (%r\d+), %r\d+;",
                                r"mapa.shared::cluster.u32 %ra, \1, %cluster_ctaid.x;", p),
    # a CTA invalidates its mbarriers while the other still arrives on them
    "drain": lambda p: "barrier.cluster.wait.acquire.aligned;".join(
        p.rsplit("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;", 1)),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_missing_cluster_ordering_is_caught(plant, cache):
    """The emulator, its CTAs interleaved in bursts (one runs far ahead of the other), traps
    each cluster ordering the multicast ring needs when it is taken out of our PTX; with it
    in, the same interleavings agree with the interpreter."""
    data = cached_export(cache, CLUSTER_GEMM, "sm_90", True)
    module = read_bytecode(data)
    ptx, host = compile_with_host(module, "sm_90")
    c = Case(data, module.functions[0].name, make_inputs(CLUSTER_GEMM.params[0], np.random.default_rng(1), 320),
             (2, 2, 1))
    broken = PLANTS[plant](ptx)
    assert broken != ptx
    with pytest.raises(AssertionError, match="faulted in the emulator"):
        _bursty(broken, host, c)
    if plant == "init":
        got = _bursty(ptx, host, c)
        assert compare(run_interpreter(c), got) is None


def test_persistent_ring_multicasts_and_waits_for_the_cluster_at_exit(cache):
    """A persistent, warp-specialized ring (its K loop in the loop over tiles) multicasts too:
    its mbarriers, initialized once, are published to the cluster, each tile's K loop
    refills every CTA's stages, and no CTA leaves while another may still arrive on its
    mbarriers (a cluster barrier before the end, not ``.aligned``: a ``return`` may end the
    kernel in a branch).  Taking that barrier out traps under bursts: the other CTA's
    release reaches shared memory that is gone."""
    data = cached_export(cache, PERSISTENT_CLUSTER_GEMM, "sm_90", True)
    ring = _ring(data, "sm_90")
    assert ring.persistent and ring.specialized and (ring.shared_operand, ring.multicast) == (0, 2)
    module = read_bytecode(data)
    ptx, host = compile_with_host(module, "sm_90")
    exit_barrier = "barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;"
    assert ptx.count(exit_barrier) == 1
    c = Case(data, module.functions[0].name,
             make_inputs(PERSISTENT_CLUSTER_GEMM.params[0], np.random.default_rng(1), 256), (3, 1, 1))
    got = _bursty(ptx, host, c)
    assert compare(run_interpreter(c), got) is None
    with pytest.raises(AssertionError, match="whose threads have all exited"):
        _bursty(ptx.replace(exit_barrier, ""), host, c)


def _in_clusters_of_two(data: bytes) -> bytes:
    """The module with ``num_cta_in_cga = 2`` added to every entry's hints, every arch."""
    from tileiras.ir import attrs as A
    from tileiras.ir import types as T
    from tileiras.writer import write_bytecode

    module = read_bytecode(data)
    two = A.IntegerAttr(T.I32, 2)
    for fn in module.functions:
        entries = dict(fn.hints.entries) if fn.hints else {}
        entries.setdefault("default", A.DictAttr(()))
        fn.hints = A.OptimizationHintsAttr(tuple(
            (arch, A.DictAttr(tuple({**dict(d.entries), "num_cta_in_cga": two}.items()))) for arch, d in entries.items()))
    return write_bytecode(module)


#: kernels whose results depend on the order CTAs run in (atomic exchanges feeding a
#: compare-and-swap): an interleaving is not the interpreter's order
ORDER_DEPENDENT = {"atomics"}


def _cases():
    from kernels import ALL_CASES

    for case in ALL_CASES:
        if case.calling_convention == "v1" and case.name not in ORDER_DEPENDENT:
            for k in range(len(case.params)):
                yield pytest.param(case, k, id=f"{case.name}[{k}]")


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
@pytest.mark.parametrize("case, k", list(_cases()))
def test_every_kernel_in_clusters_of_two(case, k, arch, cache):
    """Every test kernel, aligned, launched in clusters of two CTAs: split where the pass
    can (about two thirds of them), the first CTA doing it all where it cannot; either way
    the interpreter's result, with the cluster's CTAs interleaved in bursts."""
    data = _in_clusters_of_two(cached_export(cache, case, arch, True))
    module = read_bytecode(data)
    ptx, host = compile_with_host(module, arch)
    assert ".reqnctapercluster 2" in ptx
    c = Case(data, module.functions[k].name,
             make_inputs(case.params[k], np.random.default_rng(1), extent_of(case, True), case.indexes), (2, 2, 1))
    got = _bursty(ptx, host, c)
    problem = compare(run_interpreter(c), got)
    assert problem is None, problem


def test_scalar_from_a_tile_needs_the_whole_tile(cache):
    """A loop carries a row and breaks on the running sum of its elements: a reduction to a
    scalar is every CTA's, so the row it reads is whole in each (before, the sum was taken of
    each CTA's half): the split is refused, and the result is right."""
    from kernels.clusters import CLUSTER_LOOP_TOTAL

    data = cached_export(cache, CLUSTER_LOOP_TOTAL, "sm_90", True)
    c, fn = _compiled(data, "sm_90")
    split = c.cluster_splits[fn.name]
    assert split.ctas == 0 and split.reason.startswith("every CTA would read 512 bytes of tiles whole")
    module = read_bytecode(data)
    ptx, host = compile_with_host(module, "sm_90")
    for limit in (1e9, 300.0):                      # no break, and a break after a few trips
        case = Case(data, fn.name, make_inputs(CLUSTER_LOOP_TOTAL.params[0], np.random.default_rng(2), 512)[:2]
                    + [np.float32(limit)], (2, 1, 1))
        got = _bursty(ptx, host, case)
        assert compare(run_interpreter(case), got) is None


@pytest.mark.parametrize("name", ["grouped_matmul_wide", "grouped_a_matmul", "persistent_grouped_matmul"])
def test_grouped_gemms_in_clusters_of_two(name):
    """Grouped GEMMs (lists of tensors: maps built on the device, cp.async or TMA rings) in
    clusters of two on sm_90: split and multicast where they can be, agreeing with the
    interpreter with the cluster's CTAs drifting apart.  A multicast box overwrites what the
    CTA itself wrote there before (the race detector takes it as the bytes' last write)."""
    from differential import export
    from kernels import lists

    from tileiras import diffcheck

    case = {c.name: c for c in (lists.GROUPED_MATMUL_WIDE, lists.GROUPED_A_MATMUL,
                                lists.PERSISTENT_GROUPED_MATMUL)}[name]
    data = _in_clusters_of_two(export(case, "sm_90"))
    if name == "persistent_grouped_matmul":     # three persistent rings, unspecialized: each
        from tileiras.lower.tma_ring import RingPlan  # entry's first boxes issued at once

        c, fn = _compiled(data, "sm_90")
        rings = [p for p in c.tas[fn.name].pipelines.values() if isinstance(p, RingPlan)]
        assert len(rings) == 3 and all(r.persistent and not r.specialized and r.multicast == 2 for r in rings)
    reports = diffcheck.check_module(read_bytecode(data), "sm_90", grid=(2, 2, 1), extent=96, interleave=1,
                                     burst=True)
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]
