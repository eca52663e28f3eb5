"""The text printer on hand-built modules.

Every expected text below was checked against NVIDIA's tileirdisasm (the module
written with our writer, then disassembled); the conformance tests in
``test_disasm_conformance.py`` cover real cuTile kernels.
"""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, strategies as st

from tileiras.ir.attrs import (BoundedAttr, DenseElementsAttr, DictAttr, DivByAttr, IntegerAttr,
                               OptimizationHintsAttr, SameElementsAttr)
from tileiras.ir.core import Block, Function, Global, Module, Operation, Region, Value
from tileiras.ir.debug import DICallSite, DICompileUnit, DIFile, DILexicalBlock, DILoc, DISubprogram
from tileiras.ir.types import (DYNAMIC, F16, F32, F64, I1, I8, I16, I32, I64, TOKEN, FunctionType,
                               PaddingValue, PartitionViewType, PointerType, StridedViewType,
                               TensorViewType, TileType, Type)
from tileiras.ir.version import V13_5
from tileiras.text.floats import format_float
from tileiras.text.printer import print_module, print_op
from tileiras.text.syntax import (AttrDict, Custom, FieldRef, FormatError, Literal, OptionalGroup,
                                  SpacingState, TypeOf, Whitespace, parse_format)
from tileiras.tile import ops_arith as A, ops_control as K, ops_core as C, ops_memory as M
from tileiras.tile.enums import (AtomicRMWMode, ComparisonPredicate, IntegerOverflow, MemoryOrderingSemantics,
                                 MemoryScope, RoundingMode, Signedness, SymbolVisibility)


def t(elem: Type, *shape: int) -> TileType:
    return TileType(elem, tuple(shape))


class Builder:
    def __init__(self, block: Block):
        self.block = block

    def op(self, cls: type, operands=(), attrs=None, types=(), regions=(), segments=None):
        o: Operation = cls(operands=operands, attributes=attrs or {}, result_types=types,
                           regions=regions, segments=segments)
        self.block.append(o)
        return o.results[0] if len(o.results) == 1 else o.results

    def const(self, elem, values, shape=()):
        if elem.is_int:
            width = max(elem.bitwidth, 8) // 8
            data = b"".join((v % (1 << 8 * width)).to_bytes(width, "little") for v in values)
        else:
            code = {"f16": "<e", "f32": "<f", "f64": "<d"}[elem.name]
            data = b"".join(struct.pack(code, v) for v in values)
        ty = t(elem, *shape)
        return self.op(C.ConstantOp, attrs={"value": DenseElementsAttr(ty, data)}, types=[ty])


def kernel(arg_types, build, *, globals_=(), loc=None) -> Module:
    block = Block(arg_types)
    b = Builder(block)
    build(b, block.args)
    b.op(K.ReturnOp, [])
    hints = OptimizationHintsAttr((("sm_100", DictAttr(())),))
    f = Function("kern", FunctionType(tuple(arg_types), ()), Region([block]), is_entry=True,
                 hints=hints, loc=loc)
    return Module(V13_5, [f], list(globals_))


HEADER = "entry @kern({}) optimization_hints=<sm_100 = {{}}> {{\n"


# ---------------------------------------------------------------------------
# the format mini language


def test_parse_format_tree() -> None:
    f = parse_format("$lhs `,` $rhs ` ` (`rounding` `<` $rounding_mode^=nearest_even `>`)? "
                     "attr-dict `:` type($result) custom<IndexTypes>($index)")
    assert f.elements[0] == FieldRef("lhs")
    assert f.elements[1] == Literal(",")
    assert f.elements[3] == Whitespace(" ")
    group = f.elements[4]
    assert isinstance(group, OptionalGroup)
    assert group.anchor == FieldRef("rounding_mode", True, "nearest_even")
    assert f.elements[5] == AttrDict()
    assert f.elements[7] == TypeOf("result")
    assert f.elements[8] == Custom("IndexTypes", (FieldRef("index"),))
    assert f.field_names() == {"lhs", "rhs", "rounding_mode", "result", "index"}
    assert parse_format(f.source) is f  # parsed once


def test_parse_format_errors() -> None:
    with pytest.raises(FormatError):
        parse_format("(`token` $token)?")  # no anchor
    with pytest.raises(FormatError):
        parse_format("bogus($x)")


