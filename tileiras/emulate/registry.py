"""Instruction handlers, registered by base opcode (the text before the first '.').

A handler is ``compile(ctx, ins) -> Exec``.  ``Exec(machine, idx)`` runs the instruction
for the threads ``idx`` (an index array, or ``slice(None)`` for every thread of the batch)
after the guard predicate has been applied.  Handlers marked ``control=True`` see every
thread at their PC, apply the guard themselves and set each thread's next PC.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

HANDLERS: dict[str, "Handler"] = {}


class UnsupportedInstruction(NotImplementedError):
    """The emulator has no semantics for this opcode or modifier combination."""


@dataclass(frozen=True)
class Handler:
    compile: Callable
    control: bool


def handles(*names: str, control: bool = False) -> Callable:
    def register(fn: Callable) -> Callable:
        for name in names:
            if name in HANDLERS:
                raise ValueError(f"opcode '{name}' registered twice")
            HANDLERS[name] = Handler(fn, control)
        return fn
    return register


def modifiers(parts: list[str]) -> set[str]:
    return set(parts[1:])


def pick(parts: list[str], choices, default=None):
    """The first opcode part that is one of ``choices``."""
    for p in parts[1:]:
        if p in choices:
            return p
    return default


def gathered(fn: Callable, gather: Callable, after: Optional[Callable] = None) -> Callable:
    """``fn`` for the threads ``gather(m, idx)`` finds ready (the rest held at the
    instruction), which then go on to the next one; then ``after(m, idx)``."""
    def run(m, idx):
        idx = np.arange(m.n) if isinstance(idx, slice) else np.asarray(idx)
        ready = gather(m, idx)
        if ready.size:
            fn(m, ready)
            m.pc[ready] += 1
        if after is not None:
            after(m, idx)
    return run
