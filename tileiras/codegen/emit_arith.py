"""Element-wise ops: integer arithmetic, comparisons, conversions, pointers.

Each emitter maps a scalar function over the registers of its operands (all in
the same layout, TileAS saw to that).  Float arithmetic and the math functions are
``emit_math``'s (registered when this module is imported, at its end).
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from ..errors import CompileError
from ..ir import types as T
from ..ir.core import Operation
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile.enums import ComparisonOrdering, ComparisonPredicate, RoundingMode, Signedness
from . import intrinsics as X
from .nvvm import KernelEmitter, emits
from .values import BF16, TileVal, llvm_type

F32 = ir.FloatType()


def map_regs(em: KernelEmitter, op: Operation, fn: Callable[..., ir.Value], operands: int | None = None) -> None:
    n = len(op.operands) if operands is None else operands
    tiles = [em.tile(op, i) for i in range(n)]
    layout = em.result_layout(op.results[0])
    count = len(tiles[0].regs)
    em.put(op.results[0], TileVal(layout, [fn(*(t.regs[r] for t in tiles)) for r in range(count)]))


def map_pairs(em: KernelEmitter, op: Operation, pair: Callable[[ir.Value, ir.Value], tuple[ir.Value, ir.Value]]) -> None:
    """Like ``map_regs`` for a one-operand op whose instruction converts two registers at
    once (``cvt ... x2``): registers 0 and 1, 2 and 3 ... go through ``pair`` together (an
    odd last one with itself)."""
    tile = em.tile(op, 0)
    regs = tile.regs
    out: list[ir.Value] = []
    for r in range(0, len(regs), 2):
        x = regs[r]
        y = regs[r + 1] if r + 1 < len(regs) else x
        lo, hi = pair(x, y)
        out += [lo, hi] if r + 1 < len(regs) else [lo]
    em.put(op.results[0], TileVal(em.result_layout(op.results[0]), out))


def elem(op: Operation, i: int = 0) -> T.ScalarType:
    e = T.element_type(op.operands[i].type)
    assert isinstance(e, T.ScalarType)
    return e


def ptx_float(t: ir.Type) -> str:
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if t == BF16:
        return "bf16"
    return "f32"


PTX_ROUNDING = {RoundingMode.NEAREST_EVEN: "rn", RoundingMode.ZERO: "rz", RoundingMode.NEGATIVE_INF: "rm",
          RoundingMode.POSITIVE_INF: "rp"}


# -- integers -----------------------------------------------------------------------
def _int_binary(fn: Callable[[ir.IRBuilder, ir.Value, ir.Value], ir.Value]):
    def emit(em: KernelEmitter, op: Operation) -> None:
        map_regs(em, op, lambda x, y: fn(em.b, x, y))
    return emit


emits(AR.AddIOp)(_int_binary(lambda b, x, y: b.add(x, y)))
emits(AR.SubIOp)(_int_binary(lambda b, x, y: b.sub(x, y)))
emits(AR.MulIOp)(_int_binary(lambda b, x, y: b.mul(x, y)))
emits(AR.AndIOp)(_int_binary(lambda b, x, y: b.and_(x, y)))
emits(AR.OrIOp)(_int_binary(lambda b, x, y: b.or_(x, y)))
emits(AR.XOrIOp)(_int_binary(lambda b, x, y: b.xor(x, y)))


def _signed(op: Operation) -> bool:
    return op.attributes.get("signedness", Signedness.SIGNED) == Signedness.SIGNED


@emits(AR.ShLIOp)
def _shl(em: KernelEmitter, op: Operation) -> None:
    b = em.b

    def one(x: ir.Value, n: ir.Value) -> ir.Value:
        big = b.icmp_unsigned(">=", n, ir.Constant(n.type, x.type.width))
        return b.select(big, ir.Constant(x.type, 0), b.shl(x, n))
    map_regs(em, op, one)


@emits(AR.ShRIOp)
def _shr(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    signed = _signed(op)

    def one(x: ir.Value, n: ir.Value) -> ir.Value:
        width = ir.Constant(n.type, x.type.width - 1)
        big = b.icmp_unsigned(">", n, width)
        if signed:  # shifting past the width fills with the sign bit
            return b.ashr(x, b.select(big, width, n))
        return b.select(big, ir.Constant(x.type, 0), b.lshr(x, n))
    map_regs(em, op, one)


@emits(AR.DivIOp)
def _divi(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    signed = _signed(op)
    mode = op.attributes.get("rounding", RoundingMode.ZERO)

    def one(x: ir.Value, y: ir.Value) -> ir.Value:
        q = b.sdiv(x, y) if signed else b.udiv(x, y)
        if mode == RoundingMode.ZERO:
            return q
        r = b.srem(x, y) if signed else b.urem(x, y)
        zero = ir.Constant(x.type, 0)
        inexact = b.icmp_unsigned("!=", r, zero)
        if signed:
            same_sign = b.icmp_signed(">=", b.xor(x, y), zero)
        else:
            same_sign = ir.Constant(ir.IntType(1), 1)
        if mode == RoundingMode.POSITIVE_INF:
            return b.select(b.and_(inexact, same_sign), b.add(q, ir.Constant(x.type, 1)), q)
        if mode == RoundingMode.NEGATIVE_INF:
            return b.select(b.and_(inexact, b.not_(same_sign)), b.sub(q, ir.Constant(x.type, 1)), q)
        raise CompileError(f"divi rounding '{mode.keyword}' is not supported")
    map_regs(em, op, one)


@emits(AR.RemIOp)
def _remi(em: KernelEmitter, op: Operation) -> None:
    signed = _signed(op)
    map_regs(em, op, lambda x, y: em.b.srem(x, y) if signed else em.b.urem(x, y))


@emits(AR.MaxIOp, AR.MinIOp)
def _minmaxi(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    signed = _signed(op)
    cmp = ">" if isinstance(op, AR.MaxIOp) else "<"

    def one(x: ir.Value, y: ir.Value) -> ir.Value:
        c = b.icmp_signed(cmp, x, y) if signed else b.icmp_unsigned(cmp, x, y)
        return b.select(c, x, y)
    map_regs(em, op, one)


@emits(AR.AbsIOp)
def _absi(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    map_regs(em, op, lambda x: b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)), b.neg(x), x))


@emits(AR.NegIOp)
def _negi(em: KernelEmitter, op: Operation) -> None:
    map_regs(em, op, lambda x: em.b.neg(x))


@emits(AR.MulhiIOp)
def _mulhi(em: KernelEmitter, op: Operation) -> None:
    b = em.b

    def one(x: ir.Value, y: ir.Value) -> ir.Value:
        w = x.type.width
        wide = ir.IntType(2 * w)
        p = b.mul(b.zext(x, wide), b.zext(y, wide))
        return b.trunc(b.lshr(p, ir.Constant(wide, w)), x.type)
    map_regs(em, op, one)


# -- comparisons and select ------------------------------------------------------------
_PRED = {ComparisonPredicate.EQUAL: "==", ComparisonPredicate.NOT_EQUAL: "!=",
         ComparisonPredicate.LESS_THAN: "<", ComparisonPredicate.LESS_THAN_OR_EQUAL: "<=",
         ComparisonPredicate.GREATER_THAN: ">", ComparisonPredicate.GREATER_THAN_OR_EQUAL: ">="}


@emits(AR.CmpIOp)
def _cmpi(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    pred = _PRED[op.comparison_predicate]
    signed = _signed(op)
    map_regs(em, op, lambda x, y: b.icmp_signed(pred, x, y) if signed else b.icmp_unsigned(pred, x, y))


@emits(AR.CmpFOp)
def _cmpf(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    pred = _PRED[op.comparison_predicate]
    ordered = op.comparison_ordering == ComparisonOrdering.ORDERED
    map_regs(em, op, lambda x, y: b.fcmp_ordered(pred, x, y) if ordered else b.fcmp_unordered(pred, x, y))


@emits(CO.SelectOp)
def _select(em: KernelEmitter, op: Operation) -> None:
    map_regs(em, op, lambda c, x, y: em.b.select(c, x, y))


@emits(CF.AssumeOp)
def _assume(em: KernelEmitter, op: Operation) -> None:
    """The operand's registers, whose facts (``KernelEmitter.put``) then hold wherever
    they are used: true for an assume at the top of the kernel, which runs before every
    use.  Anywhere else the facts hold only below it, so it gets registers of its own."""
    v = em.values[op.value]
    if op.parent is not em.fn.entry_block and isinstance(v, TileVal):
        v = TileVal(v.layout, [em.b.add(r, ir.Constant(r.type, 0)) if isinstance(r.type, ir.IntType) else r
                               for r in v.regs])
    em.put(op.result, v)


# -- conversions ---------------------------------------------------------------------
@emits(CO.ExtIOp)
def _exti(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    to = llvm_type(op.result.type)
    # a known non-negative value is zero-extended (the same bits), as NVIDIA's cvt.u64.u32:
    # ptxas then knows the high word is zero
    signed = _signed(op) and not em.tas.aa.fact(op.operands[0]).non_negative
    i4 = elem(op).bitwidth == 4  # i4 travels zero-extended in an i8

    def one(x: ir.Value) -> ir.Value:
        if i4:
            four = ir.Constant(x.type, 4)
            x = b.ashr(b.shl(x, four), four) if signed else b.and_(x, ir.Constant(x.type, 0xF))
        if x.type == to:
            return x
        return b.sext(x, to) if signed else b.zext(x, to)
    map_regs(em, op, one)


@emits(CO.TruncIOp)
def _trunci(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    to = llvm_type(op.result.type)
    i4 = T.element_type(op.result.type).bitwidth == 4

    def one(x: ir.Value) -> ir.Value:
        r = b.trunc(x, to) if x.type != to else x
        return b.and_(r, ir.Constant(to, 0xF)) if i4 else r
    map_regs(em, op, one)


@emits(CO.IToFOp)
def _itof(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    to = llvm_type(op.result.type)
    signed = _signed(op)
    mode = op.attributes.get("rounding_mode", RoundingMode.NEAREST_EVEN)
    dst = T.element_type(op.result.type)
    if dst.name in _ITOF_VIA:
        map_regs(em, op, lambda x: _int_to_narrow(b, x, signed, dst, to))
        return
    if not isinstance(to, (ir.HalfType, ir.FloatType, ir.DoubleType)) and to != BF16:
        raise CompileError(f"itof to {dst} is not supported yet")
    # tf32 always, bf16 where PTX has no cvt.rn.bf16.s32 (below sm_90): through f32 rounded to odd
    via_f32 = dst.name == "tf32" or (dst.name == "bf16" and em.target.arch < 90)

    def one(x: ir.Value) -> ir.Value:
        if via_f32 and x.type.width >= 32:
            odd = _int_to_f32_odd(b, x, signed)
            return _tf32_convert(b, odd, T.F32, dst, to, mode) if dst.name == "tf32" else b.fptrunc(odd, to)
        if dst.name == "tf32":  # i8, i16: exact in f32 and in tf32
            return b.sitofp(x, F32) if signed else b.uitofp(x, F32)
        if mode == RoundingMode.NEAREST_EVEN:
            return b.sitofp(x, to) if signed else b.uitofp(x, to)
        src = f"{'s' if signed else 'u'}{x.type.width}"
        return X.cvt_asm(b, f"cvt.{PTX_ROUNDING[mode]}.{ptx_float(to)}.{src}", x, to)
    map_regs(em, op, one)


def _int_to_f32_odd(b: ir.IRBuilder, x: ir.Value, signed: bool) -> ir.Value:
    """A 32- or 64-bit integer rounded to odd in f32 (toward zero, the last bit set when that
    lost anything), as NVIDIA's tileiras converts integers to tf32 (``cvt.rz.f32.s32``,
    ``cvt.rzi.s32.f32`` back, compare, ``or``): rounding that again to bf16 or tf32 is the
    integer's single rounding.  (Rounding to nearest in f32 first, as NVIDIA's sm_80 code
    for bf16 does, turns 2^24 + 2^16 + 1 into the bf16 tie 2^24 + 2^16 and then 2^24, where
    the integer itself rounds to 2^24 + 2^17.)"""
    i32 = ir.IntType(32)
    kind = f"{'s' if signed else 'u'}{x.type.width}"
    truncated = X.cvt_asm(b, f"cvt.rz.f32.{kind}", x, F32)
    back = X.cvt_asm(b, f"cvt.rzi.{kind}.f32", truncated, x.type)
    inexact = b.zext(b.icmp_unsigned("!=", back, x), i32)
    return b.bitcast(b.or_(b.bitcast(truncated, i32), inexact), F32)


#: The float an integer goes through on its way to an 8- or 4-bit format, as NVIDIA's
#: tileiras 13.5 converts it (``cvt.rn.{f16,f32}.{s,u}N``, then the format's satfinite ``cvt``).
_ITOF_VIA = {"f8E4M3FN": T.F16, "f4E2M1FN": T.F16, "f8E5M2": T.F32, "fnv8E5M3FNU": T.F32}


def _int_to_narrow(b: ir.IRBuilder, x: ir.Value, signed: bool, dst: T.ScalarType, to: ir.Type) -> ir.Value:
    """An integer as an fp8, f4 or UE5M3 code with NVIDIA's two roundings: to f16 for e4m3
    and e2m1 (then ``cvt.rn.satfinite.{e4m3x2,e2m1x2}.f16x2``), to f32 for e5m2 and UE5M3
    (then ``cvt.rn.satfinite.{e5m2x2,ue5m3x2}.f32``), the pair's other half zero.  The first
    rounding is exact for every integer the format does not saturate (f16 holds them up to
    2048, past e4m3's 448 and e2m1's 6; f32 up to 2^24, past e5m2's 57344 and UE5M3's
    114688), and larger ones saturate either way (f16's inf too), so the result is the
    spec's single rounding.  (f16 would not do for e5m2: 4609 is 4608 in f16, a tie that
    goes to 4096, where 4609 itself rounds to 5120.)"""
    via = _ITOF_VIA[dst.name]
    wide = llvm_type(via)
    value = b.sitofp(x, wide) if signed else b.uitofp(x, wide)
    if dst.name == _UE5M3:
        return X.cvt_to_ue5m3(b, value)
    if via == T.F32:
        return f8_convert(b, value, T.F32, dst, to)
    return X.cvt_f16_to_narrow(b, "e2m1" if dst.name in _F4 else _F8[dst.name], value)


@emits(CO.FToIOp)
def _ftoi(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    to = llvm_type(op.result.type)
    signed = _signed(op)
    mode = op.attributes.get("rounding_mode", RoundingMode.ZERO)
    rnd = {RoundingMode.ZERO: "rzi", RoundingMode.NEAREST_EVEN: "rni", RoundingMode.NEGATIVE_INF: "rmi",
           RoundingMode.POSITIVE_INF: "rpi", RoundingMode.NEAREST_INT_TO_ZERO: "rzi"}.get(mode, "rzi")

    src_t = T.element_type(op.from_.type)

    def one(x: ir.Value) -> ir.Value:
        # PTX cvt saturates out-of-range values and maps NaN to 0
        x = _ftoi_source(b, x, src_t, em.target.arch >= 100)
        width = max(16, to.width)
        kind = ptx_float(x.type)
        src = x if kind != "bf16" else b.fpext(x, F32)
        r = X.cvt_asm(b, f"cvt.{rnd}.{'s' if signed else 'u'}{width}.{'f32' if kind == 'bf16' else kind}",
                      src, ir.IntType(width))
        return b.trunc(r, to) if width != to.width else r
    map_regs(em, op, one)


def _ftoi_source(b: ir.IRBuilder, x: ir.Value, src: T.ScalarType, native_f4: bool) -> ir.Value:
    """``x`` as a value ``cvt.<rounding>i`` takes: the 8- and 4-bit floats (i8 codes) widened
    exactly, as NVIDIA's tileiras widens them (fp8 and f4 to f16, the scales to bf16)."""
    if src.name == _UE5M3:
        return fnv8_convert(b, x, src, T.BF16, BF16)
    if src.name == _E8M0:
        return X.cvt_ue8m0x2_to_bf16x2(b, x, x, BF16)[0]
    if src.name in _F8:
        return f8_convert(b, x, src, T.F16, ir.HalfType())
    if src.name in _F4:
        return f4_convert(b, x, src, T.F16, ir.HalfType(), native_f4)
    return x


