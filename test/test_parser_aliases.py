"""Parser details the cuda-tile test suite relies on: older op spellings and the
storage of sub-byte dense constants."""
from __future__ import annotations

from tileiras.reader import read_bytecode
from tileiras.text.parser import parse_module
from tileiras.text.printer import print_module
from tileiras.tile.ops_arith import FPowFOp
from tileiras.writer import write_bytecode


def test_pow_is_parsed_as_fpowf_and_printed_as_fpowf():
    src = "testing$func @f(%a: tile<2xf32>) {\n  %0 = pow %a, %a : tile<2xf32>\n}\n"
    module = parse_module(src)
    ops = [op for op in module.walk() if isinstance(op, FPowFOp)]
    assert len(ops) == 1
    text = print_module(module)
    assert "= fpowf %" in text and " pow " not in text
    generic = 'testing$func @f(%a: tile<2xf32>) {\n  %0 = "cuda_tile.pow"(%a, %a) : (tile<2xf32>, tile<2xf32>) -> tile<2xf32>\n}\n'
    assert any(isinstance(op, FPowFOp) for op in parse_module(generic).walk())


def test_f4_constants_take_one_byte_per_element():
    src = "entry @k() {\n  %c = constant <f4E2M1FN: [[1.0, 2.0], [4.0, 6.0]]> : tile<2x2xf4E2M1FN>\n}\n"
    module = parse_module(src)
    const = next(op for op in module.walk() if op.definition.name == "constant")
    assert const.attributes["value"].data == bytes([0x2, 0x4, 0x6, 0x7])
    text = print_module(module)
    assert "[[1.000000e+00, 2.000000e+00], [4.000000e+00, 6.000000e+00]]" in text
    assert print_module(read_bytecode(write_bytecode(module))) == text
