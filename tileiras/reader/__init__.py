"""Bytecode -> IR.

``read_bytecode(data, filename)`` decodes a whole file (versions 13.1-13.5) into a
``Module`` or raises ``BytecodeError`` naming the byte offset of the problem.
Sections may come in any order; each is split out first, then decoded in
dependency order (strings, types, constants, debug, globals, functions).
"""
from __future__ import annotations

from typing import Optional

from ..errors import BytecodeError, VersionError
from ..ir import attrs as A
from ..ir import types as T
from ..ir.core import Block, Function, Global, Module, Region
from ..ir.version import NEWEST, V13_3, V13_5, Version, is_supported
from ..record import field, record
from ..tile.codes import MAGIC, PREVIEW_TAG_BIT, SectionId
from .debug import DebugSection
from .ops import BodyReader
from .stream import ByteReader
from .tables import AttrReader, ConstantTable, StringTable, TypeTable, read_offset_table

__all__ = ["read_bytecode", "Layout"]

NOT_TILE_IR = "input does not correspond to Tile IR bytecode"

#: Function-table flag bits.
FUNC_PRIVATE = 0x01
FUNC_ENTRY = 0x02
FUNC_HINTS = 0x04          # before 13.5: optimization hints follow
FUNC_EXTERN_IMPL = 0x04    # 13.5+: extern implementation (preview)


@record
class Layout:
    """How a file laid out its tables; lets the writer reproduce it byte for byte."""

    sections: list[tuple[int, int]]               # (section id, alignment) in file order
    strings: list[bytes]
    types: list[T.Type]
    constants: list[bytes]                        # raw table entries (varint size + data)
    debug_records: list                           # DebugAttr per id 1..n
    function_debug: list[int] = field(default_factory=list)  # each function's debug list index


def read_bytecode(data: bytes, filename: Optional[str] = "<input>", preview: tuple[str, ...] = ()) -> Module:
    """``preview``: the enabled preview features (``--preview``); a file whose header
    advertises preview content (the SIMT preview's ``preview$call``) needs one."""
    r = ByteReader(data, filename=filename)
    version, tag = _read_header(r, preview)
    payloads, order = _split_sections(r)

    def section(sid: SectionId) -> Optional[ByteReader]:
        return payloads.get(sid)

    strings = _strings(data, section(SectionId.STRING), filename)
    types = TypeTable(data, _ranges(section(SectionId.TYPE), 4, "type"), version, filename)
    constants = ConstantTable(data, _ranges(section(SectionId.CONSTANT), 8, "constant"), filename)
    debug = DebugSection(section(SectionId.DEBUG), strings, version)
    attrs = AttrReader(strings, types, constants)
    module = Module(version=version, tag=tag)
    gsec = section(SectionId.GLOBAL)
    if gsec is not None:
        module.globals = _read_globals(gsec, version, strings, types, constants)
    fsec = section(SectionId.FUNCTION)
    function_debug: list[int] = []
    if fsec is not None:
        for fn, debug_index in _read_functions(fsec, version, strings, types, constants, attrs, debug,
                                               bool(tag & PREVIEW_TAG_BIT)):
            module.functions.append(fn)
            function_debug.append(debug_index)
    module.layout = Layout(
        sections=order, strings=list(strings.raw), types=types.all(), constants=list(constants.raw),
        debug_records=debug.records, function_debug=function_debug)
    return module


def check_entry_arguments(module: Module, filename: Optional[str] = None) -> None:
    """A format invariant NVIDIA's tools check once the module is read: a kernel's
    arguments are rank-0 tiles (anything else cannot be passed as a kernel parameter).
    The dialect allows more (cuda-tile's round-trip tests have token arguments), so
    ``read_bytecode`` itself does not check it."""
    from ..verify.diagnostic import quoted

    for fn in module.functions:
        if not fn.is_entry:
            continue
        for i, t in enumerate(fn.type.inputs):
            if not (isinstance(t, T.TileType) and not t.shape):
                raise BytecodeError(f"unsupported type in bytecode for entry argument #{i}: {quoted(t)}; "
                                    "expected a rank-0 !cuda_tile.tile type", filename=filename)