@emits(CO.FToFOp)
def _ftof(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    src_t, dst_t = T.element_type(op.from_.type), T.element_type(op.result.type)
    to = llvm_type(op.result.type)
    if _E8M0 in (src_t.name, dst_t.name):
        mode = op.attributes.get("rounding_mode", RoundingMode.NEAREST_EVEN)
        map_pairs(em, op, lambda x, y: e8m0_pair(b, x, y, src_t, dst_t, to, mode))
        return
    if _UE5M3 in (src_t.name, dst_t.name):
        mode = op.attributes.get("rounding_mode", RoundingMode.NEAREST_EVEN)
        map_regs(em, op, lambda x: fnv8_convert(b, x, src_t, dst_t, to, mode))
        return
    if src_t.name in _F4 or dst_t.name in _F4:
        native = em.target.arch >= 100
        map_regs(em, op, lambda x: f4_convert(b, x, src_t, dst_t, to, native))
        return
    if dst_t.name in _F8 and src_t.name == "f32":
        map_pairs(em, op, lambda x, y: _f32_pair_to_f8(b, x, y, dst_t))
        return
    if src_t.name in _F8 and dst_t.name not in _F8:
        map_pairs(em, op, lambda x, y: f8_pair_widened(b, x, y, src_t, to))
        return
    if src_t.name in _F8 or dst_t.name in _F8:
        map_regs(em, op, lambda x: f8_convert(b, x, src_t, dst_t, to))
        return
    if dst_t.name == "tf32" or src_t.name == "tf32":
        mode = op.attributes.get("rounding_mode", RoundingMode.NEAREST_EVEN)
        map_regs(em, op, lambda x: _tf32_convert(b, x, src_t, dst_t, to, mode))
        return
    if src_t.bitwidth < 16 or dst_t.bitwidth < 16:
        raise CompileError(f"ftof from {src_t} to {dst_t} is not supported yet")
    mode = op.attributes.get("rounding_mode", RoundingMode.NEAREST_EVEN)

    def one(x: ir.Value) -> ir.Value:
        if dst_t.bitwidth > src_t.bitwidth or (dst_t.bitwidth == src_t.bitwidth and dst_t.name == "f32"):
            return b.fpext(x, to) if dst_t.bitwidth > src_t.bitwidth else x
        if x.type == BF16 and isinstance(to, ir.HalfType) or isinstance(x.type, ir.HalfType) and to == BF16:
            return b.fptrunc(b.fpext(x, F32), to)
        if mode == RoundingMode.NEAREST_EVEN:
            return b.fptrunc(x, to)
        return X.cvt_asm(b, f"cvt.{PTX_ROUNDING[mode]}.{ptx_float(to)}.{ptx_float(x.type)}", x, to)
    map_regs(em, op, one)


_F8 = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}


