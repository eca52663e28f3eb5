"""Streaming loops on TMA targets (sm_90, sm_100): their TMA loads issued trips ahead
(``lower/tma_stream.record_tma_streams``, ``codegen/emit_tma.stream_prologue`` and
``_streamed_load``).

A persistent loop over row blocks (``kernels.streamed.row_blocks``, the shape of TileGym's
persistent norms) loads each block with TMA; the loop issues the copies of its first S trips
before it starts, and trip i, once it has read its stage and a CTA barrier says every
thread has, issues trip i + S's into it.  Every kernel is checked against the interpreter in
the emulator, which lands a TMA copy's bytes only when its mbarrier phase completes (a read
before the wait traps) and reports a copy into bytes another thread may still read as a
race; the planted faults below show both are caught."""
from __future__ import annotations

import re

import pytest

from kernels.streamed import row_blocks
from tileiras import diffcheck
from tileiras.codegen import emit_tma
from tileiras.lower.stream_pipeline import StreamPlan
from tileiras.lower.tma_stream import TmaStream
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.text.parser import parse_module

from test_software_pipeline import plan_of, ptx_of

THREE = "sm_90 = {num_stages = 3}"


def tas_of(text: str, arch: int = 90):
    module = parse_module(text, "k.mlir")
    return run_stages(module, CompileOptions(gpu_name=f"sm_{arch}"), "tileas", only_needed=True).tas["k"]


def problems(text: str, grid: tuple, extent: int, arch: str = "sm_90") -> list:
    return [r.problem for r in diffcheck.check_module(parse_module(text, "k.mlir"), arch, grid=grid, extent=extent)]


# -- the decision -------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", [90, 100])
def test_a_row_block_loop_of_large_tiles_issues_its_tma_loads_a_trip_ahead(arch):
    """One stage of 32 KB, as NVIDIA's producer fills its persistent RMS norm's one 64 KB
    buffer: that covers the bytes in flight wanted (``TMA_BYTES_IN_FLIGHT``)."""
    tas = tas_of(row_blocks(32, 256), arch)
    (plan,) = tas.pipelines.values()
    assert isinstance(plan, TmaStream) and plan.stages == 1
    (load,) = plan.loads
    assert tas.tma[load].stages == 1 and tas.pipelined[load] is plan


def test_small_tiles_take_stages_enough_for_32_kb_in_flight():
    """1 KB and 8 KB tiles: 8 stages (the most) and 4; a known trip count of 3 caps them."""
    for (m, n), stages in (((4, 64), 8), ((8, 256), 4)):
        (plan,) = tas_of(row_blocks(m, n)).pipelines.values()
        assert plan.stages == stages and plan.source == "32 KB in flight"
    (plan,) = tas_of(row_blocks(4, 64, trips=3)).pipelines.values()
    assert plan.stages == 3


def test_the_num_stages_hint_gives_each_load_a_ring_of_buffers_and_mbarriers():
    tas = tas_of(row_blocks(4, 64, hints=THREE))
    (plan,) = tas.pipelines.values()
    tma = tas.tma[plan.loads[0]]
    assert plan.stages == tma.stages == 3 and plan.source == "num_stages hint"
    assert tma.stage_bytes == 4 * 64 * 4        # 1 KB stages, 128-byte aligned
    assert tas.tma_end >= tma.barrier + 3 * 8 and tma.barrier >= tma.buffer + 3 * tma.stage_bytes


def test_a_trip_that_may_end_before_the_load_keeps_one_synchronous_copy_a_trip():
    """A ``continue`` ahead of the load: that trip would neither wait for its stage nor
    refill it, and every later trip would wait for the wrong phase."""
    text = row_blocks(4, 64, skip_one=True)
    (plan,) = tas_of(text).pipelines.values()
    assert plan == "a trip may end before a load it streams (a continue or break ahead of it)"
    assert problems(text, (1, 1, 1), 40) == [None]


@pytest.mark.parametrize("arch", [80, 120])
def test_targets_without_tma_loads_stream_through_cp_async_rings(arch):
    assert isinstance(plan_of(row_blocks(4, 64), arch), StreamPlan)


def test_the_plan_reads_back_from_tileas_text():
    from tileiras.lower.tileas_format import format_tileas  # noqa: PLC0415
    from tileiras.lower.tileas_parse import parse_tileas  # noqa: PLC0415

    c = run_stages(parse_module(row_blocks(4, 64, hints=THREE), "k.mlir"), CompileOptions(gpu_name="sm_90"),
                   "tileas", only_needed=True)
    text = format_tileas(c.tas["k"])
    assert "#tileas.tma_stream<" in text and "stages = 3" in text and "stages=3" in text
    back = parse_tileas(text, c.aa["k"])
    assert back.pipelines == c.tas["k"].pipelines and back.tma == c.tas["k"].tma
    assert format_tileas(back) == text


