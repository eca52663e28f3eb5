"""Building blocks of transformer models in the style of public cuTile code (TileGym's ops):
losses, gated activations, rotary embeddings, embedding lookups, a linear layer with its
bias and activation fused, and a causal softmax; for training, the backward passes of
softmax and layer norm; for serving, a fused residual add and RMS norm, per-row fp8
quantization, greedy sampling, grouped-query decode attention and a mixture-of-experts
GEMM over token-sorted rows.  Each is small enough for the differential tests' synthesized
inputs, with the access patterns of the real kernels: 16-bit tensors widened to f32, rows
reduced, indices loaded and gathered, -inf padding, masks from iota.
``test_live_tiles.py`` exports some with realistic shapes."""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr

ConstInt = ct.Constant[int]
BF16, F16, F32 = ct.bfloat16, ct.float16, ct.float32
PAD = ct.PaddingMode.ZERO


@ct.kernel
def cross_entropy(logits, labels, loss, BR: ConstInt, V: ConstInt):
    """Per row: logsumexp of the logits minus the label's logit (gathered; an index out of
    the vocabulary reads 0).  Rows past the end are padded with -inf and never stored."""
    i = ct.bid(0)
    x = ct.astype(ct.load(logits, index=(i, 0), shape=(BR, V), padding_mode=ct.PaddingMode.NEG_INF),
                  ct.float32)
    m = ct.max(x, axis=1, keepdims=True)
    lse = ct.log(ct.sum(ct.exp(x - m), axis=1, keepdims=True)) + m
    lab = ct.load(labels, index=(i,), shape=(BR,))
    rows = i * BR + ct.arange(BR, dtype=ct.int32)
    picked = ct.astype(ct.gather(logits, (rows, lab), padding_value=0), ct.float32)
    ct.store(loss, index=(i,), tile=ct.reshape(lse, (BR,)) - picked)


@ct.kernel
def swiglu(gate, up, out, BM: ConstInt, BN: ConstInt):
    """silu(gate) * up on 2-D tiles of 16-bit activations, in f32."""
    i, j = ct.bid(0), ct.bid(1)
    g = ct.astype(ct.load(gate, index=(i, j), shape=(BM, BN)), ct.float32)
    u = ct.astype(ct.load(up, index=(i, j), shape=(BM, BN)), ct.float32)
    ct.store(out, index=(i, j), tile=ct.astype(g / (1.0 + ct.exp(-g)) * u, out.dtype))


@ct.kernel
def rope(x, cos, sin, out, BS: ConstInt, HALF: ConstInt):
    """Rotary embedding of a head's two halves (not in place): the second half of each row
    is the tile at column index 1."""
    i = ct.bid(0)
    x1 = ct.astype(ct.load(x, index=(i, 0), shape=(BS, HALF)), ct.float32)
    x2 = ct.astype(ct.load(x, index=(i, 1), shape=(BS, HALF)), ct.float32)
    c = ct.load(cos, index=(i, 0), shape=(BS, HALF))
    s = ct.load(sin, index=(i, 0), shape=(BS, HALF))
    ct.store(out, index=(i, 0), tile=ct.astype(x1 * c - x2 * s, out.dtype))
    ct.store(out, index=(i, 1), tile=ct.astype(x2 * c + x1 * s, out.dtype))


@ct.kernel
def embedding(ids, table, out, BT: ConstInt, D: ConstInt):
    """Rows of an embedding table gathered by token id (ids out of the table read 0)."""
    i = ct.bid(0)
    r = ct.load(ids, index=(i,), shape=(BT,))
    cols = ct.arange(D, dtype=ct.int32)
    t = ct.gather(table, (ct.reshape(r, (BT, 1)), ct.reshape(cols, (1, D))), padding_value=0)
    ct.store(out, index=(i, 0), tile=t)


