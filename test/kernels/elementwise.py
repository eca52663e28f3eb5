"""Elementwise arithmetic, math functions, comparisons and conversions."""
from __future__ import annotations

import cuda.tile as ct

from ._case import KernelCase, arr, scalar

ConstInt = ct.Constant[int]


@ct.kernel
def float_arith(x, y, out, T: ConstInt):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(T,))
    b = ct.load(y, index=(i,), shape=(T,))
    r = (a + b) * (a - b) / (b + 2.0)
    r = ct.maximum(r, -a) + ct.minimum(a, b) - abs(b)
    r = -r + ct.pow(a, b) + a % 3.0
    ct.store(out, index=(i,), tile=r)


@ct.kernel
def half_arith(x, y, out32, out16):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(64,))
    b = ct.load(y, index=(i,), shape=(64,))
    h = a * b + a
    w = ct.astype(h, ct.float32) * 0.5 + ct.astype(b, ct.float32)
    ct.store(out32, index=(i,), tile=w)
    ct.store(out16, index=(i,), tile=ct.maximum(h, b) - a)


@ct.kernel
def int_arith(x, y, out, shift: ConstInt):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(128,))
    b = ct.load(y, index=(i,), shape=(128,)) | 1
    r = a + b * 3 - (a // b) + (a % b)
    r = (r & 0xFF) ^ (a | b) ^ ~b
    r = (r << shift) + (a >> 1)
    r = ct.maximum(r, a) + ct.minimum(r, -b)
    ct.store(out, index=(i,), tile=r)


@ct.kernel
def unsigned_bits(x, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(256,))
    r = (a >> 3) | (a << 5)
    r = r ^ (a & 0x5A)
    ct.store(out, index=(i,), tile=ct.maximum(r, a) - ct.minimum(r, a) + (r > a))


@ct.kernel
def math_funcs(x, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(128,))
    p = abs(a) + 1.0
    r = ct.exp(a) + ct.exp2(a) + ct.log(p) + ct.log2(p) + ct.sqrt(p) + ct.rsqrt(p)
    r = r + ct.tanh(a) + ct.sin(a) + ct.cos(a) + ct.tan(a) + ct.sinh(a) + ct.cosh(a)
    r = r + ct.floor(a) + ct.ceil(a)
    r = ct.where(ct.isnan(r), 0.0, r)
    ct.store(out, index=(i,), tile=r)


@ct.kernel
def math_atan2(x, y, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(128,))
    b = ct.load(y, index=(i,), shape=(128,))
    ct.store(out, index=(i,), tile=ct.atan2(a, b))


@ct.kernel
def activations(x, gelu_out, silu_out):
    """bf16 GELU (tanh form) and SiLU, computed in f32 as model code writes them."""
    i = ct.bid(0)
    a = ct.astype(ct.load(x, index=(i,), shape=(256,)), ct.float32)
    g = 0.5 * a * (1.0 + ct.tanh(0.7978845608 * (a + 0.044715 * a * a * a)))
    s = a / (1.0 + ct.exp(-a))
    ct.store(gelu_out, index=(i,), tile=ct.astype(g, ct.bfloat16))
    ct.store(silu_out, index=(i,), tile=ct.astype(s, ct.bfloat16))


@ct.kernel
def math_f64(x, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(32,))
    r = ct.exp(a) * ct.sqrt(abs(a) + 1.0) + ct.log(abs(a) + 2.0) + ct.tanh(a)
    ct.store(out, index=(i,), tile=r)


@ct.kernel
def compare_where(x, y, out, mask_out):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(256,))
    b = ct.load(y, index=(i,), shape=(256,))
    lt = a < b
    ge = ct.greater_equal(a, b)
    eq = (a == b) | (a != a)
    both = lt & ~eq
    r = ct.where(both, a, ct.where(ge, b, a * b))
    r = ct.where(a <= 0.0, -r, r)
    ct.store(out, index=(i,), tile=r)
    ct.store(mask_out, index=(i,), tile=ct.astype(both | (a > 1.0), ct.int8))


@ct.kernel
def int_compare(x, y, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(64,))
    b = ct.load(y, index=(i,), shape=(64,))
    r = ct.where(a > b, a - b, b - a)
    r = ct.where(ct.less_equal(a, 0), 0, r)
    ct.store(out, index=(i,), tile=r)


