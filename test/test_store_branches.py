"""Stores of straight-line per-element chains branch per element (emit_memory.branch_per_element):
ptxas then computes one element's chain after the other instead of interleaving them."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tileiras import diffcheck
from tileiras.codegen.ptxas import invoke_ptxas
from tileiras.text.parser import parse_module
from tileiras.tools import find_ptxas


def kernel(n: int, elem: str, body: list[str]) -> str:
    """Loads tiles %a and %b of ``n`` elements of x and y, computes ``body`` (its last line
    defines %r) and stores %r to o."""
    view = f"tensor_view<?x{elem}, strides=[1]>"
    part = f"partition_view<tile=({n}), {view}>"
    tile = f"tile<{n}x{elem}>"
    lines = ["%tok = make_token : token",
             *(f"%{v}v = make_tensor_view %{v}, shape = [%n], strides = [1] : tile<i32> -> {view}"
               for v in "xyo"),
             "%bx, %by, %bz = get_tile_block_id : tile<i32>",
             *(f"%{v}p = make_partition_view %{v}v : {part}" for v in "xyo"),
             f"%a, %at = load_view_tko weak %xp[%bx] token = %tok : {part}, tile<i32> -> {tile}, token",
             f"%b, %bt = load_view_tko weak %yp[%bx] token = %tok : {part}, tile<i32> -> {tile}, token",
             *(line.replace("TILE", tile) for line in body),
             f"%st = store_view_tko weak %r, %op[%bx] token = %tok : {tile}, {part}, tile<i32> -> token",
             "return"]
    ptr = f"tile<ptr<{elem}>>"
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k(%x: {ptr}, %y: {ptr}, %o: {ptr}, %n: tile<i32>) {{\n"
            + "".join(f"    {line}\n" for line in lines) + "  }\n}\n")


#: int_arith's shape: floor division and remainder by a divisor that is never 0.
INT_DIVISION = ["%one = constant <i32: 1> : TILE",
                "%ab = absi %b : TILE",
                "%d = maxi %ab, %one signed : TILE",
                "%q = divi %a, %d signed rounding<negative_inf> : TILE",
                "%m = remi %b, %d signed : TILE",
                "%p = muli %a, %b : TILE",
                "%s = addi %q, %m : TILE",
                "%r = addi %s, %p : TILE"]
FLOAT_DIVISION = ["%r = divf %a, %b : TILE"]


def stores(ptx: str) -> tuple[int, int]:
    """(unpredicated, predicated) global stores."""
    plain = len(re.findall(r"^\s*st\.global", ptx, re.M))
    guarded = len(re.findall(r"^\s*@%p\d+ st\.global", ptx, re.M))
    return plain, guarded


def test_integer_chains_store_in_a_branch_each():
    ptx = diffcheck.compile_ptx(parse_module(kernel(256, "i32", INT_DIVISION), "k.mlir"), "sm_90")
    assert stores(ptx) == (2, 0)   # two registers a thread, each in its own block


@pytest.mark.parametrize("n, elem, body", [
    (256, "f32", FLOAT_DIVISION),   # div.rn.f32: ptxas's slow path already splits the blocks
    (128, "i32", INT_DIVISION),     # one register a thread: nothing to keep apart
])
def test_other_stores_stay_predicated(n, elem, body):
    ptx = diffcheck.compile_ptx(parse_module(kernel(n, elem, body), "k.mlir"), "sm_90")
    assert stores(ptx) == (0, n // 128)


def test_branched_stores_compute_the_same():
    """Grid 3 over 600 elements: the last tile is partly outside, its stores are skipped."""
    module = parse_module(kernel(256, "i32", INT_DIVISION), "k.mlir")
    rng = np.random.default_rng(7)
    x, y = (rng.integers(-1000, 1000, 600, dtype=np.int32) for _ in range(2))
    o = np.full(768, 12345, dtype=np.int32)
    args = [x, y, o, np.int32(600)]
    expected = diffcheck.run_interpreter(module, "k", (3, 1, 1), args)
    got = diffcheck.run_ptx(diffcheck.compile_ptx(module, "sm_90"), "k", (3, 1, 1), args)
    assert diffcheck.compare(expected, got) is None
    assert np.all(got.arrays[2][600:] == 12345)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (nvidia-cuda-nvcc)")
def test_integer_division_registers():
    """Interleaved, the two elements' divisions took 21 registers on sm_90; one after the
    other they take 18 (NVIDIA's tileiras: 22 for corpus int_arith i32)."""
    ptx = diffcheck.compile_ptx(parse_module(kernel(256, "i32", INT_DIVISION), "k.mlir"), "sm_90")
    assert invoke_ptxas(ptx, "sm_90", verbose=True).stats["k"].registers <= 20
