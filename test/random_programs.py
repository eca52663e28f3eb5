"""Random Tile IR programs (as text), for differential testing of the compiler.

``generate(seed)`` writes one entry kernel: two input tiles loaded from partition views
(partial tiles at the array edges), a random chain of element-wise ops, reductions
broadcast back, transposes, constants and selects, and one store.  The text is parsed
with our parser, so every program is also a parser/verifier exercise.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

VIEW = "tensor_view<?x?xf32, strides=[?,1]>"


@dataclass
class Program:
    rows: int
    cols: int
    lines: list[str] = field(default_factory=list)
    counter: int = 0
    #: only combiners whose result does not depend on the order (max/min): results bit-exact
    exact: bool = False

    @property
    def tile(self) -> str:
        return f"tile<{self.rows}x{self.cols}xf32>"

    def fresh(self) -> str:
        self.counter += 1
        return f"%v{self.counter}"

    def emit(self, text: str) -> None:
        self.lines.append("  " + text)


def _binary(p: Program, rng: random.Random, x: str, y: str) -> str:
    op = rng.choice(["addf", "subf", "mulf", "maxf", "minf"])
    out = p.fresh()
    p.emit(f"{out} = {op} {x}, {y} : {p.tile}")
    return out


def _unary(p: Program, rng: random.Random, x: str) -> str:
    op = rng.choice(["negf", "absf", "floor", "ceil"])
    out = p.fresh()
    p.emit(f"{out} = {op} {x} : {p.tile}")
    return out


def _select(p: Program, rng: random.Random, x: str, y: str) -> str:
    pred = rng.choice(["less_than", "greater_than", "less_than_or_equal", "not_equal"])
    c, out = p.fresh(), p.fresh()
    p.emit(f"{c} = cmpf {pred} ordered {x}, {y} : {p.tile} -> tile<{p.rows}x{p.cols}xi1>")
    p.emit(f"{out} = select {c}, {x}, {y} : tile<{p.rows}x{p.cols}xi1>, {p.tile}")
    return out


FLOAT_REDUCTIONS = (("addf", "0.000000e+00"), ("maxf", "-3.000000e+38"), ("minf", "3.000000e+38"))
ORDERLESS = FLOAT_REDUCTIONS[1:]
INT_REDUCTIONS = (("addi", "0"), ("xori", "0"), ("maxi signed", "-2147483648"))


def _combiner(p: Program, op: str, elem: str = "f32") -> None:
    """The region of a reduce or scan: ``(%lhs, %rhs) { yield op(%lhs, %rhs) }``."""
    name, *flag = op.split()
    y = p.fresh()
    p.emit(f"(%lhs: tile<{elem}>, %rhs: tile<{elem}>) {{")
    p.emit(f"  {y} = {name} %lhs, %rhs{' ' + flag[0] if flag else ''} : tile<{elem}>")
    p.emit(f"  yield {y} : tile<{elem}>")
    p.emit("}")


def _reduce_back(p: Program, rng: random.Random, x: str, elem: str = "f32",
                 kinds: tuple = FLOAT_REDUCTIONS) -> str:
    """Reduce along a dim, then broadcast the result back to the tile's shape."""
    tile = p.tile.replace("f32", elem)
    dim = rng.randrange(2)
    kind, identity = rng.choice(kinds)
    kept = p.cols if dim == 0 else p.rows
    r, s, b = p.fresh(), p.fresh(), p.fresh()
    p.emit(f"{r} = reduce {x} dim={dim} identities=[{identity} : {elem}] : {tile} -> tile<{kept}x{elem}>")
    _combiner(p, kind, elem)
    small = f"tile<1x{kept}x{elem}>" if dim == 0 else f"tile<{kept}x1x{elem}>"
    p.emit(f"{s} = reshape {r} : tile<{kept}x{elem}> -> {small}")
    p.emit(f"{b} = broadcast {s} : {small} -> {tile}")
    return b


def _transpose(p: Program, rng: random.Random, x: str) -> str:
    out = p.fresh()
    p.emit(f"{out} = permute {x} [1, 0] : {p.tile} -> {p.tile}")
    return out


def _constant(p: Program, rng: random.Random) -> str:
    c, s, b = p.fresh(), p.fresh(), p.fresh()
    value = rng.choice(["1.500000e+00", "-2.000000e+00", "2.500000e-01"])
    p.emit(f"{c} = constant <f32: {value}> : tile<f32>")
    p.emit(f"{s} = reshape {c} : tile<f32> -> tile<1x1xf32>")
    p.emit(f"{b} = broadcast {s} : tile<1x1xf32> -> {p.tile}")
    return b


