"""print_tko formatting, as the device's printf would print it.

Each ``%`` conversion of the format consumes one operand.  A rank-0 tile prints as its value;
a tile of higher rank prints as ``[e0, e1, ...]`` (nested per dimension), every element with
the same conversion -- the layout NVIDIA's tileiras produces (``[%f, %f, %f, %f]`` for a
``tile<4xf32>``).  Conversions follow C: ``%d``/``%i`` read the integer as signed, ``%u``,
``%x``, ``%X``, ``%o``, ``%c`` as unsigned, of the operand's width; floats print as doubles;
``%p`` prints a pointer in hex; length modifiers (``h``, ``l``, ``ll``...) are accepted.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..ir import types as T
from .floats import to_float64
from .values import scalar_of, to_signed, to_unsigned

_CONVERSION = re.compile(r"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?(hh|h|ll|l|j|z|t|L)?([diouxXeEfFgGaAcsp%])")


def _format_element(spec: str, conv: str, value: Any, elem: T.Type) -> str:
    e = scalar_of(elem)
    if isinstance(e, T.PointerType) or conv == "p":
        return "0x%x" % int(to_unsigned(np.asarray(value)))
    if isinstance(e, T.ScalarType) and e.is_int:
        if conv in "di":
            v = int(to_signed(np.asarray(value), e.bitwidth))
        else:
            v = int(to_unsigned(np.asarray(value)))
        if conv in "eEfFgGaA":
            return (spec + conv) % float(v)
        if conv == "c":
            return chr(v & 0xFF)
        return (spec + conv.replace("i", "d").replace("u", "d")) % v
    v = float(to_float64(value))
    if conv in "diouxXc":
        return (spec + "d") % int(v) if np.isfinite(v) else str(v)
    if conv in "aA":
        return float.hex(v)
    return (spec + conv) % v


def _format_tile(spec: str, conv: str, value: np.ndarray, t: T.Type) -> str:
    if value.ndim == 0:
        return _format_element(spec, conv, value, t)
    return "[" + ", ".join(_format_tile(spec, conv, value[i], t) for i in range(value.shape[0])) + "]"


def format_print(fmt: str, args: list[tuple[Any, T.Type]]) -> str:
    pieces, pos, k = [], 0, 0
    for m in _CONVERSION.finditer(fmt):
        pieces.append(fmt[pos:m.start()])
        pos = m.end()
        flags, width, prec, _, conv = m.groups()
        if conv == "%":
            pieces.append("%")
            continue
        spec = "%" + (flags or "") + (width or "") + ("." + prec if prec is not None else "")
        if k < len(args):
            value, t = args[k]
            pieces.append(_format_tile(spec, conv, np.asarray(value), t))
        k += 1
    pieces.append(fmt[pos:])
    return "".join(pieces)
