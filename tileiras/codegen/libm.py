"""Accurate elementary functions, emitted as LLVM IR with FMA and integer arithmetic.

Every function is an internal LLVM function ``__tileiras_<name>_<f32|f64>`` defined once
per module (``alwaysinline``: the element-wise emitters call it per register and LLVM
inlines it).  Only plain LLVM instructions and the ``llvm.fma/fabs/copysign/sqrt/fshl``
intrinsics are used, so the same IR also runs on the host (the tests JIT it) and the
PTX emulator measures its real accuracy (no ``.approx`` instruction is involved).

Algorithms (f64; f32 has its own native f32 code, see "native f32" below; f16/bf16 go
through f32):

- exp: k = rint(x/ln2) (shifter trick, no float->int conversion), r = x - k*ln2 with a
  42-bit ln2_hi (exact) and ln2_lo, kept as a double-double (rh, rl); e^r = 1 + p with
  p = r + r^2*Q(r) (degree-10 Q, our own weighted minimax fit, < 2^-60) plus rl*(1+r);
  the result is scaled by 2^k in two exact steps, so subnormal results round once.
- exp2: k = rint(x), r = x - k exact, (r*ln2) as a double-double, then as exp.
- log/log2: x = 2^e*m, m in [sqrt(1/2), sqrt(2)), f = m-1, s = f/(2+f) as a double-double
  (one division), log1p(f) = 2s + s^3*R(s^2) (degree 7); log = e*ln2 + log1p(f) and
  log2 = e + log1p(f)*log2(e) summed in double-double (exact at powers of two).
- pow: log|x| as a double-double (same kernel), y*log|x| as a double-double, exp of it
  (same kernel, the low part enters r); C99 special cases; odd-integer y keeps the sign.
- powi: pow with the integer's exact parity (so |n| > 2^53 keeps its sign right); constant
  exponents 0..3 (powi, or pow with a constant 0.0..3.0) take a few products instead
  (``_powi_small``, about 0.5 ulp).
- sin/cos/tan: |x| < 2^19: Cody-Waite with pi/2 in four parts (33+33+53+53 bits; the
  first two products are exact, the rest is summed in double-double); larger |x|:
  Payne-Hanek (``_reduce_large``, a separate non-inlined function): the 53-bit mantissa
  times a 192-bit window of 2/pi (a 1280-bit table) in 64-bit integer arithmetic gives
  the quadrant and 128 fraction bits, turned into a double-double times pi/2.
  Polynomials (degree 5 in r^2) take the double-double r; cos uses the exact error of
  1 - r^2/2; tan divides the unrounded sin and cos in double-double.  sin and cos evaluate
  only the polynomial their quadrant needs, its coefficients loaded from a table in pairs
  (128-bit loads, as CUDA's sin/cos; ``_sin_or_cos``).
- sinh/cosh/tanh: from one exp kernel of |x|: expm1 as a double-double (k >= 0);
  sinh = (t + t/(t+1))/2, tanh = t/(t+2) with t = expm1(2|x|), cosh = (E + 1/E)/2; large
  |x| scale exp by 2^(k-1) (no spurious overflow).
- atan2: a = min/max in double-double, atan(a) = a + a^3*P(a^2) (degree 22 on [0,1]),
  then 0, pi/2 or pi +- atan(a) in double-double (operands pre-scaled when huge/tiny).
- rsqrt: 1/sqrt(x) with sqrt.rn and div.rn, refined by one Newton step whose residual
  1 - x y^2 is formed exactly (f32 stays in f32).

Measured bounds are in test/test_libm.py (ULP dict); all are below 1.1 ulp for f64 and
below 1.75 ulp for f32 (native f32; only rsqrt is shared with the f64 code).

Each function's body runs in a basic block of its own behind a NaN test (``_define``), which
keeps ptxas from interleaving a kernel's math functions into one register-hungry block.
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

F32, F64 = ir.FloatType(), ir.DoubleType()
I1, I32, I64, I128 = ir.IntType(1), ir.IntType(32), ir.IntType(64), ir.IntType(128)

H = float.fromhex


def _hexs(*xs: str) -> tuple[float, ...]:
    return tuple(float.fromhex(x) for x in xs)


# -- constants (computed with mpmath, see test/test_libm.py::test_constants) ----------------
LN2_HI, LN2_LO = H("0x1.62e42fefa3800p-1"), H("0x1.ef35793c76730p-45")    # 42-bit hi
LN2_H, LN2_L = H("0x1.62e42fefa39efp-1"), H("0x1.abc9e3b39803fp-56")      # double-double
LOG2E_H, LOG2E_L = H("0x1.71547652b82fep+0"), H("0x1.777d0ffda0d24p-56")
INV_LN2 = LOG2E_H
PIO2_1, PIO2_2, PIO2_3, PIO2_4 = _hexs("0x1.921fb54400000p+0", "0x1.0b4611a600000p-34",
                                       "0x1.3198a2e037073p-69", "0x1.129024e088a68p-123")
PIO2_H, PIO2_L = H("0x1.921fb54442d18p+0"), H("0x1.1a62633145c07p-54")
PI_H, PI_L = H("0x1.921fb54442d18p+1"), H("0x1.1a62633145c07p-53")
TWO_OVER_PI = H("0x1.45f306dc9c883p-1")
SHIFTER = H("0x1.8p52")
TWO_THIRDS_L = H("0x1.5555555555555p-55")          # 2/3 - LOG_R[0]

#: e^r = 1 + r + r^2 Q(r), |r| <= 0.3467
EXP_Q = _hexs("0x1.0000000000000p-1", "0x1.555555555555bp-3", "0x1.5555555555503p-5",
              "0x1.111111110ec48p-7", "0x1.6c16c16c30583p-10", "0x1.a01a01b386a38p-13",
              "0x1.a01a01365f026p-16", "0x1.71ddf00b89da1p-19", "0x1.27e5b4814f25bp-22",
              "0x1.af6c0d636ca8ep-26", "0x1.1e3d0a52b71f1p-29")
#: log1p(f) = 2 s + (2/3) s^3 + s^5 R(z), s = f / (2 + f), z = s^2 <= 0.0295 (R = LOG_R[1:])
LOG_R = _hexs("0x1.5555555555555p-1", "0x1.9999999999993p-2", "0x1.2492492493600p-2",
              "0x1.c71c71c4eae65p-3", "0x1.745d1870ae5ffp-3", "0x1.3b1353fb364a4p-3",
              "0x1.1122b31fd57dep-3", "0x1.dde9f85e94d37p-4", "0x1.ed42a6124f08cp-4")
#: sin r = r + r z S(z), cos r = 1 - z/2 + z^2 C(z), z = r^2 <= (pi/4)^2
SIN_S = _hexs("-0x1.5555555555548p-3", "0x1.111111110f740p-7", "-0x1.a01a019be8946p-13",
              "0x1.71de3552cc6dfp-19", "-0x1.ae5e485e811d1p-26", "0x1.5d8a17c7c63bdp-33")
COS_C = _hexs("0x1.555555555554ap-5", "-0x1.6c16c16c14e17p-10", "0x1.a01a019c5e80cp-16",
              "-0x1.27e4f7cee207ap-22", "0x1.1ee9c461c8b07p-29", "-0x1.8f9a69e0b4501p-37")
#: atan a = a + a z P(z), z = a^2 <= 1
ATAN_P = _hexs("-0x1.5555555555555p-2", "0x1.9999999999917p-3", "-0x1.249249248f965p-3",
               "0x1.c71c71c632a81p-4", "-0x1.745d172dd153ap-4", "0x1.3b13af9607fc6p-4",
               "-0x1.1110fc93eba31p-4", "0x1.e1e067796ef9ap-5", "-0x1.af1dfb0a39227p-5",
               "0x1.85dea19bb47acp-5", "-0x1.632dc12a9c088p-5", "0x1.4420974dc3009p-5",
               "-0x1.25057ea05ce32p-5", "0x1.015c3d049721dp-5", "-0x1.aaf5d4231a899p-6",
               "0x1.43234cfb07f13p-6", "-0x1.adecb2550ee2fp-7", "0x1.e3b90879491d6p-8",
               "-0x1.b98268ea8a125p-9", "0x1.36f4b290f576dp-10", "-0x1.3b015b0406455p-12",
               "0x1.96904003ee85dp-15", "-0x1.f47c92c993a9fp-19")


def _two_over_pi_words(count: int = 20) -> list[int]:
    """Bits 1 .. 64*count of 2/pi (bit k weighs 2^-k), as 64-bit words, most significant
    first; integer arithmetic only (Machin's formula for pi with 64 guard bits)."""
    prec = 64 * count + 128
    one = 1 << prec

    def arctan_inv(n: int) -> int:
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total
    pi = 4 * (4 * arctan_inv(5) - arctan_inv(239))       # pi * 2^prec
    frac = (2 << (2 * prec)) // pi                         # 2/pi * 2^prec
    bits = frac >> (prec - 64 * count)
    return [(bits >> (64 * (count - 1 - i))) & (2**64 - 1) for i in range(count)]


#: one leading zero word (windows may start before bit 1), then 2/pi
TWO_OVER_PI_TABLE = [0] + _two_over_pi_words(20)


# -- a small IR vocabulary ------------------------------------------------------------------
class Ops:
    """Float/int helpers over one IRBuilder; ``t`` is the float type computed in."""

    def __init__(self, b: ir.IRBuilder, t: ir.Type = F64):
        self.b, self.t = b, t
        self.it = I64 if t == F64 else I32

    def c(self, v: float) -> ir.Constant:
        return ir.Constant(self.t, v)

    def i(self, v: int, t: ir.Type = I32) -> ir.Constant:
        return ir.Constant(t, v)

    def call(self, name: str, *args: ir.Value, ret: ir.Type | None = None) -> ir.Value:
        m = self.b.module
        fn = m.globals.get(name)
        if fn is None:
            fn = ir.Function(m, ir.FunctionType(ret or args[0].type, [a.type for a in args]), name=name)
        return self.b.call(fn, list(args))

    def sfx(self) -> str:
        return "f64" if self.t == F64 else "f32"

    def fma(self, a, x, y):
        return self.call(f"llvm.fma.{self.sfx()}", a, x, y)

    def abs(self, x):
        return self.call(f"llvm.fabs.{self.sfx()}", x)

    def copysign(self, x, s):
        return self.call(f"llvm.copysign.{self.sfx()}", x, s)

    def add(self, x, y):
        return self.b.fadd(x, y)

    def sub(self, x, y):
        return self.b.fsub(x, y)

    def mul(self, x, y):
        return self.b.fmul(x, y)

    def div(self, x, y):
        return self.b.fdiv(x, y)

    def neg(self, x):
        return self.b.fneg(x)

    def sel(self, c, x, y):
        return self.b.select(c, x, y)

    def lt(self, x, y):
        return self.b.fcmp_ordered("<", x, y)

    def gt(self, x, y):
        return self.b.fcmp_ordered(">", x, y)

    def eq(self, x, y):
        return self.b.fcmp_ordered("==", x, y)

    def isnan(self, x):
        return self.b.fcmp_unordered("uno", x, x)

    def bits(self, x):
        return self.b.bitcast(x, self.it)

    def from_bits(self, i):
        return self.b.bitcast(i, self.t)

    def signbit(self, x):
        return self.b.icmp_signed("<", self.bits(x), ir.Constant(self.it, 0))

    def horner(self, coeffs, x):
        """coeffs[0] + x coeffs[1] + ...; a coefficient is a float or an IR value."""
        c = [k if isinstance(k, ir.Value) else self.c(k) for k in coeffs]
        acc = c[-1]
        for k in reversed(c[:-1]):
            acc = self.fma(acc, x, k)
        return acc

    # -- error-free transformations and double-double helpers --------------------------------
    def two_sum(self, a, b):
        s = self.add(a, b)
        bb = self.sub(s, a)
        return s, self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))

    def fast_two_sum(self, a, b):
        """|a| >= |b| (or a == 0)."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))

    def two_prod(self, a, b):
        p = self.mul(a, b)
        return p, self.fma(a, b, self.neg(p))

    def recip(self, d, lo: float | None = None, hi: float | None = None, bits: int = 26):
        """1/d.  f64: div.rn.  f32: Newton's iteration from a linear minimax seed, FMAs only
        (div.rn/rcp.rn.f32 call a slow-path subroutine for extreme operands, and ptxas then
        keeps ~8 more registers for the whole kernel; .approx seeds are not used by default).
        With ``lo <= d <= hi`` known the seed works on d itself; else on d's mantissa, and the
        exponent is subtracted as an integer (d and 1/d normal, any sign).  The error is about
        max(2^-bits, half an ulp): the last step y + y (1 - d y) has an exact residual."""
        if self.t == F64:
            return self.div(self.c(1.0), d)
        if lo is not None:
            return self._newton_recip(d, lo, hi, bits)
        b, i = self.b, self.i
        ix = self.bits(d)
        y = self._newton_recip(self.from_bits(b.or_(b.and_(ix, i(0x7FFFFF)), i(0x3F800000))), 1.0, 2.0, bits)
        exp_d = b.and_(ix, i(0x7F800000))
        return self.from_bits(b.xor(b.sub(b.add(self.bits(y), i(0x3F800000)), exp_d),
                                    b.and_(ix, i(0x80000000))))

    def _newton_recip(self, d, lo: float, hi: float, bits: int):
        c1 = 2.0 / (lo * hi + (lo + hi) ** 2 / 4)        # 1 - d (c0 - c1 d) equioscillates
        c0, err = c1 * (lo + hi), 1.0 - c1 * lo * hi
        y = self.fma(d, self.c(-c1), self.c(c0))
        while True:
            y = self.fma(y, self.fma(self.neg(d), y, self.c(1.0)), y)
            err = err * err
            if err < 2.0 ** -bits:
                return y

    def dd_div(self, ah, al, bh, bl):
        """(ah + al) / (bh + bl) as a double-double (one reciprocal)."""
        inv = self.recip(bh)
        q = self.mul(ah, inv)
        r = self.add(self.fma(self.neg(q), bh, ah), self.sub(al, self.mul(q, bl)))
        return self.fast_two_sum(q, self.mul(r, inv))

    def pow2(self, k):
        """2^k for an i32 k in the normal exponent range."""
        return self.from_bits(self.b.shl(self.b.zext(self.b.add(k, self.i(1023)), I64), self.i(52, I64)))

    def scale(self, v, k):
        """v * 2^k (i32 k in [-1078, 1026]) with a single rounding."""
        k1 = self.b.ashr(k, self.i(1))
        return self.mul(self.mul(v, self.pow2(k1)), self.pow2(self.b.sub(k, k1)))

    def rint_shift(self, x, scale: float):
        """(kf, k): x*scale rounded to an integer, as a float and as an i32 (|x*scale| < 2^31)."""
        t = self.fma(x, self.c(scale), self.c(SHIFTER)) if scale != 1.0 else self.add(x, self.c(SHIFTER))
        kf = self.sub(t, self.c(SHIFTER))
        k = self.b.trunc(self.b.sub(self.bits(t), self.bits(self.c(SHIFTER))), I32)
        return kf, k


# -- function definition machinery ----------------------------------------------------------
def _define(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type],
            body: Callable[[Ops, list[ir.Value]], ir.Value], inline: bool = True,
            t: ir.Type = F64, nan_result: Callable[[Ops, list[ir.Value]], ir.Value] | None = None) -> ir.Function:
    """The internal function ``name`` (computing in ``t``), once per module.

    With ``nan_result``, a NaN operand branches to a block returning ``nan_result(o, args)``
    and ``body`` runs in a block of its own.  The branch is for ptxas rather than for NaNs:
    it schedules each basic block on its own, and a kernel's math functions inlined into one
    straight-line block get interleaved until their temporaries all live at once (the corpus'
    ew_transcendental f32 on sm_80: 38 registers in one block, 26 with each function in its own)."""
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(ret, args), name=name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline" if inline else "noinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    o, params = Ops(b, t), list(fn.args)
    if nan_result is not None:
        floats = [a for a in params if a.type == t]
        any_nan = b.fcmp_unordered("uno", floats[0], floats[-1])
        special, main = fn.append_basic_block("nan"), fn.append_basic_block("main")
        b.cbranch(any_nan, special, main)
        b.position_at_end(special)
        b.ret(nan_result(o, params))
        b.position_at_end(main)
    b.ret(body(o, params))
    return fn


def _nan_unary(o: Ops, args):
    return args[0]


def _nan_pow(o: Ops, args):
    """pow(x, y) with a NaN operand: 1 when y = 0 or x = 1 (C99), else NaN."""
    x, y = args
    return o.sel(o.b.or_(o.eq(y, o.c(0.0)), o.eq(x, o.c(1.0))), o.c(1.0), o.add(x, y))


def _nan_powi(o: Ops, args):
    """powi(NaN, n): 1 for n = 0, else NaN."""
    x, n = args
    return o.sel(o.b.icmp_signed("==", n, ir.Constant(n.type, 0)), o.c(1.0), x)


def _nan_sum(o: Ops, args):
    return o.add(args[0], args[1])


#: what a NaN operand gives, per function (the guard of _define)
NAN_RESULT = {"pow": _nan_pow, "atan2": _nan_sum, "powi": _nan_powi}


# -- exp kernel -------------------------------------------------------------------------------
def _exp_reduce(o: Ops, xh, xl):
    """(k, rh, rl): xh + xl = k ln2 + rh + rl, |rh| <= ~0.347 (|xh| <= 746)."""
    kf, k = o.rint_shift(xh, INV_LN2)
    hi = o.fma(o.neg(kf), o.c(LN2_HI), xh)                  # exact (42-bit ln2_hi)
    lo = o.fma(kf, o.c(LN2_LO), o.neg(xl))
    rh, rl = o.two_sum(hi, o.neg(lo))
    return k, rh, rl


def _exp_poly(o: Ops, rh, rl):
    """(ph, pl) with e^(rh + rl) = 1 + ph + pl."""
    tail = o.mul(o.mul(rh, rh), o.horner(EXP_Q, rh))
    return o.fast_two_sum(rh, o.add(tail, o.fma(rl, rh, rl)))


def _one_plus(o: Ops, ph, pl):
    s, e = o.fast_two_sum(o.c(1.0), ph)
    return s, o.add(e, pl)


def _exp_kernel(o: Ops, xh, xl, lo: float = -746.0, hi: float = 710.0):
    """(k, ph, pl) for e^(xh + xl) = 2^k (1 + ph + pl), xh clamped to [lo, hi]."""
    xc = o.sel(o.gt(xh, o.c(hi)), o.c(hi), o.sel(o.lt(xh, o.c(lo)), o.c(lo), xh))
    xl = o.sel(o.eq(xc, xh), xl, o.c(0.0))
    k, rh, rl = _exp_reduce(o, xc, xl)
    ph, pl = _exp_poly(o, rh, rl)
    return k, ph, pl


def _exp_body(o: Ops, args):
    (x,) = args
    k, ph, pl = _exp_kernel(o, x, o.c(0.0))
    s, e = _one_plus(o, ph, pl)
    return o.scale(o.add(s, e), k)


def _exp2_body(o: Ops, args):
    (x,) = args
    x = o.sel(o.gt(x, o.c(1030.0)), o.c(1030.0), o.sel(o.lt(x, o.c(-1080.0)), o.c(-1080.0), x))
    kf, k = o.rint_shift(x, 1.0)
    r = o.sub(x, kf)                                            # exact, |r| <= 1/2
    rh, rl = o.two_prod(r, o.c(LN2_H))
    rl = o.fma(r, o.c(LN2_L), rl)
    ph, pl = _exp_poly(o, rh, rl)
    s, e = _one_plus(o, ph, pl)
    return o.scale(o.add(s, e), k)


def _expm1_pos(o: Ops, k, ph, pl):
    """2^k (1 + ph + pl) - 1 as a double-double, for 0 <= k <= 64."""
    a = o.sub(o.pow2(k), o.c(1.0))
    p2 = o.pow2(k)
    s, e = o.two_sum(a, o.mul(ph, p2))
    return o.fast_two_sum(s, o.add(e, o.mul(pl, p2)))


def _sinh_body(o: Ops, args):
    (x,) = args
    a = o.abs(x)
    k, ph, pl = _exp_kernel(o, a, o.c(0.0), lo=0.0, hi=711.0)
    # a <= 22: (t + t/(t+1)) / 2 with t = expm1(a); else e^a / 2
    kk = o.b.select(o.b.icmp_signed(">", k, o.i(40)), o.i(40), k)
    th, tl = _expm1_pos(o, kk, ph, pl)
    dh, dl = o.two_sum(th, o.c(1.0))
    uh, ul = o.dd_div(th, tl, dh, o.add(dl, tl))
    sh, sl = o.two_sum(th, uh)
    small = o.mul(o.add(sh, o.add(sl, o.add(tl, ul))), o.c(0.5))
    s1, e1 = _one_plus(o, ph, pl)
    large = o.scale(o.add(s1, e1), o.b.sub(k, o.i(1)))
    return o.copysign(o.sel(o.gt(a, o.c(22.0)), large, small), x)


def _cosh_body(o: Ops, args):
    (x,) = args
    a = o.abs(x)
    k, ph, pl = _exp_kernel(o, a, o.c(0.0), lo=0.0, hi=711.0)
    s1, e1 = _one_plus(o, ph, pl)
    large = o.scale(o.add(s1, e1), o.b.sub(k, o.i(1)))
    kk = o.b.select(o.b.icmp_signed(">", k, o.i(40)), o.i(40), k)
    p2 = o.pow2(kk)
    eh, el = o.mul(s1, p2), o.mul(e1, p2)                     # E = e^a, exact scaling
    inv = o.div(o.c(1.0), eh)
    rl = o.mul(inv, o.sub(o.fma(o.neg(inv), eh, o.c(1.0)), o.mul(inv, el)))
    sh, sl = o.fast_two_sum(eh, inv)
    small = o.mul(o.add(sh, o.add(sl, o.add(el, rl))), o.c(0.5))
    return o.sel(o.gt(a, o.c(22.0)), large, small)


def _tanh_body(o: Ops, args):
    (x,) = args
    a = o.abs(x)
    ac = o.sel(o.gt(a, o.c(22.0)), o.c(22.0), a)
    k, ph, pl = _exp_kernel(o, o.mul(ac, o.c(2.0)), o.c(0.0), lo=0.0, hi=45.0)
    th, tl = _expm1_pos(o, k, ph, pl)
    dh, dl = o.two_sum(th, o.c(2.0))
    qh, ql = o.dd_div(th, tl, dh, o.add(dl, tl))
    r = o.sel(o.gt(a, o.c(22.0)), o.c(1.0), o.add(qh, ql))
    return o.copysign(r, x)


# -- log kernel -------------------------------------------------------------------------------
def _log_kernel(o: Ops, x):
    """(e, lh, ll): x = 2^e (1 + f), log(1 + f) = lh + ll; for finite x > 0."""
    sub = o.lt(x, o.c(H("0x1p-1022")))
    xs = o.sel(sub, o.mul(x, o.c(H("0x1p54"))), x)
    ix = o.bits(xs)
    t = o.b.sub(ix, o.i(0x3FE6A09E667F3BCD, I64))
    e = o.b.ashr(t, o.i(52, I64))
    m = o.from_bits(o.b.sub(ix, o.b.shl(e, o.i(52, I64))))
    e = o.b.sub(o.b.trunc(e, I32), o.b.select(sub, o.i(54), o.i(0)))
    f = o.sub(m, o.c(1.0))                                       # exact
    d = o.add(o.c(2.0), f)
    dl = o.sub(f, o.sub(d, o.c(2.0)))
    inv = o.div(o.c(1.0), d)
    sh = o.mul(f, inv)
    sl = o.mul(o.sub(o.fma(o.neg(sh), d, f), o.mul(sh, dl)), inv)
    # 2 s + (2/3) s^3 + s^5 R'(z): the s^3 term in double-double (pow needs ~2^-66)
    zh, zl = o.two_prod(sh, sh)
    ch, cl = o.two_prod(sh, zh)
    cl = o.fma(sh, zl, o.fma(o.mul(zh, o.c(3.0)), sl, cl))
    th, tl = o.two_prod(ch, o.c(LOG_R[0]))
    tl = o.fma(cl, o.c(LOG_R[0]), o.fma(ch, o.c(TWO_THIRDS_L), tl))
    rest = o.mul(o.mul(ch, zh), o.horner(LOG_R[1:], zh))
    lh, x1 = o.fast_two_sum(o.mul(sh, o.c(2.0)), th)
    ll = o.add(x1, o.fma(sl, o.c(2.0), o.add(tl, rest)))
    lh, ll = o.fast_two_sum(lh, ll)
    return o.b.sitofp(e, o.t), lh, ll


def _log_special(o: Ops, x, r):
    """log-family results for x <= 0, inf, NaN."""
    r = o.sel(o.eq(x, o.c(float("inf"))), x, r)
    r = o.sel(o.lt(x, o.c(0.0)), o.c(float("nan")), r)
    r = o.sel(o.eq(x, o.c(0.0)), o.c(float("-inf")), r)
    return o.sel(o.isnan(x), x, r)


def _log_dd(o: Ops, x):
    """log(x) as a double-double."""
    ef, lh, ll = _log_kernel(o, x)
    s, err = o.two_sum(o.mul(ef, o.c(LN2_HI)), lh)              # e*ln2_hi exact
    return o.fast_two_sum(s, o.add(err, o.fma(ef, o.c(LN2_LO), ll)))


def _log_body(o: Ops, args):
    (x,) = args
    h, l = _log_dd(o, x)
    return _log_special(o, x, o.add(h, l))


def _log2_body(o: Ops, args):
    (x,) = args
    ef, lh, ll = _log_kernel(o, x)
    ph, pl = o.two_prod(lh, o.c(LOG2E_H))
    pl = o.fma(lh, o.c(LOG2E_L), o.fma(ll, o.c(LOG2E_H), pl))
    s, err = o.two_sum(ef, ph)
    return _log_special(o, x, o.add(s, o.add(err, pl)))


# -- pow ------------------------------------------------------------------------------------------
def _is_int(o: Ops, y):
    return o.eq(o.call(f"llvm.trunc.{o.sfx()}", y), y)


def _is_odd_int(o: Ops, y):
    half = o.mul(y, o.c(0.5))
    return o.b.and_(_is_int(o, y), o.b.fcmp_ordered("!=", o.call(f"llvm.trunc.{o.sfx()}", half), half))


def _pow_magnitude(o: Ops, ax, y):
    """|x|^y for finite |x| > 0 and finite y, with overflow/underflow."""
    lh, ll = _log_dd(o, ax)
    th, tl = o.two_prod(y, lh)
    tl = o.fma(y, ll, tl)
    k, ph, pl = _exp_kernel(o, th, tl)
    s, e = _one_plus(o, ph, pl)
    return o.scale(o.add(s, e), k)


def _pow_core(o: Ops, x, y, odd, yint, magnitude=None):
    """x^y with C99 pow's special cases, given whether y is an odd integer / an integer
    (``magnitude(o, |x|, y)`` computes |x|^y)."""
    inf, nan = o.c(float("inf")), o.c(float("nan"))
    ax, ay = o.abs(x), o.abs(y)
    finite_y = o.lt(ay, inf)
    ok = o.b.and_(o.b.and_(o.gt(ax, o.c(0.0)), o.lt(ax, inf)), finite_y)
    axs = o.sel(ok, ax, o.c(1.0))
    # |y| > 2^64 with |x| != 1 over/underflows anyway: clamp (keeps products finite)
    ys = o.sel(ok, o.sel(o.gt(ay, o.c(H("0x1p64"))), o.copysign(o.c(H("0x1p64")), y), y), o.c(0.0))
    if magnitude is None:
        mag = _pow_magnitude(o, axs, ys)
    else:
        mag = magnitude(o, axs, ys)
    # |x| = 0 or inf: 0^y = inf^-y
    zero_like = o.sel(o.eq(ax, o.c(0.0)), o.sel(o.lt(y, o.c(0.0)), inf, o.c(0.0)),
                      o.sel(o.lt(y, o.c(0.0)), o.c(0.0), inf))
    # y = +-inf: compare |x| with 1
    yinf = o.sel(o.eq(ax, o.c(1.0)), o.c(1.0),
                 o.sel(o.b.xor(o.gt(ax, o.c(1.0)), o.lt(y, o.c(0.0))), inf, o.c(0.0)))
    mag = o.sel(finite_y, o.sel(ok, mag, zero_like), yinf)
    neg = o.signbit(x)
    r = o.sel(o.b.and_(neg, odd), o.neg(mag), mag)
    finite_neg = o.b.and_(o.lt(x, o.c(0.0)), o.gt(x, o.c(float("-inf"))))
    bad_neg = o.b.and_(o.b.and_(finite_neg, finite_y), o.b.not_(yint))
    r = o.sel(bad_neg, nan, r)
    r = o.sel(o.b.or_(o.isnan(x), o.isnan(y)), o.add(x, y), r)
    one = o.b.or_(o.eq(y, o.c(0.0)), o.eq(x, o.c(1.0)))
    r = o.sel(o.b.and_(o.eq(ax, o.c(1.0)), o.b.not_(finite_y)), o.sel(o.isnan(y), r, o.c(1.0)), r)
    return o.sel(one, o.c(1.0), r)


def _pow_body(o: Ops, args):
    x, y = args
    return _pow_core(o, x, y, _is_odd_int(o, y), _is_int(o, y))


def _powi_body(o: Ops, args):
    x, n = args
    y = o.b.sitofp(n, o.t)
    odd = o.b.trunc(n, I1)
    return _pow_core(o, x, y, odd, ir.Constant(I1, 1))


# -- trigonometric argument reduction ------------------------------------------------------------
CW_LIMIT = H("0x1p19")


def _reduce_small(o: Ops, x):
    """(q, rh, rl): x = q pi/2 + rh + rl for |x| < 2^19 (Cody-Waite, four parts of pi/2)."""
    kf, q = o.rint_shift(x, TWO_OVER_PI)
    nk = o.neg(kf)
    r1 = o.fma(nk, o.c(PIO2_1), x)                               # exact
    r2, e2 = o.two_sum(r1, o.mul(nk, o.c(PIO2_2)))                # product exact
    h3, l3 = o.two_prod(nk, o.c(PIO2_3))
    r3, e3 = o.two_sum(r2, h3)
    tail = o.add(o.add(e2, e3), o.fma(nk, o.c(PIO2_4), l3))
    rh, rl = o.fast_two_sum(r3, tail)
    return q, rh, rl


def _table(module: ir.Module, addrspace: int, name: str = "__tileiras_libm_two_over_pi",
           words: list = TWO_OVER_PI_TABLE, ty: ir.Type = I64, align: int | None = None) -> ir.GlobalVariable:
    """The constant array ``words`` (unsigned ``ty`` integers, or doubles for F64) as an
    internal global, once."""
    g = module.globals.get(name)
    if g is None:
        at = ir.ArrayType(ty, len(words))
        g = ir.GlobalVariable(module, at, name=name, addrspace=addrspace)
        g.global_constant = True
        g.linkage = "internal"
        if ty == F64:
            g.align, values = align or 8, [ir.Constant(ty, w) for w in words]
        else:
            top = 1 << ty.width
            g.align, values = align or ty.width // 8, [ir.Constant(ty, w if w < top // 2 else w - top) for w in words]
        g.initializer = ir.Constant(at, values)
    return g


def _word(o: Ops, table, j):
    p = o.b.gep(table, [o.i(0, I32), j], inbounds=True)
    return o.b.load(p, typ=I64)


def _reduce_large_body(o: Ops, args, addrspace: int):
    """Payne-Hanek for finite |x| >= 2^19: returns q (i32 in the low bits) and r (hi, lo)
    packed in a struct {i32, double, double}."""
    (x,) = args
    b = o.b
    ix = o.bits(o.abs(x))
    m = b.or_(b.and_(ix, o.i(2**52 - 1, I64)), o.i(2**52, I64))
    s = b.sub(b.trunc(b.lshr(ix, o.i(52, I64)), I32), o.i(1075 - 190))   # x = m 2^(s-190)
    a = b.add(b.sub(s, o.i(191)), o.i(63))                              # first window bit, 0-based
    j = b.lshr(a, o.i(6))
    sh = b.zext(b.and_(a, o.i(63)), I64)
    table = _table(b.module, addrspace)
    w = [_word(o, table, b.add(j, o.i(i))) for i in range(4)]
    fshl = lambda hi, lo: o.call("llvm.fshl.i64", hi, lo, sh)  # noqa: E731
    w0, w1, w2 = fshl(w[0], w[1]), fshl(w[1], w[2]), fshl(w[2], w[3])
    mw = b.zext(m, I128)
    p2 = b.mul(mw, b.zext(w2, I128))
    p1 = b.mul(mw, b.zext(w1, I128))
    hi64 = lambda p: b.trunc(b.lshr(p, ir.Constant(I128, 64)), I64)  # noqa: E731
    lo64 = b.trunc(p2, I64)
    p2h = hi64(p2)
    mid64 = b.add(p2h, b.trunc(p1, I64))                    # carries by hand: no 64-bit
    carry = b.zext(b.icmp_unsigned("<", mid64, p2h), I64)   # add.cc chains
    top = b.add(b.add(hi64(p1), b.mul(m, w0)), carry)
    # top:mid:lo = x 2/pi mod 4 in units of 2^-190; quadrant = top bits, fraction signed
    fhi = b.or_(b.shl(top, o.i(2, I64)), b.lshr(mid64, o.i(62, I64)))
    flo = b.or_(b.shl(mid64, o.i(2, I64)), b.lshr(lo64, o.i(62, I64)))
    q = b.trunc(b.lshr(top, o.i(62, I64)), I32)
    q = b.add(q, b.zext(b.icmp_signed("<", fhi, o.i(0, I64)), I32))
    # fraction (fhi:flo as a signed 128-bit number times 2^-128) -> three exact doubles
    fa = b.sitofp(b.ashr(fhi, o.i(11, I64)), F64)
    fb = b.uitofp(b.or_(b.shl(b.and_(fhi, o.i(2047, I64)), o.i(42, I64)), b.lshr(flo, o.i(22, I64))), F64)
    fc = b.uitofp(b.and_(flo, o.i(2**22 - 1, I64)), F64)
    fh, fl = o.two_sum(o.mul(fa, o.c(H("0x1p-53"))), o.mul(fb, o.c(H("0x1p-106"))))
    fl = o.fma(fc, o.c(H("0x1p-128")), fl)
    fh, fl = o.fast_two_sum(fh, fl)
    rh, rl = o.two_prod(fh, o.c(PIO2_H))
    rl = o.fma(fh, o.c(PIO2_L), o.fma(fl, o.c(PIO2_H), rl))
    rh, rl = o.fast_two_sum(rh, rl)
    neg = o.signbit(x)
    q = b.select(neg, b.neg(q), q)
    rh, rl = o.sel(neg, o.neg(rh), rh), o.sel(neg, o.neg(rl), rl)
    st = ir.LiteralStructType([I32, F64, F64])
    v = b.insert_value(ir.Constant(st, ir.Undefined), q, 0)
    v = b.insert_value(v, rh, 1)
    return b.insert_value(v, rl, 2)


def _reduce(o: Ops, x, addrspace: int):
    """(q, rh, rl) for finite x; |x| >= 2^19 calls the Payne-Hanek function (a branch)."""
    b = o.b
    q0, rh0, rl0 = _reduce_small(o, o.sel(o.lt(o.abs(x), o.c(CW_LIMIT)), x, o.c(0.0)))
    big = o.b.fcmp_unordered(">=", o.abs(x), o.c(CW_LIMIT))
    start = b.block
    fn = b.function
    slow = fn.append_basic_block("reduce.large")
    join = fn.append_basic_block("reduce.join")
    b.cbranch(big, slow, join)
    b.position_at_end(slow)
    st = ir.LiteralStructType([I32, F64, F64])
    large = _define(b.module, f"__tileiras_reduce_large_as{addrspace}", st, [F64],
                    lambda oo, a: _reduce_large_body(oo, a, addrspace), inline=False)
    v = b.call(large, [x])
    q1, rh1, rl1 = (b.extract_value(v, i) for i in range(3))
    b.branch(join)
    b.position_at_end(join)
    out = []
    for fast, slow_v, ty in ((q0, q1, I32), (rh0, rh1, F64), (rl0, rl1, F64)):
        phi = b.phi(ty)
        phi.add_incoming(fast, start)
        phi.add_incoming(slow_v, slow)
        out.append(phi)
    return out


def _sin_poly(o: Ops, rh, rl, coeffs=SIN_S):
    z = o.mul(rh, rh)
    t = o.mul(o.mul(rh, z), o.horner(coeffs, z))
    return o.fast_two_sum(rh, o.add(t, o.mul(rl, o.fma(z, o.c(-0.5), o.c(1.0)))))


def _cos_poly(o: Ops, rh, rl, coeffs=COS_C):
    zh, zl = o.two_prod(rh, rh)
    hz = o.mul(zh, o.c(0.5))
    w = o.sub(o.c(1.0), hz)
    corr = o.sub(o.sub(o.sub(o.c(1.0), w), hz), o.mul(zl, o.c(0.5)))
    c4 = o.mul(o.mul(zh, zh), o.horner(coeffs, zh))
    return o.fast_two_sum(w, o.add(corr, o.fma(o.neg(rh), rl, c4)))


def _sincos_coeffs(o: Ops, cos_quadrant, addrspace: int) -> list[ir.Value]:
    """The coefficients of S (SIN_S) or, where ``cos_quadrant``, of C (COS_C), lowest first.
    f32 selects between immediates; f64 loads them as pairs (128-bit loads, as CUDA's sin/cos)
    from a table [S5 S4 S3 S2 S1 S0 C5 ... C0], so only one polynomial is evaluated."""
    if o.t == F32:
        return [o.sel(cos_quadrant, o.c(c), o.c(s)) for s, c in zip(SIN_S32, COS_C32)]
    b = o.b
    n = len(SIN_S)
    table = _table(b.module, addrspace, "__tileiras_libm_sincos_coeffs",
                   list(reversed(SIN_S)) + list(reversed(COS_C)), F64, align=16)
    base = b.select(cos_quadrant, o.i(n), o.i(0))
    vec = ir.VectorType(F64, 2)
    high_first = []
    for k in range(0, n, 2):
        p = b.gep(table, [o.i(0), b.add(base, o.i(k))], inbounds=True)
        pair = b.load(b.bitcast(p, vec.as_pointer(addrspace)), align=16)
        high_first += [b.extract_element(pair, o.i(0)), b.extract_element(pair, o.i(1))]
    return list(reversed(high_first))


def _sin_or_cos(o: Ops, rh, rl, cos_quadrant, addrspace: int):
    """sin(rh + rl), or cos(rh + rl) where ``cos_quadrant``, evaluating one polynomial: the
    terms of _sin_poly and _cos_poly (the same roundings) with selected coefficients, head,
    multiplier and low part; fewer live values than both polynomials and a select."""
    z = o.mul(rh, rh)
    poly = o.horner(_sincos_coeffs(o, cos_quadrant, addrspace), z)
    hz = o.mul(z, o.c(0.5))
    w = o.sub(o.c(1.0), hz)
    zl = o.fma(rh, rh, o.neg(z))
    cos_low = o.sub(o.sub(o.sub(o.c(1.0), w), hz), o.fma(zl, o.c(0.5), o.mul(rh, rl)))
    sin_low = o.mul(rl, o.fma(z, o.c(-0.5), o.c(1.0)))
    head = o.sel(cos_quadrant, w, rh)
    mult = o.mul(o.sel(cos_quadrant, z, rh), z)
    return o.add(head, o.fma(mult, poly, o.sel(cos_quadrant, cos_low, sin_low)))


def _trig_body(which: str, addrspace: int, f32: bool = False):
    def body(o: Ops, args):
        (x,) = args
        b = o.b
        finite = o.lt(o.abs(x), o.c(float("inf")))
        xf = o.sel(finite, x, o.c(0.0))
        q, rh, rl = (_reduce32 if f32 else _reduce)(o, xf, addrspace)
        if which == "tan":
            sh, sl = _sin_poly(o, rh, rl, SIN_S32 if f32 else SIN_S)
            ch, cl = _cos_poly(o, rh, rl, COS_C32 if f32 else COS_C)
            odd = b.trunc(q, I1)
            nh, nl = o.sel(odd, o.neg(ch), sh), o.sel(odd, o.neg(cl), sl)
            dh, dl = o.sel(odd, sh, ch), o.sel(odd, sl, cl)
            qh, ql = o.dd_div(nh, nl, dh, dl)
            r = o.add(qh, ql)
        else:
            qq = q if which == "sin" else b.add(q, o.i(1))
            v = _sin_or_cos(o, rh, rl, b.trunc(qq, I1), addrspace)
            neg = b.trunc(b.lshr(qq, o.i(1)), I1)
            r = o.sel(neg, o.neg(v), v)
        if which != "cos":
            r = o.sel(o.eq(x, o.c(0.0)), x, r)                 # sign of zero
        return o.sel(finite, r, o.sub(x, x))
    return body


# -- atan2 ----------------------------------------------------------------------------------------
def _atan2_body(o: Ops, args):
    """atan2(n, d): the angle of (d, n), i.e. atan(n / d) in the right quadrant."""
    n, d = args
    b = o.b
    inf = o.c(float("inf"))
    an, ad = o.abs(n), o.abs(d)
    swap = o.gt(an, ad)
    mx, mn = o.sel(swap, an, ad), o.sel(swap, ad, an)
    f32 = o.t == F32
    big, down, up = (H("0x1p100"), H("0x1p-50"), H("0x1p50")) if f32 else (H("0x1p900"), H("0x1p-600"), H("0x1p600"))
    k = o.sel(o.gt(mx, o.c(big)), o.c(down), o.sel(o.lt(mx, o.c(1.0 / big)), o.c(up), o.c(1.0)))
    mx, mn = o.mul(mx, k), o.mul(mn, k)
    inv = o.div(o.c(1.0), mx)                 # a div.rn branch: measured fewer registers
    ah = o.mul(mn, inv)
    al = o.mul(o.fma(o.neg(ah), mx, mn), inv)
    ok = b.and_(o.gt(mx, o.c(0.0)), o.lt(mx, inf))
    both_inf = b.and_(o.eq(mn, inf), o.eq(mx, inf))
    ah = o.sel(ok, ah, o.sel(both_inf, o.c(1.0), o.c(0.0)))
    al = o.sel(ok, al, o.c(0.0))
    ah, al = o.fast_two_sum(ah, al)
    z = o.mul(ah, ah)
    tail = o.mul(o.mul(ah, z), o.horner(ATAN_P32 if f32 else ATAN_P, z))
    tl = o.add(tail, o.mul(al, o.recip(o.add(o.c(1.0), z), 1.0, 2.0, bits=8)))
    dneg = o.signbit(d)
    flip = b.xor(swap, dneg)
    th, tl = o.sel(flip, o.neg(ah), ah), o.sel(flip, o.neg(tl), tl)
    (p2h, p2l), (p1h, p1l) = ((PIO2_H32, PIO2_L32), (PI_H32, PI_L32)) if f32 else ((PIO2_H, PIO2_L), (PI_H, PI_L))
    bh = o.sel(swap, o.c(p2h), o.sel(dneg, o.c(p1h), o.c(0.0)))
    bl = o.sel(swap, o.c(p2l), o.sel(dneg, o.c(p1l), o.c(0.0)))
    s, e = o.two_sum(bh, th)
    r = o.add(s, o.add(e, o.add(bl, tl)))
    r = o.copysign(r, n)
    return o.sel(b.or_(o.isnan(n), o.isnan(d)), o.add(n, d), r)


def _rsqrt(o: Ops, x):
    """1/sqrt(x): sqrt.rn and div.rn, then one Newton step with the residual 1 - x y^2
    formed exactly (<= 0.5 + 2^-20 ulp); tiny and huge x are scaled so that y^2 is normal."""
    lim, sc = (900, 200) if o.t == F64 else (100, 64)
    tiny, huge = o.lt(x, o.c(2.0 ** -lim)), o.gt(x, o.c(2.0 ** lim))
    xs = o.mul(x, o.sel(tiny, o.c(2.0 ** sc), o.sel(huge, o.c(2.0 ** -sc), o.c(1.0))))
    y = o.div(o.c(1.0), o.call(f"llvm.sqrt.{o.sfx()}", xs))
    hh, hl = o.two_prod(y, y)
    e = o.sub(o.fma(o.neg(xs), hh, o.c(1.0)), o.mul(xs, hl))
    yr = o.fma(o.mul(y, o.c(0.5)), e, y)
    yr = o.mul(yr, o.sel(tiny, o.c(2.0 ** (sc // 2)), o.sel(huge, o.c(2.0 ** -(sc // 2)), o.c(1.0))))
    normal = o.b.and_(o.gt(x, o.c(0.0)), o.lt(x, o.c(float("inf"))))
    return o.sel(normal, yr, o.div(o.c(1.0), o.call(f"llvm.sqrt.{o.sfx()}", x)))


def _rsqrt_body(o: Ops, args):
    return _rsqrt(o, args[0])


# -- public interface -------------------------------------------------------------------------------
_BODIES = {
    "exp": _exp_body, "exp2": _exp2_body, "log": _log_body, "log2": _log2_body,
    "sinh": _sinh_body, "cosh": _cosh_body, "tanh": _tanh_body, "pow": _pow_body,
    "atan2": _atan2_body,
}
UNARY = ("exp", "exp2", "log", "log2", "sin", "cos", "tan", "sinh", "cosh", "tanh", "rsqrt")
BINARY = ("pow", "atan2")

#: address space of the Payne-Hanek table: global on the GPU (0 for a host JIT)
TABLE_ADDRSPACE = 1


def define(module: ir.Module, name: str, addrspace: int = TABLE_ADDRSPACE) -> ir.Function:
    """The f64 function ``name`` (see UNARY/BINARY, and ``powi``: (double, iN))."""
    if name in ("sin", "cos", "tan"):
        body = _trig_body(name, addrspace)
    elif name == "rsqrt":
        body = _rsqrt_body
    else:
        body = _BODIES[name]
    args = [F64, F64] if name in BINARY else [F64]
    return _define(module, f"__tileiras_{name}_f64", F64, args, body, nan_result=NAN_RESULT.get(name, _nan_unary))


def define_powi(module: ir.Module, width: int) -> ir.Function:
    return _define(module, f"__tileiras_powi_i{width}_f64", F64, [F64, ir.IntType(width)], _powi_body,
                   nan_result=_nan_powi)


# -- native f32 ---------------------------------------------------------------------------------------
# All f32 functions are computed in f32 with FMA (no .approx instruction, so the emulator
# measures the real error; no f64 arithmetic).  Register pressure is part of the design (ptxas
# interleaves everything of a straight-line block, e.g. 8 exps of a softmax row): values are
# formed late (exp's r^2), and reciprocals are Ops.recip's FMA-only Newton steps where that
# measured fewer registers (div.rn/sqrt.rn have slow-path subroutine calls; their branches
# also keep interleaved code apart, so pow, atan2's 1/max and rsqrt keep them):
# - exp/exp2: Cody-Waite with ln2 split hi/lo (the hi product is exact under FMA), Cephes
#   expf polynomial, scaling by 2^k in two exact steps (subnormal results round once);
# - log/log2: m in [sqrt(1/2), sqrt(2)), Cephes logf polynomial in f = m - 1, e*ln2 split;
#   log2 multiplies by log2(e) as a double-float;
# - sinh/cosh: (e^a +- e^-a)/2 with e^a = 2^k ((1 + r) + r^2 P(r)), 1 + r split exactly, and
#   e^-a = 2^-k / (1 + q), rounded once below 20 (Cephes sinhf polynomial below 1); tanh:
#   Cephes tanhf polynomial below 0.625, else 1 - 2^(1-k) / ((1 + 2^-k) + q);
# - sin/cos/tan: three-part Cody-Waite below 105615 (as CUDA's), else Payne-Hanek in 32-bit
#   integer arithmetic (``_reduce_large32``, inline in a rarely taken branch); Cephes sinf/cosf
#   polynomials (sin/cos: the quadrant's one, coefficients selected; tan: both, and a
#   double-float division);
# - pow: log|x| as a double-float (s = f/(2+f) series, ~2^-40), y*log|x| as a
#   double-float, exp with a three-part ln2;
# - powi, and pow(x, float(n)) for an i32 n: binary powering in f64 over the bits of |n| (a
#   loop, as NVIDIA's powi), the base kept as B - 1 (``_powi_core32``), about 0.5 ulp;
# - atan2: the generic body with an 11-term f32 minimax polynomial on [0, 1].
SHIFTER32 = H("0x1.8p23")
LOG2E32 = H("0x1.715476p+0")
LN2_HI32, LN2_LO32, LN2_LO2_32 = H("0x1.62e430p-1"), H("-0x1.05c610p-29"), H("-0x1.950d88p-54")
LN2_32, LN2_L32 = H("0x1.62e430p-1"), H("-0x1.05c610p-29")
LOG2E_H32, LOG2E_L32 = H("0x1.715476p+0"), H("0x1.4ae0c0p-26")
LN2_C1, LN2_C2 = 0.693359375, -2.12194440e-4            # Cephes: e*C1 exact
#: e^r = 1 + r + r^2 P(r), |r| <= ln2/2 (Cephes expf)
EXP_P32 = (5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3,
           1.3981999507e-3, 1.9875691500e-4)
#: log1p(f) = f - f^2/2 + f^3 P(f), f in [sqrt(1/2) - 1, sqrt(2) - 1] (Cephes logf)
LOG_P32 = (3.3333331174e-1, -2.4999993993e-1, 2.0000714765e-1, -1.6668057665e-1,
           1.4249322787e-1, -1.2420140846e-1, 1.1676998740e-1, -1.1514610310e-1, 7.0376836292e-2)
#: tanh x = x + x z P(z), |x| < 0.625 (Cephes tanhf)
TANH_P32 = (-3.33332819422e-1, 1.33314422036e-1, -5.37397155531e-2, 2.06390887954e-2,
            -5.70498872745e-3)
#: sinh x = x + x z P(z), |x| < 1 (Cephes sinhf)
SINH_P32 = (1.66667160211e-1, 8.33028376239e-3, 2.03721912945e-4)
SIN_S32 = (-1.6666654611e-1, 8.3321608736e-3, -1.9515295891e-4)
COS_C32 = (4.166664568298827e-2, -1.388731625493765e-3, 2.443315711809948e-5)
PIO2_A32, PIO2_B32, PIO2_C32 = H("0x1.921fb4p+0"), H("0x1.4442d2p-24"), H("-0x1.ee59dap-50")
TWO_OVER_PI32 = H("0x1.45f306p-1")
CW_LIMIT32 = 105615.0


def _rint32(o: Ops, x, scale: float = 1.0):
    """(kf, k): x*scale rounded to an integer (|x*scale| < 2^22), as f32 and i32."""
    t = o.fma(x, o.c(scale), o.c(SHIFTER32)) if scale != 1.0 else o.add(x, o.c(SHIFTER32))
    return o.sub(t, o.c(SHIFTER32)), o.b.sub(o.bits(t), o.bits(o.c(SHIFTER32)))


def _pow2_32(o: Ops, k):
    return o.from_bits(o.b.shl(o.b.add(k, o.i(127)), o.i(23)))


def _scale32(o: Ops, v, k):
    """v * 2^k (k in [-252, 254]) with a single rounding."""
    k1 = o.b.ashr(k, o.i(1))
    return o.mul(o.mul(v, _pow2_32(o, k1)), _pow2_32(o, o.b.sub(k, k1)))


def _clamp(o: Ops, x, lo: float, hi: float):
    return o.sel(o.gt(x, o.c(hi)), o.c(hi), o.sel(o.lt(x, o.c(lo)), o.c(lo), x))


def _exp32_reduce(o: Ops, x, hi: float = 89.0):
    """(r, rp, k): e^x = 2^k (1 + r + r rp), rp = r P(r), |r| <= ln2/2 (x clamped to [-104, hi]).
    r^2 is not formed before P(r), so only k, r and the Horner sum are live while several exps
    interleave (a softmax row: 8 per thread)."""
    x = _clamp(o, x, -104.0, hi)
    kf, k = _rint32(o, x, LOG2E32)
    r = o.fma(o.neg(kf), o.c(LN2_HI32), x)                       # exact
    r = o.fma(o.neg(kf), o.c(LN2_LO32), r)
    return r, o.mul(r, o.horner(EXP_P32, r)), k


def _exp32_parts(o: Ops, x, hi: float = 89.0):
    """(q, k): e^x = (1 + q) 2^k, |q| <= sqrt(2) - 1 (x clamped to [-104, hi])."""
    r, rp, k = _exp32_reduce(o, x, hi)
    return o.fma(r, rp, r), k


def _exp32(o: Ops, x):
    q, k = _exp32_parts(o, x)
    return _scale32(o, o.add(o.c(1.0), q), k)


def _sinhcosh32(o: Ops, a, sign: float):
    """e^a / 2 + sign e^-a / 2 for a >= 0.  Below 20: 2^(k-1) (1 + r + r rp) + sign 2^(-k-1) / (1 + q)
    with 1 + r split exactly, so that only small terms round before the final fma."""
    r, rp, k = _exp32_reduce(o, a, hi=90.0)
    m = o.add(o.c(1.0), o.fma(r, rp, r))
    h = _scale32(o, m, o.b.sub(k, o.i(1)))                        # e^a / 2, overflows like sinh
    km = o.b.select(o.lt(a, o.c(20.0)), k, o.i(1))
    sc = _pow2_32(o, o.b.sub(km, o.i(1)))
    t = o.mul(o.recip(m, 0.7, 1.42), _pow2_32(o, o.b.sub(o.i(-1), km)))
    s, rl = o.fast_two_sum(o.c(1.0), r)                            # 1 + r = s + rl exactly
    low = o.fma(o.fma(r, rp, rl), sc, t if sign > 0 else o.neg(t))
    mid = o.fma(s, sc, low)
    return o.sel(o.lt(a, o.c(20.0)), mid, h)


def _sinh_body32(o: Ops, args):
    (x,) = args
    a = o.abs(x)
    z = o.mul(x, x)
    small = o.fma(o.mul(x, z), o.horner(SINH_P32, z), x)
    return o.copysign(o.sel(o.lt(a, o.c(1.0)), small, _sinhcosh32(o, a, -1.0)), x)


def _cosh_body32(o: Ops, args):
    return _sinhcosh32(o, o.abs(args[0]), 1.0)


def _exp_body32(o: Ops, args):
    return _exp32(o, args[0])


def _exp2_body32(o: Ops, args):
    x = _clamp(o, args[0], -152.0, 129.0)
    kf, k = _rint32(o, x)
    r = o.sub(x, kf)                                              # exact, |r| <= 1/2
    th = o.mul(r, o.c(LN2_32))
    tl = o.fma(r, o.c(LN2_L32), o.fma(r, o.c(LN2_32), o.neg(th)))
    p = o.add(o.fma(o.mul(th, th), o.horner(EXP_P32, th), tl), th)
    return _scale32(o, o.add(o.c(1.0), p), k)


def _log_kernel32(o: Ops, x):
    """(e, f, y): x = 2^e (1 + f), f in [sqrt(1/2) - 1, sqrt(2) - 1), log1p(f) = f + y."""
    ef, f = _split_mantissa32(o, x)
    z = o.mul(f, f)
    y = o.fma(o.mul(f, z), o.horner(LOG_P32, f), o.mul(z, o.c(-0.5)))
    return ef, f, y


def _split_mantissa32(o: Ops, x):
    """(e as a float, f): x = 2^e (1 + f) with f in [sqrt(1/2) - 1, sqrt(2) - 1), f exact;
    subnormal x is scaled by 2^23 first."""
    b = o.b
    sub = o.lt(x, o.c(H("0x1p-126")))
    ix = o.bits(o.sel(sub, o.mul(x, o.c(H("0x1p23"))), x))
    t = b.add(ix, o.i(0x3F800000 - 0x3F3504F3))
    e = b.sub(b.ashr(t, o.i(23)), o.i(127))
    f = o.sub(o.from_bits(b.add(b.and_(t, o.i(0x7FFFFF)), o.i(0x3F3504F3))), o.c(1.0))   # exact
    return b.sitofp(b.sub(e, b.select(sub, o.i(23), o.i(0))), o.t), f


def _log_body32(o: Ops, args):
    (x,) = args
    ef, f, y = _log_kernel32(o, x)
    r = o.fma(ef, o.c(LN2_C1), o.add(f, o.fma(ef, o.c(LN2_C2), y)))
    return _log_special(o, x, r)


def _log2_body32(o: Ops, args):
    (x,) = args
    ef, f, y = _log_kernel32(o, x)
    ph = o.mul(f, o.c(LOG2E_H32))
    pl = o.fma(f, o.c(LOG2E_L32), o.fma(f, o.c(LOG2E_H32), o.neg(ph)))
    pl = o.fma(y, o.c(LOG2E_H32), pl)
    s, err = o.fast_two_sum(ef, ph)                               # ef integer: |ef| >= |ph| or 0
    return _log_special(o, x, o.add(s, o.add(err, pl)))


def _tanh_body32(o: Ops, args):
    (x,) = args
    a = o.abs(x)
    z = o.mul(x, x)
    small = o.fma(o.mul(x, z), o.horner(TANH_P32, z), x)
    # 1 - 2 / (e^2a + 1) with e^2a = 2^k (1 + q), k >= 2: 2 / (e^2a + 1) = 2^(1-k) / d with
    # d = (1 + 2^-k) + q in [0.7, 1.67] (one rounding); tanh = 1 above 9.5 in f32
    q, k = _exp32_parts(o, o.mul(o.sel(o.gt(a, o.c(9.5)), o.c(9.5), a), o.c(2.0)))
    d = o.add(o.add(o.c(1.0), _pow2_32(o, o.b.neg(k))), q)
    large = o.sub(o.c(1.0), o.mul(o.recip(d, 0.7, 1.67), _pow2_32(o, o.b.sub(o.i(1), k))))
    return o.copysign(o.sel(o.lt(a, o.c(0.625)), small, large), x)


#: 2/pi in 32-bit words, most significant first, after one zero word (the window of a
#: |x| < 2^17 starts before bit 1); 192 bits reach the largest f32
TWO_OVER_PI_WORDS32 = [0] + [w >> sh & 0xFFFFFFFF for w in _two_over_pi_words(3) for sh in (32, 0)]


def _reduce_large32(o: Ops, x, addrspace: int):
    """(q, rh, rl): Payne-Hanek for finite f32 |x| >= 2^16, in 32-bit integer arithmetic.

    |x| = P 2^(e-158) with the mantissa P left-aligned in 32 bits (e: the biased exponent).
    The product of P with four words of 2/pi starting at word e/32 - 4 (32x32->64-bit products
    and a carry chain, as CUDA's sinf) holds x 2/pi mod 4 in its bits 32..127 (the words before
    contribute multiples of 4, those after less than bit 32); a funnel shift by e mod 32 takes
    the 2 quadrant bits and 62 fraction bits.  The signed fraction (rounded to the nearest
    quadrant) is split into three exact floats, summed as a double-float and multiplied by pi/2
    in double-float arithmetic."""
    b = o.b
    i = o.i
    ix = b.and_(o.bits(x), i(0x7FFFFFFF))
    e = b.lshr(ix, i(23))
    m = b.or_(b.shl(ix, i(8)), i(0x80000000))
    table = _table(b.module, addrspace, "__tileiras_libm_two_over_pi32", TWO_OVER_PI_WORDS32, I32)
    j = b.sub(b.lshr(e, i(5)), i(4))
    w = [b.load(b.gep(table, [i(0), b.add(j, i(k))], inbounds=True), typ=I32) for k in range(4)]
    m64 = b.zext(m, I64)
    prod = lambda wk: b.mul(m64, b.zext(wk, I64))  # noqa: E731 - mul.wide.u32
    acc = b.add(b.lshr(prod(w[3]), o.i(32, I64)), prod(w[2]))
    a1 = b.trunc(acc, I32)
    acc = b.add(b.lshr(acc, o.i(32, I64)), prod(w[1]))
    a2 = b.trunc(acc, I32)
    a3 = b.add(b.trunc(b.lshr(acc, o.i(32, I64)), I32), b.mul(m, w[0]))
    sh = b.and_(e, i(31))
    hi = o.call("llvm.fshl.i32", a3, a2, sh)                     # quadrant: top 2 bits
    lo = o.call("llvm.fshl.i32", a2, a1, sh)
    q = b.lshr(b.add(hi, i(1 << 29)), i(30))                       # rounded (mod 4)
    fhi = o.call("llvm.fshl.i32", hi, lo, i(2))                   # signed fraction, 2^-32 units
    flo = b.shl(lo, i(2))
    fa = b.sitofp(b.ashr(fhi, i(8)), F32)                          # bits 40..63 (signed)
    fb = b.uitofp(b.or_(b.shl(b.and_(fhi, i(255)), i(16)), b.lshr(flo, i(16))), F32)
    fc = b.uitofp(b.and_(flo, i(0xFFFF)), F32)
    fh, fl = o.fast_two_sum(o.mul(fa, o.c(H("0x1p-24"))), o.mul(fb, o.c(H("0x1p-48"))))
    fl = o.fma(fc, o.c(H("0x1p-64")), fl)
    rh, rl = o.two_prod(fh, o.c(PIO2_H32))
    rl = o.fma(fh, o.c(PIO2_L32), o.fma(fl, o.c(PIO2_H32), rl))
    rh, rl = o.fast_two_sum(rh, rl)
    neg = o.signbit(x)
    return b.select(neg, b.neg(q), q), o.sel(neg, o.neg(rh), rh), o.sel(neg, o.neg(rl), rl)


def _reduce32(o: Ops, x, addrspace: int):
    """(q, rh, rl) for finite f32 x: three-part Cody-Waite below 105615, else the 32-bit
    Payne-Hanek reduction, inline in a branch of its own (rarely taken)."""
    b = o.b
    small_x = o.lt(o.abs(x), o.c(CW_LIMIT32))
    xs = o.sel(small_x, x, o.c(0.0))
    kf, q0 = _rint32(o, xs, TWO_OVER_PI32)
    nk = o.neg(kf)
    r0 = o.fma(nk, o.c(PIO2_C32), o.fma(nk, o.c(PIO2_B32), o.fma(nk, o.c(PIO2_A32), xs)))
    start = b.block
    fn = b.function
    slow = fn.append_basic_block("reduce32.large")
    join = fn.append_basic_block("reduce32.join")
    b.cbranch(b.not_(small_x), slow, join)
    b.position_at_end(slow)
    q1, rh1, rl1 = _reduce_large32(o, x, addrspace)
    slow_end = b.block
    b.branch(join)
    b.position_at_end(join)
    out = []
    for fast, slow_v, ty in ((q0, q1, I32), (r0, rh1, F32), (o.c(0.0), rl1, F32)):
        phi = b.phi(ty)
        phi.add_incoming(fast, start)
        phi.add_incoming(slow_v, slow_end)
        out.append(phi)
    return out


#: log1p(f) = 2 s + (2/3) s^3 + s^5 R(z), z = s^2 (Taylor: the series converges fast)
LOG1P_R32 = tuple(2.0 / (2 * n + 1) for n in range(2, 8))
TWO_THIRDS_H32, TWO_THIRDS_L32 = H("0x1.555556p-1"), H("-0x1.555556p-26")
LN2_C2H, LN2_C2L = H("-0x1.bd0106p-13"), H("0x1.cf79acp-40")     # ln2 - 0.693359375


def _log_dd32(o: Ops, x):
    """log(x) as a pair of floats (~2^-40 relative) for finite x > 0 (1/(2 + f) by div.rn)."""
    ef, f = _split_mantissa32(o, x)
    d = o.add(o.c(2.0), f)
    dl = o.sub(f, o.sub(d, o.c(2.0)))
    inv = o.div(o.c(1.0), d)
    sh = o.mul(f, inv)
    sl = o.mul(o.sub(o.fma(o.neg(sh), d, f), o.mul(sh, dl)), inv)
    zh, zl = o.two_prod(sh, sh)
    zl = o.fma(o.mul(sh, o.c(2.0)), sl, zl)
    ch, cl = o.two_prod(sh, zh)
    cl = o.fma(sh, zl, o.fma(sl, zh, cl))
    th, tl = o.two_prod(ch, o.c(TWO_THIRDS_H32))
    tl = o.fma(cl, o.c(TWO_THIRDS_H32), o.fma(ch, o.c(TWO_THIRDS_L32), tl))
    rest = o.mul(o.mul(ch, zh), o.horner(LOG1P_R32, zh))
    lh, x1 = o.fast_two_sum(o.mul(sh, o.c(2.0)), th)
    ll = o.add(x1, o.fma(sl, o.c(2.0), o.add(tl, rest)))
    s1, err = o.fast_two_sum(o.mul(ef, o.c(LN2_C1)), lh)          # e*C1 exact; |e C1| >= |lh| or e = 0
    low = o.add(err, o.add(ll, o.fma(ef, o.c(LN2_C2H), o.mul(ef, o.c(LN2_C2L)))))
    return o.fast_two_sum(s1, low)


def _pow_magnitude32(o: Ops, ax, y):
    """|x|^y for finite |x| > 0, finite y."""
    lh, ll = _log_dd32(o, ax)
    th, tl = o.two_prod(y, lh)
    tl = o.fma(y, ll, tl)
    thc = _clamp(o, th, -104.0, 89.0)
    tl = o.sel(o.eq(thc, th), tl, o.c(0.0))
    kf, k = _rint32(o, thc, LOG2E32)
    r1 = o.fma(o.neg(kf), o.c(LN2_HI32), thc)                    # exact
    ph, pl = o.two_prod(kf, o.c(LN2_LO32))
    rh, rl = o.two_sum(r1, o.neg(ph))
    rl = o.add(rl, o.sub(tl, o.fma(kf, o.c(LN2_LO2_32), pl)))
    rh, rl = o.fast_two_sum(rh, rl)
    q = o.add(o.fma(o.mul(rh, rh), o.horner(EXP_P32, rh), o.fma(rl, rh, rl)), rh)
    return _scale32(o, o.add(o.c(1.0), q), k)


def _pow_body32(o: Ops, args):
    x, y = args
    return _pow_core(o, x, y, _is_odd_int(o, y), _is_int(o, y), _pow_magnitude32)


def _if_then(b: ir.IRBuilder, cond, then: Callable[[], ir.Value], other: ir.Value) -> ir.Value:
    """``then()`` where ``cond``, else ``other``, with ``then``'s code in a block of its own
    (ptxas schedules blocks apart: its temporaries do not overlap the code around it)."""
    start, fn = b.block, b.function
    blk, join = fn.append_basic_block("then"), fn.append_basic_block("join")
    b.cbranch(cond, blk, join)
    b.position_at_end(blk)
    v = then()
    end = b.block
    b.branch(join)
    b.position_at_end(join)
    phi = b.phi(other.type)
    phi.add_incoming(v, end)
    phi.add_incoming(other, start)
    return phi


def _recip_f64(d: Ops, a):
    """1/a for f64 a >= 0 within ~1/2 ulp, FMAs only (div.rn.f64's slow-path subroutine costs
    ~8 registers): Newton's iteration on a's mantissa (Ops._newton_recip), the exponent then
    subtracted as an integer.  Meant for 2^-1022 <= a < 2^200 (any f32 magnitude); 1/0 gives
    2^1023, and a >= 2^200 gives 0 (as infinity and a result that underflows f32 would)."""
    b = d.b
    bits = d.bits(a)
    expo = b.and_(bits, d.i(0x7FF << 52, I64))
    y = d._newton_recip(d.from_bits(b.or_(b.and_(bits, d.i(2**52 - 1, I64)), d.i(0x3FF << 52, I64))), 1.0, 2.0, 60)
    inv = d.from_bits(b.sub(b.add(d.bits(y), d.i(0x3FF << 52, I64)), expo))
    return d.sel(d.lt(a, d.c(H("0x1p200"))), inv, d.c(0.0))


def _one_minus_over(d: Ops, a):
    """(1 - a) / a = 1/a - 1 for an f32 value 0 <= a < 1 in f64: y - a y with one rounding."""
    y = _recip_f64(d, a)
    return d.fma(d.neg(a), y, y)


def _powi_body32(o: Ops, args):
    """x^n for f32 x and an integer n: binary powering, as NVIDIA's powi (a loop over the bits
    of |n|: few live values), in f64 and rounded once to f32.

    The loop powers B = max(|x|, 1/|x|) >= 1 (a final reciprocal when |x| < 1 xor n < 0), kept
    as t = B - 1 and squared as t (2 + t).  Plain squaring would double the base's relative
    error at every step (2^31 steps' worth of 2^-53 for |n| near 2^31); in t the error stays
    relative to t, i.e. absolute in log B, so the result is off by about |log(result)| 2^-46
    (under 2^-39 for a finite f32), plus 2^-53 per product.  1/|x| - 1 is formed as
    1/|x| - |x|/|x| in one rounding (the error stays relative to t)."""
    x, n = args
    b = o.b
    w = n.type.width
    it = ir.IntType(max(w, 32))
    nn = b.sext(n, it) if w < 32 else n
    neg = b.icmp_signed("<", nn, ir.Constant(it, 0))
    return _powi_core32(o, x, b.select(neg, b.neg(nn), nn), neg, b.trunc(n, I1))


def _pow_int_body32(o: Ops, args):
    """pow(x, y) for y = float(n), n an i32: binary powering with y's integer value (|y| <= 2^31:
    an unsigned i32), not a logarithm (see ``call``)."""
    x, y = args
    b = o.b
    m = b.fptoui(o.abs(y), I32)
    return _powi_core32(o, x, m, o.lt(y, o.c(0.0)), b.trunc(m, I1))


def _powi_core32(o: Ops, x, m0, neg_n, odd):
    """x^(+-m0) (m0 unsigned, minus where ``neg_n``; ``odd``: the exponent's parity): the loop
    of _powi_body32."""
    b = o.b
    d = Ops(b, F64)
    it = m0.type
    ax = b.fpext(o.abs(x), F64)
    small = d.lt(ax, d.c(1.0))
    invert = b.xor(small, neg_n)
    u0 = _if_then(b, small, lambda: _one_minus_over(d, ax), d.sub(ax, d.c(1.0)))
    pre = b.block
    fn = b.function
    loop, done = fn.append_basic_block("powi.loop"), fn.append_basic_block("powi.done")
    b.cbranch(b.icmp_unsigned("!=", m0, ir.Constant(it, 0)), loop, done)
    b.position_at_end(loop)
    m, acc, u = b.phi(it), b.phi(F64), b.phi(F64)
    acc1 = d.sel(b.trunc(m, I1), d.mul(acc, d.add(d.c(1.0), u)), acc)
    m1 = b.lshr(m, ir.Constant(it, 1))
    u1 = d.mul(u, d.add(d.c(2.0), u))
    b.cbranch(b.icmp_unsigned("!=", m1, ir.Constant(it, 0)), loop, done)
    for phi, first, nxt in ((m, m0, m1), (acc, d.c(1.0), acc1), (u, u0, u1)):
        phi.add_incoming(first, pre)
        phi.add_incoming(nxt, loop)
    b.position_at_end(done)
    p = b.phi(F64)
    p.add_incoming(d.c(1.0), pre)
    p.add_incoming(acc1, loop)
    r = b.fptrunc(_if_then(b, invert, lambda: _recip_f64(d, p), p), F32)
    return o.sel(b.and_(o.signbit(x), odd), o.neg(r), r)


def define_powi32(module: ir.Module, width: int) -> ir.Function:
    return _define(module, f"__tileiras_powi_i{width}_f32", F32, [F32, ir.IntType(width)], _powi_body32,
                   t=F32, nan_result=_nan_powi)


def define_pow_int32(module: ir.Module) -> ir.Function:
    return _define(module, "__tileiras_pow_int_f32", F32, [F32, F32], _pow_int_body32, t=F32, nan_result=_nan_pow)


def _int_as_float(y: ir.Value) -> bool:
    """Is ``y`` (an f32) an IR conversion of a signed integer of at most 32 bits?"""
    return (isinstance(y, ir.CastInstr) and y.opname == "sitofp" and y.type == F32
            and y.operands[0].type.width <= 32)


#: atan a = a + a z P(z), z = a^2 <= 1 (our weighted minimax fit, coefficients in f32)
ATAN_P32 = _hexs("-0x1.555554p-2", "0x1.999938p-3", "-0x1.248a2cp-3", "0x1.c66e4ap-4", "-0x1.700b1ap-4",
                 "0x1.29588ep-4", "-0x1.be97a2p-5", "0x1.1a6c62p-5", "-0x1.0b0bb6p-6", "0x1.42d8a0p-8",
                 "-0x1.6deb6cp-11")
PIO2_H32, PIO2_L32 = H("0x1.921fb6p+0"), H("-0x1.777a5cp-25")
PI_H32, PI_L32 = H("0x1.921fb6p+1"), H("-0x1.777a5cp-24")


_BODIES32 = {"exp": _exp_body32, "exp2": _exp2_body32, "log": _log_body32, "log2": _log2_body32,
             "tanh": _tanh_body32, "sinh": _sinh_body32, "cosh": _cosh_body32, "pow": _pow_body32,
             "atan2": _atan2_body}
NATIVE32 = ("exp", "exp2", "log", "log2", "tanh", "sinh", "cosh", "sin", "cos", "tan", "pow", "atan2")


def define32(module: ir.Module, name: str, addrspace: int = TABLE_ADDRSPACE) -> ir.Function:
    """The native f32 function ``name`` (one of NATIVE32)."""
    if name in ("sin", "cos", "tan"):
        body = _trig_body(name, addrspace, f32=True)
    else:
        body = _BODIES32[name]
    args = [F32, F32] if name in BINARY else [F32]
    return _define(module, f"__tileiras_{name}_f32", F32, args, body, t=F32,
                   nan_result=NAN_RESULT.get(name, _nan_unary))


def _f32_rsqrt(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    fn = _define(b.module, "__tileiras_rsqrt_f32", F32, [F32], _rsqrt_body, t=F32, nan_result=_nan_unary)
    return b.call(fn, [x])


#: integer exponents that powi evaluates with a few products (constant exponents only)
SMALL_POWI = (0, 1, 2, 3)


def _powi_small(o: Ops, x: ir.Value, n: int) -> ir.Value:
    """x^n for a constant n in SMALL_POWI, in x's own type: x*x is correctly rounded, and
    x^3 = hi*x + lo*x from the exact square hi + lo (one rounding of an almost exact sum,
    about 0.5 ulp; when x^2 overflows, hi*x).  Special values follow pow: x^0 = 1 even for
    NaN, signs of zeros and infinities as the products give them."""
    if o.t not in (F32, F64):   # f16/bf16: exact squares and a double rounding of 2^-24
        wide = _powi_small(Ops(o.b, F32), o.b.fpext(x, F32), n)
        return o.b.fptrunc(wide, o.t) if n > 1 else (x if n == 1 else o.c(1.0))
    if n == 0:
        return o.c(1.0)
    if n == 1:
        return x
    hi, lo = o.two_prod(x, x)
    if n == 2:
        return hi
    cube = o.fma(hi, x, o.mul(lo, x))
    return o.sel(o.eq(o.abs(hi), o.c(float("inf"))), o.mul(hi, x), cube)


def call(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    """``name`` applied to scalar floats of any width: f64 directly, narrower types through
    f64 (f32: one rounding of a < 0.51-ulp result) -- rsqrt f32 stays in f32."""
    t = args[0].type
    if name in ("powi", "pow") and isinstance(args[1], ir.Constant) and args[1].constant in SMALL_POWI:
        return _powi_small(Ops(b, t), args[0], int(args[1].constant))     # pow(x, 3.0) too
    if (name in NATIVE32 or name == "powi") and not isinstance(t, ir.DoubleType):
        if name == "powi":
            fn, wide = define_powi32(b.module, args[1].type.width), [args[0], args[1]]
        elif name == "pow" and _int_as_float(args[1]):      # pow(x, float(n)): as powi, exact
            fn, wide = define_pow_int32(b.module), list(args)
        else:
            fn, wide = define32(b.module, name), list(args)
        wide[0] = wide[0] if isinstance(t, ir.FloatType) else b.fpext(wide[0], F32)
        if name in BINARY:
            wide[1] = wide[1] if isinstance(t, ir.FloatType) else b.fpext(wide[1], F32)
        r = b.call(fn, wide)
        return r if isinstance(t, ir.FloatType) else b.fptrunc(r, t)
    if name == "rsqrt" and not isinstance(t, ir.DoubleType):
        wide = args[0] if isinstance(t, ir.FloatType) else b.fpext(args[0], F32)
        r = _f32_rsqrt(b, wide)
        return r if isinstance(t, ir.FloatType) else b.fptrunc(r, t)
    if name == "powi":
        x, n = args
        fn = define_powi(b.module, n.type.width)
        wide = x if isinstance(t, ir.DoubleType) else b.fpext(x, F64)
        r = b.call(fn, [wide, n])
    else:
        fn = define(b.module, name)
        wide = [a if isinstance(t, ir.DoubleType) else b.fpext(a, F64) for a in args]
        r = b.call(fn, wide)
    return r if isinstance(t, ir.DoubleType) else b.fptrunc(r, t)
