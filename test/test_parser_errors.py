"""Located parse errors with the wording of cuda-tile's own parsers (MLIR's
custom-op parsers and type parsers), as its test suite expects them."""
from __future__ import annotations

import pytest

from tileiras.conformance import diagnose


def errors(src: str) -> list[tuple[int, str]]:
    return [(d.line, d.message) for d in diagnose(src, "t.mlir", 0) if d.severity == "error"]


def use_type(t: str) -> str:
    return f'%0 = "use_type"() : () -> {t}\n'


def make_view(shape: str, strides: str, types: str, args: str = "") -> str:
    return (f"testing$func @f(%base: tile<ptr<f32>>, %c: tile<i64>{args}) {{\n"
            f"  make_tensor_view %base, shape = [{shape}], strides = [{strides}] : {types}\n}}\n")


CASES = [
    # tensor_view types
    (use_type("!cuda_tile.tensor_view<f32, strides=[]>"), "strides must not be provided for 0-d tiles"),
    (use_type("!cuda_tile.tensor_view<f16,>"), "unexpected token after element type in 0-d tensor_view"),
    (use_type("!cuda_tile.tensor_view<2xf32>"), "expected 'strides'"),
    (use_type("!cuda_tile.tensor_view<?xf32, strides=[-5]>"), "expected strictly positive integer, got -5"),
    (use_type("!cuda_tile.tensor_view<?xf32, strides=[0]>"), "expected strictly positive integer, got 0"),
    (use_type("!cuda_tile.tensor_view<?x32xf32, strides=[, 32]>"), "expected either 64-bit integer or question mark"),
    # view tile shapes
    (use_type("!cuda_tile.partition_view<tile=(1099511627776x4), tensor_view<?x?xf32, strides=[?,1]>>"),
     "tile dimension 0 exceeds i32 limitations (got 1099511627776, expected strictly positive and less than or "
     "equal to 2147483647)"),
    (use_type("!cuda_tile.partition_view<tile=(4x0), tensor_view<?x?xf32, strides=[?,1]>>"),
     "tile dimension 1 exceeds i32 limitations (got 0, expected strictly positive and less than or equal to "
     "2147483647)"),
    # make_tensor_view's mixed size and stride lists
    (make_view("", "32, 1", "tensor_view<32x32xf32, strides=[32, 1]>"),
     "expected shape declaration to contain 2 elements due to tensor_view type, but 0 were provided"),
    (make_view("32, 32", "", "tensor_view<32x32xf32, strides=[32, 1]>"),
     "expected stride declaration to contain 2 elements due to tensor_view type, but 0 were provided"),
    (make_view("32, 64", "32, 1", "tensor_view<32x32xf32, strides=[32, 1]>"),
     "input shape dimension 1 does not match tensor_view type (expected 32, got 64)"),
    (make_view("2, %c, %c", "64, 32, 1", "tile<i64> -> tensor_view<2x?x32xf32, strides=[64, 32, 1]>"),
     "input shape dimension 2 does not match tensor_view type (expected 32, got dynamic)"),
    (make_view("2, %c, 32", "64, 32, 1", "tile<i64> -> tensor_view<2x?x32xf32, strides=[64, ?, 1]>"),
     "input stride dimension 1 does not match tensor_view type (expected dynamic, got 32)"),
    (make_view("32, junk", "", "tensor_view<f32>"), "expected either integer or SSA value"),
    # tile types are checked where they are written; 0x2 in a dimension list is 0, x, 2
    ("testing$func @f(%a: tile<1x0x2xf32>) {\n}\n", "all dimensions must be positive constants, got 1, 0, 2"),
    ("testing$func @f(%a: tile<1x2xf32>) {\n  %0 = broadcast %0 : tile<1x2xi32> -> tile<0x2xi32>\n}\n",
     "all dimensions must be positive constants, got 0, 2"),
    (use_type("!cuda_tile.tile<8x4xi28>"),
     "failed to verify 'elementType': f16 or bf16 or f32 or tf32 or f64 or f8E4M3FN or f8E5M2 or f8E8M0FNU or "
     "f4E2M1FN or fnv8E5M3FNU or i1 or i8 or i16 or i32 or i64 or Pointer type"),
    # constant literals: structure and elements before the type
    ("entry @k() {\n  %0 = constant <f32: [[1.0, 2.0, 3.0], [4.0, 5.0]]> : tile<2x3xf32>\n}\n",
     "tensor literal is invalid; ranks are not consistent between elements"),
    ("entry @k() {\n  %0 = constant <i1: [[true, true], [true]]> : tile<2x2xi1>\n}\n",
     "tensor literal is invalid; ranks are not consistent between elements"),
    ("entry @k() {\n  %0 = constant <f32: [1.0, 2, 3.0]> : tile<2xf32>\n}\n",
     "unexpected decimal integer literal for a floating point value"),
    # optimization hints
    ("entry @k() optimization_hints=<sm_100=2> {\n}\n",
     "custom op 'cuda_tile.entry' expected dictionary attribute for optimization_hints entry `sm_100` got "
     "value=2 : i64"),
    ("entry @k() optimization_hints=<2> {\n}\n", "expected valid keyword or string"),
    # types custom parsers insist on
    ("testing$func @f(%v: tile<8xptr<i32>>) {\n  %0 = get_tensor_shape %v : tile<8xptr<i32>> -> tile<i32>\n}\n",
     "custom op 'cuda_tile.get_tensor_shape' expected tensor_view, got '!cuda_tile.tile<8xptr<i32>>'"),
    ("testing$func @f(%v: tensor_view<8xf32, strides=[1]>) {\n  %0 = make_partition_view %v\n"
     "    : tensor_view<8xf32, strides=[1]> -> partition_view<tile=(4), tensor_view<8xf32, strides=[1]>>\n}\n",
     "expected 'partition_view' type, but got '!cuda_tile.tensor_view<8xf32, strides=[1]>'"),
    (use_type("!cuda_tile.partition_view<tile=(4), partition_view<tile=(4), tensor_view<8xf32, strides=[1]>>>"),
     "expected 'tensor_view' type, but got '!cuda_tile.partition_view<tile=(4), tensor_view<8xf32, strides=[1]>>'"),
    # MLIR's generic messages
    ("entry @k() {\n  %t = print_tko : tile<2xf16> -> token\n}\n", "expected attribute value"),
    ('%r = "test.op"() : () -> ()\n', "cannot name an operation with no results"),
    ("entry @k() {\n  %c = constant <i16: 1> : tile<i16>\n  %0 = cmpi %c, %c, signed : tile<i16> -> tile<i1>\n}\n",
     "custom op 'cuda_tile.cmpi' expected 'comparison_predicate' to be one of: {'equal', 'not_equal', "
     "'less_than', 'less_than_or_equal', 'greater_than', 'greater_than_or_equal'}"),
    ("%i = constant <f32: 0.0> : tile<f32>\nloop iter_values(%a = %i) : tile<f32>, tile<f32> {\n  continue %a\n}\n",
     "found different number of iter_values and types"),
    ("loop : {}\n", "expected valid keyword"),
    ("testing$func @f(%a: tile<1x-1x4xf32>) {\n}\n", "expected valid keyword"),
    # what NVIDIA's custom parsers check
    ("testing$func @f(%a: tile<8xf32>) {\n  %0 = reduce dim=0 identities=[0.0 : f32] : tile<8xf32> -> tile<f32>\n"
     "  (%x: tile<f32>, %y: tile<f32>) {\n    yield %x : tile<f32>\n  }\n}\n",
     "custom op 'cuda_tile.reduce' number of operands and types do not match: got 0 operands and 1 types"),
    ("testing$func @f(%v: partition_view<tile=(8), tensor_view<128xf32, strides=[1]>>) {\n"
     "  %0 = constant <i32: 0> : tile<i32>\n"
     "  %t, %k = load_view_tko weak device %v[%0] : partition_view<tile=(8), tensor_view<128xf32, strides=[1]>>, "
     "tile<i32> -> tile<8xf32>, token\n}\n",
     'operation specifies weak memory ordering semantics, but then provides "device" scope, expected no memory '
     'scope.'),
    ("testing$func @f(%p: tile<4xptr<f32>>) {\n  %0, %t = load_ptr_tko weak blah %p : tile<4xptr<f32>> -> "
     "tile<4xf32>, token\n}\n", "expected SSA operand"),
    ("entry @k() {\n  %0 = constant <f32: 10.0> : tensor<f32>\n}\n",
     "custom op 'cuda_tile.constant' result #0 must be tile of i1 or i8 or i16 or i32 or i64 or f16 or bf16 or f32 or "
     "f64 or tf32 or f8E4M3FN or f8E5M2 or f8E8M0FNU or f4E2M1FN or fnv8E5M3FNU values, but got 'tensor<f32>'"),
]


