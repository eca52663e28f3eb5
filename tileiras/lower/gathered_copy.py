"""Gathered operands of a ``cp.async`` ring: a pointer-tile load copied iterations early.

A mixture-of-experts GEMM multiplies rows gathered from the activations (token ids sorted
by expert) by its expert's weights.  cuTile writes the gather as a tile of pointers: the
block's row ids times the row stride, plus ``k * BK + iota(BK)`` for the columns, masked
where a row or column leaves the tensor, loaded with ``load_ptr_tko``.  The rows differ,
but each row's columns are contiguous and 16-byte aligned (``vectorize.pointer_vector``),
so ``cp.async`` copies them 16 bytes at a time like a view's tile; NVIDIA's tileiras
pipelines such a loop so (``cp.async.ca`` of the gathered rows, ``ldmatrix`` from the
stages, 8 ``ld.global`` of the row ids once before the loop).

To copy iteration ``i + S - 1``'s tile while iteration ``i`` multiplies, the ring computes
that iteration's pointers and mask itself, in its copy layout (``AddressSlice``):

* ``inner``: the loop body's ops that make them (the column offsets from the induction
  variable), emitted again for each copy with the iteration's value in place of the
  induction variable;
* ``hoisted``: tiles made before the loop that they start from (the row offsets, the
  base pointer's broadcast, the rows' mask), computed once more before the loop in the
  copy layout: recomputable ops and loads that may run again (``layout_rules.reloadable``:
  the row ids are reloaded, as NVIDIA's tool does, not exchanged through shared memory).

Outside tiles already in the wanted layout are used as they are; scalars every thread
holds.  The body's own address ops are then not emitted (``emission_order.reads``).

The same slices make a view load's index where the body computes it (``index_slice``,
recorded in ``TileAS.index_slices``): decode attention over a paged KV cache picks each
trip's page id from the block table's row by the trip number (an ``extract`` that
``layout_rules.extract_by_shuffle`` does in registers), and the attention ring's copies
pick the id of the iteration they copy."""
from __future__ import annotations

from typing import Optional, Union

from ..ir.attrs import DenseElementsAttr
from ..ir.core import Operation, Value
from ..layout.linear import LinearLayout
from ..record import field, record
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.enums import MemoryOrderingSemantics
from ..tile.traits import is_pure, is_recomputable
from .tiles import is_tile

#: the most ops the address computation of one copy may take (inner and hoisted each)
MAX_ADDRESS_OPS = 32


@record(frozen=True)
class AddressSlice:
    """How a pipelined pointer-tile load's pointers, mask and padding are made for any
    iteration in the ring's copy layout (module docstring): ``inner`` and ``hoisted``
    give each value the layout it is computed in, producers first."""

    inner: dict[Value, LinearLayout] = field(default_factory=dict, hash=False)
    hoisted: dict[Value, LinearLayout] = field(default_factory=dict, hash=False)

    @property
    def inner_ops(self) -> list[Operation]:
        return list(dict.fromkeys(v.owner for v in self.inner))

    @property
    def hoisted_ops(self) -> list[Operation]:
        return list(dict.fromkeys(v.owner for v in self.hoisted))


def gathered_load_reason(tas, ld: Operation, consumer: Operation) -> Optional[str]:
    """Why the pointer-tile load ``ld`` cannot become ``cp.async`` copies (before its
    addresses are looked at: ``address_slice``), or None."""
    if ld.attributes.get("memory_ordering_semantics", MemoryOrderingSemantics.WEAK) != MemoryOrderingSemantics.WEAK:
        return "a load is ordered"
    if ld.results[0].type.rank != 2:
        return "a gathered tile is not a matrix"
    if ld.paddingValue is not None and not zero_fill(ld.paddingValue):
        return "a gather pads with other than zeros (cp.async fills only zeros)"
    if any(u is not consumer for u in tas.users(ld.results[0])):
        return "a loaded tile has users besides the multiply"
    return None


def zero_fill(v: Value) -> bool:
    """Is ``v`` a constant tile of zero bits (a broadcast or reshape of one)?"""
    while isinstance(v.owner, (CO.BroadcastOp, CO.ReshapeOp)):
        v = v.owner.source
    op = v.owner
    return (isinstance(op, CO.ConstantOp) and isinstance(op.value, DenseElementsAttr)
            and isinstance(op.value.data, bytes) and not any(op.value.data))


def address_ops(tas, body: list[Operation], ld: Operation) -> set[Operation]:
    """The pure ops of ``body`` that only compute ``ld``'s operands: all their users are
    such ops or ``ld``."""
    found: set[Operation] = set()
    changed = True
    candidates = [op for op in body if is_pure(op) and not op.regions and op is not ld]
    while changed:
        changed = False
        for op in candidates:
            if op in found:
                continue
            users = [u for r in op.results for u in tas.users(r)]
            if users and all(u is ld or u in found for u in users):
                found.add(op)
                changed = True
    return found


