"""The layout rules of TileAS: one ``@layout_rule(OpClass)`` function per kind of op.

Each rule reads the layouts of an op's operands (``tas.layouts``), records the layout of
each tile it produces, the conversions its operands need (``_want``: computed again in
the wanted layout where ``recompute_plan`` finds that cheap, else through shared memory)
and the shared-memory scratch it needs (``_need_scratch``).  ``assign_block`` applies them
to a block in order; ``tileas.assign_layouts`` drives it over the function.

* loads, constants, iota, control-flow results and loop-carried values use the
  *canonical* layout of their shape (``TileAS.canonical``);
* element-wise ops take their first tile operand's layout and convert the rest;
* reshape and permute relabel coordinates: the layout moves along for free;
* a reduction's result keeps the surviving dims of its input's layout;
* broadcast wants its input in the output's layout with the broadcast dims
  squashed, which makes it a register copy.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Callable, Optional

from ..ir import types as T
from ..ir.core import Block, Operation, Value
from ..layout.linear import LANE, REG, WARP, LinearLayout
from ..layout.shared import BANK_BYTES, Padding
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.enums import MemoryOrderingSemantics
from ..tile.registry import ops_with
from ..tile.traits import Contraction, Elementwise, is_contraction, is_free, is_recomputable
from . import vectorize
from .mma_forms import mma_staging_bytes, simt_staging_bytes, tcgen05_staging, wgmma_staging
from .subbyte import holds_pairs, is_subbyte, unit_dim
from .tma import enclosing_loop
from .tiles import access_bytes, element_bytes, is_tile, iter_args

if TYPE_CHECKING:
    from .tileas import TileAS

#: Ops whose result holds the source's registers under relabelled coordinates.  Stage-local:
#: a fact about register layouts (``LinearLayout.reshape``/``permute``), which only TileAS has.
RELABELS = (CO.ReshapeOp, CO.PermuteOp)


def assign_block(tas: TileAS, block: Block) -> None:
    """Apply each live op's layout rule, in block order (regions through their op's rule)."""
    for op in block.ops:
        if op in tas.aa.dead:
            continue
        rule = _RULES.get(type(op), _canonical_results)
        rule(tas, op)


Rule = Callable[["TileAS", Operation], None]
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
        leaves: dict[tuple[Operation, int], LinearLayout] = {}
        plan = recompute_plan(tas, v, layout, op.parent, leaves)
        if plan is not None:
            tas.recomputed[(op, i)] = plan
            if leaves:
                tas.recompute_converts[(op, i)] = leaves
                need = max(_tile_bytes(u.operands[k]) for u, k in leaves)
                tas.scratch[op] = max(tas.scratch.get(op, 0), need)
            return
        tas.scratch[op] = max(tas.scratch.get(op, 0), _tile_bytes(v))


def _tile_bytes(v: Value) -> int:
    """Bytes tile ``v`` takes in shared memory when converted through it."""
    return v.type.num_elements * element_bytes(v.type)


#: The most instruction-producing ops one recomputation repeats (per register).
RECOMPUTE_OPS = 16
#: Registers a thread of the wanted layout within which an ``ftof`` outside loops is redone
#: in it too (see ``recompute_plan``)
SMALL_RECOMPUTE_REGISTERS = 1


def recompute_plan(tas: TileAS, v: Value, layout: LinearLayout, block: Optional[Block] = None,
                   leaves: Optional[dict[tuple[Operation, int], LinearLayout]] = None
                   ) -> Optional[dict[Value, LinearLayout]]:
    """How to compute tile ``v`` again in ``layout`` (for a user in ``block``) instead of
    converting it through shared memory: the layout of every tile on the way, producers
    first; None when that is not cheap.  The way may take ``Recomputable`` ops (traits.py:
    constants, iota, relabels, broadcasts, integer and simple float arithmetic; integer
    division only by a constant), at most ``RECOMPUTE_OPS`` of them, and loads that
    ``reloadable`` allows; it ends at scalars, which every thread holds.  A conversion
    costs two barriers and shared-memory traffic and keeps both layouts' registers live;
    NVIDIA's tileiras computes such values again too (its gather/scatter PTX reloads an
    index tile in the second layout it needs and uses no shared memory).

    With ``leaves`` (a dict to fill), a broadcast whose source cannot be computed again
    is still redone in registers, from its source converted through shared memory
    (``leaves[(broadcast, 0)]``: the source's layout): the source holds the broadcast's
    elements once (an RMS norm's weight row and per-row scale against a 4x4096 tile: 32
    and 1 registers converted instead of 128 each, every iteration).

    Loads and ``ftof`` conversions made before a loop are redone inside it, every trip,
    in the layout the loop wants (``loop_around``): the alternative is a conversion
    through shared memory every trip (two barriers), with the source's registers live
    across the loop and, where two such conversions follow each other (a layer norm's
    weight and bias rows), the first one's registers live across the second (bf16 4x2048
    persistent layer norm sm_80, ptxas -v: 194 registers, 112 reloaded; NVIDIA 107).
    Such a load is redone only where each access moves 16 bytes, as the conversion's
    shared-memory reads do: element by element (unaligned rows) it takes four times their
    instructions, and ptxas, hoisting them to cover their latency, more registers (bf16
    4x4096 RMS norm sm_90: 201, 255 reloaded, and spills).  Outside loops a conversion runs
    once and ``ftof`` stays where it is: reloaded, a gemm epilogue's bias row took 16 more
    registers than converted once.  Unless the wanted layout holds at most
    ``SMALL_RECOMPUTE_REGISTERS`` a thread: a cross entropy's gathered label logits (4
    values, one a warp, against the rows' logsumexp) are gathered again in the rows' layout,
    as NVIDIA's tileiras gathers them, with no shared-memory exchange and its two barriers."""
    plan: dict[Value, LinearLayout] = {}
    work = [0]

    def visit(u: Value, want: LinearLayout) -> bool:
        if not is_tile(u) or u.type.rank == 0:
            return True
        if u in plan:
            return plan[u] == want
        if u.is_block_argument:         # a loop's carried value, a region's argument
            return False
        op = u.owner
        if isinstance(op, (AR.DivIOp, AR.RemIOp)):
            if not _is_constant(op.rhs):
                return False
        elif isinstance(op, (MEM.LoadViewTkoOp, MEM.LoadPtrTkoOp)):
            if not reloadable(tas, op, block) or _narrower_reload(tas, op, want):
                return False
            if op.parent is not block and _reload_bytes(tas, op, want) < vectorize.WIDEST_ACCESS:
                return False
        elif isinstance(op, CO.FToFOp):
            if loop_around(op.parent, block) is None and want.size(REG) > SMALL_RECOMPUTE_REGISTERS:
                return False                                 # see the docstring
        elif not is_recomputable(op):
            return False
        if not is_free(op):
            work[0] += 1
            if work[0] > RECOMPUTE_OPS:
                return False
        for k, w in enumerate(op.operands):
            inner = operand_layout_for(op, k, want)
            before = set(plan)
            if visit(w, inner):
                continue
            if leaves is None or not isinstance(op, CO.BroadcastOp) or k != 0:
                return False
            for stale in set(plan) - before:     # what the failed way recorded
                del plan[stale]
            leaves[(op, 0)] = inner
        plan[u] = want
        return True

    return plan if visit(v, layout) else None


