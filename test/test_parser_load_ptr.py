"""load_ptr_tko with a padding value but no mask prints like one with a mask and no
padding; the parser tells them apart by the operand's type."""
from __future__ import annotations

from tileiras.text.parser import parse_module
from tileiras.text.printer import print_module
from tileiras.tile.ops_memory import LoadPtrTkoOp
from tileiras.verify import verify_module

TEXT = """entry @k(%p: tile<ptr<f32>>) {
  %0 = make_token : token
  %pad = constant <f32: 0.000000e+00> : tile<4xf32>
  %m = constant <i1: true> : tile<4xi1>
  %r = reshape %p : tile<ptr<f32>> -> tile<1xptr<f32>>
  %ptrs = broadcast %r : tile<1xptr<f32>> -> tile<4xptr<f32>>
  %a, %ta = load_ptr_tko weak %ptrs, %pad token=%0 : tile<4xptr<f32>>, tile<4xf32> -> tile<4xf32>, token
  %b, %tb = load_ptr_tko weak %ptrs, %m token=%0 : tile<4xptr<f32>>, tile<4xi1> -> tile<4xf32>, token
  return
}
"""


def test_lone_optional_operand_is_told_by_its_type():
    module = parse_module(TEXT, "k.mlir")
    assert not [d for d in verify_module(module) if "error" in str(d)]
    loads = [op for op in module.functions[0].walk() if isinstance(op, LoadPtrTkoOp)]
    assert loads[0].mask is None and loads[0].paddingValue is not None
    assert loads[1].mask is not None and loads[1].paddingValue is None
    assert print_module(module) == print_module(parse_module(print_module(module), "again.mlir"))
