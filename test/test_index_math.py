"""Index arithmetic of view accesses, as NVIDIA's PTX does it: values known non-negative
(``assume bounded<0, ?>`` shapes, block ids) are zero-extended to 64 bits, so that ptxas
knows their high word is zero; tiles are tested against the tile count, and each access
computes its own tile start."""
from __future__ import annotations

import re

import numpy as np

from tileiras import diffcheck
from tileiras.codegen.ptxas import run_ptxas, stats_from_cubin
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


def test_tiles_are_tested_against_the_tile_count():
    """The guard is NVIDIA's index < ceil(n / 128) (uniform: from parameters alone), not
    index * 128 < n; every access shifts its own copy of the block id (cvt.u64.u32, then
    shl.b64), never a shared 64-bit mul.wide product."""
    ptx = _ptx(ABS.replace("SHAPE_N", "%n").replace("SHAPE_M", "%m"))
    assert re.search(r"add\.s64\s+(%rd\d+), %rd\d+, 127;\s+shr\.u64\s+%rd\d+, \1, 7;", ptx)
    assert "mul.wide" not in ptx
    fresh = re.findall(r"// begin inline asm\s+cvt\.u64\.u32 (%rd\d+), %r\d+;", ptx)
    assert len(fresh) == 2                                       # the load's and the store's
    assert all(re.search(rf"shl\.b64\s+%rd\d+, {r}, 7;", ptx) for r in fresh)


def test_small_kernel_registers_match_nvidia():
    """|x| * -0.25 over tiles of 32 (cuTile's const_specialize): NVIDIA's tileiras needs 8
    registers on sm_80, and so do we (10 with a shared 64-bit tile start)."""
    text = ABS.replace("SHAPE_N", "%n").replace("SHAPE_M", "%m").replace("128", "32")
    module = parse_module(text, "k.mlir")
    ptx = diffcheck.compile_ptx(module, "sm_80")
    assert stats_from_cubin(run_ptxas(ptx, "sm_80"))["k"].registers <= 8


#: Tile bx - 1 of x (padded with 7) stored to tile bx of o: block 0 reads tile -1.
SHIFTED = """cuda_tile.module @kernels {
  entry @k(%xp: tile<ptr<f32>>, %n0: tile<i32>, %op: tile<ptr<f32>>, %m0: tile<i32>) {
    %tok = make_token : token
    %n = assume bounded<0, ?>, %n0 : tile<i32>
    %m = assume bounded<0, ?>, %m0 : tile<i32>
    %xv = make_tensor_view %xp, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %ov = make_tensor_view %op, shape = [%m], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %one = constant <i32: 1> : tile<i32>
    %prev = subi %bx, %one : tile<i32>
    %xpv = make_partition_view %xv : partition_view<tile=(128), padding_value = pos_inf, tensor_view<?xf32, strides=[1]>>
    %opv = make_partition_view %ov : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>
    %t, %t1 = load_view_tko weak %xpv[%prev] token = %tok : partition_view<tile=(128), padding_value = pos_inf, tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<128xf32>, token
    %t2 = store_view_tko weak %t, %opv[%bx] token = %tok : tile<128xf32>, partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
    return
  }
}
"""


def test_a_negative_tile_index_loads_padding():
    """Tile -1 (sign-extended: a huge unsigned index) is outside: all padding."""
    module = parse_module(SHIFTED, "k.mlir")
    x, o = np.arange(300, dtype=np.float32), np.zeros(384, dtype=np.float32)
    args = [x, np.int32(300), o, np.int32(384)]
    expected, got = diffcheck.run_both(module, "k", (3, 1, 1), args, "sm_90")
    assert diffcheck.compare(expected, got) is None
    out = got.arrays[1]
    assert np.all(np.isposinf(out[:128])) and np.array_equal(out[128:], x[:256])


def _load_movs(ptx: str) -> list[bool]:
    """Per predicated global load: is a default moved into its register first?"""
    return [bool(m.group(1)) for m in re.finditer(r"begin inline asm\s+(mov\.b\d+ %\w+, %\w+; )?@%p\d+ ld\.global", ptx)]