def test_every_syntax_parses_and_names_real_fields() -> None:
    from tileiras.tile import OPS_BY_NAME

    for d in OPS_BY_NAME.values():
        if d.syntax is None:
            continue
        fields = {s.name for group in (d.operands, d.attrs, d.results, d.regions) for s in group}
        assert parse_format(d.syntax).field_names() <= fields, d.name


def test_spacing_follows_mlir() -> None:
    s = SpacingState()
    assert s.before_element()          # after the mnemonic
    assert not s.before_literal(",")   # no space before a comma
    assert s.before_element()
    assert not s.before_literal("[")
    assert not s.before_element()      # right after an opening bracket
    assert not s.before_literal("]")
    assert s.before_literal("->")


# ---------------------------------------------------------------------------
# floats


@pytest.mark.parametrize("value,type_name,text", [
    (1.0, "f32", "1.000000e+00"), (-3e38, "f32", "-3.000000e+38"), (0.1, "f32", "1.000000e-01"),
    (3.14159265, "f32", "3.14159274"), (-0.0, "f32", "-0.000000e+00"), (1e-45, "f32", "1.401300e-45"),
    (float("inf"), "f32", "0x7F800000"), (float("nan"), "f32", "0x7FC00000"),
    (16777216.0, "f32", "0x4B800000"), (3.14159265, "f64", "3.1415926500000002"),
])
def test_format_float(value: float, type_name: str, text: str) -> None:
    code = {"f32": "<f", "f64": "<d"}[type_name]
    bits = int.from_bytes(struct.pack(code, value), "little")
    assert format_float(bits, type_name) == text


@given(st.integers(0, (1 << 32) - 1))
def test_format_float_round_trips(bits: int) -> None:
    text = format_float(bits, "f32")
    if not text.startswith("0x"):
        (value,) = struct.unpack("<f", struct.pack("<f", float(text)))
        assert struct.pack("<f", value) == bits.to_bytes(4, "little")


def test_format_f16() -> None:
    assert format_float(0x3C00, "f16") == "1.000000e+00"
    assert format_float(0x7C00, "f16") == "0x7C00"


# ---------------------------------------------------------------------------
# whole modules


def test_constants_and_names() -> None:
    def build(b, args):
        b.const(I32, [1, 2, 3, 4], (4,))
        b.const(F32, [1.5, -2.0, 3.25, 0.1], (2, 2))
        b.const(I8, list(range(64)), (2, 32))
        b.const(F32, [float("nan")])
        b.const(F32, [float("inf")] * 4, (4,))
        b.const(F64, [2.0])
        b.const(F16, [3.0])
        b.const(I64, [-5])
        b.const(F32, [-0.0])
        b.const(I32, [7])
        b.const(I32, [7])
    row = ", ".join(str(i) for i in range(32))
    row2 = ", ".join(str(i) for i in range(32, 64))
    assert print_module(kernel([t(I32)], build)) == HEADER.format("%arg0: tile<i32>") + (
        "  %cst_i32 = constant <i32: [1, 2, 3, 4]> : tile<4xi32>\n"
        "  %cst_f32 = constant <f32: [[1.500000e+00, -2.000000e+00], [3.250000e+00, 1.000000e-01]]>"
        " : tile<2x2xf32>\n"
        f"  %cst_i8 = constant <i8: [[{row}], [{row2}]]> : tile<2x32xi8>\n"
        "  %cst_NaN_f32 = constant <f32: 0x7FC00000> : tile<f32>\n"
        "  %cst_f32_0 = constant <f32: 0x7F800000> : tile<4xf32>\n"
        "  %cst_2_f64 = constant <f64: 2.000000e+00> : tile<f64>\n"
        "  %cst_3_f16 = constant <f16: 3.000000e+00> : tile<f16>\n"
        "  %cst_-5_i64 = constant <i64: -5> : tile<i64>\n"
        "  %cst_f32_1 = constant <f32: -0.000000e+00> : tile<f32>\n"
        "  %cst_7_i32 = constant <i32: 7> : tile<i32>\n"
        "  %cst_7_i32_2 = constant <i32: 7> : tile<i32>\n"
        "  return\n}\n")


