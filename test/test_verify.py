"""Verifier tests: real cuTile kernels verify clean; hand-built invalid IR gets NVIDIA's messages."""
from __future__ import annotations

from typing import Optional, Sequence

import pytest

from tileiras.errors import TileIRError
from tileiras.ir import types as T
from tileiras.ir.core import Block, Function, Module, Operation, Region, Value
from tileiras.ir.debug import DICompileUnit, DIFile, DILoc, DISubprogram
from tileiras.ir.version import V13_1, V13_4, Version
from tileiras.reader import read_bytecode
from tileiras.tile import ops_arith as A
from tileiras.tile import ops_control as C
from tileiras.tile import ops_core as K
from tileiras.tile import ops_memory as M
from tileiras.tile.enums import IntegerOverflow, MemoryOrderingSemantics, MemoryScope, RoundingMode, Signedness
from tileiras.verify import VerifyError, check_module, verify_module

FILE = DIFile("k.py", "/src")
SCOPE = DISubprogram(FILE, 1, "k", "k", DICompileUnit(FILE), 1)


def tile(shape: Sequence[int], element: T.Type = T.F32) -> T.TileType:
    return T.TileType(element, tuple(shape))


class Builder:
    """Builds one entry function op by op; ``op()`` appends to the current block."""

    def __init__(self, *arg_types: T.Type, version: Version = V13_4):
        # ops located in SCOPE need their function in it too (the debug-info scope rules)
        self.fn = Function("k", T.FunctionType(tuple(arg_types), ()), Region([Block(arg_types)]), is_entry=True,
                           loc=DILoc(SCOPE, "k.py", 1, 0))
        self.module = Module(version=version, functions=[self.fn])
        self.block = self.fn.entry_block

    @property
    def args(self) -> list[Value]:
        return self.fn.entry_block.args

    def op(self, cls: type, operands: Sequence[Value] = (), results: Sequence[T.Type] = (),
           line: Optional[int] = None, segments: Optional[Sequence[int]] = None,
           regions: Sequence[Region] = (), block: Optional[Block] = None, **attrs: object) -> Operation:
        loc = DILoc(SCOPE, "k.py", line, 4) if line is not None else None
        o = cls(operands, attrs, results, regions, segments=segments, loc=loc)
        (block or self.block).append(o)
        return o

    def ret(self, block: Optional[Block] = None) -> None:
        self.op(C.ReturnOp, block=block)

    def messages(self, gpu_name: Optional[str] = None) -> list[str]:
        return [d.message for d in verify_module(self.module, gpu_name=gpu_name)]


def only(b: Builder, gpu_name: Optional[str] = None) -> str:
    msgs = b.messages(gpu_name)
    assert len(msgs) == 1, msgs
    return msgs[0]


# -- real kernels --------------------------------------------------------------------------
def test_cutile_kernels_verify_clean(tileir_file) -> None:
    module = read_bytecode(tileir_file.read_bytes(), str(tileir_file.path))
    assert verify_module(module, gpu_name=tileir_file.arch) == []


def test_valid_handbuilt_module() -> None:
    b = Builder(tile([], T.F32))
    x = b.op(K.ReshapeOp, [b.args[0]], [tile([1])]).result
    y = b.op(K.BroadcastOp, [x], [tile([16])]).result
    b.op(A.AddFOp, [y, y], [tile([16])], rounding_mode=RoundingMode.NEAREST_EVEN)
    b.ret()
    assert b.messages() == []
    assert check_module(b.module) == []


# -- diagnostics -----------------------------------------------------------------------------
def test_located_and_unlocated_diagnostics() -> None:
    b = Builder()
    b.op(K.IotaOp, results=[tile([32], T.F32)], line=7)
    b.op(M.MakeTokenOp, results=[tile([], T.I1)])
    b.ret()
    with pytest.raises(VerifyError) as info:
        check_module(b.module)
    assert str(info.value).splitlines() == [
        "loc(\"k.py\":7:4): error: 'cuda_tile.iota' op result #0 must be tile of i1 or i8 or i16 or i32 or i64 "
        "values, but got '!cuda_tile.tile<32xf32>'",
        "error: 'cuda_tile.make_token' op result #0 must be cuda tile token type, but got '!cuda_tile.tile<i1>'",
    ]
    assert isinstance(info.value, TileIRError) and info.value.exit_code == 3
    nvidia = info.value.diagnostics[0].render("nvidia")
    assert nvidia.startswith('#cuda_tile.di_loc<loc("k.py":7:4) in #cuda_tile.di_subprogram<file = <"k.py" in "/src">')
    assert nvidia.endswith(">>: error: 'cuda_tile.iota' op result #0 must be tile of i1 or i8 or i16 or i32 or i64 "
                           "values, but got '!cuda_tile.tile<32xf32>'")