def _scan(p: Program, rng: random.Random, x: str) -> str:
    dim = rng.randrange(2)
    reverse = rng.choice(["true", "false"])
    kind, identity = rng.choice(ORDERLESS[:1] if p.exact else [("addf", "0.000000e+00"), ("maxf", "-3.000000e+38")])
    out = p.fresh()
    p.emit(f"{out} = scan {x} dim={dim} reverse={reverse} identities=[{identity} : f32] : {p.tile} -> {p.tile}")
    _combiner(p, kind)
    return out


def _round_trip_f16(p: Program, rng: random.Random, x: str) -> str:
    half, out = p.fresh(), p.fresh()
    narrow = rng.choice(["f16", "bf16"])
    p.emit(f"{half} = ftof {x} : {p.tile} -> tile<{p.rows}x{p.cols}x{narrow}>")
    p.emit(f"{out} = ftof {half} : tile<{p.rows}x{p.cols}x{narrow}> -> {p.tile}")
    return out


def _loop(p: Program, rng: random.Random, x: str, y: str) -> str:
    """A counted loop carrying a tile: acc = op(acc, y), trips 0..3 (0: no iteration)."""
    trips = rng.randrange(4)
    lo, hi, one, res, nxt = p.fresh(), p.fresh(), p.fresh(), p.fresh(), p.fresh()
    op = rng.choice(["addf", "maxf", "subf"])
    p.emit(f"{lo} = constant <i32: 0> : tile<i32>")
    p.emit(f"{hi} = constant <i32: {trips}> : tile<i32>")
    p.emit(f"{one} = constant <i32: 1> : tile<i32>")
    p.emit(f"{res} = for %i in ({lo} to {hi}, step {one}) : tile<i32> iter_values(%acc = {x}) -> ({p.tile}) {{")
    p.emit(f"  {nxt} = {op} %acc, {y} : {p.tile}")
    p.emit(f"  continue {nxt} : {p.tile}")
    p.emit("}")
    return res


def _load_inputs(p: Program, view: str, tile: str) -> list[str]:
    """Views of the three arguments %a, %b, %c and this block's tiles of %a and %b."""
    part = f"partition_view<tile=({p.rows}x{p.cols}), {view}>"
    p.emit("%tok = make_token : token")
    for name in "abc":
        p.emit(f"%t{name} = make_tensor_view %{name}, shape = [%n, %n], strides = [%n, 1] : tile<i32> -> {view}")
        p.emit(f"%p{name} = make_partition_view %t{name} : {part}")
    p.emit("%bx, %by, %bz = get_tile_block_id : tile<i32>")
    for name in "ab":
        p.emit(f"%x{name}, %tk{name} = load_view_tko weak %p{name}[%bx, %by] token = %tok : "
               f"{part}, tile<i32> -> {tile}, token")
    return ["%xa", "%xb"]


def _store_result(p: Program, out: str, element: str, view: str, tile: str) -> str:
    """Store ``out`` to %c and return the whole entry's text."""
    p.emit(f"%done = store_view_tko weak {out}, %pc[%bx, %by] token = %tok : {tile}, "
           f"partition_view<tile=({p.rows}x{p.cols}), {view}>, tile<i32> -> token")
    p.emit("return")
    header = (f"entry @k(%a: tile<ptr<{element}>>, %b: tile<ptr<{element}>>, %c: tile<ptr<{element}>>, "
              "%n: tile<i32>) {")
    return header + "\n" + "\n".join(p.lines) + "\n}\n"


def generate(seed: int) -> str:
    rng = random.Random(seed)
    rows, cols = rng.choice([(8, 32), (16, 16), (32, 8), (4, 64), (64, 64), (32, 32)])
    p = Program(rows, cols)
    values = _load_inputs(p, VIEW, p.tile)
    for _ in range(rng.randint(3, 12)):
        kind = rng.random()
        x, y = rng.choice(values), rng.choice(values)
        if kind < 0.35:
            values.append(_binary(p, rng, x, y))
        elif kind < 0.5:
            values.append(_unary(p, rng, x))
        elif kind < 0.65:
            values.append(_select(p, rng, x, y))
        elif kind < 0.85:
            values.append(_reduce_back(p, rng, x))
        elif kind < 0.89 and rows == cols:
            values.append(_transpose(p, rng, x))
        elif kind < 0.92:
            values.append(_scan(p, rng, x))
        elif kind < 0.95:
            values.append(_round_trip_f16(p, rng, x))
        elif kind < 0.98:
            values.append(_loop(p, rng, x, y))
        else:
            values.append(_binary(p, rng, x, _constant(p, rng)))
    return _store_result(p, values[-1], "f32", VIEW, p.tile)


