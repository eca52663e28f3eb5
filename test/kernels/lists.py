"""Kernels that take lists of arrays, as grouped GEMMs do (TileGym's group_gemm style).

cuTile passes a list parameter as a pointer to a table, a row per array (its address, shape
and strides), and the row count (``tileiras/interp/arraylist.py``).  Not in ``ALL_CASES``:
their arguments are ``ArrayList``s; ``test/test_array_lists.py`` runs them.
"""
from __future__ import annotations

import cuda.tile as ct
from cuda.tile.compilation import ListConstraint

from ._case import KernelCase, arr, scalar

ConstInt = ct.Constant[int]
ZERO = ct.PaddingMode.ZERO


def grouped_tile(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    """The CTA's (TM, TN) tile of ``c = a @ b``: the K loop, zero-padded at the edges."""
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(TM, TK))):
        ta = ct.load(a, index=(ct.bid(0), k), shape=(TM, TK), padding_mode=ZERO)
        tb = ct.load(b, index=(k, ct.bid(1)), shape=(TK, TN), padding_mode=ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=acc.astype(c.dtype))


@ct.kernel
def grouped_matmul(As, Bs, Cs, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    """``Cs[g] = As[g] @ Bs[g]`` for group ``g = bid(2)``, a (TM, TN) tile per CTA; each group
    has its own shapes, read from its row of the table."""
    g = ct.bid(2)
    grouped_tile(As[g], Bs[g], Cs[g], TM, TN, TK)


@ct.kernel
def grouped_a_matmul(As, b, Cs, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    """``Cs[g] = As[g] @ b``: one B for every group (a shared weight), A and C per group."""
    g = ct.bid(2)
    grouped_tile(As[g], b, Cs[g], TM, TN, TK)


@ct.kernel
def persistent_grouped_matmul(As, Bs, Cs, TM: ConstInt, TN: ConstInt, TK: ConstInt, CTAS: ConstInt,
                              G: ConstInt):
    """TileGym's persistent grouped GEMM (a mixture of experts): ``Cs[g] = As[g] @ Bs[g]``
    for the G groups, whose (TM, TN) tiles the CTAS CTAs take in turn, group after group;
    each group's views are made once, before its loop over tiles."""
    t = ct.bid(0)
    start = 0
    for g in ct.static_iter(range(G)):
        a, b, c = As[g], Bs[g], Cs[g]
        tiles_n = ct.num_tiles(b, axis=1, shape=(TK, TN))
        count = ct.num_tiles(a, axis=0, shape=(TM, TK)) * tiles_n
        while t >= start and t < start + count:
            m, n = (t - start) // tiles_n, (t - start) % tiles_n
            acc = ct.full((TM, TN), 0, dtype=ct.float32)
            for k in range(ct.num_tiles(a, axis=1, shape=(TM, TK))):
                acc = ct.mma(ct.load(a, index=(m, k), shape=(TM, TK), padding_mode=ZERO),
                             ct.load(b, index=(k, n), shape=(TK, TN), padding_mode=ZERO), acc)
            ct.store(c, index=(m, n), tile=acc.astype(c.dtype))
            t += CTAS
        start = start + count


@ct.kernel
def grouped_axpy(xs, ys, alpha: float, TILE: ConstInt):
    """``ys[g] += alpha * xs[g]`` in place, group ``g = bid(1)``."""
    g = ct.bid(1)
    x, y = xs[g], ys[g]
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,), padding_mode=ZERO)
    u = ct.load(y, index=(ct.bid(0),), shape=(TILE,), padding_mode=ZERO)
    ct.store(y, index=(ct.bid(0),), tile=u + alpha * t)


def array_list(dtype, ndim: int = 1, **facts) -> ListConstraint:
    return ListConstraint(arr(dtype, ndim, **facts), alias_groups=(), elements_may_alias=False)


#: As cuTile exports ordinary tensors: shapes, strides and bases divisible by 16.
ALIGNED = dict(shape_divisible_by=16, stride_divisible_by=[16, 1], base_addr_divisible_by=16)
GROUPED_MATMUL = KernelCase("grouped_matmul", grouped_matmul,
                            [[array_list(ct.float16, 2, **ALIGNED), array_list(ct.float16, 2, **ALIGNED),
                              array_list(ct.float16, 2, **ALIGNED), 32, 32, 16]])
#: tiles a warpgroup multiplies on sm_90 (``wgmma``): the K loop's views are made at run time
#: from the table, so no tensor map exists and the ring is filled by ``cp.async``
GROUPED_MATMUL_WIDE = KernelCase("grouped_matmul_wide", grouped_matmul,
                                 [[array_list(ct.float16, 2, **ALIGNED), array_list(ct.float16, 2, **ALIGNED),
                                   array_list(ct.float16, 2, **ALIGNED), 64, 64, 32]])
GROUPED_AXPY = KernelCase("grouped_axpy", grouped_axpy,
                          [[array_list(ct.float32), array_list(ct.float32), scalar(ct.float32), 64]])
#: A and C per group, B shared: TMA maps built on the device beside a hidden one (sm_90)
GROUPED_A_MATMUL = KernelCase("grouped_a_matmul", grouped_a_matmul,
                              [[array_list(ct.float16, 2, **ALIGNED), arr(ct.float16, 2, **ALIGNED),
                                array_list(ct.float16, 2, **ALIGNED), 64, 64, 32]])
#: TileGym's persistent form, 3 groups on 2 CTAs: each group's maps built once, before its
#: loop over tiles (sm_90: wgmma rings fed by TMA)
PERSISTENT_GROUPED_MATMUL = KernelCase("persistent_grouped_matmul", persistent_grouped_matmul,
                                       [[array_list(ct.float16, 2, **ALIGNED), array_list(ct.float16, 2, **ALIGNED),
                                         array_list(ct.float16, 2, **ALIGNED), 64, 64, 32, 2, 3]])
