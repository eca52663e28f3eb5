"""The reference interpreter runs real cuTile kernels (exported to bytecode here, no GPU)
on random inputs; results are compared with numpy."""
from __future__ import annotations

import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

from tileiras.interp import TileAssertionError, launch, run, cutile_args  # noqa: E402
from tileiras.interp.testing import array, export, scalar  # noqa: E402
# Kernels the compiler's tests also use (test/kernels/), checked here against numpy.
from kernels.control import dynamic_loop, persistent_tiles, runtime_if, while_break_continue  # noqa: E402
from kernels.elementwise import half_arith, int_arith  # noqa: E402
from kernels.reductions import _absmax, scans, softmax_rows  # noqa: E402

ConstInt = ct.Constant[int]
RNG = np.random.default_rng(1234)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# --- elementwise ----------------------------------------------------------------------

@ct.kernel
def vadd(x, y, out, T: ConstInt):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(T,))
    b = ct.load(y, index=(i,), shape=(T,))
    ct.store(out, index=(i,), tile=a + b)


def test_vector_add():
    data = export(vadd, array(ct.float32), array(ct.float32), array(ct.float32), 16)
    x, y = randn(256), randn(256)
    out = np.zeros(256, np.float32)
    run(data, "vadd", 16, cutile_args(x, y, out))
    np.testing.assert_array_equal(out, x + y)


def test_vector_add_partial_tile_is_masked():
    """100 elements in tiles of 16: the last tile is partial; its store must not write past
    the end of the tensor (the sentinel beyond element 100 stays)."""
    data = export(vadd, array(ct.float32), array(ct.float32), array(ct.float32), 16)
    x, y = randn(100), randn(100)
    backing = np.full(128, -7.0, np.float32)
    out = backing[:100]
    run(data, None, 7, [x, 100, 1, y, 100, 1, out, 100, 1])
    np.testing.assert_array_equal(backing[:100], x + y)
    np.testing.assert_array_equal(backing[100:], -7.0)


def test_empty_grid_runs_no_block():
    data = export(vadd, array(ct.float32), array(ct.float32), array(ct.float32), 16)
    x, y = randn(32), randn(32)
    out = np.full(32, 5.0, np.float32)
    run(data, None, (0, 1, 1), cutile_args(x, y, out))
    np.testing.assert_array_equal(out, 5.0)


@ct.kernel
def float_arith(x, y, out, T: ConstInt):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(T,))
    b = ct.load(y, index=(i,), shape=(T,))
    r = (a + b) * (a - b) / (b * b + 2.0)
    r = ct.maximum(r, -a) + ct.minimum(a, b) - abs(b)
    ct.store(out, index=(i,), tile=-r)


def test_float_arith_f32():
    data = export(float_arith, array(ct.float32), array(ct.float32), array(ct.float32), 64)
    x, y = randn(128), randn(128)
    out = np.zeros(128, np.float32)
    run(data, None, 2, cutile_args(x, y, out))
    # cuTile fuses b * b + 2.0 into an fma (one rounding; exact in f64 for these inputs)
    r = (x + y) * (x - y) / (y.astype(np.float64) ** 2 + 2.0).astype(np.float32)
    r = np.maximum(r, -x) + np.minimum(x, y) - np.abs(y)
    np.testing.assert_array_equal(out, -r)  # every op is correctly rounded f32


@ct.kernel
def math_funcs(x, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(128,))
    p = abs(a) + 1.0
    r = ct.exp(a) + ct.exp2(a) + ct.log(p) + ct.log2(p) + ct.sqrt(p) + ct.rsqrt(p)
    r = r + ct.tanh(a) + ct.sin(a) + ct.cos(a) + ct.sinh(a) + ct.cosh(a)
    r = r + ct.floor(a) + ct.ceil(a) + ct.atan2(a, p)
    ct.store(out, index=(i,), tile=r)


