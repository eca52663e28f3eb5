"""A tile block split over the CTAs of its cluster (``num_cta_in_cga`` = c > 1, sm_90+).

cuTile's ``num_ctas=c`` launches each tile block as a cluster of c CTAs (the grid counts
clusters: kernel ABI).  The program is written for one tile block; it is the compiler's to
divide the block's work among the c CTAs.  NVIDIA's tool splits a GEMM's M rows (and an
elementwise tile's leading dim) between them.  This pass does that on the Tile IR, before
TileAA, so every later pass sees an ordinary program with smaller tiles:

* each tile value is either **split** along one dim ``d`` (CTA ``r`` of the cluster holds the
  ``r``-th of c equal blocks along ``d``; its type is the block's) or **whole** (every CTA
  computes all of it: scalars, GEMM's B operand when M is split);
* what can be split follows from the stores back: a stored tile is split along its leading
  dim that c divides (then its trailing one, if the first choice leaves a multiply whole);
  an elementwise op, ``select``, ``broadcast``, ``permute``, ``cat`` and ``reduce``/``scan``
  along another dim are split as their results are; ``reshape`` keeps a split of the first
  dim that is not 1; ``mmaf``/``mmai``/``mmaf_scaled`` split M (A and the accumulator; B
  whole) or N; a splat ``constant`` and ``iota`` are made split; a partition view load is
  split by loading the CTA's block (a view of tiles c times smaller along ``d``, index
  ``i * c + rank``); loop-carried values, ``if`` results and what ``continue``/``break``/
  ``yield`` pass are split alike (one state for all);
* a value wanted split but computed whole is sliced with ``extract`` at ``rank``, allowed
  only for values computed from constants and indices alone (no loads, multiplies or
  reductions: those would be computed twice);
* M is split only where each CTA keeps ``min_rows`` of them (sm_90: wgmma's 64), else N;
* the split is refused, and the first CTA of each cluster does the whole block as before
  (``nvvm`` sends the others to the end), when a multiply would be whole, when the kernel
  has no multiply and every CTA would read more bytes of whole tiles than of its split ones,
  when a store or atomic
  cannot be split (scalars, strided or gather views), when the kernel prints or asserts,
  or when a load is token-ordered after a store (a CTA could read what the other wrote).

``split_cluster(fn, c)`` rewrites ``fn`` in place and returns ``ClusterSplit`` (the CTAs
and what was decided, or why not); ``pipeline`` records it on the TileAS for ``nvvm``.
"""
from __future__ import annotations

from typing import Optional

from ..ir import attrs as A
from ..ir import types as T
from ..ir.core import Block, Function, Operation, Value
from ..record import record
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.enums import IntegerOverflow, Signedness
from ..tile.ops_internal import ClusterRankOp
from ..tile.traits import Elementwise, has_trait, is_contraction, is_pure, is_recomputable, writes
from .tiles import carried_to, iter_args

#: a value every CTA of the cluster computes whole
WHOLE = -1
#: state of a value: None (nothing asked yet), a dim it is split along, or WHOLE
State = Optional[int]



def _is_loop(op: object) -> bool:
    return isinstance(op, (CF.ForOp, CF.LoopOp))


def _is_control(op: object) -> bool:
    return isinstance(op, (CF.ForOp, CF.LoopOp, CF.IfOp))


def _passes_values(op: object) -> bool:
    """A terminator whose operands become a loop's or an ``if``'s values."""
    return isinstance(op, (CF.ContinueOp, CF.BreakOp, CF.YieldOp))


@record(frozen=True)
class ClusterSplit:
    """``ctas`` CTAs share each tile block (0: the first does it all, ``reason`` says why)."""

    ctas: int
    reason: str = ""
    stores: tuple[int, ...] = ()     # the dim each store's tile is split along, in order
    #: the view loads every CTA makes whole: the same tile in each (a GEMM's B when M is
    #: split), which a TMA ring multicasts (``tma_ring``)
    whole: tuple[Operation, ...] = ()


