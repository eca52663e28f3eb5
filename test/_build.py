"""Test inputs written from Tile IR text (never from ../shared)."""
from __future__ import annotations

from pathlib import Path

from tileiras.ir.version import NEWEST, Version
from tileiras.text.parser import parse_module
from tileiras.writer import write_bytecode


def bytecode(text: str, version: Version = NEWEST) -> bytes:
    """``text`` (a whole module) as bytecode of ``version``."""
    return write_bytecode(parse_module(text, "k.mlir", version=version), version=version)


def bytecode_file(folder: Path, text: str, version: Version = NEWEST, name: str = "k.tileir") -> Path:
    """``bytecode(text)`` written to ``folder / name``."""
    path = folder / name
    path.write_bytes(bytecode(text, version))
    return path
