"""Dependence graphs and modulo schedules of real loops: cuTile kernels exported as
bytecode (no GPU needed), read, run through tileaa/tileas/sched; and ``--emit=sched``."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

ct = pytest.importorskip("cuda.tile")

from kernels._case import KernelCase, arr
from kernels.control import loop_accumulate
from kernels.linalg import gemm

from tileiras import driver
from tileiras.cli import read_module
from tileiras.pipeline import CompileOptions, compile_module, run_stages
from tileiras.sched.ddg import DepKind
from tileiras.sched.latency import AMPERE, HOPPER, OpClass, model_for
from tileiras.sched.loops import LoopSchedule
from tileiras.sched.modulo import check_schedule, modulo_schedule, sequential_schedule

ConstInt = ct.Constant[int]


@ct.kernel
def rmw_loop(x, y, K: ConstInt):
    """Two read-modify-write chains on two arrays, each carried by a token."""
    i = ct.bid(0)
    for k in range(K):
        t = ct.load(x, index=(i,), shape=(64,))
        ct.store(x, index=(i,), tile=t * 2.0)
        u = ct.load(y, index=(k,), shape=(64,))
        ct.store(y, index=(k,), tile=u + t)


@ct.kernel
def swap_loop(x, out, K: ConstInt):
    """``a, b = b, a + t``: the add reads its own result of two iterations ago."""
    i = ct.bid(0)
    a = ct.zeros((64,), dtype=ct.float32)
    b = ct.zeros((64,), dtype=ct.float32)
    for k in range(K):
        t = ct.load(x, index=(k,), shape=(64,))
        a, b = b, a + t
    ct.store(out, index=(i,), tile=a + b)


@ct.kernel
def nested_loops(x, out, M: ConstInt, K: ConstInt):
    i = ct.bid(0)
    total = ct.zeros((64,), dtype=ct.float32)
    for m in range(M):
        row = ct.zeros((64,), dtype=ct.float32)
        for k in range(K):
            row = row + ct.reshape(ct.load(x, index=(m, k), shape=(1, 64)), (64,))
        total = total + ct.exp(row)
    ct.store(out, index=(i,), tile=total)


F32, F16 = ct.float32, ct.float16
CASES = {
    "gemm": KernelCase("gemm", gemm, [[arr(F16, 2), arr(F16, 2), arr(F16, 2), 64, 64, 32]]),
    "loop_accumulate": KernelCase("loop_accumulate", loop_accumulate, [[arr(F32, 2), arr(F32), 16]]),
    "rmw_loop": KernelCase("rmw_loop", rmw_loop, [[arr(F32), arr(F32), 8]]),
    "swap_loop": KernelCase("swap_loop", swap_loop, [[arr(F32), arr(F32), 8]]),
    "nested_loops": KernelCase("nested_loops", nested_loops, [[arr(F32, 2), arr(F32), 4, 8]]),
}


@pytest.fixture(scope="session")
def exported(tmp_path_factory) -> dict[str, Path]:
    from cuda.tile.compilation import export_kernel

    root = tmp_path_factory.mktemp("sched")
    paths = {}
    for name, case in CASES.items():
        buf = io.BytesIO()
        export_kernel(case.kernel, case.signatures(), buf, gpu_code="sm_90",
                      output_format="tileir_bytecode", bytecode_version="13.4")
        paths[name] = root / f"{name}.tileir"
        paths[name].write_bytes(buf.getvalue())
    return paths


def loops_of(exported: dict[str, Path], name: str, gpu: str = "sm_90") -> list[LoopSchedule]:
    module = read_module(exported[name].read_bytes())
    c = run_stages(module, CompileOptions(gpu), stop_after="sched")
    (fn,) = module.functions
    return c.schedules[fn.name]


def edge_set(ls: LoopSchedule) -> set[tuple[int, int, int, DepKind]]:
    return {(e.src, e.dst, e.distance, e.kind) for e in ls.ddg.edges}


def assert_valid(ls: LoopSchedule) -> None:
    assert check_schedule(ls.ddg, ls.schedule, ls.model) == []
    assert ls.schedule.ii >= ls.min_ii.value
    for e in ls.ddg.edges:  # every edge carries its producer's latency
        assert e.latency == ls.ddg.nodes[e.src].cost(ls.model).latency


def test_gemm_loop(exported):
    (ls,) = loops_of(exported, "gemm")
    assert [n.op_class for n in ls.ddg.nodes] == [OpClass.GLOBAL_LOAD, OpClass.GLOBAL_LOAD, OpClass.MMA]
    assert edge_set(ls) == {(0, 2, 0, DepKind.DATA), (1, 2, 0, DepKind.DATA), (2, 2, 1, DepKind.CARRIED)}
    # 64x64x32 on 4 warps: 16 m16n8k16 steps a warp; the accumulator recurrence bounds ii
    mma = ls.ddg.nodes[2]
    assert mma.work == 16
    assert ls.min_ii.rec == mma.cost(HOPPER).latency > ls.min_ii.res
    assert_valid(ls)
    assert ls.schedule.ii == ls.min_ii.value
    load_latency = ls.ddg.nodes[0].cost(HOPPER).latency
    assert ls.schedule.cycle_of[2] >= load_latency  # the mma waits for both loads
    assert ls.schedule.stage_of[2] > ls.schedule.stage_of[0] == 0  # loads run stages ahead


def test_gemm_loop_per_architecture(exported):
    hopper = loops_of(exported, "gemm", "sm_90")[0]
    ampere = loops_of(exported, "gemm", "sm_80")[0]
    assert ampere.model is AMPERE and hopper.model is HOPPER
    assert ampere.schedule.ii > hopper.schedule.ii  # half the tensor rate per warp
    assert_valid(ampere)


def test_loop_accumulate(exported):
    (ls,) = loops_of(exported, "loop_accumulate")
    assert [n.name for n in ls.ddg.nodes] == ["load_view_tko#0", "reshape#1", "addf#2", "maxf#3"]
    assert edge_set(ls) == {(0, 1, 0, DepKind.DATA), (1, 2, 0, DepKind.DATA), (1, 3, 0, DepKind.DATA),
                            (2, 2, 1, DepKind.CARRIED), (3, 3, 1, DepKind.CARRIED)}
    assert_valid(ls)
    assert ls.schedule.ii == ls.min_ii.value
    # addf and maxf share the FMA pipe: never in the same row
    ii, cyc = ls.schedule.ii, ls.schedule.cycle_of
    assert cyc[2] % ii != cyc[3] % ii


def test_token_chains_give_memory_edges(exported):
    """x: load -> store (same iteration), store -> load and store -> store (next
    iteration, through the carried token); y likewise; nothing between x and y, and no
    edge between two loads."""
    (ls,) = loops_of(exported, "rmw_loop")
    names = [n.name for n in ls.ddg.nodes]
    assert names == ["load_view_tko#0", "join_tokens#1", "mulf#2", "store_view_tko#3",
                     "load_view_tko#4", "join_tokens#5", "addf#6", "store_view_tko#7"]
    memory = {(s, d, dist) for s, d, dist, k in edge_set(ls) if k is DepKind.MEMORY}
    assert memory == {(0, 3, 0), (3, 0, 1), (3, 3, 1), (4, 7, 0), (7, 4, 1), (7, 7, 1)}
    data = {(s, d) for s, d, dist, k in edge_set(ls) if k is DepKind.DATA}
    assert data == {(0, 2), (2, 3), (0, 6), (4, 6), (6, 7)}  # token operands give no data edges
    # the memory edges agree with TileAA's dependences
    module = read_module(exported["rmw_loop"].read_bytes())
    c = run_stages(module, CompileOptions("sm_90"), stop_after="sched")
    aa = c.aa[module.functions[0].name]
    ls = c.schedules[module.functions[0].name][0]
    for e in ls.ddg.edges:
        if e.kind is DepKind.MEMORY:
            assert ls.ddg.nodes[e.src].op in aa.deps[ls.ddg.nodes[e.dst].op]
    # load -> mulf -> store -> (next) load: the recurrence bounds ii
    lat = [n.cost(HOPPER).latency for n in ls.ddg.nodes]
    assert ls.min_ii.rec == lat[0] + lat[2] + lat[3]
    assert_valid(ls)


def test_value_passed_through_two_arguments_has_distance_two(exported):
    (ls,) = loops_of(exported, "swap_loop")
    assert edge_set(ls) == {(0, 1, 0, DepKind.DATA), (1, 1, 2, DepKind.CARRIED)}
    assert ls.min_ii.rec == -(-ls.ddg.nodes[1].cost(HOPPER).latency // 2)
    assert_valid(ls)


def test_nested_loops(exported):
    outer, inner = loops_of(exported, "nested_loops")
    assert (outer.index, outer.depth, inner.index, inner.depth) == (0, 0, 1, 1)
    classes = [n.op_class for n in outer.ddg.nodes]
    assert OpClass.CONTROL in classes and OpClass.TRANSCENDENTAL in classes
    loop = classes.index(OpClass.CONTROL)
    node = outer.ddg.nodes[loop]
    # the inner loop runs K = 8 times: load, add (reshape is free) eight times over
    assert node.inner == ((OpClass.GLOBAL_LOAD, 1, 8), (OpClass.FLOAT, 1, 8))
    one = HOPPER.cost(OpClass.GLOBAL_LOAD).latency + HOPPER.cost(OpClass.FLOAT).latency
    assert node.cost(HOPPER).latency == 8 * one
    exp = classes.index(OpClass.TRANSCENDENTAL)
    assert (loop, exp, 0, DepKind.DATA) in edge_set(outer)
    assert any(e.src == e.dst and e.kind is DepKind.CARRIED for e in inner.ddg.edges)
    for ls in (outer, inner):
        assert_valid(ls)


def test_scheduler_is_an_argument(exported):
    """The stage's algorithm is a parameter: the sequential one gives a valid, longer ii."""
    from tileiras.sched.loops import schedule_loops

    module = read_module(exported["gemm"].read_bytes())
    c = run_stages(module, CompileOptions("sm_90"), stop_after="tileas")
    fn = module.functions[0]
    model = model_for(90)
    seq = schedule_loops(fn, c.aa[fn.name], model, 128, scheduler=sequential_schedule)[0]
    rau = schedule_loops(fn, c.aa[fn.name], model, 128, scheduler=modulo_schedule)[0]
    assert check_schedule(seq.ddg, seq.schedule, model) == []
    assert seq.schedule.ii > rau.schedule.ii


