"""Locations in Tile IR text: ``loc(...)`` suffixes, ``#alias = ...`` definitions
and the debug-info attributes (``#cuda_tile.di_loc<...>``...).

Text locations become the IR's debug records (``tileiras.ir.debug``).  A plain
``loc("f.py":3:4)``, and the position of every op written without a location,
becomes a ``TextLoc``: a ``DILoc`` without scope, which the verifier reports
errors at and which, as in MLIR's bytecode writer, is written as an unknown
location (``strip_text_locations``).  Location aliases may be used before they
are defined (tileirdisasm prints them after the last function), so uses are
resolved once the whole text is read.
"""
from __future__ import annotations

from typing import Any, Optional

from ..ir import debug as D
from ..ir.core import Module
from ..record import record
from .locations import FileLineCol
from .parser_scan import ParseError, Scanner


@record(frozen=True)
class TextLoc(D.DILoc):
    """MLIR's FileLineColLoc on an op or function: ``scope`` is always None."""


@record(frozen=True)
class UnsupportedLoc:
    """A location kind the bytecode cannot carry (``fused[...]``, ``"name"(...)``).

    ``children`` are the locations it wraps (a fused location's parts, a name
    location's child), which the verifier looks through for a debug scope."""

    kind: str  # MLIR's class name: FusedLoc, NameLoc, OpaqueLoc
    where: Optional[TextLoc] = None  # the op it was found on, for the error
    children: tuple = ()
    name: Optional[str] = None  # a NameLoc's name


@record(frozen=True)
class _Alias:
    name: str
    pos: int