def split_cluster(fn: Function, ctas: int, min_rows: int = 1) -> ClusterSplit:
    """Split ``fn``'s tile blocks over clusters of ``ctas`` CTAs, in place, if it can.
    ``min_rows``: the fewest M rows a CTA's matrix multiply may keep when M is split (64
    on sm_90, whose wgmma runs m64 blocks: narrower ones split N instead, as NVIDIA's tool
    does)."""
    reason = _refusal(fn)
    if reason:
        return ClusterSplit(0, reason)
    _drop_dead(fn)
    last = "no tile is stored"
    for prefer_last in (False, True):
        plan = _Plan(fn, ctas, prefer_last, min_rows)
        last = plan.solve()
        if not last:
            whole = tuple(op for op in plan.ops if isinstance(op, MEM.LoadViewTkoOp) and plan.op_state(op) == WHOLE)
            plan.rewrite()
            return ClusterSplit(ctas, "", plan.store_dims, whole)
    return ClusterSplit(0, last)


def _refusal(fn: Function) -> str:
    for op in fn.walk():
        if isinstance(op, (CF.PrintTkoOp, CF.AssertOp)):
            return f"'{op.name}' would run in every CTA"
        if isinstance(op, (MEM.AtomicRMWTkoOp, MEM.AtomicCASTkoOp)):
            return "atomics are not split"
        if isinstance(op, (MEM.LoadViewTkoOp, MEM.LoadPtrTkoOp)) and op.token is not None \
                and _after_write(op.token, set()):
            return "a load is ordered after a store (a CTA would read what another wrote)"
        if writes(op) and not isinstance(op, (MEM.StoreViewTkoOp, MEM.StorePtrTkoOp)):
            return f"'{op.name}' is not split"
    return ""


def _after_write(token: Value, seen: set) -> bool:
    """Does ``token`` come (through joins and loop-carried tokens) from a write?"""
    if token in seen:
        return False
    seen.add(token)
    owner = token.owner
    if isinstance(owner, Block):
        parent = owner.parent.parent if owner.parent is not None else None
        if _is_loop(parent):
            i = iter_args(parent).index(token)
            incoming = [parent.initValues[i]] + [t.operands[i] for t in _continues(parent)]
            return any(_after_write(v, seen) for v in incoming)
        return False
    if isinstance(owner, MEM.JoinTokensOp):
        return any(_after_write(v, seen) for v in owner.operands)
    if _is_control(owner):
        return True  # a token out of a loop or branch: whatever ran inside
    return writes(owner)


def _continues(loop: Operation) -> list[Operation]:
    """The ``continue``s that end ``loop``'s trips: in its body, through nested ``if``s, not
    in nested loops."""
    out = []

    def visit(block: Block) -> None:
        for op in block.ops:
            if isinstance(op, CF.ContinueOp):
                out.append(op)
            if isinstance(op, CF.IfOp):
                for region in op.regions:
                    for b in region.blocks:
                        visit(b)

    for b in loop.body.blocks:
        visit(b)
    return out


def _drop_dead(fn: Function) -> None:
    """Pure ops whose results nothing uses (they would keep whole operands' types)."""
    while True:
        used = {v for op in fn.walk() for v in op.operands}
        dropped = False
        for op in list(fn.walk()):
            if is_pure(op) and not op.regions and op.results and not any(r in used for r in op.results) \
                    and not _passes_values(op):
                op.parent.ops.remove(op)
                dropped = True
        if not dropped:
            return


def _join(a: State, b: State) -> State:
    if a is None:
        return b
    if b is None or a == b:
        return a
    return WHOLE


def _rank(v: Value) -> int:
    return v.type.rank if isinstance(v.type, T.TileType) else 0


def _split_type(t: T.TileType, d: int, c: int) -> T.TileType:
    shape = list(t.shape)
    shape[d] //= c
    return T.TileType(t.element, tuple(shape))


def _first_non_unit(shape: tuple[int, ...]) -> Optional[int]:
    return next((i for i, n in enumerate(shape) if n != 1), None)


