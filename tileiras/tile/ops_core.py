"""core ops."""
from __future__ import annotations

from ..ir.core import Operation
from ..ir.version import V13_2, V13_3, V13_4, V13_5  # noqa: F401
from .constraints import (FLOAT_TILE, I1_TILE, I8_TILE, I64_TILE, INT_OR_I4_TILE, INT_TILE, NUMBER_OR_I4_TILE,
                          NUMBER_TILE, PTR_TILE, SCALAR_I32, SCALAR_PTR, TILE, Match, same, sig)
from .enums import IntegerOverflow, RoundingMode, Signedness, SymbolVisibility  # noqa: F401
from .registry import I32_NON_NEGATIVE, Attr, AttrKind, Operand, RegionDef, Result, Variadic, tile_op
from .traits import (Elementwise, ImplicitTerminator, Latency, OpClass, Pure, Recomputable,
                     RecursiveMemoryEffects)


@tile_op("bitcast", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.FREE)))
class BitcastOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"
    signature = sig(same("shape", "source", "result"), source=NUMBER_TILE, result=NUMBER_TILE)


@tile_op("broadcast", traits=(Pure(), Recomputable(free=True), Latency(OpClass.MOVE)))
class BroadcastOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"
    signature = sig(Match("same_element"), same("rank", "source", "result"), source=TILE, result=TILE)


@tile_op("cat", traits=(Pure(), Latency(OpClass.MOVE)))
class CatOp(Operation):
    result = Result()
    lhs = Operand()
    rhs = Operand()
    dim = Attr(AttrKind.INT)
    syntax = "$lhs `,` $rhs `dim` `=` $dim attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"
    signature = sig(same("rank", "lhs", "rhs", "result"), Match("element", ("lhs", "rhs", "result")),
                    lhs=TILE, rhs=TILE, result=TILE)


@tile_op("constant", traits=(Pure(), Recomputable(free=True), Latency(OpClass.FREE)))
class ConstantOp(Operation):
    result = Result()
    value = Attr(AttrKind.DENSE)
    syntax = "custom<DenseConstant>($value, type($result)) attr-dict"
    signature = sig(result=NUMBER_TILE)


