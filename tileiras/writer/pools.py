"""Interning tables (strings, types, constants, debug records) and their encodings."""
from __future__ import annotations

from typing import Generic, Hashable, Optional, TypeVar

from ..errors import TileIRError
from ..ir import debug as D
from ..ir import types as T
from ..ir.version import V13_3, V13_4, V13_5, Version
from ..tile.codes import COMPOSITE_TYPE_TAGS, SCALAR_TAG_BY_TYPE, SCALAR_TYPE_SINCE, TypeTag

K = TypeVar("K", bound=Hashable)


class WriteError(TileIRError):
    """The IR cannot be written (e.g. it uses features newer than the target version)."""


def varint(x: int, buf: bytearray) -> None:
    if x < 0:
        raise WriteError(f"cannot encode negative value {x} as an unsigned varint")
    while x >= 0x80:
        buf.append((x & 0x7F) | 0x80)
        x >>= 7
    buf.append(x)


def signed_varint(x: int, buf: bytearray) -> None:
    varint(~(x << 1) if x < 0 else x << 1, buf)


def int_list(values: tuple[int, ...], width: int, buf: bytearray) -> None:
    varint(len(values), buf)
    for v in values:
        buf += v.to_bytes(width, "little", signed=True)


def pad(buf: bytearray, alignment: int) -> None:
    buf += b"\xcb" * (-len(buf) % alignment)


class Pool(Generic[K]):
    """An ordered, interning table: ``index(key)`` appends unseen keys."""

    first_index = 0

    def __init__(self, seed: Optional[list[K]] = None):
        self.items: list[K] = []
        self._index: dict[K, int] = {}
        for item in seed or ():
            self._index.setdefault(item, len(self.items) + self.first_index)
            self.items.append(item)

    def index(self, key: K) -> int:
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self.items) + self.first_index
            self.items.append(key)
        return found

    def __len__(self) -> int:
        return len(self.items)


def write_offset_table(entries: list[bytes], width: int, buf: bytearray, base: int) -> None:
    """Count, padding (relative to ``base``), start offsets, then the entries."""
    varint(len(entries), buf)
    buf += b"\xcb" * (-(len(buf) - base) % width)
    offset = 0
    for e in entries:
        buf += offset.to_bytes(width, "little")
        offset += len(e)
    for e in entries:
        buf += e


class TypePool(Pool[T.Type]):
    def __init__(self, version: Version, strings: Pool[bytes], seed: Optional[list[T.Type]] = None):
        super().__init__(seed if seed is not None else [T.I1, T.I32])
        self.version = version

    def encoded(self) -> list[bytes]:
        out = []
        i = 0
        while i < len(self.items):  # encoding may intern more types (element types)
            out.append(self.encode(self.items[i]))
            i += 1
        return out

    def encode(self, t: T.Type) -> bytes:
        buf = bytearray()
        if isinstance(t, T.ScalarType):
            tag = SCALAR_TAG_BY_TYPE[t]
            self._require(SCALAR_TYPE_SINCE[tag], f"type '{t}'")
            varint(tag, buf)
            return bytes(buf)
        tag = _TYPE_TAGS[type(t)]
        self._require(COMPOSITE_TYPE_TAGS[tag], f"type '{t}'")
        varint(tag, buf)
        if isinstance(t, T.PointerType):
            self._ptr_flags(t.ptr_attr, buf)
            varint(self.index(t.pointee), buf)
            self._ptr_attr(t.ptr_attr, buf)
        elif isinstance(t, T.TileType):
            varint(self.index(t.element), buf)
            int_list(t.shape, 8, buf)
        elif isinstance(t, T.TensorViewType):
            self._ptr_flags(t.ptr_attr, buf)
            varint(self.index(t.element), buf)
            int_list(t.shape, 8, buf)
            int_list(t.strides, 8, buf)
            self._ptr_attr(t.ptr_attr, buf)
        elif isinstance(t, T.PartitionViewType):
            self._partition_view(t, buf)
        elif isinstance(t, T.GatherScatterViewType):
            varint(t.padding_value is not None, buf)
            int_list(t.tile_shape, 4, buf)
            varint(self.index(t.tensor_view), buf)
            varint(t.sparse_dim, buf)
            _padding(t.padding_value, buf)
        elif isinstance(t, T.StridedViewType):
            varint(t.padding_value is not None, buf)
            int_list(t.tile_shape, 4, buf)
            int_list(t.traversal_strides, 4, buf)
            varint(self.index(t.tensor_view), buf)
            int_list(t.dim_map, 4, buf)
            _padding(t.padding_value, buf)
        elif isinstance(t, T.FunctionType):
            for group in (t.inputs, t.results):
                varint(len(group), buf)
                for x in group:
                    varint(self.index(x), buf)
        return bytes(buf)

    def _partition_view(self, t: T.PartitionViewType, buf: bytearray) -> None:
        if self.version >= V13_3:
            varint(t.padding_value is not None, buf)
        int_list(t.tile_shape, 4, buf)
        varint(self.index(t.tensor_view), buf)
        int_list(t.dim_map, 4, buf)
        if self.version < V13_3:
            varint(t.padding_value is not None, buf)
        _padding(t.padding_value, buf)

    def _ptr_flags(self, attr: Optional[T.PtrAttr], buf: bytearray) -> None:
        if self.version >= V13_4:
            varint(attr is not None, buf)
        elif attr is not None:
            raise WriteError(f"ptr_attr requires bytecode version {V13_4}+, but targeting {self.version}")

    def _ptr_attr(self, attr: Optional[T.PtrAttr], buf: bytearray) -> None:
        if attr is not None:
            buf.append(int(attr))

    def _require(self, since: Version, what: str) -> None:
        if self.version < since:
            raise WriteError(f"{what} requires bytecode version {since}+, but targeting {self.version}")


