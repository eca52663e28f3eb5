"""Persistent GEMMs on sm_90 (``kernels.persistent``: TileGym's loop over output tiles
around the K loop): the K loop is a TMA ring feeding ``wgmma`` inside the loop over tiles,
its mbarriers initialized once at kernel start (outside the scratch region, live the whole
kernel) and its stage and phase taken from a K-tile counter carried across tiles
(``RingPlan.persistent``, ``emit_ring.init_rings``).  By default it is warp-specialized as
NVIDIA's are (with two consumer warp groups, ``cta_size.wgmma_pair``, where NVIDIA's have
one): a producer warp runs the loop over tiles itself (recomputing the tile's
coordinates, ``RingPlan.producer_ops``) and fills the next tile's stages while the
consumers finish a tile; the consumers' barriers are a named barrier of their own.  With
``TILEIRAS_WARP_SPECIALIZE=0``: per tile a barrier, the prologue's copies, the steady
state, and a drain that releases the tile's last stage, advances the counter and ends with
a barrier before the tile's epilogue.  Both are checked against the interpreter in the
emulator (TMA bytes land only at their mbarrier phase, wgmma operands locked until
``wait_group``, race detector on) with more tiles than CTAs and more K tiles than stages,
and with planted missing waits."""
from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("cuda.tile")

from differential import Case, compare, export, numpy_dtype, random_array, run_interpreter  # noqa: E402
from kernels._case import KernelCase, arr  # noqa: E402
from kernels.persistent import persistent_case, persistent_gemm_4_warps, persistent_gemm_8_warps  # noqa: E402
from test_tma_ring import COPY, _without_wait, needs_x86  # noqa: E402

from tileiras import diffcheck  # noqa: E402
from tileiras.emulate import launch  # noqa: E402
from tileiras.emulate.launch import EmulationError  # noqa: E402
from tileiras.lower.tma_ring import RingPlan  # noqa: E402
from tileiras.pipeline import CompileOptions, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

import cuda.tile as ct  # noqa: E402

#: NVIDIA-like tiles (TileGym's persistent GEMM on sm_90: 128x128 output tiles, K by 64)
LARGE = {"f16": persistent_case("persistent_gemm_128_f16", ct.float16, 128, 128, 64),
         "bf16": persistent_case("persistent_gemm_128_bf16", ct.bfloat16, 128, 128, 64)}
#: the same on one consumer warpgroup (a ``num_worker_warps`` hint of 4: NVIDIA's CTA)
ONE_GROUP = KernelCase("persistent_gemm_128_f16_4_warps", persistent_gemm_4_warps,
                       [[arr(ct.float16, 2), arr(ct.float16, 2), arr(ct.float16, 2), 128, 128, 64]])
#: (case, producer warp, consumer threads, CTA threads, setmaxnreg dec/inc)
FORMS = {"two_groups": (LARGE["f16"], 8, 256, 384, (32, 168)), "one_group": (ONE_GROUP, 4, 128, 256, (32, 248))}
#: two warpgroups, 4 tiles of 7 K tiles on 112^3: the warp that refills a stage is not
#: one of the other warpgroup's, whose reads only the "empty" wait orders before the copy
#: (one warpgroup runs in lockstep in the emulator: its own reads are ordered anyway)
PLANTED = KernelCase("persistent_gemm_8_warps", persistent_gemm_8_warps,
                     [[arr(ct.float16, 2), arr(ct.float16, 2), arr(ct.float16, 2), 128, 32, 16]])
_EXPORTS: dict = {}


def bytecode(case, arch: str = "sm_90") -> bytes:
    key = (case.name, arch)
    if key not in _EXPORTS:
        _EXPORTS[key] = export(case, arch=arch, aligned=True)
    return _EXPORTS[key]


def compiled(case, arch: str = "sm_90"):
    return run_stages(read_bytecode(bytecode(case, arch)), CompileOptions(gpu_name=arch), "ptx")