# -- the code -----------------------------------------------------------------------------------
def test_the_loop_waits_reads_synchronizes_then_refills_the_stage():
    ptx = ptx_of(row_blocks(4, 64, hints=THREE), "sm_90")
    loop = ptx.index("mbarrier.try_wait")
    # the prologue: three stages' copies (each behind its own mbarrier) before the loop
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cta\.global", ptx[:loop])) == 3
    assert ptx.count("mbarrier.init") == 3
    body = ptx[loop:]
    read = body.index("ld.shared")
    barrier = body.index("bar.sync", read)
    refill = body.index("cp.async.bulk.tensor.2d.shared::cta.global")
    assert read < barrier < refill


@pytest.mark.parametrize("args, kw", [
    ((4, 64), {}),
    ((4, 64), {"hints": THREE}),
    ((8, 128, "bf16"), {"hints": "sm_90 = {num_stages = 2}"}),
    ((4, 64), {"hints": "sm_90 = {num_stages = 2}", "outer": 3}),   # the loop entered three times
    ((4, 64), {"trips": 3}),                                       # 3 stages: no refill
])
@pytest.mark.parametrize("grid, extent", [((1, 1, 1), 40), ((3, 1, 1), 40), ((5, 1, 1), 16), ((2, 1, 1), 4)])
def test_streamed_row_blocks_agree_with_the_interpreter(args, kw, grid, extent):
    """Trip counts from 0 (CTAs past the blocks) to 10, fewer trips than stages, and the
    phases of a ring whose loop is entered again."""
    assert problems(row_blocks(*args, **kw), grid, extent) == [None]


def test_sm_100_streamed_row_blocks_agree_with_the_interpreter():
    assert problems(row_blocks(4, 64, hints="sm_100 = {num_stages = 2}"), (3, 1, 1), 40, "sm_100") == [None]


# -- planted faults: the emulator catches each ---------------------------------------------------
def test_reading_a_stage_before_its_wait_is_caught(monkeypatch):
    monkeypatch.setattr(emit_tma, "wait_phase", lambda em, barrier, parity: None)
    (problem,) = problems(row_blocks(4, 64, hints=THREE), (2, 1, 1), 40)
    assert problem and "kind='async'" in problem and "reads shared byte" in problem


def test_refilling_a_stage_before_every_thread_has_read_it_is_caught(monkeypatch):
    monkeypatch.setattr(emit_tma, "all_have_read", lambda b: None)
    (problem,) = problems(row_blocks(4, 64, hints="sm_90 = {num_stages = 1}"), (2, 1, 1), 40)
    assert problem and "kind='race'" in problem and "writes (asynchronously)" in problem


def test_remarks_say_the_loop_streams_its_tma_loads(tmp_path, capsys):
    from _build import bytecode_file  # noqa: PLC0415
    from tileiras.driver import main as driver_main  # noqa: PLC0415

    path = bytecode_file(tmp_path, row_blocks(4, 64, hints=THREE), name="k.tileir")
    assert driver_main([str(path), "--gpu-name", "sm_90", "-o", str(tmp_path / "k.cubin"), "--remarks=memory"]) == 0
    out = capsys.readouterr().out
    assert "streaming loop software-pipelined with 3 stages" in out and "TMA, issued 3 trips ahead" in out


def test_the_knob_keeps_one_synchronous_copy_a_trip(monkeypatch):
    monkeypatch.setenv("TILEIRAS_TMA_STREAM", "0")
    tas = tas_of(row_blocks(4, 64, hints=THREE))
    assert not tas.pipelines and all(p.stages == 1 for p in tas.tma.values())
    ptx = ptx_of(row_blocks(4, 64), "sm_90")
    loop = ptx[ptx.index("mbarrier.init"):]
    assert loop.index("bar.sync", loop.index("bar.sync") + 1) < loop.index("cp.async.bulk.tensor.2d.shared::cta.global")
    assert problems(row_blocks(4, 64), (2, 1, 1), 40) == [None]


