"""The data-dependence graph of a loop body, for modulo scheduling.

Nodes are the ops of a ``for`` loop's body, in program order, without the
terminator; an op with regions (a nested ``if``/``for``/``loop``) is one node
that stands for everything inside it.  An edge ``src -> dst`` with latency
``lat`` and distance ``dist`` says: ``dst`` of iteration ``n + dist`` may issue
no earlier than ``lat`` cycles after ``src`` of iteration ``n``.  Edges come from

* **SSA uses** (``DATA``, distance 0): an op uses a value defined in the body
  (token operands excepted: they order memory, see below);
* **loop-carried uses** (``CARRIED``): an op uses an iteration argument; the
  value comes from the ``continue`` operand of the previous iteration (distance
  1, or more when the argument is passed on unchanged through other arguments);
* **memory dependences** (``MEMORY``), from TileAA: ``deps[op]`` is the set of
  memory ops ``op`` must observe through its token chain.  Pairs of which
  neither writes (two loads) need no order and give no edge.  The distance is
  that of the token chain: 0 within one iteration, 1 (or more) when the chain
  goes through a loop-carried token.

Every edge carries the producer's result latency (``LatencyModel.cost``), so
memory edges are conservative: a store waits for the whole latency of a load it
must follow.  The induction variable is computed by the loop itself and gives no
edge.  ``DDG.from_edges`` builds synthetic graphs for tests.
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Sequence

from ..ir import types as T
from ..ir.core import Block, Operation, Value
from ..lower.tileaa import TileAA
from ..record import field, record
from ..tile import ops_control as CF
from ..tile.traits import DATA_RESOURCES, is_terminator, writes
from .latency import LatencyModel, OpClass, OpCost, Pipe, classify

#: Element threads a tile is spread over when no layout says otherwise (4 warps).
DEFAULT_THREADS = 128
#: Bytes one thread moves per global memory instruction (a 128-bit vector).
VECTOR_BYTES = 16
#: Multiply-adds of one ``mma.sync`` m16n8k16.
MMA_INSTRUCTION_MACS = 16 * 8 * 16


class DepKind(enum.Enum):
    DATA = "data"
    CARRIED = "carried"
    MEMORY = "memory"


@record(frozen=True)
class Node:
    """One op of the body.  ``work``: instructions per warp.  ``inner``: for an op with
    regions, ``(class, work, times)`` for every op inside it, ``times`` being how often
    it runs per run of the node (the trip counts of the loops around it, when they are
    constants; 1 otherwise); the node costs their sum, one after the other."""

    name: str
    op_class: OpClass
    work: int = 1
    inner: tuple[tuple[OpClass, int, int], ...] = ()
    op: Operation | None = field(default=None, compare=False, hash=False, repr=False)

    def cost(self, model: LatencyModel) -> OpCost:
        if not self.inner:
            return model.cost(self.op_class, self.work)
        latency = 0
        pipes: dict[Pipe, int] = {}
        for op_class, work, times in self.inner:
            c = model.cost(op_class, work)
            latency += c.latency * times
            for p, n in c.occupancy:
                pipes[p] = pipes.get(p, 0) + n * times
        return OpCost(latency, tuple(sorted(pipes.items(), key=lambda pn: pn[0].value)))


@record(frozen=True)
class Edge:
    src: int
    dst: int
    latency: int
    distance: int = 0
    kind: DepKind = DepKind.DATA


class InvalidDDG(ValueError):
    """A graph no schedule can satisfy (a cycle within one iteration, bad indices)."""


NodeSpec = Node | str | tuple
EdgeSpec = Edge | tuple


@record(frozen=True)
class DDG:
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]

    def __post_init__(self) -> None:
        n = len(self.nodes)
        for e in self.edges:
            if not (0 <= e.src < n and 0 <= e.dst < n):
                raise InvalidDDG(f"edge {e.src}->{e.dst} names a node outside 0..{n - 1}")
            if e.latency < 0 or e.distance < 0:
                raise InvalidDDG(f"edge {e.src}->{e.dst}: latency and distance must be >= 0, "
                                 f"found {e.latency} and {e.distance}")
        cycle = _zero_distance_cycle(n, self.edges)
        if cycle:
            raise InvalidDDG("a dependence cycle within one iteration (distance 0): "
                             + " -> ".join(self.nodes[i].name for i in cycle))

    @classmethod
    def from_edges(cls, nodes: Sequence[NodeSpec], edges: Iterable[EdgeSpec]) -> DDG:
        """A synthetic graph.  A node is a ``Node``, a name (class FLOAT) or
        ``(name, op_class[, work])``; an edge is an ``Edge`` or
        ``(src, dst, latency[, distance[, kind]])``."""
        def node(spec: NodeSpec) -> Node:
            if isinstance(spec, Node):
                return spec
            if isinstance(spec, str):
                return Node(spec, OpClass.FLOAT)
            return Node(*spec)

        def edge(spec: EdgeSpec) -> Edge:
            return spec if isinstance(spec, Edge) else Edge(*spec)

        return cls(tuple(node(s) for s in nodes), tuple(edge(e) for e in edges))

    def __len__(self) -> int:
        return len(self.nodes)

    def out_edges(self, i: int) -> Iterator[Edge]:
        return (e for e in self.edges if e.src == i)

    def in_edges(self, i: int) -> Iterator[Edge]:
        return (e for e in self.edges if e.dst == i)


def _zero_distance_cycle(n: int, edges: Sequence[Edge]) -> list[int]:
    """A cycle of distance-0 edges, as a node list, or [] (iterative DFS)."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for e in edges:
        if e.distance == 0:
            succ[e.src].append(e.dst)
    state = [0] * n  # 0 new, 1 on the stack, 2 done
    for root in range(n):
        if state[root]:
            continue
        stack = [(root, 0)]
        path = [root]
        state[root] = 1
        while stack:
            v, k = stack[-1]
            if k < len(succ[v]):
                stack[-1] = (v, k + 1)
                w = succ[v][k]
                if state[w] == 1:
                    return path[path.index(w):] + [w]
                if state[w] == 0:
                    state[w] = 1
                    stack.append((w, 0))
                    path.append(w)
            else:
                state[v] = 2
                stack.pop()
                path.pop()
    return []


