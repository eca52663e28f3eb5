"""Malformed-bytecode fixtures, built from a valid file by small, named edits.

Each ``Mutation`` knows the exit code and (where it does not depend on the file's
contents) the first error line NVIDIA's tileiras prints for it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

MAGIC = b"\x7fTileIR\x00"
HEADER_SIZE = 12


def with_version(data: bytes, major: int, minor: int) -> bytes:
    return data[:8] + bytes([major, minor]) + data[10:]


def with_tag(data: bytes, tag: int) -> bytes:
    return data[:10] + tag.to_bytes(2, "little") + data[12:]


def version_of(data: bytes) -> str:
    return f"{data[8]}.{data[9]}"


@dataclass(frozen=True)
class Mutation:
    name: str
    apply: Callable[[bytes], bytes]
    exit_code: int
    #: NVIDIA tileiras' first stderr line for this input (None: too file-specific to pin)
    expected: Optional[Callable[[bytes], str]] = None


def _unsupported(v: str) -> Callable[[bytes], str]:
    return lambda d: f"error: unsupported Tile IR bytecode version: {v}"


NOT_TILE_IR = "error: input does not correspond to Tile IR bytecode"

MUTATIONS = (
    Mutation("empty", lambda d: b"", 3, lambda d: NOT_TILE_IR),
    Mutation("bad_magic", lambda d: b"\x7fTileIX\x00" + d[8:], 3, lambda d: NOT_TILE_IR),
    Mutation("elf", lambda d: b"\x7fELF\x02\x01\x01" + bytes(57), 3, lambda d: NOT_TILE_IR),
    Mutation("text", lambda d: b"cuda_tile.module @m {}\n", 3, lambda d: NOT_TILE_IR),
    # NVIDIA's tileiras reads past the end here and prints a garbage version; only rc is pinned.
    Mutation("magic_only", lambda d: d[:8], 3),
    Mutation("magic_version", lambda d: d[:10], 3,
             lambda d: "error: error at offset 10: failed to parse bytecode header"),
    Mutation("header_only", lambda d: d[:12], 3,
             lambda d: "error: error at offset 12: unexpected end of data while reading section header"),
    Mutation("truncated_100", lambda d: d[:100], 3),
    Mutation("truncated_1", lambda d: d[:-1], 3,
             lambda d: f"error: error at offset {len(d) - 1}: unexpected end of data while reading "
                       "section header"),
    Mutation("trailing_garbage", lambda d: d + b"\x00\x00", 3,
             lambda d: f"error: error at offset {len(d)}: end section is not the last section"),
    Mutation("version_99_0", lambda d: with_version(d, 99, 0), 3, _unsupported("99.0")),
    Mutation("version_12_1", lambda d: with_version(d, 12, 1), 3, _unsupported("12.1")),
    Mutation("version_13_0", lambda d: with_version(d, 13, 0), 3, _unsupported("13.0")),
    Mutation("version_13_6", lambda d: with_version(d, 13, 6), 3, _unsupported("13.6")),
    Mutation("preview_tag", lambda d: with_tag(d, 1), 3,
             lambda d: f"error: error at offset 12: public-preview bytecode at version {version_of(d)}.1 "
                       "is not readable; preview content is only valid at the current version 13.5"),
    Mutation("unknown_tag", lambda d: with_tag(d, 2), 3,
             lambda d: "error: error at offset 12: header has unrecognized version tag bits (0x2);"),
)