def _tf32_convert(b: ir.IRBuilder, x: ir.Value, src: T.ScalarType, dst: T.ScalarType, to: ir.Type,
                  mode: RoundingMode) -> ir.Value:
    """tf32 values live in f32 registers with the low 13 mantissa bits zero; narrowing rounds
    in integer arithmetic in the op's rounding mode (NaN and infinity pass through).

    NVIDIA's tileiras narrows with ``cvt.rn.tf32.f32`` from sm_90 on; that form measured
    worse here (cvt_float_formats sm_100: 30 registers against 24, NVIDIA 20; sm_120 26
    against 28): with our predicated stores ptxas schedules the kernel's accesses together
    and the count follows its scheduling more than the conversion's instructions."""
    if src.name == "tf32":
        return x if isinstance(to, ir.FloatType) else (
            b.fpext(x, to) if isinstance(to, ir.DoubleType) else b.fptrunc(x, to))
    wide = x if isinstance(x.type, ir.FloatType) else (
        b.fptrunc(x, F32) if isinstance(x.type, ir.DoubleType) else b.fpext(x, F32))
    i32 = ir.IntType(32)
    bits = b.bitcast(wide, i32)
    low = b.and_(bits, ir.Constant(i32, 0x1FFF))
    truncated = b.and_(bits, ir.Constant(i32, -0x2000))
    if mode == RoundingMode.ZERO:
        rounded = truncated
    elif mode in (RoundingMode.NEGATIVE_INF, RoundingMode.POSITIVE_INF):
        # away from zero when inexact and the sign is the direction's
        negative = b.icmp_signed("<", bits, ir.Constant(i32, 0))
        toward = negative if mode == RoundingMode.NEGATIVE_INF else b.not_(negative)
        up = b.and_(toward, b.icmp_unsigned("!=", low, ir.Constant(i32, 0)))
        rounded = b.add(truncated, b.select(up, ir.Constant(i32, 0x2000), ir.Constant(i32, 0)))
    else:
        lsb = b.and_(b.lshr(bits, ir.Constant(i32, 13)), ir.Constant(i32, 1))
        rounded = b.and_(b.add(bits, b.add(ir.Constant(i32, 0xFFF), lsb)), ir.Constant(i32, -0x2000))
    special = b.icmp_unsigned("==", b.and_(bits, ir.Constant(i32, 0x7F800000)), ir.Constant(i32, 0x7F800000))
    return b.bitcast(b.select(special, bits, rounded), F32)