# -- building the graph of a real loop -----------------------------------------------------
def build_loop_ddg(loop: CF.ForOp, aa: TileAA, model: LatencyModel, threads: int = DEFAULT_THREADS) -> DDG:
    """The graph of ``loop``'s body.  ``aa`` is the function's TileAA (memory dependences);
    ``threads`` the threads a tile is spread over (``TileAS.layout_threads``)."""
    body = loop.regions[0].blocks[0]
    ops = [op for op in body.ops if not is_terminator(op)]
    term = body.ops[-1] if body.ops and is_terminator(body.ops[-1]) else None
    nodes = tuple(_node(i, op, aa, threads) for i, op in enumerate(ops))
    node_of: dict[Operation, int] = {}
    defined: dict[Value, int] = {}
    for i, op in enumerate(ops):
        for inner in op.walk():
            node_of[inner] = i
            defined.update((r, i) for r in inner.results)
            for region in inner.regions:
                for b in region.blocks:
                    defined.update((a, i) for a in b.args)
    latency = [n.cost(model).latency for n in nodes]
    found: dict[tuple[int, int, int, DepKind], None] = {}

    def add(src: int, dst: int, distance: int, kind: DepKind) -> None:
        found.setdefault((src, dst, distance, kind), None)

    for i, op in enumerate(ops):
        for inner in op.walk():
            for v in inner.operands:
                if isinstance(v.type, T.TokenType):
                    continue  # ordering, not data: the memory edges below
                if v in defined and defined[v] != i:
                    add(defined[v], i, 0, DepKind.DATA)
                elif v.owner is body and term is not None:
                    src = _carried_source(body, term, v, defined)
                    if src is not None:
                        add(src[0], i, src[1], DepKind.CARRIED)
    for i, op in enumerate(ops):
        for src, dst, distance in _memory_edges(i, op, aa, body, term, node_of, defined):
            add(src, dst, distance, DepKind.MEMORY)
    kinds = list(DepKind)
    ordered = sorted(found, key=lambda k: (k[0], k[1], k[2], kinds.index(k[3])))
    edges = tuple(Edge(s, d, latency[s], dist, kind) for s, d, dist, kind in ordered)
    return DDG(nodes, edges)


def _carried_source(body: Block, term: Operation, arg: Value,
                    defined: dict[Value, int]) -> tuple[int, int] | None:
    """The node producing iteration argument ``arg`` and its distance (None: the value
    comes from outside the loop, is the induction variable, or only circulates)."""
    distance = 0
    seen: set[Value] = set()
    v = arg
    while v.owner is body:
        if v.index == 0 or v in seen:
            return None
        seen.add(v)
        v = term.operands[v.index - 1]
        distance += 1
    return (defined[v], distance) if v in defined else None


def _is_write(op: Operation) -> bool:
    """Writes data a token orders (memory or the printf buffer): ordered against any access."""
    return writes(op, *DATA_RESOURCES)