class _Plan:
    def __init__(self, fn: Function, ctas: int, prefer_last: bool, min_rows: int):
        self.fn, self.c, self.prefer_last, self.min_rows = fn, ctas, prefer_last, min_rows
        self.ops = list(fn.walk())
        self.uses: dict[Value, list[tuple[Operation, int]]] = {}
        for op in self.ops:
            for i, v in enumerate(op.operands):
                self.uses.setdefault(v, []).append((op, i))
        self.cls: dict[Value, Value] = {}      # control-flow classes (union-find)
        for op in self.ops:
            self._unify_control(op)
        self.demand: dict[Value, State] = {}   # per class representative
        self.store_dims: tuple[int, ...] = ()

    # -- classes -------------------------------------------------------------------------
    def find(self, v: Value) -> Value:
        root = v
        while self.cls.get(root, root) is not root:
            root = self.cls[root]
        while v is not root:
            v, self.cls[v] = self.cls[v], root
        return root

    def _union(self, a: Value, b: Value) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.cls[ra] = rb

    def _unify_control(self, op: Operation) -> None:
        """A ``for``'s carried block arguments and its results: one state each pair (the
        initial values and what ``continue`` passes are uses that want it; a ``loop``'s
        results and an ``if``'s are their own, wanted of ``break`` and ``yield``)."""
        if isinstance(op, CF.ForOp):
            for a, r in zip(iter_args(op), op.results):
                self._union(a, r)

    def state(self, v: Value) -> State:
        """How ``v`` is computed: split along a dim, whole, or not asked for."""
        if _rank(v) == 0:
            return None
        if v.is_block_argument or _is_control(v.owner):
            return self.demand.get(self.find(v))
        return self.op_state(v.owner)

    def op_state(self, op: Operation) -> State:
        if isinstance(op, (MEM.StoreViewTkoOp, MEM.StorePtrTkoOp)):
            return self.store_dim(op)
        if all(_rank(r) == 0 for r in op.results):
            # scalars (a reduction to one value, a tile reshaped to a scalar) are every
            # CTA's, so every element of the tiles they come from is needed in each
            return WHOLE if any(_rank(v) for v in op.operands) else None
        d = None
        for r in op.results:
            if _rank(r):
                d = _join(d, self.demand.get(self.find(r)))
        if d is None or d == WHOLE:
            return d
        return d if self.wants_split(op, d) is not None else WHOLE

    # -- what an op needs of its operands to compute its results split along d ------------
    def wants_split(self, op: Operation, d: int) -> Optional[list[State]]:
        c, n = self.c, len(op.operands)
        tiles = [_rank(v) > 0 for v in op.operands]
        out_shape = next((r.type.shape for r in op.results if _rank(r)), None)
        if isinstance(op, (MEM.StoreViewTkoOp, MEM.LoadViewTkoOp)):
            view = op.view.type
            shape = op.tile.type.shape
            ok = isinstance(view, T.PartitionViewType) and isinstance(op.view.owner, MEM.MakePartitionViewOp) \
                and shape[d] % c == 0 and tuple(view.tile_shape) == tuple(shape)
            if not ok:
                return None
            return [d if isinstance(op, MEM.StoreViewTkoOp) and i == 0 else None for i in range(n)]
        if out_shape is not None and out_shape[d] % c:
            return None
        if isinstance(op, CO.ConstantOp):
            return [] if _splat(op) is not None else None
        if isinstance(op, CO.IotaOp):
            return []
        if isinstance(op, (MEM.StorePtrTkoOp, MEM.LoadPtrTkoOp, CO.SelectOp)) or has_trait(op, Elementwise):
            return [d if t else None for t in tiles]
        if isinstance(op, CO.BroadcastOp):
            return [WHOLE if op.source.type.shape[d] == 1 else d]
        if isinstance(op, CO.PermuteOp):
            return [list(op.permutation)[d]]
        if isinstance(op, CO.ReshapeOp):
            src = _first_non_unit(op.source.type.shape)
            if src is None or d != _first_non_unit(op.result.type.shape) or op.source.type.shape[src] % c:
                return None
            return [src]
        if isinstance(op, CO.CatOp):
            return None if d == op.dim else [d, d]
        if isinstance(op, (CO.ReduceOp,)):
            return [d if d < op.dim else d + 1] * n
        if isinstance(op, CO.ScanOp):
            return None if d == op.dim else [d] * n
        if is_contraction(op):
            return _contraction(op, d)
        return None

    def store_dim(self, op: Operation) -> Optional[int]:
        tile = op.tile if isinstance(op, MEM.StoreViewTkoOp) else op.value
        dims = [d for d in range(_rank(tile)) if tile.type.shape[d] % self.c == 0 and self.wants_split(op, d)]
        if not dims:
            return None
        return dims[-1] if self.prefer_last else dims[0]

    def wants(self, op: Operation) -> list[State]:
        """The state each operand of ``op`` is wanted in."""
        n = len(op.operands)
        if _passes_values(op):      # wanted as what they become (zip: a for's next-trip values)
            targets = carried_to(op, list(range(n)))
            return [self.demand.get(self.find(t)) if _rank(v) else None for v, t in zip(op.operands, targets)]
        if _is_control(op):
            out: list[State] = [None] * n
            if not isinstance(op, CF.IfOp):
                first = 3 if isinstance(op, CF.ForOp) else 0
                for k, a in enumerate(iter_args(op)):
                    if _rank(a):
                        out[first + k] = self.demand.get(self.find(a))
            return out
        s = self.op_state(op)
        if s is None:
            return [None] * n
        if s == WHOLE:
            return [WHOLE if _rank(v) else None for v in op.operands]
        return [w if _rank(v) else None for v, w in zip(op.operands, self.wants_split(op, s))]

    # -- solving -------------------------------------------------------------------------
    def solve(self) -> str:
        """Fill ``demand`` to its fixed point; '' when the split is worth making, else why not."""
        for op in self.ops:
            if isinstance(op, (MEM.StoreViewTkoOp, MEM.StorePtrTkoOp)) and self.store_dim(op) is None:
                return f"a stored tile of shape {list((op.tile if isinstance(op, MEM.StoreViewTkoOp) else op.value).type.shape)} is not split"
        changed = True
        while changed:
            changed = False
            for op in reversed(self.ops):
                for v, w in zip(op.operands, self.wants(op)):
                    if w is None or v is None or not _rank(v):
                        continue
                    key = self.find(v)
                    new = _join(self.demand.get(key), w)
                    if new != self.demand.get(key):
                        self.demand[key] = new
                        changed = True
        stores = [op for op in self.ops if isinstance(op, (MEM.StoreViewTkoOp, MEM.StorePtrTkoOp))]
        if not stores:
            return "no tile is stored"
        self.store_dims = tuple(self.store_dim(op) for op in stores)
        return self._worth_it()

    def _worth_it(self) -> str:
        mma = [op for op in self.ops if is_contraction(op)]
        if any(self.op_state(op) in (None, WHOLE) for op in mma):
            return "a matrix multiply would be computed whole by every CTA"
        for op in mma:
            m = _rank(op.result) - 2
            rows = op.result.type.shape[m]
            if self.op_state(op) == m and rows // self.c < self.min_rows <= rows:
                return f"a matrix multiply would keep {rows // self.c} of its {rows} rows (fewer than {self.min_rows})"
        if not mma:
            loads = [op for op in self.ops if isinstance(op, (MEM.LoadViewTkoOp, MEM.LoadPtrTkoOp)) and _rank(op.results[0])]
            whole = sum(_bytes(op.results[0].type) for op in loads if self.op_state(op) in (None, WHOLE))
            split = sum(_bytes(op.results[0].type) // self.c for op in loads if self.op_state(op) not in (None, WHOLE))
            if whole > split:
                return f"every CTA would read {whole} bytes of tiles whole (more than its {split} bytes of split ones)"
        if any(not _cheap(op.operands[i], set()) for op, i, _ in self._slices()):
            return "a tile computed whole would be sliced (computed twice)"
        return ""

    def _slices(self) -> list[tuple[Operation, int, int]]:
        """The uses (op, operand, dim) that want split a value computed whole: it is sliced
        there (``extract`` at the rank)."""
        return [(op, i, w) for op in self.ops for i, (v, w) in enumerate(zip(op.operands, self.wants(op)))
                if isinstance(w, int) and w >= 0 and _rank(v) and self.state(v) == WHOLE]

    # -- rewriting -----------------------------------------------------------------------
    def rewrite(self) -> None:
        c = self.c
        entry = self.fn.entry_block
        rank_op = ClusterRankOp(attributes={"size": c}, result_types=[T.TileType(T.I32)])
        _insert(entry, 0, rank_op)
        self.rank = rank_op.result
        zero = _constant(T.TileType(T.I32), 0)
        _insert(entry, 1, zero)
        self.zero = zero.result
        self.indices: dict[Value, Value] = {}
        # every decision first: the rewrite changes the shapes they are read from
        slices = self._slices()
        states = {op: self.op_state(op) for op in self.ops if not _is_control(op)}
        values = [v for op in self.ops for v in (*op.results, *(a for r in op.regions for b in r.blocks
                                                                 for a in b.args))]
        split = {v: s for v in values for s in [self.state(v)] if isinstance(s, int) and s >= 0}
        for op, i, w in slices:
            op.operands[i] = self._slice(op.operands[i], w, op)
        for v, s in split.items():
            v.type = _split_type(v.type, s, c)
        views: dict[tuple[Value, int], Value] = {}
        for op, s in states.items():
            if not isinstance(s, int) or s < 0:
                continue
            if isinstance(op, (MEM.LoadViewTkoOp, MEM.StoreViewTkoOp)):
                self._split_view_access(op, s, views)
            elif isinstance(op, CO.IotaOp):
                self._offset_iota(op)
            elif isinstance(op, CO.ConstantOp):
                op.attributes["value"] = A.DenseElementsAttr(op.result.type, op.value.data)

    def _slice(self, v: Value, d: int, user: Operation) -> Value:
        indices = [self.rank if k == d else self.zero for k in range(_rank(v))]
        ex = CO.ExtractOp(operands=[v, *indices], result_types=[_split_type(v.type, d, self.c)])
        _insert_before(user, ex)
        return ex.result

    def _split_view_access(self, op: Operation, d: int, views: dict) -> None:
        """Access the CTA's block: a view of c times smaller tiles along ``d``, at index
        ``i * c + rank`` there."""
        key = (op.view, d)
        if key not in views:
            make = op.view.owner
            t = op.view.type
            shape = list(t.tile_shape)
            shape[d] //= self.c
            new = MEM.MakePartitionViewOp(operands=[make.tensor_view],
                                         result_types=[T.PartitionViewType(tuple(shape), t.tensor_view, t.dim_map,
                                                                           t.padding_value)])
            block = make.parent
            _insert(block, block.ops.index(make) + 1, new)
            views[key] = new.result
        first = 2 if isinstance(op, MEM.StoreViewTkoOp) else 1
        op.operands[first - 1] = views[key]
        op.operands[first + d] = self._block_index(op.operands[first + d])
        inbounds = op.attributes.get("inbounds")
        if inbounds:
            flags = list(inbounds)
            flags[d] = False
            op.attributes["inbounds"] = type(inbounds)(flags) if not isinstance(inbounds, list) else flags

    def _block_index(self, idx: Value) -> Value:
        """``idx * c + rank``, computed once, where ``idx`` is (a loop's K index stays the
        loop's; a block id's product stays out of the loop, which the K loop's pipelining
        wants to hold nothing but its loads and multiply)."""
        if idx in self.indices:
            return self.indices[idx]
        it = idx.type
        new: list[Operation] = []
        rank = self.rank
        if T.element_type(it) != T.I32:
            new.append(CO.ExtIOp(operands=[rank], attributes={"signedness": Signedness.UNSIGNED}, result_types=[it]))
            rank = new[-1].result
        c = _constant(it, self.c)
        mul = AR.MulIOp(operands=[idx, c.result], attributes={"overflow": IntegerOverflow.NONE}, result_types=[it])
        add = AR.AddIOp(operands=[mul.result, rank], attributes={"overflow": IntegerOverflow.NONE},
                        result_types=[it])
        new += [c, mul, add]
        if idx.is_block_argument:
            block, at = idx.owner, 0
        else:
            block = idx.owner.parent
            at = block.ops.index(idx.owner) + 1
        if block is self.fn.entry_block:
            at = max(at, block.ops.index(self.rank.owner) + 1)
        for k, o in enumerate(new):
            _insert(block, at + k, o)
        self.indices[idx] = add.result
        return add.result

    def _offset_iota(self, op: Operation) -> None:
        """The CTA's block of ``0 .. n-1``: its own ``iota`` plus ``rank * n / c``."""
        t = op.result.type
        scalar = T.TileType(t.element)
        rank = self.rank
        new_ops: list[Operation] = []
        if t.element != T.I32:
            cls = CO.ExtIOp if t.element.bitwidth > 32 else CO.TruncIOp
            attrs = {"signedness": Signedness.UNSIGNED} if cls is CO.ExtIOp else {"overflow": IntegerOverflow.NONE}
            new_ops.append(cls(operands=[rank], attributes=attrs, result_types=[scalar]))
            rank = new_ops[-1].result
        block_len = _constant(scalar, t.shape[0])
        start = AR.MulIOp(operands=[rank, block_len.result], attributes={"overflow": IntegerOverflow.NONE},
                          result_types=[scalar])
        one = CO.ReshapeOp(operands=[start.result], result_types=[T.TileType(t.element, (1,))])
        wide = CO.BroadcastOp(operands=[one.result], result_types=[t])
        add = AR.AddIOp(operands=[op.result, wide.result], attributes={"overflow": IntegerOverflow.NONE},
                        result_types=[t])
        new_ops += [block_len, start, one, wide, add]
        users = list(self.uses.get(op.result, ()))
        block = op.parent
        at = block.ops.index(op) + 1
        for k, new in enumerate(new_ops):
            _insert(block, at + k, new)
        for user, i in users:
            user.operands[i] = add.result


def _contraction(op: Operation, d: int) -> Optional[list[State]]:
    """mmaf/mmai (A, B, acc) and mmaf_scaled (A, B, acc, A's scales, B's scales): M split
    with A (and its scales), N with B; a batch dim with all."""
    rank = _rank(op.result)
    m, nd = rank - 2, rank - 1
    scaled = isinstance(op, AR.MmaFScaledOp)
    if d < m:
        return [d] * len(op.operands)
    if d == m:
        wants = [d, WHOLE, d] + ([d, WHOLE] if scaled else [])
    elif d == nd:
        wants = [WHOLE, d, d] + ([WHOLE, d] if scaled else [])
    else:
        return None
    return wants + [None] * (len(op.operands) - len(wants))


def _bytes(t: T.TileType) -> int:
    return t.num_elements * max(1, T.element_type(t).bitwidth) // 8


def _splat(op: CO.ConstantOp) -> Optional[bytes]:
    """The one element of a splat constant's data."""
    data = op.value.data if isinstance(op.value, A.DenseElementsAttr) else None
    elem = T.element_type(op.result.type)
    if not isinstance(data, bytes) or not isinstance(elem, T.ScalarType):
        return None
    if elem.bitwidth == 1:
        return data if len(data) == 1 and data[0] in (0, 0xFF) else None
    width = max(1, elem.bitwidth // 8)
    return data if len(data) == width else None


def _cheap(v: Value, seen: set) -> bool:
    """Is ``v`` computed from constants and indices alone (slicing it costs no loads)?"""
    if v in seen or _rank(v) == 0:
        return True
    seen.add(v)
    if v.is_block_argument:
        return False
    op = v.owner
    if is_recomputable(op):
        return all(_cheap(u, seen) for u in op.operands)
    return False


def _constant(t: T.TileType, value: int) -> Operation:
    width = max(1, T.element_type(t).bitwidth // 8)
    data = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
    return CO.ConstantOp(attributes={"value": A.DenseElementsAttr(t, data)}, result_types=[t])


def _insert(block: Block, index: int, op: Operation) -> None:
    op.parent = block
    block.ops.insert(index, op)


def _insert_before(user: Operation, op: Operation) -> None:
    block = user.parent
    _insert(block, block.ops.index(user), op)


__all__ = ["ClusterSplit", "WHOLE", "split_cluster"]
