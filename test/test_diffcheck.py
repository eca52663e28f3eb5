"""tileiras-diffcheck: inputs synthesized from the IR alone, interpreter vs compiled PTX."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tileiras import diffcheck
from tileiras.ir import types as T
from tileiras.reader import read_bytecode

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vadd.tileir"


def test_synthesized_arguments_follow_the_views():
    fn = read_bytecode(EXAMPLE.read_bytes()).functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(0), extent=37)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    assert len(arrays) == 3 and all(a.shape == (37,) and a.dtype == np.float32 for a in arrays)
    assert args[1] == 37  # the dynamic shape of the first array (its stride is static)


def test_example_agrees(capsys):
    assert diffcheck.main([str(EXAMPLE), "--extent", "300", "--grid", "3"]) == 0
    assert "agree" in capsys.readouterr().out


def test_disagreement_is_reported(monkeypatch, capsys):
    """A compiler bug (here: a wrong PTX add) must show up as a difference."""
    real = diffcheck.compile_with_host

    def wrong(m, g):
        ptx, host = real(m, g)
        return ptx.replace("add.rn.f32", "sub.rn.f32"), host
    monkeypatch.setattr(diffcheck, "compile_with_host", wrong)
    assert diffcheck.main([str(EXAMPLE)]) == 1
    assert "differs" in capsys.readouterr().out


def test_a_third_opinion_runs_on_the_same_inputs(tmp_path, capsys):
    """``--nvidia``: another compiler's PTX (a ``.ptx`` file or a cubin that embeds it) runs on
    the same inputs and is checked against the interpreter too."""
    from tileiras.pipeline import CompileOptions, compile_module

    ptx = compile_module(read_bytecode(EXAMPLE.read_bytes()), CompileOptions(gpu_name="sm_90"), "ptx")
    (tmp_path / "good.ptx").write_text(ptx)
    (tmp_path / "bad.ptx").write_text(ptx.replace("add.rn.f32", "sub.rn.f32"))
    assert diffcheck.main([str(EXAMPLE), "--nvidia", str(tmp_path / "good.ptx")]) == 0
    assert diffcheck.main([str(EXAMPLE), "--nvidia", str(tmp_path / "bad.ptx")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(": agree") and "NVIDIA's PTX vs interpreter: array 2 differs" in out[1]


def test_a_cubin_without_ptx_is_one_error_line(tmp_path, capsys):
    from tileiras.pipeline import CompileOptions, compile_module

    cubin = compile_module(read_bytecode(EXAMPLE.read_bytes()), CompileOptions(gpu_name="sm_90"), "cubin")
    (tmp_path / "k.cubin").write_bytes(cubin)
    assert diffcheck.main([str(EXAMPLE), "--nvidia", str(tmp_path / "k.cubin")]) == 1
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path / 'k.cubin'} holds no PTX: NVIDIA's tileiras embeds it with --lineinfo\n"


def test_interleaved_ctas_agree(capsys):
    assert diffcheck.main([str(EXAMPLE), "--extent", "300", "--grid", "3", "--interleave", "7"]) == 0
    assert "agree" in capsys.readouterr().out
    assert diffcheck.main([str(EXAMPLE), "--extent", "300", "--grid", "3", "--interleave", "7", "--burst"]) == 0
    assert capsys.readouterr().out.count("agree") == 1


def test_burst_needs_interleave(capsys):
    assert diffcheck.main([str(EXAMPLE), "--burst"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "Error: --burst goes with --interleave SEED"


@pytest.mark.parametrize("name", ["row_reductions", "gather_2d", "while_break_continue", "cat_extract"])
def test_kernels_agree(tileir_store, name):
    found = tileir_store.get(f"{name}.sm_90.13.4")
    if found is None:
        pytest.skip(f"cuTile cannot export {name}")
    module = read_bytecode(found.path.read_bytes())
    reports = diffcheck.check_module(module, "sm_90")
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]


def test_large_tiles_run_in_chunked_loops(tmp_path):
    """A 256x256 element-wise tile (512 elements per thread) compiles to one loop over
    register chunks, not 512 unrolled copies, and still agrees with the interpreter."""
    ct = pytest.importorskip("cuda.tile")
    from tileiras.codegen.ptxas import run_ptxas, stats_from_cubin
    from tileiras.interp.testing import array, export
    from tileiras.pipeline import CompileOptions, compile_module

    @ct.kernel
    def big(x, y, out):
        i, j = ct.bid(0), ct.bid(1)
        a = ct.load(x, index=(i, j), shape=(256, 256))
        b = ct.load(y, index=(i, j), shape=(256, 256))
        ct.store(out, index=(i, j), tile=ct.exp(a) * b + a)

    module = read_bytecode(export(big, array(ct.float32, 2), array(ct.float32, 2), array(ct.float32, 2)))
    ptx = compile_module(module, CompileOptions("sm_90"), "ptx")
    assert ptx.count("ex2.approx") < 64  # one chunk's worth of code
    regs = stats_from_cubin(run_ptxas(ptx, "sm_90"))[module.functions[0].name].registers
    assert regs < 128
    reports = diffcheck.check_module(module, "sm_90", grid=(2, 1, 1), extent=300)
    assert all(r.problem is None for r in reports), [r.problem for r in reports]


def test_transposes_run_in_chunked_loops():
    """A permuted tile holds the loaded tile's registers under swapped coordinates, so
    load, permute and store run in one loop over register chunks: a 64x64 transpose keeps
    one chunk live (NVIDIA's tileiras streams it the same way), not 32 elements per thread."""
    ct = pytest.importorskip("cuda.tile")
    from tileiras.codegen.ptxas import run_ptxas, stats_from_cubin
    from tileiras.interp.testing import array, export
    from tileiras.pipeline import CompileOptions, compile_module

    @ct.kernel
    def transpose(x, out):
        i, j = ct.bid(0), ct.bid(1)
        t = ct.load(x, index=(i, j), shape=(64, 64))
        ct.store(out, index=(j, i), tile=ct.permute(t, (1, 0)))

    module = read_bytecode(export(transpose, array(ct.float32, 2), array(ct.float32, 2)))
    tileas = compile_module(module, CompileOptions("sm_90"), "tileas")
    # the store anchors a chunk whose loop layout has three iteration bits (8 trips); the
    # load and the permute run in it
    layout = re.search(r"chunk = #tileas\.chunk<.*chunk_layout = (#L\d+)", tileas).group(1)
    assert re.search(rf"  {layout} = #linear<.* iter=\[\([^)]*\),\([^)]*\),\([^)]*\)\]>", tileas)
    assert tileas.count("chunk = @") == 2
    ptx = compile_module(module, CompileOptions("sm_90"), "ptx")
    assert ptx.count("ld.global") == 4 and ptx.count("st.global") == 4
    regs = stats_from_cubin(run_ptxas(ptx, "sm_90"))[module.functions[0].name].registers
    assert regs <= 40  # 78 when all 32 elements per thread were loaded before the first store
    reports = diffcheck.check_module(module, "sm_90", grid=(2, 3, 1), extent=150)
    assert all(r.problem is None for r in reports), [r.problem for r in reports]


def test_cat_and_extract_of_its_parts_move_no_data():
    """cat of two same-shape tiles concatenates registers, and extracting either part at
    constant indices picks them back: no shared memory, no barrier, same results."""
    ct = pytest.importorskip("cuda.tile")
    from tileiras.pipeline import CompileOptions, compile_module

    @ct.kernel
    def parts(x, y, out):
        i = ct.bid(0)
        a = ct.load(x, index=(i, 0), shape=(16, 32))
        b = ct.load(y, index=(i, 0), shape=(16, 32))
        rows = ct.cat((a, b), axis=0)
        cols = ct.cat((a, b), axis=1)
        ct.store(out, index=(i, 0), tile=ct.extract(rows, index=(1, 0), shape=(16, 32))
                 - ct.extract(cols, index=(0, 0), shape=(16, 32)))

    module = _two_tile_kernel(parts)
    tileas = compile_module(module, CompileOptions("sm_90"), "tileas")
    assert "smem=0B" in tileas
    assert "bar.sync" not in compile_module(module, CompileOptions("sm_90"), "ptx")
    _agrees(module)


def test_extract_of_a_cat_part_reads_only_that_part():
    """Extracting the second part of a cat picks from that tile itself (tileas.pick_sources):
    the first tile, used by nothing else, is never loaded; before, the cat needed both."""
    ct = pytest.importorskip("cuda.tile")
    from tileiras.pipeline import CompileOptions, compile_module

    @ct.kernel
    def second(x, y, out):
        i = ct.bid(0)
        a = ct.load(x, index=(i, 0), shape=(16, 32))
        b = ct.load(y, index=(i, 0), shape=(16, 32))
        rows = ct.cat((a, b), axis=0)
        ct.store(out, index=(i, 0), tile=ct.extract(rows, index=(1, 0), shape=(16, 32)) * 2.0)

    module = _two_tile_kernel(second)
    ptx = compile_module(module, CompileOptions("sm_90"), "ptx")
    assert ptx.count("ld.global") == 4       # b's 4 registers a thread; 8 when a was loaded too
    _agrees(module)


def _two_tile_kernel(kernel):
    """The module of a cuTile kernel (x, y, out) of 2-D f32 arrays."""
    ct = pytest.importorskip("cuda.tile")
    from tileiras.interp.testing import array, export
    return read_bytecode(export(kernel, array(ct.float32, 2), array(ct.float32, 2), array(ct.float32, 2)))


def _agrees(module) -> None:
    reports = diffcheck.check_module(module, "sm_90", grid=(2, 1, 1), extent=40)
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]