def test_large_constant_prints_as_hex() -> None:
    def build(b, args):
        b.const(I8, [i % 256 - 100 for i in range(256)], (256,))
    text = print_module(kernel([], build))
    data = bytes((i - 100) % 256 for i in range(256))
    assert f'constant <i8: "0x{data.hex().upper()}"> : tile<256xi8>' in text


def _views_module() -> Module:
    tv_type = TensorViewType(F32, (DYNAMIC, 64), (DYNAMIC, 1))
    tv2_type = TensorViewType(F32, (128, 64), (64, 1))

    def build(b, a):
        ptr, n, x, _ = a
        tok = b.op(M.MakeTokenOp, types=[TOKEN])
        tv = b.op(M.MakeTensorViewOp, [ptr, n, n], types=[tv_type], segments=(1, 1, 1))
        tv2 = b.op(M.MakeTensorViewOp, [ptr], types=[tv2_type], segments=(1, 0, 0))
        pv = b.op(M.MakePartitionViewOp, [tv],
                  types=[PartitionViewType((16, 16), tv_type, (1, 0), PaddingValue.NAN)])
        sv = b.op(M.MakeStridedViewOp, [tv2], types=[StridedViewType((16, 16), (2, 4), tv2_type, (0, 1))])
        shape = b.op(M.GetTensorShapeOp, [tv], types=[t(I32), t(I32)])
        hints = OptimizationHintsAttr((("sm_90", DictAttr((("latency", IntegerAttr(I32, 3)),))),))
        tile, _ = b.op(M.LoadViewTkoOp, [pv, x, x, tok],
                       attrs={"memory_ordering_semantics": MemoryOrderingSemantics.ACQUIRE,
                              "memory_scope": MemoryScope.SYS, "inbounds": (True, False),
                              "optimization_hints": hints},
                       types=[t(F32, 16, 16), TOKEN], segments=(1, 2, 1))
        b.op(M.StoreViewTkoOp, [tile, sv, x, x],
             attrs={"memory_ordering_semantics": MemoryOrderingSemantics.WEAK, "inbounds": (False, False)},
             types=[TOKEN], segments=(1, 1, 2, 0))
        iota = b.op(C.IotaOp, types=[t(I32, 16)])
        b.op(K.AssumeOp, [iota], attrs={"predicate": DivByAttr(16, 4, 0)}, types=[t(I32, 16)])
        b.op(K.AssumeOp, [iota], attrs={"predicate": SameElementsAttr((4,))}, types=[t(I32, 16)])
        b.op(K.AssumeOp, [x], attrs={"predicate": BoundedAttr(-3, None)}, types=[t(I32)])
        b.op(K.AssumeOp, [shape[0]], attrs={"predicate": DivByAttr(8)}, types=[t(I32)])
        f = b.op(C.IToFOp, [x], attrs={"signedness": Signedness.SIGNED,
                                       "rounding_mode": RoundingMode.NEAREST_EVEN}, types=[t(F32)])
        b.op(C.TruncIOp, [x], attrs={"overflow": IntegerOverflow.NO_WRAP}, types=[t(I16)])
        b.op(A.ExpOp, [f], attrs={"rounding_mode": RoundingMode.APPROX}, types=[t(F32)])
        b.op(A.SqrtOp, [f], attrs={"rounding_mode": RoundingMode.NEAREST_EVEN, "flush_to_zero": True},
             types=[t(F32)])
        b.op(A.MaxFOp, [f, f], attrs={"propagate_nan": True, "flush_to_zero": True}, types=[t(F32)])
    return kernel([t(PointerType(F32)), t(I32), t(I32), t(F32)], build)


