"""cvt (every int/float width, f16/bf16/tf32/fp8/fp6/fp4 and their packed pairs), cvta,
and the comparison/selection instructions setp, set, selp, slct."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..numeric import F64, Rounding, flush, round_to, rounding_of, saturate
from ..operands import reader, type_of, writer
from ..ptxtypes import BF16, FORMAT_DTYPES, PtxType, find_types, ptx_type
from ..registry import UnsupportedInstruction, handles, modifiers
from .common import broadcast_all, elementwise
from .floating import canonical

INT_ROUNDING = {"rni": Rounding.RN, "rzi": Rounding.RZ, "rmi": Rounding.RM, "rpi": Rounding.RP}
PRED = ptx_type("pred")

# largest finite value of each small format, for .satfinite
MAX_FINITE = {name: float(ml_dtypes.finfo(dt).max) for name, dt in FORMAT_DTYPES.items()
              if name not in ("tf32",)}


def int_range(ty: PtxType) -> tuple[int, int]:
    if ty.is_signed:
        return -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1
    return 0, (1 << ty.bits) - 1


def round_integral(x: np.ndarray, mode: Rounding) -> np.ndarray:
    return {Rounding.RN: np.rint, Rounding.RZ: np.trunc, Rounding.RM: np.floor,
            Rounding.RP: np.ceil}[mode](x)


def float_to_int(x: np.ndarray, dst: PtxType, mode: Rounding, ftz: bool) -> np.ndarray:
    x = flush(np.asarray(x), ftz).astype(F64)
    r = round_integral(x, mode)
    lo, hi = int_range(dst)
    nan = np.isnan(r)
    r = np.where(nan, 0.0, r)
    big = r >= float(hi)
    small = r <= float(lo)
    safe = np.clip(r, float(lo), float(hi))
    if dst.bits == 64:
        wt = np.int64 if dst.is_signed else np.uint64
        out = np.where(big | small, 0, safe).astype(wt)
        out = np.where(big, wt(hi), np.where(small, wt(lo), out))
        return out.astype(dst.dtype)
    return safe.astype(np.int64).astype(dst.dtype)


def int_to_int(x: np.ndarray, src: PtxType, dst: PtxType, sat: bool) -> np.ndarray:
    x = np.asarray(x)
    if not sat:
        wt = np.int64 if src.is_signed else np.uint64
        return x.astype(wt).astype(dst.dtype)
    lo, hi = int_range(dst)
    if src.is_signed:
        v = x.astype(np.int64)
        return np.clip(v, max(lo, -(1 << 63)), min(hi, (1 << 63) - 1)).astype(dst.dtype)
    v = x.astype(np.uint64)
    return np.minimum(v, np.uint64(hi)).astype(dst.dtype)


def int_to_float(x: np.ndarray, src: PtxType, dst_dt: np.dtype, mode: Rounding) -> np.ndarray:
    x = np.asarray(x)
    hi = x.astype(F64)
    if src.bits < 64:
        return round_to(hi, 0.0, dst_dt, mode)
    wt = np.int64 if src.is_signed else np.uint64
    limit = 2.0 ** 63 if src.is_signed else 2.0 ** 64
    in_range = np.abs(hi) < limit
    back = np.where(in_range, hi, 0.0).astype(wt)
    xi = x.astype(wt)
    lo = np.where(~in_range, -1.0, np.where(xi > back, 1.0, np.where(xi < back, -1.0, 0.0)))
    return round_to(hi, lo, dst_dt, mode)


def float_to_float(x: np.ndarray, dst_dt: np.dtype, mode: Rounding, ftz: bool) -> np.ndarray:
    x = flush(np.asarray(x), ftz)
    if x.dtype.itemsize < dst_dt.itemsize or x.dtype == dst_dt:
        return canonical(x.astype(dst_dt))
    return canonical(round_to(x.astype(F64), 0.0, dst_dt, mode))


#: Every UE5M3 code's value (PTX ISA 9.4's unsigned scale format: 5 exponent bits with bias
#: 15, 3 mantissa bits, subnormals, no infinity, NaN only 0xFF): ml_dtypes has no such type.
_UE5M3_EXP, _UE5M3_MAN = np.arange(256) >> 3, np.arange(256) & 7
UE5M3_VALUES = np.where(_UE5M3_EXP == 0, _UE5M3_MAN * 2.0 ** -17, (8 + _UE5M3_MAN) * 2.0 ** (_UE5M3_EXP - 18))
UE5M3_VALUES[0xFF] = np.nan


def to_ue5m3(x: np.ndarray, mode: Rounding) -> np.ndarray:
    """UE5M3 codes of float64 values (``.satfinite``, the only form PTX has): rounded to
    3 mantissa bits with ``mode``, clamped to [0, 114688] (negative values to +0, as an
    unsigned saturating conversion; unchecked on sm_107 hardware), NaN -> 0xFF."""
    x = np.asarray(x, F64)
    nan = np.isnan(x)
    x = np.clip(np.where(nan, 0.0, x), 0.0, UE5M3_VALUES[0xFE])  # rounding stays within
    with np.errstate(divide="ignore"):
        top = np.floor(np.log2(np.where(x > 0, x, 1.0)))      # exponent of the leading bit
    quantum = np.ldexp(1.0, (np.maximum(top, -14) - 3).astype(np.int64))
    steps = {Rounding.RZ: np.trunc, Rounding.RP: np.ceil, Rounding.RM: np.floor}.get(mode, np.rint)(x / quantum)
    codes = np.searchsorted(UE5M3_VALUES[:0xFF], steps * quantum)
    return np.where(nan, 0xFF, codes).astype(np.uint8)


def to_ue8m0(x: np.ndarray, mode: Rounding, satfinite: bool) -> np.ndarray:
    """UE8M0 codes (the biased exponent of a power of two 2^-127..2^127, NaN 0xFF) of |x|:
    ``.rz`` the power of two at or below, ``.rp`` the one at or above (the only roundings PTX
    has); zero and anything up to 2^-127 give 0x00.  Overflow (infinity too) gives 0xFF, which
    ``.satfinite`` turns into 0xFE; NaN gives 0xFF.  As CUDA's cuda_fp8.hpp spells out these
    instructions (its fallback for ``__nv_cvt_float_to_e8m0``: the exponent field of |x| in
    bf16, rounded in the same direction, plus one when the rounding left a fraction)."""
    a = np.abs(np.asarray(x, F64))
    with np.errstate(all="ignore"):
        frac, e = np.frexp(a)
        exp = e.astype(np.int64) - 1 + ((mode is Rounding.RP) & (frac != 0.5))
        codes = np.where(a == 0, 0, np.clip(exp + 127, 0, 255))
    codes = np.where(np.isinf(a), 255, codes)
    if satfinite:
        codes = np.minimum(codes, 254)
    return np.where(np.isnan(a), 255, codes).astype(np.uint8)


#: Formats with no NaN code (the only cvt forms to them saturate): a NaN source gives +MAX_NORM,
#: as CUDA's cuda_fp4.hpp and cuda_fp6.hpp spell out these instructions ("NaN converts to
#: positive FP4_MAXNORM").
NO_NAN = ("e2m1", "e2m3", "e3m2")


def to_small_float(x: np.ndarray, fmt: str, mode: Rounding, satfinite: bool, relu: bool) -> np.ndarray:
    """f32/f16/bf16 values -> raw bits of fmt (f16, bf16, e4m3, e5m2, e2m1, ...)."""
    if fmt == "ue5m3":
        return to_ue5m3(x, mode)
    if fmt == "ue8m0":
        return to_ue8m0(x, mode, satfinite)
    dt = FORMAT_DTYPES[fmt]
    x = np.asarray(x).astype(F64)
    if relu:
        x = np.where(np.isnan(x), x, np.maximum(x, 0.0))
    if satfinite:
        m = MAX_FINITE[fmt]
        x = np.where(np.isnan(x), x, np.clip(x, -m, m))
    if fmt in NO_NAN:
        x = np.where(np.isnan(x), MAX_FINITE[fmt], x)
    r = round_to(x, 0.0, dt, mode if mode is not Rounding.RNA else Rounding.RN)
    bits = dt.itemsize * 8
    return np.asarray(r, dt).view(np.dtype(f"u{dt.itemsize}")) if bits >= 8 else r


def tf32_round(x: np.ndarray, mode: Rounding) -> np.ndarray:
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    low = bits & np.uint64(0x1FFF)
    base = bits & ~np.uint64(0x1FFF)
    if mode is Rounding.RZ:
        out = base
    elif mode is Rounding.RNA:
        out = (bits + np.uint64(0x1000)) & ~np.uint64(0x1FFF)
    else:
        odd = (bits >> np.uint64(13)) & np.uint64(1)
        up = (low > np.uint64(0x1000)) | ((low == np.uint64(0x1000)) & (odd == 1))
        out = base + np.where(up, np.uint64(0x2000), np.uint64(0))
    out = np.where(np.isnan(np.asarray(x, np.float32)), bits, out)
    return out.astype(np.uint32)


PACKED_DST = {"f16x2": "f16", "bf16x2": "bf16", "e4m3x2": "e4m3", "e5m2x2": "e5m2",
              "ue8m0x2": "ue8m0", "e2m1x2": "e2m1", "e2m3x2": "e2m3", "e3m2x2": "e3m2", "ue5m3x2": "ue5m3",
              "e4m3x4": "e4m3", "e5m2x4": "e5m2", "e2m1x4": "e2m1"}


@handles("cvt")
def compile_cvt(ctx, ins):
    types = find_types(ins.parts[1:])
    dst, src = types[0], types[1]
    mods = modifiers(ins.parts)
    ftz, sat = "ftz" in mods, "sat" in mods
    satfinite, relu = "satfinite" in mods, "relu" in mods
    mode = rounding_of(ins.parts)
    if dst.name in PACKED_DST or src.name in PACKED_DST:
        return compile_cvt_packed(ctx, ins, dst, src, mode, satfinite, relu)
    if dst.name == "tf32":
        return elementwise(ctx, ins, src, lambda a: tf32_round(a, mode), 1, out_ty=dst)
    irnd = next((INT_ROUNDING[p] for p in ins.parts[1:] if p in INT_ROUNDING), None)

    def fn(a):
        a = np.asarray(a)
        if src.is_float and dst.is_float:
            if irnd is not None:
                r = round_integral(flush(a, ftz).astype(F64), irnd).astype(dst.dtype)
            else:
                r = float_to_float(a, dst.dtype, mode, ftz)
            return saturate(flush(r, ftz and dst.dtype == np.float32), sat)
        if src.is_float:
            return float_to_int(a, dst, irnd or Rounding.RZ, ftz)
        if dst.is_float:
            return saturate(int_to_float(a, src, dst.dtype, mode), sat)
        return int_to_int(a, src, dst, sat)
    return elementwise(ctx, ins, src, fn, 1, out_ty=dst)


def compile_cvt_packed(ctx, ins, dst: PtxType, src: PtxType, mode, satfinite, relu):
    nsrc = len(ins.operands) - 1
    half_pairs = ("f16x2", "bf16x2")
    if dst.name in PACKED_DST and (src.name not in PACKED_DST or src.name in half_pairs
                                   and dst.name not in half_pairs):
        fmt = PACKED_DST[dst.name]
        elem_bits = 8 if fmt == "ue5m3" else FORMAT_DTYPES[fmt].itemsize * 8 if fmt not in ("e2m1",) else 4
        count = int(dst.name[-1])

        def pack(*xs):
            xs = broadcast_all(*xs)
            if len(xs) < count:            # cvt.rn.satfinite.e4m3x2.f16x2 d, a (packed source)
                raise UnsupportedInstruction("packed-source narrowing")
            out = np.zeros(xs[0].shape, np.uint64)
            # the first source goes into the highest element
            for k, x in enumerate(xs):
                bits = to_small_float(x, fmt, mode, satfinite, relu)
                bits = np.asarray(bits).view(np.dtype(f"u{max(elem_bits, 8) // 8}")).astype(np.uint64)
                if elem_bits == 4:
                    bits = bits & np.uint64(0xF)
                out |= bits << np.uint64(elem_bits * (count - 1 - k))
            return out.astype(dst.dtype)
        if src.name in ("f16x2", "bf16x2"):
            edt = np.float16 if src.name == "f16x2" else BF16

            def pack_pair(a):
                a = np.ascontiguousarray(np.broadcast_to(a, np.shape(a))).reshape(-1)
                halves = a.view(np.dtype(edt)).reshape(-1, 2)
                return pack(halves[:, 1].astype(F64), halves[:, 0].astype(F64)).reshape(np.shape(a))
            return elementwise(ctx, ins, src, pack_pair, 1, out_ty=dst)
        return elementwise(ctx, ins, src, pack, nsrc, out_ty=dst)
    if src.name in PACKED_DST:                 # widen: cvt.rn.f16x2.e4m3x2 d, a
        fmt = PACKED_DST[src.name]
        sdt = FORMAT_DTYPES.get(fmt, np.dtype(np.uint8))
        out_fmt = PACKED_DST.get(dst.name, dst.name)
        odt = FORMAT_DTYPES[out_fmt]

        def unpack(a):
            a = np.ascontiguousarray(np.asarray(a)).astype(np.uint64)
            out = np.zeros(a.shape, np.uint64)
            ebits = sdt.itemsize * 8 if fmt != "e2m1" else 4
            obits = odt.itemsize * 8
            count = int(src.name[-1])
            for k in range(count):
                raw = ((a >> np.uint64(ebits * k)) & np.uint64((1 << ebits) - 1)).astype(np.uint8)
                val = UE5M3_VALUES[raw] if fmt == "ue5m3" else raw.view(sdt).astype(F64)
                if relu:
                    val = np.where(np.isnan(val), val, np.maximum(val, 0.0))
                conv = np.asarray(val.astype(odt)).view(np.dtype(f"u{odt.itemsize}")).astype(np.uint64)
                out |= conv << np.uint64(obits * k)
            return out.astype(dst.dtype)
        return elementwise(ctx, ins, src, unpack, 1, out_ty=dst)
    raise UnsupportedInstruction(f"cvt {dst.name} <- {src.name}")


@handles("cvta")
def compile_cvta(ctx, ins):
    from ..memory import LOCAL_GENERIC_BASE, PARAM_GENERIC_BASE, SHARED_GENERIC_BASE
    mods = modifiers(ins.parts)
    ty = type_of(ins.parts)
    to_generic = "to" not in mods
    base = 0
    if "shared" in mods or "shared::cta" in mods or "shared::cluster" in mods:
        base = SHARED_GENERIC_BASE
    elif "local" in mods:
        base = LOCAL_GENERIC_BASE
    elif "param" in mods or "param::entry" in mods:
        base = PARAM_GENERIC_BASE
    off = np.array(base, np.uint64).astype(ty.dtype)

    def fn(a):
        return (a + off).astype(ty.dtype) if to_generic else (a - off).astype(ty.dtype)
    return elementwise(ctx, ins, ty, fn, 1)


# ----------------------------------------------------------------------------- compare/select
def compare(op: str, a: np.ndarray, b: np.ndarray, ty: PtxType) -> np.ndarray:
    if ty.is_float or ty.name in ("f16x2", "bf16x2"):
        unordered = np.isnan(a) | np.isnan(b)
        base = op.rstrip("u") if op not in ("num", "nan") else op
        if op == "num":
            return ~unordered
        if op == "nan":
            return unordered
        r = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
             "ge": a >= b}[base]
        if op.endswith("u"):
            return r | unordered
        return r & ~unordered
    if op in ("lo", "ls", "hi", "hs"):
        a, b = np.asarray(a).view(np.dtype(f"u{ty.bits // 8}")), np.asarray(b).view(np.dtype(f"u{ty.bits // 8}"))
        op = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}[op]
    return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[op]


CMP_OPS = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu",
           "leu", "gtu", "geu", "num", "nan"}
BOOL_OPS = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


@handles("setp")
def compile_setp(ctx, ins):
    from ..parser import Pair
    ty = type_of(ins.parts)
    op = next(p for p in ins.parts[1:] if p in CMP_OPS)
    boolop = next((BOOL_OPS[p] for p in ins.parts[1:] if p in BOOL_OPS), None)
    ftz = "ftz" in modifiers(ins.parts)
    dst = ins.operands[0]
    first, second = (dst.first, dst.second) if isinstance(dst, Pair) else (dst, None)
    wp, wq = writer(ctx, first, PRED), writer(ctx, second, PRED)
    ra, rb = reader(ctx, ins.operands[1], ty), reader(ctx, ins.operands[2], ty)
    rc = reader(ctx, ins.operands[3], PRED) if boolop is not None else None
    packed = ty.name in ("f16x2", "bf16x2")
    edt = np.float16 if ty.name == "f16x2" else BF16

    def run(m, idx):
        a, b = ra(m, idx), rb(m, idx)
        if ty.is_float:
            a, b = flush(np.asarray(a), ftz), flush(np.asarray(b), ftz)
        if packed:
            a, b = broadcast_all(a, b)
            ha = np.ascontiguousarray(a).reshape(-1).view(edt).reshape(-1, 2)
            hb = np.ascontiguousarray(b).reshape(-1).view(edt).reshape(-1, 2)
            t = compare(op, ha, hb, ty)
            wp(m, idx, t[:, 0])
            wq(m, idx, t[:, 1])
            return
        t = compare(op, a, b, ty)
        if boolop is not None:
            c = rc(m, idx)
            wp(m, idx, boolop(t, c))
            wq(m, idx, boolop(~t, c))
        else:
            wp(m, idx, t)
            wq(m, idx, ~t)
    return run


@handles("set")
def compile_set(ctx, ins):
    types = find_types(ins.parts[1:])
    dst, src = types[0], types[1]
    op = next(p for p in ins.parts[1:] if p in CMP_OPS)
    boolop = next((BOOL_OPS[p] for p in ins.parts[1:] if p in BOOL_OPS), None)

    def fn(a, b, c=None):
        t = compare(op, a, b, src)
        if boolop is not None:
            t = boolop(t, c)
        if dst.is_float:
            return np.where(t, 1.0, 0.0).astype(dst.dtype)
        return np.where(t, dst.dtype.type(-1) if dst.is_signed else ~dst.dtype.type(0), 0).astype(dst.dtype)
    types_in = (src, src, PRED)
    return elementwise(ctx, ins, dst, fn, 3 if boolop else 2, src_types=types_in)


@handles("selp")
def compile_selp(ctx, ins):
    ty = type_of(ins.parts)
    return elementwise(ctx, ins, ty, lambda a, b, c: np.where(c, a, b).astype(ty.dtype), 3,
                       src_types=(ty, ty, PRED))


@handles("slct")
def compile_slct(ctx, ins):
    types = find_types(ins.parts[1:])
    ty, cty = types[0], types[1]
    ftz = "ftz" in modifiers(ins.parts)

    def fn(a, b, c):
        c = flush(np.asarray(c), ftz) if cty.is_float else c
        return np.where(np.asarray(c) >= 0, a, b).astype(ty.dtype)
    return elementwise(ctx, ins, ty, fn, 3, src_types=(ty, ty, cty))
