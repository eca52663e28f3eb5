"""Bytecode versions (major, minor) and the set this implementation reads and writes."""
from __future__ import annotations

from functools import total_ordering

from ..record import record


@total_ordering
@record(frozen=True)
class Version:
    major: int
    minor: int

    @staticmethod
    def parse(text: str) -> "Version":
        parts = text.strip().split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"invalid bytecode version '{text}' (expected MAJOR.MINOR, e.g. 13.4)")
        return Version(int(parts[0]), int(parts[1]))

    def __lt__(self, other: "Version") -> bool:
        return (self.major, self.minor) < (other.major, other.minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


V13_1 = Version(13, 1)
V13_2 = Version(13, 2)
V13_3 = Version(13, 3)
V13_4 = Version(13, 4)
V13_5 = Version(13, 5)

SUPPORTED_VERSIONS = (V13_1, V13_2, V13_3, V13_4, V13_5)
OLDEST = SUPPORTED_VERSIONS[0]
NEWEST = SUPPORTED_VERSIONS[-1]


def is_supported(v: Version) -> bool:
    return v in SUPPORTED_VERSIONS
