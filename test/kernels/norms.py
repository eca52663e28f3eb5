"""Persistent RMS and layer norms as TileGym writes them (``ops/cutile/rms_norm.py``
``rms_norm_kernel_static_persistent``, ``ops/cutile/layer_norm_legacy.py``
``_persistent_layer_norm_fwd_kernel``): each CTA walks row blocks in turn
(``range(bid, tiles, num_blocks)``), f32 math on 16-bit rows.

* ``rms_norm_persistent``: TILE_M whole rows a trip, the weight row loaded once before
  the loop (TileGym: TILE_M 4 for rows of 2048..8192);
* ``layer_norm_persistent``: the same with a bias, mean and variance from one pass
  (E[x^2] - E[x]^2), the statistics stored per row block;
* ``rms_norm_persistent_chunked``, ``layer_norm_persistent_chunked``: one row a trip, the
  row in chunks over N (a statistics loop, then a loop that normalizes), as TileGym's
  non-persistent gather kernels walk it.

``CASES`` use tiles small enough for the differential tests' 100- and 112-element inputs
to hold more row blocks than the grid has CTAs, yet wide enough (4x512) for the aligned
exports to reload the weight and bias rows inside the loop in the tile's layout
(``layout_rules.recompute_plan``); ``test_norm_registers.py`` exports the kernels with
TileGym's shapes.
"""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr

ConstInt = ct.Constant[int]
ConstFloat = ct.Constant[float]
PAD = ct.PaddingMode.ZERO


@ct.kernel
def rms_norm_persistent(X, Y, W, TILE_M: ConstInt, TILE_N: ConstInt, eps: ConstFloat):
    """TileGym's static persistent RMS norm (zero padding, so partial rows sum right)."""
    upper = (X.shape[0] + TILE_M - 1) // TILE_M
    w = ct.astype(ct.load(W, index=(0,), shape=(TILE_N,), padding_mode=PAD), ct.float32)
    for m in range(ct.bid(0), upper, ct.num_blocks(0)):
        x = ct.astype(ct.load(X, index=(m, 0), shape=(TILE_M, TILE_N), padding_mode=PAD, latency=10),
                      ct.float32)
        ss = ct.sum(x * x, axis=1, keepdims=True)
        r = ct.rsqrt(ss / ct.full((TILE_M, 1), X.shape[1] * 1.0, dtype=ct.float32) + eps)
        y = x * r * ct.reshape(w, (1, TILE_N))
        ct.store(Y, index=(m, 0), tile=ct.astype(y, X.dtype), allow_tma=False, latency=3)


@ct.kernel
def layer_norm_persistent(X, Y, W, B, Mean, Rstd, D: ConstInt, eps: ConstFloat,
                          BLOCK_N: ConstInt, BLOCK_D: ConstInt):
    """TileGym's persistent layer norm (training: the statistics stored)."""
    upper = ct.cdiv(X.shape[0], BLOCK_N)
    w = ct.astype(ct.load(W, index=(0,), shape=(BLOCK_D,), padding_mode=PAD), ct.float32)
    b = ct.astype(ct.load(B, index=(0,), shape=(BLOCK_D,), padding_mode=PAD), ct.float32)
    for m in range(ct.bid(0), upper, ct.num_blocks(0)):
        x = ct.astype(ct.load(X, index=(m, 0), shape=(BLOCK_N, BLOCK_D), padding_mode=PAD, latency=4),
                      ct.float32)
        avg_square = ct.sum(x * x, axis=1) / D
        mean = ct.sum(x, axis=1) / D
        rstd = ct.rsqrt(avg_square - mean * mean + eps)
        ct.store(Mean, index=(m,), tile=mean, allow_tma=False)
        ct.store(Rstd, index=(m,), tile=rstd, allow_tma=False)
        x_hat = (x - ct.reshape(mean, (BLOCK_N, 1))) * ct.reshape(rstd, (BLOCK_N, 1))
        y = x_hat * ct.reshape(w, (1, BLOCK_D)) + ct.reshape(b, (1, BLOCK_D))
        ct.store(Y, index=(m, 0), tile=ct.astype(y, Y.dtype), allow_tma=False)


