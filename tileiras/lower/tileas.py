"""TileAA -> TileAS: decide how every tile is distributed over the CTA.

This pass only decides; ``codegen.nvvm`` applies the decisions.  For each tile
value it records a ``LinearLayout`` (which thread and register hold which
element); for each operand that must be redistributed, the layout it is
converted to (through shared memory); for each op, the shared-memory scratch it
needs.  Ops run one after another, so all scratch users share one region,
guarded by barriers: the CTA's static shared memory is the largest need.

Layout rules (``@layout_rule(OpClass)``):

* loads, constants, iota, control-flow results and loop-carried values use the
  *canonical* layout of their shape (``default_blocked``);
* element-wise ops take their first tile operand's layout and convert the rest;
* reshape and permute relabel coordinates: the layout moves along for free;
* a reduction's result keeps the surviving dims of its input's layout;
* broadcast wants its input in the output's layout with the broadcast dims
  squashed, which makes it a register copy.
"""
from __future__ import annotations

from typing import Callable, Optional

from ..ir import types as T
from ..ir.core import Block, Operation, Value
from ..layout.linear import LANE, REG, WARP, LinearLayout, default_blocked, mma_fragment, sector_blocked
from ..record import field, record
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.enums import MemoryOrderingSemantics
from ..tile.registry import ops_with
from ..tile.traits import (Contraction, Elementwise, is_contraction, is_elementwise, is_free, is_plain_load,
                           is_plain_store, is_recomputable)
from . import tma, vectorize
from .subbyte import holds_pairs, is_subbyte, plan_pairs, unit_dim
from .mma_forms import mma_staging_pitches, tensor_core_mma, wgmma_staging
from .tileaa import TileAA, unpairable
from .tiles import access_bytes, element_bytes, is_tile

DEFAULT_WARPS = 4
#: Consecutive last-dim elements per thread where a tile is not accessed in global memory
#: (16 bytes of f32): reductions along the rows fold in registers.
CONTIGUOUS = 4
#: Elements one global load or store instruction moves per thread where the bytecode
#: proves no alignment (``vectorize``: where it does, up to 16 bytes).
GLOBAL_VECTOR = 1
#: Bytes the GPU moves global memory in: a warp's access costs one transaction per
#: distinct sector its threads touch.
SECTOR = 32