@ct.kernel
def linear_gelu(a, w, bias, out, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """out = gelu(a @ w + bias), the tanh form, with a K loop over zero-padded tiles."""
    pid_m, pid_n = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(pid_m, k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(w, index=(k, pid_n), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    b = ct.astype(ct.load(bias, index=(pid_n,), shape=(BN,)), ct.float32)
    y = acc + ct.reshape(b, (1, BN))
    g = 0.5 * y * (1.0 + ct.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))
    ct.store(out, index=(pid_m, pid_n), tile=ct.astype(g, out.dtype))


@ct.kernel
def causal_softmax(x, out, BR: ConstInt, N: ConstInt):
    """Softmax of each row over the columns up to its own index (the others -inf)."""
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(BR, N))
    rows = ct.reshape(i * BR + ct.arange(BR, dtype=ct.int32), (BR, 1))
    cols = ct.reshape(ct.arange(N, dtype=ct.int32), (1, N))
    t = ct.where(cols <= rows, t, -float("inf"))
    m = ct.max(t, axis=1, keepdims=True)
    e = ct.exp(t - m)
    ct.store(out, index=(i, 0), tile=e / ct.sum(e, axis=1, keepdims=True))


@ct.kernel
def cross_entropy_chunked(logits, labels, loss, BR: ConstInt, V_CHUNK: ConstInt):
    """BR rows a CTA, the vocabulary in chunks: a running max and a rescaled running sum per
    row (online logsumexp) carried through a loop whose trip count is the row's chunk count,
    as losses over 32K-128K vocabularies are written (``bench/gpu_kernels.cross_entropy``
    takes a row a CTA)."""
    i = ct.bid(0)
    run_max = ct.full((BR, 1), -float("inf"), dtype=ct.float32)
    run_sum = ct.zeros((BR, 1), dtype=ct.float32)
    for k in range(ct.num_tiles(logits, axis=1, shape=(BR, V_CHUNK))):
        x = ct.load(logits, index=(i, k), shape=(BR, V_CHUNK), padding_mode=ct.PaddingMode.NEG_INF)
        x = ct.astype(x, ct.float32)
        peak = ct.maximum(run_max, ct.max(x, axis=1, keepdims=True))
        run_sum = run_sum * ct.exp(run_max - peak) + ct.sum(ct.exp(x - peak), axis=1, keepdims=True)
        run_max = peak
    rows = i * BR + ct.arange(BR, dtype=ct.int32)
    picked = ct.gather(logits, (rows, ct.load(labels, index=(i,), shape=(BR,))), padding_value=0)
    lse = ct.reshape(ct.log(run_sum) + run_max, (BR,))
    ct.store(loss, index=(i,), tile=lse - ct.astype(picked, ct.float32))




@ct.kernel
def add_rms_norm(x, res, w, out, res_out, BR: ConstInt, N: ConstInt):
    """A residual add fused with the next RMS norm: the sum is stored (the next residual)
    and normalized by its rows' mean square, then scaled by the weight row."""
    i = ct.bid(0)
    h = ct.astype(ct.load(x, index=(i, 0), shape=(BR, N)), ct.float32) \
        + ct.astype(ct.load(res, index=(i, 0), shape=(BR, N)), ct.float32)
    ct.store(res_out, index=(i, 0), tile=ct.astype(h, res_out.dtype))
    ms = ct.sum(h * h, axis=1, keepdims=True) / N
    wt = ct.reshape(ct.astype(ct.load(w, index=(0,), shape=(N,)), ct.float32), (1, N))
    ct.store(out, index=(i, 0), tile=ct.astype(h * ct.rsqrt(ms + 1e-6) * wt, out.dtype))


@ct.kernel
def quant_fp8_rows(x, q, scales, BR: ConstInt, N: ConstInt):
    """Per-row (per-token) fp8 quantization: each row scaled by its largest magnitude to
    e4m3's range, the scales stored beside."""
    i = ct.bid(0)
    t = ct.astype(ct.load(x, index=(i, 0), shape=(BR, N)), ct.float32)
    amax = ct.max(ct.abs(t), axis=1, keepdims=True)
    s = ct.maximum(amax, 1e-12) / 448.0
    ct.store(q, index=(i, 0), tile=ct.astype(t / s, ct.float8_e4m3fn))
    ct.store(scales, index=(i,), tile=ct.reshape(s, (BR,)))


@ct.kernel
def greedy_sample(logits, out, V_CHUNK: ConstInt):
    """Greedy decoding: each row's argmax over the vocabulary in chunks (the first of equal
    maxima, chunk by chunk)."""
    i = ct.bid(0)
    best = ct.full((1,), -float("inf"), dtype=ct.float32)
    best_idx = ct.zeros((1,), dtype=ct.int32)
    for k in range(ct.num_tiles(logits, axis=1, shape=(1, V_CHUNK))):
        x = ct.astype(ct.load(logits, index=(i, k), shape=(1, V_CHUNK), padding_mode=ct.PaddingMode.NEG_INF),
                      ct.float32)
        m = ct.max(x, axis=1)
        a = ct.astype(ct.argmax(x, axis=1), ct.int32) + k * V_CHUNK
        take = m > best
        best_idx = ct.where(take, a, best_idx)
        best = ct.where(take, m, best)
    ct.store(out, index=(i,), tile=best_idx)


@ct.kernel
def softmax_bwd(y, dy, dx, BR: ConstInt, N: ConstInt):
    """Softmax backward: dx = y * (dy - sum(y * dy)) per row."""
    i = ct.bid(0)
    yt = ct.astype(ct.load(y, index=(i, 0), shape=(BR, N)), ct.float32)
    g = ct.astype(ct.load(dy, index=(i, 0), shape=(BR, N)), ct.float32)
    s = ct.sum(yt * g, axis=1, keepdims=True)
    ct.store(dx, index=(i, 0), tile=ct.astype(yt * (g - s), dx.dtype))


@ct.kernel
def layer_norm_bwd(x, dy, w, mean, rstd, dx, dw_part, db_part, BR: ConstInt, N: ConstInt):
    """Layer norm backward from the stored statistics: dx per row, and each CTA's column
    sums of dy * x-hat and dy (the weight and bias gradients, summed later over CTAs)."""
    i = ct.bid(0)
    xt = ct.astype(ct.load(x, index=(i, 0), shape=(BR, N), padding_mode=PAD), ct.float32)
    g = ct.astype(ct.load(dy, index=(i, 0), shape=(BR, N), padding_mode=PAD), ct.float32)
    mu = ct.reshape(ct.load(mean, index=(i,), shape=(BR,), padding_mode=PAD), (BR, 1))
    r = ct.reshape(ct.load(rstd, index=(i,), shape=(BR,), padding_mode=PAD), (BR, 1))
    wt = ct.reshape(ct.astype(ct.load(w, index=(0,), shape=(N,)), ct.float32), (1, N))
    xhat = (xt - mu) * r
    wdy = wt * g
    c1 = ct.sum(xhat * wdy, axis=1, keepdims=True) / N
    c2 = ct.sum(wdy, axis=1, keepdims=True) / N
    ct.store(dx, index=(i, 0), tile=ct.astype((wdy - (xhat * c1 + c2)) * r, dx.dtype))
    ct.store(dw_part, index=(i, 0), tile=ct.sum(g * xhat, axis=0, keepdims=True))
    ct.store(db_part, index=(i, 0), tile=ct.sum(g, axis=0, keepdims=True))


@ct.kernel
def gqa_decode(q, k, v, o, G: ConstInt, D: ConstInt, BN: ConstInt):
    """Decode attention with grouped queries: the G query heads that share a KV head
    attend, one token each, over the whole sequence in chunks (an online softmax in base 2,
    as decode kernels write it; keys past the sequence masked)."""
    h = ct.bid(0)
    S = k.shape[1]
    qt = ct.reshape(ct.load(q, index=(h, 0, 0), shape=(1, G, D)), (G, D))
    m = ct.full((G, 1), -float("inf"), dtype=ct.float32)
    l = ct.zeros((G, 1), dtype=ct.float32)
    acc = ct.zeros((G, D), dtype=ct.float32)
    for j in range(ct.num_tiles(k, axis=1, shape=(1, BN, D))):
        kt = ct.reshape(ct.load(k, index=(h, j, 0), shape=(1, BN, D), padding_mode=PAD), (BN, D))
        vt = ct.reshape(ct.load(v, index=(h, j, 0), shape=(1, BN, D), padding_mode=PAD), (BN, D))
        s = ct.mma(qt, ct.transpose(kt), ct.zeros((G, BN), dtype=ct.float32)) * (0.125 * 1.4426950408889634)
        cols = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
        s = ct.where(cols < S, s, -float("inf"))
        peak = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        alpha = ct.exp2(m - peak)          # base 2, the scale folded into the scores
        acc = acc * alpha
        p = ct.exp2(s - peak)
        l = l * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(ct.astype(p, q.dtype), vt, acc)
        m = peak
    ct.store(o, index=(h, 0, 0), tile=ct.reshape(ct.astype(acc / l, o.dtype), (1, G, D)))


@ct.kernel
def moe_gemm(x, sorted_ids, expert_of_block, w, out, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """A mixture-of-experts layer's GEMM: each block of BM token-sorted rows is gathered
    from the activations and multiplied by its expert's weights (a 3-D tensor indexed by
    the block's expert id), as fused MoE kernels walk tokens routed to experts."""
    i, j = ct.bid(0), ct.bid(1)
    e = ct.load(expert_of_block, index=(i,), shape=(1,))
    rows = ct.load(sorted_ids, index=(i,), shape=(BM,))
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=1, shape=(BM, BK))):
        cols = k * BK + ct.arange(BK, dtype=ct.int32)
        a = ct.gather(x, (ct.reshape(rows, (BM, 1)), ct.reshape(cols, (1, BK))), padding_value=0)
        b = ct.reshape(ct.load(w, index=(e.item(), k, j), shape=(1, BK, BN), padding_mode=PAD), (BK, BN))
        acc = ct.mma(a, b, acc)
    ct.store(out, index=(i, j), tile=ct.astype(acc, out.dtype))


