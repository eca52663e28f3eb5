"""arith ops."""
from __future__ import annotations

from ..ir.core import Operation
from ..ir.version import V13_2, V13_3, V13_4, V13_5  # noqa: F401
from .constraints import (BASE_FLOAT_TILE, CMP_RESULT, FMA_TILE, I1_TILE, INT_TILE, MMAF_OPERAND, MMAF_RESULT,
                          MMAF_SCALED_OPERAND, MMAF_SCALED_RESULT, MMAF_SCALED_SCALE, MMAI_ACC, MMAI_OPERAND,
                          MMAI_RESULT, Match, float_binary, float_unary, int_binary, same, sig)
from .enums import ComparisonOrdering, ComparisonPredicate, IntegerOverflow, RoundingMode, Signedness  # noqa: F401
from .registry import Attr, AttrKind, Operand, Optional_, RegionDef, Result, Variadic, tile_op  # noqa: F401
from .traits import Contraction, Elementwise, Latency, NoMemoryEffect, OpClass, Pure, Recomputable


@tile_op("absf", traits=(Pure(), Elementwise(), Latency(OpClass.FLOAT)))
class AbsFOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("absi", traits=(Pure(), Elementwise(), Latency(OpClass.INT)))
class AbsIOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"
    signature = sig(same("type", "source", "result"), source=INT_TILE, result=INT_TILE)


@tile_op("addf", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.FLOAT)))
class AddFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"
    signature = float_binary()