def test_tiles_reduced_along_rows_keep_a_row_a_thread():
    """A 16x256 tile that only feeds row reductions holds one row per thread (32 registers
    of it, eight apart, eight lanes over a sector): the reductions fold in registers, then
    over three lane bits, the results take one register, the loads coalesce, and the kernel
    fits in fewer registers (64 with 8 rows x 4 columns a thread, NVIDIA's tileiras 48)."""
    ct = pytest.importorskip("cuda.tile")
    from tileiras.codegen.ptxas import run_ptxas, stats_from_cubin
    from tileiras.interp.testing import array, export
    from tileiras.pipeline import CompileOptions, compile_module

    @ct.kernel
    def rows(x, total, peak):
        i = ct.bid(0)
        t = ct.load(x, index=(i, 0), shape=(16, 256))
        ct.store(total, index=(i,), tile=ct.sum(t, axis=1))
        ct.store(peak, index=(i,), tile=ct.max(t, axis=1))

    module = read_bytecode(export(rows, array(ct.float32, 2), array(ct.float32), array(ct.float32)))
    tileas = compile_module(module, CompileOptions("sm_90"), "tileas")
    assert "reg=[(0,8),(0,16),(0,32),(0,64),(0,128)] lane=[(0,1),(0,2),(0,4),(1,0),(2,0)]" in tileas
    ptx = compile_module(module, CompileOptions("sm_90"), "ptx")
    assert ptx.count("shfl.sync") == 6   # three lane bits along the rows, per reduction
    regs = stats_from_cubin(run_ptxas(ptx, "sm_90"))[module.functions[0].name].registers
    assert regs <= 48
    reports = diffcheck.check_module(module, "sm_90", grid=(2, 1, 1), extent=40)
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]


