"""IR -> bytecode, for any target version 13.1-13.5.

``write_bytecode(module, version=None)`` encodes a module with the same generic
walk over the op registry that the reader uses.  IR using a feature newer than
the target version is refused with a ``WriteError``.  A module that came from
``read_bytecode`` remembers its table layout; written back at its own version it
reproduces the input byte for byte.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from ..ir import attrs as A
from ..ir.core import Function, Module, Operation, Value
from ..ir.version import V13_3, V13_5, Version, is_supported
from ..tile.codes import MAGIC, PREVIEW_TAG_BIT, AttrTag, SectionId
from ..tile.opcodes import INTERNAL_OPCODE_BASE, PREVIEW_OPCODE_BASE
from ..tile.registry import AttrKind, Multiplicity, OperandEncoding
from .pools import DebugPool, Pool, TypePool, WriteError, int_list, pad, signed_varint, varint, write_offset_table

__all__ = ["write_bytecode", "WriteError"]

#: cuTile's section order and alignments (the writer's default layout).
DEFAULT_SECTIONS = [(SectionId.FUNCTION, 8), (SectionId.GLOBAL, 1), (SectionId.CONSTANT, 8),
                    (SectionId.DEBUG, 8), (SectionId.TYPE, 4), (SectionId.STRING, 4), (SectionId.END, 1)]


class Encoder:
    """Per-module state: the four interning tables."""

    def __init__(self, module: Module, version: Version):
        self.version = version
        layout = module.layout if module.layout is not None and module.version == version else None
        self.layout = layout
        self.strings: Pool[bytes] = Pool(layout.strings if layout else None)
        self.types = TypePool(version, self.strings, layout.types if layout else None)
        self.constants: Pool[bytes] = Pool(layout.constants if layout else None)
        self.debug = DebugPool(version, self.strings, layout.debug_records if layout else None)
        self.debug_lists: list[list[int]] = []

    # -- small pieces -----------------------------------------------------------
    def string(self, s: str, buf: bytearray) -> None:
        varint(self.strings.index(s.encode()), buf)

    def type(self, t: Any, buf: bytearray) -> None:
        varint(self.types.index(t), buf)

    def constant(self, data: bytes, buf: bytearray) -> None:
        entry = bytearray()
        varint(len(data), entry)
        entry += data
        varint(self.constants.index(bytes(entry)), buf)

    def require(self, since: Version, what: str) -> None:
        if self.version < since:
            raise WriteError(f"{what} requires bytecode version {since}+, but targeting {self.version}")

    # -- self-contained attributes ----------------------------------------------
    def attribute(self, a: A.Attribute, buf: bytearray) -> None:
        encode = _ATTR_ENCODERS.get(type(a))
        if encode is None:
            raise WriteError(f"attribute {a!r} has no bytecode encoding")
        encode(self, a, buf)

    def dictionary(self, entries: tuple, buf: bytearray) -> None:
        varint(len(entries), buf)
        for key, value in entries:
            self.string(key, buf)
            self.attribute(value, buf)

    # -- functions and ops -------------------------------------------------------
    def function(self, fn: Function, index: int, buf: bytearray) -> None:
        self.string(fn.name, buf)
        self.type(fn.type, buf)
        flags = (0x01 if fn.is_private else 0) | (0x02 if fn.is_entry else 0)
        if self.version < V13_5 and fn.hints is not None:
            flags |= 0x04
        buf.append(flags)
        body = FunctionEncoder(self, fn)
        varint(index, buf)
        if fn.is_entry and (fn.hints is not None or self.version >= V13_5):
            self.attribute(fn.hints or A.OptimizationHintsAttr(()), buf)
        if self.version >= V13_5:
            self.attribute(A.ArrayAttr(tuple(fn.arg_attrs or ())), buf)
        elif fn.arg_attrs and any(d.entries for d in fn.arg_attrs):
            raise WriteError(f"argument attributes require bytecode version {V13_5}+, "
                             f"but targeting {self.version}")
        code = body.encode()
        varint(len(code), buf)
        buf += code
        if fn.const_params is not None:  # an extern declaration (SIMT preview) has no body
            self.attribute(fn.const_params, buf)
        self.debug_lists.append(body.debug_ids)


class FunctionEncoder:
    """Encodes one function body, numbering values as the reader does."""

    def __init__(self, enc: Encoder, fn: Function):
        self.enc = enc
        self.fn = fn
        self.ids: dict[Value, int] = {}
        self.next_id = 0
        self.debug_ids = [enc.debug.ref(fn.loc)]
        self.used = {v for op in fn.walk() for v in op.operands}

    def encode(self) -> bytes:
        buf = bytearray()
        for arg in self.fn.entry_block.args:
            self._define(arg)
        for op in self.fn.entry_block.ops:
            self.op(op, buf)
        return bytes(buf)

    def _define(self, v: Value) -> None:
        self.ids[v] = self.next_id
        self.next_id += 1

    def _ref(self, v: Value, buf: bytearray) -> None:
        if v not in self.ids:
            raise WriteError(f"value {v!r} is used where it is not defined")
        varint(self.ids[v], buf)

    def op(self, op: Operation, buf: bytearray) -> None:
        defn = op.definition
        if defn.opcode >= INTERNAL_OPCODE_BASE:
            raise WriteError(f"operation '{defn.full_name}' is compiler-internal: no bytecode holds it")
        enc = self.enc
        enc.require(defn.since, f"operation '{defn.full_name}'")
        self.debug_ids.append(enc.debug.ref(op.loc))
        varint(defn.opcode, buf)
        live_results = self._results(op, buf)
        fields = defn.flag_fields(enc.version)
        present = {a.name for a in defn.attrs if a.in_flags and _is_set(op.attributes.get(a.name))}
        if defn.operand_encoding is OperandEncoding.FIELDS:
            present |= {o.name for i, o in enumerate(defn.operands)
                        if o.multiplicity is Multiplicity.OPTIONAL and op.segments[i]}
        for f in fields:
            if f.name in present:
                enc.require(f.since, f"'{f.name}' of '{defn.full_name}'")
        if defn.has_flags(enc.version):
            varint(sum(1 << i for i, f in enumerate(fields) if f.name in present), buf)
        for a in defn.attrs:
            self._attr(op, a, present, buf)
        self._operands(op, buf)
        if defn.regions:
            varint(len(op.regions), buf)
            for region in op.regions:
                self._region(region, buf)
        for r in op.results[:live_results]:
            self._define(r)

    def _results(self, op: Operation, buf: bytearray) -> int:
        """Write the result types that exist at the target version; return their count."""
        defn = op.definition
        keep = []
        for i, res in enumerate(op.results):
            spec = defn.results[min(i, len(defn.results) - 1)]
            if spec.since > self.enc.version:
                if res in self.used:
                    raise WriteError(f"result '{spec.name}' of '{defn.full_name}' requires bytecode version "
                                     f"{spec.since}+, but targeting {self.enc.version}")
                continue
            keep.append(res)
        if defn.sized_results:
            varint(len(keep), buf)
        for res in keep:
            self.enc.type(res.type, buf)
        return len(keep)

    def _attr(self, op: Operation, a: Any, present: set[str], buf: bytearray) -> None:
        value = op.attributes.get(a.name)
        if a.since > self.enc.version:
            if _is_set(value) and value != a.default and not (a.kind is AttrKind.BOOL_ARRAY and not any(value)):
                raise WriteError(f"attribute '{a.name}' of '{op.definition.full_name}' requires bytecode "
                                 f"version {a.since}+, but targeting {self.enc.version}")
            return
        if a.kind is AttrKind.UNIT or (a.optional and a.name not in present):
            return
        if value is None:
            if a.kind is AttrKind.BOOL_ARRAY:  # absent (e.g. read from an older file): all false
                group = op.operand_group(op.definition.operand_index(a.length_of)) if a.length_of else ()
                value = (False,) * len(group)
            else:
                raise WriteError(f"'{op.definition.full_name}' is missing attribute '{a.name}'")
        _INLINE_ENCODERS[a.kind](self.enc, value, buf)

    def _operands(self, op: Operation, buf: bytearray) -> None:
        defn = op.definition
        if defn.operand_encoding is OperandEncoding.COUNTED:
            varint(len(op.operands), buf)
            for v in op.operands:
                self._ref(v, buf)
            return
        for i, o in enumerate(defn.operands):
            group = op.operand_group(i)
            if o.since > self.enc.version:
                if group:
                    raise WriteError(f"operand '{o.name}' of '{defn.full_name}' requires bytecode version "
                                     f"{o.since}+, but targeting {self.enc.version}")
                continue
            if o.multiplicity is Multiplicity.VARIADIC:
                varint(len(group), buf)
            for v in group:
                self._ref(v, buf)

    def _region(self, region: Any, buf: bytearray) -> None:
        varint(len(region.blocks), buf)
        mark = self.next_id
        for block in region.blocks:
            varint(len(block.args), buf)
            for arg in block.args:
                self.enc.type(arg.type, buf)
                self._define(arg)
            varint(len(block.ops), buf)
            for op in block.ops:
                self.op(op, buf)
            self.next_id = mark


def _is_set(value: Any) -> bool:
    """Present in the IR (enum members equal to 0 count as present)."""
    return value is not None and value is not False


def _enc_enum(enc: Encoder, v: Any, buf: bytearray) -> None:
    varint(int(v), buf)


def _enc_array(enc: Encoder, v: Any, buf: bytearray) -> None:
    elements = v.elements if isinstance(v, A.ArrayAttr) else v
    varint(len(elements), buf)
    for e in elements:
        enc.attribute(e, buf)


def _enc_bool_array(enc: Encoder, v: Any, buf: bytearray) -> None:
    varint(len(v), buf)
    buf += bytes(int(bool(x)) for x in v)


_INLINE_ENCODERS: dict[AttrKind, Callable[[Encoder, Any, bytearray], None]] = {
    AttrKind.ENUM: _enc_enum,
    AttrKind.INT: lambda enc, v, buf: varint(v, buf),
    AttrKind.BOOL: lambda enc, v, buf: buf.append(int(bool(v))),
    AttrKind.STRING: lambda enc, v, buf: enc.string(v, buf),
    AttrKind.TYPE: lambda enc, v, buf: enc.type(v, buf),
    AttrKind.TAGGED: lambda enc, v, buf: enc.attribute(v, buf),
    AttrKind.ARRAY: _enc_array,
    AttrKind.DENSE: lambda enc, v, buf: enc.constant(v.data, buf),
    AttrKind.I32_ARRAY: lambda enc, v, buf: int_list(tuple(v), 4, buf),
    AttrKind.BOOL_ARRAY: _enc_bool_array,
    AttrKind.HINTS: lambda enc, v, buf: enc.dictionary(v.entries, buf),
}


def _tag(tag: AttrTag, buf: bytearray) -> None:
    buf.append(int(tag))


def _enc_integer(enc: Encoder, a: A.IntegerAttr, buf: bytearray) -> None:
    _tag(AttrTag.INTEGER, buf)
    enc.type(a.type, buf)
    if a.type.bitwidth == 1:
        buf.append(a.value & 1)
    else:
        varint(a.value & ((1 << a.type.bitwidth) - 1), buf)


def _enc_float(enc: Encoder, a: A.FloatAttr, buf: bytearray) -> None:
    _tag(AttrTag.FLOAT, buf)
    enc.type(a.type, buf)
    width = 19 if a.type.name == "tf32" else a.type.bitwidth
    if width <= 8:
        buf.append(a.bits)
    else:
        signed_varint(a.bits, buf)


def _enc_bool(enc: Encoder, a: A.BoolAttr, buf: bytearray) -> None:
    _tag(AttrTag.BOOL, buf)
    buf.append(int(a.value))


def _enc_type(enc: Encoder, a: A.TypeAttr, buf: bytearray) -> None:
    _tag(AttrTag.TYPE, buf)
    enc.type(a.value, buf)


def _enc_string(enc: Encoder, a: A.StringAttr, buf: bytearray) -> None:
    _tag(AttrTag.STRING, buf)
    enc.string(a.value, buf)


def _enc_array_attr(enc: Encoder, a: A.ArrayAttr, buf: bytearray) -> None:
    _tag(AttrTag.ARRAY, buf)
    _enc_array(enc, a, buf)


def _enc_dense(enc: Encoder, a: A.DenseElementsAttr, buf: bytearray) -> None:
    _tag(AttrTag.DENSE_ELEMENTS, buf)
    enc.type(a.type, buf)
    if not isinstance(a.data, bytes):
        raise WriteError("string dense elements have no bytecode encoding")
    enc.constant(a.data, buf)


def _enc_div_by(enc: Encoder, a: A.DivByAttr, buf: bytearray) -> None:
    _tag(AttrTag.DIV_BY, buf)
    varint(a.divisor, buf)
    buf.append((a.every is not None) | ((a.along is not None) << 1))
    if a.every is not None:
        signed_varint(a.every, buf)
    if a.along is not None:
        signed_varint(a.along, buf)


def _enc_same_elements(enc: Encoder, a: A.SameElementsAttr, buf: bytearray) -> None:
    _tag(AttrTag.SAME_ELEMENTS, buf)
    int_list(a.values, 8, buf)


def _enc_dict(enc: Encoder, a: A.DictAttr, buf: bytearray) -> None:
    _tag(AttrTag.DICTIONARY, buf)
    enc.dictionary(a.entries, buf)


def _enc_hints(enc: Encoder, a: A.OptimizationHintsAttr, buf: bytearray) -> None:
    _tag(AttrTag.OPTIMIZATION_HINTS, buf)
    enc.dictionary(a.entries, buf)


def _enc_bounded(enc: Encoder, a: A.BoundedAttr, buf: bytearray) -> None:
    _tag(AttrTag.BOUNDED, buf)
    buf.append((a.lower is not None) | ((a.upper is not None) << 1))
    if a.lower is not None:
        signed_varint(a.lower, buf)
    if a.upper is not None:
        signed_varint(a.upper, buf)


_ATTR_ENCODERS: dict[type, Callable[[Encoder, Any, bytearray], None]] = {
    A.IntegerAttr: _enc_integer, A.FloatAttr: _enc_float, A.BoolAttr: _enc_bool, A.TypeAttr: _enc_type,
    A.StringAttr: _enc_string, A.ArrayAttr: _enc_array_attr, A.DenseElementsAttr: _enc_dense,
    A.DivByAttr: _enc_div_by, A.SameElementsAttr: _enc_same_elements, A.DictAttr: _enc_dict,
    A.OptimizationHintsAttr: _enc_hints, A.BoundedAttr: _enc_bounded,
}


def write_bytecode(module: Module, version: Optional[Version] = None) -> bytes:
    version = version or module.version
    if not is_supported(version):
        raise WriteError(f"cannot write bytecode version {version}")
    enc = Encoder(module, version)
    payloads: dict[int, bytes] = {}

    funcs = bytearray()
    varint(len(module.functions), funcs)
    for i, fn in enumerate(module.functions):
        enc.function(fn, i + 1, funcs)
    payloads[SectionId.FUNCTION] = bytes(funcs)
    if module.globals:
        payloads[SectionId.GLOBAL] = _globals(enc, module)
    payloads[SectionId.CONSTANT] = _table(list(enc.constants.items), 8)
    payloads[SectionId.DEBUG] = _debug(enc)
    payloads[SectionId.TYPE] = _table(enc.types.encoded(), 4)
    payloads[SectionId.STRING] = _table(list(enc.strings.items), 4)

    preview = any(PREVIEW_OPCODE_BASE <= op.definition.opcode < INTERNAL_OPCODE_BASE for fn in module.functions for op in fn.walk())
    out = bytearray(MAGIC)
    out += bytes([version.major, version.minor]) + (PREVIEW_TAG_BIT if preview else 0).to_bytes(2, "little")
    sections = enc.layout.sections if enc.layout else DEFAULT_SECTIONS
    for sid, alignment in sections:
        if sid == SectionId.END:
            continue
        data = payloads.pop(sid, None)
        if data is not None:
            _section(out, sid, alignment, data)
    for sid, alignment in DEFAULT_SECTIONS:  # sections the layout did not have
        if sid in payloads:
            _section(out, sid, alignment, payloads.pop(sid))
    out.append(SectionId.END)
    return bytes(out)


def _section(out: bytearray, sid: int, alignment: int, data: bytes) -> None:
    out.append(sid | (0x80 if alignment > 1 else 0))
    varint(len(data), out)
    if alignment > 1:
        varint(alignment, out)
        pad(out, alignment)
    out += data


def _table(entries: list[bytes], width: int) -> bytes:
    buf = bytearray()
    write_offset_table(entries, width, buf, 0)
    return bytes(buf)


def _globals(enc: Encoder, module: Module) -> bytes:
    buf = bytearray()
    varint(len(module.globals), buf)
    for g in module.globals:
        enc.string(g.name, buf)
        enc.type(g.type, buf)
        enc.constant(g.data, buf)
        varint(g.alignment, buf)
        if enc.version >= V13_3:
            buf.append(int(g.is_private))
            varint(int(g.constant), buf)
        elif g.is_private or g.constant:
            raise WriteError(f"private or constant globals require bytecode version {V13_3}+, "
                             f"but targeting {enc.version}")
    return bytes(buf)


def _debug(enc: Encoder) -> bytes:
    buf = bytearray()
    varint(len(enc.debug_lists), buf)
    pad(buf, 4)
    offset = 0
    for ids in enc.debug_lists:
        buf += offset.to_bytes(4, "little")
        offset += len(ids)
    varint(offset, buf)
    pad(buf, 8)
    for ids in enc.debug_lists:
        for i in ids:
            buf += i.to_bytes(8, "little")
    records = enc.debug.encoded()
    if not records:  # cuTile never writes an empty record table
        records = [bytes([0])]
    write_offset_table(records, 4, buf, 0)
    return bytes(buf)
