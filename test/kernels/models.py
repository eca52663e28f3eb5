"""Building blocks of transformer models in the style of public cuTile code (TileGym's ops):
losses, gated activations, rotary embeddings, embedding lookups, a linear layer with its
bias and activation fused, and a causal softmax.  Each is small enough for the differential
tests' synthesized inputs, with the access patterns of the real kernels: 16-bit tensors
widened to f32, rows reduced, indices loaded and gathered, -inf padding, masks from iota."""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr

ConstInt = ct.Constant[int]
BF16, F16, F32 = ct.bfloat16, ct.float16, ct.float32


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


CASES = [
    KernelCase("cross_entropy", cross_entropy, [[arr(BF16, 2), arr(ct.int32), arr(F32), 4, 128]]),
    KernelCase("swiglu", swiglu, [[arr(BF16, 2), arr(BF16, 2), arr(BF16, 2), 16, 64]]),
    KernelCase("rope", rope, [[arr(BF16, 2), arr(F32, 2), arr(F32, 2), arr(BF16, 2), 8, 32]]),
    KernelCase("embedding", embedding, [[arr(ct.int32), arr(F16, 2), arr(F16, 2), 8, 64]]),
    KernelCase("linear_gelu", linear_gelu, [[arr(BF16, 2), arr(BF16, 2), arr(BF16), arr(BF16, 2), 32, 32, 32]]),
    KernelCase("cross_entropy_chunked", cross_entropy_chunked, [[arr(BF16, 2), arr(ct.int32), arr(F32), 4, 32]]),
    KernelCase("causal_softmax", causal_softmax, [[arr(F32, 2), arr(F32, 2), 4, 128]]),
]
