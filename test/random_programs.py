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


def _reduce_back(p: Program, rng: random.Random, x: str) -> str:
    """Reduce along a dim, then broadcast the result back to the tile's shape."""
    dim = rng.randrange(2)
    kind, identity = rng.choice([("addf", "0.000000e+00"), ("maxf", "-3.000000e+38"), ("minf", "3.000000e+38")])
    kept = p.cols if dim == 0 else p.rows
    r, s, b, y = p.fresh(), p.fresh(), p.fresh(), p.fresh()
    p.emit(f"{r} = reduce {x} dim={dim} identities=[{identity} : f32] : {p.tile} -> tile<{kept}xf32>")
    p.emit("(%lhs: tile<f32>, %rhs: tile<f32>) {")
    p.emit(f"  {y} = {kind} %lhs, %rhs : tile<f32>")
    p.emit(f"  yield {y} : tile<f32>")
    p.emit("}")
    small = f"tile<1x{kept}xf32>" if dim == 0 else f"tile<{kept}x1xf32>"
    p.emit(f"{s} = reshape {r} : tile<{kept}xf32> -> {small}")
    p.emit(f"{b} = broadcast {s} : {small} -> {p.tile}")
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
    kind, identity = rng.choice([("addf", "0.000000e+00"), ("maxf", "-3.000000e+38")])
    out, y = p.fresh(), p.fresh()
    p.emit(f"{out} = scan {x} dim={dim} reverse={reverse} identities=[{identity} : f32] : {p.tile} -> {p.tile}")
    p.emit("(%lhs: tile<f32>, %rhs: tile<f32>) {")
    p.emit(f"  {y} = {kind} %lhs, %rhs : tile<f32>")
    p.emit(f"  yield {y} : tile<f32>")
    p.emit("}")
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


def generate(seed: int) -> str:
    rng = random.Random(seed)
    rows, cols = rng.choice([(8, 32), (16, 16), (32, 8), (4, 64), (64, 64), (32, 32)])
    p = Program(rows, cols)
    header = ("entry @k(%a: tile<ptr<f32>>, %b: tile<ptr<f32>>, %c: tile<ptr<f32>>, %n: tile<i32>) {")
    p.emit("%tok = make_token : token")
    for name in "abc":
        p.emit(f"%t{name} = make_tensor_view %{name}, shape = [%n, %n], strides = [%n, 1] : tile<i32> -> {VIEW}")
        p.emit(f"%p{name} = make_partition_view %t{name} : partition_view<tile=({rows}x{cols}), {VIEW}>")
    p.emit("%bx, %by, %bz = get_tile_block_id : tile<i32>")
    values = []
    for name in "ab":
        p.emit(f"%x{name}, %tk{name} = load_view_tko weak %p{name}[%bx, %by] token = %tok : "
               f"partition_view<tile=({rows}x{cols}), {VIEW}>, tile<i32> -> {p.tile}, token")
        values.append(f"%x{name}")
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
    out = values[-1]
    p.emit(f"%done = store_view_tko weak {out}, %pc[%bx, %by] token = %tok : {p.tile}, "
           f"partition_view<tile=({rows}x{cols}), {VIEW}>, tile<i32> -> token")
    p.emit("return")
    return header + "\n" + "\n".join(p.lines) + "\n}\n"