def ring_of(c) -> RingPlan:
    (tas,) = c.tas.values()
    (plan,) = tas.pipelines.values()
    assert isinstance(plan, RingPlan), plan
    return plan


# -- the PTX's loops ------------------------------------------------------------------------
def ptx_blocks(ptx: str) -> list[tuple[str, str, list[str]]]:
    """The kernel body's basic blocks: (label, text, successor labels)."""
    body = ptx[ptx.index("{", ptx.index(".entry")):]
    parts = re.split(r"^(\$L__BB\d+_\d+):", body, flags=re.M)
    blocks = [("entry", parts[0])] + list(zip(parts[1::2], parts[2::2]))
    out = []
    for k, (label, text) in enumerate(blocks):
        succ = re.findall(r"\bbra(?:\.uni)?\s+(\$L__BB\d+_\d+);", text)
        lines = (ln.strip() for ln in text.strip().splitlines())
        last = [ln for ln in lines if ln and not ln.startswith("//")]
        ends = bool(last) and re.match(r"(bra\.uni|bra|ret;)", last[-1]) is not None
        if not ends and k + 1 < len(blocks):
            succ.append(blocks[k + 1][0])
        out.append((label, text, succ))
    return out


def loop_around(ptx: str, instruction: str) -> str:
    """The text of the blocks that lie on a cycle through the block holding ``instruction``
    (its strongly connected component): with the K loop nested in the loop over tiles, the
    whole loop over tiles."""
    blocks = ptx_blocks(ptx)
    succ = {label: s for label, _, s in blocks}
    text = {label: t for label, t, _ in blocks}
    start = next(label for label, t, _ in blocks if instruction in t)

    def reach(frm: str, edges: dict) -> set:
        seen, todo = {frm}, [frm]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen
    pred: dict = {}
    for label, s in succ.items():
        for t in s:
            pred.setdefault(t, []).append(label)
    component = reach(start, succ) & reach(start, pred)
    return "".join(text[label] for label, _, _ in blocks if label in component)


# -- the decision and the code --------------------------------------------------------------
@pytest.fixture
def unspecialized(monkeypatch):
    monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", "0")


@pytest.mark.parametrize("form", FORMS)
def test_the_k_loop_of_a_persistent_gemm_is_a_warp_specialized_persistent_ring(form):
    """Two consumer warp groups, a 64-row half of each 128-row tile each (the default:
    ``cta_size.wgmma_pair``), or one (NVIDIA's form, with a hint), then the producer warp
    group (32 registers; the consumers the rest of the register file: 168 or 248); the
    stages all the shared memory holds beside the epilogue's staging (6 of 32 KB); the
    producer recomputes the tile's coordinates (a divide and the remainder's sign fix-up)
    from the loop's induction variable."""
    case, producer, consumers, threads, registers = FORMS[form]
    c = compiled(case)
    plan = ring_of(c)
    (tas,) = c.tas.values()
    assert plan.persistent and plan.in_flight == 1 and plan.specialize_reason == ""
    assert plan.producer_warp == producer and plan.consumers == consumers and tas.num_threads == threads
    assert plan.registers == registers and plan.stages == 6
    assert [op.name for op in plan.producer_ops][:2] == ["divi", "remi"] and plan.outer is not None
    assert plan.barriers >= tas.scratch_bytes and plan.barriers + plan.barrier_bytes <= tas.smem_bytes
    assert tas.scratch[plan.mma] == plan.ring_bytes == 6 * 32768


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_unspecialized_the_k_loop_is_a_persistent_ring(dtype, unspecialized):
    c = compiled(LARGE[dtype])
    plan = ring_of(c)
    (tas,) = c.tas.values()
    assert plan.persistent and plan.stages == 4 and plan.in_flight == 1 and plan.producer_warp == -1
    assert plan.specialize_reason == "turned off (TILEIRAS_WARP_SPECIALIZE=0)" and tas.num_threads == 256
    # the mbarriers after the stages' scratch (and TMA's buffers), not inside it
    assert plan.barriers >= tas.scratch_bytes and plan.barriers + plan.barrier_bytes <= tas.smem_bytes
    assert tas.scratch[plan.mma] == plan.ring_bytes == 4 * 32768