IF_WITHOUT_ELSE = """cuda_tile.module @m {
  entry @k(%out: tile<ptr<i32>>, %n: tile<i32>) {
    %z = constant <i32: 0> : tile<i32>
    %c = cmpi greater_than %n, %z, signed : tile<i32> -> tile<i1>
    if %c {
      %t = store_ptr_tko weak %out, %n : tile<ptr<i32>>, tile<i32> -> token
    }
    return
  }
}
"""


def test_if_without_else_compiles_and_agrees():
    """An ``if`` whose else region is empty (no block): was an internal error in tileaa."""
    from tileiras.text.parser import parse_module

    module = parse_module(IF_WITHOUT_ELSE, "k.mlir")
    assert not module.functions[0].entry_block.ops[2].regions[1].blocks
    _agrees(module)



def test_chunked_loops_add_each_load_as_it_lands():
    """Inside a chunked loop the ops run in the order their results are needed (depth-first
    from the store, as outside such loops): a + b is added before c is loaded, not after
    all four loads; the kernel still agrees with the interpreter."""
    ct = pytest.importorskip("cuda.tile")
    from tileiras.lower.emission_order import demand_order
    from tileiras.interp.testing import array, export
    from tileiras.pipeline import CompileOptions, run_stages

    @ct.kernel
    def sum4(x, out):
        i, j = ct.bid(0), ct.bid(1)
        a = ct.load(x, index=(i, j), shape=(64, 32), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(x, index=(i, j), shape=(64, 32), padding_mode=ct.PaddingMode.NEG_ZERO)
        c = ct.load(x, index=(i, j), shape=(64, 32), padding_mode=ct.PaddingMode.POS_INF)
        d = ct.load(x, index=(i, j), shape=(64, 32))
        ct.store(out, index=(i, j), tile=((a + b) + ct.minimum(c, 1.0)) + d)

    module = read_bytecode(export(sum4, array(ct.float32, 2), array(ct.float32, 2)))
    tas = next(iter(run_stages(module, CompileOptions("sm_90"), "tileas").tas.values()))
    group = next(iter(tas.chunked.values()))
    names = [op.name.split(".")[-1] for op in demand_order(group.ops, lambda op: list(op.operands))]
    loads = [k for k, name in enumerate(names) if name.startswith("load")]
    adds = [k for k, name in enumerate(names) if name == "addf"]
    assert len(loads) == 4 and len(adds) == 3 and names[-1].startswith("store")
    assert loads[1] < adds[0] < loads[2] and adds[1] < loads[3] < adds[2]
    assert [name for name in (op.name.split(".")[-1] for op in group.ops) if name != "constant"][:4] == \
        ["load_view_tko"] * 4   # block order: all loads first
    reports = diffcheck.check_module(module, "sm_90", grid=(2, 3, 1), extent=150)
    assert all(r.problem is None for r in reports), [r.problem for r in reports]


def five_d_copy() -> bytes:
    """``y[tile] = x[tile]`` over 5-d tensors whose every dim is dynamic; dim 2 ``div_by<16>``."""
    from _build import bytecode

    view = "tensor_view<?x?x?x?x?xf32, strides=[?,?,?,?,1]>"
    pview = f"partition_view<tile=(2x2x16x2x4), {view}>"
    dims = ", ".join(f"%d{i}: tile<i32>" for i in range(5))
    strides = ", ".join(f"%s{i}: tile<i32>" for i in range(4))
    shape = "[%d0, %d1, %e2, %d3, %d4], strides = [%s0, %s1, %s2, %s3, 1]"
    types = ", ".join(["tile<i32>"] * 9)
    return bytecode(
        "cuda_tile.module @kernels {\n"
        f"  entry @k(%x: tile<ptr<f32>>, {dims}, {strides}, %y: tile<ptr<f32>>) {{\n"
        "    %t0 = make_token : token\n"
        "    %e2 = assume div_by<16>, %d2 : tile<i32>\n"
        f"    %xv = make_tensor_view %x, shape = {shape} : {types} -> {view}\n"
        f"    %yv = make_tensor_view %y, shape = {shape} : {types} -> {view}\n"
        "    %bx, %by, %bz = get_tile_block_id : tile<i32>\n"
        "    %c0 = constant <i32: 0> : tile<i32>\n"
        f"    %xp = make_partition_view %xv : {pview}\n"
        f"    %yp = make_partition_view %yv : {pview}\n"
        f"    %t, %tok = load_view_tko weak %xp[%bx, %c0, %c0, %c0, %c0] token = %t0 : {pview}, tile<i32> "
        "-> tile<2x2x16x2x4xf32>, token\n"
        f"    %w = store_view_tko weak %t, %yp[%bx, %c0, %c0, %c0, %c0] token = %t0 : tile<2x2x16x2x4xf32>, "
        f"{pview}, tile<i32> -> token\n"
        "    return\n  }\n}\n")


def test_extents_keep_each_array_within_the_budget():
    """Five dynamic dims at extent 100 would be 10^10 elements: the budget shrinks them,
    the divisor the bytecode assumes still holds, and the extents stay as even as it allows."""
    fn = read_bytecode(five_d_copy()).functions[0]
    for budget in (diffcheck.BUDGET, 5000):
        args = diffcheck.synthesize_args(fn, np.random.default_rng(0), extent=100, budget=budget)
        x, y = args[0], args[-1]
        assert x.shape == y.shape and x.size <= budget
        assert x.shape[2] % 16 == 0 and min(x.shape) >= 2
        assert max(x.shape) <= 2 * min(d for i, d in enumerate(x.shape) if i != 2) + 16
        assert tuple(args[1:6]) == x.shape
        assert tuple(args[6:10]) == tuple(s // 4 for s in x.strides[:4])
    dyn = T.DYNAMIC
    assert diffcheck.choose_extents((dyn, 7, dyn), (16, 1, 1), 100, 10**9) == (112, 7, 100)
    assert diffcheck.choose_extents((dyn, 7, dyn), (16, 1, 1), 100, 1000) == (16, 7, 6)
    assert diffcheck.choose_extents((dyn, 4096), (16, 1), 100, 1000) == (16, 4096)  # static dims stay


def test_budget_option_reaches_the_arguments(tmp_path, capsys):
    path = tmp_path / "k.tileir"
    path.write_bytes(five_d_copy())
    assert diffcheck.main([str(path), "--budget", "4096", "--grid", "2"]) == 0
    assert "agree" in capsys.readouterr().out
    assert diffcheck.main([str(path), "--budget", "0"]) == 2


def test_scalars_honour_the_facts_assumed_of_them():
    """A shape or stride passed as a raw scalar is ``div_by<16>`` in aligned kernels and
    NVIDIA's code relies on it (gemm_splitk's output, gather_scatter): the synthesized value
    is rounded up to the divisor and kept within ``bounded``; an integer assumed of nothing
    keeps the small default."""
    from _build import bytecode

    fn = read_bytecode(bytecode(
        "cuda_tile.module @kernels {\n"
        "  entry @k(%a: tile<i32>, %b: tile<i32>, %c: tile<i32>, %d: tile<i64>) {\n"
        "    %a1 = assume div_by<16>, %a : tile<i32>\n"
        "    %a2 = assume bounded<0, ?>, %a1 : tile<i32>\n"
        "    %a3 = assume div_by<16>, %a2 : tile<i32>\n"
        "    %b1 = assume bounded<0, 2>, %b : tile<i32>\n"
        "    %d1 = assume div_by<8>, %d : tile<i64>\n"
        "    %d2 = assume bounded<40, ?>, %d1 : tile<i64>\n"
        "    return\n  }\n}\n")).functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(0))
    assert [int(a) for a in args] == [16, 2, diffcheck.SMALL_INT, 40]
    assert args[3].dtype == np.int64


def test_ctas_that_repeat_work_rewriting_their_inputs_run_once():
    """atomics_rmw on a 2x2 grid differed between the interpreter (CTAs one after another)
    and both compilers' PTX (CTAs together): the kernel rewrites its index tile and the two
    CTAs of each column, which do the same tile, race on it.  No compiler is wrong; the
    check runs one CTA per distinct block id and agrees."""
    pytest.importorskip("cuda.tile")
    from differential import export
    from kernels.realworld import RECYCLE_SLOTS

    module = read_bytecode(export(RECYCLE_SLOTS, "sm_90"))
    fn = module.functions[0]
    assert diffcheck.distinct_grid(fn, (2, 2, 1)) == (2, 1, 1)
    from tileiras.interp import cutile_args

    idx = np.random.default_rng(0).permutation(128).astype(np.int32)   # every slot once
    args = cutile_args(idx, np.zeros(128, np.int32), np.zeros(128, np.int32))
    ptx = diffcheck.compile_ptx(module, "sm_90")
    duplicated = [diffcheck.run_interpreter(module, fn.name, (2, 2, 1), args),
                  diffcheck.run_ptx(ptx, fn.name, (2, 2, 1), args)]
    assert diffcheck.compare(*duplicated) is not None      # the race shows
    once = [diffcheck.run_interpreter(module, fn.name, (2, 1, 1), args),
            diffcheck.run_ptx(ptx, fn.name, (2, 1, 1), args)]
    assert diffcheck.compare(*once) is None
    rewritten, counts, slots = once[1].arrays
    assert (rewritten == 0).all() and (counts == 1).all()
    np.testing.assert_array_equal(slots, np.arange(1, 129))
    reports = diffcheck.check_module(module, "sm_90", grid=(2, 2, 1), extent=128)
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]