def reloadable(tas: TileAS, op: Operation, block: Optional[Block]) -> bool:
    """May this load run again, later, in ``block``: its own, or a loop body it holds
    (``loop_around``) where nothing writes the tensor it reads (the program-order reading,
    which the interpreter follows)?  A weak load that no write is token-ordered before or
    after may observe memory at any point (Tile IR orders token-ordered operations only
    through their tokens), so a second execution, or one every trip, is one of its legal
    executions; 4-bit tiles (byte pairs) and gathers are left alone."""
    if op.parent is not block:
        from .stream_pipeline import writes_loaded_tensor  # noqa: PLC0415 (it builds on this module)

        loop = loop_around(op.parent, block)
        if loop is None or writes_loaded_tensor(loop, op):
            return False
    if op.attributes.get("memory_ordering_semantics") != MemoryOrderingSemantics.WEAK:
        return False
    result = op.results[0]
    if result in tas.pairs or is_subbyte(result.type) or tas.aa.needs_barrier(op):
        return False
    if isinstance(op, MEM.LoadViewTkoOp) and any(is_tile(v) and v.type.rank > 0 for v in op.index):
        return False
    return not tas.aa.observed_by_write(op)


def loop_around(outer: Optional[Block], block: Optional[Block]) -> Optional[Operation]:
    """The op of ``outer`` that holds ``block`` when a loop (``for``, ``loop``) lies on the
    way: ops in ``block`` run every trip of it, those of ``outer`` once around it."""
    looped, op = False, None
    while block is not None and block is not outer:
        op = block.parent.parent if block.parent is not None else None
        looped = looped or isinstance(op, (CF.ForOp, CF.LoopOp))
        block = op.parent if op is not None else None
    return op if looped and block is outer else None


