"""arith ops."""
from __future__ import annotations

from ..ir.core import Operation
from ..ir.version import V13_2, V13_3, V13_4, V13_5  # noqa: F401
from .enums import ComparisonOrdering, ComparisonPredicate, IntegerOverflow, RoundingMode, Signedness  # noqa: F401
from .registry import Attr, AttrKind, Operand, Optional_, RegionDef, Result, Variadic, tile_op  # noqa: F401


@tile_op("absf", traits=("pure",))
class AbsFOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("absi", traits=("pure",))
class AbsIOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("addf", traits=("pure",))
class AddFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("addi", traits=("pure",))
class AddIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$lhs `,` $rhs (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"


@tile_op("andi", traits=("pure",))
class AndIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    syntax = "$lhs `,` $rhs attr-dict `:` type($result)"


@tile_op("atan2", traits=("pure",))
class Atan2Op(Operation):
    result = Result()
    x = Operand()
    y = Operand()
    syntax = "$x `,` $y attr-dict `:` type($result)"


@tile_op("ceil", traits=("pure",))
class CeilOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("cmpf", traits=("pure",))
class CmpFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    comparison_predicate = Attr(AttrKind.ENUM, enum=ComparisonPredicate)
    comparison_ordering = Attr(AttrKind.ENUM, enum=ComparisonOrdering)
    syntax = "$comparison_predicate $comparison_ordering $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"


@tile_op("cmpi", traits=("pure",))
class CmpIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    comparison_predicate = Attr(AttrKind.ENUM, enum=ComparisonPredicate)
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$comparison_predicate $lhs `,` $rhs `,` $signedness attr-dict `:` type($lhs) `->` type($result)"


@tile_op("cosh", traits=("pure",))
class CosHOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("cos", traits=("pure",))
class CosOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("divf", traits=("pure",))
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


@tile_op("exp2", traits=("pure",))
class Exp2Op(Operation):
    result = Result()
    source = Operand()
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$source (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("exp", traits=("pure",))
class ExpOp(Operation):
    result = Result()
    source = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode, since=V13_3, default=RoundingMode.FULL)
    syntax = "$source ` ` (`rounding` `<` $rounding_mode^=full `>`)? attr-dict `:` type($result)"


@tile_op("fpowf", traits=("pure",))
class FPowFOp(Operation):
    result = Result()
    source = Operand()
    exponent = Operand()
    syntax = "$source `,` $exponent attr-dict `:` type($result)"


@tile_op("fpowi", traits=("pure",))
class FPowIOp(Operation):
    result = Result()
    source = Operand()
    exponent = Operand()
    syntax = "$source `,` $exponent attr-dict `:` type($source) `,` type($exponent)"


@tile_op("floor", traits=("pure",))
class FloorOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("fma", traits=("pure",))
class FmaOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    acc = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs `,` $acc ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("log2", traits=("pure",))
class Log2Op(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("log", traits=("pure",))
class LogOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("maxf", traits=("pure",))
class MaxFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    propagate_nan = Attr(AttrKind.UNIT)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs (`flush_to_zero` $flush_to_zero^)? (`propagate_nan` $propagate_nan^)? attr-dict `:` type($result)"


@tile_op("maxi", traits=("pure",))
class MaxIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs $signedness attr-dict `:` type($result)"


@tile_op("minf", traits=("pure",))
class MinFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    propagate_nan = Attr(AttrKind.UNIT)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs (`flush_to_zero` $flush_to_zero^)? (`propagate_nan` $propagate_nan^)? attr-dict `:` type($result)"


@tile_op("mini", traits=("pure",))
class MinIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs $signedness attr-dict `:` type($result)"


@tile_op("mmaf", traits=("pure",))
class MmaFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    acc = Operand()
    fast_acc = Attr(AttrKind.UNIT, since=V13_3)
    syntax = "$lhs `,` $rhs `,` $acc (`fast_acc` $fast_acc^)? attr-dict `:` type($lhs) `,` type($rhs) `,` type($acc)"


@tile_op("mmaf_scaled", traits=("pure",))
class MmaFScaledOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    acc = Operand()
    lhs_scale = Operand()
    rhs_scale = Operand()
    syntax = "$lhs `,` $rhs `,` $acc `,` $lhs_scale `,` $rhs_scale attr-dict `:` type($lhs) `,` type($rhs) `,` type($acc) `,` type($lhs_scale) `,` type($rhs_scale)"


@tile_op("mmai", traits=("pure",))
class MmaIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    acc = Operand()
    signedness_lhs = Attr(AttrKind.ENUM, enum=Signedness)
    signedness_rhs = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs `,` $acc $signedness_lhs $signedness_rhs attr-dict `:` type($lhs) `,` type($rhs) `,` type($acc)"


@tile_op("mulf", traits=("pure",))
class MulFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("muli", traits=("pure",))
class MulIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$lhs `,` $rhs (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"


@tile_op("mulhii", traits=("pure",))
class MulhiIOp(Operation):
    result = Result()
    x = Operand()
    y = Operand()
    syntax = "$x `,` $y attr-dict `:` type($result)"


@tile_op("negf", traits=("pure",))
class NegFOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("negi", traits=("pure",))
class NegIOp(Operation):
    result = Result()
    source = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow, since=V13_2, default=IntegerOverflow.NONE)
    syntax = "$source (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"


@tile_op("ori", traits=("pure",))
class OrIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    syntax = "$lhs `,` $rhs attr-dict `:` type($result)"


@tile_op("remf", traits=("pure",))
class RemFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    syntax = "$lhs `,` $rhs attr-dict `:` type($result)"


@tile_op("remi", traits=("pure",))
class RemIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs $signedness attr-dict `:` type($result)"


@tile_op("rsqrt", traits=("pure",))
class RsqrtOp(Operation):
    result = Result()
    source = Operand()
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$source (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("shli", traits=("pure",))
class ShLIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$lhs `,` $rhs (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"


@tile_op("shri", traits=("pure",))
class ShRIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$lhs `,` $rhs $signedness attr-dict `:` type($result)"


@tile_op("sinh", traits=("pure",))
class SinHOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("sin", traits=("pure",))
class SinOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("sqrt", traits=("pure",))
class SqrtOp(Operation):
    result = Result()
    source = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$source ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("subf", traits=("pure",))
class SubFOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    flush_to_zero = Attr(AttrKind.UNIT)
    syntax = "$lhs `,` $rhs ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"


@tile_op("subi", traits=("pure",))
class SubIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$lhs `,` $rhs (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($result)"


@tile_op("tanh", traits=("pure",))
class TanHOp(Operation):
    result = Result()
    source = Operand()
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode, since=V13_2, default=RoundingMode.FULL)
    syntax = "$source ` ` (`rounding` `<` $rounding_mode^=full `>`)? attr-dict `:` type($result)"


@tile_op("tan", traits=("pure",))
class TanOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($result)"


@tile_op("xori", traits=("pure",))
class XOrIOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    syntax = "$lhs `,` $rhs attr-dict `:` type($result)"
