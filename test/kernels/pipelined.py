"""GEMM K loops for the software pipeliner (lower/software_pipeline.py, codegen/emit_async.py).

``gemm_loop`` writes C[bx, by] = sum over k of A[bx, k] @ B[k, by] as cuTile exports it: a
``for`` over the K tiles whose body loads an A tile and a B tile and multiplies them into
the loop-carried accumulator; the trip count is a constant or the views' K tile count."""
from __future__ import annotations


def view_2d(name: str, elem: str, tile: tuple[int, int], align: int, transposed: bool = False
            ) -> tuple[list[str], str, str]:
    """(the lines making ``%{name}_p``, a zero-padded partition view of a row-major 2-D
    tensor of ``elem`` in ``tile`` tiles; its type; the kernel arguments it takes), the
    pointer, shapes and stride assumed multiples of ``align`` (0: nothing assumed).
    ``transposed``: the view's dims are the tensor's swapped (``dim_map=[1, 0]``), so its
    ``tile`` (the loaded tile's shape) lies column by column in memory."""
    tv = f"tensor_view<?x?x{elem}, strides=[?,1]>"
    swap = ", dim_map=[1, 0]" if transposed else ""
    pv = f"partition_view<tile=({tile[0]}x{tile[1]}), padding_value = zero, {tv}{swap}>"
    raw = [f"%{name}", f"%{name}_d0", f"%{name}_d1", f"%{name}_s0"]
    lines = []
    if align:
        lines += [f"{v}_al = assume div_by<{align}>, {v} : tile<{'ptr<' + elem + '>' if v == raw[0] else 'i32'}>"
                  for v in raw]
        raw = [f"{v}_al" for v in raw]
    lines += [f"%{name}_v = make_tensor_view {raw[0]}, shape = [{raw[1]}, {raw[2]}], strides = [{raw[3]}, 1]"
              f" : tile<i32> -> {tv}",
              f"%{name}_p = make_partition_view %{name}_v : {pv}"]
    args = f"%{name}: tile<ptr<{elem}>>, %{name}_d0: tile<i32>, %{name}_d1: tile<i32>, %{name}_s0: tile<i32>"
    return lines, pv, args


def gemm_loop(m: int, n: int, k: int, ab: str = "f16", acc: str = "f32", trips: int | None = None,
              align: int = 16, hints: str = "", join: bool = False, nt: bool = False, bcol: bool = False,
              acol: bool = False) -> str:
    """``trips``: a constant trip count, or None for the dynamic one (A's K tiles, so K
    tails are zero-filled).  ``align``: the pointers, shapes and strides are assumed
    multiples of it (16: what cuTile states for ordinary tensors; 0: nothing assumed).  ``hints``: the entry's
    ``optimization_hints`` body (e.g. ``sm_80 = {num_stages = 3}``).  ``join``: the loop
    also carries a token joined with the loads' tokens (as cuTile's split-K GEMM does).
    ``nt``: B is stored N x K and each tile is transposed (``permute [1, 0]``) in the loop.
    ``bcol``: B is stored N x K and read through a view with its dims swapped (``dim_map``),
    as cuTile exports a transposed operand (fp8 GEMMs' K-major B): K x N tiles, K contiguous.
    ``acol``: A is stored K x M and read so (a backward pass's X^T): M x K tiles, M contiguous."""
    stored = "f32" if ab == "tf32" else ab       # tf32 operands are f32 tiles converted in the loop
    a_lines, a_pv, a_args = view_2d("a", stored, (m, k), align, transposed=acol)
    b_lines, b_pv, b_args = view_2d("b", stored, (n, k) if nt else (k, n), align, transposed=bcol)
    c_lines, c_pv, c_args = view_2d("c", acc, (m, n), align)
    tc = f"tile<{m}x{n}x{acc}>"
    ta, tb = f"tile<{m}x{k}x{ab}>", f"tile<{k}x{n}x{ab}>"
    count = (f"%nk = constant <i32: {trips}> : tile<i32>" if trips is not None else
             f"%shape:2 = get_index_space_shape %a_p : {a_pv} -> tile<i32>")
    upper = "%nk" if trips is not None else "%shape#1"
    lhs, rhs = ("%ca", "%cb") if ab == "tf32" else ("%ta", "%tb")
    multiply = (f"%r = mmai {lhs}, {rhs}, %acc signed signed : {ta}, {tb}, {tc}" if ab == "i8" else
                f"%r = mmaf {lhs}, {rhs}, %acc : {ta}, {tb}, {tc}")
    convert = ([f"  %ca = ftof %ta : tile<{m}x{k}xf32> -> {ta}", f"  %cb = ftof %tb : tile<{k}x{n}xf32> -> {tb}"]
               if ab == "tf32" else [])
    zero = f"%z = constant <{acc}: {0 if acc == 'i32' else 0.0}> : {tc}"
    body = a_lines + b_lines + c_lines + [
        "%tok = make_token : token",
        "%c0 = constant <i32: 0> : tile<i32>",
        "%c1 = constant <i32: 1> : tile<i32>",
        "%bx, %by, %bz = get_tile_block_id : tile<i32>",
        count, zero,
        (f"%for:2 = for %i in (%c0 to {upper}, step %c1) : tile<i32> iter_values(%acc = %z, %tk = %tok)"
         f" -> ({tc}, token) {{" if join else
         f"%for = for %i in (%c0 to {upper}, step %c1) : tile<i32> iter_values(%acc = %z) -> ({tc}) {{"),
        f"  %ta, %t1 = load_view_tko weak %a_p[%bx, %i] token = %tok : {a_pv}, tile<i32> -> "
        f"tile<{m}x{k}x{stored}>, token",
        *([f"  %tbt, %t2 = load_view_tko weak %b_p[%by, %i] token = %tok : {b_pv}, tile<i32> -> "
           f"tile<{n}x{k}x{ab}>, token",
           f"  %tb = permute %tbt [1, 0] : tile<{n}x{k}x{ab}> -> {tb}"] if nt else
          [f"  %tb, %t2 = load_view_tko weak %b_p[%i, %by] token = %tok : {b_pv}, tile<i32> -> "
           f"tile<{k}x{n}x{stored}>, token"]),
        *convert,
        f"  {multiply}",
        *([f"  %j = join_tokens %tk, %t1, %t2 : token", f"  continue %r, %j : {tc}, token"] if join else
          [f"  continue %r : {tc}"]),
        "}",
        (f"%st = store_view_tko weak %for{'#0' if join else ''}, %c_p[%bx, %by] token = %tok : "
         f"{tc}, {c_pv}, tile<i32> -> token"),
        "return"]
    opt = f" optimization_hints=<{hints}>" if hints else ""
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k({a_args}, {b_args}, {c_args}){opt} {{\n" + "".join(f"    {x}\n" for x in body) + "  }\n}\n")