@pytest.mark.parametrize("form", FORMS)
def test_the_producer_and_the_consumers_each_loop_over_the_tiles(form):
    """The producer's loop over tiles (the cycle through its copies) holds the "empty"
    waits, ``expect_tx`` and every copy, and no wgmma; the consumers' (the cycle through
    the wgmma) the "full" waits, wgmma with one group in flight, the drain's ``wait_group
    0`` and the tiles' bulk stores, with their barriers named (``bar.sync 1, 128``), and no
    copy; before both, once, the mbarriers' initialization and a CTA-wide barrier;
    ``setmaxnreg`` moves registers from the producer to the consumers."""
    case, _, threads, cta, (low, high) = FORMS[form]
    ptx = compiled(case).ptx
    consumers, producer = loop_around(ptx, "wgmma.mma_async"), loop_around(ptx, COPY)
    assert "wgmma.mma_async" in consumers and COPY not in consumers and "expect_tx" not in consumers
    assert "wgmma.wait_group.sync.aligned 1;" in consumers and "wgmma.wait_group.sync.aligned 0;" in consumers
    assert STORE in consumers and f"bar.sync 1, {threads};" in consumers and "bar.sync 0;" not in consumers
    assert COPY in producer and "mbarrier.arrive.expect_tx" in producer and "wgmma" not in producer
    assert "mbarrier.try_wait" in producer and "bar.sync" not in producer
    assert ptx.count(COPY) == producer.count(COPY)      # every copy is the producer's
    assert "mbarrier.init" not in consumers + producer and "mbarrier.inval" not in ptx
    assert ptx.count("mbarrier.init") == 2 * 6 and ptx.index("mbarrier.init") < ptx.index("setmaxnreg")
    assert len(re.findall(rf"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], {threads};", ptx)) == 6
    dec, inc = ptx.index(f"setmaxnreg.dec.sync.aligned.u32 {low};"), ptx.index(f"setmaxnreg.inc.sync.aligned.u32 {high};")
    assert ptx.rindex("bar.sync 0;", 0, dec) < dec < ptx.index(COPY) < inc < ptx.index("wgmma.mma_async")
    assert f".reqntid {cta}" in ptx


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_unspecialized_tma_and_wgmma_run_inside_the_loop_over_tiles(dtype, unspecialized):
    """In the loop over tiles (the cycle through the K loop's wgmma that also holds the
    tile's stores): the TMA copies, the "full" and "empty" waits, wgmma with one group in
    flight, the drain's ``wait_group 0`` and the tiles' bulk stores; before it, once, the
    mbarriers' initialization; no invalidation anywhere (they serve the whole kernel)."""
    ptx = compiled(LARGE[dtype]).ptx
    loop = loop_around(ptx, "wgmma.mma_async")
    assert "wgmma.mma_async" in loop and COPY in loop and "mbarrier.arrive.expect_tx" in loop
    assert "wgmma.wait_group.sync.aligned 1;" in loop and "wgmma.wait_group.sync.aligned 0;" in loop
    assert STORE in loop                                # the tile's epilogue: the outer loop
    assert "mbarrier.init" not in loop and "fence.mbarrier_init" not in loop
    assert "mbarrier.inval" not in ptx and "setmaxnreg" not in ptx and "bar.sync 1" not in ptx
    assert ptx.count("mbarrier.init") == 2 * 4 and ptx.index("mbarrier.init") < ptx.index("wgmma.mma_async")
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 256;", ptx)) == 4    # both warpgroups
    # 3 prologue stages and one refill, each an A box and B's two 64-column boxes
    assert ptx.count(COPY) == 3 * 3 + 3 and loop.count(COPY) == ptx.count(COPY)


