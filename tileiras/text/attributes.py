"""Text spelling of Tile IR types and attribute values, as tileirdisasm prints them."""
from __future__ import annotations

import enum
import re
from typing import Any

from ..ir.attrs import (ArrayAttr, Attribute, BoolAttr, BoundedAttr, DenseElementsAttr, DictAttr,
                        DivByAttr, FloatAttr, IntegerAttr, OptimizationHintsAttr, SameElementsAttr,
                        StringAttr, TypeAttr, i1_elements)
from ..ir.types import ScalarType, TileType, Type
from .escape import escape_string
from .floats import format_float

#: Non-splat dense constants with more elements than this print as a hex blob.
HEX_ELEMENTS_THRESHOLD = 100


def print_type(t: Type) -> str:
    return str(t)


def is_bare_identifier(name: str) -> bool:
    if not name or not (name[0].isalpha() or name[0] == "_"):
        return False
    return all(ch.isascii() and (ch.isalnum() or ch in "_$.") for ch in name)


def symbol_ref(name: str) -> str:
    return "@" + (name if is_bare_identifier(name) else escape_string(name))


def signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if bits > 1 and value >> (bits - 1) else value


def scalar_text(bits: int, elem: ScalarType) -> str:
    """One element of a dense or scalar attribute, without its type."""
    if elem.name == "i1":
        return "true" if bits & 1 else "false"
    if elem.is_int:
        return str(signed(bits, elem.bitwidth))
    return format_float(bits, elem.name)


def print_inline_value(value: Any) -> str:
    """An inline op attribute (enum, int, bool, str, int/bool tuple) in op syntax."""
    if isinstance(value, enum.Enum):
        return value.keyword  # type: ignore[attr-defined]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return escape_string(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(print_attr(v, elide_type=True) if isinstance(v, Attribute)
                               else print_inline_value(v) for v in value) + "]"
    if isinstance(value, Type):
        return print_type(value)
    if isinstance(value, OptimizationHintsAttr):
        return print_hints(value)
    if isinstance(value, Attribute):
        return print_attr(value)
    raise TypeError(f"cannot print attribute value {value!r}")


def print_attr_value(value: Any) -> str:
    """An inline attribute as a full MLIR attribute (inside an attribute
    dictionary): enums become ``#cuda_tile.<enum_name><keyword>``."""
    if isinstance(value, enum.Enum):
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", type(value).__name__).lower()
        return f"#cuda_tile.{snake}<{value.keyword}>"  # type: ignore[attr-defined]
    return print_inline_value(value)


def print_attr(a: Attribute, *, elide_type: bool = False) -> str:
    """A self-contained attribute in MLIR's builtin spelling.  With
    ``elide_type`` (inside arrays), i64 integers and f64 floats drop their type."""
    if isinstance(a, IntegerAttr):
        assert isinstance(a.type, ScalarType)
        if a.type.name == "i1":
            return "true" if a.value & 1 else "false"
        text = str(signed(a.value, a.type.bitwidth))
        return text if elide_type and a.type.name == "i64" else f"{text} : {a.type}"
    if isinstance(a, FloatAttr):
        assert isinstance(a.type, ScalarType)
        text = format_float(a.bits, a.type.name)
        return text if elide_type and a.type.name == "f64" else f"{text} : {a.type}"
    if isinstance(a, BoolAttr):
        return "true" if a.value else "false"
    if isinstance(a, StringAttr):
        return escape_string(a.value)
    if isinstance(a, TypeAttr):
        return print_type(a.value)
    if isinstance(a, ArrayAttr):
        return "[" + ", ".join(print_attr(e, elide_type=True) for e in a.elements) + "]"
    if isinstance(a, DictAttr):
        return print_dict(a)
    if isinstance(a, OptimizationHintsAttr):
        return "#cuda_tile.optimization_hints" + print_hints(a)
    if isinstance(a, (DivByAttr, SameElementsAttr, BoundedAttr)):
        return "#cuda_tile." + print_predicate(a)
    if isinstance(a, DenseElementsAttr):
        return f"dense<{dense_body(a)}> : {a.type}"
    raise TypeError(f"cannot print attribute {a!r}")