def _reload_bytes(tas: TileAS, op: Operation, want: LinearLayout) -> int:
    """Bytes each access of ``op``'s tile loaded again in ``want`` moves (1 element for a
    gather or a view whose runs are not known aligned)."""
    if not isinstance(op, MEM.LoadViewTkoOp):
        return element_bytes(op.results[0].type)
    run = min(tas.access_allowed.get(op, 1), vectorize.register_run(want, vectorize.access_dim(op)))
    return run * element_bytes(op.results[0].type)


def _narrower_reload(tas: TileAS, op: Operation, want: LinearLayout) -> bool:
    """Would loading ``op``'s tile again in ``want`` move fewer elements an access than its
    own load (no run along the view's contiguous dim there: a row-major tile wanted in a
    Fortran-order tile's layout)?  Element-wise accesses across the rows touch a sector
    each; one exchange through shared memory costs less (mixed-order tiles: 8 sectors a
    request against 16 whole ones for the 16-byte loads)."""
    if not isinstance(op, MEM.LoadViewTkoOp) or tas.access_allowed.get(op, 1) < 2:
        return False
    dim = vectorize.access_dim(op)
    return vectorize.register_run(want, dim) < vectorize.register_run(tas.layouts[op.results[0]], dim)


def _is_constant(v: Value) -> bool:
    while isinstance(v.owner, (CO.BroadcastOp, CO.ReshapeOp)):
        v = v.owner.source
    return isinstance(v.owner, CO.ConstantOp)


def operand_layout_for(op: Operation, i: int, result: LinearLayout) -> LinearLayout:
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
            assign_block(tas, block)


def _elementwise(tas: TileAS, op: Operation) -> None:
    tiles = [i for i, v in enumerate(op.operands) if is_tile(v) and v.type.shape == op.results[0].type.shape]
    if not tiles:
        return _canonical_results(tas, op)
    layout = _cheapest_layout(tas, op, tiles)
    for i in tiles:
        _want(tas, op, i, layout)
    for r in op.results:
        tas.layouts[r] = layout


def _cheapest_layout(tas: TileAS, op: Operation, tiles: list[int]) -> LinearLayout:
    """Of the layouts operands ``tiles`` of an elementwise op come in, the one the others
    move to with the fewest bytes through shared memory (a tile computed again in it moves
    none, or only a broadcast's source: ``recompute_plan``); of equal costs, the first
    operand's.  A weight row broadcast to a tile is made again in the tile's layout,
    rather than the tile converted to the broadcast's."""
    candidates = list(dict.fromkeys(tas.layouts[op.operands[i]] for i in tiles))
    if len(candidates) == 1:
        return candidates[0]
    return min(candidates, key=lambda layout: sum(_moved_bytes(tas, op, i, layout) for i in tiles))


