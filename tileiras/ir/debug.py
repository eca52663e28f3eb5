"""Debug-info records (the bytecode's debug section), attached to ops and functions.

Records reference each other by object; they are immutable and hashable so the
writer can intern them back into a table.
"""
from __future__ import annotations

import enum
from typing import Optional, Union

from ..record import record


class DebugTag(enum.IntEnum):
    UNKNOWN = 0
    COMPILE_UNIT = 1
    FILE = 2
    LEXICAL_BLOCK = 3
    LOC = 4
    SUBPROGRAM = 5
    CALL_SITE = 6


@record(frozen=True)
class DIUnknown:
    tag = DebugTag.UNKNOWN


@record(frozen=True)
class DIFile:
    name: str
    directory: str
    tag = DebugTag.FILE


@record(frozen=True)
class DICompileUnit:
    file: DIFile
    tag = DebugTag.COMPILE_UNIT


@record(frozen=True)
class DISubprogram:
    file: DIFile
    line: int
    name: str
    linkage_name: str
    compile_unit: DICompileUnit
    scope_line: int
    flags: Optional[int] = None  # 13.5+
    tag = DebugTag.SUBPROGRAM


@record(frozen=True)
class DILexicalBlock:
    scope: "DIScope"
    file: DIFile
    line: int
    column: int
    tag = DebugTag.LEXICAL_BLOCK


@record(frozen=True)
class DILoc:
    scope: "DIScope"
    filename: str
    line: int
    column: int
    tag = DebugTag.LOC


@record(frozen=True)
class DICallSite:
    callee: "DebugAttr"
    caller: "DebugAttr"
    tag = DebugTag.CALL_SITE


DIScope = Union[DISubprogram, DILexicalBlock]
DebugAttr = Union[DIUnknown, DIFile, DICompileUnit, DISubprogram, DILexicalBlock, DILoc, DICallSite]