def _value_without_type(a: Attribute) -> str:
    if isinstance(a, IntegerAttr):
        assert isinstance(a.type, ScalarType)
        return print_attr(a).split(" : ")[0]
    if isinstance(a, FloatAttr):
        assert isinstance(a.type, ScalarType)
        return format_float(a.bits, a.type.name)
    return print_attr(a)


def print_dict(d: DictAttr) -> str:
    items = sorted(d.entries, key=lambda kv: kv[0])
    return "{" + ", ".join(f"{k} = {_value_without_type(v)}" for k, v in items) + "}"


def print_hints(h: OptimizationHintsAttr) -> str:
    items = sorted(h.entries, key=lambda kv: kv[0])
    return "<" + ", ".join(f"{arch} = {print_dict(d)}" for arch, d in items) + ">"


def print_predicate(a: Attribute) -> str:
    """An assume predicate without the ``#cuda_tile.`` prefix."""
    if isinstance(a, DivByAttr):
        text = f"div_by<{a.divisor}"
        if a.every is not None:
            text += f", every {a.every} along {a.along}"
        return text + ">"
    if isinstance(a, BoundedAttr):
        lo = "?" if a.lower is None else str(a.lower)
        hi = "?" if a.upper is None else str(a.upper)
        return f"bounded<{lo}, {hi}>"
    if isinstance(a, SameElementsAttr):
        return "same_elements<[" + ", ".join(str(v) for v in a.values) + "]>"
    return print_attr(a)


def dense_elements(a: DenseElementsAttr) -> list[int]:
    """Element bit patterns of numeric dense data (i1: ``i1_elements``; i4/f4 data
    takes one byte an element)."""
    elem = a.type.element if isinstance(a.type, TileType) else a.type
    shape = a.type.shape if isinstance(a.type, TileType) else ()
    assert isinstance(elem, ScalarType)
    data = a.data
    assert isinstance(data, bytes)
    count = 1
    for d in shape:
        count *= d
    if elem.bitwidth == 1:
        return i1_elements(data, count)
    if elem.bitwidth == 4:  # one element a byte (MLIR's storage; tileirdisasm 13.5 reads it so)
        return [b & 0xF for b in data]
    width = elem.bitwidth // 8
    return [int.from_bytes(data[i:i + width], "little") for i in range(0, len(data), width)]


def dense_body(a: DenseElementsAttr) -> str:
    """The part of ``dense<...>`` between the brackets: a splat value, nested
    lists following the shape, or a hex blob for large non-splat data."""
    t = a.type
    elem = t.element if isinstance(t, TileType) else t
    shape = t.shape if isinstance(t, TileType) else ()
    assert isinstance(elem, ScalarType)
    if isinstance(a.data, tuple):
        values = [escape_string(s) for s in a.data]
    else:
        raw = dense_elements(a)
        if len(set(raw)) <= 1 and raw:
            return scalar_text(raw[0], elem)
        if len(raw) > HEX_ELEMENTS_THRESHOLD:
            return '"0x' + a.data.hex().upper() + '"'
        values = [scalar_text(v, elem) for v in raw]
    if len(set(values)) == 1:
        return values[0]
    return _nest(values, shape)


def _nest(values: list[str], shape: tuple[int, ...]) -> str:
    if not shape:
        return values[0]
    if len(shape) == 1:
        return "[" + ", ".join(values) + "]"
    step = len(values) // shape[0] if shape[0] else 0
    return "[" + ", ".join(_nest(values[i * step:(i + 1) * step], shape[1:])
                           for i in range(shape[0])) + "]"


def dense_typed(a: DenseElementsAttr, result_type: Type) -> str:
    """Tile IR's ``<f32: 1.000000e+00> : tile<f32>`` spelling of a constant."""
    elem = a.type.element if isinstance(a.type, TileType) else a.type
    return f"<{elem}: {dense_body(a)}> : {result_type}"
