"""Modulo scheduling on synthetic graphs: MinII, Rau's iterative scheduler, the
reservation table and ``check_schedule`` (known answers and hypothesis properties)."""
from __future__ import annotations

from types import MappingProxyType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tileiras.sched.ddg import DDG, DepKind, Edge, InvalidDDG, Node
from tileiras.sched.latency import (
    AMPERE,
    BLACKWELL,
    HOPPER,
    ArchFamily,
    LatencyModel,
    OpClass,
    OpCost,
    Pipe,
    arch_family,
    model_for,
)
from tileiras.sched.modulo import (
    Schedule,
    SchedulingError,
    check_schedule,
    min_ii,
    modulo_schedule,
    rec_mii,
    res_mii,
    sequential_schedule,
)
from tileiras.sched.mrt import ModuloReservationTable, ReservationConflict

P = Pipe

#: A test model: FLOAT holds FMA 1 cycle, INT holds ALU 1 cycle, MMA holds TENSOR 2 cycles,
#: GLOBAL_LOAD holds LSU 3, FREE nothing; FMA accepts 2 ops a cycle, the others 1.
TEST_MODEL = LatencyModel("test", MappingProxyType({
    OpClass.FREE: OpCost(0),
    OpClass.FLOAT: OpCost(1, ((P.FMA, 1),)),
    OpClass.INT: OpCost(1, ((P.ALU, 1),)),
    OpClass.MMA: OpCost(4, ((P.TENSOR, 2),)),
    OpClass.GLOBAL_LOAD: OpCost(10, ((P.LSU, 3),)),
    OpClass.TRANSCENDENTAL: OpCost(6, ((P.SFU, 2), (P.FMA, 1))),
}), MappingProxyType({P.FMA: 2}))

#: Every class holds one pipe for one cycle (capacity 1): the unit-time model of the literature.
UNIT = LatencyModel("unit", MappingProxyType({
    OpClass.FLOAT: OpCost(1, ((P.FMA, 1),)),
    OpClass.INT: OpCost(1, ((P.ALU, 1),)),
    OpClass.MMA: OpCost(1, ((P.TENSOR, 1),)),
    OpClass.FREE: OpCost(0),
}), MappingProxyType({}))


def valid(ddg: DDG, model: LatencyModel) -> Schedule:
    s = modulo_schedule(ddg, model)
    assert check_schedule(ddg, s, model) == []
    return s


# -- known answers -----------------------------------------------------------------------------
def test_recurrence_circuit_gives_rec_mii():
    """a -> b -> c -> a (distance 1), latencies 2 + 3 + 4: RecMII = 9."""
    g = DDG.from_edges(["a", "b", "c"], [(0, 1, 2), (1, 2, 3), (2, 0, 4, 1)])
    assert min_ii(g, UNIT).rec == 9
    s = valid(g, UNIT)
    assert s.ii == 9 and s.cycle_of == (0, 2, 5)


def test_recurrence_over_two_iterations_rounds_up():
    """The same circuit at distance 2: ceil(9 / 2) = 5."""
    g = DDG.from_edges(["a", "b", "c"], [(0, 1, 2), (1, 2, 3), (2, 0, 4, 2)])
    assert rec_mii(g) == 5
    assert valid(g, UNIT).ii == 5


def test_the_tightest_of_several_circuits_wins():
    g = DDG.from_edges(["a", "b", "c", "d"],
                       [(0, 1, 1), (1, 0, 3, 1), (1, 2, 2), (2, 3, 2), (3, 1, 7, 2), (3, 3, 4, 1)])
    # circuits: a-b 4/1, b-c-d 11/2 -> 6, d-d 4/1
    assert rec_mii(g) == 6
    assert valid(g, UNIT).ii == 6


