"""The assembly-format mini language of Tile IR ops.

Each op class may carry ``syntax = "..."``, a declarative description of its
text form in the spirit of MLIR's ``assemblyFormat``.  The string is parsed once
into a tree of elements; the printer (``tileiras.text.printer``) and the text
parser walk that tree, so one description drives both directions.

Elements
--------
``$name``
    A field of the op (operand group, attribute, result group or region), by
    its registry name.  An operand group prints as a comma-separated value
    list; an attribute prints in its natural spelling (enum keyword, integer,
    quoted string, ``[1, 0]`` for integer arrays...).
```word``  (a backquoted literal)
    Printed verbatim.  `````` (empty) suppresses the next automatic space;
    ``` ` ` ``` forces one; ```\\n``` starts a new, indented line.
``type($name)``
    The types of an operand or result group, comma-separated.
``attr-dict``
    The op's discardable attributes.  Tile IR ops have none, so this prints
    nothing; it is kept so formats read like NVIDIA's and mark where a parser
    accepts ``{...}``.
``attr-dict-with-keyword($a^=default, ...)``
    Prints `` attributes {a = ...}`` for the listed attributes that are set and
    differ from their default (nothing when none is).
``custom<Name>(args)``
    An irregular piece printed and parsed by the hooks registered under
    ``Name`` (see ``tileiras.text.directives``).
``( elements )?``
    An optional group, printed when its anchor (the element marked ``^``) is
    present: a non-empty operand group, a set unit attribute, an attribute that
    is not ``None``.  ``$name^=word`` makes an attribute anchor absent when its
    value's keyword is ``word`` (MLIR's DefaultValuedAttr elision).

Spacing follows MLIR's generated printers: a space goes before every element
except after an opening bracket and before closing punctuation and commas;
an optional group advances the spacing state even when it is not printed.
"""
from __future__ import annotations

import functools
from typing import Optional, Union

from ..record import record


class FormatError(ValueError):
    """A malformed ``syntax`` string (a bug in an op definition)."""


@record(frozen=True)
class Literal:
    text: str


@record(frozen=True)
class Whitespace:
    text: str  # "", " " or "\n"


@record(frozen=True)
class FieldRef:
    name: str
    anchor: bool = False
    default: Optional[str] = None  # keyword that makes an attribute anchor absent


@record(frozen=True)
class TypeOf:
    name: str
    anchor: bool = False


@record(frozen=True)
class AttrDict:
    """``attr-dict`` / ``attr-dict-with-keyword(fields)``: ``fields`` are the
    op attributes printed in the dictionary (``$reduction^=add`` drops the
    entry when it has its default value)."""

    keyword: bool = False
    fields: tuple[FieldRef, ...] = ()


@record(frozen=True)
class Custom:
    name: str
    args: tuple["Element", ...]
    anchor: bool = False


@record(frozen=True)
class OptionalGroup:
    elements: tuple["Element", ...]

    @property
    def anchor(self) -> Union[FieldRef, TypeOf, Custom]:
        for e in self.elements:
            if isinstance(e, (FieldRef, TypeOf, Custom)) and e.anchor:
                return e
        raise FormatError(f"optional group without an anchor (^): {self.elements}")


Element = Union[Literal, Whitespace, FieldRef, TypeOf, AttrDict, Custom, OptionalGroup]


@record(frozen=True)
class Format:
    elements: tuple[Element, ...]
    source: str

    def field_names(self) -> set[str]:
        names: set[str] = set()

        def visit(elements: tuple[Element, ...]) -> None:
            for e in elements:
                if isinstance(e, (FieldRef, TypeOf)):
                    names.add(e.name)
                elif isinstance(e, AttrDict):
                    names.update(f.name for f in e.fields)
                elif isinstance(e, Custom):
                    visit(e.args)
                elif isinstance(e, OptionalGroup):
                    visit(e.elements)
        visit(self.elements)
        return names


class _Lexer:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self, s: str) -> bool:
        self.skip_ws()
        return self.text.startswith(s, self.pos)

    def take(self, s: str) -> None:
        if not self.peek(s):
            raise FormatError(f"expected '{s}' at {self.pos} in syntax {self.text!r}")
        self.pos += len(s)

    def ident(self) -> str:
        self.skip_ws()
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] in "_-"):
            self.pos += 1
        if start == self.pos:
            raise FormatError(f"expected a name at {start} in syntax {self.text!r}")
        return self.text[start:self.pos]

    def at_end(self) -> bool:
        self.skip_ws()
        return self.pos >= len(self.text)


