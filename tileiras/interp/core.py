"""The evaluator: walks a function's regions with an environment of SSA values.

Each op's semantics is a function registered for its op class with ``@impl(OpClass)``
(as xDSL's interpreter does).  An implementation receives the ``Frame`` (the running tile
block: environment, machine, region runner), the op, and its operand values in operand
order, and returns the op's result values (a tuple) -- or, for a terminator, a
``Terminator`` that ends the enclosing block and is handed to the op owning the region.
Ops with regions run them through ``frame.run_region``; a ``Terminator`` they do not
consume themselves (a ``break`` inside an ``if``) is returned to their own parent.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from ..ir.core import Block, Function, Module, Operation, Region, Value
from ..tile.traits import is_elementwise
from .errors import InterpError

ImplFn = Callable[..., Any]

#: Element-wise ops on larger tiles run this many elements at a time (``run_chunked``).
CHUNK_ELEMENTS = 1 << 14

#: Op class -> implementation; filled at import time by the op-family modules.
IMPLS: dict[type, ImplFn] = {}


def impl(*op_classes: type) -> Callable[[ImplFn], ImplFn]:
    """Register ``fn`` as the semantics of each of ``op_classes``."""

    def register(fn: ImplFn) -> ImplFn:
        for cls in op_classes:
            if cls in IMPLS:
                raise RuntimeError(f"interpreter: {cls.__name__} implemented twice")
            IMPLS[cls] = fn
        return fn

    return register


class TermKind(enum.Enum):
    YIELD = "yield"
    CONTINUE = "continue"
    BREAK = "break"
    RETURN = "return"


@dataclass(frozen=True)
class Terminator:
    kind: TermKind
    values: tuple[Any, ...] = ()


@dataclass
class Machine:
    """State shared by every tile block of one launch."""

    module: Module
    grid: tuple[int, int, int]
    memory: Any                                   # memory.Memory
    globals: dict[str, int] = field(default_factory=dict)   # global name -> address
    output: list[str] = field(default_factory=list)        # print_tko output, in order
    failures: list = field(default_factory=list)           # assert failures
    strict: bool = False                                   # raise on overflow-flag violations


class Frame:
    """One tile block running one function."""

    def __init__(self, machine: Machine, block_id: tuple[int, int, int]):
        self.machine = machine
        self.block_id = block_id
        self.env: dict[Value, Any] = {}

    # -- values ----------------------------------------------------------------------
    def get(self, v: Value) -> Any:
        try:
            return self.env[v]
        except KeyError:
            raise InterpError(f"value {v} used before it was defined") from None

    def bind(self, values: Sequence[Value], data: Sequence[Any]) -> None:
        if len(values) != len(data):
            raise InterpError(f"expected {len(values)} values, got {len(data)}")
        for v, d in zip(values, data):
            self.env[v] = d

    # -- execution -------------------------------------------------------------------
    def run_op(self, op: Operation) -> Optional[Terminator]:
        fn = IMPLS.get(type(op))
        if fn is None:
            raise InterpError("operation not supported by the interpreter", op)
        operands = [self.get(v) for v in op.operands]
        out = run_chunked(fn, self, op, operands) if is_streamed(op, operands) else fn(self, op, *operands)
        if isinstance(out, Terminator):
            return out
        results = () if out is None else tuple(out)
        if len(results) != len(op.results):
            raise InterpError(f"implementation returned {len(results)} results, "
                              f"expected {len(op.results)}", op)
        self.bind(op.results, results)
        return None

    def run_block(self, block: Block, args: Sequence[Any] = ()) -> Terminator:
        self.bind(block.args, args)
        for op in block.ops:
            term = self.run_op(op)
            if term is not None:
                return term
        return Terminator(TermKind.YIELD)

    def run_region(self, region: Region, args: Sequence[Any] = ()) -> Terminator:
        if not region.blocks:
            return Terminator(TermKind.YIELD)
        if len(region.blocks) != 1:
            raise InterpError("regions with several blocks are not supported")
        return self.run_block(region.blocks[0], args)


def is_streamed(op: Operation, operands: Sequence[Any]) -> bool:
    """An element-wise op whose tiles are larger than ``CHUNK_ELEMENTS``, every operand of the
    result's shape or rank 0: ``run_chunked`` runs it a slice of elements at a time."""
    if not op.results or not is_elementwise(type(op)):
        return False
    shape = getattr(op.results[0].type, "shape", ())
    if int(np.prod(shape, dtype=np.int64)) <= CHUNK_ELEMENTS:
        return False
    if any(getattr(r.type, "shape", None) != shape for r in op.results):
        return False
    return all(isinstance(o, np.ndarray) and (o.shape == tuple(shape) or o.ndim == 0) for o in operands)


def run_chunked(fn: ImplFn, frame: "Frame", op: Operation, operands: Sequence[np.ndarray]) -> tuple:
    """``fn`` on ``CHUNK_ELEMENTS`` row-major elements at a time: exact float emulation makes
    a dozen float64 temporaries an element, which stay a chunk's size instead of a tile's."""
    shape = tuple(op.results[0].type.shape)
    flat = [o.reshape(-1) if o.ndim else o for o in operands]
    n = int(np.prod(shape, dtype=np.int64))
    pieces = [tuple(fn(frame, op, *[f[i:i + CHUNK_ELEMENTS] if f.ndim else f for f in flat]))
              for i in range(0, n, CHUNK_ELEMENTS)]
    return tuple(np.concatenate([p[k] for p in pieces]).reshape(shape) for k in range(len(op.results)))


def run_function(machine: Machine, fn: Function, block_id: tuple[int, int, int],
                 args: Sequence[Any]) -> tuple[Any, ...]:
    frame = Frame(machine, block_id)
    term = frame.run_region(fn.body, args)
    if term.kind not in (TermKind.RETURN, TermKind.YIELD):
        raise InterpError(f"function @{fn.name} ended with a stray {term.kind.value}")
    return term.values


Result = Union[tuple, Terminator, None]
