"""``tileiras.record`` behaves as ``dataclasses.dataclass`` for everything the package uses.

Each scenario is written once and built with both decorators; the observable results
(reprs, equality, hashes, frozen errors, defaults, inheritance, error messages) must agree.
"""
from __future__ import annotations

import copy
import dataclasses
from functools import total_ordering
from typing import ClassVar, Optional

import pytest

from tileiras.record import FrozenInstanceError, field, record

DECORATORS = {"dataclass": (dataclasses.dataclass, dataclasses.field), "record": (record, field)}


def build(kind: str) -> dict[str, type]:
    deco, fld = DECORATORS[kind]

    @deco(frozen=True)
    class Tile:
        element: object
        shape: tuple = ()
        ptr: Optional[int] = None
        counter: ClassVar[int] = 3

    @deco
    class Mutable:
        a: int
        items: list = fld(default_factory=list)
        op: object = fld(default=None, compare=False, hash=False, repr=False)

    @deco(frozen=True, eq=False)
    class Identity:
        x: int

    @deco(frozen=True)
    class Empty:
        pass

    @deco(frozen=True)
    class OwnEq:
        a: int

        def __eq__(self, other: object) -> bool:
            return True

    @deco(frozen=True)
    class Base:
        a: int
        b: int = 2

    @deco(frozen=True)
    class Sub(Base):
        c: int = 5

    @total_ordering
    @deco(frozen=True)
    class Version:
        major: int
        minor: int

        def __lt__(self, other: "Version") -> bool:
            return (self.major, self.minor) < (other.major, other.minor)

    @deco
    class Post:
        a: int
        doubled: int = 0

        def __post_init__(self) -> None:
            self.doubled = 2 * self.a

    classes = dict(Tile=Tile, Mutable=Mutable, Identity=Identity, Empty=Empty, OwnEq=OwnEq, Base=Base,
                   Sub=Sub, Version=Version, Post=Post)
    for name, cls in classes.items():  # short names, so the two builds' reprs agree
        cls.__qualname__ = name
    return classes


def observe(c: dict[str, type]) -> list[object]:
    tile = c["Tile"](1, (2,))
    seen: list[object] = [repr(tile), tile == c["Tile"](1, (2,), None), tile != c["Tile"](1, (3,)), hash(tile),
                          c["Tile"].__match_args__, c["Tile"].shape, c["Tile"].__init__.__code__.co_varnames]
    for action in (lambda: setattr(tile, "element", 3), lambda: delattr(tile, "shape"),
                   lambda: setattr(tile, "other", 1)):
        with pytest.raises(AttributeError) as err:
            action()
        seen.append(str(err.value))
    with pytest.raises(TypeError) as err:
        c["Tile"]()
    seen.append(str(err.value).replace("Tile.__init__()", "__init__()"))
    m = c["Mutable"](1)
    seen += [repr(m), m == c["Mutable"](1, [], "other op"), c["Mutable"].__hash__, m.items is not c["Mutable"](1).items,
             hasattr(c["Mutable"], "items"), c["Mutable"].op]
    seen += [c["Identity"](1) == c["Identity"](1), repr(c["Identity"](7))]
    seen += [repr(c["Empty"]()), c["Empty"]() == c["Empty"](), hash(c["Empty"]())]
    seen += [c["OwnEq"](1) == c["OwnEq"](2), hash(c["OwnEq"](1))]
    seen += [repr(c["Sub"](1)), c["Sub"](1) == c["Sub"](1, 2, 5), c["Sub"](1) == c["Base"](1), hash(c["Sub"](1, 2, 3))]
    v = c["Version"]
    seen += [v(13, 1) < v(13, 2), v(13, 2) >= v(13, 2), v(13, 3) > v(13, 2), v(1, 2) == v(1, 2)]
    seen += [c["Post"](4).doubled, repr(c["Post"](1))]
    seen += [copy.copy(tile) == tile, copy.deepcopy(m) == m, copy.deepcopy(m) is not m]
    return seen


def test_record_behaves_as_dataclass() -> None:
    expected = observe(build("dataclass"))
    assert observe(build("record")) == expected
    assert expected[0] == "Tile(element=1, shape=(2,), ptr=None)"  # the comparison itself compares something


def test_frozen_error_is_an_attribute_error() -> None:
    point = build("record")["Base"](1)
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'a'"):
        point.a = 2
    assert issubclass(FrozenInstanceError, AttributeError)


def test_default_and_default_factory_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="both default and default_factory"):
        field(default=1, default_factory=list)
