"""Column reductions of aligned tiles (a reduction along a dim other than the contiguous
one): each thread owns one 16-byte run of columns and a few rows (``vectorize.Run.across``),
folds its rows in registers, then lanes by shuffles, then the warps' partials with all the
CTA's threads in padded shared memory (``layout_rules.spreads_warp_fold``), as NVIDIA's PTX
does: 16-byte loads, no bank conflicts, and the interpreter's results."""
from __future__ import annotations

import re

import numpy as np
import pytest
from _build import bytecode

from tileiras import diffcheck
from tileiras.emulate import launch
from tileiras.layout.linear import LANE, REG, WARP, default_blocked
from tileiras.lower.layout_rules import spreads_warp_fold, warp_fold_padding
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.reader import read_bytecode

NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64}
ZERO = {"f32": "0.000000e+00", "f16": "0.000000e+00", "f64": "0.000000e+00"}


def column_sum_kernel(elem: str, rows: int = 32, cols: int = 32) -> str:
    """``y[0, j-tile] = sum over rows of x[0:rows, j-tile]`` on aligned row-major tensors."""
    view = f"tensor_view<?x?x{elem}, strides=[?,1]>"
    xp = f"partition_view<tile=({rows}x{cols}), {view}>"
    yp = f"partition_view<tile=(1x{cols}), {view}>"
    ptr, i32 = f"tile<ptr<{elem}>>", "tile<i32>"
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k(%x: {ptr}, %y: {ptr}, %m: {i32}, %n: {i32}) {{\n"
            "    %t0 = make_token : token\n"
            f"    %xb = assume div_by<16>, %x : {ptr}\n"
            f"    %yb = assume div_by<16>, %y : {ptr}\n"
            f"    %md = assume div_by<16>, %m : {i32}\n"
            f"    %nd = assume div_by<16>, %n : {i32}\n"
            f"    %one = constant <i32: 1> : {i32}\n"
            f"    %xv = make_tensor_view %xb, shape = [%md, %nd], strides = [%nd, 1] : {i32}, {i32} -> {view}\n"
            f"    %yv = make_tensor_view %yb, shape = [%one, %nd], strides = [%nd, 1] : {i32}, {i32} -> {view}\n"
            f"    %bx, %by, %bz = get_tile_block_id : {i32}\n"
            f"    %c0 = constant <i32: 0> : {i32}\n"
            f"    %xp = make_partition_view %xv : {xp}\n"
            f"    %yp = make_partition_view %yv : {yp}\n"
            f"    %t, %tok = load_view_tko weak %xp[%c0, %bx] token = %t0 : {xp}, {i32} -> tile<{rows}x{cols}x{elem}>, token\n"
            f"    %s = reduce %t dim=0 identities=[{ZERO[elem]} : {elem}] : tile<{rows}x{cols}x{elem}> -> tile<{cols}x{elem}>\n"
            f"    (%a: tile<{elem}>, %b: tile<{elem}>) {{\n"
            f"      %c = addf %a, %b : tile<{elem}>\n"
            f"      yield %c : tile<{elem}>\n"
            "    }\n"
            f"    %r = reshape %s : tile<{cols}x{elem}> -> tile<1x{cols}x{elem}>\n"
            f"    %w = store_view_tko weak %r, %yp[%c0, %bx] token = %t0 : tile<1x{cols}x{elem}>, {yp}, {i32} -> token\n"
            "    return\n  }\n}\n")


def test_the_warp_fold_spreads_where_results_are_copied_across_threads():
    """32 column sums copied over 4 row-lanes and 4 warps: one slot a thread and two
    butterflies beat 3 loads and combines for each of 4 registers; a row reduction's
    single total (no lane bits) and a result spread over every thread do not spread."""
    out = default_blocked((32, 32), 4, 4).drop_dim(0)
    assert spreads_warp_fold(out, 4, 32, 128)
    scalar = default_blocked((32,), 4).drop_dim(0)
    assert not spreads_warp_fold(scalar, 4, 1, 128)
    wide = default_blocked((8, 1024), 4, 1).drop_dim(0)     # 8 registers, 1024 x 4 slots
    assert wide.size(REG) == 8 and not spreads_warp_fold(wide, 4, 1024, 128)


@pytest.mark.parametrize("elem, interval, amount", [("f32", 32, 1), ("f16", 64, 2), ("f64", 16, 1)])
def test_warp_fold_padding_is_a_bank_word_every_128_bytes(elem, interval, amount):
    pad = warp_fold_padding(np.dtype(NP[elem]).itemsize)
    assert (pad.interval, pad.amount) == (interval, amount)
    assert pad.padded_size(128) == 128 + (128 // interval - 1) * amount


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("elem, rows, cols, vector", [
    ("f32", 32, 32, ".v4"), ("f16", 32, 32, ".v4"), ("f64", 32, 32, ".v2"),
    ("f32", 64, 64, ".v4"),     # two slots a thread to fold
    ("f32", 16, 16, ".v2"),     # fewer slots than threads; 2 elements a thread
])
def test_column_sums_load_wide_without_bank_conflicts(elem, rows, cols, vector, arch):
    """Every global load moves a thread's whole run (sm_90: TMA where it applies); the warp
    fold's shared-memory stores and loads meet no bank conflict; the sums are the
    interpreter's and numpy's (3 tiles along the row; small integers, so that every order
    of summation is exact, even in f16)."""
    data = bytecode(column_sum_kernel(elem, rows, cols))
    ptx, host = diffcheck.compile_with_host(read_bytecode(data), arch)
    loads = re.findall(r"\bld\.global(\.v\d)?\.(b\d+)", ptx)
    tma = re.search(r"cp\.async\.bulk\.tensor", ptx)
    assert loads or tma
    assert all(v == vector for v, _ in loads), loads
    rng = np.random.default_rng(11)
    x = rng.integers(-8, 9, (rows, 3 * cols)).astype(NP[elem])
    args = [x, np.zeros((1, 3 * cols), NP[elem]), rows, 3 * cols]
    grid = (3, 1, 1)
    expected = diffcheck.run_interpreter(data, "k", grid, list(args))
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    result = launch(ptx, "k", grid, copies, traffic=True, host_object=host).check()
    got = diffcheck.Outcome(diffcheck.arrays_of(copies), False, "")
    assert diffcheck.compare(expected, got) is None
    np.testing.assert_array_equal(copies[1][0], x.sum(axis=0))
    t = result.traffic
    if loads:   # a warp's request: 32 lanes' bytes, whole 32-byte sectors
        assert t.loads.sectors_per_request == int(loads[0][0][2:]) * int(loads[0][1][1:]) // 8
    assert t.shared_stores.requests > 0 and t.shared_loads.requests > 0
    assert t.shared_stores.conflicts == t.shared_loads.conflicts == 0


def test_column_reduction_layout_is_one_run_a_thread_rows_apart():
    """The loaded 32x32 f32 tile: 4 consecutive columns a thread, 8 lanes along the row,
    then 4 lanes, 4 warps and a register over the rows (NVIDIA's layout)."""
    module = read_bytecode(bytecode(column_sum_kernel("f32")))
    tas = run_stages(module, CompileOptions(gpu_name="sm_80"), "tileas", only_needed=True).tas["k"]
    layout = next(v for v in tas.layouts.values() if v.shape == (32, 32))
    assert layout.bases(REG) == ((0, 1), (0, 2), (16, 0))
    assert layout.bases(LANE) == ((0, 4), (0, 8), (0, 16), (1, 0), (2, 0))
    assert layout.bases(WARP) == ((4, 0), (8, 0))