#: ptxas's note that it serialized the kernel's wgmma (registers of one in flight read)
SERIALIZED = "C7514"


@pytest.mark.parametrize("specialize", ["default", "0"])
def test_ptxas_keeps_the_wgmma_pipelined(specialize, monkeypatch):
    """The last K iteration of a tile waits for its own group (``emit_ring._complete_last``):
    with the wait after the loop, where the result joins the accumulator of a tile with no
    K iterations, ptxas copied the in-flight registers before it and serialized every
    wgmma of the kernel (its C7514 note; 1.24x NVIDIA's time on an H100 at 8192^3)."""
    from tileiras.codegen import emit_ring
    from tileiras.codegen.ptxas import invoke_ptxas

    if specialize != "default":
        monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", specialize)
    ptx = compiled(LARGE["f16"]).ptx
    assert SERIALIZED not in invoke_ptxas(ptx, "sm_90").log
    assert ptx.count("wgmma.wait_group.sync.aligned 0;") == 1       # in the loop, not after it
    monkeypatch.setattr(emit_ring, "_completes_in_loop", lambda plan: False)
    assert SERIALIZED in invoke_ptxas(compiled(LARGE["f16"]).ptx, "sm_90").log


def test_a_top_level_ring_keeps_its_per_entry_mbarriers():
    """A GEMM without the loop over tiles keeps the ring of before: mbarriers after the
    stages, initialized before the loop and invalidated after it."""
    from kernels.linalg import CASES as LINALG

    gemm = next(c for c in LINALG if c.name == "gemm")
    data = export(gemm, "sm_90", aligned=True)
    c = run_stages(read_bytecode(data), CompileOptions(gpu_name="sm_90"), "ptx")
    tas = next(iter(c.tas.values()))
    plans = [p for p in tas.pipelines.values() if isinstance(p, RingPlan)]
    assert plans and not any(p.persistent for p in plans)
    assert "mbarrier.inval" in c.ptx


@pytest.mark.parametrize("arch, instruction", [("sm_80", "cp.async.cg"), ("sm_120", "mma.sync")])
def test_other_archs_compile_the_persistent_gemm(arch, instruction):
    """sm_80 pipelines the K loop with cp.async inside the loop over tiles; sm_120 keeps its
    own code; neither has a TMA ring."""
    c = compiled(LARGE["f16"], arch)
    assert instruction in c.ptx and "wgmma" not in c.ptx


#: a bulk tensor store (shared -> global), as the tile's epilogue issues it
STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_each_tile_goes_out_through_stmatrix_and_a_bulk_store(dtype):
    """The store of each output tile, whose token cuTile threads through the loop over
    tiles, is a TMA store (``tma.stores_after``) as NVIDIA's epilogue is: in the
    loop, ``stmatrix.x4`` into a 128-byte-swizzled staging of two 64-column boxes
    (NVIDIA's two 16 KB halves), ``fence.proxy.async``, a barrier, one bulk store per
    box, committed; no ``st.global`` of 2 or 4 bytes.  The staging lies after the ring's
    stages and before its mbarriers, so the next tile's copies into the stages never
    touch it.  The copies are not waited on in their tile: they read the staging while
    the next tile's K loop runs, and the next tile's store first waits until they have
    written global memory (``wait_group 0``: the token orders the two, and the staging is
    read by then); after the loop, ``wait_group.read 0`` before the kernel exits."""
    c = compiled(LARGE[dtype])
    (tas,) = c.tas.values()
    plan = ring_of(c)
    (store,) = [(op, p) for op, p in tas.tma.items() if p.is_store]
    op, staging = store
    assert staging.carried and staging.matrix is not None and staging.swizzle == 128
    assert staging.boxes == (1, 2) and staging.nbytes == 128 * 128 * 2
    assert plan.ring_bytes <= staging.buffer and staging.buffer + staging.nbytes <= plan.barriers
    loop = loop_around(c.ptx, "wgmma.mma_async")
    assert not re.search(r"st\.global(\.\w+)*\.b(16|32)\b", loop)
    # a thread's 8 (its warpgroup's 64-row half of the tile), NVIDIA's one warpgroup's 16
    assert loop.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 8 and loop.count(STORE) == 2
    fence, issue = loop.index("fence.proxy.async.shared::cta"), loop.index(STORE)
    assert loop.rindex("stmatrix", 0, fence) < fence < loop.index("bar.sync", fence) < issue
    commit = loop.index("cp.async.bulk.commit_group;", issue)
    assert "cp.async.bulk.wait_group.read" not in loop
    # the next trip: the writes waited for, then a barrier, before the staging is written
    first = loop.index("cp.async.bulk.wait_group 0;")
    assert first < loop.index("bar.sync", first) < loop.index("stmatrix") and commit
    assert c.ptx.count("cp.async.bulk.wait_group.read 0;") == 1      # once, after the loop