def test_math_functions():
    data = export(math_funcs, array(ct.float32), array(ct.float32))
    x = randn(256)
    out = np.zeros(256, np.float32)
    run(data, None, 2, cutile_args(x, out))
    a = x.astype(np.float64)
    p = np.abs(a) + 1
    r = (np.exp(a) + np.exp2(a) + np.log(p) + np.log2(p) + np.sqrt(p) + 1 / np.sqrt(p) + np.tanh(a)
         + np.sin(a) + np.cos(a) + np.sinh(a) + np.cosh(a) + np.floor(a) + np.ceil(a) + np.arctan2(a, p))
    np.testing.assert_allclose(out, r, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_arith(dtype):
    import ml_dtypes
    np_dtype = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    data = export(half_arith, array(getattr(ct, dtype)), array(getattr(ct, dtype)), array(ct.float32),
                  array(getattr(ct, dtype)))
    x, y = randn(128).astype(np_dtype), randn(128).astype(np_dtype)
    o32, o16 = np.zeros(128, np.float32), np.zeros(128, np_dtype)
    run(data, None, 2, cutile_args(x, y, o32, o16))
    # cuTile emits fma for a * b + a and for h * 0.5 + b: one rounding each (the f64
    # expressions below are exact for these inputs)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    h = (x64 * y64 + x64).astype(np_dtype)
    np.testing.assert_array_equal(o32, (h.astype(np.float64) * 0.5 + y64).astype(np.float32))
    np.testing.assert_array_equal(o16.astype(np.float32),
                                  (np.maximum(h, y) - x).astype(np_dtype).astype(np.float32))


# --- integers -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_signed_int_arith(dtype):
    data = export(int_arith, array(getattr(ct, dtype)), array(getattr(ct, dtype)),
                  array(getattr(ct, dtype)), 3)
    x = RNG.integers(-10**6, 10**6, 256).astype(dtype)
    y = RNG.integers(-1000, 1000, 256).astype(dtype)
    out = np.zeros(256, dtype)
    run(data, None, 2, cutile_args(x, y, out))
    a, b = x, y | 1
    r = a + b * 3 - (a // b) + (a % b)   # Python floor semantics, as cuTile's // and %
    r = (r & 0xFF) ^ (a | b) ^ ~b
    r = (r << 3) + (a >> 1)
    r = np.maximum(r, a) + np.minimum(r, -b)
    np.testing.assert_array_equal(out, r)


@ct.kernel
def unsigned_bits(x, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(256,))
    r = (a >> 3) | (a << 5)
    r = r ^ (a & 0x5A)
    q, m = ct.divmod(r, a | 1)
    ct.store(out, index=(i,), tile=q + m + (a > 0x80000000))


def test_unsigned_int_ops():
    data = export(unsigned_bits, array(ct.uint32), array(ct.uint32))
    x = RNG.integers(0, 2**32, 512, dtype=np.uint64).astype(np.uint32)
    out = np.zeros(512, np.uint32)
    run(data, None, 2, cutile_args(x, out))
    r = (x >> np.uint32(3)) | (x << np.uint32(5))
    r = r ^ (x & np.uint32(0x5A))
    d = x | np.uint32(1)
    expect = r // d + r % d + (x > np.uint32(0x80000000)).astype(np.uint32)
    np.testing.assert_array_equal(out, expect)


# --- reductions, scans, softmax -------------------------------------------------------

@ct.kernel
def row_reductions(x, osum, omax, omin, oarg):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(16, 64))
    ct.store(osum, index=(i,), tile=ct.sum(t, axis=1))
    ct.store(omax, index=(i,), tile=ct.max(t, axis=1))
    ct.store(omin, index=(i,), tile=ct.min(t, axis=1))
    ct.store(oarg, index=(i,), tile=ct.argmax(t, axis=1))


def test_row_reductions():
    data = export(row_reductions, array(ct.float32, 2), array(ct.float32), array(ct.float32),
                  array(ct.float32), array(ct.int32))
    x = randn(32, 64)
    osum, omax, omin = (np.zeros(32, np.float32) for _ in range(3))
    oarg = np.zeros(32, np.int32)
    run(data, None, 2, cutile_args(x, osum, omax, omin, oarg))
    # the interpreter reduces sequentially left to right from the identity
    seq = np.zeros(32, np.float32)
    for j in range(64):
        seq = x[:, j] + seq
    np.testing.assert_array_equal(osum, seq)
    np.testing.assert_allclose(osum, x.sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(omax, x.max(axis=1))
    np.testing.assert_array_equal(omin, x.min(axis=1))
    np.testing.assert_array_equal(oarg, x.argmax(axis=1))


@ct.kernel
def int_reductions(x, omax, osum):
    i = ct.bid(0)
    t = ct.load(x, index=(0, i), shape=(32, 8))
    ct.store(omax, index=(i,), tile=ct.max(t, axis=0))
    ct.store(osum, index=(i,), tile=ct.sum(t, axis=0))


def test_int_column_reductions_wrap():
    data = export(int_reductions, array(ct.int32, 2), array(ct.int32), array(ct.int32))
    x = RNG.integers(-2**31, 2**31, (32, 16), dtype=np.int64).astype(np.int32)
    omax, osum = np.zeros(16, np.int32), np.zeros(16, np.int32)
    run(data, None, 2, cutile_args(x, omax, osum))
    np.testing.assert_array_equal(omax, x.max(axis=0))
    np.testing.assert_array_equal(osum, x.astype(np.int64).sum(axis=0).astype(np.int32))  # wraps


@ct.kernel
def custom_reduce(x, out):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(4, 64))
    ct.store(out, index=(i,), tile=ct.reduce(t, axis=1, func=_absmax, identity=0.0))


def test_custom_reduce_region():
    data = export(custom_reduce, array(ct.float32, 2), array(ct.float32))
    x = randn(8, 64)
    out = np.zeros(8, np.float32)
    run(data, None, 2, cutile_args(x, out))
    np.testing.assert_array_equal(out, np.abs(x).max(axis=1))


def test_scans():
    data = export(scans, *(array(ct.int32, 2) for _ in range(4)))
    x = RNG.integers(-3, 4, (16, 64)).astype(np.int32)
    ocs, ocp, orev = (np.zeros_like(x) for _ in range(3))
    run(data, None, 2, cutile_args(x, ocs, ocp, orev))
    np.testing.assert_array_equal(ocs, np.cumsum(x, axis=1))
    blocks = x.reshape(2, 8, 64)
    np.testing.assert_array_equal(ocp, np.cumprod(blocks, axis=1).reshape(16, 64))
    np.testing.assert_array_equal(orev, np.cumsum(x[:, ::-1], axis=1)[:, ::-1])


def test_softmax():
    data = export(softmax_rows, array(ct.float32, 2), array(ct.float32, 2), 256)
    x = randn(6, 256) * 4
    out = np.zeros_like(x)
    run(data, None, 6, cutile_args(x, out))
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)


