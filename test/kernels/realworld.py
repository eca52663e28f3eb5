"""Kernels in the style of public cuTile code whose correctness depends on how CTAs interleave.

Not in ``ALL_CASES``: random inputs do not fit them.  ``locked_rows`` needs zeroed lock words
(random ones are held forever or taken by nobody); ``rope_inplace`` updates its tensors in
place, so it must run on the 1-D grid it is written for.  ``test/test_cross_cta.py`` runs them.
"""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr

ConstInt = ct.Constant[int]


@ct.kernel
def locked_rows(x, acc, locks, TILE: ConstInt):
    """cutile-python's LayerNorm backward (dW/dB partial sums): CTA ``i`` adds row ``i`` of
    ``x`` into row ``i % groups`` of ``acc``, tile by tile, under a spin lock per group."""
    bid = ct.bid(0)
    g = bid % acc.shape[0]
    for j in range(ct.num_tiles(x, axis=1, shape=(1, TILE))):
        t = ct.load(x, index=(bid, j), shape=(1, TILE), padding_mode=ct.PaddingMode.ZERO)
        while ct.atomic_cas(locks, g, 0, 1, memory_order=ct.MemoryOrder.ACQUIRE) == 1:
            pass
        t += ct.load(acc, index=(g, j), shape=(1, TILE), padding_mode=ct.PaddingMode.ZERO)
        ct.store(acc, index=(g, j), tile=t)
        ct.atomic_xchg(locks, g, 0, memory_order=ct.MemoryOrder.RELEASE)


@ct.kernel
def rope_inplace(q, k, cos, sin, HEADS: ConstInt, HALF: ConstInt):
    """TileGym-style rotary embedding, in place: q, k (batch, heads, seq, head_dim); one CTA
    per (batch, position), launched as a 1-D grid of batch * seq."""
    seq = q.shape[2]
    b = ct.bid(0) // seq
    s = ct.bid(0) % seq
    c = ct.reshape(ct.load(cos, index=(s, 0), shape=(1, HALF)), (1, 1, 1, HALF)).astype(ct.float32)
    n = ct.reshape(ct.load(sin, index=(s, 0), shape=(1, HALF)), (1, 1, 1, HALF)).astype(ct.float32)
    _rotate(q, b, s, c, n, HEADS, HALF)
    _rotate(k, b, s, c, n, HEADS, HALF)


def _rotate(t, b, s, c, n, HEADS, HALF):
    x1 = ct.load(t, index=(b, 0, s, 0), shape=(1, HEADS, 1, HALF)).astype(ct.float32)
    x2 = ct.load(t, index=(b, 0, s, 1), shape=(1, HEADS, 1, HALF)).astype(ct.float32)
    ct.store(t, index=(b, 0, s, 0), tile=(x1 * c - x2 * n).astype(t.dtype))
    ct.store(t, index=(b, 0, s, 1), tile=(x2 * c + x1 * n).astype(t.dtype))


BF16 = ct.bfloat16
LOCKED_ROWS = KernelCase("locked_rows", locked_rows,
                         [[arr(ct.float32, 2), arr(ct.float32, 2), arr(ct.int32), 32]])
ROPE_INPLACE = KernelCase("rope_inplace", rope_inplace,
                          [[arr(BF16, 4), arr(BF16, 4), arr(BF16, 2), arr(BF16, 2), 4, 64]])


@ct.kernel
def recycle_slots(idx, counts, slots, TILE: ConstInt):
    """In the style of the atomics_rmw sample: count each index, swap it into ``slots`` and
    write the displaced slot back over the index tile, in place.  A second CTA doing the
    same tile (a grid axis the kernel never reads) reads indices the first one may or may
    not have rewritten yet: the outcome depends on the CTAs' order."""
    t = ct.load(idx, index=(ct.bid(0),), shape=(TILE,))
    ct.atomic_add(counts, t, 1)
    ct.store(idx, index=(ct.bid(0),), tile=ct.atomic_xchg(slots, t, t + 1))


RECYCLE_SLOTS = KernelCase("recycle_slots", recycle_slots,
                           [[arr(ct.int32), arr(ct.int32), arr(ct.int32), 64]])