def test_no_recurrence_no_rec_mii():
    g = DDG.from_edges([("a", OpClass.FLOAT), ("b", OpClass.INT), ("c", OpClass.MMA)],
                       [(0, 1, 5), (1, 2, 5), (0, 2, 20)])
    assert rec_mii(g) == 0
    s = valid(g, UNIT)
    assert s.ii == 1 and s.cycle_of == (0, 5, 20) and s.stage_of == (0, 5, 20)


def test_resource_bound_loop():
    """Five independent FLOAT ops on a one-wide FMA pipe: ResMII = 5, one per row."""
    g = DDG.from_edges(["a", "b", "c", "d", "e"], [])
    assert min_ii(g, UNIT).res == 5
    s = valid(g, UNIT)
    assert s.ii == 5 and sorted(c % 5 for c in s.cycle_of) == [0, 1, 2, 3, 4]


def test_res_mii_counts_capacity_and_multi_pipe_ops():
    g = DDG.from_edges([("x", OpClass.TRANSCENDENTAL)] * 3 + [("f", OpClass.FLOAT)] * 2, [])
    # SFU: 3 * 2 = 6 cycles (capacity 1); FMA: 3 + 2 = 5 cycles over capacity 2 -> 3
    assert res_mii(g, TEST_MODEL) == 6
    assert valid(g, TEST_MODEL).ii == 6


def test_min_ii_not_achievable():
    """A (FMA 2 cycles) -> B (FMA 1 cycle), B -> A next iteration after 2 cycles:
    MinII = 3, but B would have to share A's second row: the answer is 4."""
    model = LatencyModel("t", MappingProxyType({OpClass.MMA: OpCost(1, ((P.FMA, 2),)),
                                                 OpClass.FLOAT: OpCost(2, ((P.FMA, 1),))}),
                         MappingProxyType({}))
    g = DDG.from_edges([("A", OpClass.MMA), ("B", OpClass.FLOAT)], [(0, 1, 1), (1, 0, 2, 1)])
    assert min_ii(g, model).value == 3
    assert brute_force_min_ii(g, model) == 4
    assert valid(g, model).ii == 4


def test_eviction_moves_an_op_to_a_free_row():
    """A long-latency load feeding a pipeline of FMAs: every op lands in its own FMA row."""
    nodes = [("ld", OpClass.GLOBAL_LOAD)] + [(f"f{i}", OpClass.FLOAT) for i in range(4)]
    edges = [(0, 1, 10)] + [(i, i + 1, 1) for i in range(1, 4)] + [(4, 4, 1, 1)]
    g = DDG.from_edges(nodes, edges)
    s = valid(g, TEST_MODEL)
    assert s.ii == 3  # LSU held 3 cycles
    assert s.num_stages > 1


def test_stage_and_cluster():
    s = Schedule.from_cycles(4, [0, 0, 3, 5, 9, 9])
    assert s.stage_of == (0, 0, 0, 1, 2, 2)
    assert s.cluster_of == (0, 0, 1, 0, 0, 0)
    assert s.num_stages == 3 and s.length == 10


def test_deterministic_on_a_fixed_graph():
    g = DDG.from_edges([("m", OpClass.MMA)] * 3 + ["a", "b", "c"],
                       [(0, 3, 4), (1, 4, 4), (2, 5, 4), (3, 0, 1, 1), (4, 1, 1, 1), (3, 4, 1), (4, 5, 1)])
    assert modulo_schedule(g, TEST_MODEL) == modulo_schedule(g, TEST_MODEL)


def test_max_ii_too_small_raises():
    g = DDG.from_edges(["a", "b"], [(0, 1, 3), (1, 0, 3, 1)])
    with pytest.raises(SchedulingError, match="ii <= 5"):
        modulo_schedule(g, UNIT, max_ii=5)


def test_cycle_within_one_iteration_is_rejected():
    with pytest.raises(InvalidDDG, match="distance 0"):
        DDG.from_edges(["a", "b"], [(0, 1, 1), (1, 0, 1)])
    with pytest.raises(InvalidDDG, match="outside"):
        DDG.from_edges(["a"], [(0, 1, 1)])
    with pytest.raises(InvalidDDG, match=">= 0"):
        DDG.from_edges(["a", "b"], [(0, 1, -1)])


