"""Iterative modulo scheduling (B. R. Rau, "Iterative Modulo Scheduling", 1994/1996).

A modulo schedule gives every op of a loop body a cycle; iteration ``i`` issues
op ``v`` at ``cycle_of[v] + i * ii``.  It is valid when every edge holds,
``cycle[dst] + distance * ii >= cycle[src] + latency``, and no cell of the
modulo reservation table is over its capacity.

* ``MinII = max(ResMII, RecMII)``.  ResMII: per pipe, the cycles all ops hold it
  divided by its capacity.  RecMII: the smallest ``ii`` for which the graph with
  edge weights ``latency - distance * ii`` has no positive cycle (checked with
  Bellman-Ford longest paths, binary search over ``ii``), which equals the
  largest ``ceil(latency / distance)`` over the recurrence circuits.
* For ``ii = MinII, MinII + 1, ...``: ops are scheduled one at a time, highest
  *height* first (the longest ``latency - distance * ii`` path to the end of the
  iteration, ties by program order), each at the first cycle in
  ``Estart .. Estart + ii - 1`` where it fits the table, ``Estart`` being the
  earliest cycle its scheduled predecessors allow.  When none fits it is forced
  into ``Estart`` (or one cycle after where it was last, so the search moves on)
  and the ops it conflicts with, in the table or through a now-violated edge
  to a successor, are unscheduled.  After ``budget_ratio * len(ddg)`` steps the
  attempt fails and ``ii`` grows.
* Should every ``ii`` up to the trivially feasible one fail,
  ``sequential_schedule`` (one op after the other) is the answer.

``stage = cycle // ii``; ``cluster`` = the rank of the op's cycle among the
distinct cycles of its stage (ops issued in the same cycle share a cluster).
Everything is deterministic: no iteration over hashed sets.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..record import record
from .ddg import DDG, Edge
from .latency import LatencyModel, OpCost, Pipe
from .mrt import ModuloReservationTable

#: Rau's budget: scheduling steps per op before an ``ii`` is given up.
DEFAULT_BUDGET_RATIO = 6


class SchedulingError(ValueError):
    """No valid schedule with ``ii <= max_ii``."""


@record(frozen=True)
class MinII:
    res: int
    rec: int

    @property
    def value(self) -> int:
        return max(self.res, self.rec, 1)


@record(frozen=True)
class Schedule:
    ii: int
    cycle_of: tuple[int, ...]
    stage_of: tuple[int, ...]
    cluster_of: tuple[int, ...]

    @classmethod
    def from_cycles(cls, ii: int, cycles: Sequence[int]) -> Schedule:
        stages = tuple(c // ii for c in cycles)
        return cls(ii, tuple(cycles), stages, clusters_of(cycles, stages))

    @property
    def num_stages(self) -> int:
        return max(self.stage_of, default=0) + 1

    @property
    def length(self) -> int:
        """Cycles from the first op of one iteration to the last op's issue, plus one."""
        return max(self.cycle_of, default=-1) + 1


def clusters_of(cycles: Sequence[int], stages: Sequence[int]) -> tuple[int, ...]:
    distinct: dict[int, list[int]] = {}
    for c, s in zip(cycles, stages):
        distinct.setdefault(s, [])
        if c not in distinct[s]:
            distinct[s].append(c)
    rank = {s: {c: k for k, c in enumerate(sorted(cs))} for s, cs in distinct.items()}
    return tuple(rank[s][c] for c, s in zip(cycles, stages))


# -- MinII ---------------------------------------------------------------------------------
def costs_of(ddg: DDG, model: LatencyModel) -> list[OpCost]:
    return [n.cost(model) for n in ddg.nodes]