class Locations:
    """Alias definitions and the objects (ops, functions) whose location is an alias."""

    def __init__(self) -> None:
        self.aliases: dict[str, Any] = {}
        self.used: set[str] = set()
        self.pending: list[tuple[Any, _Alias, Scanner, TextLoc]] = []

    # -- op and function suffixes ---------------------------------------------------------
    def attach(self, sc: Scanner, obj: Any, start: int) -> None:
        """Set ``obj.loc`` from a ``loc(...)`` suffix, or to ``obj``'s text position."""
        p = sc.position(start)
        here = TextLoc(None, p.filename, p.line, p.column)
        if sc.accept_keyword("loc"):
            value = self.loc_body(sc)
            if isinstance(value, _Alias):
                self.pending.append((obj, value, sc, here))
                obj.loc = here
                return
            obj.loc = to_op_loc(value, here)
            return
        obj.loc = here

    def resolve(self) -> None:
        for obj, alias, sc, here in self.pending:
            if alias.name not in self.aliases:
                raise sc.error(f"undefined symbol alias id '{alias.name}'", alias.pos)
            obj.loc = to_op_loc(self.aliases[alias.name], here)
        self.pending.clear()

    def unused(self) -> list[Any]:
        """Values of aliases nothing referenced, in definition order: in printed
        text, the locations of the terminators the printer elided."""
        return [v for k, v in self.aliases.items() if k not in self.used
                and (v is None or isinstance(v, (D.DILoc, D.DICallSite)))]

    # -- loc(...) -------------------------------------------------------------------------
    def loc_body(self, sc: Scanner) -> Any:
        sc.expect("(")
        value = self.loc_inner(sc)
        sc.expect(")")
        return value

    def loc_inner(self, sc: Scanner) -> Any:
        start = sc.here()
        if sc.peek("#"):
            name = sc.sigil_name("#")
            assert name is not None
            self.used.add(name)
            if name in self.aliases:
                return self.aliases[name]
            return _Alias(name, start)
        if sc.accept_keyword("unknown"):
            return None
        if sc.accept_keyword("callsite"):
            sc.expect("(")
            callee = self.loc_inner(sc)
            sc.expect("at")
            caller = self.loc_inner(sc)
            sc.expect(")")
            return D.DICallSite(to_op_loc(callee), to_op_loc(caller))
        if sc.accept_keyword("fused"):
            if sc.peek("<"):
                PA_skip_angle(sc)
            sc.expect("[")
            parts = []
            while not sc.accept("]"):
                parts.append(to_op_loc(self.loc_inner(sc)))
                sc.accept(",")
            return UnsupportedLoc("FusedLoc", children=tuple(parts))
        if sc.peek_string():
            name = sc.string()
            if sc.accept("("):
                child = to_op_loc(self.loc_inner(sc))
                sc.expect(")")
                return UnsupportedLoc("NameLoc", children=(child,), name=name)
            if not sc.accept(":"):
                return UnsupportedLoc("NameLoc", name=name)
            line = sc.integer()
            sc.expect(":")
            col = sc.integer()
            return FileLineCol(name, line, col)
        if sc.peek("#"):
            return self.attribute(sc)
        raise sc.error("expected location instance")

    # -- alias definitions and debug-info attributes ------------------------------------------
    def define_alias(self, sc: Scanner) -> None:
        pos = sc.here()
        name = sc.sigil_name("#")
        if name is None:
            raise sc.error("expected attribute alias")
        sc.expect("=")
        if name in self.aliases:
            raise sc.error(f"redefinition of Attribute id '{name}'", pos)
        if sc.accept_keyword("loc"):
            value = self.loc_body(sc)
        else:
            value = self.attribute(sc)
        self.aliases[name] = value

    def ref(self, sc: Scanner) -> Any:
        """An attribute reference inside a debug attribute: an alias or an inline value."""
        if sc.peek("#"):
            save = sc.pos
            sc.skip()
            if not sc.text.startswith("#cuda_tile.", sc.pos):
                name = sc.sigil_name("#")
                self.used.add(name or "")
                if name not in self.aliases:
                    raise sc.error(f"undefined symbol alias id '{name}'", save)
                return self.aliases[name]
            return self.attribute(sc)
        if sc.accept_keyword("loc"):
            return self.loc_body(sc)
        if sc.peek("<"):  # an inline di_file body: <"name" in "dir">
            return self._di_file_body(sc)
        raise sc.error("expected debug info attribute")

    def attribute(self, sc: Scanner) -> Any:
        start = sc.here()
        sc.expect("#")
        name = sc.ident("attribute name")
        parser = _DI_PARSERS.get(name.removeprefix("cuda_tile."))
        if parser is None:
            raise sc.error(f"unknown debug attribute '#{name}'", start)
        return parser(self, sc)

    def _di_file_body(self, sc: Scanner) -> D.DIFile:
        sc.expect("<")
        name = sc.string()
        sc.expect("in")
        directory = sc.string()
        sc.expect(">")
        return D.DIFile(name, directory)

    def _params(self, sc: Scanner, attr: str, spec: tuple["_Param", ...]) -> dict[str, Any]:
        """MLIR's ``struct(params)``: ``<key = value, ...>`` in any order, each key at
        most once, every required one present; ``attr`` names the attribute for errors."""
        sc.expect("<")
        out: dict[str, Any] = {}
        by_key = {p.key: p for p in spec}
        while True:
            key = sc.peek_ident()
            if key is None:
                raise sc.error("expected valid keyword", also=("expected a parameter name in struct",))
            pos = sc.here()
            sc.ident()
            sc.expect("=")
            param = by_key.get(key)
            if param is None or key in out:
                raise sc.error(f"duplicate or unknown struct parameter name: {key}", pos)
            out[key] = self._param_value(sc, attr, param)
            if not sc.accept(","):
                break
        for param in spec:
            if param.required and param.key not in out:
                raise sc.error(f"struct is missing required parameter: {param.key}")
        sc.expect(">")
        return out

    def _param_value(self, sc: Scanner, attr: str, param: "_Param") -> Any:
        pos = sc.here()
        failed = f"failed to parse {attr} parameter '{param.key}' which is to be a `{param.cpp_type}`"
        if param.cpp_type == "unsigned":
            if param.key == "flags" and sc.accept_keyword("declaration"):
                return 1  # DISubprogram flags (13.5): the only flag tileirdisasm names
            value = sc.integer()
            if not 0 <= value < 1 << 32:
                raise sc.error("integer value too large", pos, also=(failed,))
            return value
        if param.cpp_type == "StringAttr":
            return sc.string()
        if sc.peek("<") and param.cpp_type in _INLINE:  # a nested attribute printed without its name
            return _INLINE[param.cpp_type](self, sc)
        value = self.ref(sc)
        if not isinstance(value, _KINDS[param.cpp_type]):
            raise sc.error("invalid kind of attribute specified", pos, also=(failed,))
        return value

    def _di_compile_unit(self, sc: Scanner) -> D.DICompileUnit:
        p = self._params(sc, "CudaTile_DICompileUnitAttr", _COMPILE_UNIT)
        return D.DICompileUnit(p["file"])

    def _di_subprogram(self, sc: Scanner) -> D.DISubprogram:
        p = self._params(sc, "CudaTile_DISubprogramAttr", _SUBPROGRAM)
        return D.DISubprogram(p["file"], p["line"], p["name"], p["linkageName"], p["compileUnit"],
                              p.get("scopeLine", 0), p.get("flags"))

    def _di_lexical_block(self, sc: Scanner) -> D.DILexicalBlock:
        p = self._params(sc, "CudaTile_DILexicalBlockAttr", _LEXICAL_BLOCK)
        return D.DILexicalBlock(p["scope"], p["file"], p["line"], p.get("column", 0))

    def _di_loc(self, sc: Scanner) -> D.DILoc:
        sc.expect("<")
        pos = sc.here()
        where = self.ref(sc)
        if not isinstance(where, FileLineCol):
            raise sc.error("invalid kind of attribute specified", pos, also=(
                "failed to parse CudaTile_DILocAttr parameter 'sourceLoc' which is to be a `FileLineColLoc`",))
        sc.expect("in")
        scope = self._param_value(sc, "CudaTile_DILocAttr", _Param("scope", "DILocalScopeAttr"))
        sc.expect(">")
        return D.DILoc(scope, where.filename, where.line, where.column)