def test_index_and_size_types_as_nvidia_reads_them() -> None:
    """A lone type before ``->`` in make_tensor_view is the sizes' type (so the verifier
    names it), and an index type after no index at all is read."""
    src = ("testing$func @f(%p: tile<ptr<f64>>) {\n  %v = make_tensor_view %p, shape = [%p], strides = [1] : "
           "tile<ptr<f64>> -> tensor_view<?xf64, strides=[1]>\n}\n")
    assert (2, "'cuda_tile.make_tensor_view' op operand #1 must be variadic of 0D tile of i1 or i8 or i16 or i32 or "
               "i64 values, but got '!cuda_tile.tile<ptr<f64>>'") in errors(src)
    src = ("testing$func @f(%v: partition_view<tile=(8), tensor_view<128xf32, strides=[1]>>) {\n"
           "  %t, %k = load_view_tko weak %v[] : partition_view<tile=(8), tensor_view<128xf32, strides=[1]>>, "
           "tile<i32> -> tile<8xf32>, token\n}\n")
    assert (2, "'cuda_tile.load_view_tko' op expected 1 index operands (based on view type), got 0") in errors(src)


@pytest.mark.parametrize("src, message", CASES, ids=range(len(CASES)))
def test_parse_error(src: str, message: str) -> None:
    found = errors(src)
    assert any(message in m for _, m in found), found