def res_mii(ddg: DDG, model: LatencyModel) -> int:
    held: dict[Pipe, int] = {}
    for cost in costs_of(ddg, model):
        for pipe, n in cost.occupancy:
            held[pipe] = held.get(pipe, 0) + n
    return max((-(-n // model.capacity_of(p)) for p, n in held.items()), default=0)


def longest_paths(n: int, edges: Sequence[Edge], ii: int) -> list[int] | None:
    """Longest-path times (from 0) with weights ``latency - distance * ii``; None when a
    positive cycle makes them unbounded (Bellman-Ford)."""
    dist = [0] * n
    for _ in range(n + 1):
        changed = False
        for e in edges:
            t = dist[e.src] + e.latency - e.distance * ii
            if t > dist[e.dst]:
                dist[e.dst] = t
                changed = True
        if not changed:
            return dist
    return None


def rec_mii(ddg: DDG) -> int:
    """The smallest ``ii >= 0`` with no positive cycle (0 without recurrences)."""
    lo, hi = 0, sum(e.latency for e in ddg.edges) + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if longest_paths(len(ddg), ddg.edges, mid) is None:
            lo = mid + 1
        else:
            hi = mid
    return lo


def min_ii(ddg: DDG, model: LatencyModel) -> MinII:
    return MinII(res_mii(ddg, model), rec_mii(ddg))


def heights(ddg: DDG, ii: int) -> list[int]:
    """Rau's HeightR: the longest ``latency - distance * ii`` path from each op onwards."""
    n = len(ddg)
    h = [0] * n
    for _ in range(n + 1):
        changed = False
        for e in ddg.edges:
            t = h[e.dst] + e.latency - e.distance * ii
            if t > h[e.src]:
                h[e.src] = t
                changed = True
        if not changed:
            return h
    raise AssertionError(f"heights at ii {ii} below RecMII")


# -- the scheduler -------------------------------------------------------------------------
def modulo_schedule(ddg: DDG, model: LatencyModel, *, budget_ratio: float = DEFAULT_BUDGET_RATIO,
                    max_ii: int | None = None) -> Schedule:
    """Rau's iterative modulo scheduling; raises ``SchedulingError`` past ``max_ii``."""
    costs = costs_of(ddg, model)
    first = min_ii(ddg, model).value
    fallback = sequential_schedule(ddg, model)
    limit = fallback.ii if max_ii is None else max_ii
    budget = max(1, int(budget_ratio * len(ddg)))
    ii, failures = first, 0
    while ii <= limit and ii < fallback.ii:
        cycles = schedule_at(ddg, costs, model, ii, budget)
        if cycles is not None:
            return Schedule.from_cycles(ii, _normalized(cycles))
        failures += 1
        ii += max(1, (ii - first) // 8) if failures > 16 else 1
    if fallback.ii <= limit:
        return fallback
    raise SchedulingError(f"no modulo schedule with ii <= {limit} (MinII {first}, "
                          f"{len(ddg)} ops, budget {budget} steps per ii)")


def _normalized(cycles: list[int]) -> list[int]:
    low = min(cycles, default=0)
    return [c - low for c in cycles]


def schedule_at(ddg: DDG, costs: Sequence[OpCost], model: LatencyModel, ii: int,
                budget: int) -> list[int] | None:
    """One attempt at ``ii``: the cycle of every op, or None when the budget runs out."""
    n = len(ddg)
    mrt = ModuloReservationTable(ii, model.capacity)
    if any(not mrt.fits_alone(c.occupancy) for c in costs):
        return None
    height = heights(ddg, ii)
    rank = sorted(range(n), key=lambda v: (-height[v], v))
    ins = [[e for e in ddg.edges if e.dst == v and e.src != v] for v in range(n)]
    outs = [[e for e in ddg.edges if e.src == v and e.dst != v] for v in range(n)]
    time: list[int | None] = [None] * n
    last: list[int | None] = [None] * n

    def unschedule(v: int) -> None:
        mrt.release(v)
        time[v] = None

    while budget > 0:
        op = next((v for v in rank if time[v] is None), None)
        if op is None:
            return [t for t in time if t is not None]
        budget -= 1
        estart = max([0] + [time[e.src] + e.latency - e.distance * ii  # type: ignore[operator]
                            for e in ins[op] if time[e.src] is not None])
        occupancy = costs[op].occupancy
        slot = next((t for t in range(estart, estart + ii) if mrt.fits(occupancy, t)), None)
        if slot is None:
            prev = last[op]
            slot = estart if prev is None or estart > prev else prev + 1
        for v in mrt.conflicts(occupancy, slot) or ():
            unschedule(v)  # type: ignore[arg-type]
        mrt.reserve(op, occupancy, slot)
        time[op] = last[op] = slot
        for e in outs[op]:
            t = time[e.dst]
            if t is not None and t + e.distance * ii < slot + e.latency:
                unschedule(e.dst)
        for e in ins[op]:
            t = time[e.src]
            if t is not None and slot + e.distance * ii < t + e.latency:
                unschedule(e.src)
    return None


def sequential_schedule(ddg: DDG, model: LatencyModel) -> Schedule:
    """Ops one after another in dependence order, each after its predecessors' results and
    after the previous op leaves its pipes, with ``ii`` just large enough for the loop-
    carried edges and for the table: always valid, rarely good."""
    costs = costs_of(ddg, model)
    order = _topological(ddg)
    cycle = [0] * len(ddg)
    free_at = 0
    for v in order:
        ready = max([free_at] + [cycle[e.src] + e.latency for e in ddg.edges
                                 if e.dst == v and e.distance == 0])
        cycle[v] = ready
        free_at = ready + max(1, costs[v].issue)
    ii = max(1, free_at)
    for e in ddg.edges:
        if e.distance > 0:
            need = cycle[e.src] + e.latency - cycle[e.dst]
            ii = max(ii, -(-need // e.distance))
    return Schedule.from_cycles(ii, cycle)


def _topological(ddg: DDG) -> list[int]:
    """Program order respecting distance-0 edges (Kahn, smallest index first)."""
    n = len(ddg)
    indegree = [0] * n
    for e in ddg.edges:
        if e.distance == 0:
            indegree[e.dst] += 1
    ready = sorted(v for v in range(n) if indegree[v] == 0)
    order: list[int] = []
    while ready:
        v = ready.pop(0)
        order.append(v)
        for e in ddg.edges:
            if e.src == v and e.distance == 0:
                indegree[e.dst] -= 1
                if indegree[e.dst] == 0:
                    ready.append(e.dst)
                    ready.sort()
    return order


# -- checking ------------------------------------------------------------------------------
def check_schedule(ddg: DDG, schedule: Schedule, model: LatencyModel) -> list[str]:
    """Every problem with ``schedule``: violated edges, overfull table cells, stages and
    clusters that do not follow from the cycles.  Empty when it is valid."""
    n, ii = len(ddg), schedule.ii
    if ii < 1:
        return [f"ii must be >= 1, found {ii}"]
    if not (len(schedule.cycle_of) == len(schedule.stage_of) == len(schedule.cluster_of) == n):
        return [(f"the schedule has {len(schedule.cycle_of)} cycles, {len(schedule.stage_of)} stages and "
                 f"{len(schedule.cluster_of)} clusters for {n} ops")]
    problems = []
    cyc = schedule.cycle_of
    for e in ddg.edges:
        if cyc[e.dst] + e.distance * ii < cyc[e.src] + e.latency:
            problems.append(
                f"edge {ddg.nodes[e.src].name} -> {ddg.nodes[e.dst].name} ({e.kind.value}, latency "
                f"{e.latency}, distance {e.distance}): {cyc[e.dst]} + {e.distance}*{ii} < {cyc[e.src]} + {e.latency}")
    used: dict[tuple[int, Pipe], list[int]] = {}
    for v, cost in enumerate(costs_of(ddg, model)):
        for pipe, k in cost.occupancy:
            for j in range(k):
                used.setdefault(((cyc[v] + j) % ii, pipe), []).append(v)
    for (row, pipe), holders in sorted(used.items(), key=lambda c: (c[0][0], c[0][1].value)):
        if len(holders) > model.capacity_of(pipe):
            names = ", ".join(dict.fromkeys(ddg.nodes[v].name for v in holders))
            problems.append(f"row {row} pipe {pipe.value}: {len(holders)} units used, capacity "
                            f"{model.capacity_of(pipe)} ({names})")
    stages = tuple(c // ii for c in cyc)
    for v in range(n):
        if schedule.stage_of[v] != stages[v]:
            problems.append(f"{ddg.nodes[v].name}: stage {schedule.stage_of[v]}, cycle {cyc[v]} // {ii} "
                            f"is {stages[v]}")
    clusters = clusters_of(cyc, stages)
    for v in range(n):
        if schedule.cluster_of[v] != clusters[v]:
            problems.append(f"{ddg.nodes[v].name}: cluster {schedule.cluster_of[v]}, expected {clusters[v]}")
    return problems


Scheduler = Callable[[DDG, LatencyModel], Schedule]
