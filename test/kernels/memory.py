"""Memory: gather/scatter, atomics, load/store options, orderings, advanced indexing."""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr, scalar

ConstInt = ct.Constant[int]


@ct.kernel
def gather_scatter(src, idx, dst):
    i = ct.bid(0)
    ix = ct.load(idx, index=(i,), shape=(64,))
    vals = ct.gather(src, ix, padding_value=0.0)
    offs = ct.arange(64, dtype=ct.int32) + i * 64
    ct.scatter(dst, offs, vals * 2.0, mask=ix >= 0)


@ct.kernel
def gather_2d(src, rows, dst):
    i = ct.bid(0)
    r = ct.load(rows, index=(i,), shape=(16,))
    cols = ct.arange(32, dtype=ct.int32)
    t = ct.gather(src, (ct.reshape(r, (16, 1)), ct.reshape(cols, (1, 32))), check_bounds=True)
    ct.store(dst, index=(i, 0), tile=t)


@ct.kernel
def atomics(counter, fsum, imax, slots, flags):
    i = ct.bid(0)
    lanes = ct.arange(32, dtype=ct.int32)
    ct.atomic_add(counter, lanes % 4, ct.full((32,), 1, dtype=ct.int32))
    ct.atomic_add(fsum, lanes % 8, ct.full((32,), 0.5, dtype=ct.float32),
                  memory_order=ct.MemoryOrder.RELAXED)
    ct.atomic_max(imax, lanes % 2, lanes + i, memory_scope=ct.MemoryScope.BLOCK)
    ct.atomic_min(imax, lanes % 2 + 2, lanes - i)
    old = ct.atomic_xchg(slots, lanes, lanes * i, memory_order=ct.MemoryOrder.ACQUIRE)
    ct.atomic_cas(flags, lanes, old, old + 1, memory_order=ct.MemoryOrder.RELEASE)
    ct.atomic_or(counter, lanes % 4 + 4, lanes)
    ct.atomic_and(counter, lanes % 4 + 8, lanes)
    ct.atomic_xor(counter, lanes % 4 + 12, lanes)


@ct.kernel
def load_store_options(x, y, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i, 0), shape=(32, 64), order="F", padding_mode=ct.PaddingMode.NAN)
    b = ct.load(y, index=(i, 0), shape=(32, 64), latency=4, allow_tma=False,
                padding_mode=ct.PaddingMode.NEG_INF)
    ct.store(out, index=(i, 0), tile=ct.maximum(a, b), latency=2, allow_tma=True)


@ct.kernel
def tile_atomics(x, fsum, imix):
    """Atomic reductions of whole tiles into views (``atomic_red_view``): an f32 sum, and
    signed max/min and bitwise or/and/xor of i32 tiles holding negative values too."""
    t = ct.load(x, index=(ct.bid(0), ct.bid(1)), shape=(32, 32), padding_mode=ct.PaddingMode.ZERO)
    fsum.tiled_view((32, 32)).atomic_store_add((0, 0), t)
    q = ct.astype(t * 100.0, ct.int32)
    v = imix.tiled_view((32, 32))
    v.atomic_store_max((0, 0), q)
    v.atomic_store_min((0, 1), q)
    v.atomic_store_or((1, 0), q)
    v.atomic_store_and((1, 1), q)
    v.atomic_store_xor((0, 2), q)


@ct.kernel
def memory_ordering(flag, data, out):
    i = ct.bid(0)
    f = ct.load(flag, index=(0,), shape=(1,), memory_order=ct.MemoryOrder.ACQUIRE,
                memory_scope=ct.MemoryScope.DEVICE)
    d = ct.load(data, index=(i,), shape=(32,))
    ct.store(out, index=(i,), tile=d + ct.astype(f, ct.float32),
             memory_order=ct.MemoryOrder.RELEASE, memory_scope=ct.MemoryScope.SYS)


@ct.kernel
def unchecked_bounds(x, out):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(128,), check_bounds=False)
    ct.store(out, index=(i,), tile=t + 1, check_bounds=False)


@ct.kernel
def advanced_indexing(x, idx, out, col):
    i = ct.bid(0)
    ix = ct.load(idx, index=(i,), shape=(32,))
    t = ct.load_advanced_indexing(x, (ix, ct.Slice(col, 16)), padding_mode=ct.PaddingMode.ZERO)
    ct.store_advanced_indexing(out, (ix, ct.Slice(col, 16)), t * 2.0)


@ct.kernel
def pdl_chain(x, out):
    ct.grid_dependency_control_wait()
    t = ct.load(x, index=(ct.bid(0),), shape=(128,))
    ct.grid_dependency_control_launch_dependents()
    ct.store(out, index=(ct.bid(0),), tile=t * 3.0)


F32 = ct.float32

CASES = [
    KernelCase("gather_scatter", gather_scatter, [[arr(F32), arr(ct.int32), arr(F32)]]),
    KernelCase("gather_2d", gather_2d, [[arr(F32, 2), arr(ct.int32), arr(F32, 2)]]),
    KernelCase("atomics", atomics,
               [[arr(ct.int32), arr(F32), arr(ct.int32), arr(ct.int32), arr(ct.int32)]]),
    KernelCase("load_store_options", load_store_options, [[arr(F32, 2), arr(F32, 2), arr(F32, 2)]]),
    KernelCase("tile_atomics", tile_atomics, [[arr(F32, 2), arr(F32, 2), arr(ct.int32, 2)]]),
    KernelCase("memory_ordering", memory_ordering, [[arr(ct.int32), arr(F32), arr(F32)]]),
    KernelCase("unchecked_bounds", unchecked_bounds, [[arr(ct.int64), arr(ct.int64)]]),
    KernelCase("advanced_indexing", advanced_indexing, [[arr(F32, 2), arr(ct.int32), arr(F32, 2), scalar(ct.int32)]]),
    KernelCase("pdl_chain", pdl_chain, [[arr(F32), arr(F32)]]),
]