def _f32_pair_to_f8(b: ir.IRBuilder, x: ir.Value, y: ir.Value, dst: T.ScalarType) -> tuple[ir.Value, ir.Value]:
    """Two f32 registers as fp8 with one ``cvt.rn.satfinite.<e4m3|e5m2>x2.f32`` (as NVIDIA's
    tileiras pairs them): ``x`` in the low byte."""
    i8, i16 = ir.IntType(8), ir.IntType(16)
    pair = X.asm(b, i16, f"cvt.rn.satfinite.{_F8[dst.name]}x2.f32 $0, $2, $1;", "=h,f,f", [x, y])
    return b.trunc(pair, i8), b.trunc(b.lshr(pair, ir.Constant(i16, 8)), i8)


def f8_convert(b: ir.IRBuilder, x: ir.Value, src: T.ScalarType, dst: T.ScalarType, to: ir.Type) -> ir.Value:
    """fp8 <-> wider floats with the sm_89+ paired conversions (satfinite when narrowing)."""
    i16 = ir.IntType(16)
    if src.name in _F8 and dst.name in _F8:
        return f8_convert(b, f8_convert(b, x, src, T.F32, F32), T.F32, dst, to)
    if dst.name in _F8:
        wide = x if isinstance(x.type, ir.FloatType) else (
            b.fpext(x, F32) if not isinstance(x.type, ir.DoubleType) else _f64_to_f32_odd(b, x))
        pair = X.asm(b, i16, f"cvt.rn.satfinite.{_F8[dst.name]}x2.f32 $0, $2, $1;", "=h,f,f",
                     [wide, ir.Constant(F32, 0.0)])
        return b.trunc(pair, ir.IntType(8))
    pair = X.asm(b, ir.IntType(32), f"cvt.rn.f16x2.{_F8[src.name]}x2 $0, $1;", "=r,h", [b.zext(x, i16)])
    return _widen_half(b, b.bitcast(b.trunc(pair, i16), ir.HalfType()), to)


