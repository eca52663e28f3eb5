"""Loads branch around their whole access when the tile starts outside the tensor (the
elements are still checked one by one), with their address arithmetic inside the branch
from a fresh read of %tid.x; stores compute their addresses next to the stores (and branch
per element where emit_memory.branch_per_element says so, around the whole store where
emit_memory.guard_whole_store does).  Tiles
wholly outside the source must still load the padding value."""
from __future__ import annotations

import re

import numpy as np

from tileiras import diffcheck
from tileiras.text.parser import parse_module

#: Tile bx of x (n elements, padded with -inf) plus one, stored to tile bx of o (m elements).
COPY = """cuda_tile.module @kernels {
  entry @k(%xp: tile<ptr<f32>>, %n: tile<i32>, %op: tile<ptr<f32>>, %m: tile<i32>) {
    %tok = make_token : token
    %xv = make_tensor_view %xp, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %ov = make_tensor_view %op, shape = [%m], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %xpv = make_partition_view %xv : partition_view<tile=(256), padding_value = neg_inf, tensor_view<?xf32, strides=[1]>>
    %opv = make_partition_view %ov : partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>
    %t, %t1 = load_view_tko weak %xpv[%bx] token = %tok : partition_view<tile=(256), padding_value = neg_inf, tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<256xf32>, token
    %one = constant <f32: 1.0> : tile<256xf32>
    %r = addf %t, %one : tile<256xf32>
    %t2 = store_view_tko weak %r, %opv[%bx] token = %tok : tile<256xf32>, partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
    return
  }
}
"""


def test_load_branches_around_its_access():
    ptx = diffcheck.compile_ptx(parse_module(COPY, "k.mlir"), "sm_90")
    body = ptx[ptx.index("{"):]
    branch = re.search(r"@%p\d+ bra\s+(\$L__BB0_\d+);", body)
    assert branch is not None
    inside = body[branch.end():body.index(branch.group(1) + ":")]
    assert len(re.findall(r"ld\.global", inside)) == 2       # both elements, each still predicated
    assert "%tid.x" in inside                                   # the address arithmetic is in there
    after = body[body.index(branch.group(1) + ":"):]
    # stores of x + 1 (one instruction each): a branch around the whole access
    # (emit_memory.guard_whole_store), then each element in a branch of its own
    # (emit_memory.branch_per_element), the store itself unpredicated
    assert "%tid.x" in after
    assert len(re.findall(r"@%p\d+ bra", after)) == 3
    assert len(re.findall(r"^\s*st\.global", after, re.MULTILINE)) == 2


def test_tiles_outside_the_source_load_padding():
    """Grid 4 over x of 300 elements: tiles 2 and 3 start outside x and see -inf + 1."""
    module = parse_module(COPY, "k.mlir")
    x, o = np.arange(300, dtype=np.float32), np.zeros(1024, dtype=np.float32)
    args = [x, np.int32(300), o, np.int32(1024)]
    expected, got = diffcheck.run_both(module, "k", (4, 1, 1), args, "sm_90")
    assert diffcheck.compare(expected, got) is None
    out = got.arrays[1]
    assert np.array_equal(out[:300], x + 1) and np.all(np.isneginf(out[300:]))
