"""The debug section: per-function lists of debug-record ids and the record table."""
from __future__ import annotations

from typing import Callable, Optional

from ..ir import debug as D
from ..ir.version import V13_5, Version
from .stream import ByteReader
from .tables import StringTable, read_offset_table


class DebugSection:
    def __init__(self, r: Optional[ByteReader], strings: StringTable, version: Version):
        self.strings = strings
        self.version = version
        self.func_lists: list[list[int]] = []
        self.ranges: list[tuple[int, int]] = []
        self.data = b""
        self.filename = r.filename if r else None
        self._decoded: dict[int, D.DebugAttr] = {}
        self._in_progress: set[int] = set()
        if r is not None:
            self._parse(r)

    def _parse(self, r: ByteReader) -> None:
        base = r.pos
        nfuncs = r.count("number of functions with debug info", 4)
        r.align(base, 4)
        starts = [r.fixed(4, "debug index offset") for _ in range(nfuncs)]
        total = r.count("number of debug indices", 8)
        r.align(base, 8)
        if total * 8 > r.remaining:
            r.fail("insufficient data for debug indices")
        indices = [r.fixed(8, "debug index") for _ in range(total)]
        for i, s in enumerate(starts):
            e = starts[i + 1] if i + 1 < nfuncs else total
            if not s <= e <= total:
                r.fail(f"invalid debug index offset {s} for function {i}")
            self.func_lists.append(indices[s:e])
        self.data = r.data
        self.ranges = read_offset_table(r, 4, "debug attribute")

    @property
    def records(self) -> list[D.DebugAttr]:
        """Every record of the table, in table order (ids 1..n)."""
        r = ByteReader(self.data, 0, 0, self.filename)
        return [self.get(i + 1, r) for i in range(len(self.ranges))]

    def get(self, ident: int, r: ByteReader) -> Optional[D.DebugAttr]:
        """Record ``ident`` (1-based; 0 means none)."""
        if ident == 0:
            return None
        if ident in self._decoded:
            return self._decoded[ident]
        if ident > len(self.ranges):
            r.fail(f"debug attribute index {ident} out of range ({len(self.ranges)} entries)")
        if ident in self._in_progress:
            r.fail(f"debug attribute {ident} refers to itself")
        self._in_progress.add(ident)
        start, end = self.ranges[ident - 1]
        sub = ByteReader(self.data, start, end, self.filename)
        tag = sub.u8("debug entry type")
        decoder = _DECODERS.get(tag)
        if decoder is None:
            sub.fail(f"unknown debug entry type {tag}", start)
        rec = decoder(self, sub)
        if not sub.at_end():
            sub.fail(f"unexpected trailing data in debug attribute {ident}")
        self._in_progress.discard(ident)
        self._decoded[ident] = rec
        return rec

    def _ref(self, r: ByteReader, kinds: tuple[type, ...], what: str) -> D.DebugAttr:
        start = r.pos
        rec = self.get(r.varint(what), r)
        if not isinstance(rec, kinds):
            r.fail(f"{what} refers to a {type(rec).__name__}", start)
        return rec

    def _file(self, r: ByteReader) -> D.DebugAttr:
        return D.DIFile(self.strings.read(r), self.strings.read(r))

    def _compile_unit(self, r: ByteReader) -> D.DebugAttr:
        return D.DICompileUnit(self._ref(r, (D.DIFile,), "compile unit file"))  # type: ignore[arg-type]

    def _lexical_block(self, r: ByteReader) -> D.DebugAttr:
        scope = self._ref(r, (D.DISubprogram, D.DILexicalBlock), "lexical block scope")
        file = self._ref(r, (D.DIFile,), "lexical block file")
        return D.DILexicalBlock(scope, file, r.varint("line"), r.varint("column"))  # type: ignore[arg-type]

    def _subprogram(self, r: ByteReader) -> D.DebugAttr:
        file = self._ref(r, (D.DIFile,), "subprogram file")
        line = r.varint("line")
        name = self.strings.read(r)
        linkage = self.strings.read(r)
        unit = self._ref(r, (D.DICompileUnit,), "subprogram compile unit")
        scope_line = r.varint("scope line")
        flags = r.varint("subprogram flags") if self.version >= V13_5 else None
        return D.DISubprogram(file, line, name, linkage, unit, scope_line, flags)  # type: ignore[arg-type]

    def _call_site(self, r: ByteReader) -> D.DebugAttr:
        callee = self._ref(r, (D.DILoc, D.DICallSite), "call site callee")
        caller = self._ref(r, (D.DILoc, D.DICallSite), "call site caller")
        return D.DICallSite(callee, caller)

    def _loc(self, r: ByteReader) -> D.DebugAttr:
        scope = self._ref(r, (D.DISubprogram, D.DILexicalBlock), "location scope")
        filename = self.strings.read(r)
        return D.DILoc(scope, filename, r.varint("line"), r.varint("column"))  # type: ignore[arg-type]

    def _unknown(self, r: ByteReader) -> D.DebugAttr:
        return D.DIUnknown()


_DECODERS: dict[int, Callable[[DebugSection, ByteReader], D.DebugAttr]] = {
    D.DebugTag.UNKNOWN: DebugSection._unknown,
    D.DebugTag.COMPILE_UNIT: DebugSection._compile_unit,
    D.DebugTag.FILE: DebugSection._file,
    D.DebugTag.LEXICAL_BLOCK: DebugSection._lexical_block,
    D.DebugTag.LOC: DebugSection._loc,
    D.DebugTag.SUBPROGRAM: DebugSection._subprogram,
    D.DebugTag.CALL_SITE: DebugSection._call_site,
}
