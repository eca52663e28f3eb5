"""The kernels ``bench/gpu.py`` measures, written with cuTile (imported by the plan step only:
the GPU machine has no cuTile).

Tile shapes follow what cuTile's own examples use (GEMM 128x128x32, attention 64x64), and
every array is exported with the constraints cuTile infers for an ordinary framework tensor
(16-byte aligned base, shapes and leading strides divisible by 16, unit last stride), so
both compilers see the aligned bytecode a real cuTile program produces.
"""
from __future__ import annotations

import math

import cuda.tile as ct
from cuda.tile.compilation import ArrayConstraint, ListConstraint, ScalarConstraint

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]
ConstFloat = ct.Constant[float]
NEG_INF = -math.inf


def multiply_tiles(a, b, pid_m, pid_n, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """Tile (pid_m, pid_n) of ``a @ b``, in f32: the K loop."""
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(pid_m, k), shape=(BM, BK))
        tb = ct.load(b, index=(k, pid_n), shape=(BK, BN))
        acc = ct.mma(ta, tb, acc)
    return acc


@ct.kernel
def gemm(a, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    pid_m, pid_n = ct.bid(0), ct.bid(1)
    ct.store(c, index=(pid_m, pid_n), tile=ct.astype(multiply_tiles(a, b, pid_m, pid_n, BM, BN, BK), c.dtype))


@ct.kernel(num_ctas=2)
def gemm_cluster(a, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """``gemm`` launched as clusters of two CTAs (TileGym's matmul on Blackwell): the
    compiler divides each tile block between them and multicasts the shared operand."""
    pid_m, pid_n = ct.bid(0), ct.bid(1)
    ct.store(c, index=(pid_m, pid_n), tile=ct.astype(multiply_tiles(a, b, pid_m, pid_n, BM, BN, BK), c.dtype))


@ct.kernel
def lora_linear(x, w, la, lb, out, BM: ConstInt, BN: ConstInt, BK: ConstInt, R: ConstInt):
    """A linear layer with a LoRA adapter of rank ``R``: ``x @ w + (x @ la) @ lb``, the
    rank-R product accumulated in the same K loop (both multiplies of one x tile)."""
    pid_m, pid_n = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    low = ct.zeros((BM, R), dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=1, shape=(BM, BK))):
        tx = ct.load(x, index=(pid_m, k), shape=(BM, BK))
        acc = ct.mma(tx, ct.load(w, index=(k, pid_n), shape=(BK, BN)), acc)
        low = ct.mma(tx, ct.load(la, index=(k, 0), shape=(BK, R)), low)
    acc = ct.mma(ct.astype(low, x.dtype), ct.load(lb, index=(0, pid_n), shape=(R, BN)), acc)
    ct.store(out, index=(pid_m, pid_n), tile=ct.astype(acc, out.dtype))


@ct.kernel
def fp8_block_scaled_gemm(a, b, sa, sb, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """DeepSeek-V3's fp8 GEMM with block scales: one f32 scale per row of A and K block, one
    per K block and N block of B; each K block's product scaled before it is added."""
    pid_m, pid_n = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        part = ct.mma(ct.load(a, index=(pid_m, k), shape=(BM, BK)), ct.load(b, index=(k, pid_n), shape=(BK, BN)),
                      ct.zeros((BM, BN), dtype=ct.float32))
        scale = ct.load(sa, index=(pid_m, k), shape=(BM, 1)) * ct.load(sb, index=(k, pid_n), shape=(1, 1))
        acc = acc + part * scale
    ct.store(c, index=(pid_m, pid_n), tile=ct.astype(acc, c.dtype))


@ct.kernel
def w8a8_gemm(a, b, sa, sb, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """TileGym's W8A8 fp8 GEMM with block scales: B N x K (a linear layer's weight), each
    tile transposed for the multiply; A's scales gathered by row, B's one per N and K block."""
    pid_m, pid_n = ct.bid(0), ct.bid(1)
    rows = pid_m * BM + ct.arange(BM, dtype=ct.int32)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        tb = ct.permute(ct.load(b, index=(pid_n, k), shape=(BN, BK)), (1, 0))
        part = ct.mma(ct.load(a, index=(pid_m, k), shape=(BM, BK)), tb, ct.zeros((BM, BN), dtype=ct.float32))
        scale = ct.gather(sa, (rows, k), padding_value=0.0)[:, None] * ct.gather(sb, (pid_n, k), padding_value=0.0)
        acc = acc + part * scale
    ct.store(c, index=(pid_m, pid_n), tile=ct.astype(acc, c.dtype))


@ct.kernel
def gemm_fp8(a, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """``c = a @ b.T`` for fp8 ``a`` (M x K) and ``b`` (N x K: K-major, as fp8 weights are
    kept and as ``wgmma`` reads 8-bit B), B's tiles read through its axes swapped."""
    pid_m, pid_n = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(pid_m, k), shape=(BM, BK))
        tb = ct.load(b, index=(k, pid_n), shape=(BK, BN), order=(1, 0))
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(pid_m, pid_n), tile=ct.astype(acc, c.dtype))


@ct.kernel
def grouped_gemm(As, Bs, Cs, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """A mixture-of-experts style grouped GEMM: ``Cs[g] = As[g] @ Bs[g]`` for group
    ``g = bid(2)``, its views made at run time from its row of each list's table."""
    g = ct.bid(2)
    a, b, c = As[g], Bs[g], Cs[g]
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(ct.bid(0), k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, ct.bid(1)), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=ct.astype(acc, c.dtype))


@ct.kernel
def persistent_grouped_gemm(As, Bs, Cs, BM: ConstInt, BN: ConstInt, BK: ConstInt, G: ConstInt):
    """TileGym's persistent grouped GEMM (an MoE's experts): the CTAs (one an SM) take the
    tiles of the G groups in turn, group after group, each group's views made once, before
    its loop over tiles (NVIDIA's tool builds their tensor maps there, on the device)."""
    t = ct.bid(0)
    start = 0
    for g in ct.static_iter(range(G)):
        a, b, c = As[g], Bs[g], Cs[g]
        tiles_n = ct.num_tiles(c, axis=1, shape=(BM, BN))
        count = ct.num_tiles(c, axis=0, shape=(BM, BN)) * tiles_n
        while t >= start and t < start + count:
            pid_m, pid_n = (t - start) // tiles_n, (t - start) % tiles_n
            acc = multiply_tiles(a, b, pid_m, pid_n, BM, BN, BK)
            ct.store(c, index=(pid_m, pid_n), tile=ct.astype(acc, c.dtype))
            t += ct.num_blocks(0)
        start = start + count


@ct.kernel
def persistent_gemm(a, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """TileGym's persistent GEMM: each CTA takes c's tiles in turn (the grid: the SMs)."""
    tiles_m, tiles_n = ct.num_tiles(c, axis=0, shape=(BM, BN)), ct.num_tiles(c, axis=1, shape=(BM, BN))
    for tile in range(ct.bid(0), tiles_m * tiles_n, ct.num_blocks(0)):
        pid_m, pid_n = tile // tiles_n, tile % tiles_n
        acc = multiply_tiles(a, b, pid_m, pid_n, BM, BN, BK)
        ct.store(c, index=(pid_m, pid_n), tile=ct.astype(acc, c.dtype))


@ct.kernel
def flash_attention(q, k, v, o, qk_scale: float, D: ConstInt, BM: ConstInt, BN: ConstInt, CAUSAL: ConstBool):
    m_blk, bh = ct.bid(0), ct.bid(1)
    tq = ct.reshape(ct.load(q, index=(bh, m_blk, 0), shape=(1, BM, D)), (BM, D))
    m_i = ct.full((BM, 1), NEG_INF, dtype=ct.float32)
    l_i = ct.zeros((BM, 1), dtype=ct.float32)
    acc = ct.zeros((BM, D), dtype=ct.float32)
    rows = ct.reshape(m_blk * BM + ct.arange(BM, dtype=ct.int32), (BM, 1))
    n_tiles = ct.num_tiles(k, axis=1, shape=(1, BN, D))
    if CAUSAL:
        n_tiles = ct.cdiv((m_blk + 1) * BM, BN)
    for j in range(n_tiles):
        tk = ct.reshape(ct.load(k, index=(bh, j, 0), shape=(1, BN, D)), (BN, D))
        tv = ct.reshape(ct.load(v, index=(bh, j, 0), shape=(1, BN, D)), (BN, D))
        s = ct.mma(tq, ct.transpose(tk), ct.zeros((BM, BN), dtype=ct.float32)) * qk_scale
        if CAUSAL:
            cols = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
            s = ct.where(rows >= cols, s, NEG_INF)
        m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True))
        p = ct.exp(s - m_new)
        alpha = ct.exp(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(ct.astype(p, q.dtype), tv, acc * alpha)
        m_i = m_new
    ct.store(o, index=(bh, m_blk, 0), tile=ct.reshape(ct.astype(acc / l_i, o.dtype), (1, BM, D)))


@ct.kernel
def softmax(x, out, N: ConstInt):
    i = ct.bid(0)
    t = ct.astype(ct.load(x, index=(i, 0), shape=(1, N)), ct.float32)
    e = ct.exp(t - ct.max(t, axis=1, keepdims=True))
    ct.store(out, index=(i, 0), tile=ct.astype(e / ct.sum(e, axis=1, keepdims=True), out.dtype))


@ct.kernel
def layernorm(x, w, b, out, N: ConstInt, eps: ConstFloat):
    i = ct.bid(0)
    t = ct.astype(ct.load(x, index=(i, 0), shape=(1, N)), ct.float32)
    d = t - ct.sum(t, axis=1, keepdims=True) / N
    rstd = ct.rsqrt(ct.sum(d * d, axis=1, keepdims=True) / N + eps)
    g = ct.reshape(ct.astype(ct.load(w, index=(0,), shape=(N,)), ct.float32), (1, N))
    h = ct.reshape(ct.astype(ct.load(b, index=(0,), shape=(N,)), ct.float32), (1, N))
    ct.store(out, index=(i, 0), tile=ct.astype(d * rstd * g + h, out.dtype))


@ct.kernel
def rmsnorm(x, w, out, N: ConstInt, eps: ConstFloat):
    i = ct.bid(0)
    t = ct.astype(ct.load(x, index=(i, 0), shape=(1, N)), ct.float32)
    rstd = ct.rsqrt(ct.sum(t * t, axis=1, keepdims=True) / N + eps)
    g = ct.reshape(ct.astype(ct.load(w, index=(0,), shape=(N,)), ct.float32), (1, N))
    ct.store(out, index=(i, 0), tile=ct.astype(t * rstd * g, out.dtype))


@ct.kernel
def rmsnorm_persistent(x, w, out, TILE_M: ConstInt, N: ConstInt, eps: ConstFloat):
    """TileGym's static persistent RMS norm (``rms_norm_kernel_static_persistent``): the
    CTAs (one an SM) take blocks of TILE_M whole rows in turn, the weight row loaded once."""
    upper = (x.shape[0] + TILE_M - 1) // TILE_M
    g = ct.astype(ct.load(w, index=(0,), shape=(N,), padding_mode=ct.PaddingMode.ZERO), ct.float32)
    for m in range(ct.bid(0), upper, ct.num_blocks(0)):
        t = ct.astype(ct.load(x, index=(m, 0), shape=(TILE_M, N), padding_mode=ct.PaddingMode.ZERO, latency=10),
                      ct.float32)
        rstd = ct.rsqrt(ct.sum(t * t, axis=1, keepdims=True) / N + eps)
        ct.store(out, index=(m, 0), tile=ct.astype(t * rstd * ct.reshape(g, (1, N)), out.dtype), allow_tma=False,
                 latency=3)


@ct.kernel
def rmsnorm_chunked(x, w, out, TILE: ConstInt, eps: ConstFloat):
    """TileGym's persistent RMS norm for wide rows (``rms_norm_kernel_persistent_chunked``'s
    shape): the CTAs (one an SM) take rows in turn, each in chunks of TILE columns, a loop
    summing squares, then a loop writing the output."""
    n = x.shape[1]
    chunks = ct.cdiv(n, TILE)
    zero = ct.PaddingMode.ZERO
    for row in range(ct.bid(0), x.shape[0], ct.num_blocks(0)):
        acc = ct.full((1, TILE), 0.0, dtype=ct.float32)
        for j in range(chunks):
            t = ct.astype(ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=zero), ct.float32)
            acc = acc + t * t
        r = ct.rsqrt(ct.sum(acc, axis=1, keepdims=True) / n + eps)
        for j in range(chunks):
            t = ct.astype(ct.load(x, index=(row, j), shape=(1, TILE), padding_mode=zero), ct.float32)
            g = ct.astype(ct.load(w, index=(j,), shape=(TILE,), padding_mode=zero), ct.float32)
            ct.store(out, index=(row, j), tile=ct.astype(t * r * ct.reshape(g, (1, TILE)), out.dtype))


@ct.kernel
def cross_entropy(logits, labels, loss, V_CHUNK: ConstInt):
    """A language model's loss, a row a CTA (as Liger's and TileGym's cross-entropy kernels):
    the vocabulary in chunks of V_CHUNK logits, an online logsumexp (running max, rescaled
    running sum) carried through the chunk loop, minus the label's logit, gathered."""
    i = ct.bid(0)
    m = ct.full((1, 1), -float("inf"), dtype=ct.float32)
    s = ct.zeros((1, 1), dtype=ct.float32)
    for k in range(ct.num_tiles(logits, axis=1, shape=(1, V_CHUNK))):
        x = ct.astype(ct.load(logits, index=(i, k), shape=(1, V_CHUNK), padding_mode=ct.PaddingMode.NEG_INF),
                      ct.float32)
        m_new = ct.maximum(m, ct.max(x, axis=1, keepdims=True))
        s = s * ct.exp(m - m_new) + ct.sum(ct.exp(x - m_new), axis=1, keepdims=True)
        m = m_new
    lab = ct.load(labels, index=(i,), shape=(1,))
    picked = ct.astype(ct.gather(logits, (ct.full((1,), i, dtype=ct.int32), lab)), ct.float32)
    ct.store(loss, index=(i,), tile=ct.reshape(ct.log(s) + m, (1,)) - picked)


@ct.kernel
def axpy(x, y, out, a: float, T: ConstInt):
    i = ct.bid(0)
    ct.store(out, index=(i,), tile=a * ct.load(x, index=(i,), shape=(T,)) + ct.load(y, index=(i,), shape=(T,)))


DTYPES = {"f16": ct.float16, "bf16": ct.bfloat16, "f32": ct.float32, "e4m3": ct.float8_e4m3fn, "i32": ct.int32}
ITEMSIZE = {"f16": 2, "bf16": 2, "f32": 4, "e4m3": 1, "i32": 4}


def aligned_array(dtype: str, ndim: int) -> ArrayConstraint:
    """An array as cuTile sees a framework tensor: 16-byte aligned base and leading strides
    (in elements: 8 for f16), shapes divisible by 16, contiguous (last stride 1)."""
    return ArrayConstraint(DTYPES[dtype], ndim, index_dtype=ct.int32, stride_lower_bound_incl=0,
                           alias_groups=(), may_alias_internally=False,
                           stride_constant=[None] * (ndim - 1) + [1],
                           stride_divisible_by=[16 // ITEMSIZE[dtype]] * (ndim - 1) + [1],
                           shape_divisible_by=16, base_addr_divisible_by=16)


KERNELS = {"gemm": gemm, "gemm_cluster": gemm_cluster, "gemm_fp8": gemm_fp8, "grouped_gemm": grouped_gemm, "persistent_gemm": persistent_gemm,
           "persistent_grouped_gemm": persistent_grouped_gemm,
           "flash_attention": flash_attention, "softmax": softmax, "layernorm": layernorm, "rmsnorm": rmsnorm,
           "rmsnorm_persistent": rmsnorm_persistent, "rmsnorm_chunked": rmsnorm_chunked, "cross_entropy": cross_entropy, "axpy": axpy,
           "lora_linear": lora_linear, "fp8_block_scaled_gemm": fp8_block_scaled_gemm, "w8a8_gemm": w8a8_gemm}


def signature(kernel: str, arrays: list, extra: list) -> list:
    """The export parameter list: an aligned constraint per (dtype, ndim) array (a list of
    such arrays for ``("list", dtype, ndim)``, as a framework passes a list of tensors),
    then scalars (``("f32",)`` for a runtime f32) and constants (plain Python values)."""
    params = [ListConstraint(aligned_array(*spec[1:]), alias_groups=(), elements_may_alias=False)
              if spec[0] == "list" else aligned_array(*spec) for spec in arrays]
    for value in extra:
        params.append(ScalarConstraint(DTYPES[value[0]]) if isinstance(value, tuple) else value)
    return params