def column_major_copy() -> bytes:
    """``y[tile] = 2 * x[tile]``: x's first dim is contiguous (strides [1, ?]), y's last."""
    from _build import bytecode

    view, yview = "tensor_view<?x?xf32, strides=[1,?]>", "tensor_view<?x?xf32, strides=[?,1]>"
    pview, ypview = f"partition_view<tile=(16x16), {view}>", f"partition_view<tile=(16x16), {yview}>"
    return bytecode(
        "cuda_tile.module @kernels {\n"
        "  entry @k(%x: tile<ptr<f32>>, %m: tile<i32>, %n: tile<i32>, %s: tile<i32>, %y: tile<ptr<f32>>) {\n"
        "    %t0 = make_token : token\n"
        f"    %xv = make_tensor_view %x, shape = [%m, %n], strides = [1, %s] : tile<i32> -> {view}\n"
        f"    %yv = make_tensor_view %y, shape = [%m, %n], strides = [%s, 1] : tile<i32> -> {yview}\n"
        "    %bx, %by, %bz = get_tile_block_id : tile<i32>\n"
        f"    %xp = make_partition_view %xv : {pview}\n"
        f"    %yp = make_partition_view %yv : {ypview}\n"
        f"    %t, %tok = load_view_tko weak %xp[%bx, %by] token = %t0 : {pview}, tile<i32> -> tile<16x16xf32>, token\n"
        "    %two = constant <f32: 2.0> : tile<16x16xf32>\n"
        "    %d = mulf %t, %two rounding<nearest_even> : tile<16x16xf32>\n"
        f"    %w = store_view_tko weak %d, %yp[%bx, %by] token = %t0 : tile<16x16xf32>, {ypview}, tile<i32> -> token\n"
        "    return\n  }\n}\n")


