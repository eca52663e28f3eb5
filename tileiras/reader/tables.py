"""The string, type and constant tables, and self-contained attributes."""
from __future__ import annotations

from typing import Callable, Optional

from ..ir import attrs as A
from ..ir import types as T
from ..ir.version import V13_3, V13_4, Version
from ..tile.codes import (COMPOSITE_TYPE_TAGS, SCALAR_TYPE_BY_TAG, SCALAR_TYPE_SINCE, AttrTag, TypeTag)
from .stream import ByteReader


def read_offset_table(r: ByteReader, width: int, what: str) -> list[tuple[int, int]]:
    """Count, padding to ``width``, ``width``-byte start offsets, then the blob.

    Returns absolute (start, end) byte ranges of every entry.
    """
    base = r.pos
    n = r.count(f"number of {what}s", width)
    if n == 0:
        return []
    r.align(base, width)
    if n * width > r.remaining:
        r.fail(f"insufficient data for {what} indices")
    starts = [r.fixed(width, f"{what} index") for _ in range(n)]
    blob_start, blob_size = r.pos, r.remaining
    ranges = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < n else blob_size
        if not start <= end <= blob_size:
            r.fail(f"invalid {what} start index {start} for {what} {i} (data size {blob_size})")
        ranges.append((blob_start + start, blob_start + end))
    r.pos = r.end
    return ranges


class StringTable:
    def __init__(self, data: bytes, ranges: list[tuple[int, int]], filename: Optional[str]):
        self.data, self.ranges, self.filename = data, ranges, filename
        self.raw: list[bytes] = [data[s:e] for s, e in ranges]

    def get(self, index: int, r: ByteReader) -> str:
        if index >= len(self.raw):
            r.fail(f"string index {index} out of range ({len(self.raw)} strings)")
        try:
            return self.raw[index].decode("utf-8")
        except UnicodeDecodeError:
            r.fail(f"string {index} is not valid UTF-8", self.ranges[index][0])

    def read(self, r: ByteReader, what: str = "string index") -> str:
        return self.get(r.varint(what), r)