@tile_op("exti", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class ExtIOp(Operation):
    result = Result()
    from_ = Operand(name="from")
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    syntax = "$from $signedness attr-dict `:` type($from) `->` type($result)"
    signature = sig(same("shape", "from", "result=to"), from_=INT_OR_I4_TILE, result=INT_OR_I4_TILE)


@tile_op("extract", sized_results=True, traits=(Pure(), Latency(OpClass.MOVE)))
class ExtractOp(Operation):
    result = Result()
    source = Operand()
    indices = Variadic()
    syntax = "$source `[` $indices `]` attr-dict `:` type($source) `->` type($result)"
    signature = sig(same("rank", "source", "result"), source=TILE, indices=SCALAR_I32, result=TILE)


@tile_op("ftof", traits=(Pure(), Elementwise(), Latency(OpClass.CONVERT)))
class FToFOp(Operation):
    result = Result()
    from_ = Operand(name="from")
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    syntax = "$from ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? attr-dict `:` type($from) `->` type($result)"
    signature = sig(same("shape", "from", "result=to"), from_=FLOAT_TILE, result=FLOAT_TILE)


@tile_op("ftoi", traits=(Pure(), Elementwise(), Latency(OpClass.CONVERT)))
class FToIOp(Operation):
    result = Result()
    from_ = Operand(name="from")
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    saturating = Attr(AttrKind.UNIT, since=V13_4)
    syntax = "$from $signedness ` ` (`rounding` `<` $rounding_mode^=nearest_int_to_zero `>`)? (`saturating` $saturating^)? attr-dict `:` type($from) `->` type($result)"
    signature = sig(same("shape", "from", "result=to"), from_=FLOAT_TILE, result=INT_TILE)


@tile_op("get_global", traits=(Pure(), Latency(OpClass.FREE)))
class GetGlobalOp(Operation):
    result = Result()
    name = Attr(AttrKind.STRING)
    syntax = "custom<SymbolRef>($name) attr-dict `:` type($result)"
    signature = sig(result=SCALAR_PTR)


@tile_op("get_num_tile_blocks", traits=(Pure(), Latency(OpClass.FREE)))
class GetNumTileBlocksOp(Operation):
    gridSize_x = Result()
    gridSize_y = Result()
    gridSize_z = Result()
    syntax = "attr-dict `:` type($gridSize_x)"
    signature = sig(gridSize_x=SCALAR_I32, gridSize_y=SCALAR_I32, gridSize_z=SCALAR_I32)


@tile_op("get_tile_block_id", traits=(Pure(), Latency(OpClass.FREE)))
class GetTileBlockIdOp(Operation):
    blockId_x = Result()
    blockId_y = Result()
    blockId_z = Result()
    syntax = "attr-dict `:` type($blockId_x)"
    signature = sig(blockId_x=SCALAR_I32, blockId_y=SCALAR_I32, blockId_z=SCALAR_I32)


@tile_op("global")
class GlobalOp(Operation):
    sym_name = Attr(AttrKind.STRING)
    value = Attr(AttrKind.DENSE)
    alignment = Attr(AttrKind.INT)
    constant = Attr(AttrKind.UNIT, since=V13_3)
    symbol_visibility = Attr(AttrKind.ENUM, enum=SymbolVisibility, since=V13_3)
    syntax = "custom<SymbolVisibility>($symbol_visibility) (`constant` $constant^)? custom<SymbolRef>($sym_name) (`alignment` `=` $alignment^=0)? attr-dict custom<DenseConstant>($value)"


@tile_op("itof", traits=(Pure(), Elementwise(), Latency(OpClass.CONVERT)))
class IToFOp(Operation):
    result = Result()
    from_ = Operand(name="from")
    signedness = Attr(AttrKind.ENUM, enum=Signedness)
    rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
    syntax = "$from $signedness ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? attr-dict `:` type($from) `->` type($result)"
    signature = sig(same("shape", "from", "result=to"), from_=INT_TILE, result=FLOAT_TILE)


@tile_op("insert", sized_results=True, traits=(Pure(), Latency(OpClass.MOVE)))
class InsertOp(Operation):
    result = Result()
    source = Operand()
    destination = Operand()
    indices = Variadic()
    syntax = "$source `,` $destination `[` $indices `]` attr-dict `:` type($source) `,` type($destination)"
    signature = sig(same("rank", "source", "destination"), same("type", "destination", "result"),
                    source=TILE, destination=TILE, indices=SCALAR_I32, result=TILE)


@tile_op("int_to_ptr", traits=(Pure(), Elementwise(), Latency(OpClass.FREE)))
class IntToPtrOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"
    signature = sig(same("shape", "source", "result"), source=I64_TILE, result=PTR_TILE)


@tile_op("iota", traits=(Pure(), Recomputable(), Latency(OpClass.INT)))
class IotaOp(Operation):
    result = Result()
    syntax = "attr-dict `:` type($result)"
    signature = sig(result=INT_TILE)


@tile_op("module")
class ModuleOp(Operation):
    sym_name = Attr(AttrKind.STRING)
    producer = Attr(AttrKind.STRING, optional=True, since=V13_3)
    body = RegionDef()


@tile_op("offset", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class OffsetOp(Operation):
    result = Result()
    ptr = Operand()
    offset = Operand()
    syntax = "$ptr `,` $offset attr-dict `:` type($ptr) `,` type($offset) `->` type($result)"
    signature = sig(Match("same_shape_all"), same("type", "result", "ptr"), ptr=PTR_TILE, offset=INT_TILE,
                    result=PTR_TILE)


@tile_op("pack", traits=(Pure(), Latency(OpClass.MOVE)))
class PackOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"
    signature = sig(same("rank", "source", "result"), source=NUMBER_OR_I4_TILE, result=I8_TILE)


@tile_op("permute", traits=(Pure(), Recomputable(free=True), Latency(OpClass.FREE)))
class PermuteOp(Operation):
    result = Result()
    source = Operand()
    permutation = Attr(AttrKind.I32_ARRAY)
    syntax = "$source $permutation attr-dict `:` type($source) `->` type($result)"
    signature = sig(Match("element", ("source", "result")), same("rank", "source", "result"), source=TILE, result=TILE)


@tile_op("ptr_to_int", traits=(Pure(), Elementwise(), Latency(OpClass.FREE)))
class PtrToIntOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"
    signature = sig(same("shape", "source", "result"), source=PTR_TILE, result=I64_TILE)


@tile_op("ptr_to_ptr", traits=(Pure(), Elementwise(), Latency(OpClass.FREE)))
class PtrToPtrOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"
    signature = sig(same("shape", "source", "result"), source=PTR_TILE, result=PTR_TILE)


@tile_op("reduce", sized_results=True,
         traits=(RecursiveMemoryEffects(), ImplicitTerminator("yield"), Latency(OpClass.REDUCE)))
class ReduceOp(Operation):
    results = Result(variadic=True)
    operands = Variadic()
    dim = Attr(AttrKind.INT, minimum=I32_NON_NEGATIVE)
    identities = Attr(AttrKind.ARRAY)
    body = RegionDef()
    syntax = "$operands attr-dict ` ` `dim` `` `=` `` $dim `identities` `` `=` `` $identities `:` type($operands) `->` type($results) custom<ArgumentRegion>($body)"
    signature = sig(Match("same_operand_shape"), operands=TILE, results=TILE)


@tile_op("reshape", traits=(Pure(), Recomputable(free=True), Latency(OpClass.FREE)))
class ReshapeOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"
    signature = sig(Match("same_element"), source=TILE, result=TILE)


@tile_op("scan", sized_results=True,
         traits=(RecursiveMemoryEffects(), ImplicitTerminator("yield"), Latency(OpClass.REDUCE)))
class ScanOp(Operation):
    results = Result(variadic=True)
    operands = Variadic()
    dim = Attr(AttrKind.INT, minimum=I32_NON_NEGATIVE)
    reverse = Attr(AttrKind.BOOL)
    identities = Attr(AttrKind.ARRAY)
    body = RegionDef()
    syntax = "$operands attr-dict ` ` `dim` `` `=` `` $dim `reverse` `` `=` `` $reverse `identities` `` `=` `` $identities `:` type($operands) `->` type($results) custom<ArgumentRegion>($body)"
    signature = sig(Match("same_operand_shape"), operands=TILE, results=TILE)


@tile_op("select", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.MOVE)))
class SelectOp(Operation):
    result = Result()
    cond = Operand()
    val_if_true = Operand()
    val_if_false = Operand()
    syntax = "$cond `,` $val_if_true `,` $val_if_false attr-dict `:` type($cond) `,` type($result)"
    signature = sig(same("type", "val_if_true", "val_if_false", "result"),
                    same("shape", "cond", "val_if_true", "val_if_false", "result"),
                    cond=I1_TILE, val_if_true=TILE, val_if_false=TILE, result=TILE)


@tile_op("trunci", traits=(Pure(), Elementwise(), Recomputable(), Latency(OpClass.INT)))
class TruncIOp(Operation):
    result = Result()
    from_ = Operand(name="from")
    overflow = Attr(AttrKind.ENUM, enum=IntegerOverflow)
    syntax = "$from (`overflow` `<` $overflow^=none `>`)? attr-dict `:` type($from) `->` type($result)"
    signature = sig(same("shape", "from", "result=to"), from_=INT_OR_I4_TILE, result=INT_OR_I4_TILE)


@tile_op("unpack", traits=(Pure(), Latency(OpClass.MOVE)))
class UnpackOp(Operation):
    result = Result()
    source = Operand()
    syntax = "$source attr-dict `:` type($source) `->` type($result)"
    signature = sig(same("rank", "source", "result"), source=I8_TILE, result=NUMBER_OR_I4_TILE)
