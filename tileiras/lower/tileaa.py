"""cuda_tile -> TileAA: the alias-aware view of a function.

Two analyses, neither of which mutates the IR:

* **Memory dependences.**  Tokens order memory operations.  Following each
  memory op's token operand back through ``join_tokens`` and loop-carried
  tokens gives the set of earlier memory ops it must observe; token values
  themselves carry no data and disappear in code generation.
* **Value facts.**  ``assume`` predicates (``div_by``, ``bounded``), constants
  and integer arithmetic give, per integer or pointer value, a known divisor
  and bounds.  Later stages use them to pick vector widths, drop bounds checks
  and choose 32-bit index math.

``analyze(fn)`` returns a ``TileAA`` holding both; ``format_tileaa`` dumps it
(``--emit=tileaa``).
"""
from __future__ import annotations

from math import gcd
from typing import Callable, Optional

from ..ir import attrs as A
from ..ir import types as T
from ..ir.core import Block, Function, Operation, Value
from ..record import field, record
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM

#: Divisors are tracked up to this power of two.
MAX_DIVISOR = 1 << 16

MEMORY_OPS = (MEM.LoadPtrTkoOp, MEM.LoadViewTkoOp, MEM.StorePtrTkoOp, MEM.StoreViewTkoOp,
              MEM.AtomicCASTkoOp, MEM.AtomicRMWTkoOp, MEM.AtomicRedViewTkoOp, CF.PrintTkoOp,
              MEM.MultimemLoadReduceViewTkoOp, MEM.MultimemReduceViewTkoOp, MEM.MultimemStoreViewTkoOp)
WRITES = (MEM.StorePtrTkoOp, MEM.StoreViewTkoOp, MEM.AtomicCASTkoOp, MEM.AtomicRMWTkoOp,
          MEM.AtomicRedViewTkoOp, MEM.MultimemReduceViewTkoOp, MEM.MultimemStoreViewTkoOp)


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
    _observed: Optional[frozenset[Operation]] = None

    def fact(self, v: Value) -> Facts:
        return self.facts.get(v, UNKNOWN)

    def needs_barrier(self, op: Operation) -> bool:
        """Must ``op`` wait for other threads' writes (a token-ordered write before it)?"""
        return any(isinstance(d, WRITES) for d in self.deps.get(op, ()))

    def observed_by_write(self, op: Operation) -> bool:
        """Is some write token-ordered after ``op`` (it must see memory as before it)?"""
        if self._observed is None:
            self._observed = frozenset(d for w, ds in self.deps.items() if isinstance(w, WRITES) for d in ds)
        return op in self._observed


def analyze(fn: Function) -> TileAA:
    aa = TileAA(fn)
    _walk_block(aa, fn.entry_block)
    return aa


def _walk_block(aa: TileAA, block: Block) -> None:
    for op in block.ops:
        _visit(aa, op)


def _visit(aa: TileAA, op: Operation) -> None:
    if isinstance(op, MEMORY_OPS):
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
                                              for o0 in b.ops for o in o0.walk() if isinstance(o, MEMORY_OPS))
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