def address_slice(tas, loop: CF.ForOp, ld: Operation, layout: LinearLayout) -> Union[str, AddressSlice]:
    """The ``AddressSlice`` that makes ``ld``'s pointers and mask in ``layout`` for any
    iteration of ``loop``, or why there is none (its padding is zeros, which the copies
    fill)."""
    return _slice(tas, loop, [(v, layout) for v in (ld.source, ld.mask) if v is not None])


def index_slice(tas, loop: CF.ForOp, ld: Operation) -> Union[str, AddressSlice, None]:
    """The ``AddressSlice`` that makes the view load ``ld``'s indices for any iteration of
    ``loop`` where the body computes one from the induction variable (paged attention's
    page id, ``extract``ed from a block table row by the trip number), or why there is
    none; None where every index is the induction variable or made before the loop."""
    iv = loop.regions[0].blocks[0].args[0]
    inside = {id(op) for op in loop.walk()}
    computed = [v for v in ld.index if v is not iv and not v.is_block_argument and id(v.owner) in inside]
    if any(v.is_block_argument and v is not iv and _in_loop_block(v, loop) for v in ld.index):
        return "a load's index is a value the loop carries"
    if not computed:
        return None
    if any(v not in tas.layouts for v in computed):     # asked before layouts (tensor_memory)
        return UNLAID
    return _slice(tas, loop, [(v, tas.layouts[v]) for v in computed])


#: why no slice is planned before TileAS has chosen layouts (a shuffled extract's among
#: them): the forms chosen then (tcgen05's) take no computed index
UNLAID = "the layouts its computation needs are not chosen yet"


def record_index_slices(tas, loop: CF.ForOp, loads) -> None:
    """``TileAS.index_slices`` of the ring's ``loads`` whose index the body computes."""
    for ld in loads:
        indices = index_slice(tas, loop, ld)
        if indices is not None:
            tas.index_slices[ld] = indices


def _in_loop_block(v: Value, loop: CF.ForOp) -> bool:
    return any(v.owner is blk for op in loop.walk() for r in op.regions for blk in r.blocks)


def _slice(tas, loop: CF.ForOp, roots: list[tuple[Value, LinearLayout]]) -> Union[str, AddressSlice]:
    """The ops that make each root in its layout for any iteration (module docstring)."""
    from .layout_rules import extract_by_shuffle, operand_layout_for, reloadable  # noqa: PLC0415  (it imports lower modules)

    block = loop.regions[0].blocks[0]
    iv = block.args[0]
    inside = {id(op) for op in loop.walk()}
    inner_blocks = {id(blk) for op in loop.walk() for r in op.regions for blk in r.blocks}
    inner: dict[Value, LinearLayout] = {}
    hoisted: dict[Value, LinearLayout] = {}

    def visit(u: Value, want: LinearLayout) -> Optional[str]:
        if u is iv or not is_tile(u):
            return None
        if u.is_block_argument:     # the loop's carried values change; an outer loop's stay
            if not inner_blocks.isdisjoint({id(u.owner)}) or (u.type.rank and tas.layouts.get(u) != want):
                return "a copy's address depends on a value a loop carries"
            return None
        in_loop = id(u.owner) in inside
        if u.type.rank == 0:
            if not in_loop:
                return None
            if u not in tas.layouts:
                return UNLAID
            want = tas.layouts[u]
        elif not in_loop and tas.layouts.get(u) == want:
            return None
        table = inner if in_loop else hoisted
        if u in table:
            return None if table[u] == want else "a copy's address needs a tile in two layouts"
        op = u.owner
        if isinstance(op, (MEM.LoadViewTkoOp, MEM.LoadPtrTkoOp)):
            if in_loop or not reloadable(tas, op, op.parent):
                return "a copy's address is loaded in a way that cannot run again"
        elif isinstance(op, CO.ExtractOp) and op not in tas.picks:
            if op.source not in tas.layouts:
                return UNLAID
            if not extract_by_shuffle(tas.layouts[op.source], op.source.type):
                return "a copy's address is extracted from a tile through shared memory"
        elif not is_recomputable(op):
            return f"a copy's address is made by '{op.name}', which is not computed again"
        for k, w in enumerate(op.operands):
            # an extract reads its source in its own layout (shuffled: ``extract_by_shuffle``)
            inner_want = tas.layouts.get(w) if isinstance(op, CO.ExtractOp) else operand_layout_for(op, k, want)
            reason = visit(w, inner_want)
            if reason:
                return reason
        table[u] = want
        if len(table) > MAX_ADDRESS_OPS:
            return "a copy's address takes too many ops to compute again"
        return None

    for v, layout in roots:
        reason = visit(v, layout)
        if reason:
            return reason
    return AddressSlice(inner, hoisted)