def test_loads_without_padding_value_leave_outside_elements_unwritten():
    """Unspecified by the spec, and NVIDIA's PTX leaves them unwritten too."""
    assert _load_movs(_ptx(ABS.replace("SHAPE_N", "%n").replace("SHAPE_M", "%m"))) == [False]
    padded = ABS.replace("SHAPE_N", "%n").replace("SHAPE_M", "%m").replace(
        "partition_view<tile=(128), tensor_view", "partition_view<tile=(128), padding_value = zero, tensor_view")
    assert _load_movs(_ptx(padded)) == [True]


def test_narrow_loads_without_padding_value_still_set_a_default():
    """Two f16 loads share a 32-bit register only when both are defined on every path."""
    f16 = ABS.replace("SHAPE_N", "%n").replace("SHAPE_M", "%m").replace("f32", "f16")
    movs = _load_movs(_ptx(f16))
    assert movs and all(movs)


def test_loads_in_loops_without_padding_value_still_set_a_default():
    """In a loop, a register left unwritten would carry the previous iteration's value."""
    looped = ABS.replace("SHAPE_N", "%n").replace("SHAPE_M", "%m")
    body_start = looped.index("    %t, %t1 = load_view_tko")
    body_end = looped.index("    return")
    body = looped[body_start:body_end].replace("\n    ", "\n      ")
    looped = (looped[:body_start] + """    %lo = constant <i32: 0> : tile<i32>
    %hi = constant <i32: 4> : tile<i32>
    %st = constant <i32: 1> : tile<i32>
    for %i in (%lo to %hi, step %st) : tile<i32> {
  """ + body + """    continue
    }
""" + looped[body_end:])
    movs = _load_movs(_ptx(looped))
    assert movs and all(movs)


#: i64 elements, tiles of 64 at exti(bx) (cuTile's i64 copy in multi_entry): 2 * x.
I64_DOUBLE = """cuda_tile.module @kernels {
  entry @k(%xp: tile<ptr<i64>>, %n0: tile<i64>, %op: tile<ptr<i64>>, %m0: tile<i64>) {
    %tok = make_token : token
    %n = assume bounded<0, ?>, %n0 : tile<i64>
    %m = assume bounded<0, ?>, %m0 : tile<i64>
    %xv = make_tensor_view %xp, shape = [%n], strides = [1] : tile<i64> -> tensor_view<?xi64, strides=[1]>
    %ov = make_tensor_view %op, shape = [%m], strides = [1] : tile<i64> -> tensor_view<?xi64, strides=[1]>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %i = exti %bx signed : tile<i32> -> tile<i64>
    %xpv = make_partition_view %xv : partition_view<tile=(64), tensor_view<?xi64, strides=[1]>>
    %opv = make_partition_view %ov : partition_view<tile=(64), tensor_view<?xi64, strides=[1]>>
    %t, %t1 = load_view_tko weak %xpv[%i] token = %tok : partition_view<tile=(64), tensor_view<?xi64, strides=[1]>>, tile<i64> -> tile<64xi64>, token
    %r = addi %t, %t : tile<64xi64>
    %t2 = store_view_tko weak %r, %opv[%i] token = %tok : tile<64xi64>, partition_view<tile=(64), tensor_view<?xi64, strides=[1]>>, tile<i64> -> token
    return
  }
}
"""


def test_i64_copy_registers_match_nvidia():
    """NVIDIA's tileiras needs 8 registers on sm_80; 9 with a default moved before the load."""
    module = parse_module(I64_DOUBLE, "k.mlir")
    ptx = diffcheck.compile_ptx(module, "sm_80")
    assert stats_from_cubin(run_ptxas(ptx, "sm_80"))["k"].registers <= 8
    x, o = np.arange(100, dtype=np.int64) - 50, np.zeros(128, dtype=np.int64)
    args = [x, np.int64(100), o, np.int64(100)]
    expected, got = diffcheck.run_both(module, "k", (2, 1, 1), args, ptx=ptx)
    assert diffcheck.compare(expected, got) is None
    assert np.array_equal(got.arrays[1][:100], 2 * x) and not got.arrays[1][100:].any()


