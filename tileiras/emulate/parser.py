"""PTX text -> ``Module``: the grammar as LLVM's NVPTX backend and NVIDIA's tileiras emit it.

A hand-written tokenizer plus a small recursive-descent parser.  Debug-only content is
dropped before tokenizing: ``.loc``/``.file`` lines, ``.section`` blocks (DWARF) and the
``.nv_intermediate_source_section`` block (the Tile IR source that tileiras embeds).
Registers declared inside ``{ }`` scopes (inline asm, call sequences) are renamed to
``name@scope`` so that they shadow outer registers of the same name.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Optional, Union

from .ptxtypes import TYPES


class PtxParseError(ValueError):
    """Malformed or unsupported PTX text; the message names the line."""


# ----------------------------------------------------------------------------- operands
@dataclass(frozen=True)
class Reg:
    name: str
    negate: bool = False          # "!%p" in a source operand


@dataclass(frozen=True)
class Imm:
    value: Union[int, float]
    literal: str = ""             # "0f3F800000" literals keep their bits: is_f32/is_f64 below

    @property
    def float_bits(self) -> Optional[tuple[int, int]]:
        """(bits, width) for hex float literals, else None."""
        lit = self.literal.lower()
        if lit.startswith("0f"):
            return int(lit[2:], 16), 32
        if lit.startswith("0d"):
            return int(lit[2:], 16), 64
        return None


@dataclass(frozen=True)
class Sym:
    """A variable, label or function name (optionally ``name+offset``)."""
    name: str
    offset: int = 0


@dataclass(frozen=True)
class Addr:
    """``[base+offset]``: base is a Reg, a Sym or None (absolute address).  A tensor
    operand ``[tensorMap, {c0, c1, ...}]`` carries its coordinates in ``coords``."""
    base: Union[Reg, Sym, None]
    offset: int = 0
    coords: Optional["Vec"] = None


@dataclass(frozen=True)
class Vec:
    items: tuple                  # of Reg / Imm / None (the "_" sink)


@dataclass(frozen=True)
class Pair:
    """``%r|%p`` destinations of setp / shfl / elect."""
    first: Optional[Reg]
    second: Optional[Reg]


@dataclass(frozen=True)
class ArgList:
    """``(a, b, c)`` lists of call instructions."""
    items: tuple


Operand = Union[Reg, Imm, Sym, Addr, Vec, Pair, ArgList]


# ----------------------------------------------------------------------------- module
@dataclass
class Instruction:
    opcode: str
    parts: list[str]              # opcode split on '.', with "::" kept ("shared::cta")
    operands: list
    guard: Optional[Reg] = None
    line: int = 0
    text: str = ""
    scope_path: tuple = ()        # ids of the enclosing { } scopes, innermost last


@dataclass
class Variable:
    space: str                    # global / shared / const / local / param
    name: str
    type_name: str
    size: int                     # bytes (0 for extern unsized arrays)
    align: int
    init: Optional[bytes] = None
    extern: bool = False
    init_syms: tuple = ()         # (byte offset, Sym) for address initializers
    hidden: bool = False          # a `.hidden .param`: filled at launch by the host callback


@dataclass
class Function:
    name: str
    is_entry: bool
    params: list[Variable]
    returns: list[Variable]
    directives: dict = field(default_factory=dict)   # reqntid, maxnreg, ...
    regs: dict = field(default_factory=dict)          # register name -> PTX type name
    variables: list[Variable] = field(default_factory=list)
    body: list[Instruction] = field(default_factory=list)
    labels: dict = field(default_factory=dict)        # label -> instruction index
    call_params: dict = field(default_factory=dict)   # call-site .param name -> size
    has_body: bool = False


@dataclass
class Module:
    version: str = ""
    target: list = field(default_factory=list)
    address_size: int = 64
    variables: list[Variable] = field(default_factory=list)
    functions: dict = field(default_factory=dict)

    def entry(self, name: Optional[str] = None) -> Function:
        entries = [f for f in self.functions.values() if f.is_entry]
        if name is None:
            if len(entries) != 1:
                raise KeyError(f"module has {len(entries)} entries; name one: "
                               f"{[e.name for e in entries]}")
            return entries[0]
        fn = self.functions.get(name)
        if fn is None or not fn.is_entry:
            raise KeyError(f"no .entry named '{name}'; entries: {[e.name for e in entries]}")
        return fn


# ----------------------------------------------------------------------------- preprocessing
_DEBUG_LINE = re.compile(r"^[ \t]*\.(loc|file|loc_intermediate)\b[^\n]*$", re.M)


def _skip_braced(text: str, start: int) -> int:
    """Index just past the '}' matching the first '{' at or after start."""
    i = text.index("{", start)
    depth = 0
    in_string = False
    while i < len(text):
        c = text[i]
        if in_string:
            if c == "\\":
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise PtxParseError("unterminated '{' block")


def strip_debug(text: str) -> str:
    """Remove debug sections, keeping line numbers (removed text becomes newlines)."""
    for key in (".nv_intermediate_source_section", ".section"):
        pos = 0
        while True:
            m = re.compile(r"^[ \t]*" + re.escape(key) + r"\b", re.M).search(text, pos)
            if m is None:
                break
            end = _skip_braced(text, m.end())
            removed = text[m.start():end]
            text = text[:m.start()] + "\n" * removed.count("\n") + text[end:]
            pos = m.start()
    text = _DEBUG_LINE.sub("", text)
    return text


# ----------------------------------------------------------------------------- tokenizer
_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r]+|\\\n)
  | (?P<nl>\n)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<hexfloat>0[fF][0-9a-fA-F]{8}(?![\w])|0[dD][0-9a-fA-F]{16}(?![\w]))
  | (?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  | (?P<int>0[xX][0-9a-fA-F]+U?|0[bB][01]+U?|[0-9]+U?)
  | (?P<ident>[%.$_a-zA-Z][\w.$%]*(?:::[\w.$%]+)*)
  | (?P<punct>[{}()\[\],;:|+\-!@<>=*])
""", re.X | re.S)