# -- against the interpreter ----------------------------------------------------------------
def _run(case, shapes, grid: int, seed: int = 3):
    data = bytecode(case)
    dtype = numpy_dtype(case.params[0][0].dtype)
    rng = np.random.default_rng(seed)
    arrays = [random_array(rng, dtype, s) for s in shapes]
    return Case(data, read_bytecode(data).functions[0].name, arrays, (grid, 1, 1))


@needs_x86
@pytest.mark.parametrize("dtype, m, n, k, grid", [
    ("f16", 256, 256, 320, 2),      # 4 tiles on 2 CTAs, 5 K tiles on 4 stages
    ("bf16", 208, 144, 336, 3),     # 4 partial tiles on 3 CTAs, 6 K tiles (a tail)
    ("f16", 128, 256, 64, 3),       # 2 tiles on 3 CTAs (one idle), 1 K tile
    ("bf16", 256, 128, 0, 2),       # no K tiles: zero tiles stored, the counter unmoved
], ids=lambda v: str(v))
@pytest.mark.parametrize("specialize", ["default", "0"])
def test_large_persistent_gemm_matches_interpreter(dtype, m, n, k, grid, specialize, monkeypatch):
    if specialize != "default":
        monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", specialize)
    c = _run(LARGE[dtype], [(m, k), (k, n), (m, n)], grid)
    ptx, host = diffcheck.compile_with_host(read_bytecode(c.bytecode), "sm_90")
    got = diffcheck.run_ptx(ptx, c.entry, c.grid, c.args(c.arrays), host_object=host)
    assert compare(run_interpreter(c), got) is None


@needs_x86
@pytest.mark.parametrize("arch", ["sm_100", "sm_120"])
def test_other_tma_archs_bulk_store_each_tile(arch):
    """The rule is the TMA store's, not the ring's: sm_100 and sm_120 (mma.sync K loops)
    bulk-store each 64x32 tile too, and agree with the interpreter over 4 tiles a CTA."""
    case = persistent_case("persistent_gemm_f16", ct.float16, 64, 32, 16)
    data = bytecode(case, arch)
    rng = np.random.default_rng(5)
    c = Case(data, read_bytecode(data).functions[0].name,
             [random_array(rng, np.float16, (112, 112)) for _ in range(3)], (2, 1, 1))
    ptx, host = diffcheck.compile_with_host(read_bytecode(data), arch)
    assert ptx.count(STORE) == 1 and ptx.count("cp.async.bulk.wait_group 0;") == 1
    assert not re.search(r"st\.global", ptx)
    got = diffcheck.run_ptx(ptx, c.entry, c.grid, c.args(c.arrays), host_object=host)
    assert compare(run_interpreter(c), got) is None