@tile_op("addi", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class AddIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$lhs `,` $rhs (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"
    signature = int_binary()


@tile_op("andi", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class AndIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    syntax = "$lhs `,` $rhs attr-dict `:` type($result)"
    signature = int_binary()


@tile_op("atan2", traits=(Pure(), Elementwise(), Latency(OpClass.FLOAT_DIV)))
class Atan2Op(Operation):
    result = Result()
    x = Operand()
    y = Operand()
    syntax = "$x `,` $y attr-dict `:` type($result)"
    signature = sig(same("type", "x", "y", "result"), x=BASE_FLOAT_TILE, y=BASE_FLOAT_TILE, result=BASE_FLOAT_TILE)


@tile_op("ceil", traits=(Pure(), Elementwise(), Latency(OpClass.FLOAT)))
class CeilOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("cmpf", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.FLOAT)))
class CmpFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    comparison_predicate = Attr(AttrKind.ENUM, enum=ComparisonPredicate)
    comparison_ordering = Attr(AttrKind.ENUM, enum=ComparisonOrdering)
    syntax = "$comparison_predicate $comparison_ordering $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"
    signature = sig(same("type", "lhs", "rhs"), CMP_RESULT, lhs=BASE_FLOAT_TILE, rhs=BASE_FLOAT_TILE, result=I1_TILE)


@tile_op("cmpi", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class CmpIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    comparison_predicate = Attr(AttrKind.ENUM, enum=ComparisonPredicate)
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$comparison_predicate $lhs `,` $rhs `,` $signedness attr-dict `:` type($lhs) `->` type($result)"
    signature = sig(same("type", "lhs", "rhs"), CMP_RESULT, lhs=INT_TILE, rhs=INT_TILE, result=I1_TILE)


@tile_op("cosh", traits=(Pure(), Elementwise(), Latency(OpClass.TRANSCENDENTAL)))
class CosHOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("cos", traits=(Pure(), Elementwise(), Latency(OpClass.TRANSCENDENTAL)))
class CosOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("divf", traits=(Pure(), Elementwise(), Latency(OpClass.FLOAT_DIV)))
class DivFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"
    signature = float_binary()


@tile_op("divi", traits=(NoMemoryEffect(), Elementwise(), Latency(OpClass.INT_DIV)))
class DivIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    rounding = Attr(AttrKind.ENUM, enum=RoundingMode)
    syntax = "$lhs `,` $rhs $signedness (`rounding` `<` $rounding^=zero `>`)? attr-dict `:` type($result)"
    signature = int_binary()


@tile_op("exp2", traits=(Pure(), Elementwise(), Latency(OpClass.TRANSCENDENTAL)))
class Exp2Op(Operation):
    result = Result()
    source = Operand()
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$source (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("exp", traits=(Pure(), Elementwise(), Latency(OpClass.TRANSCENDENTAL)))
class ExpOp(Operation):
    result = Result()
    source = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode, since=V13_3, default=RoundingMode.FULL)
    syntax = "$source ` ` (`rounding` `<` $rounding_mode^=full `>`)? attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("fpowf", traits=(Pure(), Elementwise(), Latency(OpClass.FLOAT_DIV)))
class FPowFOp(Operation):
    result = Result()
    source = Operand()
    exponent = Operand()
    syntax = "$source `,` $exponent attr-dict `:` type($result)"
    signature = sig(same("type", "result", "source", "exponent"), same("rank", "source", "exponent", "result"),
                    source=BASE_FLOAT_TILE, exponent=BASE_FLOAT_TILE, result=BASE_FLOAT_TILE)


@tile_op("fpowi", traits=(Pure(), Elementwise(), Latency(OpClass.INT_DIV)))
class FPowIOp(Operation):
    result = Result()
    source = Operand()
    exponent = Operand()
    syntax = "$source `,` $exponent attr-dict `:` type($source) `,` type($exponent)"
    signature = sig(same("type", "source", "result"), same("shape", "source", "exponent"),
                    source=BASE_FLOAT_TILE, exponent=INT_TILE, result=BASE_FLOAT_TILE)


@tile_op("floor", traits=(Pure(), Elementwise(), Latency(OpClass.FLOAT)))
class FloorOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("fma", traits=(Pure(), Elementwise(), Latency(OpClass.FLOAT)))
class FmaOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    acc = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs `,` $acc ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"
    signature = sig(same("type", "lhs", "rhs", "acc", "result"), lhs=FMA_TILE, rhs=FMA_TILE, acc=FMA_TILE, result=FMA_TILE)


@tile_op("log2", traits=(Pure(), Elementwise(), Latency(OpClass.TRANSCENDENTAL)))
class Log2Op(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("log", traits=(Pure(), Elementwise(), Latency(OpClass.TRANSCENDENTAL)))
class LogOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("maxf", traits=(Pure(), Elementwise(), Latency(OpClass.FLOAT)))
class MaxFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    propagate_nan = Attr(AttrKind.UNIT)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs (`flush_to_zero` $flush_to_zero^)? (`propagate_nan` $propagate_nan^)? attr-dict `:` type($result)"
    signature = float_binary()


@tile_op("maxi", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class MaxIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs $signedness attr-dict `:` type($result)"
    signature = int_binary()


@tile_op("minf", traits=(Pure(), Elementwise(), Latency(OpClass.FLOAT)))
class MinFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    propagate_nan = Attr(AttrKind.UNIT)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs (`flush_to_zero` $flush_to_zero^)? (`propagate_nan` $propagate_nan^)? attr-dict `:` type($result)"
    signature = float_binary()


@tile_op("mini", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class MinIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs $signedness attr-dict `:` type($result)"
    signature = int_binary()


@tile_op("mmaf", traits=(Pure(), Contraction(), Latency(OpClass.MMA)))
class MmaFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    acc = Operand()
    fast_acc = Attr(AttrKind.UNIT, since=V13_3)
    syntax = "$lhs `,` $rhs `,` $acc (`fast_acc` $fast_acc^)? attr-dict `:` type($lhs) `,` type($rhs) `,` type($acc)"
    signature = sig(same("type", "acc", "result"), Match("element", ("lhs", "rhs")), same("rank", "lhs", "rhs", "acc"),
                    lhs=MMAF_OPERAND, rhs=MMAF_OPERAND, acc=MMAF_RESULT, result=MMAF_RESULT)


@tile_op("mmaf_scaled", traits=(Pure(), Contraction(), Latency(OpClass.MMA)))
class MmaFScaledOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    acc = Operand()
    lhs_scale = Operand()
    rhs_scale = Operand()
    syntax = "$lhs `,` $rhs `,` $acc `,` $lhs_scale `,` $rhs_scale attr-dict `:` type($lhs) `,` type($rhs) `,` type($acc) `,` type($lhs_scale) `,` type($rhs_scale)"
    signature = sig(same("type", "acc", "result"), Match("element", ("lhs", "rhs")),
                    Match("element", ("lhs_scale", "rhs_scale")),
                    same("rank", "lhs", "rhs", "acc", "lhs_scale", "rhs_scale"),
                    lhs=MMAF_SCALED_OPERAND, rhs=MMAF_SCALED_OPERAND, acc=MMAF_SCALED_RESULT,
                    lhs_scale=MMAF_SCALED_SCALE, rhs_scale=MMAF_SCALED_SCALE, result=MMAF_SCALED_RESULT)


@tile_op("mmai", traits=(Pure(), Contraction(), Latency(OpClass.MMA)))
class MmaIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    acc = Operand()
    signedness_lhs = Attr(AttrKind.ENUM, enum=Signedness)
    signedness_rhs = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs `,` $acc $signedness_lhs $signedness_rhs attr-dict `:` type($lhs) `,` type($rhs) `,` type($acc)"
    signature = sig(same("type", "acc", "result"), Match("element", ("lhs", "rhs")), same("rank", "lhs", "rhs", "acc"),
                    lhs=MMAI_OPERAND, rhs=MMAI_OPERAND, acc=MMAI_ACC, result=MMAI_RESULT)


@tile_op("mulf", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.FLOAT)))
class MulFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"
    signature = float_binary()


@tile_op("muli", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT_MUL)))
class MulIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$lhs `,` $rhs (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"
    signature = int_binary()


@tile_op("mulhii", traits=(Pure(), Elementwise(), Latency(OpClass.INT_MUL)))
class MulhiIOp(Operation):
    result = Result()
    x = Operand()
    y = Operand()
    syntax = "$x `,` $y attr-dict `:` type($result)"
    signature = int_binary(("x", "y"))


@tile_op("negf", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.FLOAT)))
class NegFOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("negi", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class NegIOp(Operation):
    result = Result()
    source = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow, since=V13_2, default=IntegerOverflow.NONE)
    syntax = "$source (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"
    signature = sig(same("type", "source", "result"), source=INT_TILE, result=INT_TILE)