def f8_pair_widened(b: ir.IRBuilder, x: ir.Value, y: ir.Value, src: T.ScalarType,
                     to: ir.Type) -> tuple[ir.Value, ir.Value]:
    """Two fp8 registers widened by one ``cvt.rn.f16x2.<e4m3|e5m2>x2`` (``x`` the low byte,
    the low half), as NVIDIA's tileiras widens them, not one conversion each."""
    i16 = ir.IntType(16)
    packed = b.or_(b.zext(x, i16), b.shl(b.zext(y, i16), ir.Constant(i16, 8)))
    pair = X.asm(b, ir.IntType(32), f"cvt.rn.f16x2.{_F8[src.name]}x2 $0, $1;", "=r,h", [packed])
    halves = b.bitcast(pair, ir.VectorType(ir.HalfType(), 2))
    lo, hi = (_widen_half(b, b.extract_element(halves, ir.Constant(ir.IntType(32), j)), to) for j in range(2))
    return lo, hi


def _widen_half(b: ir.IRBuilder, half: ir.Value, to: ir.Type) -> ir.Value:
    """An f16 (widened exactly from fp8) as ``to``."""
    if isinstance(to, ir.HalfType):
        return half
    if to == BF16:
        return b.fptrunc(b.fpext(half, F32), to)
    return b.fpext(half, to)