def _parse_elements(lx: _Lexer, closer: Optional[str]) -> tuple[Element, ...]:
    out: list[Element] = []
    while True:
        if closer is None and lx.at_end():
            return tuple(out)
        if closer is not None and lx.peek(closer):
            return tuple(out)
        out.append(_parse_element(lx))
        if closer is not None and lx.peek(","):
            lx.take(",")


def _anchor_suffix(lx: _Lexer) -> tuple[bool, Optional[str]]:
    if lx.text.startswith("^", lx.pos):
        lx.pos += 1
        if lx.text.startswith("=", lx.pos):
            lx.pos += 1
            return True, lx.ident()
        return True, None
    return False, None


def _parse_element(lx: _Lexer) -> Element:
    lx.skip_ws()
    text = lx.text
    if text.startswith("`", lx.pos):
        end = text.index("`", lx.pos + 1)
        word = text[lx.pos + 1:end]
        lx.pos = end + 1
        if word in ("", " "):
            return Whitespace(word)
        if word == "\\n":
            return Whitespace("\n")
        return Literal(word)
    if text.startswith("$", lx.pos):
        lx.pos += 1
        name = lx.ident()
        anchor, default = _anchor_suffix(lx)
        return FieldRef(name, anchor, default)
    if text.startswith("(", lx.pos):
        lx.take("(")
        elements = _parse_elements(lx, ")")
        lx.take(")")
        lx.take("?")
        group = OptionalGroup(elements)
        group.anchor  # noqa: B018 - validates that an anchor exists
        return group
    word = lx.ident()
    if word == "attr-dict":
        return AttrDict()
    if word == "attr-dict-with-keyword":
        fields: tuple[Element, ...] = ()
        if lx.peek("("):
            lx.take("(")
            fields = _parse_elements(lx, ")")
            lx.take(")")
        if not all(isinstance(f, FieldRef) for f in fields):
            raise FormatError(f"attr-dict-with-keyword takes only $fields in syntax {text!r}")
        return AttrDict(True, fields)  # type: ignore[arg-type]
    if word == "type":
        lx.take("(")
        lx.take("$")
        name = lx.ident()
        lx.take(")")
        anchor, _ = _anchor_suffix(lx)
        return TypeOf(name, anchor)
    if word == "custom":
        lx.take("<")
        name = lx.ident()
        lx.take(">")
        lx.take("(")
        args = _parse_elements(lx, ")")
        lx.take(")")
        anchor, _ = _anchor_suffix(lx)
        return Custom(name, args, anchor)
    raise FormatError(f"unknown directive '{word}' in syntax {text!r}")


@functools.lru_cache(maxsize=None)
def parse_format(text: str) -> Format:
    """Parse a ``syntax`` string into its element tree (cached per string)."""
    return Format(_parse_elements(_Lexer(text), None), text)


# ---------------------------------------------------------------------------
# MLIR's automatic spacing, shared by the printer and (for round trips) tests.


@record
class SpacingState:
    """Whether the next element gets a leading space (MLIR ``shouldEmitSpace``)
    and whether the previous element was punctuation (``lastWasPunctuation``)."""

    emit_space: bool = True
    last_was_punct: bool = False

    def before_literal(self, text: str) -> bool:
        """Advance over a literal; return whether a space precedes it."""
        space = self.emit_space and _space_before(text, self.last_was_punct)
        self.emit_space = len(text) != 1 or text not in "<({["
        self.last_was_punct = text[0] != "_" and not text[0].isalpha()
        return space

    def before_element(self) -> bool:
        """Advance over a value-like element; return whether a space precedes it."""
        space = self.emit_space
        self.emit_space = True
        self.last_was_punct = False
        return space

    def whitespace(self, text: str) -> None:
        self.emit_space = False
        self.last_was_punct = text == ""


def _space_before(text: str, last_was_punct: bool) -> bool:
    if len(text) != 1 and text != "->":
        return True
    if last_was_punct:
        return text[0] not in ">)}],"
    return text[0] not in "<>(){}[],"
