"""The Tile IR text parser: MLIR text -> ``Module``, the inverse of the printer.

Accepts what tileirdisasm prints (top-level ``global``/``entry``/``func`` and
``#alias = ...`` definitions), the cuda-tile dialect's own source form
(``cuda_tile.module @m { ... }``, with or without the ``cuda_tile.`` prefix,
``testing$func`` functions) and MLIR's generic op form.  Ops are parsed by
walking their ``syntax`` trees (``parser_ops``); functions and globals, which
are not ops in our IR, are parsed here, as the printer prints them here.

``parse_module(text)`` returns a module ready to print or write; errors are
``ParseError`` (``loc("FILE":LINE:COL): error: ...``, exit code 3).  With
``keep_positions=True`` every op keeps its text position as its location
(``TextLoc``), so verifier diagnostics point at the text; call
``strip_text_locations`` before writing bytecode.  ``split_input`` cuts a
``// -----`` file into chunks that keep their line numbers.
"""
from __future__ import annotations

import re
from typing import Optional

from .. import tile  # noqa: F401  (registers every op)
from ..ir import attrs as A
from ..ir import types as T
from ..ir.core import Function, Global, Module, Operation, Region
from ..ir.version import NEWEST, Version
from ..record import field, record
from ..tile import ops_control
from ..tile.enums import SymbolVisibility
from ..tile.ops_core import GlobalOp
from . import parser_attrs as PA
from .parser_body import DIALECT, BodyParser
from .parser_locs import Locations, TextLoc, strip_text_locations
from .parser_ops import OpSyntax, parse_custom
from .parser_scan import ParseError, Scanner

__all__ = ["parse_module", "parse_chunk", "split_input", "ParseError", "ParsedText", "strip_text_locations",
           "TextLoc"]

FUNCTION_WORDS = ("entry", "func", "testing$func")
MODULE_WORDS = ("module", "builtin.module")
SPLIT_MARKER = re.compile(r"^// -----\s*$", re.MULTILINE)


@record
class ParsedText:
    """A parsed text: its module, and ops found outside any function (only
    tests write those; they are kept so the verifier can look at them)."""

    module: Module
    loose_ops: list[Operation] = field(default_factory=list)
    global_positions: dict[str, TextLoc] = field(default_factory=dict)
    #: Where the (first) ``cuda_tile.module`` op was written, and the loose ops found
    #: directly in a module's body (the bytecode writer rejects both kinds of loose op).
    module_loc: Optional[TextLoc] = None
    ops_in_module_body: list[Operation] = field(default_factory=list)