INT_VIEW = "tensor_view<?x?xi32, strides=[?,1]>"


def _int_binary(p: Program, rng: random.Random, x: str, y: str) -> str:
    tile = p.tile.replace("f32", "i32")
    out = p.fresh()
    op = rng.choice(["addi", "subi", "muli", "maxi signed", "mini unsigned", "andi", "ori", "xori",
                     "divi signed", "divi unsigned", "remi signed", "shri signed", "shri unsigned", "shli"])
    name, *flag = op.split()
    if name in ("divi", "remi"):  # a divisor that is never zero: y | 1
        one, s, b, d = p.fresh(), p.fresh(), p.fresh(), p.fresh()
        p.emit(f"{one} = constant <i32: 1> : tile<i32>")
        p.emit(f"{s} = reshape {one} : tile<i32> -> tile<1x1xi32>")
        p.emit(f"{b} = broadcast {s} : tile<1x1xi32> -> {tile}")
        p.emit(f"{d} = ori {y}, {b} : {tile}")
        y = d
    if name in ("shli", "shri"):  # shift amounts 0..40 (past the width too)
        m, s, b, amt = p.fresh(), p.fresh(), p.fresh(), p.fresh()
        p.emit(f"{m} = constant <i32: 40> : tile<i32>")
        p.emit(f"{s} = reshape {m} : tile<i32> -> tile<1x1xi32>")
        p.emit(f"{b} = broadcast {s} : tile<1x1xi32> -> {tile}")
        p.emit(f"{amt} = remi {y}, {b} unsigned : {tile}")
        y = amt
    if name == "divi" and rng.random() < 0.5 and flag[0] == "signed":
        flag = [f"signed rounding<{rng.choice(['positive_inf', 'negative_inf'])}>"]
    suffix = f" {flag[0]}" if flag else ""
    p.emit(f"{out} = {name} {x}, {y}{suffix} : {tile}")
    return out


def generate_int(seed: int) -> str:
    """Like ``generate``, on i32 tiles with signed/unsigned ops: results must match exactly."""
    rng = random.Random(seed)
    rows, cols = rng.choice([(8, 32), (16, 16), (32, 8), (4, 64), (32, 32)])
    p = Program(rows, cols)
    tile = f"tile<{rows}x{cols}xi32>"
    values = _load_inputs(p, INT_VIEW, tile)
    for _ in range(rng.randint(3, 12)):
        x, y = rng.choice(values), rng.choice(values)
        values.append(_reduce_back(p, rng, x, "i32", INT_REDUCTIONS) if rng.random() < 0.2
                      else _int_binary(p, rng, x, y))
    return _store_result(p, values[-1], "i32", INT_VIEW, tile)


# --------------------------------------------------------------------------- mixed programs
#
# ``generate_mixed`` adds what the chains above lack: branches (on the block id and on a value
# reduced to a scalar), loops with a branch inside, cat/extract, reshapes that change the
# layout, iota, float <-> int conversions through narrower integers, fma, division and math
# functions.  Values stay f32 tiles of one shape, clamped where a conversion or exp needs it.

def _splat(p: Program, value: str, elem: str = "f32") -> str:
    c, s, b = p.fresh(), p.fresh(), p.fresh()
    p.emit(f"{c} = constant <{elem}: {value}> : tile<{elem}>")
    p.emit(f"{s} = reshape {c} : tile<{elem}> -> tile<1x1x{elem}>")
    p.emit(f"{b} = broadcast {s} : tile<1x1x{elem}> -> tile<{p.rows}x{p.cols}x{elem}>")
    return b


def _clamp(p: Program, x: str, bound: str) -> str:
    hi, lo = _splat(p, bound), _splat(p, "-" + bound)
    a, out = p.fresh(), p.fresh()
    p.emit(f"{a} = minf {x}, {hi} : {p.tile}")
    p.emit(f"{out} = maxf {a}, {lo} : {p.tile}")
    return out


