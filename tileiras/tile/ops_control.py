"""control ops."""
from __future__ import annotations

from ..ir.core import Operation
from ..ir import types as T
from ..ir.version import V13_2, V13_3, V13_4, V13_5  # noqa: F401
from .constraints import I1_TILE, SCALAR_I1, SCALAR_INT, TILE, TOKEN, same, sig
from .enums import RoundingMode  # noqa: F401
from .registry import Attr, AttrKind, Operand, Optional_, RegionDef, Result, Variadic, tile_op  # noqa: F401
from .traits import (Elementwise, ImplicitTerminator, Latency, MemoryEffects, NoMemoryEffect, OpClass, Pure,
                     Resource, Terminator, Write)


@tile_op("assert", traits=(MemoryEffects((Write(Resource.EXECUTION),)), Latency(OpClass.INT)))
class AssertOp(Operation):
    condition = Operand()
    message = Attr(AttrKind.STRING)
    syntax = "$condition `,` $message attr-dict `:` type($condition)"
    signature = sig(condition=I1_TILE)


@tile_op("assume", traits=(NoMemoryEffect(), Elementwise(), Latency(OpClass.FREE)))
class AssumeOp(Operation):
    result = Result()
    value = Operand()
    predicate = Attr(AttrKind.TAGGED)
    syntax = "custom<AssumePredicate>($predicate) `,` $value attr-dict `:` type($value)"
    signature = sig(same("type", "value", "result"))


@tile_op("break", sized_results=True, traits=(Terminator(("if", "loop")), Latency(OpClass.FREE)))
class BreakOp(Operation):
    operands = Variadic()
    syntax = "attr-dict ($operands^ `:` type($operands))?"


@tile_op("continue", sized_results=True, traits=(Terminator(("for", "if", "loop")), Latency(OpClass.FREE)))
class ContinueOp(Operation):
    operands = Variadic()
    syntax = "attr-dict ($operands^ `:` type($operands))?"


@tile_op("for", sized_results=True, traits=(ImplicitTerminator("continue"), Latency(OpClass.CONTROL)))
class ForOp(Operation):
    results = Result(variadic=True)
    lowerBound = Operand()
    upperBound = Operand()
    step = Operand()
    initValues = Variadic()
    unsignedCmp = Attr(AttrKind.UNIT, since=V13_2)
    body = RegionDef()
    signature = sig(same("type", "lowerBound", "upperBound", "step"),
                    lowerBound=SCALAR_INT, upperBound=SCALAR_INT, step=SCALAR_INT)


@tile_op("gdc_launch_dependents_tko",
         traits=(MemoryEffects((Write(Resource.EXECUTION),)), Latency(OpClass.BARRIER)))
class GdcLaunchDependentsTkoOp(Operation):
    result_token = Result()
    token = Optional_()
    syntax = "(`token` `=` $token^)? attr-dict `->` type($result_token)"
    signature = sig(token=TOKEN, result_token=TOKEN)


@tile_op("gdc_wait_tko", traits=(MemoryEffects((Write(Resource.EXECUTION),)), Latency(OpClass.BARRIER)))
class GdcWaitTkoOp(Operation):
    result_token = Result()
    token = Optional_()
    syntax = "(`token` `=` $token^)? attr-dict `->` type($result_token)"
    signature = sig(token=TOKEN, result_token=TOKEN)


@tile_op("if", sized_results=True, traits=(ImplicitTerminator("yield"), Latency(OpClass.CONTROL)))
class IfOp(Operation):
    results = Result(variadic=True)
    condition = Operand()
    then_region = RegionDef()
    else_region = RegionDef()
    syntax = "$condition (`->` `(` type($results)^ `)`)? custom<IfRegion>($then_region) (`else` custom<IfRegion>($else_region)^)? attr-dict"
    signature = sig(condition=SCALAR_I1)


@tile_op("loop", sized_results=True, traits=(ImplicitTerminator("continue"), Latency(OpClass.CONTROL)))
class LoopOp(Operation):
    results = Result(variadic=True)
    initValues = Variadic()
    body = RegionDef()


@tile_op("print_tko", sized_results=True,
         traits=(MemoryEffects((Write(Resource.OUTPUT),)), Latency(OpClass.PRINT)))
class PrintTkoOp(Operation):
    result_token = Result(since=V13_2, default_type=T.TOKEN)
    args = Variadic()
    token = Optional_(V13_2)
    str = Attr(AttrKind.STRING)
    syntax = "$str (`,` $args^)? (`token` `` `=` `` $token^)? attr-dict (`:` type($args)^)? `->` type($result_token)"
    signature = sig(args=TILE, token=TOKEN, result_token=TOKEN)


@tile_op("return", sized_results=True, traits=(Terminator(("entry", "if")), Latency(OpClass.FREE)))
class ReturnOp(Operation):
    operands = Variadic()
    syntax = "attr-dict ($operands^ `:` type($operands))?"


@tile_op("yield", sized_results=True,
         traits=(Pure(), Terminator(("if", "reduce", "scan")), Latency(OpClass.FREE)))
class YieldOp(Operation):
    operands = Variadic()
    syntax = "attr-dict ($operands^ `:` type($operands))?"


@tile_op("preview$call", sized_results=True)
class PreviewCallOp(Operation):
    """SIMT preview: a call of an extern ``preview$func`` (its code comes from a ``-l`` tile
    library).  NVIDIA's 13.5 tools read and print it; none of its callees can be declared
    in a module they accept, and its tileiras compiles none (tilelib.py)."""
    results = Result(variadic=True)
    callee = Attr(AttrKind.STRING)
    const_args = Attr(AttrKind.ARRAY)
    arg_attrs = Attr(AttrKind.ARRAY, optional=True)
    res_attrs = Attr(AttrKind.ARRAY, optional=True)
    args = Variadic()
    syntax = "custom<Callee>($callee, $const_args) `` `(` $args `)` attr-dict `:` custom<CallType>($args, $results)"
