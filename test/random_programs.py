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


def _splat(p: Program, value, elem: str = "f32", shape: tuple = ()) -> str:
    """``value`` broadcast to a tile of ``shape`` (default: the program's rows x cols):
    constant, reshape to all-ones dims, broadcast."""
    shape = shape or (p.rows, p.cols)
    ones, full = "x".join("1" for _ in shape), "x".join(str(d) for d in shape)
    c, s, b = p.fresh(), p.fresh(), p.fresh()
    p.emit(f"{c} = constant <{elem}: {value}> : tile<{elem}>")
    p.emit(f"{s} = reshape {c} : tile<{elem}> -> tile<{ones}x{elem}>")
    p.emit(f"{b} = broadcast {s} : tile<{ones}x{elem}> -> tile<{full}x{elem}>")
    return b


def _constant(p: Program, rng: random.Random) -> str:
    return _splat(p, rng.choice(["1.500000e+00", "-2.000000e+00", "2.500000e-01"]))


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
INT_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}


def _int_binary(p: Program, rng: random.Random, x: str, y: str, elem: str = "i32") -> str:
    tile = p.tile.replace("f32", elem)
    out = p.fresh()
    op = rng.choice(["addi", "subi", "muli", "maxi signed", "mini unsigned", "andi", "ori", "xori",
                     "divi signed", "divi unsigned", "remi signed", "shri signed", "shri unsigned", "shli",
                     "select"])
    name, *flag = op.split()
    if name == "select":  # x where x <s y or x >u y, else y
        pred, sign = rng.choice([("less_than", "signed"), ("greater_than", "unsigned")])
        c = p.fresh()
        p.emit(f"{c} = cmpi {pred} {x}, {y}, {sign} : {tile} -> tile<{p.rows}x{p.cols}xi1>")
        p.emit(f"{out} = select {c}, {x}, {y} : tile<{p.rows}x{p.cols}xi1>, {tile}")
        return out
    if name in ("divi", "remi"):  # a divisor that is never zero: y | 1
        d = p.fresh()
        p.emit(f"{d} = ori {y}, {_splat(p, 1, elem)} : {tile}")
        y = d
    if name in ("shli", "shri"):  # shift amounts 0..width+7 (past the width too)
        amt = p.fresh()
        p.emit(f"{amt} = remi {y}, {_splat(p, INT_BITS[elem] + 8, elem)} unsigned : {tile}")
        y = amt
    if name == "divi" and rng.random() < 0.5 and flag[0] == "signed":
        flag = [f"signed rounding<{rng.choice(['positive_inf', 'negative_inf'])}>"]
    suffix = f" {flag[0]}" if flag else ""
    p.emit(f"{out} = {name} {x}, {y}{suffix} : {tile}")
    return out


def generate_int(seed: int, elem: str = "i32") -> str:
    """Like ``generate``, on ``elem`` (i8..i64) tiles with signed/unsigned ops: results must
    match exactly."""
    rng = random.Random(seed)
    rows, cols = rng.choice([(8, 32), (16, 16), (32, 8), (4, 64), (32, 32)])
    p = Program(rows, cols)
    tile = f"tile<{rows}x{cols}x{elem}>"
    view = INT_VIEW.replace("i32", elem)
    reductions = (("addi", "0"), ("xori", "0"), ("maxi signed", str(-2 ** (INT_BITS[elem] - 1))))
    values = _load_inputs(p, view, tile)
    for _ in range(rng.randint(3, 12)):
        x, y = rng.choice(values), rng.choice(values)
        values.append(_reduce_back(p, rng, x, elem, reductions) if rng.random() < 0.2
                      else _int_binary(p, rng, x, y, elem))
    return _store_result(p, values[-1], elem, view, tile)


# --------------------------------------------------------------------------- mixed programs
#
# ``generate_mixed`` adds what the chains above lack: branches (on the block id and on a value
# reduced to a scalar), loops with a branch inside, cat/extract, reshapes that change the
# layout, iota, float <-> int conversions through narrower integers, fma, division and math
# functions.  Values stay f32 tiles of one shape, clamped where a conversion or exp needs it.

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


