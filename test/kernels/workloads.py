"""Kernels of language-model training and serving beyond ``models.py``'s building blocks, in
the style of public kernels (vLLM, FlashAttention, Mamba, fused MoE): decode attention and
chunked prefill over a paged KV cache, flash attention's dQ backward, a GEMM with int4 weights (two a byte,
scaled per column), a mixture-of-experts top-2 router, Mamba's causal depthwise conv1d
(shifted gathers) and its chunked cumulative decay (a scan over time), a batched GEMM of
3-D tiles reshaped to matrices (cuTile's samples' form), fp8 GEMMs with block scales (DeepSeek's
inference form and TileGym's), a LoRA layer.  Small shapes for
the differential tests; ``test_live_tiles.py`` exports some with realistic ones."""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr

ConstInt = ct.Constant[int]
BF16, F16, F32 = ct.bfloat16, ct.float16, ct.float32
PAD = ct.PaddingMode.ZERO



@ct.kernel
def paged_decode(q, k_cache, v_cache, block_table, o, PAGES: ConstInt, PAGE: ConstInt, D: ConstInt):
    """Decode attention over a paged KV cache (vLLM's layout): a sequence's pages are
    named by its row of the block table, each page's keys and values loaded by that id."""
    b = ct.bid(0)
    qt = ct.load(q, index=(b, 0), shape=(16, D))
    m = ct.full((16, 1), -float("inf"), dtype=ct.float32)
    l = ct.zeros((16, 1), dtype=ct.float32)
    acc = ct.zeros((16, D), dtype=ct.float32)
    pages = ct.load(block_table, index=(b, 0), shape=(1, PAGES))
    for j in range(PAGES):
        page = ct.extract(pages, index=(0, j), shape=(1, 1)).item()
        kt = ct.reshape(ct.load(k_cache, index=(page, 0, 0), shape=(1, PAGE, D), padding_mode=PAD), (PAGE, D))
        vt = ct.reshape(ct.load(v_cache, index=(page, 0, 0), shape=(1, PAGE, D), padding_mode=PAD), (PAGE, D))
        s = ct.mma(qt, ct.transpose(kt), ct.zeros((16, PAGE), dtype=ct.float32))
        s = s * (1.0 / D ** 0.5)
        peak = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        rescale = ct.exp(m - peak)
        p = ct.exp(s - peak)
        acc = ct.mma(ct.astype(p, q.dtype), vt, acc * rescale)
        l = l * rescale + ct.sum(p, axis=1, keepdims=True)
        m = peak
    ct.store(o, index=(b, 0), tile=ct.astype(acc / l, o.dtype))


@ct.kernel
def paged_prefill(q, k_cache, v_cache, block_table, o, BM: ConstInt, PAGES: ConstInt, PAGE: ConstInt,
                  D: ConstInt):
    """Chunked prefill over a paged KV cache: a block of BM query rows of sequence ``s``
    attends to the sequence's pages, named by its row of the block table (flash attention's
    online softmax, exp2 with the scale folded in)."""
    s, i = ct.bid(0), ct.bid(1)
    qt = ct.load(q, index=(s, i, 0), shape=(1, BM, D))
    qt = ct.reshape(qt, (BM, D))
    m = ct.full((BM, 1), -float("inf"), dtype=ct.float32)
    l = ct.zeros((BM, 1), dtype=ct.float32)
    acc = ct.zeros((BM, D), dtype=ct.float32)
    pages = ct.load(block_table, index=(s, 0), shape=(1, PAGES))
    scale = 1.4426950408889634 / D ** 0.5
    for j in range(PAGES):
        page = ct.extract(pages, index=(0, j), shape=(1, 1)).item()
        keys = ct.load(k_cache, index=(page, 0, 0), shape=(1, PAGE, D), padding_mode=PAD)
        t = scale * ct.mma(qt, ct.transpose(ct.reshape(keys, (PAGE, D))), ct.zeros((BM, PAGE), dtype=ct.float32))
        peak = ct.maximum(m, ct.max(t, axis=1, keepdims=True))
        p, rescale = ct.exp2(t - peak), ct.exp2(m - peak)
        l = ct.sum(p, axis=1, keepdims=True) + l * rescale
        m = peak
        values = ct.load(v_cache, index=(page, 0, 0), shape=(1, PAGE, D), padding_mode=PAD)
        acc = ct.mma(ct.astype(p, q.dtype), ct.reshape(values, (PAGE, D)), acc * rescale)
    ct.store(o, index=(s, i, 0), tile=ct.reshape(ct.astype(acc / l, o.dtype), (1, BM, D)))