class ModuleParser:
    def __init__(self, text: str, filename: str, version: Version, line_offset: int = 0):
        self.sc = Scanner(text, filename, line_offset)
        self.locations = Locations()
        self.body = BodyParser(self.sc, self.locations)
        self.result = ParsedText(Module(version))
        self.module_depth = 0

    @property
    def module(self) -> Module:
        return self.result.module

    def parse(self) -> ParsedText:
        while not self.sc.at_end():
            self.item()
        self.locations.resolve()
        self.locate_implicit_terminators()
        return self.result

    def locate_implicit_terminators(self) -> None:
        """Elided terminators take the unreferenced location aliases, in order (the
        printer wrote them out though it elided their ops); the rest take their
        parent op's location, as MLIR's ``ensureTerminator`` does."""
        unused = self.locations.unused()
        order = {id(op): i for i, op in enumerate(self.module.walk())}
        implicit = sorted(self.body.implicit_ops, key=lambda op: order.get(id(op), len(order)))
        functions = {id(fn.body): fn for fn in self.module.functions}
        for op in implicit:
            if unused:
                op.loc = unused.pop(0)
                continue
            region = op.parent.parent if op.parent is not None else None
            owner = region.parent if region is not None else None
            if owner is None and region is not None:
                owner = functions.get(id(region))
            if owner is not None:
                op.loc = owner.loc

    # -- top level --------------------------------------------------------------------------
    def item(self) -> None:
        sc = self.sc
        if sc.peek("#"):
            self.locations.define_alias(sc)
            return
        if sc.peek("!"):
            raise sc.error("type aliases are not supported")
        if sc.peek('"'):
            self.generic_item()
            return
        word = sc.peek_ident() or ""
        short = word[len(DIALECT):] if word.startswith(DIALECT) else word
        if short in MODULE_WORDS:
            self.module_op()
        elif short in FUNCTION_WORDS:
            self.function()
        elif short == "global":
            self.global_()
        else:
            self.loose_op()

    def loose_op(self) -> None:
        op = self.body.parse_op()
        self.result.loose_ops.append(op)
        if self.module_depth:
            self.result.ops_in_module_body.append(op)

    def module_op(self) -> None:
        sc = self.sc
        start = sc.here()
        sc.ident()
        if sc.peek("@"):
            self.body.symbol_name()
        if sc.accept_keyword("attributes"):
            PA.parse_dict(sc)
        sc.expect("{")
        self.module_depth += 1
        while not sc.accept("}"):
            if sc.at_end():
                raise sc.error("expected '}' to end the module body")
            self.item()
        self.module_depth -= 1
        holder = _Ignored()
        self.locations.attach(sc, holder, start)
        if self.result.module_loc is None:
            p = sc.position(start)
            self.result.module_loc = TextLoc(None, p.filename, p.line, p.column)

    def generic_item(self) -> None:
        sc = self.sc
        start = sc.here()
        save = sc.pos
        name = sc.string()
        if name in ("cuda_tile.module", "builtin.module"):
            sc.expect("(")
            sc.expect(")")
            if sc.accept("<"):
                PA.parse_dict(sc)
                sc.expect(">")
            sc.expect("(")
            sc.expect("{")
            while not sc.accept("}"):
                if sc.at_end():
                    raise sc.error("expected '}' to end the module body")
                self.item()
            sc.expect(")")
            if sc.peek("{"):
                PA.parse_dict(sc)
            sc.expect(":")
            PA.parse_type(sc)
            self.locations.attach(sc, _Ignored(), start)
        elif name.removeprefix(DIALECT) in ("entry", "testing$func"):
            self.generic_function(start, name.removeprefix(DIALECT) == "entry")
        else:
            sc.pos = save
            self.loose_op()

    # -- functions ---------------------------------------------------------------------------
    def function(self) -> None:
        sc = self.sc
        start = sc.here()
        word = sc.ident()
        try:
            header = self.function_header(word)
        except ParseError as e:  # MLIR names the custom op whose header failed to parse
            if not e.message.startswith("custom op '"):
                e.message = f"custom op '{DIALECT}{word.removeprefix(DIALECT)}' {e.message}"
            raise
        is_entry, is_private, name, args, results, hints = header
        body = self.body.parse_region(args, implicit=ops_control.ReturnOp)
        if not body.blocks:
            body = Region([_entry_block(args, implicit=True)])
        fn = Function(name, T.FunctionType(tuple(t for _, t, _ in args), tuple(results)), body,
                      is_entry=is_entry, is_private=is_private, hints=hints)
        self.locations.attach(sc, fn, start)
        self.module.functions.append(fn)

    def function_header(self, word: str) -> tuple:
        """What follows ``entry``/``func``: visibility, name, arguments, results, hints."""
        sc = self.sc
        is_entry = word.removeprefix(DIALECT) == "entry"
        is_private = False
        if sc.accept_keyword("private"):
            is_private = True
        else:
            sc.accept_keyword("public")
        name = self.body.symbol_name()
        args_pos = sc.here()
        args = self.body.argument_list()
        results: list[T.Type] = []
        if sc.accept("->"):
            if sc.accept("("):
                results = [] if sc.peek(")") else PA.type_list(sc)
                sc.expect(")")
            else:
                results = [PA.parse_type(sc)]
        hints: Optional[A.OptimizationHintsAttr] = None
        if sc.accept_keyword("optimization_hints"):
            sc.expect("=")
            hints = PA.parse_hints(sc)
        if sc.accept_keyword("attributes"):
            PA.parse_dict(sc)
        del args_pos
        return is_entry, is_private, name, args, results, hints

    def generic_function(self, start: int, is_entry: bool) -> None:
        """``"cuda_tile.testing$func"() <{function_type = ..., sym_name = ...}> ({...}) : () -> ()``."""
        sc = self.sc
        sc.expect("(")
        sc.expect(")")
        props: dict = {}
        if sc.accept("<"):
            props = dict(PA.parse_dict(sc).entries)
            sc.expect(">")
        sc.expect("(")
        body = self.body.parse_region([], implicit=None)
        sc.expect(")")
        if sc.peek("{"):
            props.update(PA.parse_dict(sc).entries)
        sc.expect(":")
        PA.parse_type(sc)
        fn_type = props.get("function_type")
        sym = props.get("sym_name")
        if not isinstance(fn_type, A.TypeAttr) or not isinstance(fn_type.value, T.FunctionType):
            raise sc.error("requires attribute 'function_type'", start)
        if not isinstance(sym, A.StringAttr):
            raise sc.error("requires attribute 'sym_name'", start)
        fn = Function(sym.value, fn_type.value, body, is_entry=is_entry)
        self.locations.attach(sc, fn, start)
        self.module.functions.append(fn)

    # -- globals ------------------------------------------------------------------------------
    def global_(self) -> None:
        sc = self.sc
        start = sc.here()
        sc.ident()
        p = OpSyntax(self.body, GlobalOp.definition, 0, start)
        parse_custom(p)
        value = p.attrs.get("value")
        assert isinstance(value, A.DenseElementsAttr)
        g = Global(p.attrs["sym_name"], value.type, value.data if isinstance(value.data, bytes) else b"",
                   alignment=p.attrs.get("alignment", 0) or 0, constant=bool(p.attrs.get("constant")),
                   is_private=p.attrs.get("symbol_visibility") is SymbolVisibility.PRIVATE)
        self.locations.attach(sc, g, start)
        if isinstance(g.loc, TextLoc):
            self.result.global_positions[g.name] = g.loc
        self.module.globals.append(g)


