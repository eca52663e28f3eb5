"""Global accesses as wide as the bytecode's facts allow (``lower/vectorize.py``): aligned
tensors (cuTile's ``assume div_by<16>`` on bases, strides and shapes, the common case) get
16-byte ``ld/st.global.v4``; without the facts, accesses stay one element wide.  The
interpreter and our emulated PTX agree on both."""
from __future__ import annotations

import re

import numpy as np
import pytest
from _build import bytecode

from tileiras import diffcheck
from tileiras.lower.tileaa import analyze
from tileiras.lower.vectorize import allowed_vector, register_run
from tileiras.layout.linear import default_blocked
from tileiras.pipeline import CompileOptions, compile_module, run_stages
from tileiras.reader import read_bytecode
from tileiras.tile import ops_memory as MEM


def copy_kernel(elem: str, tile: str = "4x128", base_div: int = 16, stride_div: int = 16, shape_div: int = 16,
                last_stride: str = "1", dim_map: str = "") -> str:
    """``y[tile] = x[tile]`` over 2-d tensors, with the given facts (0: no fact);
    ``dim_map="[1, 0]"``: Fortran-order partition views (tile dim 0 runs along the
    tensor's contiguous dim)."""
    ptr = f"tile<ptr<{elem}>>"

    def assume(name: str, value: str, div: int, t: str) -> str:
        return f"    %{name} = assume div_by<{div}>, {value} : {t}\n" if div else f"    %{name} = assume bounded<0, ?>, {value} : {t}\n"

    strides = f"[%sd, {last_stride}]" if last_stride == "1" else "[%sd, %sd]"
    stride_types = "tile<i32>, tile<i32>, tile<i32>" if last_stride == "1" else "tile<i32>, tile<i32>, tile<i32>, tile<i32>"
    view = f"tensor_view<?x?x{elem}, strides=[?,{'1' if last_stride == '1' else '?'}]>"
    pview = f"partition_view<tile=({tile}), {view}{', dim_map=' + dim_map if dim_map else ''}>"
    shape = "x".join(tile.split("x"))
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k(%x: {ptr}, %y: {ptr}, %m: tile<i32>, %n: tile<i32>, %s: tile<i32>) {{\n"
            "    %t0 = make_token : token\n"
            + assume("xb", "%x", base_div, ptr) + assume("yb", "%y", base_div, ptr)
            + assume("md", "%m", shape_div, "tile<i32>") + assume("nd", "%n", shape_div, "tile<i32>")
            + assume("sd", "%s", stride_div, "tile<i32>")
            + f"    %xv = make_tensor_view %xb, shape = [%md, %nd], strides = {strides} : {stride_types} -> {view}\n"
            f"    %yv = make_tensor_view %yb, shape = [%md, %nd], strides = {strides} : {stride_types} -> {view}\n"
            "    %bx, %by, %bz = get_tile_block_id : tile<i32>\n"
            "    %c0 = constant <i32: 0> : tile<i32>\n"
            f"    %xp = make_partition_view %xv : {pview}\n"
            f"    %yp = make_partition_view %yv : {pview}\n"
            f"    %t, %tok = load_view_tko weak %xp[%bx, %c0] token = %t0 : {pview}, tile<i32> -> tile<{shape}x{elem}>, token\n"
            f"    %w = store_view_tko weak %t, %yp[%bx, %c0] token = %t0 : tile<{shape}x{elem}>, {pview}, tile<i32> -> token\n"
            "    return\n  }\n}\n")


def access_widths(text: str) -> list[int]:
    module = read_bytecode(bytecode(text))
    fn = module.functions[0]
    aa = analyze(fn)
    return [allowed_vector(aa, op) for op in fn.walk() if isinstance(op, (MEM.LoadViewTkoOp, MEM.StoreViewTkoOp))]


@pytest.mark.parametrize("elem, width", [("f32", 4), ("f16", 8), ("bf16", 8), ("f64", 2), ("i8", 16), ("i64", 2)])
def test_aligned_views_allow_16_bytes(elem, width):
    assert access_widths(copy_kernel(elem)) == [width, width]


@pytest.mark.parametrize("facts, width", [
    (dict(base_div=0), 1),                      # no base alignment
    (dict(base_div=8), 2),                      # 8-byte base: two f32
    (dict(stride_div=2), 2),                    # rows 8 bytes apart
    (dict(shape_div=0), 1),                     # a row may end inside a run: masks per element
    (dict(shape_div=2), 2),
    (dict(tile="4x2"), 2),                      # the tile is narrower than 16 bytes
    (dict(last_stride="dyn"), 1),               # the last dim is not known contiguous
])
def test_what_each_fact_limits(facts, width):
    assert access_widths(copy_kernel("f32", **facts)) == [width, width]


@pytest.mark.parametrize("facts, width", [
    (dict(), 4),
    (dict(tile="2x64"), 2),                     # the contiguous tile dim holds 2 elements
    (dict(base_div=8), 2),
    (dict(shape_div=0), 1),
])
def test_fortran_order_views_vectorize_along_their_contiguous_dim(facts, width):
    assert access_widths(copy_kernel("f32", **{"tile": "16x64", "dim_map": "[1, 0]", **facts})) == [width, width]


def test_register_run_of_layouts():
    assert register_run(default_blocked((4, 128), 4, 4)) == 4
    assert register_run(default_blocked((4, 128), 4, 1)) == 1
    assert register_run(default_blocked((1024,), 4, 8)) == 8


def ptx_of(text: str, arch: str = "sm_90") -> str:
    return compile_module(read_bytecode(bytecode(text)), CompileOptions(gpu_name=arch), "ptx")


def global_accesses(ptx: str) -> list[str]:
    return re.findall(r"\b(ld|st)\.global(\.v\d)?\.(b\d+)", ptx)


@pytest.mark.parametrize("elem", ["f32", "f16", "i8"])
def test_aligned_copies_are_16_byte_accesses(elem):
    tile = "16x128" if elem == "i8" else "8x128"   # 16 bytes a thread
    ptx = ptx_of(copy_kernel(elem, tile=tile))
    accesses = global_accesses(ptx)
    assert accesses and all(v == ".v4" and b == "b32" for _, v, b in accesses), accesses
    scalar = global_accesses(ptx_of(copy_kernel(elem, tile=tile, base_div=0)))
    assert scalar and all(v == "" for _, v, _ in scalar)


@pytest.mark.parametrize("elem", ["f32", "f16", "bf16", "i8", "f64"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_vector_accesses_agree_with_the_interpreter(elem, arch):
    """Out-of-range tiles included: 3x2 tiles over a 48x144 tensor (the last tile column
    hangs over the edge by whole vectors, the grid's extra row is out of range)."""
    data = bytecode(copy_kernel(elem, tile="16x64").replace("%xp[%bx, %c0]", "%xp[%bx, %by]")
                    .replace("%yp[%bx, %c0]", "%yp[%bx, %by]"))
    module = read_bytecode(data)
    fn = module.functions[0]
    rng = np.random.default_rng(3)
    args = diffcheck.synthesize_args(fn, rng, extent=40)   # rounded up to 48 by the facts
    assert args[0].shape == (48, 48)
    x = diffcheck.random_array(rng, args[0].dtype.type, (48, 144))
    args = [x, np.zeros_like(x), 48, 144, 144]
    grid = (4, 3, 1)
    expected = diffcheck.run_interpreter(data, "k", grid, list(args))
    ptx = compile_module(module, CompileOptions(gpu_name=arch), "ptx")
    assert re.search(r"ld\.global\.v[24]\.", ptx) and re.search(r"st\.global\.v[24]\.", ptx)
    got = diffcheck.run_ptx(ptx, "k", grid, list(args))
    assert diffcheck.compare(expected, got) is None
    np.testing.assert_array_equal(got.arrays[1].view(np.uint8), x.view(np.uint8))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_fortran_order_copies_agree_with_the_interpreter(arch):
    """A Fortran-order view (``dim_map=[1, 0]``): each thread holds 4 consecutive elements
    of tile dim 0, the tensor's contiguous dim, and moves them with one ``.v4`` access;
    4x3 tiles of 16x64 over a 144x48 tensor, the last tile column hanging over the edge
    by whole vectors."""
    data = bytecode(copy_kernel("f32", tile="16x64", dim_map="[1, 0]")
                    .replace("%xp[%bx, %c0]", "%xp[%bx, %by]").replace("%yp[%bx, %c0]", "%yp[%bx, %by]"))
    module = read_bytecode(data)
    x = diffcheck.random_array(np.random.default_rng(5), np.float32, (144, 48))
    args = [x, np.zeros_like(x), 144, 48, 48]
    grid = (4, 3, 1)
    expected = diffcheck.run_interpreter(data, "k", grid, list(args))
    ptx = compile_module(module, CompileOptions(gpu_name=arch), "ptx")
    accesses = global_accesses(ptx)
    assert accesses and all(v == ".v4" for _, v, _ in accesses), accesses
    got = diffcheck.run_ptx(ptx, "k", grid, list(args))
    assert diffcheck.compare(expected, got) is None
    np.testing.assert_array_equal(got.arrays[1], x)


F32_VIEW = "tensor_view<?x?xf32, strides=[?,1]>"
I32 = "tile<i32>"


def aligned_kernel(arrays: dict[str, bool], body: str) -> str:
    """A module with one entry ``@k(arrays..., %m, %n)`` over aligned f32 matrices (name ->
    transposed: N x M instead of M x N), their views ``%<name>v`` and the block ids
    ``%bx, %by``; ``body`` follows."""
    params = [f"%{a}: tile<ptr<f32>>" for a in arrays] + [f"%m: {I32}", f"%n: {I32}"]
    lines = ["    %t0 = make_token : token"]
    lines += [f"    %{a}b = assume div_by<16>, %{a} : tile<ptr<f32>>" for a in arrays]
    lines += [f"    %md = assume div_by<16>, %m : {I32}", f"    %nd = assume div_by<16>, %n : {I32}"]
    for a, transposed in arrays.items():
        rows, cols = ("%nd", "%md") if transposed else ("%md", "%nd")
        lines.append(f"    %{a}v = make_tensor_view %{a}b, shape = [{rows}, {cols}], strides = [{cols}, 1] "
                     f": {I32}, {I32} -> {F32_VIEW}")
    lines.append(f"    %bx, %by, %bz = get_tile_block_id : {I32}")
    return ("cuda_tile.module @kernels {\n  entry @k(" + ", ".join(params) + ") {\n" + "\n".join(lines) + "\n"
            + body + "    return\n  }\n}\n")


def transpose_kernel() -> str:
    """``y[j, i] = x[i, j]`` by 16x64 tiles of aligned f32 tensors (x: M x N, y: N x M)."""
    xp, yp = f"partition_view<tile=(16x64), {F32_VIEW}>", f"partition_view<tile=(64x16), {F32_VIEW}>"
    return aligned_kernel({"x": False, "y": True}, (
        f"    %xp = make_partition_view %xv : {xp}\n"
        f"    %yp = make_partition_view %yv : {yp}\n"
        f"    %a, %tok = load_view_tko weak %xp[%bx, %by] token = %t0 : {xp}, {I32} -> tile<16x64xf32>, token\n"
        "    %p = permute %a [1, 0] : tile<16x64xf32> -> tile<64x16xf32>\n"
        f"    %w = store_view_tko weak %p, %yp[%by, %bx] token = %t0 : tile<64x16xf32>, {yp}, {I32} -> token\n"))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_transposed_tiles_are_stored_16_bytes_a_thread(arch):
    """A permuted tile holds its runs along the stored view's strided dim: it changes layout
    through shared memory (``store_relayout``), as NVIDIA's transpose does, and both the
    load and the store move 16 bytes a thread; the result is the transpose (3x2 tiles over
    a 48x128 tensor, the grid's extra tiles out of range)."""
    data = bytecode(transpose_kernel())
    module = read_bytecode(data)
    ptx = compile_module(module, CompileOptions(gpu_name=arch), "ptx")
    accesses = global_accesses(ptx)
    assert accesses and all(v == ".v4" for _, v, _ in accesses), accesses
    x = diffcheck.random_array(np.random.default_rng(9), np.float32, (48, 128))
    args = [x, np.zeros((128, 48), np.float32), 48, 128]
    grid = (4, 3, 1)
    expected = diffcheck.run_interpreter(data, "k", grid, list(args))
    got = diffcheck.run_ptx(ptx, "k", grid, list(args))
    assert diffcheck.compare(expected, got) is None
    np.testing.assert_array_equal(got.arrays[1], x.T)


def add_transposed_kernel() -> str:
    """``y = a + b^T`` by 16x64 tiles of a and y, 64x16 tiles of b (all aligned f32): b's
    tile, loaded 16 bytes a thread along its rows, is wanted in a's layout after the
    permute, which TileAS gets by loading it again in that layout (``recompute_plan``)."""
    ap, bp = f"partition_view<tile=(16x64), {F32_VIEW}>", f"partition_view<tile=(64x16), {F32_VIEW}>"
    return aligned_kernel({"a": False, "b": True, "y": False}, (
        f"    %ap = make_partition_view %av : {ap}\n"
        f"    %bp = make_partition_view %bv : {bp}\n"
        f"    %yp = make_partition_view %yv : {ap}\n"
        f"    %ta, %k1 = load_view_tko weak %ap[%bx, %by] token = %t0 : {ap}, {I32} -> tile<16x64xf32>, token\n"
        f"    %tb, %k2 = load_view_tko weak %bp[%by, %bx] token = %t0 : {bp}, {I32} -> tile<64x16xf32>, token\n"
        "    %p = permute %tb [1, 0] : tile<64x16xf32> -> tile<16x64xf32>\n"
        "    %s = addf %ta, %p : tile<16x64xf32>\n"
        f"    %w = store_view_tko weak %s, %yp[%bx, %by] token = %t0 : tile<16x64xf32>, {ap}, {I32} -> token\n"))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_load_computed_again_in_another_layout_keeps_its_width_there(arch):
    """b's tile is loaded again in a's layout, which holds no run along b's rows: that
    second load goes element by element (``_planned_vector``), not 16 bytes a thread at
    the wrong addresses; y = a + b^T exactly (3x2 tiles over 48x128, edges included)."""
    data = bytecode(add_transposed_kernel())
    module = read_bytecode(data)
    ptx = compile_module(module, CompileOptions(gpu_name=arch), "ptx")
    rng = np.random.default_rng(4)
    a = diffcheck.random_array(rng, np.float32, (48, 128))
    b = diffcheck.random_array(rng, np.float32, (128, 48))
    args = [a, b, np.zeros_like(a), 48, 128]
    grid = (4, 3, 1)
    expected = diffcheck.run_interpreter(data, "k", grid, list(args))
    got = diffcheck.run_ptx(ptx, "k", grid, list(args))
    assert diffcheck.compare(expected, got) is None
    np.testing.assert_array_equal(got.arrays[2], a + b.T)


def squeeze_kernel() -> str:
    """``y[1x256 tile] = 2 * x[1x256 tile]`` through a 256-element tile (reshape, then a
    constant first operand, whose layout the product takes)."""
    pv = f"partition_view<tile=(1x256), {F32_VIEW}>"
    return aligned_kernel({"x": False, "y": False}, (
        f"    %xp = make_partition_view %xv : {pv}\n"
        f"    %yp = make_partition_view %yv : {pv}\n"
        f"    %a, %tok = load_view_tko weak %xp[%bx, %by] token = %t0 : {pv}, {I32} -> tile<1x256xf32>, token\n"
        "    %r = reshape %a : tile<1x256xf32> -> tile<256xf32>\n"
        "    %c = constant <f32: 2.000000e+00> : tile<256xf32>\n"
        "    %p = mulf %c, %r : tile<256xf32>\n"
        "    %q = reshape %p : tile<256xf32> -> tile<1x256xf32>\n"
        f"    %w = store_view_tko weak %q, %yp[%bx, %by] token = %t0 : tile<1x256xf32>, {pv}, {I32} -> token\n"))


def test_a_row_reshaped_without_its_unit_dim_keeps_its_layout():
    """The 256-element tile takes the 1x256 row's run (``shape_vectors``): no conversion,
    no second load in another layout, 8-byte accesses on both sides, y = 2x."""
    data = bytecode(squeeze_kernel())
    module = read_bytecode(data)
    tas = run_stages(module, CompileOptions(gpu_name="sm_80"), "tileas", only_needed=True).tas
    assert not tas[module.functions[0].name].converts
    ptx = compile_module(module, CompileOptions(gpu_name="sm_80"), "ptx")
    assert [a for a, v, _ in global_accesses(ptx) if v == ".v2"] == ["ld", "st"]
    x = diffcheck.random_array(np.random.default_rng(2), np.float32, (16, 512))
    got = diffcheck.run_ptx(ptx, "k", (16, 2, 1), [x, np.zeros_like(x), 16, 512])
    np.testing.assert_array_equal(got.arrays[1], 2 * x)


@pytest.mark.parametrize("arch, relayout", [("sm_80", True), ("sm_90", False)])
def test_accumulator_epilogues_store_16_bytes_a_thread_before_tma(tileir_store, arch, relayout):
    """An aligned GEMM's f16 result in the mma.sync fragment layout holds pairs: on sm_8x it
    changes layout through shared memory before the store (``store_relayout``), so every
    thread stores 16 bytes at a time as NVIDIA's epilogue does (gemm_basic f16 128x128x32:
    16 st.global.v4 a thread, against 64 4-byte stores); on sm_90 the TMA store takes the
    fragments by stmatrix and nothing changes."""
    from conftest import VERSIONS

    module = read_bytecode(tileir_store.get(f"gemm.aligned.{arch}.{VERSIONS[-1]}").read_bytes())
    c = run_stages(module, CompileOptions(gpu_name=arch), "tileas", only_needed=True)
    # two entries: f16 64x64 and f32 32x32 results
    for tas, esize in zip(c.tas.values(), (2, 4)):
        (store,) = [op for op in tas.aa.function.walk() if isinstance(op, MEM.StoreViewTkoOp)]
        assert ((store, 0) in tas.converts) is relayout
        if relayout:
            assert register_run(tas.converts[(store, 0)]) * esize == 16
    if relayout:
        ptx = compile_module(module, CompileOptions(gpu_name=arch), "ptx")
        stores = re.findall(r"st\.global(\.v\d)?\.b(\d+)", ptx)
        assert stores and set(stores) == {(".v4", "32")}, stores


def gather_view_kernel(col_factor: int = 64) -> str:
    """Rows ``idx[16 * bx ...]`` of ``x`` gathered through a gather view (sparse dim 0),
    columns from ``by * col_factor`` (an element offset), stored to block (bx, by) of y."""
    view = "tensor_view<?x?xf32, strides=[?,1]>"
    gview = f"gather_scatter_view<tile=(16x64), padding_value = zero, {view}, sparse_dim=0>"
    pview = f"partition_view<tile=(16x64), {view}>"
    iview = "partition_view<tile=(16), tensor_view<?xi32, strides=[1]>>"
    return ("cuda_tile.module @kernels {\n"
            "  entry @k(%x: tile<ptr<f32>>, %ix: tile<ptr<i32>>, %y: tile<ptr<f32>>, %m: tile<i32>, %n: tile<i32>, %s: tile<i32>) {\n"
            "    %t0 = make_token : token\n"
            "    %xb = assume div_by<16>, %x : tile<ptr<f32>>\n"
            "    %yb = assume div_by<16>, %y : tile<ptr<f32>>\n"
            "    %nd = assume div_by<16>, %n : tile<i32>\n"
            "    %sd = assume div_by<16>, %s : tile<i32>\n"
            f"    %xv = make_tensor_view %xb, shape = [%m, %nd], strides = [%sd, 1] : tile<i32>, tile<i32>, tile<i32> -> {view}\n"
            f"    %yv = make_tensor_view %yb, shape = [%m, %nd], strides = [%sd, 1] : tile<i32>, tile<i32>, tile<i32> -> {view}\n"
            "    %iv = make_tensor_view %ix, shape = [%m], strides = [1] : tile<i32> -> tensor_view<?xi32, strides=[1]>\n"
            "    %bx, %by, %bz = get_tile_block_id : tile<i32>\n"
            f"    %ipv = make_partition_view %iv : {iview}\n"
            f"    %rows, %t1 = load_view_tko weak %ipv[%bx] token = %t0 : {iview}, tile<i32> -> tile<16xi32>, token\n"
            f"    %cf = constant <i32: {col_factor}> : tile<i32>\n"
            "    %col = muli %by, %cf : tile<i32>\n"
            f"    %gv = make_gather_scatter_view %xv : {gview}\n"
            f"    %t, %t2 = load_view_tko weak %gv[%rows, %col] token = %t0 : {gview}, tile<16xi32>, tile<i32> -> tile<16x64xf32>, token\n"
            f"    %ypv = make_partition_view %yv : {pview}\n"
            f"    %w = store_view_tko weak %t, %ypv[%bx, %by] token = %t0 : tile<16x64xf32>, {pview}, tile<i32> -> token\n"
            "    return\n  }\n}\n")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("col_factor, vector", [(64, ".v4"), (2, ".v2"), (1, "")])
def test_gathered_rows_move_their_aligned_runs_whole(arch, col_factor, vector):
    """A gather view's dense dim starts at an element offset: its facts (``by * 64``: 16-byte
    runs; ``by * 2``: 8) bound the width of the gathered rows' accesses.  Rows out of range
    (negative, past ``m``) read zeros; the last column tile hangs over the edge."""
    data = bytecode(gather_view_kernel(col_factor))
    module = read_bytecode(data)
    ptx = compile_module(module, CompileOptions(gpu_name=arch), "ptx")
    loads = [v or "" for op, v, _ in global_accesses(ptx) if op == "ld"]
    assert vector in loads and all(v in ("", vector) for v in loads), loads
    rng = np.random.default_rng(9)
    m, n = 40, 176
    x = diffcheck.random_array(rng, np.float32, (m, n))
    idx = rng.integers(-4, m + 4, size=m).astype(np.int32)
    args = [x, idx, np.zeros_like(x), m, n, n]
    grid = (3, 3, 1)
    expected = diffcheck.run_interpreter(data, "k", grid, list(args))
    got = diffcheck.run_ptx(ptx, "k", grid, list(args))
    assert diffcheck.compare(expected, got) is None
    if col_factor == 64:          # y is x's gathered rows, zeros for those out of range
        rows = np.where((idx >= 0) & (idx < m), idx, -1)
        np.testing.assert_array_equal(got.arrays[2], np.where(rows[:, None] >= 0, x[np.clip(rows, 0, m - 1)], 0))


def test_gathered_rows_of_unknown_alignment_take_128_bytes_a_warp():
    """Columns from ``by``, an element offset with no fact: a warp's gathered load covers
    128 bytes of one row (at most 5 sectors), not 32 bytes of four (2 sectors each when
    the offset is not on a sector): ``vectorize.Run.loose``."""
    from tileiras.emulate import launch
    data = bytecode(gather_view_kernel(1))
    ptx = compile_module(read_bytecode(data), CompileOptions(gpu_name="sm_90"), "ptx")
    rng = np.random.default_rng(9)
    m, n = 40, 176
    x = diffcheck.random_array(rng, np.float32, (m, n))
    idx = rng.integers(0, m, size=m).astype(np.int32)
    t = launch(ptx, "k", (2, 2, 1), [x, idx, np.zeros_like(x), m, n, n], traffic=True).check().traffic
    assert t.loads.requests == 144 and t.loads.sectors <= 608    # 752 with 32 bytes a row


@pytest.mark.parametrize("arch", ["sm_80", "sm_100"])
def test_unaligned_fortran_order_tiles_put_lanes_along_the_contiguous_dim(arch):
    """Without facts an access moves one element, and the lanes of a warp then cover the
    view's contiguous dim (tile dim 0 of a Fortran-order view) first: 8 lanes x 4 bytes, 32
    bytes a column, as NVIDIA's tool lays it out (load_order_f f32 unaligned: 4 sectors a
    request, where lanes along tile dim 1 touched 8).  The copy still agrees with the
    interpreter."""
    text = (copy_kernel("f32", tile="64x32", base_div=0, stride_div=0, shape_div=0, dim_map="[1, 0]")
            .replace("%xp[%bx, %c0]", "%xp[%bx, %by]").replace("%yp[%bx, %c0]", "%yp[%bx, %by]"))
    data = bytecode(text)
    (tas,) = run_stages(read_bytecode(data), CompileOptions(gpu_name=arch), "tileas").tas.values()
    (load,) = [op for op in tas.aa.function.walk() if isinstance(op, MEM.LoadViewTkoOp)]
    lanes = tas.layouts[load.results[0]].bases("lane")
    assert [b[0] for b in lanes[:3]] == [1, 2, 4] and all(b[1] == 0 for b in lanes[:3])
    x = diffcheck.random_array(np.random.default_rng(7), np.float32, (100, 70))
    args = [x, np.zeros_like(x), 100, 70, 70]
    grid = (2, 3, 1)
    expected = diffcheck.run_interpreter(data, "k", grid, list(args))
    got = diffcheck.run_ptx(compile_module(read_bytecode(data), CompileOptions(gpu_name=arch), "ptx"), "k", grid,
                            list(args))
    assert diffcheck.compare(expected, got) is None
