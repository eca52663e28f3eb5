"""core ops."""
from __future__ import annotations

from ..ir.core import Operation
from ..ir.version import V13_2, V13_3, V13_4, V13_5  # noqa: F401
from .enums import IntegerOverflow, RoundingMode, Signedness, SymbolVisibility  # noqa: F401
from .registry import Attr, AttrKind, Operand, Optional_, RegionDef, Result, Variadic, tile_op  # noqa: F401


@tile_op("bitcast", traits=("pure",))
class BitcastOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"


@tile_op("broadcast", traits=("pure",))
class BroadcastOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"


@tile_op("cat", traits=("pure",))
class CatOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    dim = Attr(AttrKind.INT)
    syntax = "$lhs `,` $rhs `dim` `=` $dim attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"


@tile_op("constant", traits=("pure",))
class ConstantOp(Operation):
    result = Result()
    value = Attr(AttrKind.DENSE)
    syntax = "custom<DenseConstant>($value, type($result)) attr-dict"


@tile_op("exti", traits=("pure",))
class ExtIOp(Operation):
    result = Result()
    from_ = Operand(name="from")
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$from $signedness attr-dict `:` type($from) `->` type($result)"


@tile_op("extract", sized_results=True, traits=("pure",))
class ExtractOp(Operation):
    result = Result()
    source = Operand()
    indices = Variadic()
    syntax = "$source `[` $indices `]` attr-dict `:` type($source) `->` type($result)"


@tile_op("ftof", traits=("pure",))
class FToFOp(Operation):
    result = Result()
    from_ = Operand(name="from")
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    syntax = "$from ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? attr-dict `:` type($from) `->` type($result)"


@tile_op("ftoi", traits=("pure",))
class FToIOp(Operation):
    result = Result()
    from_ = Operand(name="from")
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    saturating = Attr(AttrKind.UNIT, since=V13_4)
    syntax = "$from $signedness ` ` (`rounding` `<` $rounding_mode^=nearest_int_to_zero `>`)? (`saturating` $saturating^)? attr-dict `:` type($from) `->` type($result)"


@tile_op("get_global", traits=("pure",))
class GetGlobalOp(Operation):
    result = Result()
    name = Attr(AttrKind.STRING)
    syntax = "custom<SymbolRef>($name) attr-dict `:` type($result)"


@tile_op("get_num_tile_blocks", traits=("pure",))
class GetNumTileBlocksOp(Operation):
    gridSize_x = Result()
    gridSize_y = Result()
    gridSize_z = Result()
    syntax = "attr-dict `:` type($gridSize_x)"


@tile_op("get_tile_block_id", traits=("pure",))
class GetTileBlockIdOp(Operation):
    blockId_x = Result()
    blockId_y = Result()
    blockId_z = Result()
    syntax = "attr-dict `:` type($blockId_x)"


@tile_op("global")
class GlobalOp(Operation):
    sym_name = Attr(AttrKind.STRING)
    value = Attr(AttrKind.DENSE)
    alignment = Attr(AttrKind.INT)
    constant = Attr(AttrKind.UNIT, since=V13_3)
    symbol_visibility = Attr(AttrKind.ENUM, enum=SymbolVisibility, since=V13_3)
    syntax = "custom<SymbolVisibility>($symbol_visibility) (`constant` $constant^)? custom<SymbolRef>($sym_name) (`alignment` `=` $alignment^=0)? attr-dict custom<DenseConstant>($value)"


@tile_op("itof", traits=("pure",))
class IToFOp(Operation):
    result = Result()
    from_ = Operand(name="from")
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    syntax = "$from $signedness ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? attr-dict `:` type($from) `->` type($result)"


@tile_op("insert", sized_results=True, traits=("pure",))
class InsertOp(Operation):
    result = Result()
    source = Operand()
    destination = Operand()
    indices = Variadic()
    syntax = "$source `,` $destination `[` $indices `]` attr-dict `:` type($source) `,` type($destination)"


@tile_op("int_to_ptr", traits=("pure",))
class IntToPtrOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"


@tile_op("iota", traits=("pure",))
class IotaOp(Operation):
    result = Result()
    syntax = "attr-dict `:` type($result)"


@tile_op("module")
class ModuleOp(Operation):
    sym_name = Attr(AttrKind.STRING)
    producer = Attr(AttrKind.STRING, optional=True, since=V13_3)
    body = RegionDef()


@tile_op("offset", traits=("pure",))
class OffsetOp(Operation):
    result = Result()
    ptr = Operand()
    offset = Operand()
    syntax = "$ptr `,` $offset attr-dict `:` type($ptr) `,` type($offset) `->` type($result)"


@tile_op("pack", traits=("pure",))
class PackOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"


@tile_op("permute", traits=("pure",))
class PermuteOp(Operation):
    result = Result()
    source = Operand()
    permutation = Attr(AttrKind.I32_ARRAY)
    syntax = "$source $permutation attr-dict `:` type($source) `->` type($result)"


@tile_op("ptr_to_int", traits=("pure",))
class PtrToIntOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"


@tile_op("ptr_to_ptr", traits=("pure",))
class PtrToPtrOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"


@tile_op("reduce", sized_results=True)
class ReduceOp(Operation):
    results = Result(variadic=True)
    operands = Variadic()
    dim = Attr(AttrKind.INT)
    identities = Attr(AttrKind.ARRAY)
    body = RegionDef()
    syntax = "$operands attr-dict ` ` `dim` `` `=` `` $dim `identities` `` `=` `` $identities `:` type($operands) `->` type($results) custom<ArgumentRegion>($body)"


@tile_op("reshape", traits=("pure",))
class ReshapeOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"


@tile_op("scan", sized_results=True)
class ScanOp(Operation):
    results = Result(variadic=True)
    operands = Variadic()
    dim = Attr(AttrKind.INT)
    reverse = Attr(AttrKind.BOOL)
    identities = Attr(AttrKind.ARRAY)
    body = RegionDef()
    syntax = "$operands attr-dict ` ` `dim` `` `=` `` $dim `reverse` `` `=` `` $reverse `identities` `` `=` `` $identities `:` type($operands) `->` type($results) custom<ArgumentRegion>($body)"


@tile_op("select", traits=("pure",))
class SelectOp(Operation):
    result = Result()
    cond = Operand()
    val_if_true = Operand()
    val_if_false = Operand()
    syntax = "$cond `,` $val_if_true `,` $val_if_false attr-dict `:` type($cond) `,` type($result)"


@tile_op("trunci", traits=("pure",))
class TruncIOp(Operation):
    result = Result()
    from_ = Operand(name="from")
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$from (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($from) `->` type($result)"


@tile_op("unpack", traits=("pure",))
class UnpackOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"