def _while_loop(p: Program, rng: random.Random, x: str, y: str) -> str:
    """``loop`` carrying a counter and a tile: leaves after ``trips`` rounds, or early (break)
    when the tile's maximum passes a threshold; every third round skips the update (continue)."""
    t = p.tile
    lo, lim, one, three, zero, thr, res = (p.fresh() for _ in range(7))
    p.emit(f"{lo} = constant <i32: 0> : tile<i32>")
    p.emit(f"{lim} = constant <i32: {rng.randrange(6)}> : tile<i32>")
    p.emit(f"{one} = constant <i32: 1> : tile<i32>")
    p.emit(f"{three} = constant <i32: 3> : tile<i32>")
    p.emit(f"{zero} = constant <i32: 0> : tile<i32>")
    p.emit(f"{thr} = constant <f32: {rng.choice(['2.000000e+00', '8.000000e+00', '1.000000e+02'])}> : tile<f32>")
    p.emit(f"{res}:2 = loop iter_values(%k = {lo}, %w = {x}) : tile<i32>, {t} -> tile<i32>, {t} {{")
    go, k1, rem, skip, big = (p.fresh() for _ in range(5))
    p.emit(f"  {go} = cmpi less_than %k, {lim}, signed : tile<i32> -> tile<i1>")
    p.emit(f"  if {go} {{")
    p.emit("  } else {")
    p.emit(f"    break %k, %w : tile<i32>, {t}")
    p.emit("  }")
    p.emit(f"  {k1} = addi %k, {one} : tile<i32>")
    p.emit(f"  {rem} = remi {k1}, {three} signed : tile<i32>")
    p.emit(f"  {skip} = cmpi equal {rem}, {zero}, signed : tile<i32> -> tile<i1>")
    p.emit(f"  if {skip} {{")
    p.emit(f"    continue {k1}, %w : tile<i32>, {t}")
    p.emit("  } else {")
    p.emit("  }")
    w1 = _clamp(p, _binary(p, rng, "%w", y), "1.000000e+03")
    s = _scalar_of(p, rng, w1)
    p.emit(f"  {big} = cmpf greater_than ordered {s}, {thr} : tile<f32> -> tile<i1>")
    p.emit(f"  if {big} {{")
    p.emit(f"    break {k1}, {w1} : tile<i32>, {t}")
    p.emit("  } else {")
    p.emit("  }")
    p.emit(f"  continue {k1}, {w1} : tile<i32>, {t}")
    p.emit("}")
    return f"{res}#1"


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
             (0.95, lambda x, y: _scan(p, rng, x)), (1.00, lambda x, y: _while_loop(p, rng, x, y))]
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


# --------------------------------------------------------------------------- pointer programs
#
# ``generate_pointers`` reads and writes through tiles of pointers: a gather at a permuted
# index (masked, with a padding value), element-wise work, then a masked scatter to another
# permutation or atomic adds into a few bins.  The values added are integers, so the sums
# are exact in any order and the result does not depend on the atomics' interleaving.

def _pointer_tile(p: Program, arg: str, n: int, index: str, idx: str) -> str:
    r, b, out = p.fresh(), p.fresh(), p.fresh()
    p.emit(f"{r} = reshape {arg} : tile<ptr<f32>> -> tile<1xptr<f32>>")
    p.emit(f"{b} = broadcast {r} : tile<1xptr<f32>> -> tile<{n}xptr<f32>>")
    p.emit(f"{out} = offset {b}, {index} : tile<{n}xptr<f32>>, tile<{n}x{idx}> -> tile<{n}xptr<f32>>")
    return out