def test_sched_stage_leaves_code_alone(exported):
    module = read_module(exported["gemm"].read_bytes())
    c = run_stages(module, CompileOptions("sm_90"), stop_after="llvm")
    assert c.schedules and str(c.llvm) == compile_module(read_module(exported["gemm"].read_bytes()),
                                                        CompileOptions("sm_90"), "llvm")


def test_cubin_compile_skips_the_unconsumed_sched_stage(exported, monkeypatch):
    """Code generation does not read schedules yet, so only ``--emit=sched`` pays for them."""
    from tileiras import pipeline

    calls = []
    passes_for = pipeline.passes_for

    def recorded(arch: int) -> tuple:
        return tuple(pipeline.Pass(p.name, (lambda c, p=p: (calls.append(p.name), p.run(c))), p.stop, p.feeds_later)
                     for p in passes_for(arch))
    monkeypatch.setattr(pipeline, "passes_for", recorded)
    module = read_module(exported["gemm"].read_bytes())
    compile_module(module, CompileOptions("sm_90"), "llvm")
    assert calls[-8:] == ["tma", "software-pipeline", "forward-loads", "stream-loops", "warp-owned-loads", "order-ops",
                          "allocate-shared-memory", "codegen"]
    assert "sched" not in calls
    calls.clear()
    assert "ii" in compile_module(module, CompileOptions("sm_90"), "sched")
    assert calls[-2:] == ["allocate-shared-memory", "sched"]