def test_collects_every_error() -> None:
    b = Builder(tile([], T.I32))
    b.op(A.AbsFOp, [b.args[0]], [tile([], T.I32)])
    b.op(A.NegFOp, [b.args[0]], [tile([], T.I32)])
    b.ret()
    assert len(b.messages()) == 4


# -- structure --------------------------------------------------------------------------------
def test_use_before_definition() -> None:
    b = Builder()
    later = M.MakeTokenOp([], {}, [T.TOKEN])
    b.op(M.JoinTokensOp, [later.result, later.result], [T.TOKEN])
    b.block.append(later)
    b.ret()
    assert b.messages() == ["'cuda_tile.join_tokens' op operand #0 does not dominate this use",
                            "'cuda_tile.join_tokens' op operand #1 does not dominate this use"]


def test_missing_terminator() -> None:
    b = Builder()
    b.op(M.MakeTokenOp, results=[T.TOKEN])
    assert only(b) == "'cuda_tile.entry' op expects regions to end with 'cuda_tile.return', found " \
                      "'cuda_tile.make_token'"


def test_entry_restrictions() -> None:
    b = Builder(tile([4], T.I32))
    b.ret()
    assert only(b) == "'cuda_tile.entry' op entry op must have scalar types (rank 0 !cuda_tile.tile)"
    b = Builder()
    b.fn.type = T.FunctionType((), (tile([], T.I32),))
    b.ret()
    assert b.messages()[0] == "'cuda_tile.entry' op entry op must not return values"
    assert b.messages()[1] == "'cuda_tile.return' op has 0 operands, but enclosing function (@k) returns 1"


def test_yield_outside_allowed_parent() -> None:
    b = Builder()
    b.op(C.YieldOp)
    assert b.messages()[1] == "'cuda_tile.yield' op expects parent op to be one of " \
                              "'cuda_tile.if, cuda_tile.reduce, cuda_tile.scan'"


def _if(b: Builder, cond: Value, results: Sequence[T.Type], then_yield: Sequence[Value],
        else_yield: Optional[Sequence[Value]]) -> Operation:
    then = Block()
    then.append(C.YieldOp(list(then_yield)))
    regions = [Region([then])]
    if else_yield is None:
        regions.append(Region())
    else:
        other = Block()
        other.append(C.YieldOp(list(else_yield)))
        regions.append(Region([other]))
    return b.op(C.IfOp, [cond], list(results), regions=regions)


def test_if_yield_types() -> None:
    b = Builder(tile([], T.I1), tile([], T.I32))
    cond, x = b.args
    _if(b, cond, [tile([], T.I64)], [x], [x])
    b.ret()
    assert b.messages() == [
        "'cuda_tile.if' op type does not match yield type, then branch yields '!cuda_tile.tile<i32>' but op "
        "result type is '!cuda_tile.tile<i64>'",
        "'cuda_tile.if' op type does not match yield type, else branch yields '!cuda_tile.tile<i32>' but op "
        "result type is '!cuda_tile.tile<i64>'",
    ]
    b = Builder(tile([], T.I1), tile([], T.I32))
    cond, x = b.args
    _if(b, cond, [], [], [x])
    b.ret()
    assert only(b) == "'cuda_tile.if' op does not return a value, but else branch yields '!cuda_tile.tile<i32>'"
    b = Builder(tile([], T.I1), tile([], T.I32))
    cond, x = b.args
    _if(b, cond, [tile([], T.I32)], [x], None)
    b.ret()
    assert only(b) == "'cuda_tile.if' op has non-empty return type, must define else branch"


def _loop(b: Builder, cls: type, operands: Sequence[Value], arg_types: Sequence[T.Type],
          results: Sequence[T.Type], cont: Sequence[int]) -> Operation:
    body = Block(arg_types)
    body.append(C.ContinueOp([body.args[i] for i in cont]))
    return b.op(cls, list(operands), list(results), regions=[Region([body])])