@ct.kernel
def conversions(x, o16, obf16, oi32, oi8, o64, ou16):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(128,))
    ct.store(o16, index=(i,), tile=ct.astype(a, ct.float16))
    ct.store(obf16, index=(i,), tile=ct.astype(a, ct.bfloat16))
    n = ct.astype(a, ct.int32)
    ct.store(oi32, index=(i,), tile=n)
    ct.store(oi8, index=(i,), tile=ct.astype(n, ct.int8))
    ct.store(o64, index=(i,), tile=ct.astype(ct.astype(n, ct.int64), ct.float64))
    ct.store(ou16, index=(i,), tile=ct.astype(abs(n), ct.uint16))


@ct.kernel
def rounding_modes(x, o16, oi):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(128,))
    ct.store(o16, index=(i,), tile=ct.astype(a, ct.float16, rounding_mode=ct.RoundingMode.RZ))
    b = ct.add(a, a, rounding_mode=ct.RoundingMode.RN)
    b = ct.mul(b, a, rounding_mode=ct.RoundingMode.RZ, flush_to_zero=True)
    ct.store(oi, index=(i,), tile=ct.astype(b, ct.int32))


@ct.kernel
def fp8_convert(x, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(64,))
    e4 = ct.astype(a, ct.float8_e4m3fn)
    e5 = ct.astype(a, ct.float8_e5m2)
    ct.store(out, index=(i,), tile=ct.astype(e4, ct.float32) + ct.astype(e5, ct.float32))


@ct.kernel
def bit_tricks(x, out_bits, out_bytes):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(128,))
    bits = ct.bitcast(a, ct.int32)
    ct.store(out_bits, index=(i,), tile=bits & 0x7FFFFFFF)
    ct.store(out_bytes, index=(i,), tile=ct.astype(bits >> 24, ct.uint8))


@ct.kernel
def scalar_axpy(x, y, out, alpha, beta, n_valid):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(128,))
    b = ct.load(y, index=(i,), shape=(128,))
    idx = ct.arange(128, dtype=ct.int32) + i * 128
    r = alpha * a + beta * b
    ct.store(out, index=(i,), tile=ct.where(idx < n_valid, r, 0.0))


F32, F16, BF16 = ct.float32, ct.float16, ct.bfloat16

CASES = [
    KernelCase("float_arith", float_arith, [[arr(F32), arr(F32), arr(F32), 256]]),
    KernelCase("half_arith", half_arith,
               [[arr(F16), arr(F16), arr(F32), arr(F16)], [arr(BF16), arr(BF16), arr(F32), arr(BF16)]]),
    KernelCase("int_arith_i32", int_arith, [[arr(ct.int32), arr(ct.int32), arr(ct.int32), 3]]),
    KernelCase("int_arith_i64", int_arith,
               [[arr(ct.int64, index_dtype=ct.int64), arr(ct.int64, index_dtype=ct.int64),
                 arr(ct.int64, index_dtype=ct.int64), 7]]),
    KernelCase("unsigned_bits", unsigned_bits, [[arr(ct.uint32), arr(ct.uint32)], [arr(ct.uint8), arr(ct.uint8)]]),
    KernelCase("math_funcs", math_funcs, [[arr(F32), arr(F32)]]),
    KernelCase("math_atan2", math_atan2, [[arr(F32), arr(F32), arr(F32)]]),
    KernelCase("math_f64", math_f64, [[arr(ct.float64), arr(ct.float64)]]),
    KernelCase("activations", activations, [[arr(BF16), arr(BF16), arr(BF16)]]),
    KernelCase("compare_where", compare_where, [[arr(F32), arr(F32), arr(F32), arr(ct.int8)]]),
    KernelCase("int_compare", int_compare, [[arr(ct.int16), arr(ct.int16), arr(ct.int16)]]),
    KernelCase("conversions", conversions,
               [[arr(F32), arr(F16), arr(BF16), arr(ct.int32), arr(ct.int8), arr(ct.float64), arr(ct.uint16)]]),
    KernelCase("rounding_modes", rounding_modes, [[arr(F32), arr(F16), arr(ct.int32)]]),
    KernelCase("fp8_convert", fp8_convert, [[arr(F32), arr(F32)]]),
    KernelCase("bit_tricks", bit_tricks, [[arr(F32), arr(ct.int32), arr(ct.uint8)]]),
    KernelCase("scalar_axpy", scalar_axpy,
               [[arr(F32), arr(F32), arr(F32), scalar(F32), scalar(F32), scalar(ct.int32)]]),
]