@record(frozen=True)
class _Param:
    """One parameter of a debug-info attribute: its key, its C++ type in cuda-tile
    (what MLIR's messages name) and whether it may be left out."""

    key: str
    cpp_type: str
    required: bool = True


_COMPILE_UNIT = (_Param("file", "DIFileAttr"),)
_SUBPROGRAM = (_Param("file", "DIFileAttr"), _Param("line", "unsigned"), _Param("name", "StringAttr"),
               _Param("linkageName", "StringAttr"), _Param("compileUnit", "DICompileUnitAttr"),
               _Param("scopeLine", "unsigned", False), _Param("flags", "unsigned", False))
_LEXICAL_BLOCK = (_Param("scope", "DILocalScopeAttr"), _Param("file", "DIFileAttr"), _Param("line", "unsigned"),
                  _Param("column", "unsigned", False))
_KINDS: dict[str, tuple[type, ...]] = {
    "DIFileAttr": (D.DIFile,), "DICompileUnitAttr": (D.DICompileUnit,),
    "DILocalScopeAttr": (D.DISubprogram, D.DILexicalBlock),
}
_INLINE = {
    "DIFileAttr": lambda self, sc: self._di_file_body(sc),
    "DICompileUnitAttr": lambda self, sc: self._di_compile_unit(sc),
}


def PA_skip_angle(sc: Scanner) -> None:  # noqa: N802 - fused<metadata>: skipped
    depth = 0
    while sc.pos < len(sc.text):
        ch = sc.text[sc.pos]
        sc.pos += 1
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if depth == 0:
            return


_DI_PARSERS = {
    "di_file": lambda self, sc: self._di_file_body(sc),
    "di_compile_unit": Locations._di_compile_unit,
    "di_subprogram": Locations._di_subprogram,
    "di_lexical_block": Locations._di_lexical_block,
    "di_loc": Locations._di_loc,
}


def to_op_loc(value: Any, here: Optional[TextLoc] = None) -> Any:
    """What an op's ``loc`` holds for a parsed location value (``here``: the op's
    text position, kept by locations the bytecode cannot carry for their error)."""
    if isinstance(value, FileLineCol):
        return TextLoc(None, value.filename, value.line, value.column)
    if isinstance(value, UnsupportedLoc) and here is not None:
        return UnsupportedLoc(value.kind, here, value.children, value.name)
    if isinstance(value, D.DICallSite) and here is not None:
        return D.DICallSite(to_op_loc(value.callee, here), to_op_loc(value.caller, here))
    return value


def is_text_loc(loc: Optional[object]) -> bool:
    return isinstance(loc, TextLoc)


def strip_text_locations(module: Module) -> None:
    """Replace text positions by unknown locations (what MLIR writes for them);
    reject locations the bytecode cannot carry, with MLIR's message."""
    for g in module.globals:
        g.loc = None  # the bytecode has no global locations
    for fn in module.functions:
        fn.loc = _stripped(fn.loc, fn)
        for op in fn.walk():
            op.loc = _stripped(op.loc, op)


def _stripped(loc: Any, owner: Any) -> Any:
    if isinstance(loc, UnsupportedLoc):
        where = loc.where or TextLoc(None, "<input>", 0, 0)
        raise ParseError(f"unsupported location, got {loc.kind}, expected DILocAttr or CallSiteLoc",
                         where.filename, where.line, where.column)
    if isinstance(loc, TextLoc):
        return None
    if isinstance(loc, D.DICallSite):
        return D.DICallSite(_stripped(loc.callee, owner), _stripped(loc.caller, owner))
    return loc