def test_loop_iter_values() -> None:
    f32, f64, i32 = tile([], T.F32), tile([], T.F64), tile([], T.I32)
    b = Builder(f32, i32)
    x, n = b.args
    _loop(b, C.ForOp, [n, n, n, x], [i32, f64], [f32], [1])
    b.ret()
    msgs = b.messages()
    assert "'cuda_tile.for' op init value 0 and region iter_value 0 have different type: " \
           "'!cuda_tile.tile<f32>' != '!cuda_tile.tile<f64>'" in msgs
    b = Builder(i32)
    _loop(b, C.LoopOp, [b.args[0]], [i32, i32], [i32], [0])
    b.ret()
    assert "'cuda_tile.loop' op mismatch in number of region iterator values and loop iterator inits: 2 vs 1" \
        in b.messages()


def test_continue_types() -> None:
    i32 = tile([], T.I32)
    b = Builder(i32)
    _loop(b, C.LoopOp, [b.args[0]], [i32], [i32], [])
    b.ret()
    assert "`loop` is missing a valid terminator. `continue` op should have operand types that match the parent " \
           "loop iter_values: ('!cuda_tile.tile<i32>'), but found: ()" in b.messages()


def test_break_outside_loop() -> None:
    b = Builder()
    b.op(C.BreakOp)
    assert b.messages()[1] == "'cuda_tile.break' op expects parent op to be one of 'cuda_tile.if, cuda_tile.loop'"


def test_get_global() -> None:
    b = Builder()
    b.op(K.GetGlobalOp, results=[tile([], T.PointerType(T.F32))], name="g1")
    b.ret()
    assert only(b) == "'cuda_tile.get_global' op 'g1' does not reference a valid global"


# -- types --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, message", [
    ((5, 5), "all dimensions must be powers of two, got 5, 5"),
    ((1, 0, 2), "all dimensions must be positive constants, got 1, 0, 2"),
    ((8192, 4096), "tile would exceed the maximum of 16777216 elements"),
])
def test_tile_shapes(shape: tuple[int, ...], message: str) -> None:
    b = Builder()
    b.op(K.IotaOp, results=[tile(shape, T.I32)])
    b.ret()
    assert message in b.messages()


def test_f4_tiles_need_even_element_count() -> None:
    b = Builder(tile([], T.F32))
    b.op(K.FToFOp, [b.args[0]], [tile([], T.F4E2M1FN)])
    b.ret()
    assert "F4E2M1FN tiles must have an even number of elements" in b.messages()


def _tv(shape=(16, 16), strides=(16, 1), element=T.F32) -> T.TensorViewType:
    return T.TensorViewType(element, tuple(shape), tuple(strides))


@pytest.mark.parametrize("view, message", [
    (T.PartitionViewType((5, 1024), _tv(), (0, 1)), "tile shape dimensions must have power of two length but got "
                                                    "[5, 1024]"),
    (T.PartitionViewType((4, 4), _tv(), (0,)), "expected dim_map to map exactly all 2 dimensions of the tile, "
                                              "got 1 mappings"),
    (T.PartitionViewType((4, 4), _tv(), (0, 0)), "target dimension 0 mapped at least twice (for tile dimensions "
                                                "0 and 1)"),
    (T.PartitionViewType((4, 4), _tv(), (0, 2)), "target dimension is outside of tensor view dimensions, expected "
                                                "strictly less than 2, got 2"),
    (T.PartitionViewType((4, 4), _tv(), (-1, 0)), "target dimension must not be negative, got -1"),
    (T.PartitionViewType((4, 4, 4), _tv(), (0, 1, 2)), "expected tensor_view rank and tile rank to match, got "
                                                      "tensor_view of rank 2 and tiles of rank 3"),
    (T.StridedViewType((4, 4), (1, 0), _tv(), (0, 1)), "traversal strides must be strictly positive but got [1, 0]"),
])
def test_view_types(view: T.Type, message: str) -> None:
    b = Builder(tile([], T.PointerType(T.F32)))
    tv = b.op(M.MakeTensorViewOp, [b.args[0]], [view.tensor_view], segments=(1, 0, 0)).result
    b.op(type_maker(view), [tv], [view])
    b.ret()
    assert message in b.messages()


def type_maker(view: T.Type) -> type:
    return M.MakeStridedViewOp if isinstance(view, T.StridedViewType) else M.MakePartitionViewOp


