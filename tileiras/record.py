"""``@record``: what ``@dataclass`` gives the compiler's value classes, for less start-up.

A ``tileiras`` command imports about seventy such classes before it compiles anything,
and without the compile server (``TILEIRAS_SERVER=0``, or a server's first command) every
run pays for creating them.  ``dataclasses`` compiles source text for each generated
method (six for a frozen class) and gives a class without a docstring one made from
``inspect.signature``: about 0.3 ms a class, over 20 ms in all.  ``record`` compiles only
``__init__``, where generated code is fastest for the many objects built at run time, and
builds ``__eq__``, ``__hash__``, ``__repr__`` and a frozen class's ``__setattr__`` from
shared closures over ``operator.attrgetter``: a tenth of the cost.

It behaves as ``dataclass`` does in what the package uses: fields from the class's
annotations in order (a base record's first), defaults and ``field(default_factory=...)``,
per-field ``repr``/``compare``/``hash``, ``eq`` (and with it ``__hash__``: from the fields
when frozen, ``None`` otherwise, unless the class writes its own), ``frozen``
(``FrozenInstanceError``, an ``AttributeError``), ``__post_init__`` and ``__match_args__``;
a method the class defines itself is kept.  Not provided, because nothing uses them:
``order``, ``InitVar``, ``kw_only``, ``slots`` and ``dataclasses.fields/replace/asdict``.
"""
from __future__ import annotations

from operator import attrgetter
from reprlib import recursive_repr
from typing import Any

try:  # lets type checkers see the generated __init__ (Python 3.11+)
    from typing import dataclass_transform
except ImportError:  # pragma: no cover - Python 3.10
    def dataclass_transform(**kwargs: object):  # type: ignore[no-redef]
        return lambda decorator: decorator


class FrozenInstanceError(AttributeError):
    """Assignment to (or deletion of) a field of a frozen record."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()       # no default given
_FACTORY = _Missing()      # __init__'s default for a field with a default_factory


class Field:
    """One field's declaration; ``field(...)`` makes one, a plain default implies one."""

    __slots__ = ("compare", "default", "default_factory", "hash", "name", "repr")

    def __init__(self, default: object = MISSING, default_factory: object = MISSING, repr: bool = True,
                 compare: bool = True, hash: bool | None = None) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare
        self.hash = compare if hash is None else hash

    def __repr__(self) -> str:
        return f"Field({self.name!r}, default={self.default!r}, default_factory={self.default_factory!r})"


def field(*, default: object = MISSING, default_factory: object = MISSING, repr: bool = True,
          compare: bool = True, hash: bool | None = None) -> Any:
    """A field with a default factory or per-field options, as ``dataclasses.field``."""
    return Field(default, default_factory, repr, compare, hash)


@dataclass_transform(field_specifiers=(field,))
def record(cls: type | None = None, *, frozen: bool = False, eq: bool = True) -> Any:
    """Class decorator: ``@record`` or ``@record(frozen=True, eq=...)``; see the module docstring."""

    def wrap(cls: type) -> type:
        return _process(cls, frozen, eq)

    return wrap if cls is None else wrap(cls)


def _is_classvar(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _fields(cls: type) -> list[Field]:
    """Base records' fields, then this class's own (a redeclared name keeps its place)."""
    fields: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in base.__dict__.get("__record_fields__", ()):
            fields[f.name] = f
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, MISSING)
        f = value if isinstance(value, Field) else Field(default=value)
        f.name = name
        if isinstance(value, Field):  # the class attribute becomes the plain default, or goes
            if f.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        fields[name] = f
    return list(fields.values())


def _set_new(cls: type, name: str, value: object) -> None:
    if name not in cls.__dict__:
        value.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, value)


def _process(cls: type, frozen: bool, eq: bool) -> type:
    fields = _fields(cls)
    cls.__record_fields__ = tuple(fields)
    _set_new(cls, "__init__", _make_init(cls, fields, frozen))
    _set_new(cls, "__repr__", _make_repr([f.name for f in fields if f.repr]))
    if eq:
        own_hash = cls.__dict__.get("__hash__", MISSING)
        explicit_hash = not (own_hash is MISSING or (own_hash is None and "__eq__" in cls.__dict__))
        _set_new(cls, "__eq__", _make_eq(_getter([f.name for f in fields if f.compare])))
        if not explicit_hash:  # dataclass's rule: hashable when frozen, unhashable otherwise
            cls.__hash__ = _make_hash(_getter([f.name for f in fields if f.hash])) if frozen else None
            if cls.__hash__ is not None:
                cls.__hash__.__qualname__ = f"{cls.__qualname__}.__hash__"
    if frozen:
        _make_frozen(cls, frozenset(f.name for f in fields))
    if "__match_args__" not in cls.__dict__:
        cls.__match_args__ = tuple(f.name for f in fields)
    return cls


def _make_init(cls: type, fields: list[Field], frozen: bool) -> object:
    """The one generated method: ``def __init__(self, a, b=_d1, c=_FACTORY): ...``."""
    env: dict[str, object] = {"_record_set": object.__setattr__, "_FACTORY": _FACTORY}
    params, body = ["self"], []
    for i, f in enumerate(fields):
        value = f.name
        if f.default_factory is not MISSING:
            env[f"_record_factory{i}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            value = f"_record_factory{i}() if {f.name} is _FACTORY else {f.name}"
        elif f.default is not MISSING:
            env[f"_record_default{i}"] = f.default
            params.append(f"{f.name}=_record_default{i}")
        else:
            params.append(f.name)
        body.append(f"_record_set(self, {f.name!r}, {value})" if frozen else f"self.{f.name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    source = f"def __init__({', '.join(params)}):\n    " + "\n    ".join(body or ["pass"]) + "\n"
    exec(source, env)
    return env["__init__"]


def _getter(names: list[str]):
    """``obj -> tuple of those fields`` (attrgetter returns a bare value for one name)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _make_repr(names: list[str]):
    @recursive_repr()
    def __repr__(self: object) -> str:
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({args})"
    return __repr__


def _make_eq(key):
    def __eq__(self: object, other: object) -> bool:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented
    return __eq__


def _make_hash(key):
    def __hash__(self: object) -> int:
        return hash(key(self))
    return __hash__


def _make_frozen(cls: type, names: frozenset[str]) -> None:
    def __setattr__(self: object, name: str, value: object) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: object, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    for method in (__setattr__, __delattr__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
        setattr(cls, method.__name__, method)
