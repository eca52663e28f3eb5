"""Shape manipulation: reshape, permute/transpose, broadcast, expand_dims, cat, extract, insert."""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr


@ct.kernel
def reshape_permute(x, out_t, out_p):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(16, 32))
    ct.store(out_t, index=(0, i), tile=ct.transpose(t))
    r = ct.reshape(t, (4, 4, 32))
    p = ct.permute(r, (2, 0, 1))
    ct.store(out_p, index=(0, i, 0), tile=p)


@ct.kernel
def broadcast_expand(row, col, out):
    i = ct.bid(0)
    r = ct.load(row, index=(0,), shape=(64,))
    c = ct.load(col, index=(i,), shape=(32,))
    outer = ct.expand_dims(c, 1) * ct.expand_dims(r, 0)
    b = ct.broadcast_to(ct.reshape(r, (1, 64)), (32, 64))
    ct.store(out, index=(i, 0), tile=outer + b)


@ct.kernel
def cat_extract(x, y, out, part):
    i = ct.bid(0)
    a = ct.load(x, index=(i, 0), shape=(8, 16))
    b = ct.load(y, index=(i, 0), shape=(8, 16))
    both = ct.cat((a, b), axis=1)
    ct.store(out, index=(i, 0), tile=both)
    sub = ct.extract(both, index=(0, 1), shape=(8, 8))
    ct.store(part, index=(i, 0), tile=ct.cat((sub, sub), axis=0))


@ct.kernel
def insert_tile(x, part):
    i = ct.bid(0)
    sub = ct.load(x, index=(i, 0), shape=(8, 8))
    z = ct.insert(ct.zeros((8, 32), dtype=ct.float32), index=(0, 2), value=sub)
    ct.store(part, index=(i, 0), tile=z)


@ct.kernel
def parts_at_runtime(x, out):
    """extract and insert at indices known only at run time (the block's): each 8x8 part of
    a row block moves to the mirrored column block, the rest is zero."""
    i = ct.bid(0)
    a = ct.load(x, index=(i, 0), shape=(8, 32))
    j = i % 4
    sub = ct.extract(a, index=(0, j), shape=(8, 8))
    z = ct.insert(ct.zeros((8, 32), dtype=ct.float32), index=(0, 3 - j), value=sub)
    ct.store(out, index=(i, 0), tile=z)


@ct.kernel
def iota_full(out_i, out_f):
    i = ct.bid(0)
    a = ct.arange(128, dtype=ct.int32, start=0, step=1) * 2 + i
    f = ct.full((128,), 3.25, dtype=ct.float32) + ct.ones((128,), dtype=ct.float32)
    ct.store(out_i, index=(i,), tile=a)
    ct.store(out_f, index=(i,), tile=f)


@ct.kernel
def scalar_tiles(x, out):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(1,))
    s = ct.reshape(t, ())
    ct.store(out, index=(i,), tile=ct.broadcast_to(s * 2 + 1, (1,)))


F32 = ct.float32

CASES = [
    KernelCase("reshape_permute", reshape_permute, [[arr(F32, 2), arr(F32, 2), arr(F32, 3)]]),
    KernelCase("broadcast_expand", broadcast_expand, [[arr(F32), arr(F32), arr(F32, 2)]]),
    KernelCase("cat_extract", cat_extract, [[arr(F32, 2), arr(F32, 2), arr(F32, 2), arr(F32, 2)]]),
    KernelCase("insert_tile", insert_tile, [[arr(F32, 2), arr(F32, 2)]]),
    KernelCase("parts_at_runtime", parts_at_runtime, [[arr(F32, 2), arr(F32, 2)]]),
    KernelCase("iota_full", iota_full, [[arr(ct.int32), arr(F32)]]),
    KernelCase("scalar_tiles", scalar_tiles, [[arr(ct.int64), arr(ct.int64)]]),
]
