"""User-facing errors.

Every error a user can cause is a ``TileIRError``; the CLIs print ``str(err)`` as
one line (``error: ...``) and exit with ``err.exit_code``.  Anything else escaping
is a bug in tileiras.
"""
from __future__ import annotations

from typing import Optional

#: Exit codes of the real tileiras.
EXIT_USAGE = 1        # bad usage, unreadable input
EXIT_BAD_OPTION = 2   # bad option values
EXIT_INVALID = 3      # parse / verify errors
EXIT_COMPILE = 5      # compilation failed


class TileIRError(Exception):
    exit_code = EXIT_INVALID

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"error: {self.message}"


class BytecodeError(TileIRError):
    """Malformed or unsupported bytecode, located by byte offset."""

    def __init__(self, message: str, offset: Optional[int] = None, filename: Optional[str] = None):
        super().__init__(message)
        self.offset = offset
        self.filename = filename

    def __str__(self) -> str:
        where = f"{self.filename}: " if self.filename else ""
        if self.offset is not None:
            where += f"error at offset {self.offset}: "
        return f"error: {where}{self.message}"


class VersionError(BytecodeError):
    """The file's bytecode version is not one this tool reads (or a target it cannot write)."""


class UsageError(TileIRError):
    exit_code = EXIT_USAGE


class OptionError(TileIRError):
    exit_code = EXIT_BAD_OPTION


class CompileError(TileIRError):
    exit_code = EXIT_COMPILE
