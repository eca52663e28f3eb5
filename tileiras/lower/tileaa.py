"""cuda_tile -> TileAA: the alias-aware view of a function.

Three analyses, none of which mutates the IR:

* **Memory dependences.**  Tokens order memory operations.  Following each
  memory op's token operand back through ``join_tokens`` and loop-carried
  tokens gives the set of earlier memory ops it must observe; token values
  themselves carry no data and disappear in code generation.
* **Value facts.**  ``assume`` predicates (``div_by``, ``bounded``), constants
  and integer arithmetic give, per integer or pointer value, a known divisor
  and bounds.  Later stages use them to pick vector widths, drop bounds checks
  and choose 32-bit index math.
* **Dead ops.**  Ops whose results nothing live uses and that only compute them
  (``is_removable``: the op's traits say so): later stages give them no layout, no code and no say in
  the CTA size.
* **Poison.**  What NVIDIA's tileiras leaves undefined (``unpairable``): values
  computed from it emit no code, and stores of them none either.

``analyze(fn)`` returns a ``TileAA`` holding both; ``format_tileaa`` dumps it
(``--emit=tileaa``).
"""
from __future__ import annotations

from math import gcd
from typing import Callable, Iterator, Optional

from ..ir import attrs as A
from ..ir import types as T
from ..ir.core import Block, Function, Operation, Value
from ..record import field, record
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.ops_internal import ClusterRankOp
from ..tile.traits import (DATA_RESOURCES, SHARED_MEMORY_RESOURCES, Resource, effects_of,
                           is_plain_store, is_trivially_dead_if_unused, touches, writes)

#: Divisors are tracked up to this power of two.
MAX_DIVISOR = 1 << 16



def is_memory_op(op: Operation) -> bool:
    """Does ``op`` act on data that tokens order (memory, the printf buffer)?  Those are the
    ops TileAA follows tokens for; fences and grid-dependency ops order only execution."""
    return touches(op, *DATA_RESOURCES)


def is_write(op: Operation) -> bool:
    """Does ``op`` write memory other threads may read (a store, an atomic, a multimem write)?"""
    return writes(op, *SHARED_MEMORY_RESOURCES)


@record(frozen=True)
class Facts:
    """What is known about every element of an integer (or pointer) value."""

    divisor: int = 1                 # a power of two dividing every element
    lower: Optional[int] = None      # inclusive bounds
    upper: Optional[int] = None

    @property
    def non_negative(self) -> bool:
        return self.lower is not None and self.lower >= 0

    def fits_i32(self) -> bool:
        return (self.lower is not None and self.upper is not None
                and -(1 << 31) <= self.lower and self.upper < (1 << 31))


UNKNOWN = Facts()


def pow2_divisor(n: int) -> int:
    if n == 0:
        return MAX_DIVISOR
    return min(n & -n, MAX_DIVISOR)




@record
class TileAA:
    function: Function
    facts: dict[Value, Facts] = field(default_factory=dict)
    #: memory op -> memory ops it must observe (through its token chain)
    deps: dict[Operation, frozenset[Operation]] = field(default_factory=dict)
    #: token value -> memory ops that completed when it was produced
    token_sources: dict[Value, frozenset[Operation]] = field(default_factory=dict)
    #: ops no live op needs (see is_removable), nested ones included
    dead: frozenset[Operation] = frozenset()
    #: undefined values (see ``unpairable``) and the live ops that emit no code for them
    poison: frozenset[Value] = frozenset()
    silent: frozenset[Operation] = frozenset()
    _observed: Optional[frozenset[Operation]] = None

    def live_ops(self) -> Iterator[Operation]:
        """The function's ops, nested ones included, less the dead ones."""
        return (op for op in self.function.walk() if op not in self.dead)

    def fact(self, v: Value) -> Facts:
        return self.facts.get(v, UNKNOWN)

    def needs_barrier(self, op: Operation) -> bool:
        """Must ``op`` wait for other threads' writes (a token-ordered write before it)?"""
        return any(is_write(d) for d in self.deps.get(op, ()))

    def observed_by_write(self, op: Operation) -> bool:
        """Is some write token-ordered after ``op`` (it must see memory as before it)?"""
        if self._observed is None:
            self._observed = frozenset(d for w, ds in self.deps.items() if is_write(w) for d in ds)
        return op in self._observed


