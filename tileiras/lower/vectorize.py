"""How wide each global access of a view may be, from what the bytecode proves.

Framework tensors are 16-byte aligned, and cuTile says so: ``assume div_by<16>`` on base
pointers, strides and shapes (TileAA's facts).  A thread may then move ``v`` consecutive
elements of a tile's last dim in one ``ld/st.global.v{2,4}`` (up to 16 bytes) when

* a tile dim maps to a tensor dim of stride 1 (consecutive in memory): the last one, or
  another in a Fortran-order view (``dim_map`` puts the contiguous tensor dim elsewhere),
  whose layouts then hold runs along that dim (``access_dim``);
* every such ``v``-run starts on a ``v * element`` byte boundary: the base pointer's
  divisor, every other dim's stride and the tile's start along the run's dim (index times
  the tile size, or the traversal step) are all multiples of ``v`` elements;
* a run is wholly in or wholly out of the tensor: the extent of the run's dim is a
  multiple of ``v``, so one bounds test covers the run and masking stays exact.

Loads and stores through tiles of pointers (``load_ptr_tko``, ``store_ptr_tko``: Triton-style
``base + offsets`` tiles, cuTile's gathers and scatters) are vectorized along their last dim
where ``axisinfo`` proves runs of consecutive addresses whose first is aligned to the run,
and the mask (and a load's padding) equal over each run (``pointer_vector``).

Two decisions, made once and recorded on ``TileAS``:

* ``allowed_vectors`` (before layouts): the widest run each access allows.  Layouts give
  tiles of that shape ``v`` consecutive elements of the run's dim a thread
  (``TileAS.access_vector``, ``access_dim``), as Triton's blocked layouts take
  ``sizePerThread`` and their dim order from contiguity.
* ``plan_vectors`` (after layouts): the width each access is emitted with, no more than the
  run of consecutive registers its layout really gives a thread.  Codegen only reads it.
"""
from __future__ import annotations

from typing import Optional

from ..ir import types as T
from ..ir.core import Operation, Value
from ..layout.linear import REG, LinearLayout
from ..record import record
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.traits import is_plain_load, is_plain_store
from . import axisinfo
from .axisinfo import AxisInfo, access_element_bytes, pow2_floor
from .subbyte import is_subbyte, unit_dim
from .tiles import dynamic_operands
from .tileaa import TileAA, pow2_divisor

#: The widest access a thread makes: 16 bytes (``.v4.b32``, ``.v2.b64``).
MAX_ACCESS_BYTES = 16
#: Bytes the GPU moves global memory in (``TileAS.blocked``'s lanes cover whole ones).
SECTOR_BYTES = 32



def is_view_access(op: Operation) -> bool:
    """A plain load or store of a view's tile (``load_view_tko``, ``store_view_tko``)."""
    return (is_plain_load(op) or is_plain_store(op)) and hasattr(op, "view")


def _tensor_view_op(view: Value) -> Optional[Operation]:
    maker = view.owner if not view.is_block_argument else None
    if not isinstance(maker, (MEM.MakePartitionViewOp, MEM.MakeStridedViewOp, MEM.MakeGatherScatterViewOp)):
        return None
    tv = maker.tensor_view
    owner = tv.owner if not tv.is_block_argument else None
    return owner if isinstance(owner, MEM.MakeTensorViewOp) else None


def _divisor(aa: TileAA, static: int, operand: Optional[Value]) -> int:
    """A power of two dividing a shape or stride (elements)."""
    return pow2_divisor(static) if operand is None else aa.fact(operand).divisor


