"""Scans run in place, bit by bit of the position along the scanned dim (emit_reduce._scan_by_bits):
registers in a thread, lanes by shuffles, warps through shared memory; the interpreter agrees."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pytest

from tileiras import diffcheck
from tileiras.codegen import emit_reduce
from tileiras.layout.linear import LinearLayout
from tileiras.lower.layout_rules import scans_in_place
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.text.parser import parse_module

COMBINERS = {"addi": "i32", "maxi": "i32", "muli": "i32", "addf": "f32"}


def entry_text(pointers: Sequence[str], elem: str, lines: Sequence[str]) -> str:
    """A module of one entry @k(%<pointer>: ptr<elem> ..., %n: i32) whose body is ``lines``."""
    params = "".join(f"%{name}: tile<ptr<{elem}>>, " for name in pointers)
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k({params}%n: tile<i32>) {{\n"
            + "".join(f"    {line}\n" for line in lines) + "  }\n}\n")


def scan_kernel(rows: int, cols: int, dim: int, reverse: bool, combiner: str, scans: int = 1) -> str:
    """Loads a rows x cols tile of x, scans it ``scans`` times along ``dim`` (the second scan
    scans the first one's result) and stores the result to o."""
    elem = COMBINERS[combiner]
    view = f"tensor_view<?x{cols}x{elem}, strides=[{cols},1]>"
    part = f"partition_view<tile=({rows}x{cols}), {view}>"
    tile = f"tile<{rows}x{cols}x{elem}>"
    identity = {"addi": "0 : i32", "maxi": "-2147483648 : i32", "muli": "1 : i32", "addf": "0.000000e+00 : f32"}
    extra = " signed" if combiner == "maxi" else ""
    lines = ["%tok = make_token : token",
             "%c0 = constant <i32: 0> : tile<i32>",
             f"%xv = make_tensor_view %x, shape = [%n, {cols}], strides = [{cols}, 1] : tile<i32> -> {view}",
             f"%ov = make_tensor_view %o, shape = [%n, {cols}], strides = [{cols}, 1] : tile<i32> -> {view}",
             "%bx, %by, %bz = get_tile_block_id : tile<i32>",
             f"%xp = make_partition_view %xv : {part}",
             f"%op = make_partition_view %ov : {part}",
             f"%s0, %t = load_view_tko weak %xp[%bx, %c0] token = %tok : {part}, tile<i32> -> {tile}, token"]
    for k in range(scans):
        head = f"%s{k + 1} = scan %s{k} dim={dim} reverse={str(reverse).lower()}"
        lines += [f"{head} identities=[{identity[combiner]}] : {tile} -> {tile}",
                  f"(%a{k}: tile<{elem}>, %b{k}: tile<{elem}>) {{",
                  f"  %r{k} = {combiner} %a{k}, %b{k}{extra} : tile<{elem}>",
                  f"  yield %r{k} : tile<{elem}>",
                  "}"]
    lines += [f"%st = store_view_tko weak %s{scans}, %op[%bx, %c0] token = %tok : {tile}, {part}, tile<i32> -> token",
              "return"]
    return entry_text("xo", elem, lines)


def run(text: str, rows: int, cols: int, elem: str) -> None:
    module = parse_module(text, "k.mlir")
    rng = np.random.default_rng(11)
    n = 2 * rows - 3          # the second tile is partly outside x
    if elem == "i32":
        x = rng.integers(-3, 4, (n, cols)).astype(np.int32)
    else:
        x = rng.standard_normal((n, cols)).astype(np.float32)
    o = np.zeros((n, cols), dtype=x.dtype)
    args = [x, o, np.int32(n)]
    expected, got = diffcheck.run_both(module, "k", (2, 1, 1), args, "sm_90")
    assert diffcheck.compare(expected, got) is None


@pytest.mark.parametrize("rows, cols, dim, reverse, combiner", [
    (16, 16, 1, False, "addi"),     # a register and three lane bits along the row
    (16, 16, 0, True, "muli"),      # two lane bits and two warp bits, from the last row
    (8, 64, 0, True, "addf"),       # a lane bit and two warp bits
    (64, 64, 0, False, "maxi"),     # register bits above the lanes and warps
    (64, 64, 1, True, "addi"),      # register bits below and above the lanes
    (2, 256, 1, False, "addi"),     # lanes and warps along the row
])
def test_scans_agree_with_the_interpreter(rows, cols, dim, reverse, combiner):
    run(scan_kernel(rows, cols, dim, reverse, combiner), rows, cols, COMBINERS[combiner])


def test_scans_use_shuffles_not_a_loop():
    text = scan_kernel(16, 16, 1, False, "addi", scans=2)
    llvm = compile_module(parse_module(text, "k.mlir"), CompileOptions(gpu_name="sm_90"), "llvm")
    assert "scan.loop" not in llvm and "shfl.sync.up" in llvm
    assert "smem=0B" in compile_module(parse_module(text, "k.mlir"), CompileOptions(gpu_name="sm_90"), "tileas")
    run(text, 16, 16, "i32")


def test_layouts_that_mix_the_dim_scan_through_shared_memory():
    def layout(reg: list, lane: list) -> LinearLayout:
        return LinearLayout((("reg", tuple(reg)), ("lane", tuple(lane)), ("warp", ((4, 0), (8, 0)))), (16, 16))
    plain = layout([(0, 1)], [(0, 2), (0, 4), (0, 8), (1, 0), (2, 0)])
    mixed = layout([(1, 1)], [(0, 2), (0, 4), (0, 8), (0, 1), (2, 0)])
    assert scans_in_place(plain, 0) and scans_in_place(plain, 1)
    assert not scans_in_place(mixed, 0) and not scans_in_place(mixed, 1)


def i32_views(rows: int, cols: int, names: str) -> tuple[str, str, list[str]]:
    """The partition view and tile types of rows x cols i32 tiles, and the lines that open an
    entry: a token, %c0, the block ids, a view %<name>q of each pointer in ``names``."""
    view = f"tensor_view<?x{cols}xi32, strides=[{cols},1]>"
    part = f"partition_view<tile=({rows}x{cols}), {view}>"
    lines = ["%tok = make_token : token",
             "%c0 = constant <i32: 0> : tile<i32>",
             "%bx, %by, %bz = get_tile_block_id : tile<i32>"]
    for name in names:
        lines += [f"%{name}v = make_tensor_view %{name}, shape = [%n, {cols}], strides = [{cols}, 1] : "
                  f"tile<i32> -> {view}",
                  f"%{name}q = make_partition_view %{name}v : {part}"]
    return part, f"tile<{rows}x{cols}xi32>", lines


def i32_stores(part: str, tile: str, stored: Sequence[tuple[str, str]]) -> list[str]:
    """Each (view name, value) of ``stored`` stored at the block's tile, then the return."""
    return [f"%s{name} = store_view_tko weak {v}, %{name}q[%bx, %c0] token = %tok : {tile}, {part}, "
            "tile<i32> -> token" for name, v in stored] + ["return"]


def affine_scan_kernel(rows: int, cols: int, dim: int, reverse: bool) -> str:
    """Scans pairs (a, b), the maps x -> a*x + b, by composition: (a1, b1) then (a2, b2) is
    (a1*a2, b1*a2 + b2).  Associative but not commutative, so a scan that combines two
    blocks in the wrong order, or the wrong way round, gives other values."""
    part, tile, lines = i32_views(rows, cols, "xyop")
    for name in ("x", "y"):
        lines.append(f"%{name}t, %{name}k = load_view_tko weak %{name}q[%bx, %c0] token = %tok : {part}, "
                     f"tile<i32> -> {tile}, token")
    lines += [f"%a, %b = scan %xt, %yt dim={dim} reverse={str(reverse).lower()} identities=[1 : i32, 0 : i32] "
              f": {tile}, {tile} -> {tile}, {tile}",
              "(%a1: tile<i32>, %a2: tile<i32>, %b1: tile<i32>, %b2: tile<i32>) {",
              "  %aa = muli %a1, %a2 : tile<i32>",
              "  %ba = muli %b1, %a2 : tile<i32>",
              "  %bb = addi %ba, %b2 : tile<i32>",
              "  yield %aa, %bb : tile<i32>, tile<i32>",
              "}"]
    return entry_text("xyop", "i32", lines + i32_stores(part, tile, [("o", "%a"), ("p", "%b")]))


def run_affine(text: str, rows: int, cols: int) -> None:
    rng = np.random.default_rng(5)
    n = 2 * rows - 3
    x = rng.integers(-3, 4, (n, cols)).astype(np.int32)
    y = rng.integers(-9, 10, (n, cols)).astype(np.int32)
    o, p = np.zeros_like(x), np.zeros_like(x)
    expected, got = diffcheck.run_both(parse_module(text, "k.mlir"), "k", (2, 1, 1), [x, y, o, p, np.int32(n)], "sm_80")
    assert diffcheck.compare(expected, got) is None


def nvidia_spans(steps):
    """NVIDIA's cross-warp shape: every bit from the lowest warp bit to the highest in one round."""
    warps = [k for k, (_, name, _) in enumerate(steps) if name == "warp"]
    return [range(warps[0], warps[-1] + 1)] if warps else []


CROSS_WARP = [(16, 16, 0), (8, 64, 0), (64, 64, 0), (2, 256, 1)]


@pytest.mark.parametrize("spans", ["rounds", "nvidia"])
@pytest.mark.parametrize("rows, cols, dim", CROSS_WARP)
@pytest.mark.parametrize("reverse", [False, True])
def test_a_non_commutative_scan_across_warps(rows, cols, dim, reverse, spans, monkeypatch):
    """A two-operand, non-commutative combiner keeps its (earlier, later) order through
    registers, lanes and warps, a round per warp bit and in NVIDIA's single round."""
    if spans == "nvidia":
        monkeypatch.setattr(emit_reduce, "warp_spans", nvidia_spans)
    run_affine(affine_scan_kernel(rows, cols, dim, reverse), rows, cols)


@pytest.mark.parametrize("rows, cols, dim, lane_run", [
    (16, 16, 1, True),     # three lane bits, then the register bit (the last step)
    (4, 16, 1, True),      # four lane bits, nothing after them
    (64, 8, 0, True),      # two lane bits from lane bit 3, two warp bits, two register bits
    (8, 64, 1, False),     # three lane bits, two register bits, a lane bit: a butterfly
])
@pytest.mark.parametrize("reverse", [False, True])
def test_a_non_commutative_scan_after_a_lane_run(rows, cols, dim, lane_run, reverse):
    """Lane bits holding the lowest positions scan with shfl.up/down (_scan_lanes) where
    the steps after them need few of the run's totals; those steps take each register's
    total from the run's last lane in scan order."""
    text = affine_scan_kernel(rows, cols, dim, reverse)
    ptx = compile_module(parse_module(text, "k.mlir"), CompileOptions(gpu_name="sm_80"), "ptx")
    assert (("shfl.sync.down" if reverse else "shfl.sync.up") in ptx) == lane_run
    run_affine(text, rows, cols)


@pytest.mark.parametrize("spans, barriers, stores", [("rounds", 6, 2), ("nvidia", 3, 1)])
def test_the_cross_warp_step_writes_each_total_once_a_round(spans, barriers, stores, monkeypatch):
    """16x16 along dim 0 crosses two warp bits; a thread holds two lines (two distinct
    totals, one vector store).  Each round: a barrier, one store of the thread's totals, a
    barrier, the reads and folds, a closing barrier."""
    if spans == "nvidia":
        monkeypatch.setattr(emit_reduce, "warp_spans", nvidia_spans)
    text = scan_kernel(16, 16, 0, True, "muli")
    ptx = compile_module(parse_module(text, "k.mlir"), CompileOptions(gpu_name="sm_80"), "ptx")
    assert ptx.count("bar.sync") == barriers
    assert ptx.count("st.shared.v2.b32") == stores and ptx.count("st.shared") == stores
    tileas = compile_module(parse_module(text, "k.mlir"), CompileOptions(gpu_name="sm_80"), "tileas")
    assert "smem=1024B" in tileas          # 128 threads x 2 totals x 4 bytes


def two_scans_kernel() -> str:
    """scans_builtin's shape: one 16x16 tile scanned along the row (adds, inside a warp)
    and, reversed, along the column (multiplies, across warps), each stored to its own view."""
    part, tile, lines = i32_views(16, 16, "xop")
    lines.append(f"%t, %k = load_view_tko weak %xq[%bx, %c0] token = %tok : {part}, tile<i32> -> {tile}, token")
    for name, dim, reverse, combiner, identity in (("s", 1, "false", "addi", 0), ("m", 0, "true", "muli", 1)):
        lines += [f"%{name} = scan %t dim={dim} reverse={reverse} identities=[{identity} : i32] : {tile} -> {tile}",
                  f"(%{name}1: tile<i32>, %{name}2: tile<i32>) {{",
                  f"  %{name}3 = {combiner} %{name}1, %{name}2 : tile<i32>",
                  f"  yield %{name}3 : tile<i32>",
                  "}"]
    return entry_text("xop", "i32", lines + i32_stores(part, tile, [("o", "%s"), ("p", "%m")]))


def test_a_scan_is_stored_before_a_later_scan_crosses_warps():
    """Scans are emitted where their result is first needed: the row scan's store goes
    before the column scan's barriers, so its values are not kept through them."""
    text = two_scans_kernel()
    ptx = compile_module(parse_module(text, "k.mlir"), CompileOptions(gpu_name="sm_80"), "ptx")
    body = ptx[ptx.index("shfl.sync"):]
    assert body[:body.index("bar.sync")].count("st.global") == 2
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, (29, 16)).astype(np.int32)
    o, p = np.zeros_like(x), np.zeros_like(x)
    expected, got = diffcheck.run_both(parse_module(text, "k.mlir"), "k", (2, 1, 1), [x, o, p, np.int32(29)], "sm_80")
    assert diffcheck.compare(expected, got) is None