def analyze(fn: Function) -> TileAA:
    aa = TileAA(fn)
    _walk_block(aa, fn.entry_block)
    aa.dead = dead_ops(fn)
    aa.poison, silent = poison_of(fn, aa.dead)
    # and what only those need: no code, though still part of the kernel (its CTA size)
    aa.silent = silent | (dead_ops(fn, silent) - aa.dead) if silent else silent
    return aa


def unpairable(op: Operation) -> bool:
    """A multimem op on f16/bf16 whose tile has fewer than two elements along the view's
    unit-stride dim: PTX multimem takes 16-bit floats only in pairs, and NVIDIA's tileiras
    13.5 then compiles no code for the op (its message "requires at least 2 contiguous
    element(s) per thread ..." is never printed): a load's tile is left undefined, a store
    or reduction goes (measured: such a kernel compiles to a lone ``ret``)."""
    if not touches(op, Resource.MULTICAST):
        return False
    view = op.view.type
    tensor = view.tensor_view
    unit = [k for k, d in enumerate(view.dim_map) if tensor.strides[d] == 1]
    return tensor.element.bitwidth == 16 and len(unit) == 1 and view.tile_shape[unit[0]] < 2


def poison_of(fn: Function, dead: frozenset[Operation]) -> tuple[frozenset[Value], frozenset[Operation]]:
    """(undefined values, live ops that emit no code): an unpairable load's tile, and the
    results of side-effect-free ops with an undefined operand, are undefined; those ops,
    unpairable multimem ops and stores of undefined tiles emit nothing (LLVM drops a store
    of poison; NVIDIA's PTX shows none)."""
    poison: set[Value] = set()
    silent: set[Operation] = set()
    for op in fn.walk():
        if op in dead:
            continue
        if unpairable(op):
            silent.add(op)
            poison.update(r for r in op.results if not isinstance(r.type, T.TokenType))
        elif (is_plain_store(op) or writes(op, Resource.MULTICAST)) and _stored(op) in poison:
            silent.add(op)
        elif is_removable(op) and effects_of(op) == () and any(v in poison for v in op.operands):
            silent.add(op)
            poison.update(op.results)
    return frozenset(poison), frozenset(silent)


def _stored(op: Operation) -> Value:
    return op.value if isinstance(op, MEM.StorePtrTkoOp) else op.tile


def is_removable(op: Operation) -> bool:
    """May ``op`` go when nothing uses its results?  When its traits say it only computes them
    (``is_trivially_dead_if_unused``: loads among them whatever their ordering, as NVIDIA's
    tileiras 13.5 drops a load, plain or multimem, weak, relaxed or acquire with the acquire's
    fence, whose value and token are both unused, and sizes the CTA by what is left: a kernel
    left empty gets one warp), and the multimem writes it compiles to nothing (``unpairable``)."""
    if writes(op, Resource.MULTICAST) and unpairable(op):
        return True
    return is_trivially_dead_if_unused(op)


def dead_ops(fn: Function, silent: frozenset[Operation] = frozenset()) -> frozenset[Operation]:
    """Every op not needed by an op that must run: marked from those (and, inside a live
    op's regions, from the ones there), through operands; the ops of a dead op's regions
    are dead with it.  ``silent`` ops (which emit no code) need nothing and are needed
    only by a non-silent op."""
    producer = {r: op for op in fn.walk() for r in op.results}
    live: set[Operation] = set()

    def roots(ops: list[Operation]) -> list[Operation]:
        return [op for op in ops if not is_removable(op) and op not in silent]

    work = roots(fn.entry_block.ops)
    while work:
        op = work.pop()
        if op in live:
            continue
        live.add(op)
        if op in silent:
            continue
        work += [producer[v] for v in op.operands if v in producer]
        work += [o for region in op.regions for block in region.blocks for o in roots(block.ops)]
    return frozenset(op for op in fn.walk() if op not in live)


def _walk_block(aa: TileAA, block: Block) -> None:
    for op in block.ops:
        _visit(aa, op)


def _visit(aa: TileAA, op: Operation) -> None:
    if is_memory_op(op):
        token = getattr(op, "token", None)
        deps = aa.token_sources.get(token, frozenset()) if token is not None else frozenset()
        aa.deps[op] = deps
        for r in op.results:
            if isinstance(r.type, T.TokenType):
                aa.token_sources[r] = deps | {op}
    elif isinstance(op, MEM.JoinTokensOp):
        merged: frozenset[Operation] = frozenset()
        for t in op.operands:
            merged |= aa.token_sources.get(t, frozenset())
        aa.token_sources[op.result] = merged
    elif isinstance(op, (CF.ForOp, CF.LoopOp, CF.IfOp)):
        _visit_region_op(aa, op)
        return
    rule = _FACT_RULES.get(type(op))
    if rule is not None:
        for r, f in zip(op.results, rule(aa, op)):
            if f != UNKNOWN:
                aa.facts[r] = f
    for region in op.regions:
        for block in region.blocks:
            _walk_block(aa, block)