def _scalar_of(p: Program, rng: random.Random, x: str) -> str:
    """The maximum (or sum) of the whole tile, a tile<f32> every thread sees."""
    kind, identity = rng.choice(ORDERLESS if p.exact else [("maxf", "-3.000000e+38"), ("addf", "0.000000e+00")])
    r, s = p.fresh(), p.fresh()
    p.emit(f"{r} = reduce {x} dim=0 identities=[{identity} : f32] : {p.tile} -> tile<{p.cols}xf32>")
    _combiner(p, kind)
    p.emit(f"{s} = reduce {r} dim=0 identities=[{identity} : f32] : tile<{p.cols}xf32> -> tile<f32>")
    _combiner(p, kind)
    return s


def _condition(p: Program, rng: random.Random, x: str) -> str:
    """A tile<i1> uniform over the block: from the block id, or from a reduced value."""
    c, cond = p.fresh(), p.fresh()
    if rng.random() < 0.5:
        which = rng.choice(["%bx", "%by"])
        pred = rng.choice(["less_than", "equal", "greater_than_or_equal", "not_equal"])
        p.emit(f"{c} = constant <i32: {rng.randrange(4)}> : tile<i32>")
        p.emit(f"{cond} = cmpi {pred} {which}, {c}, signed : tile<i32> -> tile<i1>")
    else:
        s = _scalar_of(p, rng, x)
        p.emit(f"{c} = constant <f32: {rng.choice(['0.000000e+00', '1.000000e+00', '-1.000000e+00'])}> : tile<f32>")
        p.emit(f"{cond} = cmpf greater_than ordered {s}, {c} : tile<f32> -> tile<i1>")
    return cond


def _branch(p: Program, rng: random.Random, x: str, y: str) -> str:
    cond, out = _condition(p, rng, x), p.fresh()
    p.emit(f"{out} = if {cond} -> ({p.tile}) {{")
    then = _binary(p, rng, x, y)
    p.emit(f"  yield {then} : {p.tile}")
    if rng.random() < 0.3:
        p.emit("} else {")
        p.emit(f"  yield {y} : {p.tile}")
    else:
        p.emit("} else {")
        other = _unary(p, rng, y)
        p.emit(f"  yield {other} : {p.tile}")
    p.emit("}")
    return out


def _loop_with_branch(p: Program, rng: random.Random, x: str, y: str) -> str:
    """acc carried through 0..4 trips; odd trips take one op, even ones another."""
    trips = rng.randrange(5)
    lo, hi, one, two, zero, res = (p.fresh() for _ in range(6))
    p.emit(f"{lo} = constant <i32: 0> : tile<i32>")
    p.emit(f"{hi} = constant <i32: {trips}> : tile<i32>")
    p.emit(f"{one} = constant <i32: 1> : tile<i32>")
    p.emit(f"{two} = constant <i32: 2> : tile<i32>")
    p.emit(f"{zero} = constant <i32: 0> : tile<i32>")
    p.emit(f"{res} = for %i in ({lo} to {hi}, step {one}) : tile<i32> iter_values(%acc = {x}) -> ({p.tile}) {{")
    rem, odd, nxt = p.fresh(), p.fresh(), p.fresh()
    p.emit(f"  {rem} = remi %i, {two} signed : tile<i32>")
    p.emit(f"  {odd} = cmpi not_equal {rem}, {zero}, signed : tile<i32> -> tile<i1>")
    p.emit(f"  {nxt} = if {odd} -> ({p.tile}) {{")
    a = _binary(p, rng, "%acc", y)
    p.emit(f"    yield {a} : {p.tile}")
    p.emit("  } else {")
    b = _clamp(p, _binary(p, rng, "%acc", x), "1.000000e+03")
    p.emit(f"    yield {b} : {p.tile}")
    p.emit("  }")
    p.emit(f"  continue {nxt} : {p.tile}")
    p.emit("}")
    return res


def _cat_extract(p: Program, rng: random.Random, x: str, y: str) -> str:
    dim = rng.randrange(2)
    both = f"tile<{p.rows * 2}x{p.cols}xf32>" if dim == 0 else f"tile<{p.rows}x{p.cols * 2}xf32>"
    half = rng.randrange(2)
    c, i0, i1, out = p.fresh(), p.fresh(), p.fresh(), p.fresh()
    p.emit(f"{c} = cat {x}, {y} dim = {dim} : {p.tile}, {p.tile} -> {both}")
    p.emit(f"{i0} = constant <i32: {half if dim == 0 else 0}> : tile<i32>")
    p.emit(f"{i1} = constant <i32: {half if dim == 1 else 0}> : tile<i32>")
    p.emit(f"{out} = extract {c}[{i0}, {i1}] : {both} -> {p.tile}")
    return out