@record
class TileAS:
    aa: TileAA
    num_warps: int                   # warps the layouts distribute tiles over (a power of two)
    extra_warps: int = 0             # more warps in the CTA that hold copies (ABI: CTA size)
    layouts: dict[Value, LinearLayout] = field(default_factory=dict)
    converts: dict[tuple[Operation, int], LinearLayout] = field(default_factory=dict)
    scratch: dict[Operation, int] = field(default_factory=dict)
    #: ops that run in a chunked loop, and their group (see plan_chunks)
    chunked: dict[Operation, "ChunkGroup"] = field(default_factory=dict)
    #: tiles whose canonical layout holds byte pairs along a dim (see lower/subbyte.py)
    pairs: dict[Value, int] = field(default_factory=dict)
    #: extracts that pick registers: the source register of each result register
    picks: dict[Operation, list[int]] = field(default_factory=dict)
    #: extracts whose registers all come from one operand of an in-register ``cat``: that
    #: operand, which they pick from directly (``picks`` counts its registers)
    pick_sources: dict[Operation, Value] = field(default_factory=dict)
    #: conversions (keys of ``converts``) done by computing the value again in the wanted
    #: layout instead of through shared memory: the layout of each value on the way
    #: (see recompute_plan)
    recomputed: dict[tuple[Operation, int], dict[Value, LinearLayout]] = field(default_factory=dict)
    #: shapes of matrix multiply results: their tiles keep ``contiguous`` layouts (canonical)
    mma_shapes: frozenset = frozenset()
    #: matrix multiplies that run on tensor cores, with their ``mma.sync`` form
    #: (``tensor_core_mma``, decided once here for the layouts and the code)
    tensor_cores: dict = field(default_factory=dict)
    #: shapes of tensor-core matrix multiply results: their tiles take the MMA's fragment
    #: layout (``mma_fragment``)
    mma_layouts: dict = field(default_factory=dict)
    #: ``wgmma`` matrix multiplies: where their operands wait in shared memory
    #: (``wgmma_staging``, decided by the layout rule from the operands' layouts)
    wgmma_staging: dict = field(default_factory=dict)
    #: view loads and stores whose facts allow ``v`` elements a thread per access
    #: (``vectorize.allowed_vectors``), and per tile shape the run its layouts give a thread
    access_allowed: dict = field(default_factory=dict)
    shape_access: dict = field(default_factory=dict)
    #: the width each view access is emitted with (``vectorize.plan_vectors``; absent: scalar)
    vectors: dict = field(default_factory=dict)
    #: view loads that go through TMA (``tma.plan_tma``), the kernel's tensor maps (hidden
    #: parameters, in order) and the end of shared memory with their buffers and mbarriers
    tma: dict = field(default_factory=dict)
    tensor_maps: tuple = ()
    tma_end: int = 0
    _users: Optional[dict[Value, list[Operation]]] = None

    @property
    def num_threads(self) -> int:
        """Threads per CTA (``.reqntid``)."""
        return 32 * (self.num_warps + self.extra_warps)

    @property
    def layout_threads(self) -> int:
        return 32 * self.num_warps

    @property
    def smem_bytes(self) -> int:
        return max(max(self.scratch.values(), default=0), self.tma_end)

    def canonical(self, shape: tuple[int, ...], min_vector: int = 1, nbytes: int = 4) -> LinearLayout:
        """The layout of a tile of ``shape`` and ``nbytes`` elements (what one element of
        its global accesses takes, ``access_bytes``) that its global accesses coalesce in.
        Each thread holds ``access_vector`` consecutive last-dim elements at a time (at
        least ``min_vector`` where the dim has them) and lanes hold the next ones, so a
        warp's instruction touches consecutive addresses (32 lanes times 4 bytes of f32:
        four 32-byte sectors), as NVIDIA's layouts and Triton's coalesced blocked layouts
        do: thread t holds t, t+128, ... of a 1-D tile.  Rows longer than a sector's worth
        of lanes are held a few elements of a row a thread (``sector_blocked``).

        Tiles of a matrix multiply's result shape (its accumulators, their epilogue) keep
        ``contiguous``: the multiply reads a row of A and a column of B per element and k,
        and NVIDIA's epilogues store from the MMA's fragment layout, no more coalesced
        (flash_attention 64x64: 232 registers coalesced, 196 contiguous, NVIDIA 198)."""
        if not shape:
            return default_blocked(shape, self.num_warps)
        if shape in self.mma_layouts:
            return self.mma_layouts[shape]
        if shape in self.mma_shapes:
            return self.contiguous(shape)
        n = 1
        for d in shape:
            n *= d
        regs = max(1, n // self.layout_threads)
        dim = vectorize.run_dim(self.shape_access, shape)   # Fortran-order views: not the last
        order = [k for k in range(len(shape)) if k != dim] + [dim]
        vector = min(max(self.access_vector(shape), min_vector), shape[dim], max(min_vector, regs))
        run = max(1, min(32, SECTOR // (vector * nbytes)))
        layout = sector_blocked(tuple(shape[k] for k in order), self.num_warps, vector, run, regs)
        return layout if dim == len(shape) - 1 else layout.permute([order.index(k) for k in range(len(shape))])

    def contiguous(self, shape: tuple[int, ...]) -> LinearLayout:
        """Up to ``CONTIGUOUS`` consecutive last-dim elements a thread, lanes over the next:
        few rows a thread, for loads that are not worth coalescing (``_view_access``)."""
        n = 1
        for d in shape:
            n *= d
        vector = min(CONTIGUOUS, shape[-1], max(1, n // self.layout_threads)) if shape else 1
        return default_blocked(shape, self.num_warps, vector)

    def canonical_type(self, t: T.Type) -> LinearLayout:
        return self.canonical(t.shape, nbytes=access_bytes(t))

    def access_vector(self, shape: tuple[int, ...]) -> int:
        """Consecutive elements a thread's global access of a tile of ``shape`` moves in
        one instruction: what the facts allow every view access of that shape
        (``vectorize.shape_vectors``), else ``GLOBAL_VECTOR`` (more elements per thread
        than the access moves would make a warp's instruction stride over memory and
        touch that many times the sectors)."""
        run = self.shape_access.get(tuple(shape))
        return GLOBAL_VECTOR if run is None else run.elements

    def paired(self, shape: tuple[int, ...], dim: int, exact: bool = False) -> LinearLayout:
        """The canonical layout with ``dim`` as its fastest dim, at least two consecutive
        elements of it a thread (4-bit bytes, lower/subbyte.py); ``exact``: exactly two,
        lanes and warps over consecutive pairs first (f16 pairs of multimem, as NVIDIA's:
        a warp's instruction covers 32 consecutive pairs)."""
        if shape[dim] < 2:
            return self.canonical(shape)
        order = [k for k in range(len(shape)) if k != dim] + [dim]
        inverse = [order.index(k) for k in range(len(shape))]
        permuted = tuple(shape[k] for k in order)
        layout = default_blocked(permuted, self.num_warps, 2) if exact else self.canonical(permuted, min_vector=2, nbytes=1)
        return layout.permute(inverse)

    def canonical_of(self, v: Value) -> LinearLayout:
        dim = self.pairs.get(v)
        return self.canonical_type(v.type) if dim is None else self.paired(v.type.shape, dim)

    def row_reduction_layout(self, shape: tuple[int, ...]) -> LinearLayout:
        """Lanes and warps over the other dims first, then along the last one: a thread
        holds a stretch of one row (``CONTIGUOUS`` consecutive elements at a time), so a
        reduction along the rows folds mostly in registers, with few shuffles, and its
        result takes a register or two per thread instead of one per row it met (NVIDIA's
        tileiras spreads the rows of a reduce_rows tile over lanes the same way)."""
        n = 1
        for d in shape:
            n *= d
        vector = min(CONTIGUOUS, shape[-1], max(1, n // self.layout_threads))
        order = list(reversed(range(len(shape) - 1))) + [len(shape) - 1]
        return default_blocked(shape, self.num_warps, vector, order)

    def users(self, v: Value) -> list[Operation]:
        """The ops that use ``v`` (anywhere in the function)."""
        if self._users is None:
            self._users = {}
            for op in self.aa.live_ops():
                for u in op.operands:
                    self._users.setdefault(u, []).append(op)
        return self._users.get(v, [])

    def layout(self, v: Value) -> LinearLayout:
        return self.layouts[v]

    def operand_layout(self, op: Operation, i: int) -> Optional[LinearLayout]:
        """The layout operand ``i`` of ``op`` is used in (after any conversion)."""
        return self.converts.get((op, i), self.layouts.get(op.operands[i]))


#: Architectures with tcgen05 tensor cores: NVIDIA's tileiras runs their matrix multiplies
#: warp-specialized, with a warp group (4 warps) beside the workers (the CTA size is kernel ABI).
TCGEN05_ARCHS = (100, 103, 107, 110)
#: mmaf operand types tcgen05.mma takes (kind::f16, kind::tf32, kind::f8f6f4), with their bits.
TCGEN05_OPERAND_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f8E4M3FN": 8, "f8E5M2": 8}
#: SIMT matrix multiplies (f32 on FMA units, f64) NVIDIA's tileiras also warp-specializes
#: when big enough: M*N at least 16384, or M*N*K at least the first number, or K at least the
#: second with M*N at least the third, or K at least the fourth (fitted to its .reqntid on
#: every power-of-two shape from 16 to 256 and K from 4 to 512; f32 alike on sm_90, sm_100
#: and sm_120, never on sm_8x; f64 measured on sm_100 only, sm_90 and sm_120 differ).
SIMT_WS_THRESHOLDS = {"f32": (1 << 17, 64, 1024, 128), "f64": (1 << 18, 256, 512, 512)}


def mma_extra_warps(op: Operation, arch: int) -> int:
    """Warps NVIDIA's tileiras (13.5) adds to the CTA for this matrix multiply, as read from
    ``.reqntid`` (test_abi_vs_real.py has the cases):

    * mmaf on tcgen05 archs with tcgen05 operands: M >= 64, N >= 8 and K of at least 256 bits
      (16 f16, 8 tf32, 32 f8): 4 warps, 8 when M is 64 and N above 256;
    * mmaf_scaled on tcgen05 archs: M and N >= 32 (32x16 and 16x32 keep 128 threads);
    * f32 mmaf on sm_90+, f64 on tcgen05 archs: 4 warps by ``SIMT_WS_THRESHOLDS``.

    Other shapes keep the plain CTA size (integer ones always; NVIDIA decides tensor-core
    types too small for tcgen05, and f64 or those below sm_100, by a cost model not
    reproduced here)."""
    if not isinstance(op, (AR.MmaFOp, AR.MmaFScaledOp)):
        return 0
    m, n = op.results[0].type.shape[-2:]
    if isinstance(op, AR.MmaFScaledOp):
        return 4 if arch in TCGEN05_ARCHS and m >= 32 and n >= 32 else 0
    operand = T.element_type(op.lhs.type).name
    k = op.lhs.type.shape[-1]
    bits = TCGEN05_OPERAND_BITS.get(operand)
    if arch in TCGEN05_ARCHS and bits and m >= 64 and n >= 8 and k * bits >= 256:
        return 8 if m == 64 and n > 256 else 4
    limits = SIMT_WS_THRESHOLDS.get(operand)
    if limits is None or arch < 90 or (operand == "f64" and arch not in TCGEN05_ARCHS):
        return 0
    work, long_k, wide, longest_k = limits
    big = m * n >= 16384 or m * n * k >= work or (k >= long_k and m * n >= wide) or k >= longest_k
    return 4 if big else 0


def has_own_layout(op: Operation) -> bool:
    """Does ``op`` produce its tile in a layout of its own (not the multimem pair layout):
    plain loads and iota."""
    return is_plain_load(op) or isinstance(op, CO.IotaOp)


def multimem_extra_warps(op: Operation, aa: Optional[TileAA] = None) -> int:
    """Warps NVIDIA's tileiras (13.5) adds to the CTA for a multimem op (kernel ABI:
    ``.reqntid`` 256, not 128).  It stages the tile through shared memory: one warp group
    computes the tile and writes it there, a second group waits on an mbarrier, reads it and
    goes on.  Measured on sm_100 (test_multimem.py, CTA_SIZES and LOAD_CTA_SIZES):

    * a store or reduction of f16/bf16 pairs when the tile must change layout to become
      pairs (``needs_pairing``) and has more than one pair (a single pair takes a warp in
      each group: still 128 threads);
    * a load-reduce whose tile is used by anything but a ``store_view`` (arithmetic,
      a reduction: whatever the element type, f32 and f64 too), or, stored as it is, a
      16-bit one by ``load_reduce_stages``.

    We stage nothing: our layouts spread the tile over all eight warps, which issue the
    same ``multimem`` instructions (each thread half as many as a thread of NVIDIA's)."""
    if isinstance(op, MEM.MultimemLoadReduceViewTkoOp):
        return 4 if aa is not None and load_reduce_stages(op, aa) else 0
    if not isinstance(op, (MEM.MultimemStoreViewTkoOp, MEM.MultimemReduceViewTkoOp)):
        return 0
    tile = op.tile.type
    if tile.element.bitwidth != 16 or tile.num_elements <= 2:
        return 0
    return 4 if needs_pairing(op.tile) else 0


#: Consumers a load-reduce's tile goes to unchanged (a multimem store of it: 128 threads, measured).
#: Stage-local: a rule fitted to NVIDIA's CTA sizes, about these three ops and nothing they share.
STORED_AS_IT_IS = (MEM.StoreViewTkoOp, MEM.MultimemStoreViewTkoOp, MEM.MultimemReduceViewTkoOp)


def load_reduce_stages(op: Operation, aa: TileAA) -> bool:
    """Does NVIDIA's tileiras run this load-reduce in a warp group of its own?  Fitted to its
    ``.reqntid`` on sm_100 (test_multimem.py, LOAD_CTA_SIZES; the rule is not NVIDIA's own,
    which its schedule pass decides): always when the tile feeds anything but a
    store (``STORED_AS_IT_IS``); stored as it is, 32/64-bit tiles never, 16-bit ones under 64 elements
    (pairs fewer than a warp's lanes) and from 512 elements, but not from 64 to 256, nor
    256x2 (NVIDIA loops over its rows) nor 1024 elements of at least 8 along the last
    dim and 8 across the others (one measured shape, 4x32x8, breaks this last part).
    Unpairable 16-bit tiles (``tileaa.unpairable``) emit no code: 128 threads."""
    if unpairable(op):  # no code, whatever uses its (undefined) tile
        return False
    tile = op.results[0]
    if any(tile in u.operands and not isinstance(u, STORED_AS_IT_IS) for u in aa.live_ops()):
        return True
    shape = tuple(tile.type.shape)
    n = tile.type.num_elements
    if tile.type.element.bitwidth != 16 or 64 <= n <= 256 or shape == (256, 2):
        return False
    if n == 1024 and len(shape) >= 2 and 8 <= shape[-1] <= n // 8:
        return False
    return True


def needs_pairing(v: Value) -> bool:
    """Does tile ``v`` come from a producer with a layout of its own (loads, iota, values
    carried by a block), through any ops?  Constants, single elements and multimem
    loads take the pair layout as they are (NVIDIA keeps 128 threads for them)."""
    seen: set[Value] = set()
    work = [v]
    while work:
        u = work.pop()
        if u in seen or u.type.num_elements == 1 or isinstance(u.owner, MEM.MultimemLoadReduceViewTkoOp):
            continue
        seen.add(u)
        if u.is_block_argument or has_own_layout(u.owner) or u.owner.regions:
            return True
        work.extend(x for x in u.owner.operands if is_tile(x))
    return False


def choose_num_warps(aa: TileAA, hint: Optional[int], arch: int = 0) -> tuple[int, int]:
    """(warps the layouts use, extra warps in the CTA).  Layouts need a power of two;
    warps beyond it (a non-power-of-two hint, the MMA warp group) hold copies."""
    if hint:
        warps = hint
    else:
        biggest = max((r.type.num_elements for op in aa.live_ops() for r in op.results if is_tile(r)), default=1)
        warps = 1 if biggest <= 1 else DEFAULT_WARPS
    warps += max((max(mma_extra_warps(op, arch), multimem_extra_warps(op, aa)) for op in aa.live_ops()), default=0)
    layout_warps = 1 << (warps.bit_length() - 1)
    return layout_warps, warps - layout_warps


def assign_layouts(aa: TileAA, num_warps_hint: Optional[int] = None, arch: int = 0) -> TileAS:
    tas = TileAS(aa, *choose_num_warps(aa, num_warps_hint, arch),
                 mma_shapes=frozenset(op.results[0].type.shape for op in aa.live_ops() if is_contraction(op)))
    for op in aa.live_ops():
        form = tensor_core_mma(op, arch, tas.num_warps, tas.extra_warps)
        if form is not None:     # warps beyond the 16x8 blocks hold copies
            tas.tensor_cores[op] = form
            tas.mma_layouts[op.result.type.shape] = mma_fragment(op.result.type.shape, tas.num_warps)
    tas.pairs = plan_pairs(aa.function)
    tas.access_allowed = vectorize.allowed_vectors(aa)
    tas.shape_access = vectorize.shape_vectors(aa, tas.access_allowed)
    for a in aa.function.entry_block.args:
        if is_tile(a):
            tas.layouts[a] = tas.canonical_type(a.type)
    _assign_block(tas, aa.function.entry_block)
    plan_chunks(tas)
    tas.vectors = vectorize.plan_vectors(tas)
    if arch:
        candidates = [op for op in aa.live_ops() if op not in tas.chunked and op not in aa.silent
                      and not any(r in tas.pairs for r in op.results)
                      and not (isinstance(op, MEM.StoreViewTkoOp) and op.tile in tas.pairs)]
        tas.tma, tas.tensor_maps, tas.tma_end = tma.plan_tma(aa, candidates, f"sm_{arch}", tas.smem_bytes)
    return tas


def _assign_block(tas: TileAS, block: Block) -> None:
    for op in block.ops:
        if op in tas.aa.dead:
            continue
        rule = _RULES.get(type(op), _canonical_results)
        rule(tas, op)


# -- rules ------------------------------------------------------------------------
Rule = Callable[[TileAS, Operation], None]
_RULES: dict[type, Rule] = {}


def layout_rule(*classes: type) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for c in classes:
            _RULES[c] = fn
        return fn
    return register


def _want(tas: TileAS, op: Operation, i: int, layout: LinearLayout) -> None:
    """Operand ``i`` must be in ``layout``; record a conversion if it is not: computed
    again in that layout when that is cheap, else through shared memory."""
    v = op.operands[i]
    if is_tile(v) and tas.layouts.get(v) != layout:
        tas.converts[(op, i)] = layout
        plan = recompute_plan(tas, v, layout, op.parent)
        if plan is not None:
            tas.recomputed[(op, i)] = plan
            return
        need = v.type.num_elements * element_bytes(v.type)
        tas.scratch[op] = max(tas.scratch.get(op, 0), need)


#: The most instruction-producing ops one recomputation repeats (per register).
RECOMPUTE_OPS = 16


def recompute_plan(tas: TileAS, v: Value, layout: LinearLayout,
                   block: Optional[Block] = None) -> Optional[dict[Value, LinearLayout]]:
    """How to compute tile ``v`` again in ``layout`` (for a user in ``block``) instead of
    converting it through shared memory: the layout of every tile on the way, producers
    first; None when that is not cheap.  The way may take ``Recomputable`` ops (traits.py:
    constants, iota, relabels, broadcasts, integer and simple float arithmetic; integer
    division only by a constant), at most ``RECOMPUTE_OPS`` of them, and loads that
    ``reloadable`` allows; it ends at scalars, which every thread holds.  A conversion
    costs two barriers and shared-memory traffic and keeps both layouts' registers live;
    NVIDIA's tileiras computes such values again too (its gather/scatter PTX reloads an
    index tile in the second layout it needs and uses no shared memory)."""
    plan: dict[Value, LinearLayout] = {}
    work = [0]

    def visit(u: Value, want: LinearLayout) -> bool:
        if not is_tile(u) or u.type.rank == 0:
            return True
        if u in plan:
            return plan[u] == want
        op = u.owner
        if isinstance(op, (AR.DivIOp, AR.RemIOp)):
            if not _is_constant(op.rhs):
                return False
        elif isinstance(op, (MEM.LoadViewTkoOp, MEM.LoadPtrTkoOp)):
            if not reloadable(tas, op, block):
                return False
        elif not is_recomputable(op):
            return False
        if not is_free(op):
            work[0] += 1
            if work[0] > RECOMPUTE_OPS:
                return False
        for k, w in enumerate(op.operands):
            if not visit(w, _operand_layout_for(op, k, want)):
                return False
        plan[u] = want
        return True

    return plan if visit(v, layout) else None


def reloadable(tas: TileAS, op: Operation, block: Optional[Block]) -> bool:
    """May this load run again, later, in the same block?  A weak load that no write is
    token-ordered before or after may observe memory at any point (Tile IR orders
    token-ordered operations only through their tokens), so a second execution is one
    of its legal executions; 4-bit tiles (byte pairs) and gathers are left alone."""
    if op.parent is not block or op.attributes.get("memory_ordering_semantics") != MemoryOrderingSemantics.WEAK:
        return False
    result = op.results[0]
    if result in tas.pairs or is_subbyte(result.type) or tas.aa.needs_barrier(op):
        return False
    if isinstance(op, MEM.LoadViewTkoOp) and any(is_tile(v) and v.type.rank > 0 for v in op.index):
        return False
    return not tas.aa.observed_by_write(op)


def _is_constant(v: Value) -> bool:
    while isinstance(v.owner, (CO.BroadcastOp, CO.ReshapeOp)):
        v = v.owner.source
    return isinstance(v.owner, CO.ConstantOp)


def _operand_layout_for(op: Operation, i: int, result: LinearLayout) -> LinearLayout:
    """The layout operand ``i`` of a recomputed op needs for its result to be in ``result``
    without moving data (the inverse of the layout rules below)."""
    if isinstance(op, CO.ReshapeOp):
        return result.reshape(op.source.type.shape)
    if isinstance(op, CO.PermuteOp):
        perm = list(op.permutation)
        return result.permute([perm.index(d) for d in range(len(perm))])
    if isinstance(op, CO.BroadcastOp):
        return result.squash(d for d, (a, b) in enumerate(zip(op.source.type.shape, op.result.type.shape))
                             if a != b)
    return result


def _canonical_results(tas: TileAS, op: Operation) -> None:
    for r in op.results:
        if is_tile(r):
            tas.layouts[r] = tas.canonical_type(r.type) if op.regions else tas.canonical_of(r)
    for region in op.regions:
        for block in region.blocks:
            for a in block.args:
                if is_tile(a):
                    tas.layouts[a] = tas.canonical_type(a.type)
            _assign_block(tas, block)


def _elementwise(tas: TileAS, op: Operation) -> None:
    tiles = [i for i, v in enumerate(op.operands) if is_tile(v) and v.type.shape == op.results[0].type.shape]
    if not tiles:
        return _canonical_results(tas, op)
    layout = tas.layouts[op.operands[tiles[0]]]
    for i in tiles[1:]:
        _want(tas, op, i, layout)
    for r in op.results:
        tas.layouts[r] = layout


@layout_rule(CO.ReshapeOp)
def _reshape(tas: TileAS, op: Operation) -> None:
    tas.layouts[op.result] = tas.layouts[op.source].reshape(op.result.type.shape)


@layout_rule(CO.PermuteOp)
def _permute(tas: TileAS, op: Operation) -> None:
    tas.layouts[op.result] = tas.layouts[op.source].permute(op.permutation)


@layout_rule(CO.BroadcastOp)
def _broadcast(tas: TileAS, op: Operation) -> None:
    out = tas.canonical_of(op.result)
    dims = [d for d, (a, b) in enumerate(zip(op.source.type.shape, op.result.type.shape)) if a != b]
    _want(tas, op, 0, out.squash(dims))
    tas.layouts[op.result] = out


@layout_rule(CO.ReduceOp)
def _reduce(tas: TileAS, op: Operation) -> None:
    src = tas.layouts[op.operands[0]]
    for i in range(1, len(op.operands)):
        _want(tas, op, i, src)
    result = src.drop_dim(op.dim)
    for r in op.results:
        tas.layouts[r] = result
    warps_along = sum(1 for b in src.bases("warp") if b[op.dim])
    if warps_along:
        n = op.results[0].type.num_elements
        tas.scratch[op] = max(tas.scratch.get(op, 0),
                              (1 << warps_along) * n * sum(element_bytes(r.type) for r in op.results))
    _combiner_block(tas, op)


@layout_rule(CO.ScanOp)
def _scan(tas: TileAS, op: Operation) -> None:
    src = tas.layouts[op.operands[0]]
    for i in range(1, len(op.operands)):
        _want(tas, op, i, src)
    for r in op.results:
        tas.layouts[r] = src
    if scans_in_place(src, op.dim):
        # warps exchange their totals through a slot per thread and distinct total: registers
        # that differ in the register bits below the lowest warp bit share one
        steps = scan_steps(src, op.dim)
        warps = [k for k, (_, name, _) in enumerate(steps) if name == WARP]
        if warps:
            shared = sum(1 for _, name, _ in steps[:warps[0]] if name == REG)
            n = tas.num_threads * (src.size(REG) >> shared)
            tas.scratch[op] = max(tas.scratch.get(op, 0), n * sum(element_bytes(r.type) for r in op.results))
    else:
        n = op.results[0].type.num_elements
        tas.scratch[op] = max(tas.scratch.get(op, 0), n * sum(element_bytes(r.type) for r in op.results))
    _combiner_block(tas, op)


def scans_in_place(layout: LinearLayout, dim: int) -> bool:
    """Does every register, lane and warp bit of ``layout`` move along ``dim`` only or not
    at all?  Then a scan along ``dim`` combines elements where they are (codegen's
    ``_scan_by_bits``), no line needs another's elements."""
    return all(not base[dim] or not any(c for k, c in enumerate(base) if k != dim)
               for name in (REG, LANE, WARP) for base in layout.bases(name))


def scan_steps(layout: LinearLayout, dim: int) -> list[tuple[int, str, int]]:
    """The bits of an in-place scan along ``dim``, lowest position first: (the position
    the bit adds, REG/LANE/WARP, which bit of those)."""
    return sorted((base[dim], name, i) for name in (REG, LANE, WARP)
                  for i, base in enumerate(layout.bases(name)) if base[dim])


def _combiner_block(tas: TileAS, op: Operation) -> None:
    block = op.regions[0].blocks[0]
    for a in block.args:
        tas.layouts[a] = tas.canonical(())
    _assign_block(tas, block)


def cat_in_registers(op: Operation) -> bool:
    """A ``cat`` of two tiles of one shape: the result holds the first tile's registers,
    then the second's (``LinearLayout.concat``), nothing moves."""
    return op.lhs.type.rank > 0 and op.lhs.type.shape == op.rhs.type.shape


@layout_rule(CO.CatOp)
def _cat(tas: TileAS, op: Operation) -> None:
    if not cat_in_registers(op):
        return _through_smem(tas, op)
    layout = tas.layouts[op.lhs]
    _want(tas, op, 1, layout)
    tas.layouts[op.result] = layout.concat(op.dim)


@layout_rule(CO.ExtractOp)
def _extract(tas: TileAS, op: Operation) -> None:
    """At constant indices, a block each thread holds in whole registers is a choice of
    registers (``LinearLayout.select_block``: the parts of a ``cat``, a row block of a
    tile with rows in registers); other blocks go through shared memory."""
    part = op.result.type.shape
    facts = [tas.aa.fact(v) for v in op.operands[1:]]
    if all(f.lower is not None and f.lower == f.upper for f in facts):
        origin = [f.lower * s for f, s in zip(facts, part)]
        picked = tas.layouts[op.source].select_block(origin, part)
        if picked is not None:
            tas.layouts[op.result], tas.picks[op] = picked
            _pick_through_cats(tas, op)
            return
    _through_smem(tas, op)


def _pick_through_cats(tas: TileAS, op: Operation) -> None:
    """An extract whose registers all come from one operand of an in-register ``cat``
    picks them from that operand: the other operand need not be computed (or loaded) for
    it, and is not kept live until the extract (cat_extract f32: the second half of a
    ``cat`` loaded and stored first, then the first half)."""
    source, picks = op.source, tas.picks[op]
    while isinstance(source.owner, CO.CatOp) and cat_in_registers(source.owner):
        cat = source.owner
        n = tas.layouts[cat.lhs].size(REG)
        k = 0 if all(j < n for j in picks) else 1 if all(j >= n for j in picks) else None
        if k is None or (cat, k) in tas.converts:
            break
        source, picks = cat.operands[k], [j - k * n for j in picks]
    if source is not op.source:
        tas.pick_sources[op], tas.picks[op] = source, picks


@layout_rule(CO.InsertOp, CO.PackOp, CO.UnpackOp)
def _through_smem(tas: TileAS, op: Operation) -> None:
    tiles = [v for v in op.operands if is_tile(v) and v.type.rank > 0]
    need = sum(v.type.num_elements * element_bytes(v.type) for v in tiles)
    tas.scratch[op] = max(tas.scratch.get(op, 0), need, op.result.type.num_elements * element_bytes(op.result.type))
    _canonical_results(tas, op)


@layout_rule(MEM.LoadPtrTkoOp)
def _load_ptr(tas: TileAS, op: Operation) -> None:
    layout = tas.layouts[op.source]
    for i, v in enumerate(op.operands[1:], 1):
        if is_tile(v) and v.type.shape == op.source.type.shape:
            _want(tas, op, i, layout)
    tas.layouts[op.result] = layout


@layout_rule(MEM.StorePtrTkoOp, MEM.AtomicRMWTkoOp, MEM.AtomicCASTkoOp)
def _pointer_tile_op(tas: TileAS, op: Operation) -> None:
    layout = tas.layouts[op.operands[0]]
    for i, v in enumerate(op.operands[1:], 1):
        if is_tile(v) and v.type.shape == op.operands[0].type.shape:
            _want(tas, op, i, layout)
    for r in op.results:
        if is_tile(r):
            tas.layouts[r] = layout
            # copies of an element receive the owner's atomic result through smem
            _need_scratch(tas, op, r.type.num_elements * element_bytes(r.type))


def _need_scratch(tas: TileAS, op: Operation, nbytes: int) -> None:
    tas.scratch[op] = max(tas.scratch.get(op, 0), nbytes)


@layout_rule(MEM.LoadViewTkoOp, MEM.StoreViewTkoOp, MEM.AtomicRedViewTkoOp)
def _view_access(tas: TileAS, op: Operation) -> None:
    """Gather/scatter index tiles are looked up by coordinate through smem; 4-bit tiles are
    stored from a layout holding byte pairs (lower/subbyte.py).  A loaded tile that only
    feeds reductions along its last dim, where the canonical layout would give each thread
    several rows, takes ``row_reduction_layout``; one that only feeds matrix multiplies as
    A or B (staged in shared memory, so any layout does) takes ``contiguous``: each row a
    thread loads costs it a 64-bit address live through the K loop, and NVIDIA's tileiras
    too loads those operands a row a thread, uncoalesced (gemm_basic f16 128x128x32: 16
    rows a thread coalesced, 255 registers and spills; 8 rows, 211)."""
    for v in op.index:
        if is_tile(v) and v.type.rank > 0:
            _need_scratch(tas, op, v.type.num_elements * element_bytes(v.type))
    for r in op.results:
        if is_tile(r):
            layout = tas.canonical_of(r)
            if r not in tas.pairs and _feeds_row_reductions(tas, r) \
                    and any(any(b[:-1]) for b in layout.bases(REG_DIM)):
                layout = tas.row_reduction_layout(r.type.shape)
            elif r not in tas.pairs and _feeds_mma_operands(tas, r):
                layout = tas.contiguous(r.type.shape)
            tas.layouts[r] = layout
    dim = unit_dim(op.view.type)
    if isinstance(op, MEM.StoreViewTkoOp) and is_subbyte(op.tile.type) and dim is not None \
            and op.tile.type.shape[dim] > 1 and not holds_pairs(tas.layouts[op.tile], dim):
        _want(tas, op, 0, tas.paired(op.tile.type.shape, dim))
    elif (wide := vectorize.store_relayout(tas, op)) is not None:   # through shared memory
        tas.converts[(op, 0)] = wide
        _need_scratch(tas, op, op.tile.type.num_elements * element_bytes(op.tile.type))


def _feeds_mma_operands(tas: TileAS, v: Value) -> bool:
    """Is ``v`` used, through reshapes and permutes, only as a matrix multiply's A or B?"""
    users = tas.users(v)
    return bool(users) and all(
        _feeds_mma_operands(tas, u.result) if isinstance(u, RELABELS)
        else is_contraction(u) and u.operands[2] is not v for u in users)


def _feeds_row_reductions(tas: TileAS, v: Value) -> bool:
    rank = v.type.rank
    users = tas.users(v)
    return rank >= 2 and bool(users) and all(isinstance(u, CO.ReduceOp) and u.dim == rank - 1 for u in users)


@layout_rule(MEM.MultimemLoadReduceViewTkoOp, MEM.MultimemStoreViewTkoOp, MEM.MultimemReduceViewTkoOp)
def _multimem(tas: TileAS, op: Operation) -> None:
    """PTX multimem accesses f16/bf16 only in pairs (``.v2``): those tiles get two
    consecutive elements of the view's unit-stride dim per register pair."""
    layout = multimem_layout(tas, op.view.type)
    if isinstance(op, MEM.MultimemLoadReduceViewTkoOp):
        tas.layouts[op.results[0]] = layout
    else:
        _want(tas, op, 1, layout)


def multimem_layout(tas: TileAS, view: T.PartitionViewType) -> LinearLayout:
    shape = tuple(view.tile_shape)
    tensor = view.tensor_view
    unit = [k for k, d in enumerate(view.dim_map) if tensor.strides[d] == 1]
    if tensor.element.bitwidth != 16 or len(unit) != 1:
        return tas.canonical(shape, nbytes=access_bytes(tensor.element))
    return tas.paired(shape, unit[0], exact=True)


@layout_rule(CF.PrintTkoOp)
def _print(tas: TileAS, op: Operation) -> None:
    """Every element of each printed tile is gathered in every thread through smem."""
    for v in op.args:
        if is_tile(v) and v.type.rank > 0:
            _need_scratch(tas, op, v.type.num_elements * element_bytes(v.type))


@layout_rule(*ops_with(Contraction))
def _mma(tas: TileAS, op: Operation) -> None:
    """Matrix multiply: the result takes the accumulator's layout; A and B (and their
    block scales) are staged in shared memory, in rows padded for ``mma.sync``
    (``mma_staging_pitches``), for ``wgmma`` in the core matrices its descriptors read
    (``wgmma_staging``)."""
    staged = [v for i, v in enumerate(op.operands) if i != 2]
    tas.layouts[op.result] = tas.layouts[op.operands[2]]
    form = tas.tensor_cores.get(op)
    if form is not None and form.warpgroup:
        tas.wgmma_staging[op] = wgmma_staging(op, tas.operand_layout(op, 0), tas.operand_layout(op, 1))
        _need_scratch(tas, op, tas.wgmma_staging[op].nbytes)
        return
    if form is not None:
        a_pitch, b_pitch = mma_staging_pitches(op)
        rows = op.lhs.type.shape[-2] * a_pitch + op.rhs.type.shape[-2] * b_pitch
        _need_scratch(tas, op, rows * element_bytes(op.lhs.type))
        return
    _need_scratch(tas, op, sum(v.type.num_elements * element_bytes(v.type) for v in staged))


@layout_rule(CF.AssertOp)
def _any_layout(tas: TileAS, op: Operation) -> None:
    """Consumers that work in whatever layout their operands have."""


def _to_canonical(tas: TileAS, op: Operation) -> None:
    for i, v in enumerate(op.operands):
        if is_tile(v):
            _want(tas, op, i, tas.canonical_type(v.type))


@layout_rule(CF.YieldOp, CF.ContinueOp, CF.BreakOp, CF.ReturnOp)
def _terminator(tas: TileAS, op: Operation) -> None:
    parent = op.parent.parent.parent if op.parent and op.parent.parent else None
    if isinstance(parent, (CO.ReduceOp, CO.ScanOp)):
        return
    _to_canonical(tas, op)


@layout_rule(CF.ForOp, CF.LoopOp, CF.IfOp)
def _region_op(tas: TileAS, op: Operation) -> None:
    _to_canonical(tas, op)
    _canonical_results(tas, op)


for _cls in ops_with(Elementwise):
    _RULES.setdefault(_cls, _elementwise)


def format_tileas(tas: TileAS) -> str:
    """``--emit=tileas``: every op with the layout of each tile it produces (layouts are
    numbered ``#L0``, ``#L1``... and listed first), the conversions of its operands, its
    shared-memory scratch and the chunked loops.  Values carry tileirdisasm's names."""
    from ..layout.format import format_layout
    from ..text.names import NameTable

    fn = tas.aa.function
    names = NameTable(fn.body)
    aliases: dict[LinearLayout, str] = {}

    def alias(layout: LinearLayout) -> str:
        return aliases.setdefault(layout, f"#L{len(aliases)}")

    body: list[str] = []

    def emit(block: Block, depth: int) -> None:
        pad = "  " * depth
        for op in block.ops:
            results = ", ".join(names.ref(r) for r in op.results)
            args = ", ".join(names.ref(v) for v in op.operands if not isinstance(v.type, T.TokenType))
            line = f"{pad}{results + ' = ' if results else ''}{op.name}({args})"
            tiles = [f"{r.type} {alias(tas.layouts[r])}" for r in op.results if r in tas.layouts]
            if tiles:
                line += " : " + ", ".join(tiles)
            notes = [f"operand {i} -> {alias(lay)}{' recomputed' if (cop, i) in tas.recomputed else ''}"
                     for (cop, i), lay in tas.converts.items() if cop is op]
            if op in tas.scratch:
                notes.append(f"smem {tas.scratch[op]}B")
            group = tas.chunked.get(op)
            if group is not None and op is group.anchor:
                notes.append(f"chunked loop x{group.trips} over {alias(group.chunk_layout)}")
            elif group is not None:
                notes.append("in chunked loop")
            body.append(line + (f"  // {'; '.join(notes)}" if notes else ""))
            for region in op.regions:
                for blk in region.blocks:
                    body.append(f"{pad}  ^({', '.join(names.ref(a) for a in blk.args)}):")
                    emit(blk, depth + 2)

    emit(fn.entry_block, 1)
    header = (f"tileas.func @{fn.name} warps={tas.num_warps}"
              + (f"+{tas.extra_warps}" if tas.extra_warps else "") + f" smem={tas.smem_bytes}B {{")
    layouts = [f"  {name} = {format_layout(layout)}" for layout, name in aliases.items()]
    return "\n".join([header, *layouts, *body, "}"]) + "\n"


# -- chunked loops for large tiles ------------------------------------------------------------
#: A thread's registers of one tile beyond which element-wise work runs in a loop.
CHUNK_REGS = 4
ITER = "iter"


@record
class ChunkGroup:
    """Ops that together compute a large tile element-wise from loads to a store.

    They run in a loop over chunks of the tile's registers: the layout's first
    ``log2(CHUNK_REGS)`` register bits stay registers, the rest become the loop's
    iteration bits (input dim ``iter``), so the code and the registers are those of
    one chunk, whatever the tile size.  Reshapes and permutes inside the group relabel
    coordinates but keep the register order, so every tile of the group is chunked the
    same way (``chunk_layout_of`` its own layout)."""

    anchor: Operation                 # the store that ends the group
    ops: list[Operation]              # in block order, anchor last
    chunk_layout: LinearLayout
    regs: int = CHUNK_REGS            # registers of one chunk (a vector access's run at least)

    @property
    def trips(self) -> int:
        return self.chunk_layout.size(ITER)


def chunk_layout_of(layout: LinearLayout, regs: int = CHUNK_REGS) -> LinearLayout:
    bases = layout.bases(REG_DIM)
    k = (regs.bit_length() - 1)
    return layout.with_bases(REG_DIM, bases[:k]).with_bases(ITER, bases[k:])


REG_DIM = "reg"
#: Ops whose result holds the source's registers under relabelled coordinates.  Stage-local:
#: a fact about register layouts (``LinearLayout.reshape``/``permute``), which only TileAS has.
RELABELS = (CO.ReshapeOp, CO.PermuteOp)


def plan_chunks(tas: TileAS) -> None:
    """Find, in every block, stores of large tiles whose tile is computed element-wise
    from loads, constants and scalars used nowhere else: those become ChunkGroups."""
    users: dict[Value, list[Operation]] = {}
    for op in tas.aa.live_ops():
        for v in op.operands:
            users.setdefault(v, []).append(op)
    for op in tas.aa.function.walk():
        for region in op.regions:
            for block in region.blocks:
                _plan_block(tas, block, users)
    _plan_block(tas, tas.aa.function.entry_block, users)


def _plan_block(tas: TileAS, block: Block, users: dict[Value, list[Operation]]) -> None:
    position = {op: i for i, op in enumerate(block.ops)}
    for store in block.ops:
        if not is_plain_store(store) or store in tas.chunked or (store, 0) in tas.converts:
            continue
        tile = store.operands[0] if isinstance(store, MEM.StorePtrTkoOp) else store.tile
        layout = tas.layouts.get(tile)
        if layout is None or layout.size(REG_DIM) <= CHUNK_REGS:
            continue
        group = _collect_group(tas, store, layout, position, users)
        if group is not None:
            ops = sorted(group, key=position.__getitem__)
            widest = max((tas.access_allowed.get(member, 1) for member in ops), default=1)
            regs = max(CHUNK_REGS, min(widest, vectorize.register_run(layout)))
            cg = ChunkGroup(store, ops, chunk_layout_of(layout, regs), regs)
            for member in ops:
                tas.chunked[member] = cg


def _collect_group(tas: TileAS, store: Operation, layout: LinearLayout, position: dict[Operation, int],
                   users: dict[Value, list[Operation]]) -> Optional[set[Operation]]:
    group: set[Operation] = {store}
    work = [(v, layout) for v in store.operands if _is_chunk_tile(tas, v, layout)]
    while work:
        v, layout = work.pop()
        producer = v.owner
        if not isinstance(producer, Operation) or producer in group:
            continue
        if producer not in position or not _chunkable(tas, producer, layout):
            return None
        group.add(producer)
        if isinstance(producer, RELABELS):
            layout = tas.layouts[producer.source]
        work += [(u, layout) for u in producer.operands if _is_chunk_tile(tas, u, layout)]
    # every tile the group computes must be consumed inside it
    for op in group:
        for r in op.results:
            if is_tile(r) and r.type.rank > 0 and any(u not in group for u in users.get(r, ())):
                return None
    return group


def _is_chunk_tile(tas: TileAS, v: Value, layout: LinearLayout) -> bool:
    return is_tile(v) and v.type.rank > 0 and tas.layouts.get(v) == layout


def _chunkable(tas: TileAS, op: Operation, layout: LinearLayout) -> bool:
    if any((op, i) in tas.converts for i in range(len(op.operands))):
        return False
    if is_plain_load(op):
        return (op.attributes.get("memory_ordering_semantics") == MemoryOrderingSemantics.WEAK
                and not tas.aa.needs_barrier(op)
                and all(not is_tile(v) or v.type.rank == 0 or tas.layouts.get(v) == layout
                        for v in op.operands[1:] if not isinstance(v.type, T.TokenType))
                and op not in tas.scratch)
    if isinstance(op, (CO.ConstantOp, CO.IotaOp)):
        return tas.layouts.get(op.result) == layout
    if isinstance(op, RELABELS):
        return tas.layouts.get(op.result) == layout
    if isinstance(op, CO.BroadcastOp):
        return op.source.type.rank == 0 or all(d == 1 for d in op.source.type.shape)
    if is_elementwise(op) and not op.regions:
        return all(tas.layouts.get(r) == layout for r in op.results) and all(
            not is_tile(v) or v.type.rank == 0 or tas.layouts.get(v) == layout for v in op.operands)
    return False