def test_column_major_arrays_keep_their_layout_in_memory():
    """An F-ordered array is mapped as it lies (its strides describe that memory, as on the
    GPU): the interpreter and the emulator both compute y = 2x element for element into a
    C-ordered y (a C-order copy of x read with x's strides would give 2x transposed)."""
    from tileiras import interp
    from tileiras.emulate import launch

    module = read_bytecode(column_major_copy())
    fn = module.functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(0), extent=32)
    x, y = args[0], args[4]
    assert x.flags.f_contiguous and not x.flags.c_contiguous and args[1:4] == [32, 32, 32]
    x[:, :] = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    assert y.flags.c_contiguous
    y_interp, y_ptx = np.zeros_like(y), np.zeros_like(y)
    interp.run(module, fn.name, (2, 2), [x, 32, 32, 32, y_interp])
    assert launch(diffcheck.compile_ptx(module, "sm_80"), fn.name, (2, 2), [x, 32, 32, 32, y_ptx]).ok
    np.testing.assert_array_equal(y_interp, 2 * x)
    np.testing.assert_array_equal(y_ptx, 2 * x)
    assert diffcheck.compare(diffcheck.run_interpreter(module, fn.name, (2, 2, 1), args),
                             diffcheck.run_ptx(diffcheck.compile_ptx(module, "sm_80"), fn.name, (2, 2, 1), args)) is None