def test_make_tensor_view_mismatch_points_at_the_item() -> None:
    src = make_view("32, 64", "32, 1", "tensor_view<32x32xf32, strides=[32, 1]>")
    (line, message), = errors(src)
    assert line == 2 and message.startswith("custom op 'cuda_tile.make_tensor_view' input shape dimension 1")


def test_valid_views_parse() -> None:
    assert errors(make_view("2, %c, 32", "%c, 32, 1", "tile<i64> -> tensor_view<2x?x32xf32, strides=[?, 32, 1]>")) \
        == []


def test_errors_on_globals_and_implicit_terminators_have_lines() -> None:
    src = "global @g <f32: 1.0> : tile<f32>\n\ntesting$func @f() -> tile<i32> {\n}\n"
    assert (1, "'cuda_tile.global' op type must have rank 1") in errors(src)
    assert (3, "'cuda_tile.return' op has 0 operands, but enclosing function (@f) returns 1") in errors(src)


def test_global_locations_are_not_written() -> None:
    from tileiras.reader import read_bytecode
    from tileiras.text.parser import parse_module
    from tileiras.writer import write_bytecode

    src = "global @g <f32: [1.0, 2.0]> : tile<2xf32>\nentry @k() {\n}\n"
    module = parse_module(src, keep_positions=True)
    assert module.globals[0].loc is not None
    plain = parse_module(src)
    assert plain.globals[0].loc is None
    data = write_bytecode(plain)
    assert write_bytecode(read_bytecode(data)) == data


def test_missing_token_is_reported_after_the_previous_one() -> None:
    """MLIR reports a missing ``,`` at the end of the line before when the next
    token starts a later line."""
    src = ("testing$func @f(%c: tile<2xi1>, %a: tile<2xf32>) {\n"
           "  %0 = select %c, %a, %a : tile<2xf32>\n"
           "  // a comment\n"
           "}\n")
    assert errors(src) == [(2, "custom op 'cuda_tile.select' expected ','")]
