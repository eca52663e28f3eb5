"""Reads ``--emit=tileas`` text (``tileas_format``) back into a ``TileAS``.

The text decorates a Tile IR function: it names the function's ops and values but does
not restate their types' contents or their attributes, so ``parse_tileas(text, aa)``
reads it against the function ``aa`` analyses.  Lines follow the function's ops in walk
order, each checked against its op (name, results, operands, result types), and every
decision is rebuilt into its table: layouts and byte pairs of values, conversions (the
``tileas.convert_layout`` lines before their user), per-op records (tensor-core forms,
wgmma stagings, vector widths, TMA plans, pipelines, chunks, picks), per-shape tables,
tensor maps, and the scratch sizes the ``tileas.buffer`` lines give; the other buffer
lines must agree with what the rebuilt tables place (``shared_buffers``).  Any mismatch
or malformed text raises ``TileASParseError`` located at its line and column.
"""
from __future__ import annotations

import json
import re
from typing import Any, Optional

from ..errors import CompileError
from ..ir.core import Block, Operation, Value
from ..ir import types as T
from ..layout.core import LinearLayout
from ..text.names import NameTable
from .shared_buffers import Buffer, shared_buffers
from .tileaa import TileAA
from .tileas import TileAS
from .tileas_format import CONVERT, ENUMS, OP_TABLES, RECORDS

HEADER = re.compile(r"tileas\.func @(\S+) warps=(\d+)(?:\+(\d+))?(?: cluster_split=(\d+))? smem=(\d+)B align=(\d+) "
                    r"tma_end=(\d+)(?: tmem=(\d+)@(\d+))? \{$")
LAYOUT = re.compile(r"#linear<\[([0-9x]*|scalar)\]((?: \w+=\[[^\]]*\])*) ?>$")
BASES = re.compile(r"(\w+)=\[([^\]]*)\]")
NAME = re.compile(r"%[\w#.$-]+")
INT = re.compile(r"-?\d+")
WORD = re.compile(r"[A-Za-z_][\w.]*")
BUFFER = re.compile(r"tileas\.buffer @(\S+) (\w+) offset=(\d+) bytes=(\d+) align=(\d+)"
                    r"(?: in=@(\S+))?(?: stages=(\d+))?(?: swizzle=(\d+))?(?: layout=(#L\d+))?( live=kernel)? users=")


class TileASParseError(CompileError):
    """Malformed ``--emit=tileas`` text, or text that does not fit its function."""

    def __init__(self, line: int, column: int, message: str):
        super().__init__(f"tileas:{line}:{column}: {message}")