# -- planted faults ---------------------------------------------------------------------------
def _emulate(edit=None, grid: int = 2):
    """``PLANTED`` on ``grid`` CTAs, its PTX ``edit``ed."""
    c = _run(PLANTED, [(112, 112)] * 3, grid)
    ptx, host = diffcheck.compile_with_host(read_bytecode(c.bytecode), "sm_90")
    if edit is not None:
        edited = edit(ptx)
        assert edited != ptx
        ptx = edited
    launch(ptx, c.entry, c.grid, c.args(c.arrays), host_object=host).check()


def _without_drain_release(ptx: str) -> str:
    """The drain's release of the tile's last stage (the arrive after ``wait_group 0``) dropped."""
    drain = ptx.index("wgmma.wait_group.sync.aligned 0;")
    at = re.compile(r"mbarrier\.arrive\.shared::cta\.b64 %rd\d+, \[%r\d+\];").search(ptx, drain)
    return ptx[:at.start()] + ptx[at.end():]


@needs_x86
@pytest.mark.parametrize("specialize", ["default", "0"])
def test_a_missing_full_wait_is_caught(specialize, monkeypatch):
    """wgmma reads a stage whose TMA bytes have not landed."""
    if specialize != "default":
        monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", specialize)
    _emulate()
    with pytest.raises(EmulationError, match=r"async: .*wgmma.* reads shared byte"):
        _emulate(lambda ptx: _without_wait(ptx, "full"))


@needs_x86
@pytest.mark.parametrize("specialize", ["default", "0"])
def test_a_refill_without_the_empty_wait_is_caught(specialize, monkeypatch):
    """Without the "empty" waits the producer warp (unspecialized: warp 0) refills a stage
    a warpgroup's wgmma read with nothing ordering the copy after that read."""
    if specialize != "default":
        monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", specialize)
    with pytest.raises(EmulationError, match=r"race: .*cp\.async\.bulk\.tensor.*wgmma"):
        _emulate(lambda ptx: _without_wait(ptx, "empty"))


@needs_x86
def test_a_consumer_barrier_counting_the_producer_is_caught():
    """The consumers' barriers after the split name only them: a ``bar.sync 0`` there
    waits for the producer warps, which never come (they wait for stages the consumers
    release after the barrier; 4 tiles of 7 K tiles on one CTA, 8 stages: at the first
    tile's epilogue the producer waits for the second tile's releases)."""
    _emulate(grid=1)
    with pytest.raises(EmulationError, match=r"deadlock"):
        _emulate(lambda ptx: ptx.replace("bar.sync 1, 256;", "bar.sync 0;"), grid=1)


@needs_x86
@pytest.mark.parametrize("specialize", ["default", "0"])
def test_a_drain_without_the_last_release_is_caught(specialize, monkeypatch):
    """The next tile's prologue (unspecialized) or the producer, once it comes round to
    the stage again (4 tiles of 7 K tiles on one CTA: 28 uses of 8 stages), waits for the
    release of the previous tile's last stage: without it the CTA deadlocks."""
    if specialize != "default":
        monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", specialize)
    _emulate(grid=1)
    with pytest.raises(EmulationError, match=r"deadlock"):
        _emulate(_without_drain_release, grid=1)


def _without_read_wait(ptx: str) -> str:
    """The epilogue's bulk stores not waited on until they have read the staging."""
    return ptx.replace("cp.async.bulk.wait_group.read 0;", "")


@needs_x86
def test_an_epilogue_without_the_read_wait_is_caught(monkeypatch):
    """Without ``wait_group.read`` after the tile's bulk store (and, as the emitter would
    then be, without the next tile's ``wait_group 0``), the next tile's ``stmatrix``
    overwrites the staging that store still reads."""
    from tileiras.codegen import intrinsics

    monkeypatch.setattr(intrinsics, "bulk_wait_group", lambda b, keep: None)
    with pytest.raises(EmulationError, match=r"async: .*stmatrix.*cp\.async\.bulk\.wait_group\.read"):
        _emulate(_without_read_wait)