@dataclass
class Token:
    kind: str
    text: str
    line: int


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    line = 1
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise PtxParseError(f"line {line}: unexpected character {text[pos]!r}")
        kind = m.lastgroup
        s = m.group()
        if kind == "nl":
            line += 1
        elif kind == "comment" or kind == "ws":
            line += s.count("\n")
        else:
            tokens.append(Token(kind, s, line))
        pos = m.end()
    tokens.append(Token("eof", "", line))
    return tokens


def parse_int(text: str) -> int:
    t = text.rstrip("U")
    if t[:2] in ("0x", "0X"):
        return int(t[2:], 16)
    if t[:2] in ("0b", "0B"):
        return int(t[2:], 2)
    if len(t) > 1 and t[0] == "0":
        return int(t, 8)
    return int(t)


def hexfloat_value(text: str) -> float:
    if text[1] in "fF":
        return struct.unpack("<f", struct.pack("<I", int(text[2:], 16)))[0]
    return struct.unpack("<d", struct.pack("<Q", int(text[2:], 16)))[0]


# ----------------------------------------------------------------------------- parser
_PERF_DIRECTIVES = {".reqntid", ".maxntid", ".minnctapersm", ".maxnctapersm", ".maxnreg",
                    ".reqnctapercluster", ".explicitcluster", ".maxclusterrank",
                    ".blocksareclusters", ".language", ".noreturn", ".pragma", ".abi_preserve",
                    ".abi_preserve_control", ".minperctamemory"}
_LINKAGE = {".visible", ".extern", ".weak", ".common"}
_SPACES = {".global", ".shared", ".const", ".local", ".param"}


