"""SIMT streaming loops for the stream pipeliner (lower/stream_pipeline.py, codegen/emit_stream.py).

``row_loop`` writes, per row block ``bx``, reductions over the row's column tiles as cuTile
exports a looped softmax/layer-norm pass: a ``for`` over the column tiles whose body loads
an ``m x n`` tile of X at ``[bx, i]`` and folds it into loop-carried ``m x n`` accumulators
(a running sum of ``exp(x - 1)`` and a running maximum, or a plain sum); after the loop
each accumulator is reduced along its columns and stored.  The trip count is a constant or
the view's column tile count (so the last tile may be a zero-filled tail)."""
from __future__ import annotations

from .pipelined import view_2d


def row_loop(m: int, n: int, elem: str = "f32", trips: int | None = None, align: int = 16, hints: str = "",
             softmax: bool = True, write_back: bool = False, two: bool = False) -> str:
    """``elem``: X's element type (the accumulators are f32).  ``align``: the pointer,
    shapes and strides are assumed multiples of it (0: nothing assumed).  ``hints``: the
    entry's ``optimization_hints`` body.  ``softmax``: accumulate exp(x - 1) and the max,
    else the plain sum.  ``write_back``: the body also stores ``x + 1`` back into X's tile
    (the loop writes what it loads).  ``two``: the body also loads Y's tile and adds it."""
    x_lines, pv, x_args = view_2d("x", elem, (m, n), align)
    y_lines, _, y_args = view_2d("y", elem, (m, n), align) if two else ([], "", "")
    tx, tf = f"tile<{m}x{n}x{elem}>", f"tile<{m}x{n}xf32>"
    out_tv = "tensor_view<?xf32, strides=[1]>"
    out_pv = f"partition_view<tile=({m}), {out_tv}>"
    count = (f"%nt = constant <i32: {trips}> : tile<i32>" if trips is not None else
             f"%shape:2 = get_index_space_shape %x_p : {pv} -> tile<i32>")
    upper = "%nt" if trips is not None else "%shape#1"
    wide = [f"  %xf = ftof %lx : {tx} -> {tf}"] if elem != "f32" else []
    xf = "%xf" if elem != "f32" else "%lx"
    body = [f"  %lx, %t1 = load_view_tko weak %x_p[%bx, %i] token = %tok : {pv}, tile<i32> -> {tx}, token", *wide]
    if two:
        body += [f"  %ly, %t2 = load_view_tko weak %y_p[%bx, %i] token = %tok : {pv}, tile<i32> -> {tx}, token",
                 *([f"  %yf = ftof %ly : {tx} -> {tf}"] if elem != "f32" else []),
                 f"  %xs = addf {xf}, {'%yf' if elem != 'f32' else '%ly'} : {tf}"]
        xf = "%xs"
    if softmax:
        body += [f"  %d = subf {xf}, %one : {tf}", f"  %e = exp %d : {tf}",
                 f"  %s2 = addf %s, %e : {tf}", f"  %m2 = maxf %mx, {xf} : {tf}"]
    else:
        body += [f"  %s2 = addf %s, {xf} : {tf}", f"  %m2 = maxf %mx, {xf} : {tf}"]
    if write_back:
        body += [f"  %w = addf %lx, %onex : {tx}",
                 f"  %st0 = store_view_tko weak %w, %x_p[%bx, %i] token = %tok : {tx}, {pv}, tile<i32> -> token"]
    body += [f"  continue %s2, %m2 : {tf}, {tf}"]

    def reduce(src: str, dst: str, combine: str, identity: str) -> list[str]:
        return [f"%{dst} = reduce %{src} dim=1 identities=[{identity} : f32] : {tf} -> tile<{m}xf32>",
                "(%a: tile<f32>, %b: tile<f32>) {", f"  %c = {combine} %a, %b : tile<f32>", "  yield %c : tile<f32>",
                "}"]

    lines = x_lines + y_lines + [
        "%tok = make_token : token",
        "%c0 = constant <i32: 0> : tile<i32>",
        "%c1 = constant <i32: 1> : tile<i32>",
        f"%one = constant <f32: 1.0> : {tf}",
        f"%onex = constant <{elem}: 1.0> : {tx}",
        f"%z = constant <f32: 0.0> : {tf}",
        f"%lo = constant <f32: -3.0e+38> : {tf}",
        "%bx, %by, %bz = get_tile_block_id : tile<i32>",
        count,
        f"%for:2 = for %i in (%c0 to {upper}, step %c1) : tile<i32> iter_values(%s = %z, %mx = %lo) -> ({tf}, {tf}) {{",
        *body,
        "}",
        *reduce("for#0", "rs", "addf", "0.0"),
        *reduce("for#1", "rm", "maxf", "-3.0e+38"),
        f"%o_v = make_tensor_view %o, shape = [%o_d0], strides = [1] : tile<i32> -> {out_tv}",
        f"%o_p = make_partition_view %o_v : {out_pv}",
        f"%q_v = make_tensor_view %q, shape = [%o_d0], strides = [1] : tile<i32> -> {out_tv}",
        f"%q_p = make_partition_view %q_v : {out_pv}",
        f"%so = store_view_tko weak %rs, %o_p[%bx] token = %tok : tile<{m}xf32>, {out_pv}, tile<i32> -> token",
        f"%sq = store_view_tko weak %rm, %q_p[%bx] token = %tok : tile<{m}xf32>, {out_pv}, tile<i32> -> token",
        "return"]
    opt = f" optimization_hints=<{hints}>" if hints else ""
    args = ", ".join(a for a in (x_args, y_args, "%o: tile<ptr<f32>>, %q: tile<ptr<f32>>, %o_d0: tile<i32>") if a)
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k({args}){opt} {{\n" + "".join(f"    {x}\n" for x in lines) + "  }\n}\n")