def allowed_vector(aa: TileAA, op: Operation) -> int:
    """Elements of the last tile dim one access of ``op`` may move per thread (1: scalar).
    A gather/scatter view's runs lie along its contiguous dense dim, whose index is an
    element offset (its facts' divisor, where a partition view's is the tile size or the
    traversal step), every other stride (the gathered dim's included) a multiple of the
    run: each gathered row's run is then aligned, and in or out of the tensor as a whole."""
    view_t = op.view.type
    gather = isinstance(view_t, T.GatherScatterViewType)
    if not isinstance(view_t, (T.PartitionViewType, T.StridedViewType, T.GatherScatterViewType)):
        return 1
    tv_op = _tensor_view_op(op.view)
    tvt = view_t.tensor_view
    eb = access_element_bytes(tvt.element)
    if tv_op is None or eb is None or not view_t.tile_shape:
        return 1
    k = unit_dim(view_t)
    if k is None:
        return 1
    unit = k if gather else view_t.dim_map[k]
    shapes = dynamic_operands(tvt.shape, tv_op.dynamicShape)
    strides = dynamic_operands(tvt.strides, tv_op.dynamicStrides)
    if gather:
        start = aa.fact(op.index[k]).divisor
    else:
        start = pow2_divisor(view_t.traversal_strides[k] if isinstance(view_t, T.StridedViewType)
                             else view_t.tile_shape[k])
    v = MAX_ACCESS_BYTES // eb
    v = min(v, pow2_divisor(view_t.tile_shape[k]), start)
    v = min(v, max(1, aa.fact(tv_op.base).divisor // eb))
    v = min(v, _divisor(aa, tvt.shape[unit], shapes[unit]))
    for d, stride in enumerate(tvt.strides):
        if d != unit:
            v = min(v, _divisor(aa, stride, strides[d]))
    return max(1, v)


def access_dim(op: Operation) -> int:
    """The tile dim a view access's runs lie along: the one contiguous in memory (the
    last, unless a Fortran-order view's ``dim_map`` puts the unit stride elsewhere); for a
    pointer tile's access, its last dim (``pointer_vector``)."""
    if is_pointer_access(op):
        return op.operands[0].type.rank - 1
    k = unit_dim(op.view.type)
    return len(op.view.type.tile_shape) - 1 if k is None else k


def is_pointer_access(op: Operation) -> bool:
    """A plain load or store through a tile of pointers (``load_ptr_tko``, ``store_ptr_tko``)."""
    return isinstance(op, (MEM.LoadPtrTkoOp, MEM.StorePtrTkoOp)) and (is_plain_load(op) or is_plain_store(op))


def pointer_vector(info: dict[Value, AxisInfo], op: Operation) -> int:
    """Elements of the last dim one access of the pointer-tile load or store ``op`` may move
    per thread: runs of consecutive addresses (``axisinfo``) whose first is that many
    elements aligned, its mask (and a load's padding) equal over each run, at most 16 bytes.
    A gather of rows whose columns are contiguous (gather_scatter's ``rows * 4 + iota(4)``
    over a 16-byte aligned base: 16-byte accesses, NVIDIA's 8), a Triton-style
    ``base + offsets`` tile."""
    ptrs = op.operands[0]
    if not isinstance(ptrs.type, T.TileType) or ptrs.type.rank == 0 or ptrs not in info:
        return 1
    eb = access_element_bytes(ptrs.type.element.pointee)
    if eb is None:
        return 1
    d = ptrs.type.rank - 1
    p = info[ptrs]
    v = min(MAX_ACCESS_BYTES // eb, pow2_floor(p.contiguity[d]), max(1, p.divisibility[d] // eb),
            pow2_divisor(ptrs.type.shape[d]))
    others = [op.mask, getattr(op, "paddingValue", None)]
    for other in others:
        if other is not None:
            known = info.get(other)
            v = min(v, pow2_floor(known.constancy[d]) if known is not None else 1)
    return max(1, v)


def allowed_vectors(aa: TileAA) -> dict[Operation, int]:
    """``allowed_vector`` of every live view load and store that may be vectorized, and of
    atomic view reductions: one that goes through TMA writes its staging buffer in runs
    this long (``emit_tma``); the others update element by element whatever it says.
    ``pointer_vector`` of every load and store through a tile of pointers."""
    out = {}
    info = None
    for op in aa.live_ops():
        if is_view_access(op) or isinstance(op, MEM.AtomicRedViewTkoOp):
            v = allowed_vector(aa, op)
        elif is_pointer_access(op):
            info = axisinfo.analyze(aa) if info is None else info
            v = pointer_vector(info, op)
        else:
            continue
        if v > 1:
            out[op] = v
    return out


@record(frozen=True)
class Run:
    """Consecutive ``elements`` along tile dim ``dim`` that a thread holds at a time.
    ``across``: a thread's further elements lie along the other dims (the lanes cover
    ``dim`` first), for tiles reduced along another dim: each thread then meets as few
    columns as one run, whose partial results it folds in registers
    (``TileAS.canonical``).  ``loose``: an access's start along ``dim`` is not known to lie
    on a 32-byte sector (a gather view's dense offset, ``_loose``): the lanes then cover
    128-byte stretches of a row, which straddle five sectors at worst, not 32-byte ones,
    which straddle two (adv_indexing's gathered rows: 6.25 sectors a request, NVIDIA's 4-5)."""

    dim: int
    elements: int
    across: bool = False
    loose: bool = False


def shape_vectors(aa: TileAA, allowed: dict[Operation, int]) -> dict[tuple[int, ...], Run]:
    """Per tile shape, the run every global view access of that shape allows (the least of
    them, along the dim they share): the layouts of that shape give threads runs this
    long.  A shape with one access that must stay scalar keeps scalar layouts (a run longer
    than the access would make each warp instruction stride over memory).  Where accesses
    of one shape are contiguous along different dims (a Fortran-order view loaded, a
    row-major one stored), the first one's runs stay: the others take layouts of their own
    (``access_layout``), converted through shared memory as NVIDIA's transposes are.  The shape without its unit dims takes the same run where no access says
    otherwise: a 1x256 row loaded and reshaped to 256 (loop_accumulate's running sums)
    keeps one layout instead of being loaded again in a scalar one."""
    reductions = [u for u in aa.live_ops() if isinstance(u, CO.ReduceOp)]
    out: dict[tuple[int, ...], Run] = {}
    paired: set[tuple[int, ...]] = set()       # shapes of sub-byte accesses (``subbyte``'s pairs)
    for op in aa.live_ops():
        if is_pointer_access(op):
            shape = tuple(op.operands[0].type.shape) or None
        elif is_view_access(op):
            shape = tuple(op.view.type.tile_shape) if hasattr(op.view.type, "tile_shape") else None
        else:
            continue
        if shape is None:
            continue
        if is_subbyte(op.results[0].type if is_plain_load(op) else op.operands[0].type):
            paired.add(shape)
        run = Run(access_dim(op), allowed.get(op, 1), _feeds_column_reductions(reductions, op),
                  _loose(aa, op, allowed.get(op, 1)))
        seen = out.get(shape)
        if seen is not None and seen.dim == run.dim:
            run = Run(seen.dim, min(seen.elements, run.elements), seen.across or run.across,
                      seen.loose or run.loose)
        elif seen is not None:      # another order: the first access's runs stay
            run = seen
        out[shape] = run
    for shape, run in list(out.items()):
        squeezed = tuple(d for d in shape if d != 1)
        if squeezed != shape and squeezed and squeezed not in out:
            out[squeezed] = Run(run.dim - shape[:run.dim].count(1), run.elements, run.across, run.loose)
            if shape in paired:
                paired.add(squeezed)
    # a scalar access along another dim than the last keeps its order: lanes cover the
    # contiguous dim first (a Fortran-order view's tile dim 0), as for wider runs
    return {shape: run for shape, run in out.items()
            if run.elements > 1 or run.loose or (run.dim != len(shape) - 1 and shape not in paired)}


def _loose(aa: TileAA, op: Operation, allowed: int) -> bool:
    """Is ``op`` a gather view's access whose dense start (an element offset) is not known
    to lie on a sector, nor its runs to fill one (``Run.loose``)?"""
    view_t = getattr(op, "view", None)
    if view_t is None or not isinstance(view_t.type, T.GatherScatterViewType):
        return False
    eb = access_element_bytes(view_t.type.tensor_view.element)
    k = unit_dim(view_t.type)
    if eb is None or k is None or allowed * eb >= SECTOR_BYTES:
        return False
    return aa.fact(op.index[k]).divisor * eb < SECTOR_BYTES


def run_dim(runs: dict[tuple[int, ...], Run], shape: tuple[int, ...]) -> int:
    """The tile dim whose elements a thread holds consecutively in tiles of ``shape``
    (``shape_vectors``): the last one unless a Fortran-order view's runs lie elsewhere."""
    run = runs.get(tuple(shape))
    return len(shape) - 1 if run is None else run.dim


def _feeds_column_reductions(reductions: list[Operation], op: Operation) -> bool:
    """A load whose tile is reduced along a dim other than its last: its shape's layouts
    take runs ``across`` (one run of columns a thread, lanes over the row, then rows), as
    NVIDIA's do (reduce_cols_multi f32 32x32: 4 columns by 2 rows a thread, 16-byte
    loads).  A coalescing layout that also puts a thread's further registers along the row
    gives each thread twice the columns' partial results (43 -> 78 registers there)."""
    if not isinstance(op, MEM.LoadViewTkoOp):
        return False
    tile = op.results[0]
    rank = len(tile.type.shape)
    return any(tile in u.operands and u.dim != rank - 1 for u in reductions)


def register_run(layout: LinearLayout, dim: Optional[int] = None) -> int:
    """How many consecutive elements of ``dim`` (the last by default) a thread holds in
    consecutive registers, aligned to that many (the layout's ``largest_vectorization``
    along it)."""
    if layout.rank == 0:
        return 1
    return layout.largest_vectorization(layout.rank - 1 if dim is None else dim, layout.size(REG))


def access_layout(tas, op: Operation) -> Optional[LinearLayout]:
    """The layout a view access moves its allowed run in when its shape's layouts hold
    their runs along another dim (``shape_vectors``: mixed orders), else None."""
    allowed, tile = tas.access_allowed.get(op, 1), op.tile if isinstance(op, MEM.StoreViewTkoOp) else op.results[0]
    dim, shape = access_dim(op), tuple(tile.type.shape)
    if allowed < 2 or tile.type.rank < 2 or run_dim(tas.shape_access, shape) == dim:
        return None
    return tas.canonical(shape, min_vector=allowed, nbytes=access_element_bytes(tile.type.element) or 4, dim=dim)


#: Bytes a thread's store moves at most (``st.global.v4.b32``).
WIDEST_ACCESS = 16


def store_relayout(tas, op: Operation) -> Optional[LinearLayout]:
    """The layout a view store's tile changes to (through shared memory) so that its
    accesses move the run the facts allow: the canonical layout of its shape, where the
    tile's own layout gives a thread no run along the store's contiguous dim (a permuted
    tile's, a transpose) and the canonical one does, or, before TMA stores exist (sm_8x),
    where a tensor-core accumulator's pairs would be stored a few bytes at a time and the
    canonical layout stores 16.  NVIDIA's tool converts such tiles too (transpose2d f32
    64x64; the sm_80 GEMM epilogues, gemm_basic f16 128x128x32: 16 ``st.global.v4`` a thread
    after a shared-memory exchange, against 64 4-byte stores of the fragments); None where
    the tile stays as it is."""
    if not isinstance(op, MEM.StoreViewTkoOp) or tas.access_allowed.get(op, 1) < 2:
        return None
    layout, dim = tas.layouts.get(op.tile), access_dim(op)
    if layout is None or op.tile.type.rank < 2:
        return None
    run = register_run(layout, dim)
    if run > 1:
        nbytes = access_element_bytes(op.tile.type.element) or 4
        if not _accumulator_store(tas, op, layout, run * nbytes):
            return None
        target = tas.blocked(tuple(op.tile.type.shape), WIDEST_ACCESS // nbytes, nbytes, dim)
    else:
        target = access_layout(tas, op) or tas.canonical_of(op.tile)
    return target if register_run(target, dim) > run else None


def _accumulator_store(tas, op: Operation, layout: LinearLayout, run_bytes: int) -> bool:
    """Is ``op`` a store of a tensor-core accumulator layout's pairs (``run_bytes`` a thread
    at a time) narrower than 16 bytes, on an architecture without TMA stores (which take such
    tiles by ``stmatrix``), whose exchange (the whole tile, through the scratch region) takes
    at most half the CTA's shared memory?
    The layout is the multiply's own, perhaps with unit dims (flash attention's output,
    reshaped to a rank-3 view: NVIDIA's tool exchanges it too, 16-byte stores where the
    fragments stored 4 bytes, 1.17x its DRAM sectors; its exchange takes 8 KB of scratch,
    and NVIDIA's kernel 48 KB of shared memory to our 40)."""
    from ..target import smem_limit
    from .tma import MIN_ARCH

    nbytes = access_element_bytes(op.tile.type.element) or 4
    tile_bytes = op.tile.type.num_elements * nbytes
    squeezed = [d for d in op.tile.type.shape if d != 1]
    own = layout if len(squeezed) == layout.rank else layout.reshape(squeezed)
    return (0 < tas.arch < MIN_ARCH and run_bytes < WIDEST_ACCESS
            and tas.access_allowed.get(op, 1) * nbytes >= WIDEST_ACCESS and own in tas.mma_layouts.values()
            and 2 * tile_bytes <= smem_limit(f"sm_{tas.arch}"))


def plan_vectors(tas) -> dict[Operation, int]:
    """The width each view access is emitted with: its allowed run, no more than its
    layout gives a thread (per chunk, for an op in a chunked loop)."""
    from .chunks import chunk_layout_of

    out = {}
    for op, allowed in tas.access_allowed.items():
        if isinstance(op, (MEM.LoadViewTkoOp, MEM.LoadPtrTkoOp)):
            layout = tas.layouts.get(op.results[0])
        elif isinstance(op, MEM.AtomicRedViewTkoOp):
            layout = tas.operand_layout(op, 1 + len(op.index))   # the value, after the indices
        else:
            layout = tas.operand_layout(op, 0)
        if layout is None:
            continue
        if op in tas.chunked:
            layout = chunk_layout_of(layout, tas.chunked[op].regs)
        v = min(allowed, register_run(layout, access_dim(op)))
        if v > 1:
            out[op] = v
    return out
