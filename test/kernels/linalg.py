"""Matrix multiply: mma with K loops, matmul, mixed precision, batched, fp8, int8."""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr

ConstInt = ct.Constant[int]


@ct.kernel
def gemm(a, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    pid_m = ct.bid(0)
    pid_n = ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(pid_m, k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, pid_n), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(pid_m, pid_n), tile=ct.astype(acc, c.dtype))


@ct.kernel
def gemm_epilogue(a, b, bias, c):
    pid_m = ct.bid(0)
    pid_n = ct.bid(1)
    ta = ct.load(a, index=(pid_m, 0), shape=(64, 32))
    tb = ct.load(b, index=(0, pid_n), shape=(32, 64))
    r = ct.matmul(ta, tb)
    bv = ct.load(bias, index=(pid_n,), shape=(64,))
    r = ct.astype(r, ct.float32) + ct.reshape(ct.astype(bv, ct.float32), (1, 64))
    r = ct.maximum(r, 0.0)
    ct.store(c, index=(pid_m, pid_n), tile=ct.astype(r, c.dtype))


@ct.kernel
def batched_gemm(a, b, c):
    z = ct.bid(2)
    pid_m = ct.bid(0)
    pid_n = ct.bid(1)
    ta = ct.load(a, index=(z, pid_m, 0), shape=(1, 32, 16))
    tb = ct.load(b, index=(z, 0, pid_n), shape=(1, 16, 32))
    acc = ct.mma(ta, tb, ct.zeros((1, 32, 32), dtype=ct.float32))
    ct.store(c, index=(z, pid_m, pid_n), tile=acc)


@ct.kernel
def int8_gemm(a, b, c):
    pid_m = ct.bid(0)
    ta = ct.load(a, index=(pid_m, 0), shape=(32, 32))
    tb = ct.load(b, index=(0, 0), shape=(32, 32))
    acc = ct.mma(ta, tb, ct.zeros((32, 32), dtype=ct.int32))
    ct.store(c, index=(pid_m, 0), tile=acc)


@ct.kernel
def fp8_gemm(a, b, c):
    pid_m = ct.bid(0)
    ta = ct.load(a, index=(pid_m, 0), shape=(64, 64))
    tb = ct.load(b, index=(0, 0), shape=(64, 64))
    acc = ct.mma(ta, tb, ct.zeros((64, 64), dtype=ct.float32), use_fast_acc=True)
    ct.store(c, index=(pid_m, 0), tile=ct.astype(acc, ct.float16))


@ct.kernel
def tf32_gemm(a, b, c):
    ta = ct.astype(ct.load(a, index=(ct.bid(0), 0), shape=(32, 32)), ct.tfloat32)
    tb = ct.astype(ct.load(b, index=(0, 0), shape=(32, 32)), ct.tfloat32)
    acc = ct.mma(ta, tb, ct.zeros((32, 32), dtype=ct.float32))
    ct.store(c, index=(ct.bid(0), 0), tile=acc)


@ct.kernel
def gemm_bt(a, bt, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """``c = a @ bt.T`` with ``bt`` N x K (K-major, as fp8 weights are kept): B's tiles are
    read through its axes swapped (``order=(1, 0)``: a view with ``dim_map [1, 0]``)."""
    pid_m, pid_n = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(pid_m, k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(bt, index=(k, pid_n), shape=(BK, BN), order=(1, 0), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(pid_m, pid_n), tile=ct.astype(acc, c.dtype))


@ct.kernel
def gemm_at(at, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """``c = at.T @ b`` with ``at`` K x M (a backward pass's X^T): A's tiles are read through
    its axes swapped (``order=(1, 0)``)."""
    pid_m, pid_n = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(b, axis=0, shape=(BK, BN))):
        ta = ct.load(at, index=(pid_m, k), shape=(BM, BK), order=(1, 0), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, pid_n), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(pid_m, pid_n), tile=ct.astype(acc, c.dtype))


@ct.kernel
def flash_attn(q, k, v, o, BM: ConstInt, BN: ConstInt, D: ConstInt):
    """TileGym-style flash attention (``o = softmax(q k^T / sqrt(D)) v`` per batch-head):
    Q's block loaded once, K read transposed (``order=(0, 2, 1)``), the online softmax's
    running max and sum carried through the loop over K/V blocks in base 2."""
    bid_m, bh = ct.bid(0), ct.bid(1)
    tq = ct.reshape(ct.load(q, index=(bh, bid_m, 0), shape=(1, BM, D)), (BM, D))
    m_i = ct.full((BM, 1), -3.0e38, dtype=ct.float32)
    l_i = ct.zeros((BM, 1), dtype=ct.float32)
    acc = ct.zeros((BM, D), dtype=ct.float32)
    for j in range(ct.num_tiles(k, axis=1, shape=(1, BN, D))):
        tk = ct.reshape(ct.load(k, index=(bh, 0, j), shape=(1, D, BN), order=(0, 2, 1),
                                padding_mode=ct.PaddingMode.ZERO), (D, BN))
        s = ct.mma(tq, tk, ct.zeros((BM, BN), dtype=ct.float32)) * 0.18033688
        m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True))
        p = ct.exp2(s - m_new)
        alpha = ct.exp2(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
        tv = ct.reshape(ct.load(v, index=(bh, j, 0), shape=(1, BN, D), padding_mode=ct.PaddingMode.ZERO), (BN, D))
        acc = ct.mma(ct.astype(p, ct.float16), tv, acc * alpha)
        m_i = m_new
    ct.store(o, index=(bh, bid_m, 0), tile=ct.reshape(ct.astype(acc / l_i, o.dtype), (1, BM, D)))


F16, BF16, F32 = ct.float16, ct.bfloat16, ct.float32

CASES = [
    KernelCase("gemm", gemm, [[arr(F16, 2), arr(F16, 2), arr(F16, 2), 64, 64, 32],
                              [arr(BF16, 2), arr(BF16, 2), arr(F32, 2), 32, 32, 16]]),
    KernelCase("gemm_epilogue", gemm_epilogue, [[arr(F16, 2), arr(F16, 2), arr(F16), arr(F16, 2)]]),
    KernelCase("batched_gemm", batched_gemm, [[arr(F16, 3), arr(F16, 3), arr(F32, 3)]]),
    KernelCase("int8_gemm", int8_gemm, [[arr(ct.int8, 2), arr(ct.uint8, 2), arr(ct.int32, 2)]]),
    KernelCase("fp8_gemm", fp8_gemm, [[arr(ct.float8_e4m3fn, 2), arr(ct.float8_e4m3fn, 2), arr(F16, 2)]]),
    KernelCase("tf32_gemm", tf32_gemm, [[arr(F32, 2), arr(F32, 2), arr(F32, 2)]]),
    KernelCase("gemm_at", gemm_at, [[arr(F16, 2), arr(F16, 2), arr(F32, 2), 64, 64, 32]]),
    KernelCase("flash_attn", flash_attn, [[arr(F16, 3), arr(F16, 3), arr(F16, 3), arr(F16, 3), 64, 64, 64]]),
    KernelCase("gemm_bt", gemm_bt, [[arr(F16, 2), arr(F16, 2), arr(F16, 2), 64, 64, 32]]),
    KernelCase("fp8_gemm_bt", gemm_bt, [[arr(ct.float8_e4m3fn, 2), arr(ct.float8_e4m3fn, 2), arr(F16, 2),
                                         64, 64, 64]]),
]
