"""Common subexpressions (``lower/cse.py``): pure twins merged before TileAA, memory ops,
ops in sibling regions and ops whose attributes differ kept; the program computes the same,
and the interpreter, the oracle, still runs the program as it was read."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tileiras import diffcheck
from tileiras.lower.cse import eliminate_common_subexpressions
from tileiras.text.parser import parse_module

KERNEL = """\
cuda_tile.module @m {
  entry @k(%x: tile<ptr<f32>>, %out: tile<ptr<f32>>, %n: tile<i32>, %flag: tile<i1>) {
    %tok = make_token : token
    %tv = make_tensor_view %x, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %ov = make_tensor_view %out, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %pv = make_partition_view %tv : partition_view<tile=(64), tensor_view<?xf32, strides=[1]>>
    %po = make_partition_view %ov : partition_view<tile=(64), tensor_view<?xf32, strides=[1]>>
    %b0, %b1, %b2 = get_tile_block_id : tile<i32>
    %c0, %c1, %c2 = get_tile_block_id : tile<i32>
    %t, %t_tok = load_view_tko weak %pv[%b0] token = %tok : partition_view<tile=(64), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<64xf32>, token
    %u, %u_tok = load_view_tko weak %pv[%c0] token = %tok : partition_view<tile=(64), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<64xf32>, token
    %two = constant <f32: 2.0> : tile<64xf32>
    %two_again = constant <f32: 2.0> : tile<64xf32>
    %a = mulf %t, %two rounding<nearest_even> : tile<64xf32>
    %b = mulf %t, %two_again rounding<nearest_even> : tile<64xf32>
    %z = mulf %t, %two rounding<zero> : tile<64xf32>
    %s = addf %a, %b rounding<nearest_even> : tile<64xf32>
    %r = if %flag -> (tile<64xf32>) {
      %inner = mulf %t, %two rounding<nearest_even> : tile<64xf32>
      %sq = mulf %u, %u rounding<nearest_even> : tile<64xf32>
      %w = addf %inner, %sq rounding<nearest_even> : tile<64xf32>
      yield %w : tile<64xf32>
    } else {
      %sq2 = mulf %u, %u rounding<nearest_even> : tile<64xf32>
      yield %sq2 : tile<64xf32>
    }
    %v = addf %s, %r rounding<nearest_even> : tile<64xf32>
    %v2 = addf %v, %z rounding<nearest_even> : tile<64xf32>
    %done = store_view_tko weak %v2, %po[%c0] token = %tok : tile<64xf32>, partition_view<tile=(64), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
    return
  }
}
"""


def kernel():
    return parse_module(KERNEL, "k.mlir")


def names(fn) -> list[str]:
    return [op.name for op in fn.walk()]


def test_pure_twins_are_merged_and_the_rest_kept():
    fn = kernel().functions[0]
    before = names(fn)
    assert eliminate_common_subexpressions(fn) == 4
    after = names(fn)
    # dropped: the second block id, the second constant, ``%b`` (``%a`` once the constants
    # are one) and the then-branch's ``%inner`` (``%a`` again, which dominates it)
    assert len(before) - len(after) == 4
    assert after.count("get_tile_block_id") == 1 and after.count("constant") == 1
    # kept: both loads (memory effects), ``%z`` (another rounding), both ``u*u`` (sibling
    # regions: neither dominates the other)
    assert after.count("load_view_tko") == 2 and after.count("mulf") == 4
    ops = list(fn.walk())
    a = next(op for op in ops if op.name == "mulf")
    s = next(op for op in ops if op.name == "addf")
    assert s.operands == [a.results[0], a.results[0]]
    then_add = next(op for op in ops if op.name == "addf" and op.parent is not fn.body.blocks[0])
    assert then_add.operands[0] is a.results[0]
    loads = [op for op in ops if op.name == "load_view_tko"]
    block_id = next(op for op in ops if op.name == "get_tile_block_id")
    assert loads[1].operands[1] is block_id.results[0]          # ``%c0`` became ``%b0``


def test_idempotent():
    fn = kernel().functions[0]
    eliminate_common_subexpressions(fn)
    assert eliminate_common_subexpressions(fn) == 0


@pytest.mark.parametrize("flag", [0, 1])
def test_the_program_computes_the_same(flag):
    module, merged = kernel(), kernel()
    eliminate_common_subexpressions(merged.functions[0])
    fn = module.functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(3), 100, diffcheck.BUDGET)
    args[-1] = np.bool_(flag)
    want = diffcheck.run_interpreter(module, fn.name, (2, 1, 1), args)
    got = diffcheck.run_interpreter(merged, fn.name, (2, 1, 1), args)
    assert diffcheck.compare(want, got) is None
    assert np.count_nonzero(want.arrays[1]) == 100       # all of the output, both CTAs


def test_the_oracle_runs_the_program_as_read():
    """``diffcheck`` compiles a copy: the passes (this one among them) rewrite what they compile."""
    module = kernel()
    before = names(module.functions[0])
    ptx = diffcheck.compile_ptx(module, "sm_80")
    assert names(module.functions[0]) == before and ".entry k" in ptx
    (report,) = diffcheck.check_module(module, "sm_80", grid=(2, 1, 1), extent=100)
    assert report.problem is None, report.problem


def test_a_row_used_twice_is_loaded_once():
    """``broadcast_expand`` reshapes the row it loads twice (an outer product and a
    broadcast): one layout conversion now, so each thread reads each of its 8 row elements
    once, not twice (18 loads before: 2 of the column, 16 of the row)."""
    pytest.importorskip("cuda.tile")
    from differential import export
    from kernels.shapes import CASES

    from tileiras.reader import read_bytecode

    (case,) = [c for c in CASES if c.name == "broadcast_expand"]
    module = read_bytecode(export(case, "sm_80"))
    ptx = diffcheck.compile_ptx(module, "sm_80")
    assert len(re.findall(r"ld\.global", ptx)) == 10
    (report,) = diffcheck.check_module(module, "sm_80", grid=(3, 1, 1), extent=100)
    assert report.problem is None, report.problem
