"""Floating-point instructions (f16, bf16, f32, f64 and the packed f16x2/bf16x2/f32x2).

Rounding modes .rn/.rz/.rm/.rp are exact (see ``numeric``); .ftz flushes subnormal inputs
and results; .sat clamps to [0, 1].  NaN results of f32 arithmetic are the canonical NaN
0x7fffffff, as on the GPU.

Approximate instructions return the correctly rounded exact function (computed in float64)
instead of the hardware's approximation.  The hardware error bounds (PTX ISA 9.x) that our
results therefore stay within: ex2.approx.f32 2 ulp (ftz: 2^-22.5 relative); lg2.approx.f32
2^-22.6 absolute for x in [0.5, 2], else 2^-22 relative; sin/cos.approx.f32 2^-20.5
absolute in [-pi, pi]; tanh.approx.f32 2^-10.987 relative; rcp/rsqrt/sqrt.approx.f32 1 to
2 ulp; rcp.approx.ftz.f64 and rsqrt.approx.f64 about 2^-23 relative (our results are exact
to f64, so Newton refinements that follow converge at least as fast); div.approx.f32 and
div.full.f32 2 ulp.  ex2/tanh.approx of f16/bf16 are correctly rounded from float64.
"""
from __future__ import annotations

import numpy as np

from ..numeric import F64, Rounding, flush, round_to, rounding_of, saturate, two_prod, two_sum
from ..operands import type_of
from ..ptxtypes import BF16, FORMAT_DTYPES, PtxType, ptx_type
from ..registry import handles, modifiers
from .common import broadcast_all, elementwise

PACKED_ELEMENTS = {"f16x2": np.dtype(np.float16), "bf16x2": BF16, "f32x2": np.dtype(np.float32)}
CANONICAL_NAN = {np.dtype(np.float32): np.uint32(0x7FFFFFFF), np.dtype(np.float16): np.uint16(0x7FFF),
                 BF16: np.uint16(0x7FFF), np.dtype(np.float64): None}


def element_dtype(ty: PtxType) -> np.dtype:
    return PACKED_ELEMENTS.get(ty.name, ty.dtype)


def lift(fn, ty: PtxType):
    """Make an element-wise ``fn`` over element arrays work on ``ty`` (packed types are
    unpacked from raw bits, computed per element and packed again)."""
    edt = PACKED_ELEMENTS.get(ty.name)
    if edt is None:
        return fn
    raw = ty.dtype

    def packed(*xs):
        xs = broadcast_all(*xs)
        shape = xs[0].shape
        parts = [np.ascontiguousarray(x).reshape(-1).view(edt) for x in xs]
        out = np.asarray(fn(*parts), edt)
        return np.ascontiguousarray(out).view(raw).reshape(shape)
    return packed


