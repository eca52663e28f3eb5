"""Where stores and what they store are computed.  Stores of straight-line per-element chains
branch per element (emit_memory.branch_per_element): ptxas then computes one element's chain
after the other instead of interleaving them.  A store of a few cheaply computed registers
is branched around whole on its tile test (emit_memory.guard_whole_store).  A store's operands that wait for a load are
emitted first (nvvm.emit_block), so its addresses are computed after the load's branch.
Atomic reductions address their tile from its origin, with per-thread offsets they share."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tileiras import diffcheck
from tileiras.codegen.ptxas import invoke_ptxas
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.text.parser import parse_module
from tileiras.tools import find_ptxas


def kernel(n: int, elem: str, body: list[str]) -> str:
    """Loads tiles %a and %b of ``n`` elements of x and y, computes ``body`` (its last line
    defines %r) and stores %r to o."""
    view = f"tensor_view<?x{elem}, strides=[1]>"
    part = f"partition_view<tile=({n}), {view}>"
    tile = f"tile<{n}x{elem}>"
    lines = ["%tok = make_token : token",
             *(f"%{v}v = make_tensor_view %{v}, shape = [%n], strides = [1] : tile<i32> -> {view}"
               for v in "xyo"),
             "%bx, %by, %bz = get_tile_block_id : tile<i32>",
             *(f"%{v}p = make_partition_view %{v}v : {part}" for v in "xyo"),
             f"%a, %at = load_view_tko weak %xp[%bx] token = %tok : {part}, tile<i32> -> {tile}, token",
             f"%b, %bt = load_view_tko weak %yp[%bx] token = %tok : {part}, tile<i32> -> {tile}, token",
             *(line.replace("TILE", tile) for line in body),
             f"%st = store_view_tko weak %r, %op[%bx] token = %tok : {tile}, {part}, tile<i32> -> token",
             "return"]
    ptr = f"tile<ptr<{elem}>>"
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k(%x: {ptr}, %y: {ptr}, %o: {ptr}, %n: tile<i32>) {{\n"
            + "".join(f"    {line}\n" for line in lines) + "  }\n}\n")


#: int_arith's shape: floor division and remainder by a divisor that is never 0.
INT_DIVISION = ["%one = constant <i32: 1> : TILE",
                "%ab = absi %b : TILE",
                "%d = maxi %ab, %one signed : TILE",
                "%q = divi %a, %d signed rounding<negative_inf> : TILE",
                "%m = remi %b, %d signed : TILE",
                "%p = muli %a, %b : TILE",
                "%s = addi %q, %m : TILE",
                "%r = addi %s, %p : TILE"]
FLOAT_DIVISION = ["%r = divf %a, %b : TILE"]


def stores(ptx: str) -> tuple[int, int]:
    """(unpredicated, predicated) global stores."""
    plain = len(re.findall(r"^\s*st\.global", ptx, re.MULTILINE))
    guarded = len(re.findall(r"^\s*@%p\d+ st\.global", ptx, re.MULTILINE))
    return plain, guarded


def test_integer_chains_store_in_a_branch_each():
    ptx = diffcheck.compile_ptx(parse_module(kernel(256, "i32", INT_DIVISION), "k.mlir"), "sm_90")
    assert stores(ptx) == (2, 0)   # two registers a thread, each in its own block


def test_float_division_stores_stay_predicated():
    """div.rn.f32: ptxas's slow path already splits the blocks."""
    ptx = diffcheck.compile_ptx(parse_module(kernel(256, "f32", FLOAT_DIVISION), "k.mlir"), "sm_90")
    assert stores(ptx) == (0, 2)


def test_one_register_a_thread_stores_in_a_branch():
    ptx = diffcheck.compile_ptx(parse_module(kernel(128, "i32", INT_DIVISION), "k.mlir"), "sm_90")
    assert stores(ptx) == (1, 0)