def test_tensor_view_strides() -> None:
    b = Builder(tile([], T.PointerType(T.F32)))
    b.op(M.MakeTensorViewOp, [b.args[0]], [_tv((0,), (1,))], segments=(1, 0, 0))
    b.ret()
    assert "dimensions must have strictly positive constant sizes but got [0]" in b.messages()


# -- versions and architectures -----------------------------------------------------------------
def test_op_newer_than_module() -> None:
    b = Builder(tile([], T.F32), version=V13_1)
    b.op(A.Atan2Op, [b.args[0], b.args[0]], [tile([], T.F32)])
    b.ret()
    assert only(b) == "operation 'cuda_tile.atan2' is not available in bytecode version 13.1"


def test_attribute_newer_than_module() -> None:
    b = Builder(tile([], T.F32), version=V13_1)
    b.op(A.TanHOp, [b.args[0]], [tile([], T.F32)], rounding_mode=RoundingMode.APPROX)
    b.ret()
    assert only(b) == "attribute 'rounding_mode' requires bytecode version 13.2+, but targeting 13.1"


def test_f8_unsupported_on_sm80() -> None:
    b = Builder(tile([], T.F32))
    b.op(K.FToFOp, [b.args[0]], [tile([], T.F8E4M3FN)], line=6, rounding_mode=RoundingMode.NEAREST_EVEN)
    b.ret()
    assert b.messages("sm_90") == []
    diags = verify_module(b.module, gpu_name="sm_80")
    assert [str(d) for d in diags] == [
        "loc(\"k.py\":6:4): error: Incompatibility with architecture 'sm_80': unsupported type 'f8E4M3FN'"]


# -- arithmetic -----------------------------------------------------------------------------
def test_float_op_on_ints() -> None:
    b = Builder(tile([], T.I32))
    b.op(A.AddFOp, [b.args[0], b.args[0]], [tile([], T.I32)], rounding_mode=RoundingMode.NEAREST_EVEN)
    b.ret()
    assert b.messages()[0] == "'cuda_tile.addf' op operand #0 must be tile of f16 or bf16 or f32 or f64 values, " \
                              "but got '!cuda_tile.tile<i32>'"


def test_same_type_operands() -> None:
    b = Builder(tile([], T.F32), tile([], T.F64))
    b.op(A.AddFOp, [b.args[0], b.args[1]], [tile([], T.F32)], rounding_mode=RoundingMode.NEAREST_EVEN)
    b.ret()
    assert only(b) == "'cuda_tile.addf' op failed to verify that all of {lhs, rhs, result} have same type"


def test_cmp_result() -> None:
    b = Builder(tile([], T.I32))
    b.op(A.CmpIOp, [b.args[0], b.args[0]], [tile([], T.I16)], comparison_predicate=0,
         signedness=Signedness.SIGNED)
    b.ret()
    assert only(b) == "'cuda_tile.cmpi' op result #0 must be tile of i1 values, but got '!cuda_tile.tile<i16>'"


@pytest.mark.parametrize("cls, element, attrs, message", [
    (A.AddFOp, T.F32, {"rounding_mode": RoundingMode.APPROX},
     "invalid rounding mode specified, expect one of [nearest_even, zero, negative_inf, positive_inf]"),
    (A.MulFOp, T.F16, {"rounding_mode": RoundingMode.NEAREST_EVEN, "flush_to_zero": True},
     "flush_to_zero modifier only supported for f32 data type, but got: 'f16'"),
    (A.DivFOp, T.F64, {"rounding_mode": RoundingMode.FULL}, "full modifier only supported for f32 data type, "
                                                             "but got: 'f64'"),
    (A.DivFOp, T.F32, {"rounding_mode": RoundingMode.NEAREST_INT_TO_ZERO},
     "invalid rounding mode specified, expect one of [nearest_even, zero, negative_inf, positive_inf, approx, full]"),
])
def test_float_modifiers(cls: type, element: T.Type, attrs: dict, message: str) -> None:
    b = Builder(tile([], element))
    b.op(cls, [b.args[0], b.args[0]], [tile([], element)], **attrs)
    b.ret()
    assert only(b) == f"'{cls.definition.full_name}' op {message}"


def test_unary_rounding() -> None:
    b = Builder(tile([], T.F16))
    b.op(A.SqrtOp, [b.args[0]], [tile([], T.F16)], rounding_mode=RoundingMode.APPROX)
    b.op(A.TanHOp, [b.args[0]], [tile([], T.F16)], rounding_mode=RoundingMode.ZERO)
    b.ret()
    assert b.messages() == [
        "'cuda_tile.sqrt' op approx modifier only supported for f32 data type, but got: 'f16'",
        "'cuda_tile.tanh' op invalid rounding mode specified, expect one of [approx, full]",
    ]