def _memory_edges(i: int, op: Operation, aa: TileAA, body: Block, term: Operation | None,
                  node_of: dict[Operation, int], defined: dict[Value, int]) -> Iterator[tuple[int, int, int]]:
    for m in op.walk():
        deps = aa.deps.get(m)
        if not deps:
            continue
        chain = _token_distances(m, body, term, defined) if m is op else {}
        for d in sorted(deps, key=lambda d: node_of.get(d, -1)):
            j = node_of.get(d)
            if j is None or not (_is_write(d) or _is_write(m)):
                continue
            distance = chain.get(j, 0 if j < i else 1)
            if j == i and distance == 0:
                continue  # both inside one nested op, within one iteration
            yield j, i, distance


def _token_distances(m: Operation, body: Block, term: Operation | None,
                     defined: dict[Value, int]) -> dict[int, int]:
    """Node -> smallest distance at which ``m``'s token chain reaches it."""
    best: dict[Value, int] = {}
    result: dict[int, int] = {}
    stack = [(v, 0) for v in m.operands if isinstance(v.type, T.TokenType)]
    while stack:
        v, dist = stack.pop()
        if best.get(v, 1 << 30) <= dist:
            continue
        best[v] = dist
        if v.owner is body:
            if v.index > 0 and term is not None:
                stack.append((term.operands[v.index - 1], dist + 1))
            continue
        j = defined.get(v)
        if j is None or not isinstance(v.owner, Operation):
            continue
        result[j] = min(result.get(j, dist), dist)
        stack.extend((o, dist) for o in v.owner.operands if isinstance(o.type, T.TokenType))
    return result


def _node(i: int, op: Operation, aa: TileAA, threads: int) -> Node:
    op_class = classify(op)
    inner = tuple(_inner_ops(op, aa, threads, 1)) if op_class is OpClass.CONTROL else ()
    return Node(f"{op.name}#{i}", op_class, work_of(op, threads), inner, op)


def _inner_ops(op: Operation, aa: TileAA, threads: int, times: int) -> Iterator[tuple[OpClass, int, int]]:
    """(class, work, times) of the ops inside a control op, loops multiplying ``times``."""
    times *= trip_count(op, aa) if isinstance(op, CF.ForOp) else 1
    for region in op.regions:
        for block in region.blocks:
            for o in block.ops:
                c = classify(o)
                if c is OpClass.CONTROL:
                    yield from _inner_ops(o, aa, threads, times)
                elif c is not OpClass.FREE:
                    yield c, work_of(o, threads), times


def known_trips(loop: CF.ForOp, aa: TileAA) -> bool:
    """Are ``loop``'s bounds and step known constants?"""
    return all(aa.fact(v).lower is not None and aa.fact(v).lower == aa.fact(v).upper for v in loop.operands[:3])


def trip_count(loop: CF.ForOp, aa: TileAA) -> int:
    """Iterations of ``loop`` when its bounds and step are known constants, else 1."""
    lo, hi, step = (aa.fact(v) for v in loop.operands[:3])
    if not known_trips(loop, aa) or step.lower <= 0:  # type: ignore[operator]
        return 1
    return max(0, -(-(hi.lower - lo.lower) // step.lower))  # type: ignore[operator]


def work_of(op: Operation, threads: int = DEFAULT_THREADS) -> int:
    """Instructions one warp issues for ``op``: elements per thread for element-wise
    ops, 16-byte vectors per thread for memory ops, m16n8k16 steps per warp for mma."""
    op_class = classify(op)
    tiles = [v.type for v in (*op.results, *op.operands) if isinstance(v.type, T.TileType)]
    if not tiles or op_class in (OpClass.FREE, OpClass.CONTROL):
        return 1
    if op_class is OpClass.MMA:
        out, lhs = op.results[0].type, op.operands[0].type
        macs = out.num_elements * lhs.shape[-1]
        return max(1, -(-macs // (MMA_INSTRUCTION_MACS * max(1, threads // 32))))
    big = max(tiles, key=lambda t: t.num_elements)
    if op_class in (OpClass.GLOBAL_LOAD, OpClass.GLOBAL_STORE, OpClass.ATOMIC):
        size = max(1, _element_bytes(big.element) * big.num_elements)
        return max(1, -(-size // (threads * VECTOR_BYTES)))
    return max(1, -(-big.num_elements // threads))


def _element_bytes(t: T.Type) -> int:
    if isinstance(t, T.ScalarType):
        return max(1, t.bitwidth // 8)
    return 8