def _relayout(p: Program, rng: random.Random, x: str) -> str:
    """Reshape to another 2-d shape or to 1-d and back: the elements move between threads."""
    n = p.rows * p.cols
    shapes = [f"{n}"] + [f"{r}x{n // r}" for r in (2, 4, 8, 16) if n % r == 0 and r != p.rows]
    mid = f"tile<{rng.choice(shapes)}xf32>"
    a, out = p.fresh(), p.fresh()
    p.emit(f"{a} = reshape {x} : {p.tile} -> {mid}")
    p.emit(f"{out} = reshape {a} : {mid} -> {p.tile}")
    return out


def _iota_add(p: Program, rng: random.Random, x: str) -> str:
    """x + (column or row index) * 0.25, from iota."""
    along = rng.randrange(2)
    n = p.cols if along else p.rows
    io, f, s, b, q, out = (p.fresh() for _ in range(6))
    small = f"tile<1x{n}xf32>" if along else f"tile<{n}x1xf32>"
    p.emit(f"{io} = iota : tile<{n}xi32>")
    p.emit(f"{f} = itof {io} signed : tile<{n}xi32> -> tile<{n}xf32>")
    p.emit(f"{s} = reshape {f} : tile<{n}xf32> -> {small}")
    p.emit(f"{b} = broadcast {s} : {small} -> {p.tile}")
    p.emit(f"{q} = mulf {b}, {_splat(p, '2.500000e-01')} : {p.tile}")
    p.emit(f"{out} = addf {x}, {q} : {p.tile}")
    return out


def _through_ints(p: Program, rng: random.Random, x: str) -> str:
    """f32 -> i32 (truncating) -> a narrower integer and back, sign- or zero-extended -> f32."""
    narrow = rng.choice(["i8", "i16", "i64"])
    signed = rng.choice(["signed", "unsigned"])
    shape = f"{p.rows}x{p.cols}"
    c = _clamp(p, x, "1.000000e+02")
    i, n, w, out = p.fresh(), p.fresh(), p.fresh(), p.fresh()
    p.emit(f"{i} = ftoi {c} signed : {p.tile} -> tile<{shape}xi32>")
    if narrow == "i64":
        p.emit(f"{n} = exti {i} signed : tile<{shape}xi32> -> tile<{shape}xi64>")
        p.emit(f"{w} = trunci {n} : tile<{shape}xi64> -> tile<{shape}xi32>")
    else:
        p.emit(f"{n} = trunci {i} : tile<{shape}xi32> -> tile<{shape}x{narrow}>")
        p.emit(f"{w} = exti {n} {signed} : tile<{shape}x{narrow}> -> tile<{shape}xi32>")
    p.emit(f"{out} = itof {w} signed : tile<{shape}xi32> -> {p.tile}")
    return out


def _math(p: Program, rng: random.Random, x: str, y: str) -> str:
    kind = rng.choice(["fma", "divf", "sqrt", "exp", "tanh"])
    out = p.fresh()
    if kind == "fma":
        p.emit(f"{out} = fma {x}, {y}, {x} : {p.tile}")
    elif kind == "divf":  # a divisor kept away from zero: |y| + 0.5
        a, d = p.fresh(), p.fresh()
        p.emit(f"{a} = absf {y} : {p.tile}")
        p.emit(f"{d} = addf {a}, {_splat(p, '5.000000e-01')} : {p.tile}")
        p.emit(f"{out} = divf {x}, {d} : {p.tile}")
    elif kind == "sqrt":
        a = p.fresh()
        p.emit(f"{a} = absf {x} : {p.tile}")
        p.emit(f"{out} = sqrt {a} : {p.tile}")
    else:
        p.emit(f"{out} = {kind} {_clamp(p, x, '2.000000e+01')} : {p.tile}")
    return out