#: 64 f32 elements stored as the bytes of their f16 values: ``pack`` redistributes them
#: through shared memory, so each thread's one stored register is read from there.
PACKED = """cuda_tile.module @kernels {
  entry @k(%x: tile<ptr<f32>>, %o: tile<ptr<i8>>, %n: tile<i32>) {
    %tok = make_token : token
    %xv = make_tensor_view %x, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %ov = make_tensor_view %o, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xi8, strides=[1]>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %xp = make_partition_view %xv : partition_view<tile=(64), tensor_view<?xf32, strides=[1]>>
    %op = make_partition_view %ov : partition_view<tile=(128), tensor_view<?xi8, strides=[1]>>
    %a, %at = load_view_tko weak %xp[%bx] token = %tok : partition_view<tile=(64), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<64xf32>, token
    %h = ftof %a : tile<64xf32> -> tile<64xf16>
    %r = pack %h : tile<64xf16> -> tile<128xi8>
    %st = store_view_tko weak %r, %op[%bx] token = %tok : tile<128xi8>, partition_view<tile=(128), tensor_view<?xi8, strides=[1]>>, tile<i32> -> token
    return
  }
}
"""


def test_one_register_read_from_shared_memory_stays_predicated():
    ptx = diffcheck.compile_ptx(parse_module(PACKED, "k.mlir"), "sm_90")
    assert "ld.shared" in ptx and stores(ptx) == (0, 1)