def _moved_bytes(tas: TileAS, op: Operation, i: int, layout: LinearLayout) -> int:
    """Bytes that operand ``i`` of ``op`` moves through shared memory to reach ``layout``."""
    v = op.operands[i]
    if tas.layouts.get(v) == layout:
        return 0
    leaves: dict[tuple[Operation, int], LinearLayout] = {}
    if recompute_plan(tas, v, layout, op.parent, leaves) is None:
        return _tile_bytes(v)
    return sum(_tile_bytes(u.operands[k]) for u, k in leaves)


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
        n, groups = op.results[0].type.num_elements, 1 << warps_along
        sizes = [element_bytes(r.type) for r in op.results]
        if spreads_warp_fold(result, groups, n, tas.layout_threads):
            need = sum(warp_fold_padding(s).padded_size(groups * n) * s for s in sizes)
        else:
            need = groups * n * sum(sizes)
        tas.scratch[op] = max(tas.scratch.get(op, 0), need)
    _combiner_block(tas, op)


def spreads_warp_fold(out: LinearLayout, groups: int, n: int, threads: int) -> bool:
    """Do a reduction's ``groups`` warps along the reduced dim fold their partial results
    with all the CTA's threads (codegen's ``_fold_warps_spread``: each thread folds a slot
    or a few, by butterflies, in shared memory padded by ``warp_fold_padding``), rather than
    each thread folding all ``groups`` partials of each of its result registers?  Where the
    result (``out``, ``n`` elements) is held by lanes and copied across many threads (a
    column reduction's row), a thread has few slots of its own: ``rounds`` slots, read and
    folded by ``log2(groups)`` butterflies, against ``groups - 1`` loads and combines per
    register (reduce_cols_multi f32 32x32: one slot a thread and two butterflies, where each
    thread read 16 partials for its 4 columns; 48 -> 32 registers, NVIDIA's 38)."""
    if not 2 <= groups <= 32 or not any(any(base) for base in out.bases(LANE)):
        return False
    rounds = -(-n * groups // threads)
    return rounds * groups.bit_length() < out.size(REG) * (groups - 1)


def warp_fold_padding(elem_bytes: int) -> Padding:
    """A bank's word of padding after every 128 bytes of a spread warp fold's slots (result
    element ``f``'s partial of warp ``g`` at ``f * groups + g``): a warp's lanes write the
    partials of columns ``groups`` slots apart, which without it share banks (f32 over 4
    warps: lanes 16 words apart, a 4-way conflict on every store and on reading the totals
    back; with it no conflict, and a thread's reads of consecutive slots stay conflict-free)."""
    return Padding(128 // elem_bytes, max(1, BANK_BYTES // elem_bytes))


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
    assign_block(tas, block)


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
    if extract_by_shuffle(tas.layouts[op.source], op.source.type):
        return _canonical_results(tas, op)
    _through_smem(tas, op)


#: the most registers of a source a shuffled extract selects among (a select each)
SHUFFLE_EXTRACT_REGS = 8


def extract_by_shuffle(source: LinearLayout, ty: T.Type) -> bool:
    """Does an extract at indices known only at run time read its elements with
    ``shfl.sync.idx`` (each from the lane holding it, after a select among that lane's
    registers) rather than through shared memory and two barriers?  So where every warp
    holds the whole source (its warp bases are 0: a row of a block table, a page id a
    trip) in at most ``SHUFFLE_EXTRACT_REGS`` registers of at most 32 bits: paged
    attention's page id, picked every trip by the induction variable."""
    return (not any(any(b) for b in source.bases(WARP))
            and source.size(REG) <= SHUFFLE_EXTRACT_REGS and 0 < T.element_type(ty).bitwidth <= 32)


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
                    and any(any(b[:-1]) for b in layout.bases(REG)):
                layout = tas.row_reduction_layout(r.type.shape)
            elif r not in tas.pairs and _feeds_mma_operands(tas, r):
                layout = tas.contiguous(r.type.shape, _scalar_simt_operand(tas, op, r))
            elif r not in tas.pairs and isinstance(op, MEM.LoadViewTkoOp):
                layout = vectorize.access_layout(tas, op) or layout     # another order than its shape's
            tas.layouts[r] = layout
    dim = unit_dim(op.view.type)
    if isinstance(op, MEM.StoreViewTkoOp) and is_subbyte(op.tile.type) and dim is not None \
            and op.tile.type.shape[dim] > 1 and not holds_pairs(tas.layouts[op.tile], dim):
        _want(tas, op, 0, tas.paired(op.tile.type.shape, dim))
    elif (wide := vectorize.store_relayout(tas, op)) is not None:   # through shared memory
        tas.converts[(op, 0)] = wide
        _need_scratch(tas, op, op.tile.type.num_elements * element_bytes(op.tile.type))


def _scalar_simt_operand(tas: TileAS, op: Operation, v: Value) -> Optional[int]:
    """1 where the load ``op`` of ``v`` is scalar (its facts allow no wider access) and only
    CUDA-core multiplies read it (no tensor-core form): a thread then holds one element of
    a row at a time and the lanes cover a row, so each warp instruction reads whole
    sectors (mma_scaled_mx sm_100 unaligned: 4.3 sectors a request, NVIDIA's 1.2).  The
    multiply's staging takes any layout, and its operands' addresses are few; the
    tensor-core loads keep their runs (registers: a row each is an address live across the
    K loop).  None otherwise."""
    if tas.access_allowed.get(op, 1) > 1:
        return None
    users = tas.users(v)
    return 1 if users and all(is_contraction(u) and tas.tensor_cores.get(u) is None for u in users) else None


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
    (``wgmma_staging``), for CUDA cores A's rows padded (``simt_staging_bytes``).

    Where the accumulator arrives in another layout than its tensor-core form's fragments
    (a tile of its shape laid out for another form), the multiply runs on CUDA cores: the
    form is dropped here, so ``op in tas.tensor_cores`` says how it runs to every later
    pass and to codegen."""
    tas.layouts[op.result] = tas.layouts[op.operands[2]]
    form = tas.tensor_cores.get(op)
    if form is not None and tas.layouts[op.result] != tas.mma_layouts.get(tuple(op.result.type.shape)):
        del tas.tensor_cores[op]
        form = None
    if form is not None and form.tcgen05:
        tas.wgmma_staging[op] = tcgen05_staging(op, tas.operand_layout(op, 0), tas.operand_layout(op, 1))
        _need_scratch(tas, op, tas.wgmma_staging[op].nbytes)
        return
    if form is not None and form.warpgroup:
        tas.wgmma_staging[op] = wgmma_staging(op, tas.operand_layout(op, 0), tas.operand_layout(op, 1),
                                              tas.layouts[op.result])
        _need_scratch(tas, op, tas.wgmma_staging[op].nbytes)
        return
    if form is not None:
        if b_staged_as_rows(tas, op, form):
            tas.mma_b_rows.add(op)
        _need_scratch(tas, op, mma_staging_bytes(op, None, form, op in tas.mma_b_rows))
        return
    _need_scratch(tas, op, simt_staging_bytes(op, tas.layouts[op.result], tas.arch))


def b_staged_as_rows(tas: TileAS, op: Operation, form) -> bool:
    """Is a 16-bit ``mma.sync`` multiply's B staged as N rows of K (``TileAS.mma_b_rows``)?
    Where B's registers run along K (a tile loaded N x K and permuted, as K is in attention
    backward's ``Q @ K^T``), stored K x N each register lands in another row: scalar
    16-bit stores a column apart, every lane of a warp in one bank group (attention backward
    32x32x64 bf16 sm_80: 57,344 bank conflicts, NVIDIA's 0).  Stored N x K they are vector
    stores along the rows, and ``ldmatrix`` without ``.trans`` reads the fragments."""
    b = tas.operand_layout(op, 1)
    if form.bits != 16 or form.kind or op.rhs.type.rank != 2 or b is None or not b.bases(REG):
        return False
    return b.bases(REG)[0] == (1, 0)


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
    loop = parent if isinstance(op, CF.YieldOp) else enclosing_loop(op) if isinstance(op, CF.ContinueOp) else None
    if isinstance(loop, CF.ForOp):
        carried = iter_args(loop)
        for i, v in enumerate(op.operands):     # into the layouts the loop carries
            if is_tile(v):
                _want(tas, op, i, tas.layouts[carried[i]])
        return
    _to_canonical(tas, op)


@layout_rule(CF.LoopOp, CF.IfOp)
def _region_op(tas: TileAS, op: Operation) -> None:
    _to_canonical(tas, op)
    _canonical_results(tas, op)


#: what layout assignment records, saved and restored around a loop assigned twice
_ASSIGNED = ("layouts", "converts", "recomputed", "recompute_converts", "scratch", "picks", "wgmma_staging",
             "tensor_cores")


@layout_rule(CF.ForOp)
def _for(tas: TileAS, op: Operation) -> None:
    """A ``for`` carries its tiles in their canonical layouts, unless the body makes a
    carried tile in another layout its initial value can be made in too (a constant or a
    broadcast: ``recompute_plan``): a block of rows' running max and sum (an online
    softmax or logsumexp), which the body's reductions make in their rows' slice layout.
    The loop is then assigned again carrying that layout, and the second assignment is kept
    where it leaves fewer conversions through shared memory in the body (the first
    converted the running values to the canonical layout and back every trip: cross
    entropy over four rows, three exchanges a trip)."""
    before = {name: dict(getattr(tas, name)) for name in _ASSIGNED}
    _carry(tas, op, {})
    inner = list(op.walk())         # in program order: ties between layouts break the same way each run
    made_inside = [r for o in inner for r in o.results if r in tas.layouts]
    wanted: dict[int, LinearLayout] = {}
    for k, (init, carried) in enumerate(zip(op.initValues, iter_args(op))):
        if not is_tile(carried) or carried.type.rank == 0:
            continue
        made = Counter(tas.layouts[r] for r in made_inside
                       if r.type == carried.type and tas.layouts[r] != tas.layouts[carried])
        for layout, _count in made.most_common(1):
            if recompute_plan(tas, init, layout, op.parent) is not None:
                wanted[k] = layout
    if not wanted:
        return
    first = {name: dict(getattr(tas, name)) for name in _ASSIGNED}
    ops = set(inner)
    exchanges = _exchanges(tas, ops)
    _restore(tas, before)
    _carry(tas, op, wanted)
    if _exchanges(tas, ops) >= exchanges:
        _restore(tas, first)


def _restore(tas: TileAS, saved: dict[str, dict]) -> None:
    for name, table in saved.items():
        current = getattr(tas, name)
        current.clear()
        current.update(table)


def _carry(tas: TileAS, op: CF.ForOp, wanted: dict[int, LinearLayout]) -> None:
    """Assign ``op`` carrying tile ``i`` in ``wanted[i]``, the others canonical."""
    body = op.regions[0].blocks[0]
    first_init = len(op.operands) - len(op.initValues)
    for i, v in enumerate(op.operands):
        if is_tile(v):
            k = i - first_init
            _want(tas, op, i, wanted[k] if k in wanted else tas.canonical_type(v.type))
    for k, (r, carried) in enumerate(zip(op.results, iter_args(op))):
        if is_tile(r):
            tas.layouts[r] = tas.layouts[carried] = wanted.get(k, tas.canonical_type(r.type))
    induction = body.args[0]
    if is_tile(induction):
        tas.layouts[induction] = tas.canonical_type(induction.type)
    assign_block(tas, body)


def _exchanges(tas: TileAS, ops: set[Operation]) -> int:
    """Conversions through shared memory (not computed again) of the operands of ``ops``."""
    return sum(1 for use in tas.converts if use[0] in ops and use not in tas.recomputed)


for _cls in ops_with(Elementwise):
    _RULES.setdefault(_cls, _elementwise)