class Parser:
    def __init__(self, text: str):
        self.toks = tokenize(strip_debug(text))
        self.i = 0
        self.module = Module()
        self.scope_counter = 0

    # -- token helpers
    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> Token:
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept(self, text: str) -> bool:
        if self.peek().text == text:
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> Token:
        t = self.next()
        if t.text != text:
            raise PtxParseError(f"line {t.line}: expected '{text}', found '{t.text}'")
        return t

    def error(self, msg: str) -> PtxParseError:
        return PtxParseError(f"line {self.peek().line}: {msg}")

    # -- top level
    def parse(self) -> Module:
        while self.peek().kind != "eof":
            self.parse_toplevel()
        return self.module

    def parse_toplevel(self) -> None:
        t = self.peek()
        if t.text == ".version":
            self.next()
            self.module.version = self.next().text
        elif t.text == ".target":
            self.next()
            self.module.target.append(self.next().text)
            while self.accept(","):
                self.module.target.append(self.next().text)
        elif t.text == ".address_size":
            self.next()
            self.module.address_size = parse_int(self.next().text)
        elif t.text == ".pragma":
            self.skip_statement()
        else:
            self.parse_declaration()

    def skip_statement(self) -> None:
        while self.next().text != ";":
            pass

    def parse_declaration(self) -> None:
        linkage = set()
        while self.peek().text in _LINKAGE:
            linkage.add(self.next().text)
        t = self.peek()
        if t.text in (".entry", ".func"):
            self.parse_function(extern=".extern" in linkage)
        elif t.text in _SPACES:
            var = self.parse_variable(extern=".extern" in linkage)
            self.expect(";")
            self.module.variables.append(var)
        elif t.text == ".alias":
            self.skip_statement()
        else:
            raise self.error(f"unexpected '{t.text}' at module level")

    # -- variables
    def parse_variable(self, extern: bool = False) -> Variable:
        space = self.next().text[1:]
        align = 0
        vec = 1
        type_name = None
        ptr_attrs = True
        while ptr_attrs:
            t = self.peek().text
            if t == ".align":
                self.next()
                align = parse_int(self.next().text)
            elif t in (".v2", ".v4", ".v8"):
                vec = int(self.next().text[2:])
            elif t.startswith(".") and t[1:] in TYPES:
                type_name = self.next().text[1:]
            elif t in (".ptr", ".global", ".shared", ".const", ".local", ".attribute", ".unified"):
                self.next()
                if self.peek().text == "(":
                    while self.next().text != ")":
                        pass
            else:
                ptr_attrs = False
        if type_name is None:
            raise self.error("variable declaration without a type")
        name = self.next().text
        elem = max(TYPES[type_name].bits // 8, 1) * vec
        count = 1
        dims = []
        while self.accept("["):
            if self.accept("]"):
                dims.append(0)
            else:
                dims.append(parse_int(self.next().text))
                self.expect("]")
        for d in dims:
            count *= d
        size = elem * count
        var = Variable(space, name, type_name, size, align or elem, extern=extern)
        if self.accept("="):
            var.init, var.init_syms = self.parse_initializer(type_name, size)
        return var

    def parse_initializer(self, type_name: str, size: int) -> tuple[bytes, tuple]:
        values: list = []
        self.collect_init(values)
        ty = TYPES[type_name]
        width = max(ty.bits // 8, 1)
        out = bytearray(size)
        syms = []
        for k, v in enumerate(values):
            off = k * width
            if off + width > size:
                break
            if isinstance(v, Sym):
                syms.append((off, v))
                continue
            if ty.is_float:
                fmt = {2: "<e", 4: "<f", 8: "<d"}[width]
                out[off:off + width] = struct.pack(fmt, float(v))
            else:
                out[off:off + width] = (int(v) % (1 << (8 * width))).to_bytes(width, "little")
        return bytes(out), tuple(syms)

    def collect_init(self, values: list) -> None:
        if self.accept("{"):
            if not self.accept("}"):
                while True:
                    self.collect_init(values)
                    if self.accept("}"):
                        break
                    self.expect(",")
            return
        values.append(self.parse_init_scalar())

    def parse_init_scalar(self):
        neg = self.accept("-")
        t = self.next()
        if t.kind == "int":
            v = parse_int(t.text)
        elif t.kind == "hexfloat":
            v = hexfloat_value(t.text)
        elif t.kind == "float":
            v = float(t.text)
        elif t.kind == "ident":
            name = t.text
            if name in ("generic", "cvta") and self.accept("("):
                name = self.next().text
                self.expect(")")
            off = 0
            if self.accept("+"):
                off = parse_int(self.next().text)
            return Sym(name, off)
        else:
            raise PtxParseError(f"line {t.line}: bad initializer '{t.text}'")
        return -v if neg else v

    # -- functions
    def parse_param_list(self) -> list[Variable]:
        params: list[Variable] = []
        self.expect("(")
        if self.accept(")"):
            return params
        while True:
            hidden = self.accept(".hidden")
            if self.peek().text not in (".param", ".reg"):
                raise self.error(f"expected .param, found '{self.peek().text}'")
            params.append(self.parse_variable())
            params[-1].hidden = bool(hidden)
            if self.accept(")"):
                return params
            self.expect(",")

    def parse_function(self, extern: bool) -> None:
        is_entry = self.next().text == ".entry"
        while self.peek().text in (".noreturn", ".attribute"):
            self.next()
            if self.peek().text == "(":
                while self.next().text != ")":
                    pass
        returns: list[Variable] = []
        if not is_entry and self.peek().text == "(":
            returns = self.parse_param_list()
        name = self.next().text
        params = self.parse_param_list() if self.peek().text == "(" else []
        fn = Function(name, is_entry, params, returns)
        while self.peek().text in _PERF_DIRECTIVES:
            self.parse_perf_directive(fn)
        if self.accept(";"):
            self.module.functions.setdefault(name, fn)
            return
        fn.has_body = True
        self.expect("{")
        self.parse_body(fn, [dict()])
        self.module.functions[name] = fn

    def parse_perf_directive(self, fn: Function) -> None:
        key = self.next().text[1:]
        if key == "pragma":
            fn.directives.setdefault("pragma", []).append(self.next().text.strip('"'))
            self.accept(";")
            return
        if key in ("blocksareclusters", "explicitcluster", "noreturn"):
            fn.directives[key] = True
            return
        vals = [parse_int(self.next().text)]
        while self.peek().text == "," and self.peek(1).kind == "int":
            self.next()
            vals.append(parse_int(self.next().text))
        fn.directives[key] = tuple(vals)

    # -- bodies
    def parse_body(self, fn: Function, scopes: list[dict]) -> None:
        while True:
            t = self.peek()
            if t.kind == "eof":
                raise self.error(f"unterminated body of '{fn.name}'")
            if t.text == "}":
                self.next()
                return
            if t.text == "{":
                self.next()
                self.scope_counter += 1
                scopes.append({"@id": self.scope_counter})
                self.parse_body(fn, scopes)
                scopes.pop()
            elif t.text == ".reg":
                self.parse_reg_decl(fn, scopes)
            elif t.text in (".local", ".shared", ".const", ".global"):
                var = self.parse_variable()
                self.expect(";")
                if var.space in ("shared", "global", "const"):
                    self.module.variables.append(var)
                else:
                    fn.variables.append(var)
            elif t.text == ".param":
                var = self.parse_variable()
                self.expect(";")
                fn.call_params[var.name] = max(fn.call_params.get(var.name, 0), var.size)
            elif t.text in (".pragma", ".maxnreg"):
                self.skip_statement()
            elif t.kind == "ident" and self.peek(1).text == ":" and not t.text.startswith("%"):
                self.next()
                self.next()
                if self.peek().text in (".callprototype", ".branchtargets", ".calltargets"):
                    self.skip_statement()
                    continue
                key = t.text if len(scopes) == 1 else f"{t.text}@{scopes[-1]['@id']}"
                fn.labels[key] = len(fn.body)
            else:
                fn.body.append(self.parse_instruction(scopes))

    def parse_reg_decl(self, fn: Function, scopes: list[dict]) -> None:
        self.next()
        vec = 1
        if self.peek().text in (".v2", ".v4"):
            vec = int(self.next().text[2:])
        type_name = self.next().text[1:]
        if type_name not in TYPES:
            raise self.error(f"unknown register type '.{type_name}'")
        while True:
            name = self.next().text
            if self.accept("<"):
                count = parse_int(self.next().text)
                self.expect(">")
                for k in range(count):
                    self.declare(fn, scopes, f"{name}{k}", type_name)
            else:
                self.declare(fn, scopes, name, type_name)
            if self.accept(";"):
                return
            self.expect(",")

    @staticmethod
    def is_register(scopes: list[dict], name: str) -> bool:
        """Registers declared in a ``{ .reg .b32 tmp; ... }`` scope need no ``%``."""
        return any(name in scope for scope in scopes)

    def declare(self, fn: Function, scopes: list[dict], name: str, type_name: str) -> None:
        scope = scopes[-1]
        unique = name if len(scopes) == 1 else f"{name}@{scope['@id']}"
        scope[name] = unique
        fn.regs[unique] = type_name

    # -- instructions
    def parse_instruction(self, scopes: list[dict]) -> Instruction:
        start = self.peek()
        guard = None
        if self.accept("@"):
            neg = self.accept("!")
            guard = Reg(self.resolve(scopes, self.next().text), neg)
        op = self.next()
        if op.kind != "ident":
            raise PtxParseError(f"line {op.line}: expected an opcode, found '{op.text}'")
        operands = []
        if not self.accept(";"):
            while True:
                operands.append(self.parse_operand(scopes))
                if self.accept(";"):
                    break
                if not self.accept(","):
                    raise self.error(f"expected ',' or ';' in '{op.text}', found '{self.peek().text}'")
        parts = op.text.split(".")
        path = tuple(s["@id"] for s in scopes[1:])
        return Instruction(op.text, parts, operands, guard, start.line, op.text, path)

    def resolve(self, scopes: list[dict], name: str) -> str:
        for scope in reversed(scopes):
            if name in scope:
                return scope[name]
        return name

    def parse_operand(self, scopes: list[dict]):
        t = self.peek()
        if t.text == "[":
            return self.parse_address(scopes)
        if t.text == "{":
            self.next()
            items = []
            while True:
                if self.peek().text == "_":
                    self.next()
                    items.append(None)
                else:
                    items.append(self.parse_operand(scopes))
                if self.accept("}"):
                    return Vec(tuple(items))
                self.expect(",")
        if t.text == "(":
            self.next()
            items = []
            if not self.accept(")"):
                while True:
                    items.append(self.parse_operand(scopes))
                    if self.accept(")"):
                        break
                    self.expect(",")
            return ArgList(tuple(items))
        if t.text == "!":
            self.next()
            return Reg(self.resolve(scopes, self.next().text), True)
        if t.text == "-" or t.kind in ("int", "float", "hexfloat"):
            return self.parse_immediate()
        if t.kind == "ident":
            self.next()
            if t.text == "_":
                return None
            if t.text.startswith("%") or self.is_register(scopes, t.text):
                reg = Reg(self.resolve(scopes, t.text))
                if self.accept("|"):
                    nxt = self.next().text
                    second = None if nxt == "_" else Reg(self.resolve(scopes, nxt))
                    return Pair(reg, second)
                if self.peek().text == "+" and self.peek(1).kind == "int":
                    self.next()
                    return Addr(reg, parse_int(self.next().text))
                return reg
            off = 0
            if self.peek().text == "+":
                self.next()
                off = self.parse_offset()
            return Sym(t.text, off)
        raise self.error(f"unexpected operand '{t.text}'")

    def parse_immediate(self) -> Imm:
        neg = self.accept("-")
        t = self.next()
        if t.kind == "int":
            v = parse_int(t.text)
            return Imm(-v if neg else v, t.text)
        if t.kind == "hexfloat":
            v = hexfloat_value(t.text)
            return Imm(-v if neg else v, ("-" if neg else "") + t.text)
        if t.kind == "float":
            return Imm(-float(t.text) if neg else float(t.text), t.text)
        raise PtxParseError(f"line {t.line}: bad immediate '{t.text}'")

    def parse_offset(self) -> int:
        neg = self.accept("-")
        v = parse_int(self.next().text)
        return -v if neg else v

    def parse_address(self, scopes: list[dict]) -> Addr:
        self.expect("[")
        base = None
        off = 0
        t = self.peek()
        if t.kind == "ident":
            self.next()
            base = (Reg(self.resolve(scopes, t.text)) if t.text.startswith("%") or self.is_register(scopes, t.text)
                    else Sym(t.text))
        else:
            off = self.parse_offset()
        while self.peek().text in ("+", "-"):
            sign = -1 if self.next().text == "-" else 1
            off += sign * self.parse_offset()
        if self.accept(","):
            coords = self.parse_operand(scopes)
            if not isinstance(coords, Vec):
                raise self.error("expected {coordinates} in a tensor operand")
            self.expect("]")
            return Addr(base, off, coords)
        self.expect("]")
        return Addr(base, off)


def parse_ptx(text: str) -> Module:
    """Parse PTX text into a ``Module`` (functions with flat instruction lists)."""
    return Parser(text).parse()