@ct.kernel
def attention_bwd_dq(q, k, v, do, lse, delta, dq, BM: ConstInt, BN: ConstInt, D: ConstInt):
    """Flash attention backward, the dQ kernel: scores recomputed from the stored
    log-sum-exp, dP from dO and V, dS = P * (dP - delta), dQ accumulated from dS and K
    (three multiplies a trip)."""
    i = ct.bid(0)
    qt = ct.load(q, index=(i, 0), shape=(BM, D), padding_mode=PAD)
    dot = ct.load(do, index=(i, 0), shape=(BM, D), padding_mode=PAD)
    lt = ct.reshape(ct.load(lse, index=(i,), shape=(BM,), padding_mode=PAD), (BM, 1))
    dl = ct.reshape(ct.load(delta, index=(i,), shape=(BM,), padding_mode=PAD), (BM, 1))
    acc = ct.zeros((BM, D), dtype=ct.float32)
    for j in range(ct.num_tiles(k, axis=0, shape=(BN, D))):
        kt = ct.load(k, index=(j, 0), shape=(BN, D), padding_mode=PAD)
        vt = ct.load(v, index=(j, 0), shape=(BN, D), padding_mode=PAD)
        s = ct.mma(qt, ct.transpose(kt), ct.zeros((BM, BN), dtype=ct.float32)) * 0.125
        p = ct.exp(s - lt)
        dp = ct.mma(dot, ct.transpose(vt), ct.zeros((BM, BN), dtype=ct.float32))
        ds = p * (dp - dl)
        acc = ct.mma(ct.astype(ds, q.dtype), kt, acc)
    ct.store(dq, index=(i, 0), tile=ct.astype(acc * 0.125, dq.dtype))