CASES = [
    KernelCase("cross_entropy", cross_entropy, [[arr(BF16, 2), arr(ct.int32), arr(F32), 4, 128]]),
    KernelCase("swiglu", swiglu, [[arr(BF16, 2), arr(BF16, 2), arr(BF16, 2), 16, 64]]),
    KernelCase("rope", rope, [[arr(BF16, 2), arr(F32, 2), arr(F32, 2), arr(BF16, 2), 8, 32]]),
    KernelCase("embedding", embedding, [[arr(ct.int32), arr(F16, 2), arr(F16, 2), 8, 64]]),
    KernelCase("linear_gelu", linear_gelu, [[arr(BF16, 2), arr(BF16, 2), arr(BF16), arr(BF16, 2), 32, 32, 32]]),
    KernelCase("cross_entropy_chunked", cross_entropy_chunked, [[arr(BF16, 2), arr(ct.int32), arr(F32), 4, 32]]),
    KernelCase("causal_softmax", causal_softmax, [[arr(F32, 2), arr(F32, 2), 4, 128]]),
    KernelCase("add_rms_norm", add_rms_norm, [[arr(BF16, 2), arr(BF16, 2), arr(BF16), arr(BF16, 2), arr(BF16, 2),
                                               4, 128]]),
    KernelCase("quant_fp8_rows", quant_fp8_rows, [[arr(BF16, 2), arr(ct.float8_e4m3fn, 2), arr(F32), 4, 128]]),
    KernelCase("greedy_sample", greedy_sample, [[arr(BF16, 2), arr(ct.int32), 64]]),
    KernelCase("softmax_bwd", softmax_bwd, [[arr(F16, 2), arr(F16, 2), arr(F16, 2), 4, 128]]),
    KernelCase("layer_norm_bwd", layer_norm_bwd, [[arr(BF16, 2), arr(BF16, 2), arr(BF16), arr(F32), arr(F32),
                                                   arr(BF16, 2), arr(F32, 2), arr(F32, 2), 8, 64]]),
    KernelCase("gqa_decode", gqa_decode, [[arr(BF16, 3), arr(BF16, 3), arr(BF16, 3), arr(BF16, 3), 16, 64, 32]]),
    KernelCase("moe_gemm", moe_gemm, [[arr(BF16, 2), arr(ct.int32), arr(ct.int32), arr(BF16, 3), arr(BF16, 2),
                                       32, 32, 32]]),
]
