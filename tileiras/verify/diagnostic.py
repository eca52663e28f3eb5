"""Diagnostics: one located message, and the spelling of types inside messages.

A ``Diagnostic`` prints the way cuTile's error parser expects from tileiras:
``loc("file":line:col): error: message`` when the op carries a ``DILoc`` and
``error: message`` otherwise.  ``render(style="nvidia")`` spells the location
as real tileiras does for compile-time errors
(``#cuda_tile.di_loc<loc("f.py":6:0) in #cuda_tile.di_subprogram<...>>: error: ...``).
"""
from __future__ import annotations

import enum
from typing import Optional

from ..errors import TileIRError
from ..ir import types as T
from ..ir.debug import DICallSite, DILexicalBlock, DILoc, DISubprogram, DebugAttr
from ..record import record


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@record(frozen=True)
class Diagnostic:
    loc: Optional[DebugAttr]
    severity: Severity
    message: str
    notes: tuple[str, ...] = ()

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def render(self, style: str = "loc") -> str:
        """``style`` is ``"loc"`` (cuTile-parseable, the default) or ``"nvidia"``."""
        where = _location(self.loc, style)
        head = f"{where}: " if where else ""
        lines = [f"{head}{self.severity.value}: {self.message}"]
        lines += [f"{head}note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


def source_loc(loc: Optional[DebugAttr]) -> Optional[DILoc]:
    """The DILoc a debug record points at (a call site's callee), if any."""
    if isinstance(loc, DILoc):
        return loc
    if isinstance(loc, DICallSite):
        return source_loc(loc.callee)
    return None


def _location(loc: Optional[DebugAttr], style: str) -> str:
    di = source_loc(loc)
    if di is None:
        return ""
    plain = f'loc("{di.filename}":{di.line}:{di.column})'
    if style == "nvidia":
        return f"#cuda_tile.di_loc<{plain} in {_scope(di.scope)}>"
    return plain


def _scope(scope: object) -> str:
    if isinstance(scope, DISubprogram):
        f = scope.file
        cu = scope.compile_unit.file
        return (f'#cuda_tile.di_subprogram<file = <"{f.name}" in "{f.directory}">, line = {scope.line}, '
                f'name = "{scope.name}", linkageName = "{scope.linkage_name}", '
                f'compileUnit = <file = <"{cu.name}" in "{cu.directory}">>, scopeLine = {scope.scope_line}>')
    if isinstance(scope, DILexicalBlock):
        return (f'#cuda_tile.di_lexical_block<scope = {_scope(scope.scope)}, file = <"{scope.file.name}" in '
                f'"{scope.file.directory}">, line = {scope.line}, column = {scope.column}>')
    return str(scope)


def mlir_type(t: object) -> str:
    """A type as MLIR prints it inside diagnostics: ``!cuda_tile.tile<4xf32>``, ``f32``."""
    if isinstance(t, T.ScalarType):
        return t.name
    return f"!cuda_tile.{t}"


def quoted(t: object) -> str:
    return f"'{mlir_type(t)}'"


class VerifyError(TileIRError):
    """The module failed verification; ``str()`` lists every diagnostic, one per line."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(d.message for d in self.diagnostics))

    def __str__(self) -> str:
        return "\n".join(str(d) for d in self.diagnostics)
