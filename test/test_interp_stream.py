"""Wide tiles in the interpreter: reduce/scan shortcuts give the general path's bits, and a
32768-wide row costs a bounded number of op runs and memory proportional to the row."""
from __future__ import annotations

import tracemalloc

import ml_dtypes
import numpy as np
import pytest

from _build import bytecode
from tileiras.interp import core, run
from tileiras.interp import reduce as R

RNG = np.random.default_rng(18)
_DT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
       "i32": np.int32, "i64": np.int64}


def combiner_kernel(kind: str, elem: str, comb: str, identity: str, rows: int, n: int,
                    flags: str = "", reverse: bool = False) -> bytes:
    """``kind`` (reduce or scan) along dim 1 of a rows x n tile with ``yield comb(a, b)``."""
    tv = f"tensor_view<{rows}x{n}x{elem}, strides=[{n},1]>"
    pv = f"partition_view<tile=({rows}x{n}), {tv}>"
    out_shape, out_tv = ((f"{rows}", f"tensor_view<{rows}x{elem}, strides=[1]>") if kind == "reduce"
                         else (f"{rows}x{n}", tv))
    out_pv = f"partition_view<tile=({out_shape}), {out_tv}>"
    out_view = (f"%y, shape = [{rows}], strides = [1]" if kind == "reduce"
                else f"%y, shape = [{rows}, {n}], strides = [{n}, 1]")
    index = "%c0" if kind == "reduce" else "%c0, %c0"
    rev = f" reverse={'true' if reverse else 'false'}" if kind == "scan" else ""
    return bytecode(
        "cuda_tile.module @kernels {\n"
        f"  entry @k(%x: tile<ptr<{elem}>>, %y: tile<ptr<{elem}>>) {{\n"
        "    %t0 = make_token : token\n"
        f"    %xv = make_tensor_view %x, shape = [{rows}, {n}], strides = [{n}, 1] : {tv}\n"
        f"    %yv = make_tensor_view {out_view} : {out_tv}\n"
        "    %c0 = constant <i32: 0> : tile<i32>\n"
        f"    %xp = make_partition_view %xv : {pv}\n"
        f"    %yp = make_partition_view %yv : {out_pv}\n"
        f"    %t, %tok = load_view_tko weak %xp[%c0, %c0] token = %t0 : {pv}, tile<i32> -> tile<{rows}x{n}x{elem}>, token\n"
        f"    %r = {kind} %t dim=1{rev} identities=[{identity} : {elem}] : tile<{rows}x{n}x{elem}> -> tile<{out_shape}x{elem}>\n"
        f"    (%a: tile<{elem}>, %b: tile<{elem}>) {{\n"
        f"      %c = {comb} %a, %b {flags}: tile<{elem}>\n"
        f"      yield %c : tile<{elem}>\n"
        "    }\n"
        f"    %w = store_view_tko weak %r, %yp[{index}] token = %t0 : tile<{out_shape}x{elem}>, {out_pv}, tile<i32> -> token\n"
        "    return\n  }\n}\n")