class Cursor:
    """One line being read, and the position in it."""

    def __init__(self, parser: "Parser", text: str, line: int):
        self.p, self.text, self.line, self.pos = parser, text, line, len(text) - len(text.lstrip())

    def fail(self, message: str) -> TileASParseError:
        return TileASParseError(self.line, self.pos + 1, message)

    def at(self, token: str) -> bool:
        return self.text.startswith(token, self.pos)

    def eat(self, token: str) -> bool:
        if self.at(token):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.eat(token):
            raise self.fail(f"expected '{token}', found '{self.text[self.pos:self.pos + 20]}'")

    def match(self, pattern: re.Pattern, what: str) -> re.Match:
        m = pattern.match(self.text, self.pos)
        if m is None:
            raise self.fail(f"expected {what}, found '{self.text[self.pos:self.pos + 20]}'")
        self.pos = m.end()
        return m

    def done(self) -> None:
        if self.pos != len(self.text):
            raise self.fail(f"unexpected '{self.text[self.pos:self.pos + 20]}'")

    def items(self, close: str, item) -> list:
        """``item()`` separated by ', ' up to ``close``."""
        out = []
        while not self.eat(close):
            if out:
                self.expect(", ")
            out.append(item())
        return out

    def value(self) -> Any:
        """One attribute value (``tileas_format.Printer.value``)."""
        if self.eat("["):
            return tuple(self.items("]", self.value))
        if self.eat("{"):
            return dict(self.items("}", self.entry))
        if self.at('"'):
            try:
                s, end = json.JSONDecoder().raw_decode(self.text, self.pos)
            except ValueError:
                raise self.fail("bad string") from None
            self.pos = end
            return s
        if self.at("#L"):
            return self.p.layout(self, self.match(re.compile(r"#L\d+"), "a layout").group())
        if self.eat("#tileas."):
            return self.record()
        if self.eat("@"):
            return self.p.op(self, int(self.match(INT, "an op index").group()))
        if self.at("%"):
            return self.p.value_named(self, self.match(NAME, "a value").group())
        if self.at("-") or self.text[self.pos:self.pos + 1].isdigit():
            return int(self.match(INT, "an integer").group())
        word = self.match(WORD, "a value").group()
        if word in ("true", "false", "none"):
            return {"true": True, "false": False, "none": None}[word]
        enum, _, member = word.partition(".")
        if enum in ENUMS and member in ENUMS[enum].__members__:
            return ENUMS[enum][member]
        self.pos -= len(word)
        raise self.fail(f"unknown value '{word}'")

    def entry(self) -> tuple:
        key = self.value()
        self.expect(": ")
        return key, self.value()

    def record(self) -> Any:
        start = self.pos
        kind = self.match(WORD, "a record kind").group()
        cls = RECORDS.get(kind)
        if cls is None:
            self.pos = start
            raise self.fail(f"unknown record '#tileas.{kind}'")
        self.expect("<")
        fields = {f.name: f for f in cls.__record_fields__}

        def field() -> tuple:
            at = self.pos
            name = self.match(WORD, "a field name").group()
            if name not in fields:
                self.pos = at
                raise self.fail(f"'{kind}' has no field '{name}'")
            self.expect(" = ")
            v = self.value()
            if isinstance(v, tuple) and str(cls.__annotations__.get(name, "")).startswith("list"):
                v = list(v)
            return name, v

        values = dict(self.items(">", field))
        try:
            return cls(**values)
        except TypeError as err:
            self.pos = start
            raise self.fail(f"'{kind}': {err}") from None


