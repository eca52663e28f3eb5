"""Random Tile IR programs: the interpreter and our compiled PTX (emulated) agree.

Each program (test/random_programs.py) loads two partial tiles, runs a random chain of
element-wise ops, reductions broadcast back, transposes, selects and constants, and
stores the result; layouts, conversions through shared memory, reductions over lanes
and warps, and masking all get exercised in combinations no hand-written test covers.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from random_programs import (generate, generate_int, generate_mixed, generate_pointers, generate_shapes,
                             generate_views)

from tileiras import diffcheck
from tileiras.text.parser import parse_module
from tileiras.verify import check_module

N = 100  # array extent: tiles at the edges are partial


def _run(text: str, seed: int, gpu_name: str, dtype=np.float32, n: int = N):
    module = parse_module(text, f"random{seed}.mlir")
    check_module(module, gpu_name=gpu_name)
    rng = np.random.default_rng(seed)
    a, b = (rng.uniform(-4, 4, (n, n)).astype(dtype) for _ in range(2))
    args = [a, b, np.full((n, n), np.nan, dtype), np.int32(n)]  # NaN: what no tile stored
    return diffcheck.run_both(module, "k", (4, 4, 1), args, gpu_name)


def _check(seed: int, gpu_name: str, make=generate) -> None:
    text = make(seed)
    expected, got = _run(text, seed, gpu_name)
    # sums and scans associate differently (interpreter: left to right; compiled: a tree
    # over registers, lanes and warps): allow for the reassociation error
    scale = max(1.0, float(np.nanmax(np.abs(expected.arrays[2]))))
    problem = diffcheck.compare(expected, got, rtol=1e-4, atol=1e-5 * scale)
    assert problem is None, f"seed {seed}: {problem}\n{text}"


@pytest.mark.parametrize("seed", range(40))
def test_random_program_sm90(seed):
    _check(seed, "sm_90")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40, 120))
def test_random_program_more(seed):
    _check(seed, "sm_80" if seed % 2 else "sm_90")


INT_DTYPES = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64}


def _check_int(seed: int, gpu_name: str, elem: str = "i32") -> None:
    text = generate_int(seed, elem)
    module = parse_module(text, f"random_int{seed}.mlir")
    check_module(module, gpu_name=gpu_name)
    rng = np.random.default_rng(seed)
    dtype = INT_DTYPES[elem]
    info = np.iinfo(dtype)
    a, b = (rng.integers(info.min, info.max, (N, N), dtype=dtype, endpoint=True) for _ in range(2))
    args = [a, b, np.zeros((N, N), dtype), np.int32(N)]
    grid = (4, 4, 1)
    expected, got = diffcheck.run_both(module, "k", grid, args, gpu_name)
    problem = diffcheck.compare(expected, got)
    assert problem is None, f"seed {seed}: {problem}\n{text}"


@pytest.mark.parametrize("seed", range(30))
def test_random_int_program(seed):
    _check_int(seed, "sm_90" if seed % 3 else "sm_80")


ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")


@pytest.mark.parametrize("seed", range(24))
def test_random_mixed_program(seed):
    """Branches (uniform on the block id or a reduced value), loops with a branch inside,
    cat/extract, relayouts, iota, int round trips and math functions."""
    _check(seed, ARCHS[seed % 4], generate_mixed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(24, 124))
def test_random_mixed_program_more(seed):
    _check(seed, ARCHS[seed % 4], generate_mixed)


DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f64": np.float64}


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("elem", ["f16", "bf16"])
def test_random_mixed_program_half_exact(elem, seed):
    """On f16/bf16 tiles with order-independent reductions every op rounds once (math in f32,
    then to the half type), so our PTX must give the interpreter's bits exactly."""
    text = generate_mixed(seed, elem, exact=True)
    expected, got = _run(text, seed, ARCHS[seed % 4], DTYPES[elem])
    e, g = (o.arrays[2].astype(np.float64) for o in (expected, got))
    same = (e == g) | (np.isnan(e) & np.isnan(g))
    assert same.all(), f"seed {seed}: {np.count_nonzero(~same)} elements differ\n{text}"
    assert np.count_nonzero(~np.isnan(e)) >= 32 * 32, "the kernel stored (almost) nothing"


@pytest.mark.parametrize("seed", range(8))
def test_random_mixed_program_f64(seed):
    text = generate_mixed(seed, "f64")
    expected, got = _run(text, seed, ARCHS[seed % 4], np.float64)
    scale = max(1.0, float(np.nanmax(np.abs(expected.arrays[2]))))
    problem = diffcheck.compare(expected, got, rtol=1e-10, atol=1e-12 * scale)
    assert problem is None, f"seed {seed}: {problem}\n{text}"


def _check_views(seed: int) -> None:
    text = generate_views(seed)
    n = (64, 77, 100)[seed % 3]  # 77: rows start unaligned, no vector accesses
    expected, got = _run(text, seed, ARCHS[seed % 4], n=n)
    problem = diffcheck.compare(expected, got, rtol=0, atol=0)
    assert problem is None, f"seed {seed}: {problem}\n{text}"
    assert np.count_nonzero(~np.isnan(expected.arrays[2])) > 0, "nothing stored"


@pytest.mark.parametrize("seed", range(16))
def test_random_view_program(seed):
    """Operands read through partition/strided views of row- or column-major tensors with
    dim_map and padding values, written through another view: elementwise, so exact."""
    _check_views(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(16, 96))
def test_random_view_program_more(seed):
    _check_views(seed)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("elem", ["i8", "i16", "i64"])
def test_random_int_program_widths(elem, seed):
    """Narrow integers wrap, shift and divide in their own width; i64 in 64-bit registers."""
    _check_int(seed, ARCHS[seed % 4], elem)


def _check_pointers(seed: int) -> None:
    text = generate_pointers(seed)
    module = parse_module(text, f"random_ptr{seed}.mlir")
    gpu_name = ARCHS[seed % 4]
    check_module(module, gpu_name=gpu_name)
    n = (300, 256, 77)[seed % 3]
    tile = int(text.split("iota : tile<")[1].split("x")[0])
    rng = np.random.default_rng(seed)
    a, b = (rng.uniform(-40, 40, n).astype(np.float32) for _ in range(2))
    args = [a, b, np.zeros(n, np.float32), np.int32(n)]
    expected, got = diffcheck.run_both(module, "k", (-(-n // tile), 1, 1), args, gpu_name)
    problem = diffcheck.compare(expected, got, rtol=0, atol=0)
    assert problem is None, f"seed {seed}: {problem}\n{text}"
    assert np.count_nonzero(expected.arrays[2]) > 0, "nothing stored"


@pytest.mark.parametrize("seed", range(16))
def test_random_pointer_program(seed):
    """Masked gathers at permuted (32- or 64-bit) offsets with padding, masked scatters to
    another permutation, atomic adds of integers into 16 bins: exact."""
    _check_pointers(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(16, 96))
def test_random_pointer_program_more(seed):
    _check_pointers(seed)


@pytest.mark.parametrize("seed", range(12))
def test_random_shape_program(seed):
    """3-d reshapes, permutations, reductions over any axis broadcast back, 3-d cat/extract:
    data movement only (and max/min/sub), so exact."""
    text = generate_shapes(seed)
    expected, got = _run(text, seed, ARCHS[seed % 4])
    problem = diffcheck.compare(expected, got, rtol=0, atol=0)
    assert problem is None, f"seed {seed}: {problem}\n{text}"
