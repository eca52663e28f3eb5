"""The ``--emit=sched`` dump: per for loop, its graph, MinII and schedule."""
from __future__ import annotations

from ..ir.core import Function
from .ddg import DDG
from .latency import LatencyModel
from .loops import LoopSchedule
from .modulo import Schedule


def format_function_schedules(fn: Function, loops: list[LoopSchedule]) -> str:
    lines = [f"sched.func @{fn.name} {{"]
    if not loops:
        lines.append("  // no for loops")
    for ls in loops:
        lines.extend(format_loop_schedule(ls))
    lines.append("}")
    return "\n".join(lines) + "\n"


def format_loop_schedule(ls: LoopSchedule) -> list[str]:
    m = ls.min_ii
    head = (f"  loop {ls.index} (depth {ls.depth}, {len(ls.ddg)} ops, model {ls.model.name}): "
            f"MinII={m.value} ResMII={m.res} RecMII={m.rec} II={ls.schedule.ii} stages={ls.schedule.num_stages}")
    return [head, *("    " + s for s in format_ddg(ls.ddg, ls.model)),
            *("    " + s for s in format_schedule(ls.ddg, ls.schedule))]


def format_ddg(ddg: DDG, model: LatencyModel) -> list[str]:
    lines = ["nodes:"]
    for i, node in enumerate(ddg.nodes):
        cost = node.cost(model)
        occ = " ".join(f"{p.value}:{n}" for p, n in cost.occupancy) or "-"
        lines.append(f"  n{i} {node.name}  class={node.op_class.value} work={node.work} "
                     f"latency={cost.latency} occupancy={occ}")
    lines.append("edges:" if ddg.edges else "edges: none")
    for e in ddg.edges:
        lines.append(f"  n{e.src} -> n{e.dst}  {e.kind.value} latency={e.latency} distance={e.distance}")
    return lines


def format_schedule(ddg: DDG, schedule: Schedule) -> list[str]:
    lines = [f"schedule: ii={schedule.ii}"]
    order = sorted(range(len(ddg)), key=lambda v: (schedule.cycle_of[v], v))
    for v in order:
        lines.append(f"  cycle={schedule.cycle_of[v]} stage={schedule.stage_of[v]} "
                     f"cluster={schedule.cluster_of[v]}  n{v} {ddg.nodes[v].name}")
    return lines