def canonical(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    nan_bits = CANONICAL_NAN.get(x.dtype)
    if nan_bits is None:
        return x
    bad = np.isnan(x)
    if not bad.any():
        return x
    return np.where(bad, nan_bits.view(x.dtype) if np.ndim(nan_bits) else np.array(nan_bits).view(x.dtype), x)


def exact_pair(op: str, xs: list) -> tuple:
    """(hi, lo): hi = float64 nearest of the exact result, sign(lo) = sign of the rest."""
    if op == "add":
        return two_sum(xs[0], xs[1])
    if op == "sub":
        return two_sum(xs[0], -xs[1])
    if op == "mul":
        return two_prod(xs[0], xs[1])
    if op == "fma":
        p, e = two_prod(xs[0], xs[1])
        s, t = two_sum(p, xs[2])
        hi, lo = two_sum(s, t + e)
        # an exact zero has the sign of p + c: fma(+0, -0, -0) = -0, not the +0 of s + 0
        return np.where((hi == 0) & (lo == 0), s, hi), lo
    if op == "div":
        q = xs[0] / xs[1]
        p, e = two_prod(q, xs[1])
        rest = ((xs[0] - p) - e) * np.sign(xs[1])
        return q, np.where(np.isfinite(rest), rest, 0.0)
    if op == "sqrt":
        s = np.sqrt(xs[0])
        p, e = two_prod(s, s)
        rest = (xs[0] - p) - e
        return s, np.where(np.isfinite(rest), rest, 0.0)
    raise KeyError(op)


def float_compute(op: str, xs: list, edt: np.dtype, mode: Rounding, ftz: bool) -> np.ndarray:
    xs = [flush(np.asarray(x), ftz) for x in xs]
    if mode is Rounding.RN and edt == np.float64 and op in ("add", "sub", "mul", "div", "sqrt"):
        a = xs[0]
        r = {"add": lambda: a + xs[1], "sub": lambda: a - xs[1], "mul": lambda: a * xs[1],
             "div": lambda: a / xs[1], "sqrt": lambda: np.sqrt(a)}[op]()
        return flush(np.asarray(r, edt), ftz)
    if mode is Rounding.RN and edt == np.float32 and op in ("add", "sub", "mul", "div", "sqrt"):
        a = xs[0]
        r = {"add": lambda: a + xs[1], "sub": lambda: a - xs[1], "mul": lambda: a * xs[1],
             "div": lambda: a / xs[1], "sqrt": lambda: np.sqrt(a)}[op]()
        return flush(canonical(np.asarray(r, edt)), ftz)
    wide = [np.asarray(x).astype(F64) for x in xs]
    hi, lo = exact_pair(op, wide)
    return flush(canonical(round_to(hi, lo, edt, mode).astype(edt)), ftz)


def compile_float_arith(ctx, ins, ty: PtxType):
    """add/sub/mul/div, including mixed ``add.f32.f16`` and packed types."""
    mods = modifiers(ins.parts)
    op = ins.parts[0]
    mode = rounding_of(ins.parts)
    ftz, sat = "ftz" in mods, "sat" in mods
    types = [p for p in ins.parts[1:] if p in ("f16", "bf16", "f32", "f64", "f16x2", "bf16x2", "f32x2")]
    if len(types) == 2:                       # add.rn.f32.f16 d, a, c
        out, low = ptx_type(types[0]), ptx_type(types[1])

        def mixed(a, c):
            return saturate(float_compute(op, [a.astype(np.float32), c], out.dtype, mode, ftz), sat)
        return elementwise(ctx, ins, out, mixed, 2, src_types=(low, out))
    edt = element_dtype(ty)

    def fn(*xs):
        return saturate(float_compute(op, list(xs), edt, mode, ftz), sat)
    return elementwise(ctx, ins, ty, lift(fn, ty), 2)


def compile_fma(ctx, ins, ty: PtxType):
    mods = modifiers(ins.parts)
    mode = rounding_of(ins.parts)
    ftz, sat, relu = "ftz" in mods, "sat" in mods, "relu" in mods
    types = [p for p in ins.parts[1:] if p in ("f16", "bf16", "f32", "f64", "f16x2", "bf16x2", "f32x2")]
    if len(types) == 2:                       # fma.rn.f32.f16 d, a, b, c
        out, low = ptx_type(types[0]), ptx_type(types[1])

        def mixed(a, b, c):
            return float_compute("fma", [a.astype(np.float32), b.astype(np.float32), c],
                                 out.dtype, mode, ftz)
        return elementwise(ctx, ins, out, mixed, 3, src_types=(low, low, out))
    edt = element_dtype(ty)

    def fn(a, b, c):
        r = saturate(float_compute("fma", [a, b, c], edt, mode, ftz), sat)
        if relu:
            r = np.where(r < 0, edt.type(0), r).astype(edt)
        return r
    return elementwise(ctx, ins, ty, lift(fn, ty), 3)


@handles("fma")
def compile_fma_handler(ctx, ins):
    return compile_fma(ctx, ins, type_of(ins.parts))


def float_min_max(a, b, is_min: bool, nan_mode: bool, edt) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    r = (np.fmin if is_min else np.fmax)(a, b)
    zero = (a == 0) & (b == 0)
    if zero.any():
        pick_a = np.signbit(a) if is_min else ~np.signbit(a)
        r = np.where(zero, np.where(pick_a, a, b), r)
    if nan_mode:
        r = np.where(np.isnan(a) | np.isnan(b), np.nan, r)
    return canonical(np.asarray(r, edt))


def compile_float_minmax(ctx, ins, ty: PtxType):
    mods = modifiers(ins.parts)
    is_min = ins.parts[0] == "min"
    nan_mode, ftz = "NaN" in mods, "ftz" in mods
    xorsign = "xorsign" in mods
    edt = element_dtype(ty)
    nsrc = len(ins.operands) - 1

    def fn(*xs):
        xs = [flush(np.asarray(x), ftz) for x in xs]
        sign = None
        if xorsign:
            sign = np.signbit(xs[0]) ^ np.signbit(xs[1])
            xs = [np.abs(x) for x in xs]
        r = xs[0]
        for x in xs[1:]:
            r = float_min_max(r, x, is_min, nan_mode, edt)
        if sign is not None:
            r = np.where(sign, -np.abs(r), np.abs(r)).astype(edt)
        return r
    return elementwise(ctx, ins, ty, lift(fn, ty), nsrc)


def compile_float_unary(ctx, ins, ty: PtxType):
    ftz = "ftz" in modifiers(ins.parts)
    edt = element_dtype(ty)
    is_abs = ins.parts[0] == "abs"

    def fn(a):
        a = flush(np.asarray(a, edt), ftz)
        bits = a.dtype.itemsize * 8
        raw = a.view(np.dtype(f"u{bits // 8}"))
        sign = raw.dtype.type(1 << (bits - 1))
        return (raw & ~sign if is_abs else raw ^ sign).view(edt)
    return elementwise(ctx, ins, ty, lift(fn, ty), 1)


APPROX_FUNCS = {
    "ex2": np.exp2, "lg2": np.log2, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "rcp": lambda x: 1.0 / x, "rsqrt": lambda x: 1.0 / np.sqrt(x), "sqrt": np.sqrt,
}


@handles("ex2", "lg2", "sin", "cos", "tanh", "rcp", "rsqrt", "sqrt")
def compile_transcendental(ctx, ins):
    ty = type_of(ins.parts)
    mods = modifiers(ins.parts)
    name = ins.parts[0]
    ftz = "ftz" in mods
    edt = element_dtype(ty)
    exact = "approx" not in mods and name in ("rcp", "sqrt")
    mode = rounding_of(ins.parts)

    def fn(a):
        a = flush(np.asarray(a, edt), ftz)
        if exact and name == "sqrt":
            return float_compute("sqrt", [a], edt, mode, ftz)
        if exact and name == "rcp":
            return float_compute("div", [np.ones_like(a), a], edt, mode, ftz)
        r = APPROX_FUNCS[name](a.astype(F64))
        if name == "ex2" and edt == np.float32 and not ftz:
            pass
        return flush(canonical(np.asarray(r).astype(edt)), ftz or name == "rcp" and edt == np.float64)
    return elementwise(ctx, ins, ty, lift(fn, ty), 1)


@handles("copysign")
def compile_copysign(ctx, ins):
    ty = type_of(ins.parts)
    return elementwise(ctx, ins, ty, lambda a, b: np.copysign(b, a).astype(ty.dtype), 2)


TESTS = {
    "finite": np.isfinite, "infinite": np.isinf, "number": lambda x: ~np.isnan(x),
    "notanumber": np.isnan,
    "normal": lambda x: np.isfinite(x) & (np.abs(x) >= np.finfo(x.dtype).tiny),
    "subnormal": lambda x: (x != 0) & (np.abs(x) < np.finfo(x.dtype).tiny),
}


@handles("testp")
def compile_testp(ctx, ins):
    ty = type_of(ins.parts)
    test = next(TESTS[p] for p in ins.parts[1:] if p in TESTS)
    return elementwise(ctx, ins, ty, lambda a: test(np.asarray(a)), 1, out_ty=ptx_type("pred"))


def format_dtype(name: str) -> np.dtype:
    return FORMAT_DTYPES[name]
