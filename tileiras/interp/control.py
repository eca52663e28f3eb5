"""Control flow (if, for, loop, break, continue, yield, return), assert, print and the
grid-dependency-control ops (no-ops: tile blocks run one after another)."""
from __future__ import annotations

import numpy as np

from ..tile import ops_control as K
from .core import Terminator, TermKind, impl
from .errors import InterpError
from .printf import format_print
from .values import TOKEN_VALUE, bits_of, make_int, to_signed, to_unsigned


@impl(K.YieldOp)
def _yield(frame, op, *values):
    return Terminator(TermKind.YIELD, values)


@impl(K.ContinueOp)
def _continue(frame, op, *values):
    return Terminator(TermKind.CONTINUE, values)


@impl(K.BreakOp)
def _break(frame, op, *values):
    return Terminator(TermKind.BREAK, values)


@impl(K.ReturnOp)
def _return(frame, op, *values):
    return Terminator(TermKind.RETURN, values)


@impl(K.IfOp)
def _if(frame, op, cond):
    taken = bool(np.asarray(cond).reshape(-1)[0])
    term = frame.run_region(op.then_region if taken else op.else_region)
    if term.kind is TermKind.YIELD:
        return term.values
    return term  # break / continue / return: handed to the enclosing op


@impl(K.ForOp)
def _for(frame, op, lower, upper, step, *init):
    bits = bits_of(op.lowerBound.type)
    read = to_unsigned if op.unsignedCmp else (lambda x: to_signed(x, bits))
    iv, stop, inc = int(read(lower)), int(read(upper)), int(to_signed(step, bits))
    if inc <= 0:
        raise InterpError(f"for loop step must be positive, got {inc}", op)
    carried = tuple(init)
    while iv < stop:
        term = frame.run_region(op.body, (make_int(iv, bits), *carried))
        if term.kind is TermKind.RETURN:
            return term
        carried = term.values
        if term.kind is TermKind.BREAK:
            break
        iv += inc
    return carried


@impl(K.LoopOp)
def _loop(frame, op, *init):
    carried = tuple(init)
    while True:
        term = frame.run_region(op.body, carried)
        if term.kind is TermKind.RETURN:
            return term
        carried = term.values
        if term.kind is TermKind.BREAK:
            return carried
        if term.kind is TermKind.YIELD:
            raise InterpError("loop body ended without continue or break", op)


@impl(K.AssertOp)
def _assert(frame, op, cond):
    c = np.asarray(cond, dtype=np.bool_)
    for index in zip(*np.nonzero(~c)) if c.ndim else ([()] if not c else []):
        frame.machine.failures.append((frame.block_id, tuple(int(i) for i in index), op.message))
    return ()


@impl(K.PrintTkoOp)
def _print(frame, op, *operands):
    args = [(frame.get(v), v.type) for v in op.args]
    frame.machine.output.append(format_print(op.str, args))
    return (TOKEN_VALUE,) if op.results else ()


@impl(K.GdcWaitTkoOp, K.GdcLaunchDependentsTkoOp)
def _gdc(frame, op, *operands):
    return (TOKEN_VALUE,)