# -- TileGym's chunked persistent norms (cuTile) ------------------------------------------------
@pytest.mark.parametrize("name, tile, stages", [("layer_norm_chunked", 2048, (8, 3)), ("rms_norm_chunked", 256, (8, 8))])
def test_tilegyms_chunked_norms_stream_their_column_loops_through_tma(name, tile, stages):
    """Their column loops' trip counts are the row's chunk count, their kernels reduce: every
    chunk load goes through TMA (NVIDIA's producer warp loads them so) and each loop keeps
    32 KB in flight: 8 stages of one 4 KB chunk, 3 of x, w and b's (8 of 256-column
    chunks); the normalize pass's first copies go out before the first pass
    (``place_tma_prologues``).  Rows of one partial 2048-column chunk or two 256-column
    ones (the second partial), 2 CTAs taking 72 rows each in turn (the stages refilled
    across rows), against the interpreter."""
    pytest.importorskip("cuda.tile")
    import warnings  # noqa: PLC0415

    from differential import export  # noqa: PLC0415
    from kernels import norms as K  # noqa: PLC0415
    from tileiras.reader import read_bytecode  # noqa: PLC0415

    case = (K.rms_chunked_case if name.startswith("rms") else K.layer_chunked_case)(f"{name}_{tile}", K.BF16, tile)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = export(case, arch="sm_90", aligned=True)
    module = read_bytecode(data)
    tas = run_stages(read_bytecode(data), CompileOptions(gpu_name="sm_90"), "tileas", only_needed=True).tas
    (kernel,) = tas.values()
    streams = [p for p in kernel.pipelines.values() if isinstance(p, TmaStream)]
    assert tuple(p.stages for p in streams) == stages
    assert streams[1].prologue_at is streams[0].loop    # the normalize pass's first chunks: before the first pass
    # 144 rows of 272 columns (a 4200 extent within a 64K-element budget): one partial
    # 2048-column chunk a row, or two 256-column ones, the second partial
    reports = diffcheck.check_module(module, "sm_90", grid=(2, 1, 1), extent=4200, budget=1 << 16)
    assert [r.problem for r in reports] == [None]


# -- where a loop's first copies go out ----------------------------------------------------------
def test_a_second_pass_issues_its_first_copies_before_the_first_pass_runs():
    """Two passes over the row blocks: the second's first copies need nothing the first
    computes, so they go out at the same place as the first's, not when the first ends."""
    tas = tas_of(row_blocks(4, 64, passes=2))
    first, second = tas.pipelines.values()
    assert first.prologue_at is not None and second.prologue_at is first.prologue_at
    assert problems(row_blocks(4, 64, passes=2), (2, 1, 1), 40) == [None]


WRITE_X = """%zx = constant <f32: 0.0> : tile<4x64xf32>
%wx = store_view_tko weak %zx, %x_p[%c0, %c0] token = %tok : tile<4x64xf32>, partition_view<tile=(4x64), padding_value = zero, tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> token"""


def test_a_write_to_what_a_pass_loads_keeps_its_first_copies_after_it():
    tas = tas_of(row_blocks(4, 64, passes=2, between=WRITE_X))
    first, second = tas.pipelines.values()
    assert second.prologue_at is None or tas.emission[second.prologue_at] > tas.emission[first.loop]


SKIP_SECOND = """%sk = cmpi equal %rep, %c1, signed : tile<i32> -> tile<i1>
if %sk {
  continue
} else {
}"""


def test_an_early_continue_keeps_the_next_pass_s_first_copies_after_it():
    """Outer trip 1 skips the second pass (``continue``): copies issued above the ``if``
    would land with no trip to wait for them, and the next trip would wait for the wrong
    phases."""
    text = row_blocks(4, 64, passes=2, between=SKIP_SECOND, outer=3, hints="sm_90 = {num_stages = 2}")
    tas = tas_of(text)
    first, second = tas.pipelines.values()
    skip = next(op for op in first.loop.parent.ops if op.name == "if")
    assert second.prologue_at is None or tas.emission[second.prologue_at] > tas.emission[skip]
    assert problems(text, (2, 1, 1), 40) == [None]


def test_passes_entered_again_issue_their_first_copies_together_without_a_barrier():
    """Two passes in a loop: the second's first copies go out with the first's, at the top
    of each outer trip, with no CTA barrier before them: the previous trip's last read of
    each ring was followed by its trip's barrier (the emulator would report a copy racing
    a read)."""
    text = row_blocks(4, 64, passes=2, outer=2, hints="sm_90 = {num_stages = 1}")
    first, second = tas_of(text).pipelines.values()
    assert first.prologue_at is None and second.prologue_at is first.loop
    assert problems(text, (2, 1, 1), 40) == [None]
