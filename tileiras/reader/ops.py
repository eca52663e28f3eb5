"""Generic operation decoder: one walker over the op registry."""
from __future__ import annotations

from typing import Any, Callable, Optional

from ..ir import attrs as A
from ..ir.core import Block, Operation, Region, Value
from ..ir.types import Type
from ..ir.version import Version
from ..tile import OPS_BY_OPCODE
from ..tile.opcodes import INTERNAL_OPCODE_BASE, PREVIEW_OPCODE_BASE
from ..tile.registry import Attr, AttrKind, Multiplicity, OpDef, OperandEncoding
from .stream import ByteReader
from .tables import AttrReader, ConstantTable, StringTable, TypeTable, dense_payload_ok

#: Nesting bound for regions, so hostile input cannot exhaust the Python stack.
MAX_REGION_DEPTH = 64


class BodyReader:
    """Decodes one function body.  ``order`` collects ops in pre-order, the order
    in which the debug section lists their locations."""

    def __init__(self, version: Version, strings: StringTable, types: TypeTable,
                 constants: ConstantTable, attrs: AttrReader, preview: bool = False):
        self.version = version
        self.preview = preview  # the header advertises preview content: preview opcodes are read
        self.strings, self.types, self.constants, self.attrs = strings, types, constants, attrs
        self.values: list[Value] = []
        self.order: list[Optional[Operation]] = []
        self.depth = 0

    def read_ops(self, r: ByteReader, block: Block, count: Optional[int] = None) -> None:
        """Read ``count`` ops into ``block`` (or until ``r`` is exhausted)."""
        i = 0
        while (r.remaining > 0) if count is None else (i < count):
            block.append(self.read_op(r))
            i += 1

    def read_op(self, r: ByteReader) -> Operation:
        start = r.pos
        opcode = r.varint("opcode")
        if opcode >= PREVIEW_OPCODE_BASE and not self.preview:
            r.fail(f"malformed bytecode: encountered public-preview opcode {opcode} "
                   "but the header does not advertise preview content", start)
        defn = OPS_BY_OPCODE.get(opcode) if opcode < INTERNAL_OPCODE_BASE else None
        if defn is None or defn.since > self.version:
            r.fail(f"unsupported opcode {opcode} for bytecode version {self.version}", start)
        slot = len(self.order)
        self.order.append(None)
        result_types = self._result_types(r, defn)
        fields = defn.flag_fields(self.version)
        flags = r.varint("flags") if defn.has_flags(self.version) else 0
        if flags >> len(fields) or any(flags >> i & 1 and f.since > self.version for i, f in enumerate(fields)):
            r.fail(f"invalid flags {flags:#x} for '{defn.full_name}' at version {self.version}", start)
        present = {f.name for i, f in enumerate(fields) if flags >> i & 1}
        attributes = self._attributes(r, defn, present, result_types)
        operands, segments = self._operands(r, defn, present)
        regions = self._regions(r, defn)
        live = len(result_types)
        # results newer than the file (e.g. print_tko's token before 13.2) exist in
        # the IR but take no value number in this file
        result_types += [res.default_type for res in defn.results
                         if res.since > self.version and res.default_type is not None]
        op = defn.cls(operands, attributes, result_types, regions, segments=segments)
        self.values.extend(op.results[:live])
        self.order[slot] = op
        return op

    # -- fields ---------------------------------------------------------------
    def _result_types(self, r: ByteReader, defn: OpDef) -> list[Type]:
        fixed = [res for res in defn.results if res.since <= self.version]
        if not defn.sized_results:
            return [self.types.read(r) for _ in fixed]
        start = r.pos
        n = r.count("number of results")
        if not any(res.variadic for res in fixed) and n != len(fixed):
            r.fail(f"'{defn.full_name}' expects {len(fixed)} results, got {n}", start)
        return [self.types.read(r) for _ in range(n)]

    def _attributes(self, r: ByteReader, defn: OpDef, present: set[str],
                    result_types: list[Type]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for a in defn.attrs:
            if a.since > self.version:
                if a.default is not None:
                    out[a.name] = a.default
                continue
            if a.kind is AttrKind.UNIT:
                if a.name in present:
                    out[a.name] = True
            elif not a.optional or a.name in present:
                out[a.name] = self._attribute(r, defn, a, result_types)
        return out

    def _attribute(self, r: ByteReader, defn: OpDef, a: Attr, result_types: list[Type]) -> Any:
        start = r.pos
        kind = a.kind
        if kind is AttrKind.ENUM:
            v = r.varint(f"'{a.name}' value")
            try:
                return a.enum(v)  # type: ignore[misc]
            except ValueError:
                r.fail(f"invalid value {v} for enum attribute '{a.name}' of '{defn.full_name}'", start)
        if kind is AttrKind.DENSE:
            t = result_types[0] if result_types else None
            data = self.constants.payload(r.varint("constant index"), r)
            if t is None or not dense_payload_ok(t, data):
                r.fail(f"constant data of {len(data)} bytes does not match type '{t}'", start)
            return A.DenseElementsAttr(t, data)
        return _ATTRIBUTE_READERS[kind](self, r)

    def _operands(self, r: ByteReader, defn: OpDef, present: set[str]) -> tuple[list[Value], list[int]]:
        live = [o for o in defn.operands if o.since <= self.version]
        operands: list[Value] = []
        segments: list[int] = []
        if defn.operand_encoding is OperandEncoding.COUNTED:
            start = r.pos
            n = r.count("number of operands")
            singles = sum(o.multiplicity is Multiplicity.SINGLE for o in live)
            extra = n - singles
            flexible = [o for o in live if o.multiplicity is not Multiplicity.SINGLE]
            if extra < 0 or (flexible and flexible[0].multiplicity is Multiplicity.OPTIONAL and extra > 1):
                r.fail(f"'{defn.full_name}' cannot take {n} operands", start)
            operands = [self._value(r) for _ in range(n)]
            segments = [1 if o.multiplicity is Multiplicity.SINGLE else extra for o in live]
        else:
            for o in live:
                if o.multiplicity is Multiplicity.SINGLE:
                    group = [self._value(r)]
                elif o.multiplicity is Multiplicity.VARIADIC:
                    group = [self._value(r) for _ in range(r.count(f"number of '{o.name}' operands"))]
                else:
                    group = [self._value(r)] if o.name in present else []
                operands += group
                segments.append(len(group))
        segments += [0] * (len(defn.operands) - len(live))
        return operands, segments

    def _value(self, r: ByteReader) -> Value:
        start = r.pos
        i = r.varint("operand index")
        if i >= len(self.values):
            r.fail(f"operand index {i} out of range ({len(self.values)} values defined)", start)
        return self.values[i]

    def _regions(self, r: ByteReader, defn: OpDef) -> list[Region]:
        if not defn.regions:
            return []
        start = r.pos
        n = r.varint("number of regions")
        if n != len(defn.regions):
            r.fail(f"'{defn.full_name}' expects {len(defn.regions)} regions, got {n}", start)
        if self.depth >= MAX_REGION_DEPTH:
            r.fail(f"regions nested deeper than {MAX_REGION_DEPTH} levels", start)
        self.depth += 1
        mark = len(self.values)
        regions = []
        for _ in range(n):
            blocks = []
            for _ in range(r.count("number of blocks")):
                arg_types = [self.types.read(r) for _ in range(r.count("number of block arguments"))]
                block = Block(arg_types)
                self.values.extend(block.args)
                self.read_ops(r, block, r.count("number of operations"))
                blocks.append(block)
                del self.values[mark:]
            regions.append(Region(blocks))
        self.depth -= 1
        return regions

    # -- inline attribute kinds ------------------------------------------------
    def _int(self, r: ByteReader) -> int:
        return r.varint("integer attribute")

    def _bool(self, r: ByteReader) -> bool:
        return bool(r.u8("bool attribute"))

    def _string(self, r: ByteReader) -> str:
        return self.strings.read(r)

    def _type(self, r: ByteReader) -> Type:
        return self.types.read(r)

    def _tagged(self, r: ByteReader) -> A.Attribute:
        return self.attrs.read(r)

    def _array(self, r: ByteReader) -> tuple[A.Attribute, ...]:
        return tuple(self.attrs.read(r) for _ in range(r.count("array size")))

    def _i32_array(self, r: ByteReader) -> tuple[int, ...]:
        return r.int_list(4, "i32 array element")

    def _bool_array(self, r: ByteReader) -> tuple[bool, ...]:
        return tuple(bool(r.u8("bool array element")) for _ in range(r.count("bool array size")))

    def _hints(self, r: ByteReader) -> A.OptimizationHintsAttr:
        return self.attrs.hints(r)


_ATTRIBUTE_READERS: dict[AttrKind, Callable[[BodyReader, ByteReader], Any]] = {
    AttrKind.INT: BodyReader._int,
    AttrKind.BOOL: BodyReader._bool,
    AttrKind.STRING: BodyReader._string,
    AttrKind.TYPE: BodyReader._type,
    AttrKind.TAGGED: BodyReader._tagged,
    AttrKind.ARRAY: BodyReader._array,
    AttrKind.I32_ARRAY: BodyReader._i32_array,
    AttrKind.BOOL_ARRAY: BodyReader._bool_array,
    AttrKind.HINTS: BodyReader._hints,
}
