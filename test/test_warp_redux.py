"""32-bit integer reductions over a whole warp are one redux.sync (sm_80+), as in NVIDIA's
PTX; other reductions keep the butterfly of shuffles.  Both oracles must agree either way."""
from __future__ import annotations

import re

import pytest

from tileiras import diffcheck
from tileiras.text.parser import parse_module


def reduce_kernel(body: str, element: str = "i32", signedness: str = "", identity: str = "0") -> str:
    """One entry: tile ``bx`` (256 elements, two per thread) of x is reduced with ``body``
    (an op on %a, %b) and the result stored at index ``bx`` of o."""
    tt = f"tile<256x{element}>"
    tv = f"tensor_view<?x{element}, strides=[1]>"
    pv = f"partition_view<tile=(256), {tv}>"
    ov = f"partition_view<tile=(1), {tv}>"
    st = f"tile<{element}>"
    lines = ["%tok = make_token : token",
             f"%xv = make_tensor_view %x, shape = [%n], strides = [1] : tile<i32> -> {tv}",
             f"%ov = make_tensor_view %o, shape = [%m], strides = [1] : tile<i32> -> {tv}",
             "%bx, %by, %bz = get_tile_block_id : tile<i32>",
             f"%xp = make_partition_view %xv : {pv}",
             f"%op = make_partition_view %ov : {ov}",
             f"%t, %t1 = load_view_tko weak %xp[%bx] token = %tok : {pv}, tile<i32> -> {tt}, token",
             f"%r = reduce %t dim=0 identities=[{identity} : {element}] : {tt} -> {st}",
             f"(%a: {st}, %b: {st}) {{",
             f"  %c = {body} %a, %b{signedness} : {st}",
             f"  yield %c : {st}",
             "}",
             f"%r1 = reshape %r : {st} -> tile<1x{element}>",
             f"%t2 = store_view_tko weak %r1, %op[%bx] token = %tok : tile<1x{element}>, {ov}, tile<i32> -> token",
             "return"]
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k(%x: tile<ptr<{element}>>, %n: tile<i32>, %o: tile<ptr<{element}>>, %m: tile<i32>) {{\n"
            + "".join(f"    {line}\n" for line in lines) + "  }\n}\n")


@pytest.mark.parametrize("body, signedness, identity, flavour", [
    ("addi", "", "0", "add.s32"), ("maxi", " signed", "-2147483648", "max.s32"),
    ("mini", " unsigned", "-1", "min.u32"), ("xori", "", "0", "xor.b32"), ("andi", "", "-1", "and.b32"),
    ("ori", "", "0", "or.b32"),
])
def test_i32_warp_reduction_is_one_redux(body, signedness, identity, flavour):
    module = parse_module(reduce_kernel(body, signedness=signedness, identity=identity), "k.mlir")
    ptx = diffcheck.compile_ptx(module, "sm_90")
    assert re.findall(r"redux\.sync\.(\S+)", ptx) == [flavour]
    # no shuffles within a warp; the 4 warps' partials are folded by lanes 0-3 (two steps)
    assert re.findall(r"shfl\.sync\.(\w+)\.b32\s+%r\d+, %r\d+, (\d+)", ptx) == [("bfly", "1"), ("bfly", "2")]
    reports = diffcheck.check_module(module, "sm_90", grid=(3, 1, 1), extent=700)
    assert [r.problem for r in reports] == [None]


@pytest.mark.parametrize("element, body, gpu", [("i32", "addi", "sm_80"), ("i64", "addi", "sm_90"),
                                                ("f32", "addf", "sm_90")])
def test_other_reductions_shuffle(element, body, gpu):
    """redux.sync has no 64-bit or (before sm_100a) float forms; sm_80 has it for i32."""
    module = parse_module(reduce_kernel(body, element), "k.mlir")
    ptx = diffcheck.compile_ptx(module, gpu)
    assert ("redux.sync" in ptx) == (element == "i32")
    # five shuffle steps within each warp, then two to fold the 4 warps' partials
    assert len(re.findall(r"shfl\.sync\.bfly", ptx)) == (2 if element == "i32" else 5 + 2) * (2 if element == "i64" else 1)
    assert [r.problem for r in diffcheck.check_module(module, gpu, grid=(3, 1, 1), extent=700)] == [None]


def test_shared_addresses_are_32_bit():
    """The warps' partial results meet in shared memory, addressed with 32-bit registers as
    in NVIDIA's PTX (64-bit shared addresses cost cat_extract four registers on sm_80)."""
    module = parse_module(reduce_kernel("addi"), "k.mlir")
    ptx = diffcheck.compile_ptx(module, "sm_80")
    addresses = re.findall(r"(?:ld|st)\.shared\S*\s+(?:\S+,\s*)?\[([^\]+]+)", ptx)
    assert addresses and all(a.startswith("%r") for a in addresses), addresses
    assert not re.search(r"mov\.b64\s+%rd\d+, global_smem", ptx)
    assert [r.problem for r in diffcheck.check_module(module, "sm_80", grid=(3, 1, 1), extent=700)] == [None]
