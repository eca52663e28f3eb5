"""Closed sets of inline attribute values, with their bytecode numbers and keywords."""
from __future__ import annotations

import enum


class TileEnum(enum.IntEnum):
    """An enum attribute: its value is the bytecode number, ``keyword`` its text spelling."""

    @property
    def keyword(self) -> str:
        return self.name.lower()

    @classmethod
    def from_keyword(cls, word: str) -> "TileEnum":
        for member in cls:
            if member.keyword == word:
                return member
        raise ValueError(f"unknown {cls.__name__} '{word}'")


class Signedness(TileEnum):
    UNSIGNED = 0
    SIGNED = 1


class IntegerOverflow(TileEnum):
    NONE = 0
    NO_SIGNED_WRAP = 1
    NO_UNSIGNED_WRAP = 2
    NO_WRAP = 3


class RoundingMode(TileEnum):
    NEAREST_EVEN = 0
    ZERO = 1
    NEGATIVE_INF = 2
    POSITIVE_INF = 3
    APPROX = 4
    FULL = 5
    NEAREST_INT_TO_ZERO = 6
    NEAREST_AWAY = 7


class ComparisonOrdering(TileEnum):
    UNORDERED = 0
    ORDERED = 1


class ComparisonPredicate(TileEnum):
    EQUAL = 0
    NOT_EQUAL = 1
    LESS_THAN = 2
    LESS_THAN_OR_EQUAL = 3
    GREATER_THAN = 4
    GREATER_THAN_OR_EQUAL = 5


class AtomicRMWMode(TileEnum):
    AND = 0
    OR = 1
    XOR = 2
    ADD = 3
    ADDF = 4
    MAX = 5
    MIN = 6
    UMAX = 7
    UMIN = 8
    XCHG = 9


class MemoryScope(TileEnum):
    TL_BLK = 0
    DEVICE = 1
    SYS = 2


class MemoryOrderingSemantics(TileEnum):
    WEAK = 0
    RELAXED = 1
    ACQUIRE = 2
    RELEASE = 3
    ACQ_REL = 4


class MultimemReductionKind(TileEnum):
    ADD = 0
    MIN = 1
    MAX = 2
    AND = 3
    OR = 4
    XOR = 5
    UMIN = 6
    UMAX = 7


class SymbolVisibility(TileEnum):
    PUBLIC = 0
    PRIVATE = 1


class Synchronization(TileEnum):
    NONE = 0
    WARP = 1
    WARPGROUP = 2
    CTA = 3