@ct.kernel
def w4a16_gemm(a, wq, scales, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """B as int4 pairs in int8: the low nibbles are rows 0..BK/2 of a K tile, the high ones
    rows BK/2..BK; one scale per output column and K tile."""
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    H = BK // 2
    for k in range(ct.num_tiles(wq, axis=0, shape=(H, BN))):
        a_lo = ct.load(a, index=(i, 2 * k), shape=(BM, H), padding_mode=PAD)
        a_hi = ct.load(a, index=(i, 2 * k + 1), shape=(BM, H), padding_mode=PAD)
        packed = ct.load(wq, index=(k, j), shape=(H, BN), padding_mode=PAD)
        lo = ct.bitwise_rshift(ct.bitwise_lshift(packed, 4), 4)
        hi = ct.bitwise_rshift(packed, 4)
        s = ct.load(scales, index=(k, j), shape=(1, BN), padding_mode=PAD)
        w_lo = ct.astype(ct.astype(lo, ct.float32) * s, a.dtype)
        w_hi = ct.astype(ct.astype(hi, ct.float32) * s, a.dtype)
        acc = ct.mma(a_lo, w_lo, acc)
        acc = ct.mma(a_hi, w_hi, acc)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


@ct.kernel
def top2_router(logits, weights, experts, BT: ConstInt, E: ConstInt):
    """A mixture-of-experts router: each token's softmax over the experts, its two
    likeliest experts (argmax, then argmax with the first masked) and their renormalized
    weights."""
    i = ct.bid(0)
    x = ct.astype(ct.load(logits, index=(i, 0), shape=(BT, E), padding_mode=ct.PaddingMode.NEG_INF), ct.float32)
    m = ct.max(x, axis=1, keepdims=True)
    e = ct.exp(x - m)
    p = e / ct.sum(e, axis=1, keepdims=True)
    first = ct.argmax(p, axis=1, keepdims=True)
    cols = ct.reshape(ct.arange(E, dtype=ct.int32), (1, E))
    p1 = ct.max(p, axis=1, keepdims=True)
    rest = ct.where(cols == ct.astype(first, ct.int32), -1.0, p)
    second = ct.argmax(rest, axis=1, keepdims=True)
    p2 = ct.max(rest, axis=1, keepdims=True)
    norm = p1 + p2
    ct.store(weights, index=(i, 0), tile=ct.cat((p1 / norm, p2 / norm), axis=1))
    ct.store(experts, index=(i, 0), tile=ct.cat((ct.astype(first, ct.int32), ct.astype(second, ct.int32)), axis=1))


@ct.kernel
def causal_conv1d(x, w, out, BT: ConstInt, C: ConstInt):
    """Depthwise causal convolution of width 4 along time (Mamba's): out[t, c] =
    sum_i w[i, c] * x[t - i, c], times before the start reading 0."""
    i = ct.bid(0)
    t = ct.reshape(i * BT + ct.arange(BT, dtype=ct.int32), (BT, 1))
    c = ct.reshape(ct.arange(C, dtype=ct.int32), (1, C))
    acc = ct.zeros((BT, C), dtype=ct.float32)
    for s in range(4):
        xs = ct.gather(x, (t - s, c), padding_value=0)
        ws = ct.load(w, index=(s, 0), shape=(1, C))
        acc = acc + ct.astype(xs, ct.float32) * ct.astype(ws, ct.float32)
    ct.store(out, index=(i, 0), tile=ct.astype(acc, out.dtype))


@ct.kernel
def chunk_cumsum(dt, a, out, BT: ConstInt, H: ConstInt):
    """Mamba-2's chunked state decay: the running sum over time of dt * A per head, and its
    exponential."""
    i = ct.bid(0)
    x = ct.astype(ct.load(dt, index=(i, 0), shape=(BT, H)), ct.float32) \
        * ct.reshape(ct.astype(ct.load(a, index=(0,), shape=(H,)), ct.float32), (1, H))
    ct.store(out, index=(i, 0), tile=ct.exp(ct.cumsum(x, axis=0)))


@ct.kernel
def batched_matmul(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    """A batched GEMM as cuTile's samples write it: 3-D tiles of one batch item, reshaped
    to matrices for the multiply and back for the store."""
    z, i, j = ct.bid(0), ct.bid(1), ct.bid(2)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[2], TK)):
        at = ct.reshape(ct.load(a, index=(z, i, k), shape=(1, TM, TK), padding_mode=PAD), (TM, TK))
        bt = ct.reshape(ct.load(b, index=(z, k, j), shape=(1, TK, TN), padding_mode=PAD), (TK, TN))
        acc = ct.mma(at, bt, acc)
    ct.store(c, index=(z, i, j), tile=ct.reshape(ct.astype(acc, c.dtype), (1, TM, TN)))