class TypeTable:
    """Lazily decoded types (a type may refer to any other entry)."""

    def __init__(self, data: bytes, ranges: list[tuple[int, int]], version: Version, filename: Optional[str]):
        self.data, self.ranges, self.version, self.filename = data, ranges, version, filename
        self._decoded: dict[int, T.Type] = {}
        self._in_progress: set[int] = set()

    def __len__(self) -> int:
        return len(self.ranges)

    def get(self, index: int, r: ByteReader) -> T.Type:
        if index in self._decoded:
            return self._decoded[index]
        if index >= len(self.ranges):
            r.fail(f"type index {index} out of range ({len(self.ranges)} types)")
        if index in self._in_progress:
            r.fail(f"type {index} refers to itself")
        self._in_progress.add(index)
        start, end = self.ranges[index]
        sub = ByteReader(self.data, start, end, self.filename)
        t = self._decode(sub)
        if not sub.at_end():
            sub.fail(f"unexpected trailing data in type {index}")
        self._in_progress.discard(index)
        self._decoded[index] = t
        return t

    def read(self, r: ByteReader) -> T.Type:
        return self.get(r.varint("type index"), r)

    def all(self) -> list[T.Type]:
        r = ByteReader(self.data, 0, 0, self.filename)
        return [self.get(i, r) for i in range(len(self.ranges))]

    # -- decoding -------------------------------------------------------------
    def _decode(self, r: ByteReader) -> T.Type:
        start = r.pos
        tag = r.varint("type tag")
        if tag in SCALAR_TYPE_BY_TAG:
            t = SCALAR_TYPE_BY_TAG[tag]
            if self.version < SCALAR_TYPE_SINCE[tag]:
                r.fail(f"type '{t}' requires bytecode version {SCALAR_TYPE_SINCE[tag]}+, "
                       f"file version is {self.version}", start)
            return t
        if tag not in COMPOSITE_TYPE_TAGS:
            r.fail(f"unknown type tag {tag}", start)
        kind = TypeTag(tag)
        if self.version < COMPOSITE_TYPE_TAGS[tag]:
            r.fail(f"type tag {tag} requires bytecode version {COMPOSITE_TYPE_TAGS[tag]}+, "
                   f"file version is {self.version}", start)
        return _COMPOSITE_DECODERS[kind](self, r)

    def _flags(self, r: ByteReader, since: Version) -> int:
        return r.varint("type flags") if self.version >= since else 0

    def _pointer(self, r: ByteReader) -> T.Type:
        flags = self._flags(r, V13_4)
        pointee = self.read(r)
        return T.PointerType(pointee, _ptr_attr(r) if flags & 1 else None)

    def _tile(self, r: ByteReader) -> T.Type:
        start = r.pos
        elem = self.read(r)
        shape = r.int_list(8, "tile shape")
        if shape and _is_subbyte_pointer(elem):
            # NVIDIA's reader refuses the type itself, at an offset counted from the byte
            # after the type tag to the end of the entry (checked with 13.5)
            r.fail(f"tiles of {elem} must have rank 0; use an f4 tile view for memory accesses", r.pos - start)
        return T.TileType(elem, shape)

    def _tensor_view(self, r: ByteReader) -> T.Type:
        flags = self._flags(r, V13_4)
        elem = self.read(r)
        shape = r.int_list(8, "tensor_view shape")
        strides = r.int_list(8, "tensor_view strides")
        return T.TensorViewType(elem, shape, strides, _ptr_attr(r) if flags & 1 else None)

    def _tensor_view_ref(self, r: ByteReader) -> T.TensorViewType:
        start = r.pos
        tv = self.read(r)
        if not isinstance(tv, T.TensorViewType):
            r.fail(f"expected a tensor_view type, got '{tv}'", start)
        return tv

    def _partition_view(self, r: ByteReader) -> T.Type:
        flags = self._flags(r, V13_3)
        tile_shape = r.int_list(4, "tile shape")
        tv = self._tensor_view_ref(r)
        dim_map = r.int_list(4, "dim_map")
        if self.version < V13_3:
            flags = r.varint("padding flag")
        return T.PartitionViewType(tile_shape, tv, dim_map, _padding(r) if flags & 1 else None)

    def _gather_scatter_view(self, r: ByteReader) -> T.Type:
        flags = r.varint("type flags")
        tile_shape = r.int_list(4, "tile shape")
        tv = self._tensor_view_ref(r)
        sparse_dim = r.varint("sparse_dim")
        return T.GatherScatterViewType(tile_shape, tv, sparse_dim, _padding(r) if flags & 1 else None)

    def _strided_view(self, r: ByteReader) -> T.Type:
        flags = r.varint("type flags")
        tile_shape = r.int_list(4, "tile shape")
        traversal = r.int_list(4, "traversal_strides")
        tv = self._tensor_view_ref(r)
        dim_map = r.int_list(4, "dim_map")
        return T.StridedViewType(tile_shape, traversal, tv, dim_map, _padding(r) if flags & 1 else None)

    def _function(self, r: ByteReader) -> T.Type:
        ins = tuple(self.read(r) for _ in range(r.count("number of parameters")))
        outs = tuple(self.read(r) for _ in range(r.count("number of results")))
        return T.FunctionType(ins, outs)

    def _token(self, r: ByteReader) -> T.Type:
        return T.TOKEN


_COMPOSITE_DECODERS: dict[TypeTag, Callable[[TypeTable, ByteReader], T.Type]] = {
    TypeTag.POINTER: TypeTable._pointer,
    TypeTag.TILE: TypeTable._tile,
    TypeTag.TENSOR_VIEW: TypeTable._tensor_view,
    TypeTag.PARTITION_VIEW: TypeTable._partition_view,
    TypeTag.FUNCTION: TypeTable._function,
    TypeTag.TOKEN: TypeTable._token,
    TypeTag.GATHER_SCATTER_VIEW: TypeTable._gather_scatter_view,
    TypeTag.STRIDED_VIEW: TypeTable._strided_view,
}