def test_thread_index_is_not_masked_to_the_cta():
    """%tid.x is known to be under the CTA size (``!range`` on its reads), so the lane and
    warp bits of a 128-thread layout give the thread's coordinate as %tid.x itself, not
    ``tid & 127`` (intrinsics._below)."""
    ptx = _ptx(ABS.replace("SHAPE_N", "%n").replace("SHAPE_M", "%m"))
    tids = re.findall(r"mov\.u32 (%r\d+), %tid\.x;", ptx)
    assert len(tids) == 2                                   # the load's and the store's
    assert not re.search(r"and\.b32\s+%r\d+, %r\d+, 127;", ptx)
    assert all(re.search(rf"cvt\.u64\.u32\s+%rd\d+, {t};", ptx) for t in tids)


def test_two_registers_a_thread_registers_match_nvidia():
    """Tiles of 256 f32 in 128 threads times 0.5 (cuTile's pdl_chain without its
    griddepcontrol): 12 registers on sm_100 as NVIDIA's tileiras, 14 when the thread's
    coordinate was ``tid & 127``; and the right values."""
    text = (ABS.replace("SHAPE_N", "%n").replace("SHAPE_M", "%m").replace("128", "256")
            .replace("%r = absf %t : tile<256xf32>",
                     "%h = constant <f32: 0.5> : tile<256xf32>\n    %r = mulf %t, %h : tile<256xf32>"))
    module = parse_module(text, "k.mlir")
    ptx = diffcheck.compile_ptx(module, "sm_100")
    assert stats_from_cubin(run_ptxas(ptx, "sm_100"))["k"].registers <= 12
    x, o = np.arange(300, dtype=np.float32), np.full(512, 5.0, dtype=np.float32)
    expected, got = diffcheck.run_both(module, "k", (2, 1, 1), [x, np.int32(300), o, np.int32(300)], ptx=ptx)
    assert diffcheck.compare(expected, got) is None
    assert np.array_equal(got.arrays[1][:300], x / 2) and np.all(got.arrays[1][300:] == 5.0)


def test_later_registers_index_from_the_first():
    """A thread's second element of a 256-tile is its first's index + 128 in 64 bits, as
    NVIDIA's PTX adds it (emit_memory._element_index; LLVM writes the add as an ``or``,
    bit 7 of the first index being clear): no 32-bit ``tid | 128`` extended and added to
    the tile start again."""
    ptx = _ptx(ABS.replace("SHAPE_N", "%n").replace("SHAPE_M", "%m").replace("128", "256"), "sm_100")
    firsts = re.findall(r"or\.b64\s+(%rd\d+), %rd\d+, %rd\d+;", ptx)
    seconds = re.findall(r"(?:or|add)\.[bs]64\s+%rd\d+, (%rd\d+), 128;", ptx)
    assert len(seconds) == 2 and set(seconds) <= set(firsts)     # the load's and the store's
    assert not re.search(r"or\.b32\s+%r\d+, %r\d+, 128;", ptx)


def test_a_store_without_tile_test_masks_its_thread_index():
    """A store of a long chain with a division is not branched around on its tile test
    (emit_memory.guard_whole_store); its fresh %tid.x read carries no range, and its
    coordinate stays ``tid & 127`` (nvvm.KernelEmitter.coordinates_here: float_compare_where
    sm_80 16 -> 18 registers unmasked), while the load's, in its branch, has none."""
    chain = "\n    ".join(["%c = constant <f32: 3.0> : tile<128xf32>", "%r1 = mulf %t, %c : tile<128xf32>",
                            "%r2 = addf %r1, %t : tile<128xf32>", "%r3 = mulf %r2, %r1 : tile<128xf32>",
                            "%r4 = divf %r3, %t rounding<nearest_even> : tile<128xf32>", "%r5 = mulf %r4, %r2 : tile<128xf32>",
                            "%r = addf %r5, %r3 : tile<128xf32>"])
    text = ABS.replace("SHAPE_N", "%n").replace("SHAPE_M", "%m").replace("%r = absf %t : tile<128xf32>", chain)
    ptx = _ptx(text, "sm_80")
    tids = re.findall(r"mov\.u32 (%r\d+), %tid\.x;", ptx)
    assert len(tids) == 2                                   # the load's and the store's
    masked = [t for t in tids if re.search(rf"and\.b32\s+%r\d+, {t}, 127;", ptx)]
    assert masked == [tids[1]]