@ct.kernel
def fp8_block_scaled_gemm(a, b, sa, sb, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """An fp8 GEMM with block scales as DeepSeek-V3's inference kernels take them: one
    scale per row of A and K block, one per K block and N block of B; each K block's
    product is scaled before it is added."""
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        at = ct.load(a, index=(i, k), shape=(BM, BK), padding_mode=PAD)
        bt = ct.load(b, index=(k, j), shape=(BK, BN), padding_mode=PAD)
        row_scale = ct.load(sa, index=(i, k), shape=(BM, 1), padding_mode=PAD)
        block_scale = ct.load(sb, index=(k, j), shape=(1, 1), padding_mode=PAD)
        part = ct.mma(at, bt, ct.zeros((BM, BN), dtype=ct.float32))
        acc = acc + part * (row_scale * block_scale)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


@ct.kernel
def w8a8_block_fp8(a, b, a_scales, b_scales, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """An fp8 GEMM with block scales as TileGym's serving kernels write it: B stored N x K
    (a linear layer's weight), each tile transposed for the multiply; the scales gathered,
    A's by row index (cuTile states the indices' bounds with ``assume`` in the loop) and
    B's one for the tile; each K tile's product from zeros, scaled, then added."""
    i, j = ct.bid(0), ct.bid(1)
    ct.store(c, index=(i, j), tile=ct.astype(w8a8_tile(a, b, a_scales, b_scales, i, j, BM, BN, BK), c.dtype))


def w8a8_tile(a, b, a_scales, b_scales, i, j, BM, BN, BK):
    """Output tile (i, j) of ``w8a8_block_fp8`` in f32 (cuTile inlines the call)."""
    rows = i * BM + ct.arange(BM, dtype=ct.int32)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        at = ct.load(a, index=(i, k), shape=(BM, BK), padding_mode=PAD)
        bt = ct.load(b, index=(j, k), shape=(BN, BK), padding_mode=PAD)
        row_scale = ct.gather(a_scales, (rows, k), padding_value=0.0)
        block_scale = ct.gather(b_scales, (j, k), padding_value=0.0)
        part = ct.mma(at, ct.permute(bt, (1, 0)), ct.zeros((BM, BN), dtype=ct.float32))
        acc = acc + part * (row_scale[:, None] * block_scale)
    return acc


@ct.kernel
def lora_linear(x, w, lora_a, lora_b, out, BM: ConstInt, BN: ConstInt, BK: ConstInt, R: ConstInt):
    """A linear layer with a LoRA adapter: x @ W plus (x @ A) @ B, the rank-R product
    accumulated in the same K loop and multiplied by B after it."""
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    low = ct.zeros((BM, R), dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=1, shape=(BM, BK))):
        xt = ct.load(x, index=(i, k), shape=(BM, BK), padding_mode=PAD)
        acc = ct.mma(xt, ct.load(w, index=(k, j), shape=(BK, BN), padding_mode=PAD), acc)
        low = ct.mma(xt, ct.load(lora_a, index=(k, 0), shape=(BK, R), padding_mode=PAD), low)
    up = ct.load(lora_b, index=(0, j), shape=(R, BN), padding_mode=PAD)
    acc = ct.mma(ct.astype(low, x.dtype), up, acc)
    ct.store(out, index=(i, j), tile=ct.astype(acc, out.dtype))


CASES = [
    KernelCase("paged_decode", paged_decode, [[arr(BF16, 2), arr(BF16, 3), arr(BF16, 3), arr(ct.int32, 2),
                                               arr(BF16, 2), 4, 16, 64]], indexes=(3,)),
    KernelCase("paged_prefill", paged_prefill, [[arr(F16, 3), arr(F16, 3), arr(F16, 3), arr(ct.int32, 2),
                                                 arr(F16, 3), 64, 4, 32, 64]], indexes=(3,)),
    KernelCase("attention_bwd_dq", attention_bwd_dq, [[arr(BF16, 2), arr(BF16, 2), arr(BF16, 2), arr(BF16, 2),
                                                       arr(F32), arr(F32), arr(BF16, 2), 32, 32, 64]]),
    KernelCase("w4a16_gemm", w4a16_gemm, [[arr(BF16, 2), arr(ct.int8, 2), arr(F32, 2), arr(BF16, 2), 32, 32, 32]]),
    KernelCase("top2_router", top2_router, [[arr(BF16, 2), arr(F32, 2), arr(ct.int32, 2), 8, 16]]),
    KernelCase("causal_conv1d", causal_conv1d, [[arr(BF16, 2), arr(BF16, 2), arr(BF16, 2), 16, 64]]),
    KernelCase("chunk_cumsum", chunk_cumsum, [[arr(BF16, 2), arr(F32), arr(F32, 2), 32, 16]]),
    KernelCase("fp8_block_scaled_gemm", fp8_block_scaled_gemm,
               [[arr(ct.float8_e4m3fn, 2), arr(ct.float8_e4m3fn, 2), arr(F32, 2), arr(F32, 2), arr(BF16, 2),
                 32, 32, 32]]),
    KernelCase("w8a8_block_fp8", w8a8_block_fp8,
               [[arr(ct.float8_e4m3fn, 2), arr(ct.float8_e4m3fn, 2), arr(F32, 2), arr(F32, 2), arr(BF16, 2),
                 32, 32, 32]]),
    KernelCase("lora_linear", lora_linear, [[arr(BF16, 2), arr(BF16, 2), arr(BF16, 2), arr(BF16, 2), arr(BF16, 2),
                                             32, 32, 32, 16]]),
    KernelCase("batched_matmul", batched_matmul, [[arr(F16, 3), arr(F16, 3), arr(F16, 3), 32, 32, 32]]),
]