class Parser:
    """Reads one function's text against ``aa``."""

    def __init__(self, text: str, aa: TileAA, first_line: int = 1):
        self.lines = text.rstrip("\n").split("\n")
        self.first = first_line
        self.aa = aa
        self.ops = list(aa.function.walk())
        self.index = {op: i for i, op in enumerate(self.ops)}
        self.names = NameTable(aa.function.body)
        self.scope: dict[str, Value] = {}
        self.aliases: dict[str, LinearLayout] = {}
        self.row = 0
        self.chunk_refs: list[tuple[Cursor, Operation, Operation]] = []
        self.pipelined_refs: list[tuple[Cursor, Operation, Operation]] = []
        self.buffers: list[tuple[Cursor, Buffer]] = []
        self.tas: Optional[TileAS] = None
        self.attributes_of: Optional[Operation] = None     # the op whose attributes are being read

    # -- resolving names -------------------------------------------------------------------
    def layout(self, cur: Cursor, name: str) -> LinearLayout:
        if name not in self.aliases:
            cur.pos -= len(name)
            raise cur.fail(f"undefined layout {name}")
        return self.aliases[name]

    def op(self, cur: Cursor, index: int) -> Operation:
        if not 0 <= index < len(self.ops):
            raise cur.fail(f"no op @{index} (the function has {len(self.ops)})")
        return self.ops[index]

    def value_named(self, cur: Cursor, name: str) -> Value:
        if name in self.scope:
            return self.scope[name]
        inner = self._inner_value(name)
        if inner is None:
            cur.pos -= len(name)
            raise cur.fail(f"undefined value {name}")
        return inner

    def _inner_value(self, name: str) -> Optional[Value]:
        """A value defined inside the op whose attributes are being read (a pipelined
        loop's plan names its body's values: ``gathered_copy.AddressSlice``), or None."""
        op = self.attributes_of
        if op is None:
            return None
        nested = list(op.walk())[1:]
        for v in [*(a for o in op.walk() for r in o.regions for blk in r.blocks for a in blk.args),
                  *(r for o in nested for r in o.results)]:
            if self.names.ref(v) == name:
                return v
        return None

    # -- lines -----------------------------------------------------------------------------
    def next_line(self) -> Cursor:
        if self.row >= len(self.lines):
            raise TileASParseError(self.first + self.row, 1, "unexpected end of text")
        cur = Cursor(self, self.lines[self.row], self.first + self.row)
        self.row += 1
        return cur

    def peek(self) -> str:
        return self.lines[self.row].lstrip() if self.row < len(self.lines) else ""

    def parse(self) -> TileAS:
        cur = self.next_line()
        m = cur.match(HEADER, "'tileas.func @name warps=N smem=NB align=N tma_end=N {'")
        fn = self.aa.function
        if m.group(1) != fn.name:
            raise TileASParseError(cur.line, 14, f"function @{m.group(1)} is not @{fn.name}")
        tas = self.tas = TileAS(self.aa, int(m.group(2)), int(m.group(3) or 0), cluster_split=int(m.group(4) or 0),
                                smem_bytes=int(m.group(5)), smem_align=int(m.group(6)), tma_end=int(m.group(7)),
                                tmem_alloc=int(m.group(8) or 0), tmem_slot=int(m.group(9) or 0))
        self.declarations()
        self.block(fn.entry_block)
        self.expect_close()
        self.resolve()
        return tas

    def expect_close(self) -> None:
        cur = self.next_line()
        cur.expect("}")
        cur.done()

    def declarations(self) -> None:
        tas, shapes, maps, built = self.tas, [], [], []
        while self.peek().startswith(("#L", "#map", "#dmap", "tileas.mma_shape", "tileas.shape_access",
                                      "tileas.buffer")):
            cur = self.next_line()
            if cur.at("#L"):
                name = cur.match(re.compile(r"#L\d+"), "a layout name").group()
                cur.expect(" = ")
                self.aliases[name] = parse_layout(cur)
            elif cur.at("#map") or cur.at("#dmap"):
                kind = "#dmap" if cur.at("#dmap") else "#map"
                cur.eat(kind)
                table = built if kind == "#dmap" else maps
                index = int(cur.match(INT, "a map index").group())
                if index != len(table):
                    raise cur.fail(f"tensor map {kind}{index} out of order (expected {kind}{len(table)})")
                cur.expect(" = ")
                table.append(cur.value())
            elif cur.eat("tileas.mma_shape "):
                shape = cur.value()
                cur.expect(" ")
                layout = cur.value()
                shapes.append(shape)
                if layout is not None:
                    tas.mma_layouts[shape] = layout
            elif cur.eat("tileas.shape_access "):
                shape = cur.value()
                cur.expect(" ")
                tas.shape_access[shape] = cur.value()
            else:
                self.buffers.append((cur, self.buffer(cur)))
            cur.done()
        tas.mma_shapes, tas.tensor_maps, tas.device_maps = frozenset(shapes), tuple(maps), tuple(built)

    def buffer(self, cur: Cursor) -> Buffer:
        m = cur.match(BUFFER, "'tileas.buffer @name kind offset=N bytes=N align=N ... users=[...]'")
        layout = self.layout(cur, m.group(9)) if m.group(9) else None
        users = cur.value()
        b = Buffer(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5)), users,
                   m.group(6) or "", int(m.group(8) or 0), layout, int(m.group(7) or 0), bool(m.group(10)))
        if b.kind in ("scratch", "ring"):
            self.tas.scratch[users[0]] = b.nbytes
        return b

    def block(self, block: Block) -> None:
        """The block's argument line, then its ops (and theirs, nested)."""
        saved = dict(self.scope)
        cur = self.next_line()
        cur.expect("^(")
        for i, a in enumerate(block.args):
            if i:
                cur.expect(", ")
            self.defined(cur, a)
        cur.expect("):")
        cur.done()
        for op in block.ops:
            self.op_line(op)
            for region in op.regions:
                for blk in region.blocks:
                    self.block(blk)
        self.scope = saved

    def defined(self, cur: Cursor, v: Value, name: Optional[str] = None) -> None:
        """``v``'s name (or its type, on a result list) and its layout and byte pairs."""
        name = self.names.ref(v) if name is None else name
        if not cur.eat(name):
            raise cur.fail(f"expected {name}")
        self.scope[self.names.ref(v)] = v
        if cur.eat(" #L"):
            cur.pos -= 2
            self.tas.layouts[v] = cur.value()
        if cur.eat(" pairs="):
            self.tas.pairs[v] = int(cur.match(INT, "a dim").group())

    def op_line(self, op: Operation) -> None:
        converts: dict[str, tuple[Cursor, Value, Optional[LinearLayout], LinearLayout, dict]] = {}
        while self.peek().startswith("%cvt") and f" = {CONVERT}(" in self.peek():
            cur = self.next_line()
            name = cur.match(NAME, "a name").group()
            cur.expect(f" = {CONVERT}(")
            source = self.value_named(cur, cur.match(NAME, "a value").group())
            cur.expect(") : ")
            src_layout = cur.value()
            cur.expect(" -> ")
            dst = cur.value()
            attrs = self.attributes(cur)
            cur.done()
            converts[name] = (cur, source, src_layout, dst, attrs)
        cur = self.next_line()
        index = self.index[op]
        if cur.eat("@"):
            label = int(cur.match(INT, "an op index").group())
            if label != index:
                raise cur.fail(f"label @{label} is not this op's walk index @{index}")
            cur.expect(": ")
        if op.results:
            for i, r in enumerate(op.results):
                if i:
                    cur.expect(", ")
                if not cur.eat(self.names.ref(r)):
                    raise cur.fail(f"expected result {self.names.ref(r)} of {op.name}")
            cur.expect(" = ")
        if not cur.eat(op.name + "("):
            raise cur.fail(f"expected op '{op.name}' here")
        self.operands(cur, op, converts)
        if op.results:
            cur.expect(" : ")
            for i, r in enumerate(op.results):
                if i:
                    cur.expect(", ")
                self.defined(cur, r, str(r.type))
        self.attributes_of = op
        try:
            self.op_attributes(cur, op, self.attributes(cur))
        finally:
            self.attributes_of = None
        cur.done()

    def operands(self, cur: Cursor, op: Operation, converts: dict) -> None:
        tas = self.tas
        first = True
        for i, v in enumerate(op.operands):
            if isinstance(v.type, T.TokenType):
                continue
            if not first:
                cur.expect(", ")
            first = False
            name = self.names.ref(v)
            start = cur.pos
            found = NAME.match(cur.text, cur.pos)
            if found is not None and found.group() == name:
                cur.pos = found.end()
                continue
            if found is None or found.group() not in converts:
                raise cur.fail(f"expected operand {name} of {op.name}")
            cur.pos = found.end()
            ccur, source, src_layout, dst, attrs = converts.pop(found.group())
            if source is not v:
                cur.pos = start
                raise cur.fail(f"{found.group()} converts {self.names.ref(source)}, not operand {name}")
            if src_layout != tas.layouts.get(v):
                raise ccur.fail(f"{found.group()}'s source layout is not {name}'s")
            tas.converts[op, i] = dst
            if "recompute" in attrs:
                tas.recomputed[op, i] = attrs.pop("recompute")
            if "recompute_converts" in attrs:
                tas.recompute_converts[op, i] = {tuple(k): lay for k, lay in attrs.pop("recompute_converts").items()}
            if attrs:
                raise ccur.fail(f"unknown convert attribute '{next(iter(attrs))}'")
        cur.expect(")")
        if converts:
            raise next(iter(converts.values()))[0].fail("conversion not used by the op that follows")

    def attributes(self, cur: Cursor) -> dict[str, Any]:
        """``{name = value, ...}`` at the end of a line, if there."""
        if not cur.eat(" {"):
            return {}

        def attribute() -> tuple:
            name = cur.match(WORD, "an attribute name").group()
            cur.expect(" = ")
            return name, cur.value()

        return dict(cur.items("}", attribute))

    def op_attributes(self, cur: Cursor, op: Operation, attrs: dict) -> None:
        tas = self.tas
        for name, table in OP_TABLES:
            if name in attrs:
                v = attrs.pop(name)
                getattr(tas, table)[op] = list(v) if table == "picks" else v
        if "pipelined" in attrs:
            self.pipelined_refs.append((cur, op, attrs.pop("pipelined")))
        if "chunk" in attrs:
            group = attrs.pop("chunk")
            if isinstance(group, Operation):
                self.chunk_refs.append((cur, op, group))
            else:
                tas.chunked[op] = group
        if attrs:
            raise cur.fail(f"unknown attribute '{next(iter(attrs))}' on {op.name}")

    def resolve(self) -> None:
        """What refers to ops later in the text: chunk members, pipelined ops, buffers."""
        tas = self.tas
        for cur, op, anchor in self.chunk_refs:
            if anchor not in tas.chunked:
                raise cur.fail(f"chunk anchor @{self.index[anchor]} has no chunk")
            tas.chunked[op] = tas.chunked[anchor]
        for cur, op, loop in self.pipelined_refs:
            plan = tas.pipelines.get(loop)
            if plan is None or isinstance(plan, str):
                raise cur.fail(f"@{self.index[loop]} is not a pipelined loop")
            tas.pipelined[op] = plan
        placed = shared_buffers(tas)
        for k, (cur, b) in enumerate(self.buffers):
            if k >= len(placed) or placed[k] != b:
                raise cur.fail(f"buffer @{b.name} is not what the tables place"
                               + (f" (@{placed[k].name} offset={placed[k].offset} bytes={placed[k].nbytes})"
                                  if k < len(placed) else ""))
        if len(placed) > len(self.buffers):
            raise TileASParseError(self.first, 1, f"buffer @{placed[len(self.buffers)].name} is not declared")