_UE5M3 = "fnv8E5M3FNU"


def fnv8_convert(b: ir.IRBuilder, x: ir.Value, src: T.ScalarType, dst: T.ScalarType, to: ir.Type,
                 mode: RoundingMode = RoundingMode.NEAREST_EVEN) -> ir.Value:
    """fnv8E5M3FNU (UE5M3 scales; sm_107 only) <-> other floats, as NVIDIA's tileiras 13.5
    converts them.  Values travel as i8 codes.  Narrowing is one ``cvt ... ue5m3x2`` from
    f32, f16 or bf16 (nearest even, saturating; fp8 and f4 widen exactly to f16 first, f64
    rounds to odd in f32 so that the second rounding is still correct).  Widening goes
    through bf16, which holds every UE5M3 value; f16 (whose range is smaller) converts
    directly with nearest even, or through f32 for ``rounding<zero>``."""
    if dst.name == _UE5M3:
        return X.cvt_to_ue5m3(b, _ue5m3_source(b, x, src))
    if dst.name == "f16" and mode is RoundingMode.NEAREST_EVEN:
        return X.cvt_from_ue5m3(b, x, to)
    return _from_bf16(b, X.cvt_from_ue5m3(b, x, BF16), dst, to, mode)


def _from_bf16(b: ir.IRBuilder, wide: ir.Value, dst: T.ScalarType, to: ir.Type, mode: RoundingMode) -> ir.Value:
    """A bf16 value that is a scale widened exactly (UE5M3, UE8M0) as ``dst``: f32 and f64
    exactly, f16 through f32 in ``mode``, the narrow formats with their own conversions."""
    if to == BF16:
        return wide
    if dst.name == _UE5M3:
        return X.cvt_to_ue5m3(b, wide)
    if isinstance(to, ir.DoubleType):
        return b.fpext(wide, to)
    f32 = b.fpext(wide, F32)
    if dst.name == "f16":
        return X.cvt_asm(b, f"cvt.{PTX_ROUNDING[mode]}.f16.f32", f32, to)
    if dst.name in _F8:
        return f8_convert(b, f32, T.F32, dst, to)
    if dst.name in _F4:
        return f4_convert(b, f32, T.F32, dst, to, native=True)
    return f32


def _ue5m3_source(b: ir.IRBuilder, x: ir.Value, src: T.ScalarType) -> ir.Value:
    """``x`` as the f32, f16 or bf16 value ``cvt ... ue5m3x2`` rounds (exactly, or for f64
    rounded to odd: truncated, with the last bit set when that lost anything)."""
    if src.name in _F8:
        return f8_convert(b, x, src, T.F16, ir.HalfType())
    if src.name in _F4:
        return f4_convert(b, x, src, T.F16, ir.HalfType(), native=True)
    return _f64_to_f32_odd(b, x) if isinstance(x.type, ir.DoubleType) else x