def _is_subbyte_pointer(t: T.Type) -> bool:
    return isinstance(t, T.PointerType) and isinstance(t.pointee, T.ScalarType) and t.pointee.bitwidth == 4


def _ptr_attr(r: ByteReader) -> T.PtrAttr:
    start = r.pos
    v = r.u8("ptr_attr")
    try:
        return T.PtrAttr(v)
    except ValueError:
        r.fail(f"expected ptr_attr to be a valid pointer classification but got invalid enum value {v}", start)


def _padding(r: ByteReader) -> T.PaddingValue:
    start = r.pos
    v = r.u8("padding_value")
    try:
        return T.PaddingValue(v)
    except ValueError:
        r.fail(f"invalid padding_value {v}", start)


class ConstantTable:
    def __init__(self, data: bytes, ranges: list[tuple[int, int]], filename: Optional[str]):
        self.data, self.ranges, self.filename = data, ranges, filename
        self.raw: list[bytes] = [data[s:e] for s, e in ranges]

    def payload(self, index: int, r: ByteReader) -> bytes:
        """The element bytes of constant ``index`` (after its varint size)."""
        if index >= len(self.ranges):
            r.fail(f"constant index {index} out of bounds ({len(self.ranges)} constants)")
        start, end = self.ranges[index]
        sub = ByteReader(self.data, start, end, self.filename)
        size = sub.varint("constant size")
        return sub.raw(size, "constant")