def conversions(views: str) -> str:
    """Loads a 256-element f32 tile of x and stores it converted to each of ``views``
    (element types), each view of its own extent."""
    lines = ["%tok = make_token : token",
             "%xv = make_tensor_view %x, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>",
             "%bx, %by, %bz = get_tile_block_id : tile<i32>",
             "%xp = make_partition_view %xv : partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>",
             "%a, %at = load_view_tko weak %xp[%bx] token = %tok : partition_view<tile=(256), "
             "tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<256xf32>, token"]
    params = ["%x: tile<ptr<f32>>", "%n: tile<i32>"]
    for k, elem in enumerate(views):
        view = f"tensor_view<?x{elem}, strides=[1]>"
        part = f"partition_view<tile=(256), {view}>"
        params += [f"%o{k}: tile<ptr<{elem}>>", f"%n{k}: tile<i32>"]
        lines += [f"%v{k} = make_tensor_view %o{k}, shape = [%n{k}], strides = [1] : tile<i32> -> {view}",
                  f"%p{k} = make_partition_view %v{k} : {part}",
                  f"%c{k} = ftof %a : tile<256xf32> -> tile<256x{elem}>",
                  f"%s{k} = store_view_tko weak %c{k}, %p{k}[%bx] token = %tok : tile<256x{elem}>, {part}, "
                  "tile<i32> -> token"]
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k({', '.join(params)}) {{\n"
            + "".join(f"    {line}\n" for line in lines + ["return"]) + "  }\n}\n")


#: cvt_float_formats' shape: one loaded tile stored as f16, bf16 and both fp8 formats
FORMATS = ("f16", "bf16", "f8E4M3FN", "f8E5M2")


def test_short_chains_store_under_their_tile_test():
    """Each store of a few cheaply computed registers is branched around on its view's
    tile test (emit_memory.guard_whole_store): one tile count (ceil(extent / 256), a
    ``shr.u64``) per view, the load's and the four stores'."""
    ptx = diffcheck.compile_ptx(parse_module(conversions(FORMATS), "k.mlir"), "sm_100")
    assert len(re.findall(r"shr\.u64\s+%rd\d+, %rd\d+, 8;", ptx)) == 1 + len(FORMATS)


def test_tile_tested_stores_compute_the_same():
    """Grid 3 over 600 source elements: f16's 300 end inside tile 1, so its tile 2 is skipped
    whole; bf16's 700 reach into tile 2."""
    module = parse_module(conversions(("f16", "bf16")), "k.mlir")
    x = np.random.default_rng(5).standard_normal(600).astype(np.float32)
    h = np.full(768, 7.0, dtype=np.float16)
    g = np.full(768, 9, dtype=np.uint16)      # bf16 bits
    args = [x, np.int32(600), h, np.int32(300), g, np.int32(700)]
    expected, got = diffcheck.run_both(module, "k", (3, 1, 1), args, "sm_100")
    assert diffcheck.compare(expected, got) is None
    assert np.all(got.arrays[1][300:] == 7.0) and np.all(got.arrays[2][700:] == 9)


#: int_bitwise's shape: a longer chain of cheap integer instructions per element
BITWISE = ["%c7 = constant <i32: 7> : TILE",
           "%s = andi %b, %c7 : TILE",
           "%e = xori %a, %b : TILE",
           "%u = ori %e, %a : TILE",
           "%l = shli %u, %s : TILE",
           "%h = shri %a, %s unsigned : TILE",
           "%r = addi %l, %h : TILE"]
#: as long, with a float division (a ptxas slow path)
FLOAT_CHAIN = ["%q = divf %a, %b : TILE",
               "%s = addf %q, %a : TILE",
               "%t = mulf %s, %b : TILE",
               "%u = subf %t, %a : TILE",
               "%v = mulf %u, %u : TILE",
               "%r = addf %v, %q : TILE"]


def own_output_extent(text: str) -> str:
    """``kernel``'s module with o shaped by a parameter %m of its own, so that the store's
    tile count (ceil(m / 256), a ``shr.u64``) is not the loads'."""
    return (text.replace("%n: tile<i32>)", "%n: tile<i32>, %m: tile<i32>)")
            .replace("%ov = make_tensor_view %o, shape = [%n]", "%ov = make_tensor_view %o, shape = [%m]"))


@pytest.mark.parametrize("body, elem, guarded", [(BITWISE, "i32", True), (FLOAT_CHAIN, "f32", False)])
def test_long_plain_chains_store_under_their_tile_test(body, elem, guarded):
    """A store of a few registers computed by a longer chain is branched around whole on
    its tile test when the chain has no ptxas slow path (emit_memory.guard_whole_store):
    the store's tile count is computed besides the loads' one.  Grid 3 over 700 input and
    600 output elements: the store's tile 2 is partly outside and left as it was."""
    module = parse_module(own_output_extent(kernel(256, elem, body)), "k.mlir")
    ptx = diffcheck.compile_ptx(module, "sm_120")
    assert len(re.findall(r"shr\.u64\s+%rd\d+, %rd\d+, 8;", ptx)) == 1 + guarded
    dtype = np.int32 if elem == "i32" else np.float32
    x = np.random.default_rng(3).integers(-99, 99, 700).astype(dtype)
    y = np.random.default_rng(4).integers(1, 99, 700).astype(dtype)
    out = np.full(768, 5, dtype=dtype)
    expected, got = diffcheck.run_both(module, "k", (3, 1, 1), [x, y, out, np.int32(700), np.int32(600)],
                                       "sm_120")
    assert diffcheck.compare(expected, got) is None
    assert np.all(got.arrays[2][600:] == 5) and not np.all(got.arrays[2][:600] == 5)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (nvidia-cuda-nvcc)")
def test_tile_tested_stores_registers():
    """Without the tile tests ptxas merges the four stores' address arithmetic and
    predicates into one block: 16 registers on sm_100, 12 with them (corpus
    cvt_float_formats, which also stores a sum of the conversions: 26 -> 18, NVIDIA's
    tileiras 20)."""
    ptx = diffcheck.compile_ptx(parse_module(conversions(FORMATS), "k.mlir"), "sm_100")
    assert invoke_ptxas(ptx, "sm_100", verbose=True).stats["k"].registers <= 13


#: bitcast_bits' shape: tile bx of x (extent %n) to tile bx of o (extent %m) as the exponent
#: of x plus x with its exponent replaced by 127, in bits
EXPONENT_BITS = """cuda_tile.module @kernels {
  entry @k(%x: tile<ptr<f32>>, %n0: tile<i32>, %o: tile<ptr<i32>>, %m0: tile<i32>) {
    %tok = make_token : token
    %n = assume bounded<0, ?>, %n0 : tile<i32>
    %m = assume bounded<0, ?>, %m0 : tile<i32>
    %xv = make_tensor_view %x, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %ov = make_tensor_view %o, shape = [%m], strides = [1] : tile<i32> -> tensor_view<?xi32, strides=[1]>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %xp = make_partition_view %xv : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>
    %op = make_partition_view %ov : partition_view<tile=(128), tensor_view<?xi32, strides=[1]>>
    %a, %at = load_view_tko weak %xp[%bx] token = %tok : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<128xf32>, token
    %i = bitcast %a : tile<128xf32> -> tile<128xi32>
    %c23 = constant <i32: 23> : tile<128xi32>
    %c255 = constant <i32: 255> : tile<128xi32>
    %cm = constant <i32: -2139095041> : tile<128xi32>
    %c1 = constant <i32: 1065353216> : tile<128xi32>
    %e = shri %i, %c23 unsigned : tile<128xi32>
    %e8 = andi %e, %c255 : tile<128xi32>
    %k = andi %i, %cm : tile<128xi32>
    %k1 = ori %k, %c1 : tile<128xi32>
    %r = addi %e8, %k1 : tile<128xi32>
    %st = store_view_tko weak %r, %op[%bx] token = %tok : tile<128xi32>, partition_view<tile=(128), tensor_view<?xi32, strides=[1]>>, tile<i32> -> token
    return
  }
}
"""


def test_chains_of_few_instructions_store_under_their_tile_test():
    """A short chain without slow paths (emit_memory.guard_whole_store): the store is
    branched around on its tile test, a tile count (``shr.u64`` by 7) for x and one for o.
    9 registers on sm_90 as NVIDIA's tileiras, 10 without the test."""
    module = parse_module(EXPONENT_BITS, "k.mlir")
    ptx = diffcheck.compile_ptx(module, "sm_90")
    assert len(re.findall(r"shr\.u64\s+%rd\d+, %rd\d+, 7;", ptx)) == 2
    assert invoke_ptxas(ptx, "sm_90", verbose=True).stats["k"].registers <= 9
    x = np.random.default_rng(3).standard_normal(200).astype(np.float32)
    o = np.full(256, 2, dtype=np.int32)
    expected, got = diffcheck.run_both(module, "k", (2, 1, 1), [x, np.int32(200), o, np.int32(150)], "sm_90")
    assert diffcheck.compare(expected, got) is None
    bits = x.view(np.uint32)
    want = ((bits >> 23) & 255) + ((bits & 0x807FFFFF) | 0x3F800000)
    assert np.array_equal(got.arrays[1][:150].view(np.uint32), want[:150])
    assert np.all(got.arrays[1][150:] == 2)


#: A scatter of 2 * x[tile] through pointers o + block start + iota.
SCATTER = """cuda_tile.module @kernels {
  entry @k(%x: tile<ptr<f32>>, %n: tile<i32>, %o: tile<ptr<f32>>) {
    %tok = make_token : token
    %xv = make_tensor_view %x, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %xp = make_partition_view %xv : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>
    %a, %at = load_view_tko weak %xp[%bx] token = %tok : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<128xf32>, token
    %two = constant <f32: 2.0> : tile<128xf32>
    %v = mulf %a, %two : tile<128xf32>
    %i = iota : tile<128xi32>
    %c = constant <i32: 128> : tile<i32>
    %s = muli %bx, %c : tile<i32>
    %s1 = reshape %s : tile<i32> -> tile<1xi32>
    %sb = broadcast %s1 : tile<1xi32> -> tile<128xi32>
    %idx = addi %i, %sb : tile<128xi32>
    %o1 = reshape %o : tile<ptr<f32>> -> tile<1xptr<f32>>
    %ob = broadcast %o1 : tile<1xptr<f32>> -> tile<128xptr<f32>>
    %p = offset %ob, %idx : tile<128xptr<f32>>, tile<128xi32> -> tile<128xptr<f32>>
    %st = store_ptr_tko weak %p, %v token = %tok : tile<128xptr<f32>>, tile<128xf32> -> token
    return
  }
}
"""


def test_scatter_addresses_follow_the_load_of_the_values():
    """The pointers (operand 0) are emitted after the values (operand 1), which wait for
    x's load: the address arithmetic lands in the block after the load's branch, next to
    the store, and is not live across the load (gather_scatter sm_80: 18 -> 16 registers)."""
    llvm = compile_module(parse_module(SCATTER, "k.mlir"), CompileOptions(gpu_name="sm_90"), "llvm")
    body = llvm[llvm.index("{"):]
    block_of, block = {}, None
    for line in body.splitlines():
        if re.match(r"^[\w.\"]+:$", line):
            block = line[:-1]
        elif re.match(r'\s*(%"[^"]+") = getelementptr i8, ptr addrspace\(1\) %"arg2"', line):
            block_of["address"] = block
        elif "st.global" in line:
            block_of["store"] = block
    assert block_of["address"] == block_of["store"] != "body"


def atomic_kernel(ops: int) -> str:
    """Loads a 32x32 f32 tile of x and adds it atomically into ``ops`` tiles of o: (0,0),
    (0,1), (1,0), (1,1), ..."""
    v = "tensor_view<?x?xf32, strides=[?,1]>"
    p = f"partition_view<tile=(32x32), {v}>"
    lines = ["%tok = make_token : token",
             f"%xv = make_tensor_view %x, shape = [%m, %n], strides = [%n, 1] : tile<i32> -> {v}",
             f"%ov = make_tensor_view %o, shape = [%m, %n], strides = [%n, 1] : tile<i32> -> {v}",
             "%bx, %by, %bz = get_tile_block_id : tile<i32>",
             "%c0 = constant <i32: 0> : tile<i32>",
             "%c1 = constant <i32: 1> : tile<i32>",
             f"%xp = make_partition_view %xv : {p}",
             f"%op = make_partition_view %ov : {p}",
             f"%a, %at = load_view_tko weak %xp[%bx, %c0] token = %tok : {p}, tile<i32> -> tile<32x32xf32>, token"]
    for k in range(ops):
        i, j = ("%c1" if k & 2 else "%c0"), ("%c1" if k & 1 else "%c0")
        lines.append(f"%r{k} = atomic_red_view_tko relaxed device %op[{i}, {j}], addf, %a token = %tok : "
                     f"tile<32x32xf32>, {p}, tile<i32> -> token")
    lines.append("return")
    return ("cuda_tile.module @kernels {\n"
            "  entry @k(%x: tile<ptr<f32>>, %o: tile<ptr<f32>>, %m: tile<i32>, %n: tile<i32>) {\n"
            + "".join(f"    {line}\n" for line in lines) + "  }\n}\n")


def test_atomic_reductions_into_several_tiles_compute():
    module = parse_module(atomic_kernel(4), "k.mlir")
    rng = np.random.default_rng(3)
    x = rng.integers(-8, 8, (64, 70)).astype(np.float32)
    o = np.zeros((64, 70), dtype=np.float32)
    args = [x, o, np.int32(64), np.int32(70)]
    expected, got = diffcheck.run_both(module, "k", (2, 1, 1), args, "sm_90")
    assert diffcheck.compare(expected, got) is None


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (nvidia-cuda-nvcc)")
def test_atomic_reductions_share_the_thread_offsets():
    """Each atomic reduction's addresses are its tile origin plus per-thread offsets that
    all of them share (emit_memory.Access from_tile_origin): 28 registers on sm_80, 40 with
    every address computed whole."""
    ptx = diffcheck.compile_ptx(parse_module(atomic_kernel(4), "k.mlir"), "sm_80")
    assert invoke_ptxas(ptx, "sm_80", verbose=True).stats["k"].registers <= 32