def _visit_region_op(aa: TileAA, op: Operation) -> None:
    """Tokens carried around a loop may come from any iteration: seed the block
    arguments with the tokens coming in, walk the body twice so stores late in
    the body reach loads early in it."""
    inits = list(op.operands[3:] if isinstance(op, CF.ForOp) else op.operands if isinstance(op, CF.LoopOp) else ())
    for region in op.regions:
        if not region.blocks:  # an ``if`` without ``else``
            continue
        block = region.blocks[0]
        carried = block.args[1:] if isinstance(op, CF.ForOp) else block.args
        for arg, init in zip(carried, inits):
            if init in aa.token_sources:
                aa.token_sources[arg] = aa.token_sources[init]
        if isinstance(op, CF.ForOp):
            aa.facts[block.args[0]] = _range_fact(aa, op)
        passes = 2 if inits else 1
        for _ in range(passes):
            _walk_block(aa, block)
            term = block.ops[-1] if block.ops else None
            if term is not None:
                for arg, v in zip(carried, term.operands):
                    if v in aa.token_sources:
                        aa.token_sources[arg] = aa.token_sources.get(arg, frozenset()) | aa.token_sources[v]
    all_mem: frozenset[Operation] = frozenset(o for region in op.regions for b in region.blocks
                                              for o0 in b.ops for o in o0.walk() if is_memory_op(o))
    for r in op.results:
        if isinstance(r.type, T.TokenType):
            aa.token_sources[r] = all_mem | frozenset().union(*(aa.token_sources.get(i, frozenset()) for i in inits))


def _range_fact(aa: TileAA, op: Operation) -> Facts:
    lo, hi, step = (aa.fact(v) for v in op.operands[:3])
    if lo.lower is None or hi.upper is None:
        return Facts(divisor=gcd(lo.divisor, step.divisor))
    return Facts(divisor=gcd(lo.divisor, step.divisor), lower=lo.lower, upper=max(lo.lower, hi.upper - 1))


# -- fact rules, by op class ---------------------------------------------------------
FactRule = Callable[[TileAA, Operation], list[Facts]]
_FACT_RULES: dict[type, FactRule] = {}


def facts_for(*classes: type) -> Callable[[FactRule], FactRule]:
    def register(fn: FactRule) -> FactRule:
        for c in classes:
            _FACT_RULES[c] = fn
        return fn
    return register


