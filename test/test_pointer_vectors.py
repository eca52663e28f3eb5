"""Loads and stores through tiles of pointers at full width: runs of consecutive, aligned
addresses found by lower/axisinfo.py and taken by vectorize.pointer_vector (a Triton-style
``base + rows * ld + cols`` tile, a gather of rows whose columns are contiguous)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from _build import bytecode

from tileiras import diffcheck
from tileiras.lower import axisinfo
from tileiras.lower.tileaa import analyze
from tileiras.lower.vectorize import pointer_vector
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.reader import read_bytecode
from tileiras.tile import ops_memory as MEM

ROWS, COLS = 16, 64


def scale_kernel(base_div: int = 16, n_div: int = 16, ld_div: int = 16, col_step: int = 1,
                 mask_cols: bool = True) -> str:
    """``y[r, c] = 2 * x[r, c]`` for the 16x64 block ``bx`` of a matrix of ``m`` rows and
    ``n`` columns with row stride ``ld``, addressed Triton-style: ``x + (rows * ld + cols)``,
    masked by ``rows < m`` (and ``cols < n``); ``*_div``: the ``div_by`` facts (0: none);
    ``col_step``: columns ``col_step`` apart (2: no two addresses consecutive)."""
    P = "tile<ptr<f32>>"
    S = f"{ROWS}x{COLS}"

    def assume(name: str, value: str, div: int, t: str) -> str:
        fact = f"div_by<{div}>" if div else "bounded<0, ?>"
        return f"    %{name} = assume {fact}, {value} : {t}\n"

    def splat(name: str, scalar: str, elem: str) -> str:
        return (f"    %{name}_r = reshape {scalar} : tile<{elem}> -> tile<1x1x{elem}>\n"
                f"    %{name} = broadcast %{name}_r : tile<1x1x{elem}> -> tile<{S}x{elem}>\n")
    mask = "%inside" if not mask_cols else "%both"
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k(%x: {P}, %y: {P}, %m: tile<i32>, %n: tile<i32>, %ld: tile<i32>) {{\n"
            "    %t0 = make_token : token\n"
            + assume("xb", "%x", base_div, P) + assume("yb", "%y", base_div, P)
            + assume("nd", "%n", n_div, "tile<i32>") + assume("ldd", "%ld", ld_div, "tile<i32>")
            + "    %bx, %by, %bz = get_tile_block_id : tile<i32>\n"
            f"    %c{ROWS} = constant <i32: {ROWS}> : tile<i32>\n"
            f"    %r0 = muli %bx, %c{ROWS} : tile<i32>\n"
            f"    %ri = iota : tile<{ROWS}xi32>\n"
            f"    %r0r = reshape %r0 : tile<i32> -> tile<1xi32>\n"
            f"    %r0b = broadcast %r0r : tile<1xi32> -> tile<{ROWS}xi32>\n"
            f"    %rows1 = addi %ri, %r0b : tile<{ROWS}xi32>\n"
            f"    %rows2 = reshape %rows1 : tile<{ROWS}xi32> -> tile<{ROWS}x1xi32>\n"
            f"    %rows = broadcast %rows2 : tile<{ROWS}x1xi32> -> tile<{S}xi32>\n"
            f"    %ci = iota : tile<{COLS}xi32>\n"
            f"    %step = constant <i32: {col_step}> : tile<{COLS}xi32>\n"
            f"    %cs = muli %ci, %step : tile<{COLS}xi32>\n"
            f"    %c2 = reshape %cs : tile<{COLS}xi32> -> tile<1x{COLS}xi32>\n"
            f"    %cols = broadcast %c2 : tile<1x{COLS}xi32> -> tile<{S}xi32>\n"
            + splat("ldt", "%ldd", "i32") + splat("mt", "%m", "i32") + splat("nt", "%nd", "i32")
            + f"    %ro = muli %rows, %ldt : tile<{S}xi32>\n"
            f"    %off = addi %ro, %cols : tile<{S}xi32>\n"
            f"    %off64 = exti %off signed : tile<{S}xi32> -> tile<{S}xi64>\n"
            + splat("xt", "%xb", "ptr<f32>") + splat("yt", "%yb", "ptr<f32>")
            + f"    %xs = offset %xt, %off64 : tile<{S}xptr<f32>>, tile<{S}xi64> -> tile<{S}xptr<f32>>\n"
            f"    %ys = offset %yt, %off64 : tile<{S}xptr<f32>>, tile<{S}xi64> -> tile<{S}xptr<f32>>\n"
            f"    %inside = cmpi less_than %rows, %mt, signed : tile<{S}xi32> -> tile<{S}xi1>\n"
            f"    %left = cmpi less_than %cols, %nt, signed : tile<{S}xi32> -> tile<{S}xi1>\n"
            f"    %both = andi %inside, %left : tile<{S}xi1>\n"
            f"    %zero = constant <f32: 0.0> : tile<{S}xf32>\n"
            f"    %v, %t1 = load_ptr_tko weak %xs, {mask}, %zero token=%t0 : tile<{S}xptr<f32>>, tile<{S}xi1>, tile<{S}xf32> -> tile<{S}xf32>, token\n"
            f"    %two = constant <f32: 2.0> : tile<{S}xf32>\n"
            f"    %w = mulf %v, %two : tile<{S}xf32>\n"
            f"    %t2 = store_ptr_tko weak %ys, %w, {mask} token=%t0 : tile<{S}xptr<f32>>, tile<{S}xf32>, tile<{S}xi1> -> token\n"
            "    return\n  }\n}\n")


def widths(text: str) -> list[int]:
    """``pointer_vector`` of the kernel's pointer-tile load and store."""
    aa = analyze(read_bytecode(bytecode(text)).functions[0])
    info = axisinfo.analyze(aa)
    return [pointer_vector(info, op) for op in aa.live_ops() if isinstance(op, (MEM.LoadPtrTkoOp, MEM.StorePtrTkoOp))]