def _permute_index(p: Program, rng: random.Random, i: str, n: int) -> str:
    """A bijection of 0..len-1 (len = %n) where i < len: i, len-1-i, or (i*k + c) mod len with k
    prime to every extent the tests use (64, 77, 256, 300: k in 1, 13, 17), so that no two
    elements scatter to one address (the winner of such a race is unspecified)."""
    t = f"tile<{n}xi32>"
    kind = rng.choice(["same", "reverse", "affine"])
    if kind == "same":
        return i
    out = p.fresh()
    if kind == "reverse":
        last = p.fresh()
        p.emit(f"{last} = subi %nb, {_splat(p, 1, 'i32', (n,))} : {t}")
        p.emit(f"{out} = subi {last}, {i} : {t}")
        return out
    k, c = rng.choice([1, 13, 17]), rng.randrange(17)
    m, s = p.fresh(), p.fresh()
    p.emit(f"{m} = muli {i}, {_splat(p, k, 'i32', (n,))} : {t}")
    p.emit(f"{s} = addi {m}, {_splat(p, c, 'i32', (n,))} : {t}")
    p.emit(f"{out} = remi {s}, %nb unsigned : {t}")
    return out


def generate_pointers(seed: int) -> str:
    rng = random.Random(seed)
    n = rng.choice([32, 64, 128, 256, 512])
    p = Program(1, n)
    t, ti, tm = f"tile<{n}xf32>", f"tile<{n}xi32>", f"tile<{n}xi1>"
    p.emit("%tok = make_token : token")
    p.emit("%bx, %by, %bz = get_tile_block_id : tile<i32>")
    nr, base, io, i, inside = p.fresh(), p.fresh(), p.fresh(), p.fresh(), p.fresh()
    p.emit(f"{nr} = reshape %n : tile<i32> -> tile<1xi32>")
    p.emit(f"%nb = broadcast {nr} : tile<1xi32> -> {ti}")
    bb, bxb = p.fresh(), p.fresh()
    p.emit(f"{bb} = reshape %bx : tile<i32> -> tile<1xi32>")
    p.emit(f"{bxb} = broadcast {bb} : tile<1xi32> -> {ti}")
    p.emit(f"{base} = muli {bxb}, {_splat(p, n, 'i32', (n,))} : {ti}")
    p.emit(f"{io} = iota : {ti}")
    p.emit(f"{i} = addi {base}, {io} : {ti}")
    p.emit(f"{inside} = cmpi less_than {i}, %nb, unsigned : {ti} -> {tm}")
    pad = _splat(p, rng.choice(["0.000000e+00", "-1.000000e+00", "0x7FC00000"]), "f32", (n,))
    src = _permute_index(p, rng, i, n)
    idx = "i32"
    if rng.random() < 0.4:  # 64-bit offsets
        wide = p.fresh()
        p.emit(f"{wide} = exti {src} unsigned : {ti} -> tile<{n}xi64>")
        src, idx = wide, "i64"
    pa = _pointer_tile(p, "%a", n, src, idx)
    pb = _pointer_tile(p, "%b", n, i, "i32")
    xa, ka, xb, kb = p.fresh(), p.fresh(), p.fresh(), p.fresh()
    p.emit(f"{xa}, {ka} = load_ptr_tko weak {pa}, {inside}, {pad} token = %tok : "
           f"tile<{n}xptr<f32>>, {tm}, {t} -> {t}, token")
    p.emit(f"{xb}, {kb} = load_ptr_tko weak {pb}, {inside} token = %tok : tile<{n}xptr<f32>>, {tm} -> {t}, token")
    val = p.fresh()
    op = rng.choice(["addf", "subf", "mulf", "maxf"])
    p.emit(f"{val} = {op} {xa}, {xb} : {t}")
    fl = p.fresh()
    p.emit(f"{fl} = floor {val} : {t}")
    if rng.random() < 0.5:
        dst = _permute_index(p, rng, i, n)
        pc = _pointer_tile(p, "%c", n, dst, "i32")
        p.emit(f"%done = store_ptr_tko weak {pc}, {fl}, {inside} token = %tok : tile<{n}xptr<f32>>, {t}, {tm} -> token")
    else:  # atomic adds into 16 bins
        bins, old, tk = p.fresh(), p.fresh(), p.fresh()
        p.emit(f"{bins} = remi {i}, {_splat(p, 16, 'i32', (n,))} unsigned : {ti}")
        pc = _pointer_tile(p, "%c", n, bins, "i32")
        order = rng.choice(["relaxed", "acq_rel"])
        p.emit(f"{old}, {tk} = atomic_rmw_tko {order} device {pc}, addf, {fl}, {inside} token = %tok : "
               f"tile<{n}xptr<f32>>, {t}, {tm} -> {t}, token")
    p.emit("return")
    header = "entry @k(%a: tile<ptr<f32>>, %b: tile<ptr<f32>>, %c: tile<ptr<f32>>, %n: tile<i32>) {"
    return header + "\n" + "\n".join(p.lines) + "\n}\n"


