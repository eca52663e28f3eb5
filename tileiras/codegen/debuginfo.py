"""Line information: LLVM debug metadata from the ops' source locations.

With ``--lineinfo`` (or ``-g``) every instruction emitted for an op carries a
``!dbg`` location; LLVM's NVPTX back end turns them into ``.file``/``.loc``
directives (emission kind DebugDirectivesOnly), which ptxas turns into the
cubin's line tables.

Like NVIDIA's tool, we map each instruction to two places: the user's source
(``.loc``) and the op's line in the Tile IR text (``.loc_intermediate``), which
travels in the PTX's ``.nv_intermediate_source_section``.  LLVM can only carry
one location, so the ``!dbg`` location is the op's Tile IR text position (file
``tile ir``); ``rewrite_locations`` then turns each ``.loc`` into the source
``.loc`` plus the ``.loc_intermediate``.
"""
from __future__ import annotations

import os
from typing import Optional

from llvmlite import ir

from ..ir import debug as D
from ..ir.core import Function, Operation


TILE_IR_FILE = "tile ir"
#: The file of the scope synthesized for a function without locations (NVIDIA's name).
UNKNOWN_FILE = "<unknown>"


class LineInfo:
    def __init__(self, module: ir.Module, positions: Optional[dict] = None, full: bool = False):
        self.module = module
        #: ``-g``: full DWARF (LLVM then targets ``sm_XX, debug``), else line tables only
        self.full = full
        #: op -> (0-based line, depth) in the printed Tile IR text
        self.positions = positions or {}
        #: (tile line, tile column) -> (source path, line, column)
        self.sources: dict[tuple[int, int], tuple[str, int, int]] = {}
        self._files: dict[str, ir.DIValue] = {}
        self._cu: Optional[ir.DIValue] = None
        #: functions without locations, whose ops all sit at line 1 of ``<unknown>``
        self._synthesized: set[str] = set()
        self._unknown_locations: dict[str, ir.DIValue] = {}
        i32 = ir.IntType(32)
        module.add_named_metadata("llvm.module.flags",
                                  [ir.Constant(i32, 2), "Debug Info Version", ir.Constant(i32, 3)])
        module.add_named_metadata("llvm.module.flags",
                                  [ir.Constant(i32, 2), "Dwarf Version", ir.Constant(i32, 2)])

    def file(self, path: str) -> ir.DIValue:
        if path not in self._files:
            self._files[path] = self.module.add_debug_info(
                "DIFile", {"filename": os.path.basename(path) or path, "directory": os.path.dirname(path)})
        return self._files[path]

    def compile_unit(self, path: str) -> ir.DIValue:
        if self._cu is None:
            self._cu = self.module.add_debug_info("DICompileUnit", {
                "language": ir.DIToken("DW_LANG_C_plus_plus"), "file": self.file(path),
                "producer": "tileiras", "isOptimized": True,
                "emissionKind": ir.DIToken("FullDebug" if self.full else "DebugDirectivesOnly"),
                "nameTableKind": ir.DIToken("None")},
                is_distinct=True)
            self.module.add_named_metadata("llvm.dbg.cu", self._cu)
        return self._cu

    def subprogram(self, fn: Function, llfn: ir.Function) -> ir.DIValue:
        """The function's scope, in the Tile IR text file.

        A function without any location gets the scope NVIDIA's tileiras synthesizes
        for it (its ``synthesize-debug-info-scopes``): file ``<unknown>``, line 1, and
        every op at that line (see ``location``)."""
        loc = _file_line(fn.loc) or next((_file_line(op.loc) for op in fn.walk() if _file_line(op.loc)), None)
        if loc is None:
            return self._synthesized_subprogram(fn, llfn)
        line = self.positions.get(("function", fn.name), (0, 0))[0] + 1
        tile = self.file(TILE_IR_FILE)
        sp = self._add_subprogram(fn, llfn, tile, line, self.compile_unit(loc[0]))
        self.sources[(line, 2)] = self.sources[(line, 0)] = (loc[0], loc[1], 0)
        return sp

    def _synthesized_subprogram(self, fn: Function, llfn: ir.Function) -> ir.DIValue:
        unknown = self.file(UNKNOWN_FILE)
        sp = self._add_subprogram(fn, llfn, unknown, 1, self.compile_unit(UNKNOWN_FILE))
        self._synthesized.add(fn.name)
        self._unknown_locations[fn.name] = self.module.add_debug_info(
            "DILocation", {"line": 1, "column": 0, "scope": sp})
        return sp

    def _add_subprogram(self, fn: Function, llfn: ir.Function, file: ir.DIValue, line: int,
                        unit: ir.DIValue) -> ir.DIValue:
        sp_type = self.module.add_debug_info("DISubroutineType", {"types": self.module.add_metadata([])})
        sp = self.module.add_debug_info("DISubprogram", {
            "name": fn.name, "linkageName": fn.name, "scope": file, "file": file,
            "line": line, "type": sp_type, "scopeLine": line, "isDefinition": True,
            "spFlags": ir.DIToken("DISPFlagDefinition | DISPFlagOptimized"), "unit": unit,
        }, is_distinct=True)
        llfn.set_metadata("dbg", sp)
        return sp

    def location(self, op: Operation, scope: ir.DIValue, fn_name: str = "") -> Optional[ir.DIValue]:
        if fn_name in self._synthesized:
            return self._unknown_locations[fn_name]
        loc = _file_line(op.loc)
        if loc is None or op not in self.positions:
            return None
        line0, depth = self.positions[op]
        line, col = line0 + 1, 2 * depth + 2
        src_col = op.loc.column if isinstance(op.loc, D.DILoc) else 0
        self.sources[(line, col)] = (loc[0], loc[1], src_col)
        return self.module.add_debug_info("DILocation", {"line": line, "column": col, "scope": scope})


def _file_line(loc: Optional[D.DebugAttr]) -> Optional[tuple[str, int]]:
    """(file path, line) of a location record, following call sites to the callee."""
    while isinstance(loc, D.DICallSite):
        loc = loc.callee
    if isinstance(loc, D.DILoc):
        return loc.filename, loc.line
    if isinstance(loc, D.DISubprogram):
        f = loc.file
        return os.path.join(f.directory, f.name), loc.line
    return None