def test_views_memory_and_assume() -> None:
    pv = "partition_view<tile=(16x16), padding_value = nan, tensor_view<?x64xf32, strides=[?,1]>, dim_map=[1, 0]>"
    sv = "strided_view<tile=(16x16), traversal_strides=[2,4], tensor_view<128x64xf32, strides=[64,1]>>"
    expected = HEADER.format("%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<f32>") + (
        "  %0 = make_token : token\n"
        "  %tview = make_tensor_view %arg0, shape = [%arg1, 64], strides = [%arg1, 1] : tile<i32> -> "
        "tensor_view<?x64xf32, strides=[?,1]>\n"
        "  %tview_0 = make_tensor_view %arg0, shape = [128, 64], strides = [64, 1] : "
        "tensor_view<128x64xf32, strides=[64,1]>\n"
        f"  %pview = make_partition_view %tview : {pv}\n"
        f"  %sview = make_strided_view %tview_0 : {sv}\n"
        "  %1:2 = get_tensor_shape %tview : tensor_view<?x64xf32, strides=[?,1]> -> tile<i32>\n"
        "  %tile, %result_token = load_view_tko acquire sys %pview[%arg2, %arg2] token = %0 "
        "optimization_hints = <sm_90 = {latency = 3}> inbounds = [true, false] : "
        f"{pv}, tile<i32> -> tile<16x16xf32>, token\n"
        f"  %2 = store_view_tko weak %tile, %sview[%arg2, %arg2] : tile<16x16xf32>, {sv}, tile<i32> -> token\n"
        "  %3 = iota : tile<16xi32>\n"
        "  %assume = assume div_by<16, every 4 along 0>, %3 : tile<16xi32>\n"
        "  %assume_1 = assume same_elements<[4]>, %3 : tile<16xi32>\n"
        "  %assume_2 = assume bounded<-3, ?>, %arg2 : tile<i32>\n"
        "  %assume_3 = assume div_by<8>, %1#0 : tile<i32>\n"
        "  %4 = itof %arg2 signed  : tile<i32> -> tile<f32>\n"
        "  %5 = trunci %arg2 overflow<no_wrap> : tile<i32> -> tile<i16>\n"
        "  %6 = exp %4 rounding<approx> : tile<f32>\n"
        "  %7 = sqrt %4  flush_to_zero : tile<f32>\n"
        "  %8 = maxf %4, %4 flush_to_zero propagate_nan : tile<f32>\n"
        "  return\n}\n")
    assert print_module(_views_module()) == expected