def test_sequential_schedule_is_valid():
    g = DDG.from_edges([("ld", OpClass.GLOBAL_LOAD), ("m", OpClass.MMA), "f"],
                       [(0, 1, 10), (1, 2, 4), (2, 1, 1, 1), (1, 1, 4, 1)])
    s = sequential_schedule(g, TEST_MODEL)
    assert check_schedule(g, s, TEST_MODEL) == []
    assert modulo_schedule(g, TEST_MODEL).ii <= s.ii


# -- check_schedule catches broken schedules ---------------------------------------------------
def test_check_schedule_reports_a_violated_edge():
    g = DDG.from_edges(["a", "b"], [(0, 1, 3), (1, 0, 2, 1)])
    good = valid(g, UNIT)
    assert good.ii == 5
    bad = Schedule.from_cycles(5, [0, 2])
    problems = check_schedule(g, bad, UNIT)
    assert problems == ["edge a -> b (data, latency 3, distance 0): 2 + 0*5 < 0 + 3"]
    tight = Schedule.from_cycles(4, [0, 3])  # the carried edge needs 0 + 4 >= 3 + 2
    assert any("distance 1" in p for p in check_schedule(g, tight, UNIT))


def test_check_schedule_reports_an_overfull_row():
    g = DDG.from_edges(["a", "b", "c"], [])
    problems = check_schedule(g, Schedule.from_cycles(3, [0, 1, 3]), UNIT)
    assert problems == ["row 0 pipe fma: 2 units used, capacity 1 (a, c)"]
    assert check_schedule(g, Schedule.from_cycles(3, [0, 1, 5]), UNIT) == []


def test_check_schedule_reports_wrong_stages_and_clusters():
    g = DDG.from_edges(["a", "b"], [])
    s = Schedule(2, (0, 3), (0, 0), (0, 1))
    problems = check_schedule(g, s, UNIT)
    assert "b: stage 0, cycle 3 // 2 is 1" in problems
    assert "b: cluster 1, expected 0" in problems
    assert check_schedule(g, Schedule(0, (0, 0), (0, 0), (0, 0)), UNIT) == ["ii must be >= 1, found 0"]
    assert "for 2 ops" in check_schedule(g, Schedule(1, (0,), (0,), (0,)), UNIT)[0]


# -- the reservation table ---------------------------------------------------------------------
def test_mrt_reserve_release_conflicts():
    t = ModuloReservationTable(4, {P.FMA: 2})
    t.reserve("a", ((P.FMA, 3),), 2)           # rows 2, 3, 0
    assert [t.usage(r, P.FMA) for r in range(4)] == [1, 0, 1, 1]
    t.reserve("b", ((P.FMA, 1),), 4)           # row 0
    assert t.conflicts(((P.FMA, 1),), 0) == ("a",)  # row 0 is full: the oldest goes
    assert t.conflicts(((P.FMA, 1),), 1) == ()
    assert not t.fits(((P.FMA, 1),), 8)
    with pytest.raises(ReservationConflict):
        t.reserve("c", ((P.FMA, 1),), 0)
    t.release("a")
    assert t.fits(((P.FMA, 1),), 0) and t.holders(0, P.FMA) == ("b",)
    assert t.rows()[0] == {P.FMA: ("b",)}
    assert t.conflicts(((P.LSU, 5),), 0) is None   # 5 cycles on a 1-wide pipe never fit in 4 rows
    assert t.fits_alone(((P.FMA, 8),)) and not t.fits_alone(((P.FMA, 9),))
    with pytest.raises(ValueError):
        ModuloReservationTable(0, {})


