"""Tile IR attribute values.

Self-contained (tagged) attributes of the bytecode map one-to-one to the classes
here.  Inline op attributes (enums, integers, strings, dense i32/bool arrays) are
stored directly as Python values on the operation: an ``enum.IntEnum`` member,
``int``, ``str``, ``tuple[int, ...]`` or ``tuple[bool, ...]``.
"""
from __future__ import annotations

from typing import Optional, Union

from ..record import record
from .types import Type


class Attribute:
    """Base of self-contained attributes."""


@record(frozen=True)
class IntegerAttr(Attribute):
    type: Type
    value: int  # stored zero-extended to the type's width, as in the bytecode


@record(frozen=True)
class FloatAttr(Attribute):
    type: Type
    bits: int  # the raw bit pattern of the value in ``type``


@record(frozen=True)
class BoolAttr(Attribute):
    value: bool


@record(frozen=True)
class TypeAttr(Attribute):
    value: Type


@record(frozen=True)
class StringAttr(Attribute):
    value: str


@record(frozen=True)
class ArrayAttr(Attribute):
    elements: tuple[Attribute, ...]


@record(frozen=True)
class DenseElementsAttr(Attribute):
    """Dense constant: raw little-endian element bytes (numeric) or strings."""

    type: Type
    data: Union[bytes, tuple[str, ...]]


@record(frozen=True)
class DivByAttr(Attribute):
    divisor: int
    every: Optional[int] = None
    along: Optional[int] = None


@record(frozen=True)
class SameElementsAttr(Attribute):
    values: tuple[int, ...]


@record(frozen=True)
class DictAttr(Attribute):
    entries: tuple[tuple[str, Attribute], ...]

    def get(self, key: str) -> Optional[Attribute]:
        for k, v in self.entries:
            if k == key:
                return v
        return None


@record(frozen=True)
class OptimizationHintsAttr(Attribute):
    """Per-architecture hint dictionaries: (("sm_90", DictAttr(...)), ...)."""

    entries: tuple[tuple[str, DictAttr], ...]


@record(frozen=True)
class BoundedAttr(Attribute):
    lower: Optional[int]
    upper: Optional[int]


def i1_elements(data: bytes, count: int) -> list[int]:
    """The ``count`` values (0/1) of i1 dense data, in one reading for every stage.

    MLIR packs i1 elements eight a byte, lowest index in the lowest bit; a single byte
    of equal bits (0x00 or 0xFF) is a splat; data of one byte an element (as some
    writers produce for more than eight elements) is read byte by byte."""
    if len(data) == 1 and data[0] in (0, 0xFF):
        return [data[0] & 1] * count
    if len(data) == (count + 7) // 8:
        return [(data[i // 8] >> (i % 8)) & 1 for i in range(count)]
    if len(data) == 1:
        return [int(data[0] != 0)] * count
    return [b & 1 for b in data]