def test_divi_and_negi() -> None:
    b = Builder(tile([], T.I32))
    x = b.args[0]
    b.op(A.DivIOp, [x, x], [tile([], T.I32)], signedness=Signedness.UNSIGNED, rounding=RoundingMode.NEGATIVE_INF)
    b.op(A.NegIOp, [x], [tile([], T.I32)], overflow=IntegerOverflow.NO_UNSIGNED_WRAP)
    b.ret()
    assert b.messages() == [
        "'cuda_tile.divi' op rounding mode 'negative_inf' is not allowed with 'unsigned' flag",
        "'cuda_tile.negi' op 'no_unsigned_wrap' overflow flag is not supported",
    ]


def test_mma_shapes_and_accumulators() -> None:
    b = Builder(tile([], T.F16))
    lhs = b.op(K.ReshapeOp, [b.args[0]], [tile([1, 1], T.F16)]).result
    a = b.op(K.BroadcastOp, [lhs], [tile([4, 16], T.F16)]).result
    r = b.op(K.BroadcastOp, [lhs], [tile([8, 16], T.F16)]).result
    acc = b.op(K.BroadcastOp, [lhs], [tile([4, 16], T.F16)]).result
    b.op(A.MmaFOp, [a, r, acc], [tile([4, 16], T.F16)])
    b.ret()
    assert only(b) == "'cuda_tile.mmaf' op  shape error: dim 1 of lhs (16) and dim 0 of rhs (8) must match, but " \
                      "got lhs shape (4, 16) and rhs shape (8, 16)"


def test_mma_accumulator_type() -> None:
    b = Builder(tile([], T.BF16), tile([], T.F16))
    x = b.op(K.ReshapeOp, [b.args[0]], [tile([1, 1], T.BF16)]).result
    y = b.op(K.ReshapeOp, [b.args[1]], [tile([1, 1], T.F16)]).result
    m = b.op(K.BroadcastOp, [x], [tile([16, 16], T.BF16)]).result
    acc = b.op(K.BroadcastOp, [y], [tile([16, 16], T.F16)]).result
    b.op(A.MmaFOp, [m, m, acc], [tile([16, 16], T.F16)])
    b.ret()
    assert only(b) == "'cuda_tile.mmaf' op unsupported combination of element types. Input type 'bf16' expects " \
                      "accumulator/result type to be one of {'f32'}, but got 'f16'"


# -- core ops ---------------------------------------------------------------------------------
def _filled(b: Builder, shape: Sequence[int], element: T.Type = T.F32) -> Value:
    scalar = b.op(K.ConstantOp, results=[tile([], element)]).result
    one = b.op(K.ReshapeOp, [scalar], [tile([1] * len(shape), element)]).result
    return b.op(K.BroadcastOp, [one], [tile(shape, element)]).result


@pytest.mark.parametrize("perm, result, message", [
    ((0, 1, 2), (2, 4), "expect permutation size (3) to equal the rank of the source (2)"),
    ((0, 0), (2, 4), "expect permutation elements to be unique"),
    ((0, 100), (2, 4), "permutation element at index 1 (100) is out of bound [0, 2)"),
    ((1, 0), (1, 2), "result shape invalid at index 0, expected: 4, but got: 1"),
])
def test_permute(perm: tuple[int, ...], result: tuple[int, ...], message: str) -> None:
    b = Builder()
    x = _filled(b, (2, 4))
    b.op(K.PermuteOp, [x], [tile(result)], permutation=perm)
    b.ret()
    assert only(b) == f"'cuda_tile.permute' op {message}"


def test_shape_ops() -> None:
    b = Builder()
    x = _filled(b, (4, 4))
    b.op(K.ReshapeOp, [x], [tile([8])])
    b.op(K.BroadcastOp, [x], [tile([2, 4])])
    b.op(K.CatOp, [x, x], [tile([4, 16])], dim=1)
    b.op(K.CatOp, [x, x], [tile([4, 8])], dim=2)
    b.op(K.ExtractOp, [x], [tile([8, 4])])
    b.ret()
    assert b.messages() == [
        "'cuda_tile.reshape' op expected source tile and result tile to have the same number of elements",
        "'cuda_tile.broadcast' op expects the shape of source tile to be compatible with that of the result tile, "
        "but got: 4, 4 and 2, 4",
        "'cuda_tile.cat' op invalid concat at position 1, expected: 8 but got: 16",
        "'cuda_tile.cat' op expect dim to be [0, 2), but got: 2",
        "'cuda_tile.extract' op source dimension 0 size (4) must be evenly divisible by result dimension 0 size (8)",
    ]


