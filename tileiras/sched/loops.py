"""Schedules for every ``for`` loop of a function (the ``sched`` pipeline stage).

Nothing here changes the IR: ``schedule_loops`` returns, per loop in pre-order
(outer loops before the loops nested in them), its graph, MinII and schedule.
The scheduling algorithm and the latency model are arguments.
"""
from __future__ import annotations

from ..ir.core import Function
from ..lower.tileaa import TileAA
from ..record import record
from ..tile import ops_control as CF
from .ddg import DDG, DEFAULT_THREADS, build_loop_ddg
from .latency import LatencyModel
from .modulo import MinII, Schedule, Scheduler, min_ii, modulo_schedule


@record(frozen=True)
class LoopSchedule:
    index: int            # pre-order position among the function's for loops
    depth: int            # 0 for a loop at the function's top level
    loop: CF.ForOp
    ddg: DDG
    min_ii: MinII
    schedule: Schedule
    model: LatencyModel


def for_loops(fn: Function) -> list[tuple[CF.ForOp, int]]:
    """Every for loop with its nesting depth (counting for, loop and if ops around it)."""
    found: list[tuple[CF.ForOp, int]] = []

    def visit(ops: list, depth: int) -> None:
        for op in ops:
            if isinstance(op, CF.ForOp):
                found.append((op, depth))
            for region in op.regions:
                for block in region.blocks:
                    visit(block.ops, depth + 1 if isinstance(op, (CF.ForOp, CF.LoopOp, CF.IfOp)) else depth)

    visit(fn.entry_block.ops, 0)
    return found


def schedule_loops(fn: Function, aa: TileAA, model: LatencyModel, threads: int | None = None,
                   scheduler: Scheduler = modulo_schedule) -> list[LoopSchedule]:
    out = []
    for k, (loop, depth) in enumerate(for_loops(fn)):
        ddg = build_loop_ddg(loop, aa, model, threads or DEFAULT_THREADS)
        out.append(LoopSchedule(k, depth, loop, ddg, min_ii(ddg, model), scheduler(ddg, model), model))
    return out