def row_blocks(m: int, n: int, elem: str = "f32", hints: str = "", outer: int = 0, trips: int = 0,
               skip_one: bool = False, passes: int = 1, between: str = "") -> str:
    """A persistent loop over X's row blocks (TileGym's persistent norms' shape): CTA ``bx``
    takes blocks ``bx, bx + nbx, ...`` of ``m`` whole rows (``n`` columns), sums each
    block's rows (the tile feeds a reduction, so on sm_90 it is a TMA load) and stores the
    sums into O.  ``outer``: the loop runs inside another of that many trips (constant),
    which writes the same sums again each time (its trips re-enter the row loop).
    ``trips``: the loop runs blocks 0 .. trips-1 instead, a constant trip count, in every CTA.
    ``skip_one``: the trip of block 1 ends (``continue``) before it loads.  ``passes``: the
    loop is run that many times, one after another (the later ones store the same sums
    again); ``between``: lines placed between the passes."""
    x_lines, pv, x_args = view_2d("x", elem, (m, n), 16)
    tx, tf = f"tile<{m}x{n}x{elem}>", f"tile<{m}x{n}xf32>"
    out_tv = "tensor_view<?xf32, strides=[1]>"
    out_pv = f"partition_view<tile=({m}), {out_tv}>"
    wide = [f"%xf = ftof %t : {tx} -> {tf}"] if elem != "f32" else []
    body = [
        ("for %i in (%c0 to %ntrips, step %c1) : tile<i32> {" if trips else
         "for %i in (%bx to %shape#0, step %nbx) : tile<i32> {"),
        *(["  %one_i = cmpi equal %i, %c1, signed : tile<i32> -> tile<i1>",
           "  if %one_i {", "    continue", "  } else {", "  }"] if skip_one else []),
        f"  %t, %t1 = load_view_tko weak %x_p[%i, %c0] token = %tok : {pv}, tile<i32> -> {tx}, token",
        *("  " + w for w in wide),
        f"  %r = reduce {'%xf' if wide else '%t'} dim=1 identities=[0.0 : f32] : {tf} -> tile<{m}xf32>",
        "  (%a: tile<f32>, %b: tile<f32>) {", "    %c = addf %a, %b : tile<f32>", "    yield %c : tile<f32>", "  }",
        f"  %so = store_view_tko weak %r, %o_p[%i] token = %tok : tile<{m}xf32>, {out_pv}, tile<i32> -> token",
        "  continue",
        "}"]
    if passes > 1:
        body = body + [line for _ in range(passes - 1) for line in (*between.splitlines(), *body)]
    if outer:
        body = ["for %rep in (%c0 to %reps, step %c1) : tile<i32> {", *("  " + b for b in body), "  continue", "}"]
    lines = x_lines + [
        "%tok = make_token : token",
        "%c0 = constant <i32: 0> : tile<i32>",
        "%c1 = constant <i32: 1> : tile<i32>",
        f"%reps = constant <i32: {outer or 1}> : tile<i32>",
        f"%ntrips = constant <i32: {trips or 1}> : tile<i32>",
        "%bx, %by, %bz = get_tile_block_id : tile<i32>",
        "%nbx, %nby, %nbz = get_num_tile_blocks : tile<i32>",
        f"%shape:2 = get_index_space_shape %x_p : {pv} -> tile<i32>",
        "%o_al = assume div_by<16>, %o : tile<ptr<f32>>",
        "%o_n = assume div_by<16>, %o_d0 : tile<i32>",
        f"%o_v = make_tensor_view %o_al, shape = [%o_n], strides = [1] : tile<i32> -> {out_tv}",
        f"%o_p = make_partition_view %o_v : {out_pv}",
        *body,
        "return"]
    opt = f" optimization_hints=<{hints}>" if hints else ""
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k({x_args}, %o: tile<ptr<f32>>, %o_d0: tile<i32>){opt} {{\n" + "".join(f"    {x}\n" for x in lines) + "  }\n}\n")