def inputs(elem: str, rows: int, n: int, specials: bool) -> np.ndarray:
    dt = _DT[elem]
    if elem.startswith("i"):
        return RNG.integers(-2**31, 2**31, (rows, n)).astype(dt)
    with np.errstate(over="ignore"):  # f16 overflows to inf: one more special
        x = (RNG.standard_normal((rows, n)) * np.exp2(RNG.integers(-20, 20, (rows, n)))).astype(dt)
        picks = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38]).astype(dt)
    if specials:
        x[1::2] = np.where(RNG.random((rows // 2, n)) < 0.05, RNG.choice(picks, (rows // 2, n)), x[1::2])
    return x


def run_both_paths(data: bytes, x: np.ndarray, out_shape: tuple, monkeypatch) -> tuple[np.ndarray, np.ndarray]:
    fast = np.zeros(out_shape, x.dtype)
    run(data, None, 1, [x, fast])
    general = np.zeros(out_shape, x.dtype)
    with monkeypatch.context() as m:
        m.setattr(R, "_fast_reduce", lambda *a: None)
        m.setattr(R, "_fast_scan", lambda *a: None)
        run(data, None, 1, [x, general])
    return fast, general


COMBINERS = [
    ("f32", "addf", "0.0", ""), ("f64", "addf", "0.0", ""), ("f16", "addf", "0.0", ""),
    ("f32", "addf", "0.0", "flush_to_zero "), ("f32", "addf", "-0.0", "rounding<zero> "),
    ("f32", "maxf", "0xFF800000", ""), ("f32", "maxf", "0xFF800000", "propagate_nan "),
    ("bf16", "minf", "0x7F80", "propagate_nan "), ("f64", "minf", "0.0", ""),
    ("f32", "maxf", "0.0", "flush_to_zero "),
    ("i32", "addi", "0", ""), ("i64", "muli", "1", ""), ("i32", "maxi", "0", "signed "),
    ("i32", "mini", "0", "unsigned "), ("i32", "xori", "0", ""), ("i32", "ori", "0", ""),
    ("i32", "subi", "0", ""),
]


@pytest.mark.parametrize("specials", [False, True])
@pytest.mark.parametrize("kind,reverse", [("reduce", False), ("scan", False), ("scan", True)])
@pytest.mark.parametrize("elem,comb,identity,flags", COMBINERS)
def test_shortcuts_match_the_sequential_path(kind, reverse, elem, comb, identity, flags, specials, monkeypatch):
    """Bit for bit, on plain values (a pairwise float sum would differ) and on NaN, infinities,
    signed zeros, subnormals and overflow."""
    rows, n = 4, 256
    data = combiner_kernel(kind, elem, comb, identity, rows, n, flags, reverse)
    x = inputs(elem, rows, n, specials)
    out_shape = (rows,) if kind == "reduce" else (rows, n)
    fast, general = run_both_paths(data, x, out_shape, monkeypatch)
    np.testing.assert_array_equal(fast.view(f"u{fast.itemsize}"), general.view(f"u{general.itemsize}"))


def test_sum_is_sequential_not_pairwise():
    # its own generator: drawn from the module's, the row depended on which tests ran first in
    # the worker, and some rows sum pairwise to the same float
    rng = np.random.default_rng(100)
    x = (rng.standard_normal((1, 4096)) * np.exp2(rng.integers(-12, 12, (1, 4096)))).astype(np.float32)
    out = np.zeros(1, np.float32)
    run(combiner_kernel("reduce", "f32", "addf", "0.0", 1, 4096), None, 1, [x, out])
    acc = np.float32(0)
    for v in x[0]:
        acc = np.float32(v + acc)
    assert out[0].tobytes() == acc.tobytes()
    assert out[0] != x.sum(dtype=np.float32)  # numpy's pairwise sum rounds differently here


def softmax_row(n: int) -> bytes:
    """cuTile's softmax of one f32 row (max-reduce, exp, sum-reduce, divide)."""
    tv = f"tensor_view<?x{n}xf32, strides=[?,1]>"
    pv = f"partition_view<tile=(1x{n}), {tv}>"
    tile = f"tile<1x{n}xf32>"
    body = ("    (%a: tile<f32>, %b: tile<f32>) {{\n      %c = {} %a, %b : tile<f32>\n"
            "      yield %c : tile<f32>\n    }}\n")
    return bytecode(
        "cuda_tile.module @kernels {\n"
        "  entry @k(%x: tile<ptr<f32>>, %y: tile<ptr<f32>>, %m: tile<i32>, %s: tile<i32>) {\n"
        "    %t0 = make_token : token\n"
        f"    %xv = make_tensor_view %x, shape = [%m, {n}], strides = [%s, 1] : tile<i32> -> {tv}\n"
        f"    %yv = make_tensor_view %y, shape = [%m, {n}], strides = [%s, 1] : tile<i32> -> {tv}\n"
        "    %bx, %by, %bz = get_tile_block_id : tile<i32>\n"
        "    %c0 = constant <i32: 0> : tile<i32>\n"
        f"    %xp = make_partition_view %xv : {pv}\n"
        f"    %yp = make_partition_view %yv : {pv}\n"
        f"    %t, %tok = load_view_tko weak %xp[%bx, %c0] token = %t0 : {pv}, tile<i32> -> {tile}, token\n"
        f"    %mx = reduce %t dim=1 identities=[0xFF800000 : f32] : {tile} -> tile<1xf32>\n"
        + body.format("maxf") +
        "    %mr = reshape %mx : tile<1xf32> -> tile<1x1xf32>\n"
        f"    %mb = broadcast %mr : tile<1x1xf32> -> {tile}\n"
        f"    %d = subf %t, %mb : {tile}\n"
        f"    %e = exp %d : {tile}\n"
        f"    %sm = reduce %e dim=1 identities=[0.0 : f32] : {tile} -> tile<1xf32>\n"
        + body.format("addf") +
        "    %sr = reshape %sm : tile<1xf32> -> tile<1x1xf32>\n"
        f"    %sb = broadcast %sr : tile<1x1xf32> -> {tile}\n"
        f"    %q = divf %e, %sb : {tile}\n"
        f"    %w = store_view_tko weak %q, %yp[%bx, %c0] token = %t0 : {tile}, {pv}, tile<i32> -> token\n"
        "    return\n  }\n}\n")


def run_softmax(n: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    x = RNG.uniform(-4, 4, (rows, n)).astype(np.float32)
    out = np.zeros_like(x)
    run(softmax_row(n), None, rows, [x, out, rows, n])
    return x, out


def test_wide_softmax_row_costs_few_op_runs(monkeypatch):
    """A 1x32768 row: the two reductions take ~log2(n) + 1 region runs (max) and none (sum),
    not one per element (before: 393,273 op runs for these 3 rows)."""
    runs = []
    real_run_op = core.Frame.run_op
    monkeypatch.setattr(core.Frame, "run_op", lambda self, op: runs.append(op) or real_run_op(self, op))
    x, out = run_softmax(32768, 3)
    assert len(runs) < 3 * 100, f"{len(runs)} op runs for 3 rows"
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-12)


def test_wide_row_memory_is_a_few_rows_not_a_few_dozen():
    """Element-wise ops and memory accesses run CHUNK_ELEMENTS at a time: peak memory for a
    2^18-wide f32 row is the live tiles plus a bounded scratch (before: 28 rows' worth)."""
    n = 1 << 18
    tracemalloc.start()
    try:
        run_softmax(n, 1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    row = n * 4
    assert peak < 20 * row, f"peak {peak / row:.1f} rows"


def test_chunked_ops_and_accesses_give_the_whole_tile_results(monkeypatch):
    """Odd chunk sizes (slices straddling rows) change no bit, and a store whose addresses
    repeat across chunks keeps the last element's value."""
    from tileiras.interp import memory

    x = RNG.uniform(-4, 4, (2, 4096)).astype(np.float32)
    whole = np.zeros_like(x)
    run(softmax_row(4096), None, 2, [x, whole, 2, 4096])
    for chunk in (1000, 4097):
        monkeypatch.setattr(core, "CHUNK_ELEMENTS", chunk)
        monkeypatch.setattr(memory, "CHUNK_ELEMENTS", chunk)
        chunked = np.zeros_like(x)
        run(softmax_row(4096), None, 2, [x, chunked, 2, 4096])
        np.testing.assert_array_equal(chunked.view(np.uint32), whole.view(np.uint32))
    mem = memory.Memory()
    buf = np.zeros(4, np.uint32)
    base = mem.add(buf, "buf")
    addrs = np.uint64(base) + np.uint64(4) * (np.arange(3000, dtype=np.uint64) % np.uint64(4))
    mem.write_bytes(addrs, np.arange(3000, dtype=np.uint32).view(np.uint8).reshape(-1, 4))
    np.testing.assert_array_equal(buf, [2996, 2997, 2998, 2999])
    np.testing.assert_array_equal(mem.read_bytes(addrs[:2500], 4).view(np.uint32).reshape(-1),
                                  buf[np.arange(2500) % 4])