@tile_op("ori", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class OrIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    syntax = "$lhs `,` $rhs attr-dict `:` type($result)"
    signature = int_binary()


@tile_op("remf", traits=(Pure(), Elementwise(), Latency(OpClass.FLOAT_DIV)))
class RemFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    syntax = "$lhs `,` $rhs attr-dict `:` type($result)"
    signature = float_binary()


@tile_op("remi", traits=(Pure(), Elementwise(), Latency(OpClass.INT_DIV)))
class RemIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs $signedness attr-dict `:` type($result)"
    signature = int_binary()


@tile_op("rsqrt", traits=(Pure(), Elementwise(), Latency(OpClass.TRANSCENDENTAL)))
class RsqrtOp(Operation):
    result = Result()
    source = Operand()
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$source (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("shli", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class ShLIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$lhs `,` $rhs (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"
    signature = int_binary()


@tile_op("shri", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class ShRIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs $signedness attr-dict `:` type($result)"
    signature = int_binary()


@tile_op("sinh", traits=(Pure(), Elementwise(), Latency(OpClass.TRANSCENDENTAL)))
class SinHOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("sin", traits=(Pure(), Elementwise(), Latency(OpClass.TRANSCENDENTAL)))
class SinOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("sqrt", traits=(Pure(), Elementwise(), Latency(OpClass.FLOAT_DIV)))
class SqrtOp(Operation):
    result = Result()
    source = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$source ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("subf", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.FLOAT)))
class SubFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"
    signature = float_binary()


@tile_op("subi", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class SubIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$lhs `,` $rhs (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"
    signature = int_binary()


@tile_op("tanh", traits=(Pure(), Elementwise(), Latency(OpClass.TRANSCENDENTAL)))
class TanHOp(Operation):
    result = Result()
    source = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode, since=V13_2, default=RoundingMode.FULL)
    syntax = "$source ` ` (`rounding` `<` $rounding_mode^=full `>`)? attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("tan", traits=(Pure(), Elementwise(), Latency(OpClass.TRANSCENDENTAL)))
class TanOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"
    signature = float_unary()


@tile_op("xori", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class XOrIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    syntax = "$lhs `,` $rhs attr-dict `:` type($result)"
    signature = int_binary()
