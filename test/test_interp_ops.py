"""More op coverage through cuTile kernels: tile shuffling (cat, extract, insert, permute,
reshape), pack/unpack, raw-memory pointer ops (offset, int_to_ptr via array lists), atomic
reductions into tiled views, scaled mma, integer widening/narrowing, integer powers."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

from tileiras.interp import cutile_args, run  # noqa: E402
from tileiras.interp.testing import array, export, scalar  # noqa: E402

RNG = np.random.default_rng(7)
F32 = np.float32


@ct.kernel
def shuffles(x, out_cat, out_ext, out_ins, out_perm):
    t = ct.load(x, index=(0, 0, 0), shape=(2, 4, 8))
    ct.store(out_cat, index=(0, 0, 0), tile=ct.cat((t, t * 2.0), axis=1))
    ct.store(out_ext, index=(0, 0, 0), tile=ct.extract(t, (1, 1, 0), (1, 2, 8)))
    ct.store(out_ins, index=(0, 0, 0), tile=ct.insert(t, (0, 1, 1), ct.full((2, 2, 4), -1.0, ct.float32)))
    ct.store(out_perm, index=(0, 0, 0), tile=ct.permute(t, (2, 0, 1)))


def test_cat_extract_insert_permute():
    data = export(shuffles, *(array(ct.float32, 3) for _ in range(5)))
    x = RNG.standard_normal((2, 4, 8)).astype(F32)
    oc, oe, oi, op = (np.zeros(s, F32) for s in ((2, 8, 8), (1, 2, 8), (2, 4, 8), (8, 2, 4)))
    run(data, None, 1, cutile_args(x, oc, oe, oi, op))
    np.testing.assert_array_equal(oc, np.concatenate([x, x * 2], axis=1))
    np.testing.assert_array_equal(oe, x[1:2, 2:4, :])
    ins = x.copy()
    ins[:, 2:4, 4:8] = -1
    np.testing.assert_array_equal(oi, ins)
    np.testing.assert_array_equal(op, np.transpose(x, (2, 0, 1)))


@ct.kernel
def iota_reshape(out):
    r = ct.reshape(ct.arange(32, dtype=ct.int32), (4, 8))
    ct.store(out, index=(0, 0), tile=r * 3 - 1)


def test_iota_and_reshape_row_major():
    data = export(iota_reshape, array(ct.int32, 2))
    out = np.zeros((4, 8), np.int32)
    run(data, None, 1, cutile_args(out))
    np.testing.assert_array_equal(out, np.arange(32).reshape(4, 8) * 3 - 1)


@ct.kernel
def bytes_roundtrip(x, raw, back):
    t = ct.load(x, index=(0,), shape=(16,))
    b = ct.pack_to_bytes(t)
    ct.store(raw, index=(0,), tile=b)
    ct.store(back, index=(0,), tile=ct.unpack_from_bytes(b, ct.float16))


def test_pack_unpack_bytes():
    data = export(bytes_roundtrip, array(ct.float16), array(ct.uint8), array(ct.float16))
    x = RNG.standard_normal(16).astype(np.float16)
    raw, back = np.zeros(32, np.uint8), np.zeros(16, np.float16)
    run(data, None, 1, cutile_args(x, raw, back))
    np.testing.assert_array_equal(raw, x.view(np.uint8))
    np.testing.assert_array_equal(back.view(np.uint16), x.view(np.uint16))


@ct.kernel
def widen_narrow(x, wide, narrow, uwide):
    t = ct.load(x, index=(0,), shape=(8,))
    ct.store(wide, index=(0,), tile=ct.astype(t, ct.int64) * 1000000)
    ct.store(narrow, index=(0,), tile=ct.astype(t * 100, ct.int8))
    ct.store(uwide, index=(0,), tile=ct.astype(ct.astype(t, ct.uint8), ct.uint32))


def test_sign_and_zero_extension_and_truncation():
    data = export(widen_narrow, array(ct.int32), array(ct.int64), array(ct.int8), array(ct.uint32))
    x = np.array([-3, 5, 127, -128, 300, -1, 0, 2**20], np.int32)
    wide, narrow, uwide = np.zeros(8, np.int64), np.zeros(8, np.int8), np.zeros(8, np.uint32)
    run(data, None, 1, cutile_args(x, wide, narrow, uwide))
    np.testing.assert_array_equal(wide, x.astype(np.int64) * 1000000)
    np.testing.assert_array_equal(narrow, (x * 100).astype(np.int8))       # truncation wraps
    np.testing.assert_array_equal(uwide, x.astype(np.uint8).astype(np.uint32))


@ct.kernel
def int_pow(x, e, out):
    base, exponent = ct.load(x, index=(0,), shape=(8,)), ct.load(e, index=(0,), shape=(8,))
    ct.store(out, index=(0,), tile=ct.pow(base, exponent))


def test_power_with_integer_exponent():
    data = export(int_pow, array(ct.float32), array(ct.int32), array(ct.float32))
    x = np.array([2, -2, 3, 0.5, 10, -1, 0, 1.5], F32)
    e = np.array([10, 3, -2, 4, 0, 7, 3, 2], np.int32)
    out = np.zeros(8, F32)
    run(data, None, 1, cutile_args(x, e, out))
    np.testing.assert_allclose(out, x.astype(np.float64) ** e.astype(np.float64), rtol=1e-6)


@ct.kernel
def raw_pointers(x, out):
    mem = x.get_raw_memory()
    offs = ct.arange(16, dtype=ct.int32) * 2 + 1
    v = mem.load_offset(offs)
    mem_out = out.get_raw_memory()
    mem_out.store_offset(ct.arange(16, dtype=ct.int32), v + 1.0)
    mem_out.atomic_add_offset(ct.arange(16, dtype=ct.int32) % 4 + 16, v)


def test_pointer_offsets_and_atomic_add():
    data = export(raw_pointers, array(ct.float32), array(ct.float32))
    x = RNG.standard_normal(40).astype(F32)
    out = np.zeros(20, F32)
    run(data, None, 1, cutile_args(x, out))
    odd = x[1:33:2]
    np.testing.assert_array_equal(out[:16], odd + F32(1))
    sums = np.zeros(4, F32)
    for k in range(16):                     # atomics apply one element at a time in order
        sums[k % 4] += odd[k]
    np.testing.assert_array_equal(out[16:], sums)


@ct.kernel
def tile_atomics(acc, x):
    i = ct.bid(0)
    tv = acc.tiled_view((4, 8))
    tv.atomic_store_add((0, 0), ct.load(x, index=(i, 0), shape=(4, 8)))
    tv.atomic_store_max((1, 0), ct.load(x, index=(i, 0), shape=(4, 8)))


def test_atomic_reduction_into_tiled_view():
    data = export(tile_atomics, array(ct.int32, 2), array(ct.int32, 2))
    x = RNG.integers(-50, 50, (12, 8)).astype(np.int32)
    acc = np.zeros((8, 8), np.int32)
    acc[4:] = -1000
    run(data, None, 3, cutile_args(acc, x))
    blocks = x.reshape(3, 4, 8)
    np.testing.assert_array_equal(acc[:4], blocks.sum(axis=0))
    np.testing.assert_array_equal(acc[4:], blocks.max(axis=0))


@ct.kernel
def scaled_mma(a, sa, b, sb, out):
    acc = ct.zeros((16, 16), dtype=ct.float32)
    r = ct.mma_scaled(ct.load(a, index=(0, 0), shape=(16, 64)), ct.load(sa, index=(0, 0), shape=(16, 2)),
                      ct.load(b, index=(0, 0), shape=(64, 16)), ct.load(sb, index=(0, 0), shape=(2, 16)), acc)
    ct.store(out, index=(0, 0), tile=r)


def test_block_scaled_mma():
    try:
        data = export(scaled_mma, array(ct.float8_e4m3fn, 2), array(ct.float8_e8m0fnu, 2),
                      array(ct.float8_e4m3fn, 2), array(ct.float8_e8m0fnu, 2), array(ct.float32, 2),
                      arch="sm_100")
    except ct.TileUnsupportedFeatureError as err:  # pragma: no cover - depends on cuTile
        pytest.skip(str(err))
    a = RNG.standard_normal((16, 64)).astype(ml_dtypes.float8_e4m3fn)
    b = RNG.standard_normal((64, 16)).astype(ml_dtypes.float8_e4m3fn)
    sa = (2.0 ** RNG.integers(-3, 4, (16, 2))).astype(ml_dtypes.float8_e8m0fnu)
    sb = (2.0 ** RNG.integers(-3, 4, (2, 16))).astype(ml_dtypes.float8_e8m0fnu)
    out = np.zeros((16, 16), F32)
    run(data, None, 1, cutile_args(a, sa, b, sb, out))
    A = a.astype(np.float64) * np.repeat(sa.astype(np.float64), 32, axis=1)
    B = b.astype(np.float64) * np.repeat(sb.astype(np.float64), 32, axis=0)
    np.testing.assert_array_equal(out, (A @ B).astype(F32))   # exact products, one rounding


@ct.kernel
def array_slices(x, out, start, stop):
    s = x.slice(0, start, stop)
    t = ct.load(s, index=(ct.bid(0),), shape=(8,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(ct.bid(0),), tile=t)


def test_array_slice_view():
    data = export(array_slices, array(ct.float32), array(ct.float32), scalar(ct.int32), scalar(ct.int32))
    x = np.arange(64, dtype=F32)
    out = np.full(16, -1, F32)
    run(data, None, 2, cutile_args(x, out, 10, 22))
    np.testing.assert_array_equal(out, np.concatenate([x[10:22], np.zeros(4, F32)]))