def row_sum(padding: str) -> bytes:
    """``y[bx] = sum of 16 tiles of 32 of x`` read in a loop (loop_accumulate's pattern)."""
    from _build import bytecode

    view = "tensor_view<?xf32, strides=[1]>"
    pview = f"partition_view<tile=(32){padding}, {view}>"
    return bytecode(
        "cuda_tile.module @kernels {\n"
        "  entry @k(%x: tile<ptr<f32>>, %n: tile<i32>, %y: tile<ptr<f32>>, %m: tile<i32>) {\n"
        "    %t0 = make_token : token\n"
        f"    %xv = make_tensor_view %x, shape = [%n], strides = [1] : tile<i32> -> {view}\n"
        f"    %yv = make_tensor_view %y, shape = [%m], strides = [1] : tile<i32> -> {view}\n"
        f"    %xp = make_partition_view %xv : {pview}\n"
        f"    %yp = make_partition_view %yv : partition_view<tile=(32), {view}>\n"
        "    %c0 = constant <i32: 0> : tile<i32>\n"
        "    %c1 = constant <i32: 1> : tile<i32>\n"
        "    %c16 = constant <i32: 16> : tile<i32>\n"
        "    %z = constant <f32: 0.0> : tile<32xf32>\n"
        "    %s = for %i in (%c0 to %c16, step %c1) : tile<i32> iter_values(%acc = %z) -> (tile<32xf32>) {\n"
        f"      %t, %tok = load_view_tko weak %xp[%i] token = %t0 : {pview}, tile<i32> -> tile<32xf32>, token\n"
        "      %a = addf %acc, %t rounding<nearest_even> : tile<32xf32>\n"
        "      continue %a : tile<32xf32>\n"
        "    }\n"
        "    %bx, %by, %bz = get_tile_block_id : tile<i32>\n"
        f"    %w = store_view_tko weak %s, %yp[%bx] token = %t0 : tile<32xf32>, partition_view<tile=(32), {view}>, "
        "tile<i32> -> token\n"
        "    return\n  }\n}\n")


