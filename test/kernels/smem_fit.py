"""Kernels whose tensor-core operands, staged whole, would not fit sm_120's shared memory.

Not in ``ALL_CASES``: their 4-D inputs of 100 elements a dim would not fit the interpreter,
and their point is one architecture's limit.  ``test/test_smem_fit.py`` runs them on inputs
of their own shapes.

``gated_delta_inter`` is written in the style of TileGym's chunked gated-delta-rule
inter-chunk kernel: five tf32 multiplies on 64x128 and 128x128 f32 tiles in the chunk loop.
Staged whole, ``kd @ state`` (64x128 @ 128x128) takes 103,424 bytes (sm_120 allows
101,376); staged in K slices of 64 it takes 52,224.  ``tf32_wide`` is its smallest part
that shows the same: one such multiply, its operands loaded from global memory (through
TMA when aligned: the 64 KB buffer of B does not fit beside the scratch and loads directly).
"""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr, scalar

ConstInt = ct.Constant[int]
ZERO = ct.PaddingMode.ZERO


def _mm(a, b):
    """A @ B in tf32 (mma.sync m16n8k8 on tensor cores), f32 sums."""
    return ct.astype(ct.matmul(ct.astype(a, ct.tfloat32), ct.astype(b, ct.tfloat32)), ct.float32)


@ct.kernel
def tf32_wide(x, y, out, M: ConstInt, K: ConstInt, N: ConstInt):
    """out = x[:M, :K] @ y[:K, :N] (tf32)."""
    a = ct.load(x, index=(0, 0), shape=(M, K), padding_mode=ZERO)
    b = ct.load(y, index=(0, 0), shape=(K, N), padding_mode=ZERO)
    ct.store(out, index=(0, 0), tile=_mm(a, b))


def _chunk(t, index, rows, cols):
    """One chunk's rows x cols tile of a 4-D (batch x head, chunk, row, col) tensor, in f32."""
    tile = ct.load(t, index=index, shape=(1, 1, rows, cols), padding_mode=ZERO)
    return ct.astype(tile.reshape((rows, cols)), ct.float32)


@ct.kernel
def gated_delta_inter(Qc, Kc, Vc, KD, Gc, Out, n_chunks: int, CS: ConstInt, BK: ConstInt, BV: ConstInt):
    """Per (batch x head, value block): the state (BK x BV) carried across chunks of CS rows;
    each chunk's output is the decayed queries times the state plus the causal, decayed
    intra-chunk attention times the new values."""
    bh = ct.bid(0)
    pv = ct.bid(1)
    state = ct.zeros((BK, BV), dtype=ct.float32)
    o = ct.arange(CS, dtype=ct.int32)
    causal = ct.expand_dims(o, axis=1) >= ct.expand_dims(o, axis=0)
    for c in range(n_chunks):
        kd = _chunk(KD, (bh, c, 0, 0), CS, BK)
        vc = _chunk(Vc, (bh, c, 0, pv), CS, BV)
        vn = vc - _mm(kd, state)
        q = _chunk(Qc, (bh, c, 0, 0), CS, BK)
        g = ct.load(Gc, index=(bh, c, 0), shape=(1, 1, CS), padding_mode=ZERO).reshape((CS,))
        ai = _mm(q * ct.expand_dims(ct.exp(g), axis=1), state)
        k = _chunk(Kc, (bh, c, 0, 0), CS, BK)
        qk = _mm(q, ct.transpose(k))
        decay = ct.where(causal, ct.exp(ct.expand_dims(g, axis=1) - ct.expand_dims(g, axis=0)), 0.0)
        out = ai + _mm(ct.where(causal, qk * decay, 0.0), vn)
        ct.store(Out, index=(bh, c, 0, pv), tile=ct.reshape(out, (1, 1, CS, BV)))
        last = ct.astype(ct.load(Gc, index=(bh, c, CS - 1), shape=(), padding_mode=ZERO), ct.float32)
        kw = k * ct.expand_dims(ct.exp(last - g), axis=1)
        state = state * ct.exp(last) + _mm(ct.transpose(kw), vn)


TF32_WIDE = KernelCase("tf32_wide", tf32_wide,
                       [[arr(ct.float32, 2), arr(ct.float32, 2), arr(ct.float32, 2), 64, 128, 128]])
GATED_DELTA = KernelCase("gated_delta_inter", gated_delta_inter,
                         [[arr(ct.bfloat16, 4), arr(ct.bfloat16, 4), arr(ct.bfloat16, 4), arr(ct.bfloat16, 4),
                           arr(ct.float32, 3), arr(ct.float32, 4), scalar(ct.int32), 64, 128, 128]])
CASES = (TF32_WIDE, GATED_DELTA)
