"""Errors raised while interpreting a Tile IR module."""
from __future__ import annotations

from typing import Optional

from ..errors import TileIRError


class InterpError(TileIRError):
    """A kernel did something the reference interpreter cannot give a meaning to:
    an unsupported op or type, an unmasked access outside every buffer, a bad argument."""

    def __init__(self, message: str, op: Optional[object] = None):
        where = f"{op.name}: " if op is not None and hasattr(op, "name") else ""
        super().__init__(where + message)
        self.op = op


class TileAssertionError(InterpError):
    """A ``cuda_tile.assert`` found a false element.  ``failures`` lists
    ``(block_id, element_index, message)`` for every false element seen."""

    def __init__(self, failures: list[tuple[tuple[int, int, int], tuple[int, ...], str]]):
        first = failures[0]
        text = (f"assertion failed in tile block {first[0]} at element {first[1]}: "
                f"{first[2]!r}")
        if len(failures) > 1:
            text += f" (and {len(failures) - 1} more failing elements)"
        super().__init__(text)
        self.failures = failures
