"""Flash-attention loops for the K/V pipeliner (lower/attention_pipeline.py, codegen/emit_attention.py).

``flash_attention`` writes O[b, bx] = softmax(Q K^T * scale) V for one query block as
cuTile exports TileGym-style kernels: rank-3 (batch, rows, head dim) tensors, 16-byte
aligned; K read transposed through a ``dim_map = [0, 2, 1]`` partition view; a ``for``
over the KV blocks whose body multiplies Q @ K^T, runs the online softmax (running max
and sum carried) and multiplies P @ V into the carried O."""
from __future__ import annotations


def flash_attention(d: int = 64, bm: int = 64, bn: int = 64, trips: int | None = None, causal: bool = False,
                    hints: str = "", views_in_loop: bool = False) -> str:
    """``trips``: a constant trip count, or None for the number of KV blocks of K (a
    dynamic count; with ``causal`` bounded by the query block, ``min(blocks, bx + 1)``
    for ``bm == bn``, and scores above the diagonal masked).  ``hints``: the entry's
    ``optimization_hints`` body.  ``views_in_loop``: K's and V's partition views are
    made in the loop body, as bytecode 13.1 exports them."""
    tv = "tensor_view<?x?x?xf16, strides=[?,?,1]>"

    def view(name: str) -> tuple[list[str], str]:
        args = [f"%{name}", f"%{name}_d0", f"%{name}_d1", f"%{name}_d2", f"%{name}_s0", f"%{name}_s1"]
        lines = [f"{a}_al = assume div_by<16>, {a} : tile<{'ptr<f16>' if a == args[0] else 'i32'}>" for a in args]
        lines.append(f"%{name}_v = make_tensor_view %{name}_al, shape = [%{name}_d0_al, %{name}_d1_al, %{name}_d2_al],"
                     f" strides = [%{name}_s0_al, %{name}_s1_al, 1] : tile<i32> -> {tv}")
        sig = ", ".join(f"{a}: tile<{'ptr<f16>' if a == args[0] else 'i32'}>" for a in args)
        return lines, sig

    q_pv = f"partition_view<tile=(1x{bm}x{d}), {tv}>"
    k_pv = f"partition_view<tile=(1x{d}x{bn}), {tv}, dim_map=[0, 2, 1]>"
    v_pv = f"partition_view<tile=(1x{bn}x{d}), {tv}>"
    o_pv = q_pv
    s_t, row_t, o_t = f"tile<{bm}x{bn}xf32>", f"tile<{bm}x1xf32>", f"tile<{bm}x{d}xf32>"
    lines, sigs = [], []
    for name in "qkvo":
        part, sig = view(name)
        lines += part
        sigs.append(sig)
    lines += [
        "%tok = make_token : token",
        "%c0 = constant <i32: 0> : tile<i32>",
        "%c1 = constant <i32: 1> : tile<i32>",
        "%bx, %by, %bz = get_tile_block_id : tile<i32>",
        f"%q_p = make_partition_view %q_v : {q_pv}",
        *([] if views_in_loop else [f"%k_p = make_partition_view %k_v : {k_pv}"]),
        f"%v_p = make_partition_view %v_v : {v_pv}",
        f"%o_p = make_partition_view %o_v : {o_pv}",
        f"%q3, %qt = load_view_tko weak %q_p[%by, %bx, %c0] token = %tok : {q_pv}, tile<i32> -> "
        f"tile<1x{bm}x{d}xf16>, token",
        f"%qm = reshape %q3 : tile<1x{bm}x{d}xf16> -> tile<{bm}x{d}xf16>",
        f"%scale = constant <f32: 0.18033688> : {s_t}",
        f"%ninf = constant <f32: -3.000000e+38> : {s_t}",
        f"%m0 = constant <f32: -3.000000e+38> : {row_t}",
        f"%l0 = constant <f32: 0.000000e+00> : {row_t}",
        f"%o0 = constant <f32: 0.000000e+00> : {o_t}",
        f"%s0 = constant <f32: 0.000000e+00> : {s_t}",
    ]
    if trips is not None:
        lines.append(f"%ub = constant <i32: {trips}> : tile<i32>")
    else:
        lines.append(f"%kshape:3 = get_index_space_shape %v_p : {v_pv} -> tile<i32>")
        if causal:
            lines += ["%bx1 = addi %bx, %c1 : tile<i32>", "%ub = mini %kshape#1, %bx1 signed : tile<i32>"]
    ub = "%kshape#1" if trips is None and not causal else "%ub"
    if causal:
        lines += [f"%rows = iota : tile<{bm}xi32>",
                  f"%rows2 = reshape %rows : tile<{bm}xi32> -> tile<{bm}x1xi32>",
                  f"%bmc = constant <i32: {bm}> : tile<i32>",
                  "%qrow0 = muli %bx, %bmc : tile<i32>",
                  "%qrow0r = reshape %qrow0 : tile<i32> -> tile<1x1xi32>",
                  f"%qrow0b = broadcast %qrow0r : tile<1x1xi32> -> tile<{bm}x1xi32>",
                  f"%qrows = addi %qrow0b, %rows2 : tile<{bm}x1xi32>",
                  f"%qrowsb = broadcast %qrows : tile<{bm}x1xi32> -> tile<{bm}x{bn}xi32>",
                  f"%cols = iota : tile<{bn}xi32>",
                  f"%cols2 = reshape %cols : tile<{bn}xi32> -> tile<1x{bn}xi32>",
                  f"%bnc = constant <i32: {bn}> : tile<i32>"]
    body = [
        *([f"%k_p = make_partition_view %k_v : {k_pv}"] if views_in_loop else []),
        f"%k3, %kt = load_view_tko weak %k_p[%by, %c0, %i] token = %tok : {k_pv}, tile<i32> -> "
        f"tile<1x{d}x{bn}xf16>, token",
        f"%kT = reshape %k3 : tile<1x{d}x{bn}xf16> -> tile<{d}x{bn}xf16>",
        f"%s = mmaf %qm, %kT, %s0 : tile<{bm}x{d}xf16>, tile<{d}x{bn}xf16>, {s_t}",
        f"%ss = mulf %s, %scale : {s_t}",
    ]
    if causal:
        body += ["%krow0 = muli %i, %bnc : tile<i32>",
                 "%krow0r = reshape %krow0 : tile<i32> -> tile<1x1xi32>",
                 f"%krow0b = broadcast %krow0r : tile<1x1xi32> -> tile<1x{bn}xi32>",
                 f"%kcols = addi %krow0b, %cols2 : tile<1x{bn}xi32>",
                 f"%kcolsb = broadcast %kcols : tile<1x{bn}xi32> -> tile<{bm}x{bn}xi32>",
                 f"%keep = cmpi greater_than_or_equal %qrowsb, %kcolsb, signed : tile<{bm}x{bn}xi32> -> "
                 f"tile<{bm}x{bn}xi1>",
                 f"%sm = select %keep, %ss, %ninf : tile<{bm}x{bn}xi1>, {s_t}"]
    scores = "%sm" if causal else "%ss"
    body += [
        f"%rmax = reduce {scores} dim=1 identities=[0xFF800000 : f32] : {s_t} -> tile<{bm}xf32>",
        "(%a: tile<f32>, %b: tile<f32>) {",
        "  %mx = maxf %a, %b : tile<f32>",
        "  yield %mx : tile<f32>",
        "}",
        f"%rmax2 = reshape %rmax : tile<{bm}xf32> -> {row_t}",
        f"%mnew = maxf %m, %rmax2 : {row_t}",
        f"%mb = broadcast %mnew : {row_t} -> {s_t}",
        f"%sub = subf {scores}, %mb : {s_t}",
        f"%p = exp2 %sub : {s_t}",
        f"%dm = subf %m, %mnew : {row_t}",
        f"%alpha = exp2 %dm : {row_t}",
        f"%rsum = reduce %p dim=1 identities=[0.000000e+00 : f32] : {s_t} -> tile<{bm}xf32>",
        "(%a: tile<f32>, %b: tile<f32>) {",
        "  %sum = addf %a, %b : tile<f32>",
        "  yield %sum : tile<f32>",
        "}",
        f"%rsum2 = reshape %rsum : tile<{bm}xf32> -> {row_t}",
        f"%lnew = fma %l, %alpha, %rsum2 : {row_t}",
        *([f"%v_pl = make_partition_view %v_v : {v_pv}"] if views_in_loop else []),
        f"%v3, %vt = load_view_tko weak {'%v_pl' if views_in_loop else '%v_p'}[%by, %i, %c0] token = %tok : {v_pv}, tile<i32> -> "
        f"tile<1x{bn}x{d}xf16>, token",
        f"%vv = reshape %v3 : tile<1x{bn}x{d}xf16> -> tile<{bn}x{d}xf16>",
        f"%p16 = ftof %p : {s_t} -> tile<{bm}x{bn}xf16>",
        f"%ab = broadcast %alpha : {row_t} -> {o_t}",
        f"%oscaled = mulf %oa, %ab : {o_t}",
        f"%onew = mmaf %p16, %vv, %oscaled : tile<{bm}x{bn}xf16>, tile<{bn}x{d}xf16>, {o_t}",
        f"continue %onew, %lnew, %mnew : {o_t}, {row_t}, {row_t}",
    ]
    lines.append(f"%for:3 = for %i in (%c0 to {ub}, step %c1) : tile<i32> iter_values(%oa = %o0, %l = %l0, %m = %m0)"
                 f" -> ({o_t}, {row_t}, {row_t}) {{")
    lines += [f"  {x}" for x in body]
    lines += ["}",
              f"%lb = broadcast %for#1 : {row_t} -> {o_t}",
              f"%out = divf %for#0, %lb : {o_t}",
              f"%out3 = reshape %out : {o_t} -> tile<1x{bm}x{d}xf32>",
              f"%out16 = ftof %out3 : tile<1x{bm}x{d}xf32> -> tile<1x{bm}x{d}xf16>",
              f"%st = store_view_tko weak %out16, %o_p[%by, %bx, %c0] token = %tok : tile<1x{bm}x{d}xf16>, {o_pv}, "
              "tile<i32> -> token",
              "return"]
    opt = f" optimization_hints=<{hints}>" if hints else ""
    return ("cuda_tile.module @kernels {\n"
            f"  entry @fa({', '.join(sigs)}){opt} {{\n" + "".join(f"    {x}\n" for x in lines) + "  }\n}\n")
