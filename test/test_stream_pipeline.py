"""Software-pipelined SIMT streaming loops (lower/stream_pipeline.py, codegen/emit_stream.py).

A row loop over column tiles (``kernels.streamed.row_loop``: a looped softmax/reduction
pass) on sm_80 copies each trip's tiles with ``cp.async`` into a ring of shared-memory
stages, S-1 trips ahead, and reads them back in the tiles' register layouts.  Every kernel
is checked against the interpreter in the emulator, which lands a copy's bytes only at the
``cp.async.wait_group`` that covers it (reading them earlier traps) and runs its
shared-memory race detector; the PTX's structure is asserted too."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kernels.streamed import row_loop
from tileiras import diffcheck
from tileiras.driver import main as driver_main
from tileiras.emulate import launch
from tileiras.emulate.launch import EmulationError
from tileiras.layout.shared import bank_wavefronts
from tileiras.lower.stream_pipeline import StreamPlan, UnrolledLoop
from tileiras.lower.tma_stream import TmaStream
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.text.parser import parse_module

from _build import bytecode_file
from test_software_pipeline import agrees, plan_of, ptx_of


def problems_of(text: str, arch: str, grid: tuple, extent: int) -> list:
    return [r.problem for r in diffcheck.check_module(parse_module(text, "k.mlir"), arch, grid=grid, extent=extent)]


def loop_of(ptx: str, stages: int) -> str:
    """The PTX of the loop: after the prologue's S-1 commits, before the drain's wait."""
    start = 0
    for _ in range(stages - 1):
        start = ptx.index("cp.async.commit_group;", start) + 1
    return ptx[start:ptx.index("cp.async.wait_group 0;")]


# -- the decision -------------------------------------------------------------------------------
def test_an_aligned_f32_row_loop_is_pipelined_with_16_byte_copies():
    plan = plan_of(row_loop(8, 128))
    assert isinstance(plan, StreamPlan)
    (tile,) = plan.tiles
    assert tile.copy_bytes == 16 and plan.stage_bytes == 8 * 128 * 4
    assert plan.source == "modulo schedule" and plan.stages >= 2
    assert not plan.barrier         # every thread reads only what it copied


def test_the_stages_are_read_without_bank_conflicts():
    """Each 16-byte ld.shared request (8 lanes a phase) takes one wavefront a phase."""
    for elem in ("f32", "f16"):
        (tile,) = plan_of(row_loop(8, 128, elem=elem)).tiles
        n = tile.copy_bytes // (4 if elem == "f32" else 2)
        waves = bank_wavefronts(tile.layout, tile.shared, 4 if elem == "f32" else 2, n)
        assert set(waves) == {4}, waves


def test_the_num_stages_hint_and_a_known_trip_count_set_the_stages():
    assert plan_of(row_loop(4, 64, hints="sm_80 = {num_stages = 3}")).stages == 3
    assert plan_of(row_loop(4, 64, trips=1, hints="sm_80 = {num_stages = 4}")).stages == 2
    assert plan_of(row_loop(4, 64, trips=3, hints="sm_80 = {num_stages = 4}")).stages == 3


@pytest.mark.parametrize("arch", [80, 90, 120])
def test_few_known_trips_are_unrolled_instead(arch):
    """16 trips of a 4x64 f32 tile (2 registers a thread each): unrolled, every trip's load
    issued before the first trip's work, as NVIDIA's loop_accumulate; no ring, no loop; the
    interpreter agrees.  Tiles too large for all trips' registers keep the ring (sm_80)."""
    text = row_loop(4, 64, trips=16, softmax=False)
    assert plan_of(text, arch) == UnrolledLoop(16, 32)
    ptx = ptx_of(text, f"sm_{arch}")
    assert "cp.async" not in ptx and len(re.findall(r"ld\.global\.v2\.b32", ptx)) == 16
    assert not any(agrees(text, 512, f"sm_{arch}"))      # half the trips' columns in the tensor
    if arch == 80:
        assert isinstance(plan_of(row_loop(8, 256, trips=16, softmax=False)), StreamPlan)   # 16 x 16 registers


def test_two_loaded_tiles_share_a_stage():
    plan = plan_of(row_loop(2, 256, elem="bf16", two=True))
    assert isinstance(plan, StreamPlan) and [t.offset for t in plan.tiles] == [0, 1024]
    assert plan.stage_bytes == 2048