def test_emit_sched_cli(exported, capsys):
    rc = driver.main([str(exported["gemm"]), "--gpu-name=sm_90", "--emit=sched"])
    out, err = capsys.readouterr()
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("sched.func @gemm")
    assert lines[1].startswith("  loop 0 (depth 0, 3 ops, model hopper): MinII=")
    assert "RecMII=" in lines[1] and "ResMII=" in lines[1]
    assert "      n0 load_view_tko#0  class=global_load" in out
    assert "      n2 -> n2  carried latency=" in out and "distance=1" in out
    assert "    schedule: ii=" in out
    assert any(line.strip().startswith("cycle=") and "stage=" in line and "cluster=" in line and "mmaf#2" in line
               for line in lines)
    assert lines[-1] == "}"


def test_emit_sched_without_loops(tmp_path, capsys):
    path = tmp_path / "k.mlir"
    path.write_text("cuda_tile.module @m {\n  entry @k() {\n    return\n  }\n}\n")
    rc = driver.main([str(path), "--gpu-name=sm_80", "--emit=sched"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out == "sched.func @k {\n  // no for loops\n}\n"


def test_emit_sched_in_help(capsys):
    assert driver.main(["--help"]) == 0
    assert "=sched" in capsys.readouterr().out


CORPUS = Path("/work/shared/corpus")


def test_every_corpus_loop_gets_a_valid_schedule():
    """The exported-kernel corpus (when present): every for loop schedules validly; all
    of them reach MinII."""
    files = sorted(CORPUS.glob("*.tileir")) if CORPUS.is_dir() else []
    if not files:
        pytest.skip("no corpus at /work/shared/corpus")
    loops = 0
    for path in files:
        arch = path.name.split(".")[-4]
        module = read_module(path.read_bytes())
        c = run_stages(module, CompileOptions(arch), stop_after="sched")
        for schedules in c.schedules.values():
            for ls in schedules:
                assert_valid(ls)
                assert ls.schedule.ii == ls.min_ii.value, (path.name, ls.index)
                loops += 1
    assert loops >= 100