def _f64_to_f32_odd(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """An f64 rounded to odd in f32 (truncated, the last bit set when that lost anything), as
    NVIDIA's tileiras narrows f64 to the 8-bit formats: rounding that again to a format of
    at most 22 significand bits is the correct rounding of ``x`` (rounding to nearest in f32
    first could land on a tie of the narrow format and round it the wrong way)."""
    i32 = ir.IntType(32)
    truncated = X.cvt_asm(b, "cvt.rz.f32.f64", x, F32)
    inexact = b.zext(b.fcmp_ordered("!=", b.fpext(truncated, ir.DoubleType()), x), i32)
    return b.bitcast(b.or_(b.bitcast(truncated, i32), inexact), F32)


_E8M0 = "f8E8M0FNU"


def e8m0_pair(b: ir.IRBuilder, x: ir.Value, y: ir.Value, src: T.ScalarType, dst: T.ScalarType, to: ir.Type,
              mode: RoundingMode) -> tuple[ir.Value, ir.Value]:
    """Two registers converted to or from f8E8M0FNU (UE8M0 scales, i8 codes; sm_100+, where
    the verifier lets the type through) with one paired instruction, as NVIDIA's tileiras
    13.5 converts them.  Narrowing: each source as f32, then ``cvt.{rz,rp}.satfinite.ue8m0x2.f32``
    (the op's rounding is ``zero`` or ``positive_inf``, the verifier's rule).  Widening:
    ``cvt.rn.bf16x2.ue8m0x2``, exact, then each bf16 value on to ``dst``."""
    if dst.name == _E8M0:
        rounding = "rp" if mode is RoundingMode.POSITIVE_INF else "rz"
        return X.cvt_f32x2_to_ue8m0x2(b, rounding, _e8m0_source(b, x, src, rounding),
                                      _e8m0_source(b, y, src, rounding))
    lo, hi = X.cvt_ue8m0x2_to_bf16x2(b, x, y, BF16)
    return _from_bf16(b, lo, dst, to, mode), _from_bf16(b, hi, dst, to, mode)


def _e8m0_source(b: ir.IRBuilder, x: ir.Value, src: T.ScalarType, rounding: str) -> ir.Value:
    """``x`` as the f32 value ``cvt ... ue8m0x2.f32`` rounds: exactly, or for f64 rounded to
    f32 in the same direction first (``cvt.{rz,rp}.f32.f64``, as NVIDIA's tileiras does)."""
    if src.name in _F8:
        return f8_convert(b, x, src, T.F32, F32)
    if src.name in _F4:
        return f4_convert(b, x, src, T.F32, F32, native=True)
    if src.name == _UE5M3:
        return b.fpext(X.cvt_from_ue5m3(b, x, BF16), F32)
    if isinstance(x.type, ir.DoubleType):
        return X.cvt_asm(b, f"cvt.{rounding}.f32.f64", x, F32)
    return _to_f32(b, x)


_F4 = ("f4E2M1FN",)
#: |x| thresholds of round-to-nearest-even f32 -> e2m1 (values 0, .5, 1, 1.5, 2, 3, 4, 6): the
#: magnitude code counts the thresholds passed; ``>=`` where the tie goes up to an even code.
_E2M1_STEPS = ((0.25, ">"), (0.75, ">="), (1.25, ">"), (1.75, ">="), (2.5, ">"), (3.5, ">="), (5.0, ">"))


def f4_convert(b: ir.IRBuilder, x: ir.Value, src: T.ScalarType, dst: T.ScalarType, to: ir.Type,
               native: bool) -> ir.Value:
    """f4E2M1FN <-> other floats.  Values travel as i8 holding the 4-bit pattern.  Narrowing
    rounds to nearest even and saturates to +-6 (NaN -> +6, as the interpreter and, per
    cuda_fp4.hpp, ``cvt.rn.satfinite.e2m1x2``; f64 rounds to odd in f32 first, as NVIDIA's);
    ``native`` (sm_100+) uses ``cvt ... e2m1x2``, else integer/compare arithmetic."""
    if src.name in _F4 and dst.name in _F4:
        return x
    if dst.name in _F4:
        wide = f8_convert(b, x, src, T.F32, F32) if src.name in _F8 else (
            _f64_to_f32_odd(b, x) if isinstance(x.type, ir.DoubleType) else _to_f32(b, x))
        if native:  # NaN gives +6 by itself
            return X.cvt_f32x2_to_e2m1x2(b, ir.Constant(F32, 0.0), wide)
        return _f32_to_e2m1(b, wide)
    if native:
        half = b.bitcast(b.trunc(X.cvt_e2m1x2_to_f16x2(b, b.and_(x, ir.Constant(ir.IntType(8), 0xF))),
                                 ir.IntType(16)), ir.HalfType())
        wide = b.fpext(half, F32)
    else:
        wide = _e2m1_to_f32(b, x)
    if dst.name in _F8:
        return f8_convert(b, wide, T.F32, dst, to)
    if isinstance(to, ir.FloatType):
        return wide
    return b.fpext(wide, to) if isinstance(to, ir.DoubleType) else b.fptrunc(wide, to)


def _to_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    if isinstance(x.type, ir.FloatType):
        return x
    return b.fptrunc(x, F32) if isinstance(x.type, ir.DoubleType) else b.fpext(x, F32)


def _f32_to_e2m1(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    i8 = ir.IntType(8)
    mag = b.call(_declare_fabs(b), [x])
    nan = b.fcmp_unordered("uno", x, x)
    code: ir.Value = ir.Constant(i8, 0)
    for threshold, cmp in _E2M1_STEPS:
        passed = b.or_(b.fcmp_ordered(cmp, mag, ir.Constant(F32, threshold)), nan)
        code = b.add(code, b.zext(passed, i8))
    neg = b.icmp_signed("<", b.bitcast(x, ir.IntType(32)), ir.Constant(ir.IntType(32), 0))
    sign = b.select(b.and_(neg, b.xor(nan, ir.Constant(ir.IntType(1), 1))), ir.Constant(i8, 8), ir.Constant(i8, 0))
    return b.or_(code, sign)


def _declare_fabs(b: ir.IRBuilder) -> ir.Function:
    fn = b.module.globals.get("llvm.fabs.f32")
    return fn if fn is not None else ir.Function(b.module, ir.FunctionType(F32, [F32]), name="llvm.fabs.f32")


def _e2m1_to_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """sign * (e == 0 ? m / 2 : (1 + m / 2) * 2**(e - 1)) as f32 bits: exponent e + 126."""
    i32 = ir.IntType(32)
    n = b.zext(b.and_(x, ir.Constant(ir.IntType(8), 0xF)), i32)
    e = b.and_(b.lshr(n, ir.Constant(i32, 1)), ir.Constant(i32, 3))
    m = b.and_(n, ir.Constant(i32, 1))
    normal = b.or_(b.shl(b.add(e, ir.Constant(i32, 126)), ir.Constant(i32, 23)), b.shl(m, ir.Constant(i32, 22)))
    sub = b.select(b.icmp_unsigned("==", m, ir.Constant(i32, 0)), ir.Constant(i32, 0),
                   ir.Constant(i32, 0x3F000000))  # 0.5
    bits = b.select(b.icmp_unsigned("==", e, ir.Constant(i32, 0)), sub, normal)
    sign = b.shl(b.lshr(n, ir.Constant(i32, 3)), ir.Constant(i32, 31))
    return b.bitcast(b.or_(bits, sign), F32)


@emits(CO.BitcastOp)
def _bitcast(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    to = llvm_type(op.result.type)

    def one(x: ir.Value) -> ir.Value:
        if isinstance(x.type, ir.PointerType):
            return b.ptrtoint(x, to)
        if isinstance(to, ir.PointerType):
            return b.inttoptr(x, to)
        return b.bitcast(x, to)
    map_regs(em, op, one)


@emits(CO.PtrToIntOp)
def _ptr_to_int(em: KernelEmitter, op: Operation) -> None:
    to = llvm_type(op.result.type)
    map_regs(em, op, lambda x: em.b.ptrtoint(x, to))


@emits(CO.IntToPtrOp)
def _int_to_ptr(em: KernelEmitter, op: Operation) -> None:
    to = llvm_type(op.result.type)
    map_regs(em, op, lambda x: em.b.inttoptr(x, to))


@emits(CO.PtrToPtrOp)
def _ptr_to_ptr(em: KernelEmitter, op: Operation) -> None:
    map_regs(em, op, lambda x: x)


@emits(CO.OffsetOp)
def _offset(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    pointee = T.element_type(op.ptr.type)
    assert isinstance(pointee, T.PointerType)
    size = max(1, pointee.pointee.bitwidth // 8) if isinstance(pointee.pointee, T.ScalarType) else 8

    def one(p: ir.Value, off: ir.Value) -> ir.Value:
        o = b.sext(off, ir.IntType(64)) if off.type.width < 64 else off
        return b.gep(p, [b.mul(o, ir.Constant(ir.IntType(64), size))], source_etype=ir.IntType(8))
    map_regs(em, op, one)


from . import emit_math  # noqa: E402,F401  (registers the float arithmetic and math emitters)