def read_header_version(data: bytes, filename: Optional[str] = None) -> Version:
    """The bytecode version after checking only the 12-byte header (magic, version, tag).

    NVIDIA's tileiras checks its options against the header before it reads any section,
    so a bad ``-O`` beats a truncated body (and its sm_0 message names this version); a
    preview header's need of ``--preview`` is checked later too."""
    return _read_header(ByteReader(data, filename=filename), None)[0]


def _read_header(r: ByteReader, preview: Optional[tuple[str, ...]] = ()) -> tuple[Version, int]:
    """``preview``: the enabled preview features, None not to check them yet."""
    if len(r.data) < len(MAGIC) or r.data[:len(MAGIC)] != MAGIC:
        raise BytecodeError(NOT_TILE_IR, filename=r.filename)
    r.pos = len(MAGIC)
    if r.remaining == 0:
        raise VersionError("unsupported Tile IR bytecode version: 0.0", filename=r.filename)
    if r.remaining < 4:
        r.fail("failed to parse bytecode header", len(r.data))
    version = Version(r.u8(), r.u8())
    tag = r.fixed(2, "version tag")
    if not is_supported(version):
        raise VersionError(f"unsupported Tile IR bytecode version: {version}", filename=r.filename)
    if tag & PREVIEW_TAG_BIT:
        if version != NEWEST:
            r.fail(f"public-preview bytecode at version {version}.{tag} is not readable; "
                   f"preview content is only valid at the current version {NEWEST}")
        if preview is not None and not preview:
            r.fail("public-preview bytecode requires at least one enabled preview feature")
    if tag & ~PREVIEW_TAG_BIT:
        r.fail(f"header has unrecognized version tag bits ({tag:#x});", 12)
    return version, tag


def _split_sections(r: ByteReader) -> tuple[dict[SectionId, ByteReader], list[tuple[int, int]]]:
    payloads: dict[SectionId, ByteReader] = {}
    order: list[tuple[int, int]] = []
    while True:
        start = r.pos
        if r.at_end():
            r.fail("unexpected end of data while reading section header")
        head = r.u8("section header")
        sid, aligned = head & 0x7F, bool(head & 0x80)
        if sid == SectionId.END:
            if not r.at_end():
                r.fail("end section is not the last section")
            order.append((0, 1))
            return payloads, order
        try:
            kind = SectionId(sid)
        except ValueError:
            r.fail(f"invalid section id {sid}", start)
        if kind in payloads:
            r.fail(f"duplicate {kind.name.lower()} section", start)
        length = r.varint("section length")
        if length > r.remaining:
            r.fail(f"section length {length} exceeds remaining data size {r.remaining}")
        alignment = 1
        if aligned:
            apos = r.pos
            alignment = r.varint("section alignment")
            if alignment == 0 or alignment & (alignment - 1) or alignment > 4096:
                r.fail(f"section alignment {alignment} is not a power of two up to 4096", apos)
            while r.pos % alignment:  # writers pad with 0xCB; NVIDIA's reader takes any byte
                r.u8("section padding")
        payloads[kind] = r.sub(length, "section")
        order.append((sid, alignment))


def _ranges(r: Optional[ByteReader], width: int, what: str) -> list[tuple[int, int]]:
    return [] if r is None else read_offset_table(r, width, what)


def _strings(data: bytes, r: Optional[ByteReader], filename: Optional[str]) -> StringTable:
    return StringTable(data, _ranges(r, 4, "string"), filename)


def _read_globals(r: ByteReader, version: Version, strings: StringTable, types: TypeTable,
                  constants: ConstantTable) -> list[Global]:
    out = []
    for _ in range(r.count("number of globals", 4)):
        name = strings.read(r, "global name")
        t = types.read(r)
        data = constants.payload(r.varint("global constant index"), r)
        alignment = r.varint("global alignment")
        private = constant = False
        if version >= V13_3:
            vis = r.u8("global visibility")
            if vis > 1:
                r.fail(f"invalid symbol visibility {vis}", r.pos - 1)
            private = vis == 1
            constant = bool(r.varint("global constant flag"))
        out.append(Global(name, t, data, alignment, constant, private))
    if not r.at_end():
        r.fail("unexpected trailing data in global section")
    return out