# --------------------------------------------------------------------------- shape programs
#
# ``generate_shapes`` moves one loaded tile through 3-d reshapes, permutations, reductions
# over any axis (kept as a size-1 axis and broadcast back) and 3-d cat/extract before it is
# reshaped back and stored: the layout conversions between all these shapes are what is
# compared.

def _t3(shape: tuple, elem: str = "f32") -> str:
    return "tile<" + "x".join(str(d) for d in shape) + f"x{elem}>"


def generate_shapes(seed: int) -> str:
    rng = random.Random(seed)
    rows, cols = rng.choice([(16, 16), (32, 32), (8, 64), (64, 8), (16, 64)])
    p = Program(rows, cols)
    values = _load_inputs(p, VIEW, p.tile)
    n = rows * cols
    a = rng.choice([2, 4, 8])
    b = rng.choice([d for d in (2, 4, 8, 16) if n % (a * d) == 0 and n // (a * d) >= 2])
    shape = (a, b, n // (a * b))
    cur = p.fresh()
    p.emit(f"{cur} = reshape {rng.choice(values)} : {p.tile} -> {_t3(shape)}")
    other = p.fresh()
    p.emit(f"{other} = reshape {values[1]} : {p.tile} -> {_t3(shape)}")
    for _ in range(rng.randint(2, 6)):
        kind = rng.random()
        out = p.fresh()
        if kind < 0.35:
            perm = rng.choice([(0, 2, 1), (1, 0, 2), (2, 1, 0), (1, 2, 0), (2, 0, 1)])
            new = tuple(shape[i] for i in perm)
            p.emit(f"{out} = permute {cur} [{', '.join(map(str, perm))}] : {_t3(shape)} -> {_t3(new)}")
            o2 = p.fresh()
            p.emit(f"{o2} = permute {other} [{', '.join(map(str, perm))}] : {_t3(shape)} -> {_t3(new)}")
            shape, cur, other = new, out, o2
        elif kind < 0.6:
            axis = rng.randrange(3)
            kept = tuple(d for i, d in enumerate(shape) if i != axis)
            one = tuple(1 if i == axis else d for i, d in enumerate(shape))
            op, identity = rng.choice(ORDERLESS)
            r, s = p.fresh(), p.fresh()
            p.emit(f"{r} = reduce {cur} dim={axis} identities=[{identity} : f32] : {_t3(shape)} -> {_t3(kept)}")
            _combiner(p, op)
            p.emit(f"{s} = reshape {r} : {_t3(kept)} -> {_t3(one)}")
            b2 = p.fresh()
            p.emit(f"{b2} = broadcast {s} : {_t3(one)} -> {_t3(shape)}")
            p.emit(f"{out} = subf {other}, {b2} : {_t3(shape)}")
            cur = out
        elif kind < 0.8:
            axis = rng.randrange(3)
            both = tuple(d * 2 if i == axis else d for i, d in enumerate(shape))
            half = rng.randrange(2)
            c = p.fresh()
            p.emit(f"{c} = cat {cur}, {other} dim = {axis} : {_t3(shape)}, {_t3(shape)} -> {_t3(both)}")
            idx = []
            for i in range(3):
                k = p.fresh()
                p.emit(f"{k} = constant <i32: {half if i == axis else 0}> : tile<i32>")
                idx.append(k)
            p.emit(f"{out} = extract {c}[{', '.join(idx)}] : {_t3(both)} -> {_t3(shape)}")
            cur = out
        else:
            op = rng.choice(["addf", "mulf", "maxf", "subf"])
            p.emit(f"{out} = {op} {cur}, {other} : {_t3(shape)}")
            cur, other = out, cur
    back = p.fresh()
    p.emit(f"{back} = reshape {cur} : {_t3(shape)} -> {p.tile}")
    return _store_result(p, back, "f32", VIEW, p.tile)