def test_mrt_op_wrapping_the_table():
    t = ModuloReservationTable(2, {P.FMA: 2})
    t.reserve("long", ((P.FMA, 3),), 1)          # rows 1, 0, 1
    assert (t.usage(0, P.FMA), t.usage(1, P.FMA)) == (1, 2)
    assert t.conflicts(((P.FMA, 1),), 1) == ("long",)


# -- the latency model -------------------------------------------------------------------------
def test_model_families_and_scaling():
    assert arch_family(80) is ArchFamily.AMPERE and arch_family(89) is ArchFamily.AMPERE
    assert arch_family(90) is ArchFamily.HOPPER
    assert arch_family(100) is ArchFamily.BLACKWELL and arch_family(120) is ArchFamily.BLACKWELL
    assert model_for(86) is AMPERE and model_for(90) is HOPPER and model_for(103) is BLACKWELL
    for m in (AMPERE, HOPPER, BLACKWELL):
        assert set(m.costs) == set(OpClass)
        load, add, mma = m.cost(OpClass.GLOBAL_LOAD), m.cost(OpClass.FLOAT), m.cost(OpClass.MMA)
        assert load.latency > 50 * add.latency and add.latency < mma.latency < load.latency
        assert m.cost(OpClass.FREE) == OpCost(0)
    one = HOPPER.cost(OpClass.MMA)
    four = HOPPER.cost(OpClass.MMA, 4)
    assert four.latency == one.latency + 3 * one.issue and four.pipe_cycles(P.TENSOR) == 4 * one.pipe_cycles(P.TENSOR)
    assert AMPERE.cost(OpClass.FLOAT).issue == 2 * HOPPER.cost(OpClass.FLOAT).issue
    assert hash(HOPPER) == hash(HOPPER)


def test_control_node_costs_its_body():
    n = Node("for", OpClass.CONTROL, 1, ((OpClass.FLOAT, 2, 3), (OpClass.GLOBAL_LOAD, 1, 1)))
    c = n.cost(HOPPER)
    assert c.latency == 3 * HOPPER.cost(OpClass.FLOAT, 2).latency + HOPPER.cost(OpClass.GLOBAL_LOAD).latency
    assert c.pipe_cycles(P.FMA) == 6 and c.pipe_cycles(P.LSU) == 4


# -- properties on random graphs ---------------------------------------------------------------
CLASSES = (OpClass.FREE, OpClass.FLOAT, OpClass.INT, OpClass.MMA, OpClass.GLOBAL_LOAD, OpClass.TRANSCENDENTAL)


@st.composite
def random_ddgs(draw, max_nodes: int = 10, classes=CLASSES, recurrences: bool = True,
                max_latency: int = 12) -> DDG:
    n = draw(st.integers(1, max_nodes))
    nodes = [(f"v{i}", draw(st.sampled_from(classes))) for i in range(n)]
    edges = []
    for _ in range(draw(st.integers(0, 2 * n))):
        a, b = sorted((draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))))
        if a != b:
            edges.append(Edge(a, b, draw(st.integers(0, max_latency)), 0, DepKind.DATA))
    if recurrences:
        for _ in range(draw(st.integers(0, n))):
            a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
            edges.append(Edge(a, b, draw(st.integers(0, max_latency)), draw(st.integers(1, 3)), DepKind.CARRIED))
    return DDG.from_edges(nodes, edges)


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(random_ddgs())
def test_every_schedule_is_valid_and_at_least_min_ii(g):
    s = modulo_schedule(g, TEST_MODEL)
    assert check_schedule(g, s, TEST_MODEL) == []
    assert s.ii >= min_ii(g, TEST_MODEL).value
    assert s.ii <= sequential_schedule(g, TEST_MODEL).ii
    assert min(s.cycle_of) == 0
    assert s == modulo_schedule(g, TEST_MODEL)  # deterministic