# --- matmul ---------------------------------------------------------------------------

@ct.kernel
def matmul(a, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    bm, bn = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(bm, k), shape=(BM, BK))
        tb = ct.load(b, index=(k, bn), shape=(BK, BN))
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(bm, bn), tile=ct.astype(acc, c.dtype))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_matmul(dtype):
    import ml_dtypes
    np_dtype = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}[dtype]
    t = getattr(ct, dtype)
    data = export(matmul, array(t, 2), array(t, 2), array(ct.float32, 2), 32, 16, 16)
    a, b = randn(64, 48).astype(np_dtype), randn(48, 32).astype(np_dtype)
    c = np.zeros((64, 32), np.float32)
    run(data, None, (2, 2), cutile_args(a, b, c))
    expect = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, expect, rtol=1e-5, atol=1e-5)


@ct.kernel
def matmul_i8(a, b, c):
    acc = ct.zeros((16, 16), dtype=ct.int32)
    acc = ct.mma(ct.load(a, index=(0, 0), shape=(16, 32)), ct.load(b, index=(0, 0), shape=(32, 16)), acc)
    ct.store(c, index=(0, 0), tile=acc)


@pytest.mark.parametrize("lhs,rhs", [("int8", "int8"), ("int8", "uint8"), ("uint8", "uint8")])
def test_integer_mma_signedness(lhs, rhs):
    data = export(matmul_i8, array(getattr(ct, lhs), 2), array(getattr(ct, rhs), 2), array(ct.int32, 2))
    a = RNG.integers(0, 256, (16, 32)).astype(np.uint8).view(lhs)
    b = RNG.integers(0, 256, (32, 16)).astype(np.uint8).view(rhs)
    c = np.zeros((16, 16), np.int32)
    run(data, None, 1, cutile_args(a, b, c))
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


# --- layout: transpose, permute, column-major loads -----------------------------------

@ct.kernel
def transpose(x, out, T: ConstInt):
    i, j = ct.bid(0), ct.bid(1)
    a = ct.load(x, index=(i, j), shape=(T, T))
    ct.store(out, index=(j, i), tile=ct.transpose(a))


def test_transpose():
    data = export(transpose, array(ct.float32, 2), array(ct.float32, 2), 8)
    x = randn(32, 16)
    out = np.zeros((16, 32), np.float32)
    run(data, None, (4, 2), cutile_args(x, out))
    np.testing.assert_array_equal(out, x.T)


@ct.kernel
def load_order_f(x, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i, 0), shape=(8, 16), order="F")
    ct.store(out, index=(0, i), tile=a)