def test_unpadded_loads_in_a_bounded_loop_get_arrays_they_stay_inside():
    """Out-of-bounds elements of a view without a padding value are unspecified (NVIDIA's
    loop_accumulate differed from the interpreter on them): x gets the 16 * 32 elements the
    loop reads; with zero padding the extent stays as asked; the output's store-only view
    and a block-id index (bounded by its type alone) add nothing."""
    for padding, want in (("", 512), (", padding_value = zero", 100)):
        fn = read_bytecode(row_sum(padding)).functions[0]
        args = diffcheck.synthesize_args(fn, np.random.default_rng(0), extent=100)
        assert args[0].shape == (want,) and args[1] == want and args[2].shape == (100,)
    assert diffcheck.choose_extents((T.DYNAMIC, T.DYNAMIC), (1, 16), 100, 1000, (0, 600)) == (1, 608)


def test_compare_allows_reordered_sums_near_zero_but_not_wrong_elements():
    """An element cancelled to near zero may differ by ulps of the array's scale (measured on an
    H100: wgmma's K order gave -0.022995 for the interpreter's -0.022979, the array's largest
    element 237); a wrong element of any size still fails, and so does one off by 1e-3 of the
    scale."""
    rng = np.random.default_rng(3)
    want = (rng.standard_normal((64, 64)) * 60).astype(np.float32)
    want[5, 7] = -0.022979498
    want[0, 0] = 237.0

    def outcome(a):
        return diffcheck.Outcome([a], False)

    got = want.copy()
    got[5, 7] = -0.022994995
    assert diffcheck.compare(outcome(want), outcome(got)) is None
    got[5, 7] = -0.022979498 + 0.25              # 1e-3 of the scale: a lost product, not rounding
    assert "1 of 4096" in diffcheck.compare(outcome(want), outcome(got))
    got = want.copy()
    got[9, 9] *= 1.001
    assert diffcheck.compare(outcome(want), outcome(got)) is not None


def test_index_arrays_pick_tiles_of_the_tensors_they_index():
    """A block table's page ids index the paged cache's first dim: they are drawn from the
    cache's pages (a quarter below 0: tiles outside), not from the table's own size, so that
    the kernel computes on real pages (``diffcheck.in_range_indices``)."""
    pytest.importorskip("cuda.tile")
    import warnings

    from differential import export
    from kernels.workloads import CASES

    case = next(c for c in CASES if c.name == "paged_decode")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = read_bytecode(export(case, arch="sm_80", aligned=True)).functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(2), extent=96)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    cache, table = arrays[1], arrays[3]
    assert cache.ndim == 3 and table.dtype == np.int32 and table.shape == (96, 96)
    pages = cache.shape[0]
    assert table.min() >= -(pages // 4) and table.max() < pages - pages // 4
    assert np.mean((table >= 0) & (table < pages)) > 0.7
    position = next(i for i, a in enumerate(args) if a is table)
    assert set(diffcheck.index_sources(fn, diffcheck._through_assumes(fn))) == {fn.entry_block.args[position]}