def _padding(p: Optional[T.PaddingValue], buf: bytearray) -> None:
    if p is not None:
        buf.append(int(p))


_TYPE_TAGS = {
    T.PointerType: TypeTag.POINTER, T.TileType: TypeTag.TILE, T.TensorViewType: TypeTag.TENSOR_VIEW,
    T.PartitionViewType: TypeTag.PARTITION_VIEW, T.FunctionType: TypeTag.FUNCTION,
    T.TokenType: TypeTag.TOKEN, T.GatherScatterViewType: TypeTag.GATHER_SCATTER_VIEW,
    T.StridedViewType: TypeTag.STRIDED_VIEW,
}


class DebugPool(Pool[D.DebugAttr]):
    """Debug records, ids starting at 1 (0 means no location)."""

    first_index = 1

    def __init__(self, version: Version, strings: Pool[bytes], seed: Optional[list[D.DebugAttr]] = None):
        super().__init__(seed)
        self.version = version
        self.strings = strings

    def ref(self, rec: Optional[D.DebugAttr]) -> int:
        return 0 if rec is None else self.index(rec)

    def encoded(self) -> list[bytes]:
        out = []
        i = 0
        while i < len(self.items):
            out.append(self.encode(self.items[i]))
            i += 1
        return out

    def _str(self, s: str, buf: bytearray) -> None:
        varint(self.strings.index(s.encode()), buf)

    def encode(self, rec: D.DebugAttr) -> bytes:
        buf = bytearray([rec.tag])
        if isinstance(rec, D.DIFile):
            self._str(rec.name, buf)
            self._str(rec.directory, buf)
        elif isinstance(rec, D.DICompileUnit):
            varint(self.index(rec.file), buf)
        elif isinstance(rec, D.DILexicalBlock):
            varint(self.index(rec.scope), buf)
            varint(self.index(rec.file), buf)
            varint(rec.line, buf)
            varint(rec.column, buf)
        elif isinstance(rec, D.DISubprogram):
            varint(self.index(rec.file), buf)
            varint(rec.line, buf)
            self._str(rec.name, buf)
            self._str(rec.linkage_name, buf)
            varint(self.index(rec.compile_unit), buf)
            varint(rec.scope_line, buf)
            if self.version >= V13_5:
                varint(rec.flags or 0, buf)
        elif isinstance(rec, D.DICallSite):
            varint(self.index(rec.callee), buf)
            varint(self.index(rec.caller), buf)
        elif isinstance(rec, D.DILoc):
            varint(self.index(rec.scope), buf)
            self._str(rec.filename, buf)
            varint(rec.line, buf)
            varint(rec.column, buf)
        return bytes(buf)