def test_load_with_order_f_uses_dim_map():
    """order="F" is a partition view with dim_map=[1, 0]: tile dim 0 walks tensor dim 1."""
    data = export(load_order_f, array(ct.float32, 2), array(ct.float32, 2))
    x = randn(16, 16)
    out = np.zeros((8, 32), np.float32)
    run(data, None, 2, cutile_args(x, out))
    np.testing.assert_array_equal(out[:, :16], x[:, :8].T)
    np.testing.assert_array_equal(out[:, 16:], x[:, 8:].T)


# --- gather / scatter, masks, padding ------------------------------------------------

@ct.kernel
def gather_scatter(src, idx, dst):
    i = ct.bid(0)
    ix = ct.load(idx, index=(i,), shape=(64,))
    vals = ct.gather(src, ix, padding_value=-1.0)
    offs = ct.arange(64, dtype=ct.int32) + i * 64
    ct.scatter(dst, offs, vals * 2.0, mask=ix >= 0)


def test_gather_scatter_with_padding_and_mask():
    data = export(gather_scatter, array(ct.float32), array(ct.int32), array(ct.float32))
    src = randn(100)
    idx = RNG.integers(-20, 120, 128).astype(np.int32)   # some negative, some past the end
    dst = np.full(128, 9.0, np.float32)
    run(data, None, 2, cutile_args(src, idx, dst))
    inb = (idx >= 0) & (idx < 100)
    gathered = np.where(inb, src[np.clip(idx, 0, 99)], -1.0)
    expect = np.where(idx >= 0, gathered * 2, 9.0).astype(np.float32)
    np.testing.assert_array_equal(dst, expect)


@ct.kernel
def padded_loads(x, out_nan, out_ninf, out_zero):
    i = ct.bid(0)
    a = ct.load(x, index=(i, 0), shape=(16, 32), padding_mode=ct.PaddingMode.NAN)
    b = ct.load(x, index=(i, 0), shape=(16, 32), padding_mode=ct.PaddingMode.NEG_INF)
    c = ct.load(x, index=(i, 0), shape=(16, 32), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out_nan, index=(i, 0), tile=a)
    ct.store(out_ninf, index=(i, 0), tile=b)
    ct.store(out_zero, index=(i, 0), tile=c)


def test_padding_values_on_partial_tiles():
    """x is 20x24; tiles are 16x32.  Padded elements are visible through the (larger)
    outputs, whose views are 32x32."""
    data = export(padded_loads, *(array(ct.float32, 2) for _ in range(4)))
    x = randn(20, 24)
    outs = [np.full((32, 32), 3.0, np.float32) for _ in range(3)]
    run(data, None, 2, cutile_args(x, *outs))
    inside = np.zeros((32, 32), bool)
    inside[:20, :24] = True
    for out, pad in zip(outs, (np.nan, -np.inf, 0.0)):
        np.testing.assert_array_equal(out[inside], x.reshape(-1))
        np.testing.assert_array_equal(out[~inside], np.full((~inside).sum(), pad, np.float32))


# --- control flow ---------------------------------------------------------------------

def test_while_break_continue():
    data = export(while_break_continue, array(ct.int32), array(ct.int32), scalar(ct.int32))
    x = RNG.integers(-40, 60, 64 * 12).astype(np.int32)
    out = np.zeros(64, np.int32)
    run(data, None, 1, cutile_args(x, out, 10))
    acc = np.zeros(64, np.int64)
    for k in range(1, 11):
        t = x[64 * k:64 * (k + 1)]
        if t.sum() < 0:
            continue
        acc = acc + t
        if acc.max() > 1000:
            break
    np.testing.assert_array_equal(out, acc)


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_for_loop_trip_counts(n):
    data = export(dynamic_loop, array(ct.float32), array(ct.float32), scalar(ct.int32))
    x = randn(128 * 8)
    out = np.full(128, 4.0, np.float32)
    run(data, None, 1, cutile_args(x, out, n))
    acc = np.zeros(128, np.float32)
    for k in range(1, n, 2):
        acc = acc * np.float32(0.5) + x[128 * k:128 * (k + 1)]
    np.testing.assert_array_equal(out, acc)


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_runtime_if(mode):
    data = export(runtime_if, array(ct.float32), array(ct.float32), scalar(ct.int32), scalar(ct.float32))
    x = randn(512)
    out = np.zeros(512, np.float32)
    run(data, None, 4, cutile_args(x, out, mode, 1.5))
    r = {0: x * np.float32(1.5), 1: x + np.float32(1.5), 2: -x}[mode].reshape(4, 128)
    r[1::2] *= 2
    np.testing.assert_array_equal(out, r.reshape(-1))