def test_control_flow_atomics_and_regions() -> None:
    ptr_type = PointerType(I32)

    def build(b, a):
        ptr, n, x, _ = a
        tok = b.op(M.MakeTokenOp, types=[TOKEN])
        body = Block([t(I32)])
        Builder(body).op(K.ContinueOp, [])
        b.op(K.ForOp, [x, n, x], attrs={"unsignedCmp": True}, regions=[Region([body])])
        body = Block([])
        Builder(body).op(K.BreakOp, [x])
        b.op(K.LoopOp, [], regions=[Region([body])], types=[t(I32)])
        body = Block([t(I32)])
        Builder(body).op(K.BreakOp, [])
        b.op(K.LoopOp, [x], regions=[Region([body])])
        cond = b.op(A.CmpIOp, [x, n], attrs={"comparison_predicate": ComparisonPredicate.LESS_THAN,
                                              "signedness": Signedness.SIGNED}, types=[t(I1)])
        then = Block([])
        Builder(then).op(K.YieldOp, [])
        b.op(K.IfOp, [cond], regions=[Region([then]), Region([])])
        ptrs = b.op(C.BroadcastOp, [ptr], types=[t(ptr_type)])
        b.op(M.AtomicRMWTkoOp, [ptrs, x, cond, tok],
             attrs={"memory_ordering_semantics": MemoryOrderingSemantics.RELAXED,
                    "memory_scope": MemoryScope.DEVICE, "mode": AtomicRMWMode.UMAX},
             types=[t(I32), TOKEN], segments=(1, 1, 1, 1))
        b.op(K.PrintTkoOp, [], attrs={"str": 'hi "x" \\ \t'}, types=[TOKEN], segments=(0, 0))
        iota = b.op(C.IotaOp, types=[t(I32, 16)])
        rb = Block([t(I32)] * 4)
        Builder(rb).op(K.YieldOp, [rb.args[0], rb.args[2]])
        b.op(C.ReduceOp, [iota, iota], attrs={"dim": 0, "identities": (IntegerAttr(I32, 0), IntegerAttr(I32, 0xFFFFFFFF))},
             regions=[Region([rb])], types=[t(I32), t(I32)])
        sb = Block([t(I32)] * 2)
        Builder(sb).op(K.YieldOp, [sb.args[0]])
        b.op(C.ScanOp, [iota], attrs={"dim": 0, "reverse": True, "identities": (IntegerAttr(I32, 1),)},
             regions=[Region([sb])], types=[t(I32, 16)])

    expected = HEADER.format("%arg0: tile<ptr<i32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<f32>") + (
        "  %0 = make_token : token\n"
        "  for unsigned %loopIdx in (%arg2 to %arg1, step %arg2) : tile<i32> {\n  }\n"
        "  %1 = loop : tile<i32> {\n    break %arg2 : tile<i32>\n  }\n"
        "  loop iter_values(%arg4 = %arg2) : tile<i32> {\n    break\n  }\n"
        "  %2 = cmpi less_than %arg2, %arg1, signed : tile<i32> -> tile<i1>\n"
        "  if %2 {\n  }\n"
        "  %bcast = broadcast %arg0 : tile<ptr<i32>> -> tile<ptr<i32>>\n"
        "  %result, %result_token = atomic_rmw_tko relaxed device %bcast, umax, %arg2, %2 token=%0 : "
        "tile<ptr<i32>>, tile<i32>, tile<i1> -> tile<i32>, token\n"
        '  %3 = print_tko "hi \\22x\\22 \\\\ \\09" -> token\n'
        "  %4 = iota : tile<16xi32>\n"
        "  %reduce:2 = reduce %4, %4 dim=0 identities=[0 : i32, -1 : i32] : tile<16xi32>, tile<16xi32> -> "
        "tile<i32>, tile<i32> \n"
        "  (%reduce_lhs0: tile<i32>, %reduce_rhs0: tile<i32>, %reduce_lhs1: tile<i32>, %reduce_rhs1: tile<i32>) {\n"
        "    yield %reduce_lhs0, %reduce_lhs1 : tile<i32>, tile<i32>\n  }\n"
        "  %5 = scan %4 dim=0 reverse=true identities=[1 : i32] : tile<16xi32> -> tile<16xi32> \n"
        "  (%arg4: tile<i32>, %arg5: tile<i32>) {\n    yield %arg4 : tile<i32>\n  }\n"
        "  return\n}\n")
    assert print_module(kernel([t(PointerType(I32)), t(I32), t(I32), t(F32)], build)) == expected


def test_for_iter_values_and_nested_names() -> None:
    """Nested regions are numbered after their parent region, from its counters."""
    def build(b, a):
        lb, ub = a
        init = b.const(F32, [0.0])
        body = Block([t(I32), t(F32)])
        bb = Builder(body)
        inner = bb.const(F32, [1.0])
        s = bb.op(A.AddFOp, [body.args[1], inner], attrs={"rounding_mode": RoundingMode.NEAREST_EVEN},
                  types=[t(F32)])
        bb.op(K.ContinueOp, [s])
        res = b.op(K.ForOp, [lb, ub, lb, init], regions=[Region([body])], types=[t(F32)])
        b.const(F32, [1.0])
        b.op(A.NegFOp, [res], types=[t(F32)])

    assert print_module(kernel([t(I32), t(I32)], build)) == HEADER.format("%arg0: tile<i32>, %arg1: tile<i32>") + (
        "  %cst_0_f32 = constant <f32: 0.000000e+00> : tile<f32>\n"
        "  %for = for %loopIdx in (%arg0 to %arg1, step %arg0) : tile<i32> "
        "iter_values(%iterArg0 = %cst_0_f32) -> (tile<f32>) {\n"
        "    %cst_1_f32_0 = constant <f32: 1.000000e+00> : tile<f32>\n"
        "    %1 = addf %iterArg0, %cst_1_f32_0  : tile<f32>\n"
        "    continue %1 : tile<f32>\n  }\n"
        "  %cst_1_f32 = constant <f32: 1.000000e+00> : tile<f32>\n"
        "  %0 = negf %for : tile<f32>\n"
        "  return\n}\n")