def test_conversions() -> None:
    b = Builder(tile([], T.I32), tile([], T.F32))
    i, f = b.args
    b.op(K.ExtIOp, [i], [tile([], T.I16)], signedness=Signedness.SIGNED)
    b.op(K.TruncIOp, [i], [tile([], T.I64)])
    b.op(K.FToFOp, [f], [tile([], T.F32)], rounding_mode=RoundingMode.NEAREST_EVEN)
    b.op(K.IToFOp, [i], [tile([], T.F8E8M0FNU)], signedness=Signedness.SIGNED,
         rounding_mode=RoundingMode.NEAREST_EVEN)
    b.ret()
    assert b.messages() == [
        "'cuda_tile.exti' op extending to smaller or identical integer",
        "'cuda_tile.trunci' op truncating to larger or identical integer",
        "'cuda_tile.ftof' op converting tiles must not be a no-op",
        "'cuda_tile.itof' op integer to f8E8M0FNU conversion is not supported, please first convert to another "
        "float type",
    ]


def test_iota_element_count() -> None:
    b = Builder()
    b.op(K.IotaOp, results=[tile([512], T.I8)])
    b.op(K.IotaOp, results=[tile([2, 2], T.I32)])
    b.ret()
    assert b.messages() == [
        "'cuda_tile.iota' op the number of elements 512 exceeds the maximum value of element type 'i8'",
        "'cuda_tile.iota' op expects result type to be 1-d tile",
    ]


def _reduce(b: Builder, x: Value, results: Sequence[T.Type], arg_types: Sequence[T.Type],
            body_op: Optional[type] = None, identities: Sequence[T.Type] = (T.F32,)) -> Operation:
    from tileiras.ir.attrs import ArrayAttr, FloatAttr
    body = Block(arg_types)
    if body_op is not None:
        body.append(body_op([], {"str": "x"}, [T.TOKEN], segments=(0, 0)))
    body.append(C.YieldOp([body.args[0]]))
    ids = ArrayAttr(tuple(FloatAttr(t, 0) for t in identities))
    return b.op(K.ReduceOp, [x], list(results), regions=[Region([body])], dim=0, identities=ids)


def test_reduce_rules() -> None:
    f32 = tile([], T.F32)
    b = Builder()
    x = _filled(b, (8,))
    _reduce(b, x, [f32], [f32, f32])
    _reduce(b, x, [tile([1])], [f32, f32])
    _reduce(b, x, [f32], [f32])
    _reduce(b, x, [f32], [f32, tile([], T.I32)])
    _reduce(b, x, [f32], [f32, f32], identities=(T.F32, T.F32))
    _reduce(b, x, [f32], [f32, f32], body_op=C.PrintTkoOp)
    b.ret()
    assert b.messages() == [
        "'cuda_tile.reduce' op inferred type(s) '!cuda_tile.tile<f32>' are incompatible with return type(s) of "
        "operation '!cuda_tile.tile<1xf32>'",
        "'cuda_tile.reduce' op failed to infer returned types",
        "'cuda_tile.reduce' op expect 2 block arguments but got: 1",
        "'cuda_tile.reduce' op expect same element type for block argument at index: 0 and 1 but got: 'f32' and "
        "'i32'",
        "'cuda_tile.reduce' op expect identities to match the number of operands but got: 1 operands and 2 "
        "identities",
        "'cuda_tile.print_tko' op only pure operations are allowed inside 'cuda_tile.reduce'",
    ]


# -- memory ops ---------------------------------------------------------------------------------
def _view(b: Builder, view: T.PartitionViewType) -> Value:
    ptr = b.args[0]
    tv = b.op(M.MakeTensorViewOp, [ptr], [view.tensor_view], segments=(1, 0, 0)).result
    return b.op(M.MakePartitionViewOp, [tv], [view]).result


