"""A bounds-checked cursor over bytecode, reporting errors by absolute byte offset."""
from __future__ import annotations

from typing import NoReturn, Optional

from ..errors import BytecodeError


class ByteReader:
    """Reads little-endian fixed-width ints and LEB128 varints from ``data[start:end]``.

    Offsets in errors are absolute (relative to the whole file), so a reader over
    one section still points at the right byte.
    """

    __slots__ = ("data", "pos", "end", "filename")

    def __init__(self, data: bytes, start: int = 0, end: Optional[int] = None, filename: Optional[str] = None):
        self.data = data
        self.pos = start
        self.end = len(data) if end is None else end
        self.filename = filename

    # -- errors ---------------------------------------------------------------
    def fail(self, message: str, offset: Optional[int] = None) -> NoReturn:
        raise BytecodeError(message, self.pos if offset is None else offset, self.filename)

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def at_end(self) -> bool:
        return self.pos >= self.end

    def sub(self, length: int, what: str) -> "ByteReader":
        """A reader over the next ``length`` bytes; this reader skips past them."""
        if length > self.remaining:
            self.fail(f"{what} length {length} exceeds remaining data size {self.remaining}")
        sub = ByteReader(self.data, self.pos, self.pos + length, self.filename)
        self.pos += length
        return sub

    # -- primitives -----------------------------------------------------------
    def u8(self, what: str = "byte") -> int:
        if self.pos >= self.end:
            self.fail(f"unexpected end of data while reading {what}")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def fixed(self, size: int, what: str = "integer", signed: bool = False) -> int:
        if size > self.remaining:
            self.fail(f"unexpected end of data while reading {what}")
        v = int.from_bytes(self.data[self.pos:self.pos + size], "little", signed=signed)
        self.pos += size
        return v

    def raw(self, size: int, what: str = "data") -> bytes:
        if size > self.remaining:
            self.fail(f"{what} length {size} exceeds remaining data size {self.remaining}")
        b = self.data[self.pos:self.pos + size]
        self.pos += size
        return bytes(b)

    def varint(self, what: str = "varint", limit: Optional[int] = None, max_bits: int = 64) -> int:
        start = self.pos
        result = shift = 0
        while True:
            if self.pos >= self.end:
                self.fail(f"unexpected end of data while reading {what}", start)
            if shift >= max_bits:
                self.fail(f"{what} does not fit in {max_bits} bits", start)
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if result >> max_bits:
            self.fail(f"{what} does not fit in {max_bits} bits", start)
        if limit is not None and result > limit:
            self.fail(f"{what} {result} exceeds the maximum of {limit}", start)
        return result

    def signed_varint(self, what: str = "signed varint") -> int:
        v = self.varint(what)
        return (v >> 1) ^ -(v & 1)

    def count(self, what: str, min_item_size: int = 1) -> int:
        """A length prefix, checked against what is left so no bogus size allocates."""
        start = self.pos
        n = self.varint(what)
        if n * min_item_size > self.remaining:
            self.fail(f"{what} {n} exceeds remaining data size {self.remaining}", start)
        return n

    def int_list(self, width: int, what: str) -> tuple[int, ...]:
        """Count-prefixed list of signed little-endian ints of ``width`` bytes."""
        n = self.count(f"{what} count", width)
        return tuple(self.fixed(width, what, signed=True) for _ in range(n))

    def align(self, base: int, alignment: int) -> None:
        """Skip padding so that ``pos - base`` is a multiple of ``alignment``."""
        pad = -(self.pos - base) % alignment
        if pad > self.remaining:
            self.fail("unexpected end of data while reading alignment padding")
        self.pos += pad
