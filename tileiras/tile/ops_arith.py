"""arith ops."""
from __future__ import annotations

from ..ir.core import Operation
from ..ir.version import V13_2, V13_3, V13_4, V13_5  # noqa: F401
from .enums import ComparisonOrdering, ComparisonPredicate, IntegerOverflow, RoundingMode, Signedness  # noqa: F401
from .registry import Attr, AttrKind, Operand, Optional_, RegionDef, Result, Variadic, tile_op  # noqa: F401


@tile_op("absf")
class AbsFOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("absi")
class AbsIOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("addf")
class AddFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("addi")
class AddIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$lhs `,` $rhs (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"


@tile_op("andi")
class AndIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    syntax = "$lhs `,` $rhs attr-dict `:` type($result)"


@tile_op("atan2")
class Atan2Op(Operation):
    result = Result()
    x = Operand()
    y = Operand()
    syntax = "$x `,` $y attr-dict `:` type($result)"


@tile_op("ceil")
class CeilOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("cmpf")
class CmpFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    comparison_predicate = Attr(AttrKind.ENUM, enum=ComparisonPredicate)
    comparison_ordering = Attr(AttrKind.ENUM, enum=ComparisonOrdering)
    syntax = "$comparison_predicate $comparison_ordering $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"


@tile_op("cmpi")
class CmpIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    comparison_predicate = Attr(AttrKind.ENUM, enum=ComparisonPredicate)
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$comparison_predicate $lhs `,` $rhs `,` $signedness attr-dict `:` type($lhs) `->` type($result)"


@tile_op("cosh")
class CosHOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("cos")
class CosOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("divf")
class DivFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("divi")
class DivIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    rounding = Attr(AttrKind.ENUM, enum=RoundingMode)
    syntax = "$lhs `,` $rhs $signedness (`rounding` `<` $rounding^=zero `>`)? attr-dict `:` type($result)"


@tile_op("exp2")
class Exp2Op(Operation):
    result = Result()
    source = Operand()
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$source (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("exp")
class ExpOp(Operation):
    result = Result()
    source = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode, since=V13_3, default=RoundingMode.FULL)
    syntax = "$source ` ` (`rounding` `<` $rounding_mode^=full `>`)? attr-dict `:` type($result)"


@tile_op("fpowf")
class FPowFOp(Operation):
    result = Result()
    source = Operand()
    exponent = Operand()
    syntax = "$source `,` $exponent attr-dict `:` type($result)"


@tile_op("fpowi")
class FPowIOp(Operation):
    result = Result()
    source = Operand()
    exponent = Operand()
    syntax = "$source `,` $exponent attr-dict `:` type($source) `,` type($exponent)"


@tile_op("floor")
class FloorOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("fma")
class FmaOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    acc = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs `,` $acc ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("log2")
class Log2Op(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("log")
class LogOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("maxf")
class MaxFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    propagate_nan = Attr(AttrKind.UNIT)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs (`flush_to_zero` $flush_to_zero^)? (`propagate_nan` $propagate_nan^)? attr-dict `:` type($result)"


@tile_op("maxi")
class MaxIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs $signedness attr-dict `:` type($result)"


@tile_op("minf")
class MinFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    propagate_nan = Attr(AttrKind.UNIT)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs (`flush_to_zero` $flush_to_zero^)? (`propagate_nan` $propagate_nan^)? attr-dict `:` type($result)"


@tile_op("mini")
class MinIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs $signedness attr-dict `:` type($result)"


@tile_op("mmaf")
class MmaFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    acc = Operand()
    fast_acc = Attr(AttrKind.UNIT, since=V13_3)
    syntax = "$lhs `,` $rhs `,` $acc (`fast_acc` $fast_acc^)? attr-dict `:` type($lhs) `,` type($rhs) `,` type($acc)"


@tile_op("mmaf_scaled")
class MmaFScaledOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    acc = Operand()
    lhs_scale = Operand()
    rhs_scale = Operand()
    syntax = "$lhs `,` $rhs `,` $acc `,` $lhs_scale `,` $rhs_scale attr-dict `:` type($lhs) `,` type($rhs) `,` type($acc) `,` type($lhs_scale) `,` type($rhs_scale)"


@tile_op("mmai")
class MmaIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    acc = Operand()
    signedness_lhs = Attr(AttrKind.ENUM, enum=Signedness)
    signedness_rhs = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs `,` $acc $signedness_lhs $signedness_rhs attr-dict `:` type($lhs) `,` type($rhs) `,` type($acc)"


@tile_op("mulf")
class MulFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("muli")
class MulIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$lhs `,` $rhs (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"


@tile_op("mulhii")
class MulhiIOp(Operation):
    result = Result()
    x = Operand()
    y = Operand()
    syntax = "$x `,` $y attr-dict `:` type($result)"


@tile_op("negf")
class NegFOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("negi")
class NegIOp(Operation):
    result = Result()
    source = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow, since=V13_2, default=IntegerOverflow.NONE)
    syntax = "$source (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"


@tile_op("ori")
class OrIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    syntax = "$lhs `,` $rhs attr-dict `:` type($result)"


@tile_op("remf")
class RemFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    syntax = "$lhs `,` $rhs attr-dict `:` type($result)"


@tile_op("remi")
class RemIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs $signedness attr-dict `:` type($result)"


@tile_op("rsqrt")
class RsqrtOp(Operation):
    result = Result()
    source = Operand()
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$source (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("shli")
class ShLIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$lhs `,` $rhs (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"


@tile_op("shri")
class ShRIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs $signedness attr-dict `:` type($result)"


@tile_op("sinh")
class SinHOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("sin")
class SinOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("sqrt")
class SqrtOp(Operation):
    result = Result()
    source = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$source ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("subf")
class SubFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("subi")
class SubIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$lhs `,` $rhs (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"


@tile_op("tanh")
class TanHOp(Operation):
    result = Result()
    source = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode, since=V13_2, default=RoundingMode.FULL)
    syntax = "$source ` ` (`rounding` `<` $rounding_mode^=full `>`)? attr-dict `:` type($result)"


@tile_op("tan")
class TanOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("xori")
class XOrIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    syntax = "$lhs `,` $rhs attr-dict `:` type($result)"
