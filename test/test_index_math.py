"""Index arithmetic of view accesses, as NVIDIA's PTX does it: values known non-negative
(``assume bounded<0, ?>`` shapes, block ids) are zero-extended to 64 bits, so that ptxas
knows their high word is zero."""
from __future__ import annotations

from tileiras import diffcheck
from tileiras.text.parser import parse_module

#: |tile bx of x| stored to tile bx of o; the shapes are assumed non-negative or not.
ABS = """cuda_tile.module @kernels {
  entry @k(%xp: tile<ptr<f32>>, %n0: tile<i32>, %op: tile<ptr<f32>>, %m0: tile<i32>) {
    %tok = make_token : token
    %n = assume bounded<0, ?>, %n0 : tile<i32>
    %m = assume bounded<0, ?>, %m0 : tile<i32>
    %xv = make_tensor_view %xp, shape = [SHAPE_N], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %ov = make_tensor_view %op, shape = [SHAPE_M], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %xpv = make_partition_view %xv : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>
    %opv = make_partition_view %ov : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>
    %t, %t1 = load_view_tko weak %xpv[%bx] token = %tok : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<128xf32>, token
    %r = absf %t : tile<128xf32>
    %t2 = store_view_tko weak %r, %opv[%bx] token = %tok : tile<128xf32>, partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
    return
  }
}
"""

#: The block id and a parameter, each widened with a signed exti, stored to o[0] and o[1].
EXTI = """cuda_tile.module @kernels {
  entry @k(%op: tile<ptr<i64>>, %v: tile<i32>) {
    %tok = make_token : token
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %a = exti %bx signed : tile<i32> -> tile<i64>
    %b = exti %v signed : tile<i32> -> tile<i64>
    %p = offset %op, %bx : tile<ptr<i64>>, tile<i32> -> tile<ptr<i64>>
    %t1 = store_ptr_tko weak %p, %a token = %tok : tile<ptr<i64>>, tile<i64> -> token
    %one = constant <i32: 1> : tile<i32>
    %q = offset %op, %one : tile<ptr<i64>>, tile<i32> -> tile<ptr<i64>>
    %t2 = store_ptr_tko weak %q, %b token = %tok : tile<ptr<i64>>, tile<i64> -> token
    return
  }
}
"""


def _ptx(text: str, arch: str = "sm_80") -> str:
    ptx = diffcheck.compile_ptx(parse_module(text, "k.mlir"), arch)
    return ptx[ptx.index("{"):]


def test_non_negative_shapes_are_zero_extended():
    ptx = _ptx(ABS.replace("SHAPE_N", "%n").replace("SHAPE_M", "%m"))
    assert "ld.param.s32" not in ptx and "cvt.s64.s32" not in ptx
    assert "ld.param.b32 \t%rd" in ptx or "cvt.u64.u32" in ptx


def test_shapes_of_unknown_sign_are_sign_extended():
    text = ABS.replace("SHAPE_N", "%n0").replace("SHAPE_M", "%m0")
    text = "\n".join(line for line in text.splitlines() if "assume" not in line)
    ptx = _ptx(text)
    assert "ld.param.s32" in ptx or "cvt.s64.s32" in ptx


#: Stores |x| twice: to o through a view of %m0 elements inside an if where %m0 is
#: assumed non-negative, then to o through a view of %m0 elements after the if.
ASSUME_IN_IF = """cuda_tile.module @kernels {
  entry @k(%xp: tile<ptr<f32>>, %n0: tile<i32>, %op: tile<ptr<f32>>, %m0: tile<i32>, %c: tile<i1>) {
    %tok = make_token : token
    %xv = make_tensor_view %xp, shape = [%n0], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %xpv = make_partition_view %xv : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>
    %t, %t1 = load_view_tko weak %xpv[%bx] token = %tok : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<128xf32>, token
    %r = absf %t : tile<128xf32>
    if %c {
      %m = assume bounded<0, ?>, %m0 : tile<i32>
      %iv = make_tensor_view %op, shape = [%m], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
      %ipv = make_partition_view %iv : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>
      %t2 = store_view_tko weak %r, %ipv[%bx] token = %tok : tile<128xf32>, partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
      yield
    } else {
      yield
    }
    %ov = make_tensor_view %op, shape = [%m0], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %opv = make_partition_view %ov : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>
    %t3 = store_view_tko weak %r, %opv[%bx] token = %tok : tile<128xf32>, partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
    return
  }
}
"""


def test_an_assume_below_the_top_holds_only_below_it():
    ptx = _ptx(ASSUME_IN_IF)
    assert "cvt.s64.s32" in ptx          # %m0 (a loaded parameter) sign-extended after the if


def test_exti_of_a_block_id_zero_extends():
    ptx = _ptx(EXTI)
    assert "cvt.u64.u32" in ptx                                           # the block id
    assert ptx.count("cvt.s64.s32") + ptx.count("ld.param.s32") == 1      # %v, sign unknown