def test_globals_and_symbols() -> None:
    globals_ = [Global("g1", t(I32, 4), b"".join(v.to_bytes(4, "little") for v in (7, 7, 9, 9)),
                       alignment=16, constant=True, is_private=True),
                Global("weird.name-x", t(I32, 2), b"\x01\0\0\0\x02\0\0\0")]

    def build(b, a):
        b.op(C.GetGlobalOp, attrs={"name": "g1"}, types=[t(PointerType(I32))])
        b.op(C.GetGlobalOp, attrs={"name": "weird.name-x"}, types=[t(PointerType(I32))])

    text = print_module(kernel([], build, globals_=globals_))
    assert text.startswith("global private  constant @g1 alignment = 16 <i32: [7, 7, 9, 9]> : tile<4xi32>\n"
                           'global  @"weird.name-x" <i32: [1, 2]> : tile<2xi32>\n')
    assert '  %1 = get_global @"weird.name-x" : tile<ptr<i32>>\n' in text
    assert SymbolVisibility.PRIVATE.keyword == "private"


def test_debug_locations() -> None:
    file = DIFile("k.py", "/src")
    sp = DISubprogram(file, 10, "kern", "kern", DICompileUnit(file), 10)

    def loc(line, col, scope=sp):
        return DILoc(scope, "/src/k.py", line, col)

    def build(b, a):
        (x,) = a
        s = b.op(A.AddIOp, [x, x], attrs={"overflow": IntegerOverflow.NONE}, types=[t(I32)])
        b.block.ops[-1].loc = loc(11, 4)
        b.op(A.MulIOp, [s, x], attrs={"overflow": IntegerOverflow.NONE}, types=[t(I32)])
        b.block.ops[-1].loc = loc(12, 5, DILexicalBlock(sp, file, 12, 3))
        b.op(A.SubIOp, [s, x], attrs={"overflow": IntegerOverflow.NONE}, types=[t(I32)])
        b.block.ops[-1].loc = DICallSite(loc(20, 1, DILexicalBlock(sp, file, 13, 0)), loc(11, 4))

    m = kernel([t(I32)], build, loc=loc(10, 0))
    assert print_module(m, debug_info=True) == HEADER.format("%arg0: tile<i32>") + (
        "  %0 = addi %arg0, %arg0 : tile<i32> loc(#loc6)\n"
        "  %1 = muli %0, %arg0 : tile<i32> loc(#loc7)\n"
        "  %2 = subi %0, %arg0 : tile<i32> loc(#loc9)\n"
        "  return loc(#loc4)\n"
        "} loc(#loc5)\n"
        '#di_file = #cuda_tile.di_file<"k.py" in "/src">\n'
        '#loc = loc("/src/k.py":10:0)\n'
        '#loc1 = loc("/src/k.py":11:4)\n'
        '#loc2 = loc("/src/k.py":12:5)\n'
        '#loc3 = loc("/src/k.py":20:1)\n'
        "#loc4 = loc(unknown)\n"
        "#di_compile_unit = #cuda_tile.di_compile_unit<file = #di_file>\n"
        '#di_subprogram = #cuda_tile.di_subprogram<file = #di_file, line = 10, name = "kern", '
        'linkageName = "kern", compileUnit = #di_compile_unit, scopeLine = 10>\n'
        "#di_lexical_block = #cuda_tile.di_lexical_block<scope = #di_subprogram, file = #di_file, "
        "line = 12, column = 3>\n"
        "#di_lexical_block1 = #cuda_tile.di_lexical_block<scope = #di_subprogram, file = #di_file, line = 13>\n"
        "#loc5 = #cuda_tile.di_loc<#loc in #di_subprogram>\n"
        "#loc6 = #cuda_tile.di_loc<#loc1 in #di_subprogram>\n"
        "#loc7 = #cuda_tile.di_loc<#loc2 in #di_lexical_block>\n"
        "#loc8 = #cuda_tile.di_loc<#loc3 in #di_lexical_block1>\n"
        "#loc9 = loc(callsite(#loc8 at #loc6))\n")


def test_print_op_alone() -> None:
    m = _views_module()
    op = m.functions[0].entry_block.ops[1]
    assert print_op(op).startswith("%tview = make_tensor_view %arg0, shape = [%arg1, 64]")


def test_values_are_hashable_by_identity() -> None:
    a, b = Value(I32, Block(), 0), Value(I32, Block(), 0)
    assert len({a, b}) == 2