def parse_layout(cur: Cursor) -> LinearLayout:
    """``#linear<[64x32] reg=[(0,1),...] lane=[...] warp=[...]>`` (``layout.format``)."""
    m = cur.match(LAYOUT, "'#linear<[shape] name=[bases] ...>'")
    shape = () if m.group(1) in ("scalar", "") else tuple(int(s) for s in m.group(1).split("x"))
    ins = []
    for name, bases in BASES.findall(m.group(2)):
        vectors = re.findall(r"\(([^)]*)\)", bases)
        ins.append((name, tuple(tuple(int(c) for c in b.split(",") if c) for b in vectors)))
    return LinearLayout(tuple(ins), shape)


def parse_tileas(text: str, aa: TileAA, first_line: int = 1) -> TileAS:
    """The TileAS of ``aa``'s function that ``text`` (one ``tileas.func``) describes."""
    return Parser(text, aa, first_line).parse()


def parse_tileas_module(text: str, aas: dict[str, TileAA]) -> dict[str, TileAS]:
    """Every ``tileas.func`` of ``text`` (``--emit=tileas`` of a module), by function name."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("tileas.func @")]
    out = {}
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        name = lines[start].split()[1][1:]
        if name not in aas:
            raise TileASParseError(start + 1, 14, f"no function @{name} in the module")
        out[name] = parse_tileas("\n".join(lines[start:end]).strip("\n"), aas[name], start + 1)
    return out
