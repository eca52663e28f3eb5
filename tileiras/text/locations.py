"""Debug locations for ``-g`` output: ``loc(#locN)`` references and the alias
definitions printed after the last function.

MLIR gives every location and debug-info attribute an alias (``#loc3``,
``#di_subprogram1``).  Aliases are collected in printing order, each attribute
before the attributes nested in it; they are then stably sorted by nesting
depth (an alias is one deeper than its deepest nested alias) and by alias name,
and numbered per name in that order.
"""
from __future__ import annotations

from typing import Hashable, Optional, Union

from ..ir.core import Module
from ..ir.debug import (DICallSite, DICompileUnit, DIFile, DILexicalBlock, DILoc, DISubprogram,
                        DIUnknown)
from ..record import record
from .escape import escape_string


@record(frozen=True)
class FileLineCol:
    """MLIR's FileLineColLoc: the source position inside a ``di_loc``."""

    filename: str
    line: int
    column: int


UNKNOWN = DIUnknown()
Node = Union[DIUnknown, FileLineCol, DIFile, DICompileUnit, DISubprogram, DILexicalBlock, DILoc,
             DICallSite]

_ALIAS_NAMES: dict[type, str] = {
    DIFile: "di_file", DICompileUnit: "di_compile_unit", DISubprogram: "di_subprogram",
    DILexicalBlock: "di_lexical_block",
}


def _children(node: Node) -> list[Node]:
    if isinstance(node, DICompileUnit):
        return [node.file]
    if isinstance(node, DISubprogram):
        return [node.file, node.compile_unit]
    if isinstance(node, DILexicalBlock):
        return [node.scope, node.file]
    if isinstance(node, DILoc):
        return [FileLineCol(node.filename, node.line, node.column), node.scope]
    if isinstance(node, DICallSite):
        return [node.callee, node.caller]
    return []


def _alias_name(node: Node) -> str:
    return _ALIAS_NAMES.get(type(node), "loc")


class LocationTable:
    """Aliases of every location used by a module, in MLIR's order."""

    def __init__(self, module: Module):
        self._depth: dict[Hashable, int] = {}
        for _ in module.globals:
            self._visit(UNKNOWN)
        for f in module.functions:
            self._visit(_node(f.loc))
            for op in f.walk():
                self._visit(_node(op.loc))
        nodes = list(self._depth)
        order = sorted(range(len(nodes)),
                       key=lambda i: (self._depth[nodes[i]], _alias_name(nodes[i])))
        counts: dict[str, int] = {}
        self._alias: dict[Hashable, str] = {}
        self._order: list[Hashable] = []
        for i in order:
            node = nodes[i]
            base = _alias_name(node)
            n = counts.get(base, 0)
            counts[base] = n + 1
            suffix = "" if n == 0 else ("_" if base[-1].isdigit() else "") + str(n)
            self._alias[node] = "#" + base + suffix
            self._order.append(node)

    def _visit(self, node: Node) -> int:
        if node in self._depth:
            return self._depth[node]
        self._depth[node] = 0
        depth = 0
        for child in _children(node):
            depth = max(depth, self._visit(child) + 1)
        self._depth[node] = depth
        return depth

    def ref(self, loc: Optional[object]) -> str:
        """``loc(#locN)`` for an op's or function's location."""
        return f"loc({self._alias[_node(loc)]})"

    def definitions(self) -> str:
        return "".join(f"{self._alias[n]} = {self._body(n)}\n" for n in self._order)

    def _body(self, node: Hashable) -> str:
        a = self._alias
        if isinstance(node, DIUnknown):
            return "loc(unknown)"
        if isinstance(node, FileLineCol):
            return f"loc({escape_string(node.filename)}:{node.line}:{node.column})"
        if isinstance(node, DILoc):
            flc = FileLineCol(node.filename, node.line, node.column)
            return f"#cuda_tile.di_loc<{a[flc]} in {a[node.scope]}>"
        if isinstance(node, DICallSite):
            return f"loc(callsite({a[node.callee]} at {a[node.caller]}))"
        if isinstance(node, DIFile):
            return f"#cuda_tile.di_file<{escape_string(node.name)} in {escape_string(node.directory)}>"
        if isinstance(node, DICompileUnit):
            return f"#cuda_tile.di_compile_unit<file = {a[node.file]}>"
        if isinstance(node, DISubprogram):
            text = (f"#cuda_tile.di_subprogram<file = {a[node.file]}, line = {node.line}, "
                    f"name = {escape_string(node.name)}, linkageName = {escape_string(node.linkage_name)}, "
                    f"compileUnit = {a[node.compile_unit]}")
            if node.scope_line:
                text += f", scopeLine = {node.scope_line}"
            return text + ">"
        if isinstance(node, DILexicalBlock):
            text = (f"#cuda_tile.di_lexical_block<scope = {a[node.scope]}, file = {a[node.file]}, "
                    f"line = {node.line}")
            if node.column:
                text += f", column = {node.column}"
            return text + ">"
        raise TypeError(f"unknown location {node!r}")


def _node(loc: Optional[object]) -> Node:
    if loc is None:
        return UNKNOWN
    return loc  # type: ignore[return-value]