def dense_payload_ok(t: T.Type, data: bytes) -> bool:
    """Is ``data`` a valid raw buffer (full or splat) for tile type ``t``?"""
    if not isinstance(t, T.TileType) or not isinstance(t.element, T.ScalarType):
        return False
    if t.element.bitwidth == 1:  # i1 elements are packed eight to a byte
        return len(data) in ((t.num_elements + 7) // 8, 1)
    elem_bytes = max(1, t.element.bitwidth // 8) if t.element.name != "tf32" else 4
    return len(data) in (elem_bytes * t.num_elements, elem_bytes)


class AttrReader:
    """Decodes self-contained attributes (tag + payload)."""

    def __init__(self, strings: StringTable, types: TypeTable, constants: ConstantTable):
        self.strings, self.types, self.constants = strings, types, constants

    def read(self, r: ByteReader) -> A.Attribute:
        start = r.pos
        tag = r.u8("attribute tag")
        try:
            kind = AttrTag(tag)
        except ValueError:
            r.fail(f"unknown attribute tag {tag}", start)
        return _ATTR_DECODERS[kind](self, r)

    def dictionary(self, r: ByteReader) -> A.DictAttr:
        entries = []
        for i in range(r.count("dictionary size", 2)):
            key = self.strings.read(r, "dictionary key")
            if not key:
                r.fail(f"invalid empty attribute name for DictionaryAttr element {i}")
            entries.append((key, self.read(r)))
        keys = [k for k, _ in entries]
        if len(set(keys)) != len(keys):
            r.fail("failed to parse DictionaryAttr, duplicate key found")
        return A.DictAttr(tuple(entries))

    def hints(self, r: ByteReader) -> A.OptimizationHintsAttr:
        start = r.pos
        d = self.dictionary(r)
        for arch, value in d.entries:
            if not isinstance(value, A.DictAttr):
                r.fail(f"optimization hints for '{arch}' must be a dictionary", start)
        return A.OptimizationHintsAttr(tuple(d.entries))  # type: ignore[arg-type]

    def _integer(self, r: ByteReader) -> A.Attribute:
        start = r.pos
        t = self.types.read(r)
        if not (isinstance(t, T.ScalarType) and t.is_int):
            r.fail(f"failed to read valid IntegerType for IntegerAttr, got '{t}'", start)
        if t.bitwidth == 1:
            return A.IntegerAttr(t, r.u8("bool") & 1)
        v = r.varint("integer value")
        if v >> t.bitwidth:
            r.fail(f"value {v} does not fit in {t.bitwidth} bits", start)
        return A.IntegerAttr(t, v)

    def _float(self, r: ByteReader) -> A.Attribute:
        start = r.pos
        t = self.types.read(r)
        if not (isinstance(t, T.ScalarType) and t.is_float):
            r.fail(f"failed to read valid FloatType for FloatAttr, got '{t}'", start)
        width = 19 if t.name == "tf32" else t.bitwidth
        # zigzag-encoded bit pattern; an f64 with its sign bit set needs 65 bits
        v = r.u8("float value") if width <= 8 else r.varint("float value", max_bits=70)
        if width > 8:
            v = (v >> 1) ^ -(v & 1)
        if v < 0 or v >> width:
            r.fail(f"value {v} does not fit in {width} bits", start)
        return A.FloatAttr(t, v)

    def _bool(self, r: ByteReader) -> A.Attribute:
        return A.BoolAttr(bool(r.u8("bool")))

    def _type(self, r: ByteReader) -> A.Attribute:
        return A.TypeAttr(self.types.read(r))

    def _string(self, r: ByteReader) -> A.Attribute:
        return A.StringAttr(self.strings.read(r))

    def _array(self, r: ByteReader) -> A.Attribute:
        return A.ArrayAttr(tuple(self.read(r) for _ in range(r.count("array size"))))

    def _dense(self, r: ByteReader) -> A.Attribute:
        start = r.pos
        t = self.types.read(r)
        data = self.constants.payload(r.varint("constant index"), r)
        if not dense_payload_ok(t, data):
            r.fail(f"constant data of {len(data)} bytes does not match type '{t}'", start)
        return A.DenseElementsAttr(t, data)

    def _div_by(self, r: ByteReader) -> A.Attribute:
        divisor = r.varint("divisor")
        flags = _optional_flags(r, "div_by flags", 2)
        every = r.signed_varint("every") if flags & 1 else None
        along = r.signed_varint("along") if flags & 2 else None
        return A.DivByAttr(divisor, every, along)

    def _same_elements(self, r: ByteReader) -> A.Attribute:
        return A.SameElementsAttr(r.int_list(8, "same_elements value"))

    def _dict(self, r: ByteReader) -> A.Attribute:
        return self.dictionary(r)

    def _hints(self, r: ByteReader) -> A.Attribute:
        return self.hints(r)

    def _bounded(self, r: ByteReader) -> A.Attribute:
        flags = _optional_flags(r, "bounded flags", 2)
        lower = r.signed_varint("lower bound") if flags & 1 else None
        upper = r.signed_varint("upper bound") if flags & 2 else None
        return A.BoundedAttr(lower, upper)


def _optional_flags(r: ByteReader, what: str, count: int) -> int:
    """A byte saying which of ``count`` optional parameters follow; other bits are errors
    (NVIDIA's reader refuses them)."""
    flags = r.u8(what)
    if flags >> count:
        r.fail("unused bits set in optional parameter flags", r.pos - 1)
    return flags


_ATTR_DECODERS: dict[AttrTag, Callable[[AttrReader, ByteReader], A.Attribute]] = {
    AttrTag.INTEGER: AttrReader._integer,
    AttrTag.FLOAT: AttrReader._float,
    AttrTag.BOOL: AttrReader._bool,
    AttrTag.TYPE: AttrReader._type,
    AttrTag.STRING: AttrReader._string,
    AttrTag.ARRAY: AttrReader._array,
    AttrTag.DENSE_ELEMENTS: AttrReader._dense,
    AttrTag.DIV_BY: AttrReader._div_by,
    AttrTag.SAME_ELEMENTS: AttrReader._same_elements,
    AttrTag.DICTIONARY: AttrReader._dict,
    AttrTag.OPTIMIZATION_HINTS: AttrReader._hints,
    AttrTag.BOUNDED: AttrReader._bounded,
}
