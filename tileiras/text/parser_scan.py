"""The character scanner under the Tile IR text parser, and its located error.

MLIR text needs context to tokenize (``2x4xf32`` is a dimension list inside
``tile<...>``, an identifier elsewhere), so the parser reads characters through
this scanner instead of a token list: every method skips whitespace and ``//``
comments first, then reads one lexical item at the current position.
"""
from __future__ import annotations

import re
from typing import Optional

from ..errors import TileIRError
from ..record import record

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$.\-]*")
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_SUFFIX_ID = re.compile(r"[A-Za-z0-9_$.\-]+")
_NUMBER = re.compile(r"[-+]?(0x[0-9A-Fa-f]+|[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?)")


class ParseError(TileIRError):
    """Malformed text, located by file, line and column (1-based)."""

    def __init__(self, message: str, filename: str, line: int, column: int, also: tuple[str, ...] = ()):
        super().__init__(message)
        self.filename = filename
        self.line = line
        self.column = column
        #: Further errors MLIR reports at the same place (``expected valid keyword`` + the choices).
        self.also = also

    @property
    def messages(self) -> tuple[str, ...]:
        return (self.message, *self.also)

    def __str__(self) -> str:
        where = f'loc("{self.filename}":{self.line}:{self.column})'
        return "\n".join(f"{where}: error: {m}" for m in self.messages)


@record(frozen=True)
class Position:
    """A place in the text: what op locations default to and errors point at."""

    filename: str
    line: int
    column: int


class Scanner:
    def __init__(self, text: str, filename: str, line_offset: int = 0):
        self.text = text
        self.filename = filename
        self.pos = 0
        self.line_offset = line_offset  # lines before ``text`` in its file (split inputs)
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    # -- positions and errors ---------------------------------------------------------
    def position(self, pos: Optional[int] = None) -> Position:
        pos = self.pos if pos is None else pos
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return Position(self.filename, lo + 1 + self.line_offset, pos - self._line_starts[lo] + 1)

    def error(self, message: str, pos: Optional[int] = None, also: tuple[str, ...] = ()) -> ParseError:
        if pos is None:
            self.skip()
            pos = self.pos
        p = self.position(pos)
        return ParseError(message, p.filename, p.line, p.column, also)

    def here(self) -> int:
        """The position of the next item (after whitespace and comments)."""
        self.skip()
        return self.pos

    # -- low level ------------------------------------------------------------------------
    def skip(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            ch = text[self.pos]
            if ch.isspace():
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end
            else:
                return

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def peek(self, s: str) -> bool:
        self.skip()
        return self.text.startswith(s, self.pos)

    def peek_char(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def accept(self, s: str) -> bool:
        """Consume punctuation ``s`` if it is next (``-`` never starts ``->``)."""
        if not self.peek(s):
            return False
        if s == "-" and self.text.startswith("->", self.pos):
            return False
        self.pos += len(s)
        return True

    def expect(self, s: str, what: Optional[str] = None) -> None:
        if s[0].isalpha():
            if not self.accept_keyword(s):
                raise self.error(f"expected '{s}'" if what is None else what)
        elif not self.accept(s):
            raise self.error(f"expected '{s}'" if what is None else what, self.wrong_token_pos())

    def wrong_token_pos(self) -> int:
        """Where MLIR reports a missing token: at the next token, or just after the
        previous one when the next starts a later line (``emitWrongTokenError``)."""
        self.skip()
        end = self.pos
        while True:
            back = len(self.text[:end].rstrip())
            line_start = self.text.rfind("\n", 0, back) + 1
            if self.text[line_start:back].lstrip().startswith("//"):
                end = line_start  # a comment line: keep looking further back
                continue
            break
        if "\n" in self.text[back:self.pos]:
            return back
        return self.pos

    # -- words ------------------------------------------------------------------------------
    def peek_ident(self) -> Optional[str]:
        self.skip()
        m = _BARE.match(self.text, self.pos)
        return m.group(0) if m else None

    def accept_keyword(self, word: str) -> bool:
        self.skip()
        m = _BARE.match(self.text, self.pos)
        if m and m.group(0) == word:
            self.pos = m.end()
            return True
        return False

    def ident(self, what: str = "identifier") -> str:
        self.skip()
        m = _BARE.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}")
        self.pos = m.end()
        return m.group(0)

    def ident_prefix(self, alphabet: str) -> str:
        """The longest run of letters/digits from ``alphabet`` (for ``x``-separated dims)."""
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in alphabet:
            self.pos += 1
        return self.text[start:self.pos]

    # -- numbers and strings ----------------------------------------------------------------
    def peek_number(self) -> bool:
        self.skip()
        m = _NUMBER.match(self.text, self.pos)
        return m is not None

    def number_text(self, what: str = "integer value") -> str:
        self.skip()
        m = _NUMBER.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}")
        self.pos = m.end()
        return m.group(0)

    def integer(self, what: str = "integer value") -> int:
        self.skip()
        start = self.pos
        m = re.compile(r"[-+]?(0x[0-9A-Fa-f]+|[0-9]+)").match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}")
        self.pos = m.end()
        text = m.group(0)
        try:
            return int(text, 0) if "x" in text else int(text, 10)
        except ValueError:
            raise self.error(f"expected {what}", start) from None

    def peek_string(self) -> bool:
        return self.peek('"')

    def string(self, what: str = "string") -> str:
        self.skip()
        if not self.text.startswith('"', self.pos):
            raise self.error(f"expected {what}")
        start = self.pos
        self.pos += 1
        out = bytearray()
        while True:
            if self.pos >= len(self.text) or self.text[self.pos] == "\n":
                raise self.error("expected '\"' in string literal", start)
            ch = self.text[self.pos]
            if ch == '"':
                self.pos += 1
                return out.decode("utf-8", errors="surrogateescape")
            if ch == "\\":
                nxt = self.text[self.pos + 1:self.pos + 2]
                if nxt in ('"', "\\"):
                    out += nxt.encode()
                    self.pos += 2
                elif nxt == "n":
                    out += b"\n"
                    self.pos += 2
                elif nxt == "t":
                    out += b"\t"
                    self.pos += 2
                elif re.fullmatch(r"[0-9A-Fa-f]{2}", self.text[self.pos + 1:self.pos + 3]):
                    out.append(int(self.text[self.pos + 1:self.pos + 3], 16))
                    self.pos += 3
                else:
                    raise self.error("unknown escape in string literal", self.pos)
            else:
                out += ch.encode()
                self.pos += 1

    # -- sigils -----------------------------------------------------------------------------
    def sigil_name(self, sigil: str) -> Optional[str]:
        """``%name``/``@name``/``#name``/``^name`` (without the sigil), or None."""
        self.skip()
        if not self.text.startswith(sigil, self.pos):
            return None
        m = _SUFFIX_ID.match(self.text, self.pos + 1)
        if not m:
            return None
        self.pos = m.end()
        return m.group(0)
