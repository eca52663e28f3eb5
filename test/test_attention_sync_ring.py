"""Flash attention's K/V loop on sm_100 and sm_120 as a TMA ring feeding ``mma.sync``
(lower/attention_tma.py ``plan_attention_sync_ring``, codegen/emit_attention_tma.py).

NVIDIA's tool loads an aligned flash attention's K and V by TMA there, and its consumer
warps read them with ``ldmatrix`` and multiply with ``mma.sync``.  Ours: one thread issues
the boxes S iterations ahead into the stage, in TMA's swizzle of the box width, on each
tile's "full" mbarrier; every thread reads K with plain ``ldmatrix`` (K^T lands as
keys x head dim: N rows of K) and V with ``.trans``, fences the async proxy and releases
the stage on its "empty" mbarrier, and the refill waits for that; no CTA barrier and no
per-thread copy in the loop.  Q lands by TMA too, once, and ``ldmatrix`` reads it into
registers before the loop; P stays in registers, as in the cp.async ring
(test_attention_pipeline.py), which remains the form with ``TILEIRAS_MMA_TMA_RING=0`` and
where TMA cannot copy the tiles.

Every kernel is checked against the interpreter in the emulator, which lands a box only
when its mbarrier phase completes (reading it earlier traps), reports deadlocks and runs
its shared-memory race detector; planted missing waits and releases are caught."""
from __future__ import annotations

import re

import pytest

from kernels.attention import flash_attention
from tileiras import diffcheck
from tileiras.layout.shared import Swizzle
from tileiras.lower.attention_pipeline import A_BEFORE_LOOP, A_HELD, A_STAGED, AttentionPlan
from tileiras.lower.attention_tma import EMPTY, AttentionRingPlan
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.remarks import collect
from tileiras.text.parser import parse_module

from _rings import assert_attention_refills, attention_loop, drop_attention_wait, release_only_below
from test_attention_tma import doubled_q, ring_problem
from test_software_pipeline import plan_of, ptx_of


@pytest.fixture(autouse=True)
def _mma_sync_on_sm100(monkeypatch):
    """These tests are about rings that mma.sync reads; on sm_100 flash attention runs on
    tcgen05 by default (test_tcgen05_attention.py), so that is turned off here."""
    monkeypatch.setenv("TILEIRAS_TCGEN05", "0")


def problems(text: str, arch: str, grid=(2, 1, 1), extent: int = 192) -> list:
    module = parse_module(text, "k.mlir")
    return [r.problem for r in diffcheck.check_module(module, arch, grid=grid, extent=extent)]


# -- the decision -------------------------------------------------------------------------------
@pytest.mark.parametrize("arch, p_from, base, threads", [(100, A_STAGED, 8192, 256), (120, A_HELD, 0, 128)])
def test_k_and_v_land_by_tma_where_ldmatrix_reads_them(arch, p_from, base, threads):
    plan = plan_of(flash_attention(), arch)
    assert isinstance(plan, AttentionRingPlan) and plan.sync is not None and plan.stagings == (None, None)
    k, v = plan.tiles
    # boxes in the tensor's order (K^T read through dim_map [0, 2, 1]: keys x head dim),
    # rows of 128 bytes in the 128-byte swizzle, which is the XOR the cp.async ring uses
    assert (k.box, k.boxes, k.staging.swizzle, v.box, v.boxes, v.staging.swizzle) == \
        ((1, 64, 64), 1, Swizzle.B128, (1, 64, 64), 1, Swizzle.B128)
    assert k.staging.form.per_phase == 1 and k.staging.form.max_phase == 8 and not k.staging.form.box_cols
    # K lands as N rows of K (plain ldmatrix), V as K rows of N (.trans)
    assert plan.sync.transposed == (True, False)
    # P is held as S's fragments on sm_120, staged every iteration at 0 on sm_100 (its
    # 64 x 64 f16: 8192 bytes); the softmax needs no scratch.  Q lands by TMA once, after
    # that, in the 128-byte swizzle ldmatrix reads its fragments from before the loop;
    # the ring follows, then the mbarriers (K's and V's "full", the "empty" one per
    # stage, then Q's)
    assert plan.sync.a_from == (A_BEFORE_LOOP, p_from)
    q = plan.q
    assert (q.box, q.boxes, q.staging.base, q.staging.swizzle) == ((1, 64, 64), 1, base, Swizzle.B128)
    ring = base + 8192
    assert (plan.ring_base, k.staging.base, v.staging.base, plan.stage_bytes) == (ring, ring, ring + 8192, 16384)
    assert plan.stages == 2 and plan.source == "modulo schedule"
    assert plan.barriers == ring + 2 * 16384 and plan.barrier(1, EMPTY) == plan.barriers + 8 * 5
    assert plan.q_barrier == plan.barriers + 6 * 8 and plan.smem_end == plan.q_barrier + 8
    # every thread of the CTA (sm_100: 8 warps, as NVIDIA's) releases the stage
    assert plan.consumers == threads


