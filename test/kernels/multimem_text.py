"""Multimem kernels, written as Tile IR text (cuTile has no multimem API).

``multimem_kernel`` writes one entry ``@mm(%arg0: multicast pointer, %arg1: plain pointer)``
whose tile block ``bx`` either load-reduces tile ``bx`` of the multicast view and stores it
to the plain view (``op="ld"``), or loads tile ``bx`` of the plain view and stores/reduces it
into the multicast view (``"st"``, ``"red"``).  The keyword arguments pick everything NVIDIA's
verifier and code generator look at.  Not in ``ALL_CASES``: these are not cuTile kernels.
"""
from __future__ import annotations

from typing import Optional, Sequence


def _dims(values: Sequence[int], sep: str) -> str:
    return sep.join(str(v) for v in values)


def multimem_kernel(op: str = "ld", element: str = "f32", ordering: str = "relaxed", scope: str = "sys",
                    reduction: str = "add", shape: Sequence[int] = (1024,), strides: Optional[Sequence[int]] = None,
                    tile: Sequence[int] = (128,), view: str = "partition", ptr_attr: Optional[str] = "multicast",
                    dim_map: Optional[Sequence[int]] = None) -> str:
    if strides is None:  # row-major
        strides = [1]
        for d in reversed(shape[1:]):
            strides.insert(0, strides[0] * d)
    attr = f", #cuda_tile.ptr_attr<{ptr_attr}>" if ptr_attr else ""
    mptr = f"ptr<{element}, <{ptr_attr}>>" if ptr_attr else f"ptr<{element}>"
    dims = _dims(shape, "x")
    mtv = f"tensor_view<{dims}x{element}, strides=[{_dims(strides, ',')}]{attr}>"
    ptv = f"tensor_view<{dims}x{element}, strides=[{_dims(strides, ',')}]>"
    t = _dims(tile, "x")
    mapped = f", dim_map=[{_dims(dim_map, ', ')}]" if dim_map else ""  # both views
    if view == "partition":
        mpv = f"partition_view<tile=({t}), {mtv}{mapped}>"
        make = f"make_partition_view %mtv : {mpv}"
    else:
        mpv = f"strided_view<tile=({t}), traversal_strides=[{_dims(tile, ',')}], {mtv}>"
        make = f"make_strided_view %mtv : {mpv}"
    ppv = f"partition_view<tile=({t}), {ptv}{mapped}>"
    tt = f"tile<{t}x{element}>"
    index = ", ".join(["%bx"] + ["%zero"] * (len(tile) - 1))
    sem = f"{ordering} {scope}".strip()
    kind = f" attributes {{reduction = #cuda_tile.multimem_reduction_kind<{reduction}>}}" if reduction != "add" else ""
    if op == "ld":
        body = [f"%r, %t1 = multimem_load_reduce_view_tko {sem} %mpv[{index}] token = %tok{kind} : {mpv}, tile<i32>, "
                f"token -> {tt}, token",
                f"%t2 = store_view_tko weak %r, %ppv[{index}] token = %tok : {tt}, {ppv}, tile<i32> -> token"]
    else:
        name, kind = ("multimem_store_view_tko", "") if op == "st" else ("multimem_reduce_view_tko", kind)
        body = [f"%r, %t1 = load_view_tko weak %ppv[{index}] token = %tok : {ppv}, tile<i32> -> {tt}, token",
                f"%t2 = {name} {sem} %mpv, %r[{index}] token = %tok{kind} : {mpv}, {tt}, tile<i32>, token -> token"]
    lines = ["%tok = make_token : token",
             "%zero = constant <i32: 0> : tile<i32>",
             "%bx, %by, %bz = get_tile_block_id : tile<i32>",
             f"%mtv = make_tensor_view %arg0, shape = [{_dims(shape, ', ')}], strides = [{_dims(strides, ', ')}] : {mtv}",
             f"%ptv = make_tensor_view %arg1, shape = [{_dims(shape, ', ')}], strides = [{_dims(strides, ', ')}] : {ptv}",
             f"%mpv = {make}",
             f"%ppv = make_partition_view %ptv : {ppv}",
             *body, "return"]
    return ("cuda_tile.module @kernels {\n"
            f"  entry @mm(%arg0: tile<{mptr}>, %arg1: tile<ptr<{element}>>) {{\n"
            + "".join(f"    {line}\n" for line in lines) + "  }\n}\n")


#: Kernels whose PTX is pinned (test_golden_ptx) and run by both oracles (test_multimem):
#: every op, the four float types and both integer widths, f16 pairs along a row-major and a
#: column-major unit-stride dim and through a dim_map, edge tiles, duplicated elements,
#: acquire/release fences; 16-bit stores and reductions of loaded tiles take 256 threads.
GOLDEN_MULTIMEM = {
    "multimem_ld_f32_acquire": dict(op="ld", element="f32", ordering="acquire", scope="device"),
    "multimem_ld_f16_add": dict(op="ld", element="f16"),
    "multimem_ld_bf16_max_2d": dict(op="ld", element="bf16", reduction="max", shape=(64, 64), tile=(16, 16)),
    "multimem_ld_i64_umin_edge": dict(op="ld", element="i64", reduction="umin", shape=(1000,)),
    "multimem_st_f16_colmajor": dict(op="st", element="f16", ordering="release", scope="tl_blk",
                                     shape=(64, 64), strides=(1, 64), tile=(16, 8)),
    "multimem_st_f64": dict(op="st", element="f64", ordering="weak", scope=""),
    "multimem_red_i32_xor": dict(op="red", element="i32", reduction="xor"),
    "multimem_red_bf16_release": dict(op="red", element="bf16", ordering="release", scope="sys", shape=(256, 8),
                                      tile=(32, 8)),
    "multimem_st_bf16_dim_map_3d": dict(op="st", element="bf16", shape=(8, 16, 32), tile=(2, 4, 8),
                                        dim_map=(2, 0, 1)),
}