@PROPERTY
@given(random_ddgs(classes=(OpClass.FLOAT, OpClass.INT, OpClass.MMA), recurrences=False))
def test_acyclic_unit_resources_reach_min_ii(g):
    """Without recurrences and with one-cycle reservations every op finds a free row:
    the first attempt, at MinII = ResMII, succeeds."""
    s = modulo_schedule(g, UNIT)
    assert check_schedule(g, s, UNIT) == []
    assert s.ii == min_ii(g, UNIT).value == max(1, res_mii(g, UNIT))


@PROPERTY
@given(random_ddgs(classes=(OpClass.FREE,)))
def test_recurrences_without_resources_reach_rec_mii(g):
    """With no resource limits the longest-path times at RecMII are a schedule: Rau's
    scheduler finds one at MinII."""
    s = modulo_schedule(g, TEST_MODEL)
    assert check_schedule(g, s, TEST_MODEL) == []
    assert s.ii == max(1, rec_mii(g))


@settings(max_examples=150, deadline=None)
@given(random_ddgs(max_nodes=4, max_latency=4))
def test_never_below_the_exact_optimum(g):
    """On small graphs: the exact smallest ii (exhaustive search) is between MinII and ours."""
    s = modulo_schedule(g, TEST_MODEL)
    best = brute_force_min_ii(g, TEST_MODEL, upto=s.ii)
    assert min_ii(g, TEST_MODEL).value <= best <= s.ii


@settings(max_examples=200, deadline=None)
@given(random_ddgs(max_nodes=6), st.data())
def test_check_schedule_catches_a_moved_op(g, data):
    """Moving one op of a valid schedule breaks an edge or the table exactly when the
    independent recount below says so."""
    s = modulo_schedule(g, TEST_MODEL)
    v = data.draw(st.integers(0, len(g) - 1))
    delta = data.draw(st.integers(-5, 5))
    cycles = list(s.cycle_of)
    cycles[v] += delta
    low = min(cycles)
    moved = Schedule.from_cycles(s.ii, [c - low for c in cycles])
    assert bool(check_schedule(g, moved, TEST_MODEL)) == (not _valid_by_recount(g, moved, TEST_MODEL))


def _valid_by_recount(g: DDG, s: Schedule, model: LatencyModel) -> bool:
    if any(s.cycle_of[e.dst] - s.cycle_of[e.src] < e.latency - e.distance * s.ii for e in g.edges):
        return False
    count: dict = {}
    for v, node in enumerate(g.nodes):
        for pipe, k in node.cost(model).occupancy:
            for j in range(k):
                key = ((s.cycle_of[v] + j) % s.ii, pipe)
                count[key] = count.get(key, 0) + 1
    return all(n <= model.capacity_of(p) for (_, p), n in count.items())


def brute_force_min_ii(g: DDG, model: LatencyModel, upto: int = 64) -> int:
    """The exact smallest ii (small graphs only): every assignment of table rows to ops
    that fits the table, then the stages as integer difference constraints
    ``k[dst] - k[src] >= ceil((row[src] + latency - row[dst]) / ii - distance)``,
    feasible when they have no positive cycle."""
    import itertools

    n = len(g)
    occupancy = [node.cost(model).occupancy for node in g.nodes]
    for ii in range(max(1, min_ii(g, model).value), upto + 1):
        for rows in itertools.product(range(ii), repeat=n):
            t = ModuloReservationTable(ii, model.capacity)
            if not all(t.fits(occupancy[v], rows[v]) and t.reserve(v, occupancy[v], rows[v]) is None
                       for v in range(n)):
                continue
            bounds = [Edge(e.src, e.dst, -((rows[e.dst] - rows[e.src] - e.latency) // ii) - e.distance)
                      for e in g.edges]
            if _no_positive_cycle(n, bounds):
                return ii
    return upto


def _no_positive_cycle(n: int, edges: list) -> bool:
    k = [0] * n
    for _ in range(n + 1):
        changed = False
        for e in edges:
            if k[e.src] + e.latency > k[e.dst]:
                k[e.dst] = k[e.src] + e.latency
                changed = True
        if not changed:
            return True
    return False