def test_head_dim_128_lands_two_boxes_a_tile():
    plan = plan_of(flash_attention(d=128), 120)
    k, v = plan.tiles
    # 256-byte rows: two boxes of 64 columns, one after the other (nvmma_shared's order)
    assert (k.box, k.boxes, v.box, v.boxes) == ((1, 64, 64), 2, (1, 64, 64), 2)
    assert (k.staging.form.box_cols, k.staging.form.pitch) == (64, 64)
    assert (k.nbytes, v.staging.base - k.staging.base, plan.stage_bytes) == (16384, 16384, 32768)
    assert (plan.q.box, plan.q.boxes, plan.ring_base) == ((1, 64, 64), 2, 16384)    # Q: 64 x 128


def test_q_k_and_v_are_the_ring_s_and_o_keeps_its_tma_store_after_it():
    module = parse_module(flash_attention(causal=True), "k.mlir")
    tas = run_stages(module, CompileOptions(gpu_name="sm_120"), "tileas", only_needed=True).tas["fa"]
    (plan,) = tas.pipelines.values()
    (store,) = tas.tma
    assert store.name == "store_view_tko" and tas.tma[store].buffer >= plan.smem_end
    # the ring's tensor maps (K's, V's, Q's) follow O's among the hidden parameters
    assert [t.map_index for t in (*plan.tiles, plan.q)] == [1, 2, 3] and len(tas.tensor_maps) == 4
    # a Q made otherwise (doubled before the loop) is staged from registers, as the
    # cp.async ring stages it, before the first copies
    doubled = doubled_q()
    plan = plan_of(doubled, 120)
    assert isinstance(plan, AttentionRingPlan) and plan.q is None and plan.sync.a_from[0] == A_BEFORE_LOOP
    assert problems(doubled, "sm_120") == [None]


def test_the_hint_and_the_trip_count_set_the_stages():
    assert plan_of(flash_attention(hints="sm_120 = {num_stages = 3}"), 120).stages == 3
    # d = 128: 32 KiB stages; a third does not fit beside Q's TMA buffer in sm_120's 99 KiB
    assert plan_of(flash_attention(d=128, hints="sm_120 = {num_stages = 3}"), 120).stages == 2
    assert plan_of(flash_attention(trips=1), 120).stages == 2


def test_the_knob_and_a_refusal_keep_the_cp_async_ring(monkeypatch):
    # padded with NaN: neither TMA nor cp.async fills other than zeros (the reason once)
    nan_padded = flash_attention().replace("tile=(1x64x64), tensor_view<?x?x?xf16, strides=[?,?,1]>, dim_map",
                                           "tile=(1x64x64), padding_value = nan, tensor_view<?x?x?xf16, strides=[?,?,1]>,"
                                           " dim_map")
    assert plan_of(nan_padded, 120) == "a K/V load pads with other than zeros (cp.async fills only zeros)"
    monkeypatch.setenv("TILEIRAS_MMA_TMA_RING", "0")
    assert isinstance(plan_of(flash_attention(), 120), AttentionPlan)


def test_the_remark_names_the_tma_ring():
    module = parse_module(flash_attention(), "k.mlir")
    remarks = [r for r in collect(module, "sm_120") if r.name == "RemarkSoftwarePipelined"]
    assert [r.message for r in remarks] == ["K/V loop software-pipelined with 2 stages"]
    assert ("Copies", "TMA ring into ldmatrix's swizzled operands (K/V)") in remarks[0].args