@needs_x86
def test_phases_reset_per_tile_are_caught(monkeypatch):
    """A ring whose K-tile counter is not carried across tiles (each tile counting its
    uses from 0 again, while the mbarriers keep their phases) waits on phases that
    completed for the previous tile: wgmma reads stages before their bytes land."""
    from tileiras.codegen import emit_ring

    monkeypatch.setattr(emit_ring, "_first_use", lambda em, plan: emit_ring.ir.Constant(emit_ring.I32, 0))
    with pytest.raises(EmulationError, match=r"async: .*wgmma.* reads shared byte|deadlock"):
        _emulate()


@needs_x86
def test_a_kernel_leaving_before_its_last_tile_is_read_is_caught(monkeypatch):
    """The tiles' bulk stores are waited on after the loop over tiles
    (``emit_tma.wait_carried_stores``); without that wait the CTA exits while the last
    tile's copies still read its shared memory."""
    from tileiras.codegen import emit_tma

    _emulate()
    monkeypatch.setattr(emit_tma, "wait_carried_stores", lambda em, body: None)
    with pytest.raises(EmulationError, match=r"async: .*exits while the asynchronous .*cp\.async\.bulk\.tensor"):
        _emulate()


# -- the CTA size ---------------------------------------------------------------------------
def _warps(case, arch: str = "sm_90") -> tuple[int, int]:
    (tas,) = run_stages(read_bytecode(export(case, arch=arch, aligned=True)), CompileOptions(gpu_name=arch),
                        "tileas", only_needed=True).tas.values()
    return tas.num_warps, tas.extra_warps


def test_tiles_multiplied_again_per_tile_get_two_consumer_warpgroups():
    """``cta_size.wgmma_pair``: on sm_90 a 128-row wgmma K loop inside a loop over tiles
    (a persistent GEMM) or through views the kernel makes from loaded addresses (a grouped
    GEMM) runs on 8 worker warps (on an H200 1.16x -> 1.00x and 1.24x -> 1.07x NVIDIA's
    time); a top-level K loop over argument views keeps 4, as do 64-row tiles, a hint,
    and the other archs."""
    from kernels.linalg import gemm
    from kernels.lists import ALIGNED, array_list, grouped_matmul

    assert _warps(LARGE["f16"]) == (8, 4)               # 8 workers, the producer warp group
    assert _warps(ONE_GROUP) == (4, 4)                  # the hint stands
    grouped = KernelCase("grouped_128", grouped_matmul, [[array_list(ct.float16, 2, **ALIGNED)] * 3 + [128, 128, 32]])
    assert _warps(grouped) == (8, 0)
    small = KernelCase("grouped_64", grouped_matmul, [[array_list(ct.float16, 2, **ALIGNED)] * 3 + [64, 128, 32]])
    assert _warps(small) == (4, 0)
    top = KernelCase("gemm_128", gemm, [[arr(ct.float16, 2), arr(ct.float16, 2), arr(ct.float16, 2), 128, 128, 32]])
    assert _warps(top) == (4, 0)
    assert _warps(LARGE["f16"], "sm_80") == (4, 0) and _warps(LARGE["f16"], "sm_120")[0] == 4


@needs_x86
def test_a_grouped_gemm_on_two_warpgroups_agrees_with_the_interpreter():
    """The grouped GEMM's 128x128 tiles on 8 worker warps: maps built on the device, a TMA
    ring both warpgroups release each stage of, 3 groups of 2x2 tiles."""
    from kernels.lists import ALIGNED, array_list, grouped_matmul

    grouped = KernelCase("grouped_128", grouped_matmul, [[array_list(ct.float16, 2, **ALIGNED)] * 3 + [128, 128, 32]])
    m = read_bytecode(export(grouped, arch="sm_90", aligned=True))
    reports = diffcheck.check_module(m, "sm_90", grid=(2, 2, 3), extent=256)
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]