def splat_int(op: CO.ConstantOp) -> Optional[int]:
    """The value of an integer constant whose elements are all equal."""
    t = op.result.type
    elem = t.element if isinstance(t, T.TileType) else t
    if not isinstance(elem, T.ScalarType) or not elem.is_int or not isinstance(op.value, A.DenseElementsAttr):
        return None
    data = op.value.data
    width = max(1, elem.bitwidth // 8)
    if not isinstance(data, bytes) or len(data) % width:
        return None
    values = {int.from_bytes(data[i:i + width], "little", signed=True) for i in range(0, len(data), width)}
    return values.pop() if len(values) == 1 else None


@facts_for(CO.ConstantOp)
def _constant(aa: TileAA, op: Operation) -> list[Facts]:
    v = splat_int(op)
    return [UNKNOWN if v is None else Facts(pow2_divisor(v), v, v)]


@facts_for(CF.AssumeOp)
def _assume(aa: TileAA, op: Operation) -> list[Facts]:
    base = aa.fact(op.value)
    pred = op.predicate
    if isinstance(pred, A.DivByAttr) and pred.every is None:
        return [Facts(max(base.divisor, pow2_divisor(pred.divisor)), base.lower, base.upper)]
    if isinstance(pred, A.BoundedAttr):
        lower = pred.lower if pred.lower is not None else base.lower
        upper = pred.upper if pred.upper is not None else base.upper
        return [Facts(base.divisor, lower, upper)]
    return [base]


def _bound(f: Callable[[int, int], int], a: Facts, b: Facts) -> tuple[Optional[int], Optional[int]]:
    if None in (a.lower, a.upper, b.lower, b.upper):
        return None, None
    corners = [f(x, y) for x in (a.lower, a.upper) for y in (b.lower, b.upper)]  # type: ignore[arg-type]
    return min(corners), max(corners)


@facts_for(AR.AddIOp, AR.SubIOp)
def _add(aa: TileAA, op: Operation) -> list[Facts]:
    a, b = aa.fact(op.lhs), aa.fact(op.rhs)
    lo, hi = _bound((lambda x, y: x + y) if isinstance(op, AR.AddIOp) else (lambda x, y: x - y), a, b)
    return [Facts(gcd(a.divisor, b.divisor), lo, hi)]


@facts_for(AR.MulIOp)
def _mul(aa: TileAA, op: Operation) -> list[Facts]:
    a, b = aa.fact(op.lhs), aa.fact(op.rhs)
    lo, hi = _bound(lambda x, y: x * y, a, b)
    return [Facts(min(a.divisor * b.divisor, MAX_DIVISOR), lo, hi)]


@facts_for(CO.BroadcastOp, CO.ReshapeOp, CO.PermuteOp)
def _same(aa: TileAA, op: Operation) -> list[Facts]:
    return [aa.fact(op.source)]


@facts_for(CO.GetTileBlockIdOp)
def _block_id(aa: TileAA, op: Operation) -> list[Facts]:
    return [Facts(1, 0, (1 << 31) - 1)] * 3


@facts_for(ClusterRankOp)
def _cluster_rank(aa: TileAA, op: Operation) -> list[Facts]:
    return [Facts(1, 0, op.size - 1)]


@facts_for(CO.IotaOp)
def _iota(aa: TileAA, op: Operation) -> list[Facts]:
    n = op.result.type.shape[0]
    return [Facts(1, 0, n - 1)]


@facts_for(CO.OffsetOp)
def _offset(aa: TileAA, op: Operation) -> list[Facts]:
    ptr, off = aa.fact(op.ptr), aa.fact(op.offset)
    elem = T.element_type(op.result.type)
    size = max(1, elem.pointee.bitwidth // 8) if isinstance(elem, T.PointerType) else 1
    return [Facts(gcd(ptr.divisor, min(off.divisor * size, MAX_DIVISOR)))]


def format_tileaa(aa: TileAA) -> str:
    """``--emit=tileaa``: every op (values named as tileirdisasm names them) with its
    memory dependences (``deps=[@m..]``, memory ops numbered in order) and the facts
    known about its integer results (``{div=16 range=[0, ?]}``).  Tokens are gone."""
    from ..text.names import NameTable

    fn = aa.function
    names = NameTable(fn.body)
    memory_ids: dict[int, str] = {}
    lines = [f"tileaa.func @{fn.name} {{"]
    for a in fn.entry_block.args:
        lines.append(f"  arg {names.ref(a)} : {a.type}{_fact_text(aa.fact(a))}")

    def emit(block: Block, depth: int) -> None:
        pad = "  " * depth
        for op in block.ops:
            results = ", ".join(f"{names.ref(r)}{_fact_text(aa.fact(r))}" for r in op.results
                                if not isinstance(r.type, T.TokenType))
            args = ", ".join(names.ref(v) for v in op.operands if not isinstance(v.type, T.TokenType))
            text = f"{pad}{results + ' = ' if results else ''}{op.name}({args})"
            if op in aa.deps:
                memory_ids[id(op)] = f"@m{len(memory_ids)}"
                deps = sorted(memory_ids[id(d)] for d in aa.deps[op] if id(d) in memory_ids)
                text += f"  as {memory_ids[id(op)]}  deps=[{', '.join(deps)}]"
            lines.append(text)
            for region in op.regions:
                for blk in region.blocks:
                    lines.append(f"{pad}  ^({', '.join(names.ref(a) + _fact_text(aa.fact(a)) for a in blk.args)}):")
                    emit(blk, depth + 2)

    emit(fn.entry_block, 1)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _fact_text(f: Facts) -> str:
    if f == UNKNOWN:
        return ""
    parts = []
    if f.divisor > 1:
        parts.append(f"div={f.divisor}")
    if f.lower is not None or f.upper is not None:
        parts.append(f"range=[{'?' if f.lower is None else f.lower}, {'?' if f.upper is None else f.upper}]")
    return " {" + " ".join(parts) + "}"