class _Ignored:
    """Receives a location nothing in our IR keeps (modules)."""

    loc: object = None


def _entry_block(args: list, implicit: bool):  # noqa: ANN202 - a Block
    from ..ir.core import Block

    block = Block([t for _, t, _ in args])
    if implicit:
        block.append(ops_control.ReturnOp())
    return block


# ---------------------------------------------------------------------------
# entry points


def parse_chunk(text: str, filename: str = "<input>", *, version: Version = NEWEST,
                line_offset: int = 0) -> ParsedText:
    """Parse text keeping text positions as locations and ops outside functions."""
    return ModuleParser(text, filename, version, line_offset).parse()


def parse_module(text: str, filename: str = "<input>", *, version: Version = NEWEST,
                 keep_positions: bool = False) -> Module:
    """Parse Tile IR text into a module (written at ``version`` by default)."""
    parsed = parse_chunk(text, filename, version=version)
    if parsed.loose_ops:
        op = parsed.loose_ops[0]
        loc = op.loc if isinstance(op.loc, TextLoc) else None
        raise ParseError(f"'{op.definition.full_name}' op must be inside a function or module",
                         filename, loc.line if loc else 0, loc.column if loc else 0)
    if not keep_positions:
        strip_text_locations(parsed.module)
    return parsed.module


def split_input(text: str) -> list[tuple[str, int]]:
    """``// -----``-separated chunks, each with the number of lines before it."""
    chunks: list[tuple[str, int]] = []
    start = 0
    for m in SPLIT_MARKER.finditer(text):
        chunks.append((text[start:m.start()], text.count("\n", 0, start)))
        start = m.end()
    chunks.append((text[start:], text.count("\n", 0, start)))
    return chunks


def parse_text_input(data: bytes, filename: str, version: Version = NEWEST) -> Module:
    """Command-line input: decode, parse, verify with text positions, strip them."""
    from ..verify import check_module

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ParseError(f"input is neither Tile IR bytecode nor UTF-8 text (invalid byte at offset {e.start})",
                         filename, 1, 1) from None
    module = parse_module(text, filename, version=version, keep_positions=True)
    reject_foreign_ops(module)
    check_module(module)
    strip_text_locations(module)
    return module


def reject_foreign_ops(module: Module) -> None:
    """Ops of other dialects parse (tests use them) but have no bytecode."""
    from .parser_body import is_unregistered

    for op in module.walk():
        if is_unregistered(op):
            loc = op.loc if isinstance(op.loc, TextLoc) else TextLoc(None, "<input>", 0, 0)
            raise ParseError(f"'{op.definition.name}' op: only ops from the 'cuda_tile' dialect are allowed",
                             loc.filename, loc.line, loc.column)
