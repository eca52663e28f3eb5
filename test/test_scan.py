"""Scans run in place, bit by bit of the position along the scanned dim (emit_shape._scan_by_bits):
registers in a thread, lanes by shuffles, warps through shared memory; the interpreter agrees."""
from __future__ import annotations

import numpy as np
import pytest

from tileiras import diffcheck
from tileiras.layout.linear import LinearLayout
from tileiras.lower.tileas import scans_in_place
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.text.parser import parse_module

COMBINERS = {"addi": "i32", "maxi": "i32", "muli": "i32", "addf": "f32"}


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
    ptr = f"tile<ptr<{elem}>>"
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k(%x: {ptr}, %o: {ptr}, %n: tile<i32>) {{\n"
            + "".join(f"    {line}\n" for line in lines) + "  }\n}\n")


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
    assert "scan.loop" not in llvm and "shfl.sync.bfly" in llvm
    assert "smem=0B" in compile_module(parse_module(text, "k.mlir"), CompileOptions(gpu_name="sm_90"), "tileas")
    run(text, 16, 16, "i32")


def test_layouts_that_mix_the_dim_scan_through_shared_memory():
    def layout(reg: list, lane: list) -> LinearLayout:
        return LinearLayout((("reg", tuple(reg)), ("lane", tuple(lane)), ("warp", ((4, 0), (8, 0)))), (16, 16))
    plain = layout([(0, 1)], [(0, 2), (0, 4), (0, 8), (1, 0), (2, 0)])
    mixed = layout([(1, 1)], [(0, 2), (0, 4), (0, 8), (0, 1), (2, 0)])
    assert scans_in_place(plain, 0) and scans_in_place(plain, 1)
    assert not scans_in_place(mixed, 0) and not scans_in_place(mixed, 1)
