"""Facts about tile types that every stage of the back end asks: is a value a tile, how many
bytes an element takes in global memory and in shared memory, which operand of a tensor
view gives a dynamic extent or stride; and where loops and branches pass values on."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from ..ir import types as T
from ..ir.core import Operation, Value
from ..tile import ops_control as CF


def is_tile(v: Value) -> bool:
    return isinstance(v.type, T.TileType)


def access_bytes(t: T.Type) -> int:
    """Bytes of global memory one element of tile type ``t`` is accessed in: a pointer
    tile's pointee (a gather through it), sub-byte elements a byte."""
    e = t.element if isinstance(t, T.TileType) else t
    if isinstance(e, T.PointerType):
        e = e.pointee
    return max(1, getattr(e, "bitwidth", 32) // 8)


def element_bytes(t: T.Type) -> int:
    """Bytes one element of tile type ``t`` takes in shared memory."""
    e = t.element if isinstance(t, T.TileType) else t
    if isinstance(e, T.PointerType):
        return 8
    return max(1, e.bitwidth // 8) if e.name != "tf32" else 4


def dynamic_operands(static: tuple[int, ...], operands: Iterable[Value]) -> list[Optional[Value]]:
    """Per dim of a tensor view's ``static`` shape or strides, the operand of its
    ``make_tensor_view`` (``dynamicShape`` or ``dynamicStrides``) giving a dynamic extent
    or stride, None where it is static."""
    it = iter(operands)
    return [next(it) if s == T.DYNAMIC else None for s in static]


def iter_args(loop: Operation) -> list[Value]:
    """A ``for``'s or ``loop``'s block arguments carried from trip to trip (not a for's
    induction variable)."""
    return loop.regions[0].blocks[0].args[1 if isinstance(loop, CF.ForOp) else 0:]


def carried_to(term: Operation, places: list[int]) -> list[Value]:
    """The values a ``continue``, ``break`` or ``yield`` passes its operands ``places`` on to:
    the next trip's block arguments and the loop's results, or the ``if``'s results (a
    ``reduce``'s or ``scan``'s, for the ``yield`` of their body)."""
    owner = term.parent.parent.parent
    if isinstance(term, CF.YieldOp):
        return [owner.results[k] for k in places]
    while isinstance(owner, CF.IfOp):          # a continue or break inside a branch
        owner = owner.parent.parent.parent
    if not isinstance(term, CF.ContinueOp):    # a break ends the loop
        return [owner.results[k] for k in places]
    ends = [owner.results[k] for k in places] if isinstance(owner, CF.ForOp) else []  # a for's last trip
    return [iter_args(owner)[k] for k in places] + ends