@ct.kernel
def grid3d(x, out):
    bx, by, bz = ct.bid(0), ct.bid(1), ct.bid(2)
    t = ct.load(x, index=(bz, by, bx), shape=(2, 4, 8))
    n = ct.num_blocks(0) + ct.num_blocks(1) * 10 + ct.num_blocks(2) * 100
    ct.store(out, index=(bz, by, bx), tile=t + n)


def test_3d_grid():
    data = export(grid3d, array(ct.float32, 3), array(ct.float32, 3))
    x = randn(6, 8, 16)
    out = np.zeros_like(x)
    run(data, None, (2, 2, 3), cutile_args(x, out))
    np.testing.assert_array_equal(out, x + np.float32(2 + 20 + 300))


def test_persistent_loop_over_tiles():
    data = export(persistent_tiles, array(ct.float32), array(ct.float32), scalar(ct.int32))
    x = randn(256 * 5)
    out = np.zeros_like(x)
    run(data, None, 2, cutile_args(x, out, 5))
    np.testing.assert_array_equal(out, x * np.float32(2) + np.float32(1))


# --- atomics --------------------------------------------------------------------------

@ct.kernel
def atomics(counter, fsum, imax, slots, flags):
    i = ct.bid(0)
    lanes = ct.arange(32, dtype=ct.int32)
    ct.atomic_add(counter, lanes % 4, ct.full((32,), 1, dtype=ct.int32))
    ct.atomic_add(fsum, lanes % 8, ct.full((32,), 0.5, dtype=ct.float32))
    ct.atomic_max(imax, lanes % 2, lanes + i)
    ct.atomic_min(imax, lanes % 2 + 2, lanes - i)
    old = ct.atomic_xchg(slots, lanes, lanes * i)
    ct.atomic_cas(flags, lanes, old, old + 1)


def test_atomics_with_duplicate_addresses():
    data = export(atomics, array(ct.int32), array(ct.float32), array(ct.int32), array(ct.int32),
                  array(ct.int32))
    counter = np.zeros(4, np.int32)
    fsum = np.zeros(8, np.float32)
    imax = np.array([-100, -100, 100, 100], np.int32)
    slots = np.zeros(32, np.int32)
    flags = np.zeros(32, np.int32)
    run(data, None, 3, cutile_args(counter, fsum, imax, slots, flags))
    np.testing.assert_array_equal(counter, [24, 24, 24, 24])       # 3 blocks x 8 lanes each
    np.testing.assert_array_equal(fsum, np.full(8, 12 * 0.5, np.float32))  # 3 blocks x 4 lanes
    np.testing.assert_array_equal(imax, [30 + 2, 31 + 2, 0 - 2, 1 - 2])
    lanes = np.arange(32)
    np.testing.assert_array_equal(slots, lanes * 2)
    # block b sees old = lanes*(b-1) (0 for b=0) and bumps flags only where flags == old
    f = np.zeros(32, np.int64)
    prev = np.zeros(32, np.int64)
    for b in range(3):
        f = np.where(f == prev, prev + 1, f)
        prev = lanes * b
    np.testing.assert_array_equal(flags, f)


# --- print and assert -----------------------------------------------------------------

@ct.kernel
def debug_print(x):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(4,))
    ct.printf("block %d first=%f\n", i, t)
    ct.printf("sum=%f\n", ct.sum(t))


def test_print_output():
    data = export(debug_print, array(ct.float32))
    x = np.array([1, 2, 3, 4, 0.5, 0.25, 0, -1], np.float32)
    printed: list[str] = []
    run(data, None, 2, cutile_args(x), printed=printed)
    assert printed == ["block 0 first=[1.000000, 2.000000, 3.000000, 4.000000]\n", "sum=10.000000\n",
                       "block 1 first=[0.500000, 0.250000, 0.000000, -1.000000]\n", "sum=-0.250000\n"]


@ct.kernel
def debug_assert(x):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(8,))
    ct.assert_(t >= 0, "negative input")


def test_assert_failure_is_reported():
    data = export(debug_assert, array(ct.int32))
    ok = np.arange(16, dtype=np.int32)
    run(data, None, 2, cutile_args(ok))
    bad = ok.copy()
    bad[11] = -5
    with pytest.raises(TileAssertionError, match="negative input") as info:
        run(data, None, 2, cutile_args(bad))
    assert info.value.failures == [((1, 0, 0), (3,), "negative input")]
    result = launch(data, None, 2, cutile_args(bad))
    assert len(result.failures) == 1