def test_load_view_rules() -> None:
    view = T.PartitionViewType((8, 8), _tv((16, 16), (16, 1)), (0, 1))
    b = Builder(tile([], T.PointerType(T.F32)), tile([], T.I32), tile([], T.I64))
    pv = _view(b, view)
    i32, i64 = b.args[1], b.args[2]
    weak = MemoryOrderingSemantics.WEAK
    b.op(M.LoadViewTkoOp, [pv, i32], [tile([8, 8]), T.TOKEN], segments=(1, 1, 0), memory_ordering_semantics=weak)
    b.op(M.LoadViewTkoOp, [pv, i32, i32], [tile([8]), T.TOKEN], segments=(1, 2, 0), memory_ordering_semantics=weak)
    b.op(M.LoadViewTkoOp, [pv, i32, i64], [tile([8, 8]), T.TOKEN], segments=(1, 2, 0),
         memory_ordering_semantics=weak)
    b.op(M.LoadViewTkoOp, [pv, i32, i32], [tile([8, 8]), T.TOKEN], segments=(1, 2, 0),
         memory_ordering_semantics=MemoryOrderingSemantics.RELEASE)
    b.op(M.LoadViewTkoOp, [pv, i32, i32], [tile([8, 8]), T.TOKEN], segments=(1, 2, 0),
         memory_ordering_semantics=MemoryOrderingSemantics.ACQUIRE)
    b.op(M.LoadViewTkoOp, [pv, i32, i32], [tile([8, 8]), T.TOKEN], segments=(1, 2, 0),
         memory_ordering_semantics=weak, memory_scope=MemoryScope.DEVICE)
    b.ret()
    assert b.messages() == [
        "'cuda_tile.load_view_tko' op expected 2 index operands (based on view type), got 1",
        "'cuda_tile.load_view_tko' op expected tile type to be '!cuda_tile.tile<8x8xf32>' (based on view type), "
        "got '!cuda_tile.tile<8xf32>'",
        "'cuda_tile.load_view_tko' op expected index type 1 to be the same as other index types "
        "('!cuda_tile.tile<i32>'), got '!cuda_tile.tile<i64>'",
        "'cuda_tile.load_view_tko' op expect one of: weak, relaxed, or acquire, but got: release",
        "'cuda_tile.load_view_tko' op memory scope is required for acquire load",
        "'cuda_tile.load_view_tko' op weak load must not have memory scope",
    ]


def test_make_tensor_view_rules() -> None:
    b = Builder(tile([], T.PointerType(T.F32)), tile([], T.I32))
    ptr, n = b.args
    b.op(M.MakeTensorViewOp, [ptr], [_tv((16,), (1,), T.F64)], segments=(1, 0, 0))
    b.op(M.MakeTensorViewOp, [ptr], [_tv((T.DYNAMIC,), (1,))], segments=(1, 0, 0))
    b.op(M.MakeTensorViewOp, [ptr, n], [_tv((16,), (1,))], segments=(1, 0, 1))
    b.ret()
    assert b.messages() == [
        "'cuda_tile.make_tensor_view' op expected pointer to 'f64' to build tensor_view of this type, got 'f32'",
        "'cuda_tile.make_tensor_view' op expected 1 dynamic shape operands, got 0",
        "'cuda_tile.make_tensor_view' op expected 0 dynamic stride operands, got 1",
    ]


def test_store_ptr_rules() -> None:
    b = Builder(tile([], T.PointerType(T.F32)), tile([], T.F16))
    ptr, v = b.args
    b.op(M.StorePtrTkoOp, [ptr, v], [T.TOKEN], segments=(1, 1, 0, 0),
         memory_ordering_semantics=MemoryOrderingSemantics.RELAXED)
    b.ret()
    assert b.messages() == [
        "'cuda_tile.store_ptr_tko' op failed to verify that `destination` type is expected a pointer type of "
        "`value` type",
    ]


def test_join_tokens_and_counts() -> None:
    b = Builder()
    t = b.op(M.MakeTokenOp, results=[T.TOKEN]).result
    b.op(M.JoinTokensOp, [t], [T.TOKEN])
    b.op(A.AbsFOp, [t, t], [T.TOKEN])
    b.ret()
    msgs = b.messages()
    assert msgs[0] == "'cuda_tile.join_tokens' op expect two or more tokens"
    assert msgs[1] == "'cuda_tile.absf' op operand count (2) does not match with the total size (1) specified in " \
                      "attribute 'operandSegmentSizes'"