def test_threads_holding_copies_read_after_a_barrier():
    """A 1 x 64 f32 tile over 4 warps: the warps hold copies, one copies, all read."""
    plan = plan_of(row_loop(1, 64))
    assert isinstance(plan, StreamPlan) and plan.barrier


@pytest.mark.parametrize("text, reason", [
    (row_loop(4, 64, write_back=True), "the loop writes what it loads"),
    (row_loop(4, 64, elem="f16", align=0), "narrower than 4 bytes"),
    (row_loop(64, 1024), "tiles too large for shared memory"),
])
def test_loops_it_cannot_pipeline_keep_todays_code(text, reason):
    decision = plan_of(text)
    assert isinstance(decision, str) and reason in decision
    ptx = ptx_of(text)
    assert "cp.async" not in ptx and "ld.global" in ptx
    assert agrees(text, 100) == [None]


# -- the code -----------------------------------------------------------------------------------
def test_pipelined_ptx_structure():
    """Prologue: S-1 groups; in the loop: wait_group S-2, the tile read with vector
    ld.shared, one stage's copies and their commit, and no global load; drain: wait_group 0."""
    ptx = ptx_of(row_loop(8, 128, hints="sm_80 = {num_stages = 3}"))
    loop = loop_of(ptx, 3)
    assert "ld.global" not in loop and "bar.sync" not in loop
    assert re.findall(r"cp\.async\.wait_group (\d+);", loop) == ["1"]
    assert len(re.findall(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16, %r\d+;", loop)) == 2
    assert loop.count("cp.async.commit_group;") == 1
    assert len(re.findall(r"ld\.shared\.v4\.b32", loop)) == 2
    assert ptx.count("cp.async.commit_group;") == 3 and "cp.async.wait_group 0;" in ptx


CASES = [
    # (row_loop arguments, extents: the dynamic column tile counts they give)
    ({"m": 8, "n": 128}, (100, 128, 300, 1000)),                 # trips 1 (a tail), 1, 3 (tail), 8
    ({"m": 8, "n": 128, "elem": "f16"}, (100, 256, 1000)),
    ({"m": 4, "n": 64, "hints": "sm_80 = {num_stages = 3}"}, (64, 128, 192, 900)),   # trips 1, 2, S, many
    ({"m": 4, "n": 64, "trips": 1}, (100,)),
    # few known trips are unrolled (test_few_known_trips_are_unrolled_instead) unless a hint asks
    ({"m": 4, "n": 64, "trips": 2, "hints": "sm_80 = {num_stages = 2}"}, (100,)),
    ({"m": 4, "n": 64, "trips": 11, "hints": "sm_80 = {num_stages = 4}"}, (100,)),   # past the tensor: zero fills
    ({"m": 1, "n": 64}, (100,)),                               # copies held by several warps
    ({"m": 2, "n": 256, "elem": "bf16", "two": True}, (300,)),
    ({"m": 4, "n": 64, "elem": "f16", "two": True, "softmax": False}, (100,)),
    ({"m": 4, "n": 64, "align": 0}, (100,)),                   # f32 elements: 4-byte copies
]


@pytest.mark.parametrize("case, extents", CASES, ids=[str(i) for i in range(len(CASES))])
def test_pipelined_row_loop_matches_interpreter(case, extents):
    """Interpreter vs emulated PTX, asynchrony model and race detector on."""
    text = row_loop(**case)
    assert isinstance(plan_of(text), StreamPlan)
    for extent in extents:
        assert agrees(text, extent) == [None], extent


@pytest.mark.parametrize("arch", ["sm_86", "sm_89", "sm_120"])
def test_other_ampere_ada_and_blackwell_chips_pipeline_too(arch):
    text = row_loop(8, 128, elem="f16")
    assert isinstance(plan_of(text, int(arch[3:])), StreamPlan)
    assert "cp.async.cg" in ptx_of(text, arch)
    assert agrees(text, 300, arch) == [None]


@pytest.mark.parametrize("index", [0, 1])
def test_sm_120_rows_that_tma_would_load_are_streamed(index):
    """TileGym's persistent norms on sm_120, aligned: lower/tma gives their row loads TMA (the
    rows feed reductions), one box and its wait a trip.  The stream takes them back: cp.async
    copies a trip ahead, the kernel's other TMA buffers placed after the ring."""
    pytest.importorskip("cuda.tile")
    from differential import export
    from kernels.norms import CASES

    from tileiras.reader import read_bytecode

    module = read_bytecode(export(CASES[index], "sm_120", aligned=True))
    (tas,) = run_stages(module, CompileOptions(gpu_name="sm_120"), "tileas").tas.values()
    (plan,) = tas.pipelines.values()
    assert isinstance(plan, StreamPlan), plan
    assert not any(ld in tas.tma for ld in plan.loads)
    ptx = diffcheck.compile_ptx(module, "sm_120")
    assert "cp.async.cg" in ptx and "cp.async.bulk.tensor" not in ptx
    reports = diffcheck.check_module(module, "sm_120", grid=(3, 1, 1), extent=200)
    assert [r.problem for r in reports] == [None]


def test_sm_90_streams_the_loop_through_tma_instead():
    """The kernel reduces (it uses shared memory anyway) and the loop's trip count is not a
    constant: its tile goes through TMA, issued trips ahead (test_tma_stream.py), as NVIDIA's
    producer warp loads corpus-aligned layernorm_fwd's."""
    module = parse_module(row_loop(8, 128), "k.mlir")
    tas = run_stages(module, CompileOptions(gpu_name="sm_90"), "tileas", only_needed=True).tas
    (plan,) = tas["k"].pipelines.values()
    assert isinstance(plan, TmaStream) and plan.stages == 8 and plan.source == "32 KB in flight"
    assert problems_of(row_loop(8, 128), "sm_90", (3, 1, 1), 600) == [None]


def test_a_missing_wait_is_caught():
    """The steady state's wait_group removed: trip i reads a stage whose copies have not
    landed, which the emulator traps."""
    text = row_loop(8, 128, hints="sm_80 = {num_stages = 3}")
    module = parse_module(text, "k.mlir")
    fn = module.functions[0]
    ptx = diffcheck.compile_ptx(module, "sm_80")
    broken = ptx.replace("cp.async.wait_group 1;", "")
    assert broken != ptx
    launch(ptx, fn.name, (1, 1, 1), diffcheck.synthesize_args(fn, np.random.default_rng(1), 600)).check()
    with pytest.raises(EmulationError, match=r"async: .*ld\.shared.* reads shared byte .*\(cp\.async\.cg"):
        launch(broken, fn.name, (1, 1, 1), diffcheck.synthesize_args(fn, np.random.default_rng(1), 600)).check()


@pytest.mark.parametrize("text, said", [
    (row_loop(8, 128, hints="sm_80 = {num_stages = 3}"),
     ["streaming loop software-pipelined with 3 stages", "cp.async 16-byte into the tiles' layouts"]),
    (row_loop(4, 64, write_back=True), ["streaming loop not software-pipelined", "the loop writes what it loads"]),
])
def test_remarks_say_whether_a_streaming_loop_was_pipelined(text, said, tmp_path, capsys):
    path = bytecode_file(tmp_path, text, name="k.tileir")
    assert driver_main([str(path), "--gpu-name", "sm_80", "-o", str(tmp_path / "k.cubin"), "--remarks=memory"]) == 0
    out = capsys.readouterr().out
    assert all(s in out for s in said), out


def test_the_plan_reads_back_from_tileas_text():
    """``--emit=tileas`` prints the plan (its tiles' layouts, ring and barrier) and reads it back."""
    from tileiras.lower.tileas_format import format_tileas  # noqa: PLC0415
    from tileiras.lower.tileas_parse import parse_tileas  # noqa: PLC0415

    c = run_stages(parse_module(row_loop(2, 256, elem="bf16", two=True), "k.mlir"), CompileOptions(gpu_name="sm_80"),
                   "tileas", only_needed=True)
    text = format_tileas(c.tas["k"])
    assert "pipeline = #tileas.stream<" in text and text.count("#tileas.stream_tile<") == 2
    back = parse_tileas(text, c.aa["k"])
    assert back.pipelines == c.tas["k"].pipelines and back.pipelined == c.tas["k"].pipelined
    assert format_tileas(back) == text