# -- the code -----------------------------------------------------------------------------------
@pytest.mark.parametrize("d, boxes", [(64, 1), (128, 2)])
def test_no_thread_copies_k_or_v_in_the_loop(d, boxes):
    ptx = ptx_of(flash_attention(d=d), "sm_120")
    loop = attention_loop(ptx, "mma.sync", "mma.sync")
    stages = plan_of(flash_attention(d=d), 120).stages
    assert not re.search(r"cp\.async\.(cg|ca)|ld\.global|st\.shared", loop)
    assert_attention_refills(loop, boxes)
    # every thread fences its reads of the stage for the async proxy before releasing it
    assert loop.index("fence.proxy.async") < loop.index("mbarrier.arrive.shared::cta.b64")
    # K with plain ldmatrix (d / 16 K steps of Q @ K^T, 64 keys: 4 x4 loads each), V with .trans
    assert len(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16", loop)) == d // 16 * 4
    assert len(re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16", loop)) == 64 // 16 * d // 16
    assert len(re.findall(r"mbarrier\.init", ptx)) == 3 * stages + 1        # and Q's
    prologue = ptx[ptx.rindex("fence.mbarrier_init"):ptx.index("mma.sync")]
    # Q's boxes, then iterations 0 .. S-1 into the fresh stages; Q read once by ldmatrix
    # where it landed: no thread stores anything to shared memory
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.3d", prologue)) == boxes + 2 * stages * boxes
    assert not re.search(r"st\.shared", ptx[:ptx.index("mma.sync")])


@pytest.mark.parametrize("arch, kwargs, grid", [
    ("sm_120", {}, (2, 1, 1)),                              # 2 trips (dynamic), 96 keys: zero-padded
    ("sm_120", {"causal": True}, (3, 1, 1)),
    ("sm_120", {"d": 128}, (2, 1, 1)),
    ("sm_120", {"views_in_loop": True}, (2, 1, 1)),
    ("sm_100", {}, (2, 1, 1)),
])
def test_the_ring_agrees_with_the_interpreter(arch, kwargs, grid):
    assert isinstance(plan_of(flash_attention(**kwargs), int(arch[3:])), AttentionRingPlan)
    assert problems(flash_attention(**kwargs), arch, grid) == [None]


@pytest.mark.parametrize("kwargs, keys, blocks, stages", [
    ({}, 512, 1, 2),                                        # 8 trips: each stage refilled 3 times
    ({"causal": True}, 256, 4, 2),                          # 1 .. 4 trips by block
    ({"d": 128}, 384, 1, 2),                                # 3 stages of 32 KiB do not fit
    ({"hints": "sm_120 = {num_stages = 3}"}, 448, 1, 3),
])
def test_many_trips_agree_with_the_interpreter(kwargs, keys, blocks, stages):
    text = flash_attention(**kwargs)
    assert plan_of(text, 120).stages == stages
    assert ring_problem(text, keys, kwargs.get("d", 64), 64, blocks, arch="sm_120") is None


@pytest.mark.parametrize("dropped, reader", [(1, "ldmatrix"), (2, "ldmatrix"), (3, "ldmatrix.sync.aligned.m8n8.x4.trans")])
def test_a_missing_full_wait_is_caught(monkeypatch, dropped, reader):
    """Q's fragments read before its boxes land (the prologue's wait), Q @ K^T without
    waiting for K's phase (the first wait in the loop), or P @ V without V's (the
    second): ``ldmatrix`` reads shared memory while its boxes may land."""
    drop_attention_wait(monkeypatch, dropped)
    (problem,) = problems(flash_attention(), "sm_120")
    assert problem is not None and "cp.async.bulk.tensor" in problem and reader in problem


def test_a_missing_release_is_caught(monkeypatch):
    """Warps 1-3 never release a stage: the refill's "empty" wait never completes, and the
    emulator says the kernel hangs there rather than letting the boxes overwrite it."""
    release_only_below(monkeypatch, 32)
    problem = ring_problem(flash_attention(), 256, 64, arch="sm_120")
    assert problem is not None and "deadlock" in problem and "mbarrier" in problem


def test_a_refill_without_the_empty_wait_is_caught(monkeypatch):
    """The refill of a stage issued without waiting for every thread's release overwrites
    K or V while another warp may still read it."""
    drop_attention_wait(monkeypatch, 4)
    problem = ring_problem(flash_attention(), 256, 64, arch="sm_120")
    assert problem is not None and "race" in problem and "cp.async.bulk.tensor" in problem and "ldmatrix" in problem