def test_axis_info_of_a_triton_style_tile():
    """rows * ld + cols: runs of 64 consecutive offsets along the columns, each starting at a
    multiple of 16 (ld divisible by 16, cols from 0); the pointers 16 bytes aligned there (the
    base's fact); the column mask equal over runs of 16 columns (n divisible by 16) and down
    each column, the row mask along each row."""
    aa = analyze(read_bytecode(bytecode(scale_kernel())).functions[0])
    info = axisinfo.analyze(aa)
    load = next(op for op in aa.live_ops() if isinstance(op, MEM.LoadPtrTkoOp))
    p = info[load.source]
    assert (p.contiguity, p.divisibility[1]) == ((1, COLS), 16)
    both = load.mask.owner
    assert info[both.lhs].constancy == (1, COLS) and info[both.rhs].constancy == (ROWS, 16)
    assert info[load.mask].constancy == (1, 16)


@pytest.mark.parametrize("facts, width", [
    ({}, 4),                                   # 16 bytes a thread
    ({"base_div": 8}, 2), ({"base_div": 0}, 1),
    ({"ld_div": 2}, 2),                        # a row starts only 8-byte aligned
    ({"n_div": 2}, 2),                         # the column mask changes every 2 columns
    ({"n_div": 0}, 1),
    ({"n_div": 0, "mask_cols": False}, 4),     # but the rows' mask is the same along a row
    ({"col_step": 2}, 1),                      # no two addresses consecutive
])
def test_what_each_fact_limits(facts, width):
    assert widths(scale_kernel(**facts)) == [width, width]


def accesses(ptx: str) -> list[tuple[str, str]]:
    return re.findall(r"\b(ld|st)\.global(\.v\d)?\.b32", ptx)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("facts, vector", [({}, ".v4"), ({"base_div": 8}, ".v2"), ({"col_step": 2}, "")])
def test_pointer_tiles_agree_with_the_interpreter(arch, facts, vector):
    """3 row blocks over 40 rows (the last half outside) of 48 of the 64 columns (the
    column mask cuts the tile after 3 of its 4 16-column runs), a row stride of 80."""
    text = scale_kernel(**facts)
    data = bytecode(text)
    module = read_bytecode(data)
    ptx = compile_module(module, CompileOptions(gpu_name=arch), "ptx")
    got_accesses = accesses(ptx)
    assert got_accesses and all(v == vector for _, v in got_accesses), got_accesses
    rng = np.random.default_rng(7)
    m, n, ld = 40, 48, 80
    span = 2 * (n - 1) + 1 if facts.get("col_step") == 2 else n
    x = diffcheck.random_array(rng, np.float32, (m * ld + span + 16,))
    offset = 2 if facts.get("base_div") == 8 else 0          # 8 bytes past a 16-byte boundary
    args = [x[offset:], np.zeros_like(x)[offset:], m, n, ld]
    grid = (3, 1, 1)
    expected = diffcheck.run_interpreter(data, "k", grid, list(args))
    got = diffcheck.run_ptx(ptx, "k", grid, list(args))
    assert diffcheck.compare(expected, got) is None
    y = got.arrays[1][:m * ld].reshape(m, ld)
    cols = np.arange(n) * (2 if facts.get("col_step") == 2 else 1)
    cols = cols[cols < n]
    np.testing.assert_array_equal(y[:, cols], 2 * x[offset:offset + m * ld].reshape(m, ld)[:, cols])