@ct.kernel
def rms_norm_persistent_chunked(X, Y, W, Rstd, eps: ConstFloat, TILE: ConstInt):
    """One row a trip, the row in chunks of TILE: a sum of squares, then the output."""
    n = X.shape[1]
    chunks = ct.cdiv(n, TILE)
    for row in range(ct.bid(0), X.shape[0], ct.num_blocks(0)):
        acc = ct.full((1, TILE), 0.0, dtype=ct.float32)
        for j in range(chunks):
            x = ct.astype(ct.load(X, index=(row, j), shape=(1, TILE), padding_mode=PAD), ct.float32)
            acc = acc + x * x
        r = ct.rsqrt(ct.sum(acc, axis=1, keepdims=True) / n + eps)
        ct.store(Rstd, index=(row,), tile=ct.reshape(r, (1,)))
        for j in range(chunks):
            x = ct.astype(ct.load(X, index=(row, j), shape=(1, TILE), padding_mode=PAD), ct.float32)
            w = ct.astype(ct.load(W, index=(j,), shape=(TILE,), padding_mode=PAD), ct.float32)
            ct.store(Y, index=(row, j), tile=ct.astype(x * r * ct.reshape(w, (1, TILE)), Y.dtype))


@ct.kernel
def layer_norm_persistent_chunked(X, Y, W, B, Mean, Rstd, eps: ConstFloat, TILE: ConstInt):
    """One row a trip, the row in chunks of TILE: sums of x and x^2, then the output."""
    n = X.shape[1]
    chunks = ct.cdiv(n, TILE)
    for row in range(ct.bid(0), X.shape[0], ct.num_blocks(0)):
        s = ct.full((1, TILE), 0.0, dtype=ct.float32)
        s2 = ct.full((1, TILE), 0.0, dtype=ct.float32)
        for j in range(chunks):
            x = ct.astype(ct.load(X, index=(row, j), shape=(1, TILE), padding_mode=PAD), ct.float32)
            s = s + x
            s2 = s2 + x * x
        mean = ct.sum(s, axis=1, keepdims=True) / n
        r = ct.rsqrt(ct.sum(s2, axis=1, keepdims=True) / n - mean * mean + eps)
        ct.store(Mean, index=(row,), tile=ct.reshape(mean, (1,)))
        ct.store(Rstd, index=(row,), tile=ct.reshape(r, (1,)))
        for j in range(chunks):
            x = ct.astype(ct.load(X, index=(row, j), shape=(1, TILE), padding_mode=PAD), ct.float32)
            w = ct.astype(ct.load(W, index=(j,), shape=(TILE,), padding_mode=PAD), ct.float32)
            b = ct.astype(ct.load(B, index=(j,), shape=(TILE,), padding_mode=PAD), ct.float32)
            y = (x - mean) * r * ct.reshape(w, (1, TILE)) + ct.reshape(b, (1, TILE))
            ct.store(Y, index=(row, j), tile=ct.astype(y, Y.dtype))


F32, F16, BF16 = ct.float32, ct.float16, ct.bfloat16


def rms_case(name: str, dtype, tile_m: int, tile_n: int) -> KernelCase:
    return KernelCase(name, rms_norm_persistent, [[arr(dtype, 2), arr(dtype, 2), arr(dtype), tile_m, tile_n, 1e-6]])


def layer_case(name: str, dtype, d: int, block_n: int, block_d: int) -> KernelCase:
    return KernelCase(name, layer_norm_persistent,
                      [[arr(dtype, 2), arr(dtype, 2), arr(dtype), arr(dtype), arr(F32), arr(F32), d, 1e-5,
                        block_n, block_d]])


#: rows and columns of the chunked kernels' differential inputs: two chunks of 32 a row
#: (the second partial), and every CTA of a 2 x 2 grid several rows; at the default 100
#: or 112 they emulated for 15-25 s a test
CHUNKED_EXTENT = 40


def rms_chunked_case(name: str, dtype, tile: int) -> KernelCase:
    return KernelCase(name, rms_norm_persistent_chunked,
                      [[arr(dtype, 2), arr(dtype, 2), arr(dtype), arr(F32), 1e-6, tile]], extent=CHUNKED_EXTENT)


def layer_chunked_case(name: str, dtype, tile: int) -> KernelCase:
    return KernelCase(name, layer_norm_persistent_chunked,
                      [[arr(dtype, 2), arr(dtype, 2), arr(dtype), arr(dtype), arr(F32), arr(F32), 1e-5, tile]],
                      extent=CHUNKED_EXTENT)


CASES = (
    rms_case("rms_norm_persistent_bf16", BF16, 4, 512),
    layer_case("layer_norm_persistent_f16", F16, 100, 4, 512),
    rms_chunked_case("rms_norm_persistent_chunked_bf16", BF16, 32),
    layer_chunked_case("layer_norm_persistent_chunked_f16", F16, 32),
)