def generate_mixed(seed: int, elem: str = "f32", exact: bool = False) -> str:
    """Like ``generate``, with control flow, cat/extract, relayouts, iota, int round trips and
    math, on ``elem`` (f16, bf16, f32, f64) tiles.  ``exact``: only max/min reductions and
    scans, so the compiled result must equal the interpreter's bit for bit (every other op
    rounds once, whatever the order of evaluation)."""
    rng = random.Random(seed)
    rows, cols = rng.choice([(8, 32), (16, 16), (32, 8), (4, 64), (32, 32), (16, 64)])
    p = Program(rows, cols, exact=exact)
    values = _load_inputs(p, VIEW, p.tile)
    steps = [(0.12, lambda x, y: _binary(p, rng, x, y)), (0.22, lambda x, y: _branch(p, rng, x, y)),
             (0.32, lambda x, y: _loop_with_branch(p, rng, x, y)), (0.42, lambda x, y: _cat_extract(p, rng, x, y)),
             (0.52, lambda x, y: _relayout(p, rng, x)), (0.60, lambda x, y: _iota_add(p, rng, x)),
             (0.70, lambda x, y: _through_ints(p, rng, x)), (0.82, lambda x, y: _math(p, rng, x, y)),
             (0.90, lambda x, y: _reduce_back(p, rng, x, kinds=ORDERLESS if exact else FLOAT_REDUCTIONS)),
             (1.00, lambda x, y: _scan(p, rng, x))]
    for _ in range(rng.randint(3, 10)):
        x, y = rng.choice(values), rng.choice(values)
        r = rng.random()
        values.append(next(step for bound, step in steps if r < bound)(x, y))
    out = values[-1]
    for other in values[-3:-1]:  # keep more of the program live
        out = _binary(p, rng, out, other)
    text = _store_result(p, out, "f32", VIEW, p.tile).replace("f32", elem)
    return text.replace("3.000000e+38", "6.550400e+04") if elem == "f16" else text


# --------------------------------------------------------------------------- view programs
#
# ``generate_views`` stresses the memory side: each operand is read through its own view
# (partition or strided, row- or column-major tensor, dim_map, padding value) and the result
# written through another, so the index math, masks and padding of every combination are
# compared with the interpreter.

PADDINGS = (None, "zero", "neg_zero", "nan", "pos_inf", "neg_inf")


def _view_type(rng: random.Random, rows: int, cols: int, column_major: bool, load: bool) -> str:
    tensor = "tensor_view<?x?xf32, strides=[1,?]>" if column_major else VIEW
    dim_map = rng.choice(["", ", dim_map=[1, 0]"])
    padding = rng.choice(PADDINGS) if load else None
    pad = f", padding_value = {padding}" if padding else ""
    if load and rng.random() < 0.4:
        strides = [rng.choice([max(1, n // 2), n, n + 3]) for n in (rows, cols)]
        return (f"strided_view<tile=({rows}x{cols}), traversal_strides=[{strides[0]},{strides[1]}]{pad}, "
                f"{tensor}{dim_map}>")
    return f"partition_view<tile=({rows}x{cols}){pad}, {tensor}{dim_map}>"


def generate_views(seed: int) -> str:
    rng = random.Random(seed)
    rows, cols = rng.choice([(8, 32), (16, 16), (32, 8), (4, 64), (32, 32), (16, 64)])
    p = Program(rows, cols)
    p.emit("%tok = make_token : token")
    p.emit("%bx, %by, %bz = get_tile_block_id : tile<i32>")
    views = {}
    for name in "abc":
        column_major = rng.random() < 0.4
        strides = "[1, %n]" if column_major else "[%n, 1]"
        tensor = "tensor_view<?x?xf32, strides=[1,?]>" if column_major else VIEW
        views[name] = _view_type(rng, rows, cols, column_major, load=name != "c")
        kind = views[name].split("<", 1)[0]
        p.emit(f"%t{name} = make_tensor_view %{name}, shape = [%n, %n], strides = {strides} : tile<i32> -> {tensor}")
        p.emit(f"%p{name} = make_{kind} %t{name} : {views[name]}")
    loaded = []
    for name in "ab":
        first, second = rng.choice([("%bx", "%by"), ("%by", "%bx"), ("%bx", "%bx")])
        p.emit(f"%x{name}, %tk{name} = load_view_tko weak %p{name}[{first}, {second}] token = %tok : "
               f"{views[name]}, tile<i32> -> {p.tile}, token")
        loaded.append(f"%x{name}")
    out = _binary(p, rng, *loaded)
    if rows == cols and rng.random() < 0.3:
        out = _transpose(p, rng, out)
    p.emit(f"%done = store_view_tko weak {out}, %pc[%bx, %by] token = %tok : {p.tile}, {views['c']}, "
           "tile<i32> -> token")
    p.emit("return")
    header = "entry @k(%a: tile<ptr<f32>>, %b: tile<ptr<f32>>, %c: tile<ptr<f32>>, %n: tile<i32>) {"
    return header + "\n" + "\n".join(p.lines) + "\n}\n"