def _read_functions(r: ByteReader, version: Version, strings: StringTable, types: TypeTable,
                    constants: ConstantTable, attrs: AttrReader, debug: DebugSection, preview: bool = False):
    for _ in range(r.count("number of functions", 4)):
        start = r.pos
        name = strings.read(r, "function name")
        sig_at = r.pos
        sig = types.read(r)
        if not isinstance(sig, T.FunctionType):
            r.fail(f"function signature must be a function type, got '{sig}'", sig_at)
        flags = r.u8("function flags")
        is_entry = bool(flags & FUNC_ENTRY)
        debug_index = r.varint("function location index")
        hints = None
        arg_attrs = None
        if version >= V13_5:
            if flags & FUNC_EXTERN_IMPL:
                r.fail("function entry cannot be both kernel and extern impl" if is_entry
                       else "extern impl functions are a preview feature this reader does not support", start)
            if flags & ~(FUNC_PRIVATE | FUNC_ENTRY):
                r.fail(f"invalid function flags {flags:#x}", start)
            if is_entry:
                hints = _hints(r, attrs)
            arg_attrs = _arg_attrs(r, attrs, len(sig.inputs))
        else:
            if flags & ~(FUNC_PRIVATE | FUNC_ENTRY | FUNC_HINTS):
                r.fail(f"invalid function flags {flags:#x}", start)
            if flags & FUNC_HINTS:
                hints = _hints(r, attrs)
        body = r.sub(r.varint("function body length"), "function body")
        const_params = None
        if version >= V13_5 and not is_entry and body.remaining == 0:  # an extern declaration (SIMT preview)
            at = r.pos
            const_params = attrs.read(r)
            if not isinstance(const_params, A.ArrayAttr):
                r.fail("extern function const params payload is not an ArrayAttr", at)
        block = Block(sig.inputs)
        reader = BodyReader(version, strings, types, constants, attrs, preview)
        reader.values.extend(block.args)
        reader.read_ops(body, block)
        fn = Function(name, sig, Region([block]), is_entry=is_entry, is_private=bool(flags & FUNC_PRIVATE),
                      hints=hints, arg_attrs=arg_attrs, const_params=const_params)
        _attach_locations(fn, reader.order, debug, debug_index, r)
        yield fn, debug_index
    if not r.at_end():
        r.fail("unexpected trailing data in function section")


def _hints(r: ByteReader, attrs: AttrReader) -> A.OptimizationHintsAttr:
    start = r.pos
    hints = attrs.read(r)
    if not isinstance(hints, A.OptimizationHintsAttr):
        r.fail("expected optimization hints for entry function", start)
    return hints


def _arg_attrs(r: ByteReader, attrs: AttrReader, nargs: int) -> tuple[A.DictAttr, ...]:
    start = r.pos
    arr = attrs.read(r)
    if not isinstance(arr, A.ArrayAttr) or not all(isinstance(e, A.DictAttr) for e in arr.elements):
        r.fail("expected an array of argument attribute dictionaries", start)
    if arr.elements and len(arr.elements) != nargs:
        r.fail(f"expected {nargs} argument attribute dictionaries, got {len(arr.elements)}", start)
    return arr.elements  # type: ignore[return-value]


def _attach_locations(fn: Function, order: list, debug: DebugSection, index: int, r: ByteReader) -> None:
    if index == 0:
        return
    if index > len(debug.func_lists):
        r.fail(f"function location index {index} out of range ({len(debug.func_lists)} entries)")
    ids = debug.func_lists[index - 1]
    if len(ids) != len(order) + 1:
        r.fail(f"debug info lists {len(ids)} locations for function '{fn.name}' "
               f"with {len(order)} operations")
    fn.loc = debug.get(ids[0], r)
    for op, ident in zip(order, ids[1:]):
        op.loc = debug.get(ident, r)
