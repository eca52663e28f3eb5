"""Which view loads and stores go through TMA on sm_90 and newer, decided once (``plan_tma``).

NVIDIA's tileiras loads partition views of framework tensors (``assume div_by<16>`` on the base
pointer and strides) with ``cp.async.bulk.tensor``: a hidden 128-byte tensor map parameter per
view, filled at launch by the ``.nv.host`` callback from the user's arguments, one elected
thread copying the tile into shared memory and an mbarrier telling the others when it landed;
out-of-bounds elements arrive as zeros.  A load goes through TMA here when

* the target is sm_90+, and the load's ``allow_tma`` hint (default, then the target's) is
  not false;
* the view is a partition view with the tensor's dims in order (``dim_map`` the identity) and
  zero (or no) padding: TMA fills zeros only (NVIDIA loads NaN/inf-padded views directly);
* the load is weak, its indices are scalars, its tile is not held in byte pairs nor chunked
  (and so for stores);
* the tensor view is made from entry arguments (through ``assume``) or constants: the host
  callback reads base, shape and strides from the parameter buffer;
* TMA's constraints hold by the facts: 16-byte aligned base, byte strides multiples of 16,
  unit last stride, the box's inner row at least 16 bytes and a multiple of 16 (the box is
  the tile, at most 256 elements a dim: wider tiles take several copies), rank 1-5;
* its staging buffer fits (``MAX_STAGING_BYTES`` for all TMA buffers of a kernel);
* what the tile feeds goes through shared memory anyway (``feeds_staging``: a reduction, a
  matrix multiply, an atomic or a print, directly or through other ops, not through a
  loop's yield): NVIDIA's tool loads tiles that only feed element-wise code and stores
  directly, and so do we (measured on corpus-aligned sm_90: without this rule 56 kernels
  NVIDIA loads directly went through TMA here, element-wise ones and scans among them);
  or, in a kernel that has such an op, the load streams a loop of non-constant trips (at
  the loop's induction variable, ``streamed_in_dynamic_loop``): NVIDIA's producer warp
  TMA-loads those whatever they feed (TileGym's chunked norms), and
  ``tma_stream.record_tma_streams`` issues them trips ahead.

A view store goes through TMA (a bulk tensor store from a staging buffer, ``emit_tma``) on
the same terms, padding aside (stores do not pad; TMA clips what falls outside the tensor),
when the kernel has a ``STAGING_USERS`` op (it takes shared memory anyway: NVIDIA's tool
bulk-stores only in such kernels of corpus-aligned sm_90) and nothing is ordered after
the store by its token: the copy is waited on only until it has read shared memory, as
NVIDIA's is, so a later access of the same memory could see it unwritten.  Nothing but
other view stores that go through TMA too (``stores_after``): a persistent GEMM's store of
each output tile, whose token cuTile threads through the loop over tiles (and a persistent
grouped GEMM's, through each group's loop to the next group's), is a bulk store as NVIDIA's
is, each later one waiting for the writes before it stages (``TmaPlan.carried``); such
stores share one staging buffer (``_shared_staging``).

An atomic reduction into a view's tile (``atomic_red_view``) goes through TMA as a bulk
tensor reduction (``cp.reduce.async.bulk.tensor``, staged as a store is), as NVIDIA's tool
reduces atomic_tile_reduce's tiles on sm_90, when its mode and element have a bulk form
(``BULK_REDUCTIONS``: float adds, integer adds, min/max and bitwise ops on 32-bit words),
it is relaxed at device or block scope (the copy's element updates are relaxed atomics at
gpu scope), and only other atomic reductions are ordered after it by its token: they
commute with it, anything else could observe the copy unfinished.  A signed min/max
reads its map as signed 32-bit integers (a map of its own when a load of the view reads
them unsigned).

Shared memory: the scratch region every other user shares comes first; each TMA load gets
its own buffer after it (128-byte aligned, the boxes one after another, each row-major), so
does each TMA store, then one 8-byte mbarrier per load.  Boxes of two or more rows of
exactly 128 bytes are 128-byte swizzled (``swizzle_of``; the buffer then 1024-byte aligned,
as the swizzle's pattern repeats every 8 rows): the 16-byte chunk of row r at position c is
stored at c ^ (r mod 8), so the threads of a warp reading 16 bytes each from 8 rows (the
sector-blocked layouts of 32-wide f32 tiles) hit every bank alike instead of 4 rows' worth
of conflicts (atomic_tile_reduce f32 32x32 sm_90: 896 bank conflicts without).

A store of 16- or 32-bit elements is staged in boxes one swizzle row wide (``store_box``:
128, 64 or 32 bytes, the widest dividing the tile's row; the map swizzled alike), as
NVIDIA's sm_90 epilogues are; where its tile's register layout is the m8n8 fragment (an mma or wgmma
accumulator), it goes there with ``stmatrix`` (``plan_matrix_stores``, once the plans are
final): one instruction per four 8x8 blocks, conflict-free in the swizzled rows.
"""
from __future__ import annotations

from typing import Optional, Union

from ..ir import attrs as A
from ..ir import types as T
from ..ir.core import Operation, Value
from ..knobs import knobs
from ..record import record
from ..sched.ddg import known_trips
from ..target import smem_limit
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.enums import AtomicRMWMode, MemoryOrderingSemantics, MemoryScope
from ..layout.tensor_core import StmatrixForm, stmatrix_form
from .tileaa import TileAA, pow2_divisor
from .tiles import carried_to, dynamic_operands, iter_args

MIN_ARCH = 90
MAX_RANK = 5
MAX_BOX = 256
#: TMA's global address and byte-stride granule, and the smallest inner box row
GRANULE = 16
STAGING_ALIGN = 128
#: the map's swizzle code for 128-byte rows (``codegen.tensormap.Swizzle.B128``), the bytes
#: of its row, and the alignment its pattern needs
SWIZZLE_128B = 3
SWIZZLE_SPAN = 128
SWIZZLED_ALIGN = 1024
#: the map's swizzle code per swizzle width in bytes (``codegen.tensormap.Swizzle``)
SWIZZLE_CODES = {32: 1, 64: 2, 128: SWIZZLE_128B}
BARRIER_BYTES = 8
#: shared memory all TMA staging buffers of a kernel may take
MAX_STAGING_BYTES = 96 * 1024

#: element type codes of the map (``codegen.tensormap.ElementType``) per Tile IR element
MAP_TYPES = {"i8": 0, "f8E4M3FN": 0, "f8E5M2": 0, "f8E8M0FNU": 0, "i16": 1, "i32": 2, "i64": 4,
              "f16": 6, "f32": 7, "f64": 9, "bf16": 10}
#: the map code of signed 32-bit integers, which bulk min/max compare as signed
_S32 = 3

#: (atomic mode, element) -> (the bulk tensor reduction's PTX op, the map's element code)
#: for the reductions ``cp.reduce.async.bulk.tensor`` has (PTX ISA: add of f32/f16/bf16,
#: u32/s32 and u64; min/max of u32/s32; and/or/xor of 32- and 64-bit words)
_M = AtomicRMWMode
BULK_REDUCTIONS = {
    **{(_M.ADDF, e): ("add", MAP_TYPES[e]) for e in ("f32", "f16", "bf16")},
    (_M.ADD, "i32"): ("add", MAP_TYPES["i32"]), (_M.ADD, "i64"): ("add", MAP_TYPES["i64"]),
    (_M.MAX, "i32"): ("max", _S32), (_M.MIN, "i32"): ("min", _S32),
    (_M.UMAX, "i32"): ("max", MAP_TYPES["i32"]), (_M.UMIN, "i32"): ("min", MAP_TYPES["i32"]),
    **{(m, e): (m.keyword, MAP_TYPES[e]) for m in (_M.AND, _M.OR, _M.XOR) for e in ("i32", "i64")},
}


@record(frozen=True)
class MapField:
    """Where one field of a map comes from: entry argument ``param`` (its kind,
    ``abi.param_kind``), which the host callback reads; result ``result`` of ``op``, a value
    the kernel computes (a map built on the device: ``TensorMapSpec.on_device``); else the
    constant ``value``."""

    param: Optional[int] = None
    kind: str = ""
    value: int = 0
    op: Optional[Operation] = None
    result: int = 0

    @property
    def on_device(self) -> bool:
        return self.op is not None


@record(frozen=True)
class TensorMapSpec:
    """What the host callback needs to fill one tensor map; tuples innermost dim first
    (``codegen.tensormap.TensorMap``).  ``strides`` are of dims 1.., in elements."""

    element_type: int
    element_bytes: int
    base: MapField
    dims: tuple[MapField, ...]
    strides: tuple[MapField, ...]
    box: tuple[int, ...]
    swizzle: int = 0

    @property
    def on_device(self) -> bool:
        """Does a field come from a value the kernel computes (a view made from an address
        the kernel loads, as a grouped GEMM's from its table)?  Such a map cannot be a
        hidden parameter the host callback fills: the kernel builds it in its workspace
        (``codegen.device_maps``)."""
        return any(f.on_device for f in (self.base, *self.dims, *self.strides))


@record(frozen=True)
class TmaPlan:
    """One TMA load, store or reduction: hidden map ``map_index``, ``box`` (tile order,
    outermost first), ``boxes`` copies per tile dim, staging ``buffer`` and (loads only)
    ``barrier`` (shared-memory offsets), the bytes the copies move, and a reduction's PTX
    op (``BULK_REDUCTIONS``; empty for loads and stores)."""

    map_index: int
    box: tuple[int, ...]
    boxes: tuple[int, ...]
    buffer: int
    barrier: Optional[int]
    nbytes: int
    reduce: str = ""
    swizzle: int = 0      # bytes of the staging buffer's swizzle row (0: none)
    #: a store's tile goes to its staging with ``stmatrix`` (``plan_matrix_stores``)
    matrix: Optional[StmatrixForm] = None
    #: a store some TMA store's token orders it after (``stores_after``; its own next trip
    #: among them): it waits until the copies before it have written global memory before
    #: staging its tile
    carried: bool = False
    #: a store through a map the kernel builds (``TensorMapSpec.on_device``; ``map_index``
    #: -1): warp 0 builds it in the staging buffer before the tile is staged there, or
    #: once before loop ``maps_at`` (``map_home``: a store in a loop whose trips keep it)
    device_map: Optional[TensorMapSpec] = None
    maps_at: Optional[Operation] = None
    #: a load a streaming loop issues trips ahead (``tma_stream.TmaStream``): its
    #: ``stages`` buffers lie ``stage_bytes`` apart from ``buffer``, its mbarriers 8 bytes
    #: apart from ``barrier``, stage s for trips s, s + stages, ...
    stages: int = 1
    stage_bytes: int = 0
    #: the kernel's last store stages its tile in the scratch region (``last_store``)
    over_scratch: bool = False

    @property
    def is_store(self) -> bool:
        """Bulk stores complete on bulk async-groups, not on an mbarrier."""
        return self.barrier is None

    @property
    def box_elements(self) -> int:
        n = 1
        for b in self.box:
            n *= b
        return n


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def other_tma_bytes(tas, taken, slack: int = STAGING_ALIGN) -> int:
    """Shared memory the kernel's TMA buffers and mbarriers other than those of the loads
    ``taken`` (a ring's) take once ``plan_again`` places them after the ring: each staging
    buffer once, however many plans share it (the stores of one token chain, as a grouped
    GEMM's epilogues), and ``slack`` bytes for the first one's alignment."""
    buffers: dict[int, tuple[int, int]] = {}
    for op, p in tas.tma.items():
        if op not in taken and not p.over_scratch:     # (not that one: it lies in the ring)
            span = p.nbytes + p.stage_bytes * (p.stages - 1)
            buffers[p.buffer] = max(buffers.get(p.buffer, (0, 0)), (span, p.stages))
    return sum(_align(n, STAGING_ALIGN) + BARRIER_BYTES * k for n, k in buffers.values()) + slack


def allows_tma(op: Operation, gpu_name: str) -> bool:
    """The op's ``allow_tma`` hint: the ``default`` entry, overridden by the target's."""
    hints = op.attributes.get("optimization_hints")
    allowed = True
    if isinstance(hints, A.OptimizationHintsAttr):
        for key in ("default", gpu_name):
            for arch, d in hints.entries:
                if arch == key and isinstance(d, A.DictAttr):
                    for name, value in d.entries:
                        if name == "allow_tma" and isinstance(value, A.BoolAttr):
                            allowed = value.value
    return allowed


#: ops whose operand tiles go through shared memory (or one owner) in any case
STAGING_USERS = (CO.ReduceOp, AR.MmaFOp, AR.MmaIOp, AR.MmaFScaledOp, MEM.AtomicRMWTkoOp,
                 MEM.AtomicCASTkoOp, MEM.AtomicRedViewTkoOp, CF.PrintTkoOp)


def feeds_staging(users: dict[Value, list[Operation]], tile: Value) -> bool:
    """Does ``tile`` reach a ``STAGING_USERS`` op through the results of the ops using it,
    or as a loop's initial value through the body's use of it (while_break_continue's row,
    reduced in its loop every trip: NVIDIA's tool TMA-loads it), but not through
    terminators: a loop-carried sum reduced after the loop does not count?"""
    seen, todo = {tile}, [tile]
    while todo:
        v = todo.pop()
        for u in users.get(v, ()):
            if isinstance(u, STAGING_USERS):
                return True
            if isinstance(u, (CF.ForOp, CF.LoopOp)):
                inits = u.operands[3:] if isinstance(u, CF.ForOp) else u.operands    # a for's bounds first
                reached = [arg for arg, init in zip(iter_args(u), inits) if init is v]
            else:
                reached = list(u.results) if not u.regions else []
            todo += [r for r in reached if r not in seen]
            seen.update(reached)
    return False


def uses_staging(aa: TileAA) -> bool:
    """Does the kernel have a ``STAGING_USERS`` op (so it takes shared memory anyway)?"""
    return any(isinstance(op, STAGING_USERS) for op in aa.live_ops())


def users_map(aa: TileAA) -> dict[Value, list[Operation]]:
    """The ops of the function that use each value."""
    out: dict[Value, list[Operation]] = {}
    for op in aa.function.walk():
        for v in op.operands:
            out.setdefault(v, []).append(op)
    return out


def _source(v: Value) -> Value:
    while not v.is_block_argument and isinstance(v.owner, CF.AssumeOp):
        v = v.owner.value
    return v


def map_field(aa: TileAA, v: Optional[Value], static: int, device: bool = False) -> Optional[MapField]:
    """The field of a static extent or stride, or of an entry argument (through assumes);
    with ``device``, else of the op that computes it (None for other block arguments)."""
    from ..codegen.abi import param_kind

    if v is None:
        return MapField(value=static)
    src = _source(v)
    if src.is_block_argument and src.owner is aa.function.entry_block:
        return MapField(param=src.index, kind=param_kind(src.type))
    if device and not src.is_block_argument:
        return MapField(op=src.owner, result=src.index)
    return None


def swizzle_of(box: tuple[int, ...], element_bytes: int) -> int:
    """The map's swizzle code for ``box`` (tile order): 128-byte for rows of exactly 128
    bytes in a box of two or more rows, else none."""
    if len(box) >= 2 and box[-2] >= 2 and box[-1] * element_bytes == SWIZZLE_SPAN:
        return SWIZZLE_128B
    return 0


def smem_alignment(plans: dict) -> int:
    """The alignment the kernel's shared memory needs for its TMA buffers (``plans``)."""
    if any(plan.swizzle for plan in plans.values()):
        return SWIZZLED_ALIGN
    return STAGING_ALIGN if plans else 16


def view_map_spec(aa: TileAA, op: Operation, box: tuple[int, ...], code: Optional[int]) -> Optional[TensorMapSpec]:
    found = view_map(aa, op, box, code)
    return None if isinstance(found, str) else found


def view_map(aa: TileAA, op: Operation, box: tuple[int, ...], code: Optional[int], device: bool = False
             ) -> Union[TensorMapSpec, str]:
    """The tensor map of ``op``'s view for ``box``, or why the facts allow none (as
    NVIDIA's remarks say it: "base pointer not 16-byte aligned").  With ``device`` its
    base, shapes and strides may be values the kernel computes (a map built on the
    device); else only entry arguments and constants."""
    view_t = op.view.type
    tvt = view_t.tensor_view
    tv_op = op.view.owner.tensor_view.owner
    if code is None or isinstance(tvt.element, T.PointerType):
        return ""
    eb = tvt.element.bitwidth // 8
    shapes = [map_field(aa, v, s, device) for v, s in zip(dynamic_operands(tvt.shape, tv_op.dynamicShape), tvt.shape)]
    stride_values = dynamic_operands(tvt.strides, tv_op.dynamicStrides)
    strides = [map_field(aa, v, s, device) for v, s in zip(stride_values, tvt.strides)]
    base = map_field(aa, tv_op.base, 0, device)
    if base is None or (base.param is None and base.op is None) or None in shapes or None in strides:
        return ""                       # not a candidate: no tensor map can describe the view
    if aa.fact(tv_op.base).divisor < GRANULE:
        return "base pointer not 16-byte aligned"
    for v, s in zip(stride_values[:-1], tvt.strides[:-1]):
        divisor = pow2_divisor(s) if v is None else aa.fact(v).divisor
        if divisor * eb % GRANULE:
            return "stride not 16-byte aligned"
    return TensorMapSpec(code, eb, base, tuple(reversed(shapes)), tuple(reversed(strides[:-1])),
                         tuple(reversed(box)), swizzle_of(box, eb))


def _plan_box(tile: tuple[int, ...], eb: int) -> Optional[tuple[tuple[int, ...], tuple[int, ...]]]:
    box = tuple(min(t, MAX_BOX) for t in tile)
    if box[-1] * eb < GRANULE or box[-1] * eb % GRANULE:
        return None
    return box, tuple(t // b for t, b in zip(tile, box))


#: element bytes of the stores ``store_box`` swizzles
SWIZZLED_STORES = (2, 4)


def store_box(spec: TensorMapSpec, box: tuple[int, ...], boxes: tuple[int, ...]
              ) -> tuple[TensorMapSpec, tuple[int, ...], tuple[int, ...]]:
    """A 16- or 32-bit store's map, box and box count with its staging swizzled: rows of
    the widest swizzle (128, 64 or 32 bytes) that divides the tile's inner row, the inner
    box that wide and as many boxes as the row needs, as NVIDIA's sm_90 and sm_100
    epilogues stage (128-byte swizzled 64x64 f16 boxes; a 64x64 f32 tile as two 64x32
    boxes): the 8 rows of an ``stmatrix`` matrix, or the 16-byte runs of 8 lanes in 8
    rows (a tcgen05 or wgmma accumulator's row per lane), then fall in 8 distinct bank
    groups (gemm_basic's f32 epilogue: 2080 shared-memory wavefronts row-major, NVIDIA
    532).  Other stores keep ``tma_spec``'s row-major box."""
    eb = spec.element_bytes
    row = box[-1] * boxes[-1] * eb
    width = next((w for w in sorted(SWIZZLE_CODES, reverse=True) if row % w == 0), 0)
    if eb not in SWIZZLED_STORES or len(box) < 2 or box[-2] < 8 or not width:
        return spec, box, boxes
    inner = width // eb
    box = box[:-1] + (inner,)
    boxes = boxes[:-1] + (row // width,)
    spec = TensorMapSpec(spec.element_type, eb, spec.base, spec.dims, spec.strides, tuple(reversed(box)),
                         SWIZZLE_CODES[width])
    return spec, box, boxes


def bulk_reduction(op: Operation) -> Optional[tuple[str, int]]:
    """(PTX op, map element code) of an atomic view reduction TMA can do, else None."""
    if not isinstance(op, MEM.AtomicRedViewTkoOp):
        return None
    scope = op.attributes.get("memory_scope", MemoryScope.DEVICE)
    if op.attributes.get("memory_ordering_semantics") not in (MemoryOrderingSemantics.RELAXED,
                                                              MemoryOrderingSemantics.WEAK):
        return None
    if scope not in (MemoryScope.DEVICE, MemoryScope.TL_BLK):
        return None
    return BULK_REDUCTIONS.get((op.mode, getattr(op.view.type.tensor_view.element, "name", "")))


def tma_spec(aa: TileAA, op: Operation, gpu_name: str, columns_ok: bool = False, device: bool = False
             ) -> Optional[tuple[TensorMapSpec, tuple, tuple]]:
    """(map, box, boxes) of a view load, store or reduction that may go through TMA, else None.
    With ``columns_ok`` a 2-D view with its dims swapped (``dim_map [1, 0]``) may be too
    (a ring lands its tile as it lies in memory, ``tma_ring``): box and boxes are then in
    the tensor's order.  With ``device`` the map may be one the kernel builds
    (``TensorMapSpec.on_device``)."""
    found = tma_check(aa, op, gpu_name, columns_ok, device)
    return None if isinstance(found, str) else found


def tma_check(aa: TileAA, op: Operation, gpu_name: str, columns_ok: bool = False, device: bool = False
              ) -> Union[tuple[TensorMapSpec, tuple, tuple], str]:
    """``tma_spec``'s (map, box, boxes), or why the op cannot go through TMA (the reason
    ``--remarks`` gives; "" where it is no candidate at all: a view that is not a tile
    partition, not contiguous innermost, or of an element type tensor maps lack)."""
    reduction = bulk_reduction(op)
    if not isinstance(op, (MEM.LoadViewTkoOp, MEM.StoreViewTkoOp)) and reduction is None:
        return "not a view load or store"
    if int(gpu_name[3:]) < MIN_ARCH:
        return f"{gpu_name} has no TMA"
    if not allows_tma(op, gpu_name):
        return ""          # the user's choice: NVIDIA's remarks say nothing of it
    view_t = op.view.type
    made = None if op.view.is_block_argument else getattr(op.view.owner, "tensor_view", None)
    tensor = None if made is None or made.is_block_argument else made.owner
    if isinstance(tensor, MEM.MakeTensorViewOp) and aa.fact(tensor.base).divisor < GRANULE:
        return "base pointer not 16-byte aligned"        # NVIDIA's first reason, for any view
    # "": not a TMA candidate at all (NVIDIA's tool says nothing of these)
    if not isinstance(view_t, T.PartitionViewType) or not isinstance(op.view.owner, MEM.MakePartitionViewOp):
        return ""
    if not isinstance(tensor, MEM.MakeTensorViewOp):
        return "the view is made at run time"
    tvt = view_t.tensor_view
    rank = len(view_t.tile_shape)
    swapped = columns_ok and rank == 2 and view_t.dim_map == (1, 0)
    if not 1 <= rank <= MAX_RANK or (view_t.dim_map != tuple(range(rank)) and not swapped) or tvt.strides[-1] != 1:
        return ""
    # the reasons as NVIDIA's remarks give them
    if isinstance(op, MEM.LoadViewTkoOp) and view_t.padding_value not in (None, T.PaddingValue.ZERO):
        return "software-implemented TMA padding is not profitable for this tile"
    if reduction is None and op.attributes.get("memory_ordering_semantics",
                                               MemoryOrderingSemantics.WEAK) != MemoryOrderingSemantics.WEAK:
        return "memory semantic must be weak for TMA operations"
    if _beyond_descriptor(aa, tensor, tvt):
        return "hardware coordinate limits exceeded - shapes or strides require encoding beyond TMA descriptor capacity"
    if any(not isinstance(v.type, T.TileType) or v.type.rank for v in op.index):
        return "tile indices are not scalars"
    bits = getattr(tvt.element, "bitwidth", 0)
    if bits not in (8, 16, 32, 64):
        return ""
    tile = tuple(view_t.tile_shape)
    planned = _plan_box(tile[::-1] if swapped else tile, bits // 8)
    if planned is None:
        return "leading tile dimension not 16-byte aligned"
    code = reduction[1] if reduction else MAP_TYPES.get(getattr(tvt.element, "name", ""))
    spec = view_map(aa, op, planned[0], code, device)
    return spec if isinstance(spec, str) else (spec, *planned)


#: a tensor map's extents are 32-bit (strides 40-bit, in bytes)
MAX_MAP_EXTENT = 1 << 32


def _beyond_descriptor(aa: TileAA, tensor: Operation, tvt: T.TensorViewType) -> bool:
    """May a 64-bit extent or stride of the view exceed what a tensor map encodes (its facts
    bound none of them below 2^32)?  NVIDIA's tool gives such views no TMA (a kernel whose
    views are indexed with i64, as cuTile types them for huge tensors)."""
    values = (*dynamic_operands(tvt.shape, tensor.dynamicShape), *dynamic_operands(tvt.strides, tensor.dynamicStrides))
    for v in values:
        if v is None or getattr(v.type.element, "bitwidth", 32) <= 32:
            continue
        upper = aa.fact(v).upper
        if upper is None or upper >= MAX_MAP_EXTENT:
            return True
    return False


def _worth_it(aa: TileAA, op: Operation, users: dict[Value, list[Operation]], staging: bool,
              after: dict[Operation, Optional[set[Operation]]]) -> bool:
    """A load whose tile goes through shared memory anyway; a store in a kernel that uses
    shared memory, nothing ordered after it but view stores (``after``: ``stores_after``);
    a reduction followed only by reductions."""
    if isinstance(op, MEM.StoreViewTkoOp):
        return staging and after[op] is not None
    if isinstance(op, MEM.AtomicRedViewTkoOp):
        return all(isinstance(u, MEM.AtomicRedViewTkoOp) for u in users.get(op.results[0], ()))
    return feeds_staging(users, op.results[0]) or (staging and bool(knobs.tma_stream)
                                                    and streamed_in_dynamic_loop(aa, op))


def streamed_in_dynamic_loop(aa: TileAA, op: Operation) -> bool:
    """Is ``op`` at the top level of a ``for`` whose bounds are not all constants, at an
    index that is the loop's induction variable (``streaming_loop``: a chunked norm's
    column loop, a persistent loop's row blocks)?  NVIDIA's tool TMA-loads such tiles in kernels that use shared
    memory anyway, whatever they feed, and its producer warp keeps the next trips' in
    flight (TileGym's chunked RMS and layer norms on sm_90; corpus-aligned layernorm_fwd);
    ``tma_stream.record_tma_streams`` issues them trips ahead (``TILEIRAS_TMA_STREAM=0``:
    neither).  Loops of constant trips keep their direct loads (LLVM unrolls them;
    ``forwarding`` may keep their tiles)."""
    loop = streaming_loop(op)
    return loop is not None and not known_trips(loop, aa)


def streaming_loop(op: Operation) -> Optional[CF.ForOp]:
    """The ``for`` at whose body's top level the view access ``op`` stands, one of its
    indices the loop's induction variable; else None."""
    block = op.parent
    loop = block.parent.parent if block is not None and block.parent is not None else None
    if isinstance(loop, CF.ForOp) and any(i is block.args[0] for i in op.index):
        return loop
    return None


def stores_after(op: Operation, users: dict[Value, list[Operation]]) -> Optional[set[Operation]]:
    """The view stores ``op``'s token orders after it (``op`` itself a trip later among
    them), or None where it orders anything else.  The token is followed through loops and
    branches: a loop's or an ``if``'s operands and results, its ``continue``, ``break`` and
    ``yield``.  cuTile threads one token through a persistent GEMM's loop over tiles, and
    through each group's loop of a persistent grouped GEMM to the next group's: only stores
    follow, each of which (a TMA store too, ``TmaPlan.carried``) waits until the copies
    before it have written global memory before it stages its tile."""
    found: set[Operation] = set()
    seen: set[int] = set()
    todo = [op.results[0]]
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        for user in users.get(v, ()):
            places = [k for k, w in enumerate(user.operands) if w is v]
            if isinstance(user, MEM.StoreViewTkoOp) and places == [user.operands.index(user.token)]:
                found.add(user)
                todo.append(user.results[0])
            elif isinstance(user, (CF.ForOp, CF.LoopOp)):
                first = 3 if isinstance(user, CF.ForOp) else 0     # a for's bounds come first
                if any(k < first for k in places):
                    return None
                inits = [k - first for k in places]
                todo += [iter_args(user)[k] for k in inits]
                if isinstance(user, CF.ForOp):          # no trip: the init is the result
                    todo += [user.results[k] for k in inits]
            elif isinstance(user, (CF.ContinueOp, CF.BreakOp, CF.YieldOp)):
                todo += carried_to(user, places)
            else:
                return None
    return found


def plan_again(tas, arch: int, taken: set) -> None:
    """``tas``'s TMA loads and stores planned again after its scratch region, which a ring
    grew, without ``taken`` (loads the ring copies itself now): ``plan_tma`` keeps its
    choices for a subset of its candidates; what no longer fits goes back (``tma_dropped``)."""
    ops = [op for op in tas.tma if op not in taken]
    tas.tma, tas.tensor_maps, tas.tma_end = plan_tma(tas.aa, ops, f"sm_{arch}", tas.scratch_bytes, tas.tma_dropped,
                                                     last=last_store(tas, ops))


def last_store(tas, ops: list[Operation]) -> Optional[Operation]:
    """The store among ``ops`` whose staging may lie in the scratch region (a GEMM's epilogue
    over its drained ring; a CTA barrier first): the last TMA candidate, at the kernel's top
    level, neither it nor an op after it holding a region or using scratch; or None."""
    order, top = {op: k for k, op in enumerate(tas.aa.function.walk())}, tas.aa.function.entry_block.ops
    ops = [op for op in ops if isinstance(op, (MEM.LoadViewTkoOp, MEM.StoreViewTkoOp)) or bulk_reduction(op)]
    last = max(ops, key=order.__getitem__, default=None)
    if last not in top or not isinstance(last, MEM.StoreViewTkoOp) or any(
            op.regions or tas.scratch.get(op) for op in top[top.index(last):]):
        return None
    return last


def plan_tma(aa: TileAA, ops: list[Operation], gpu_name: str, smem_start: int,
             dropped: Optional[dict[Operation, str]] = None, stages: Optional[dict[Operation, int]] = None,
             last: Optional[Operation] = None) -> tuple[dict[Operation, TmaPlan], tuple[TensorMapSpec, ...], int]:
    """Plans of the loads and stores among ``ops`` that go through TMA, the kernel's maps
    (one per distinct spec, in first-use order: a view loaded and stored with the same box
    shares one) and where shared memory ends after them.  Where the buffers after
    ``smem_start`` would end past the arch's limit (``smem_limit``), the store ``last``
    (``last_store``) stages its tile at offset 0, over the scratch region, and if they still
    do not fit the largest ones go back to the non-TMA path (``dropped``: each, with the
    reason).  A load of ``stages`` (a streamed loop's) takes that many buffers and mbarriers."""
    stages = stages or {}
    if int(gpu_name[3:]) < MIN_ARCH:
        return {}, (), 0
    chosen = []
    staged = 0
    users = users_map(aa)
    staging = uses_staging(aa)
    homes: dict[Operation, Optional[Operation]] = {}
    after = {op: stores_after(op, users) for op in ops if isinstance(op, MEM.StoreViewTkoOp)}
    shares = _shared_staging(after)
    last = None if any(op is not last and root is shares.get(last, last) for op, root in shares.items()) else last
    counted: set = set()
    for op in ops:
        device = isinstance(op, MEM.StoreViewTkoOp) and bool(knobs.device_tensor_maps)
        found = tma_spec(aa, op, gpu_name, device=device)
        if found is None or not _worth_it(aa, op, users, staging, after):
            continue
        spec, box, boxes = found
        home = map_home(op, [spec])
        if isinstance(home, str):
            continue
        homes[op] = home
        if isinstance(op, MEM.StoreViewTkoOp):
            spec, box, boxes = store_box(spec, box, boxes)
        nbytes = spec.element_bytes
        for t in op.view.type.tile_shape:
            nbytes *= t
        align = SWIZZLED_ALIGN if spec.swizzle else STAGING_ALIGN
        key = (shares.get(op, op), nbytes, spec.swizzle)
        n = stages.get(op, 1)
        if key not in counted:
            if staged + _align(nbytes, align) * n > MAX_STAGING_BYTES:
                continue
            staged += _align(nbytes, align) * n
            counted.add(key)
        chosen.append((op, spec, box, boxes, nbytes, spec.swizzle, n))
    chosen, last = _within_limit(chosen, smem_start, smem_limit(gpu_name), dropped, shares, last)
    chosen = _whole_chains(chosen, after, dropped)
    if not chosen:
        return {}, (), 0
    carried = set().union(*(after.get(c[0]) or () for c in chosen))
    maps = []
    for _, spec, *_rest in chosen:
        if spec not in maps and not spec.on_device:
            maps.append(spec)
    buffers, at = _place(chosen, smem_start, shares, last)
    plans = {}
    for (op, spec, box, boxes, nbytes, swizzle, n), buffer in zip(chosen, buffers):
        span = next((w for w, code in SWIZZLE_CODES.items() if code == swizzle), 0)
        if spec.on_device:
            plans[op] = TmaPlan(-1, box, boxes, buffer, None, nbytes, swizzle=span, carried=op in carried,
                                device_map=spec, maps_at=homes[op])
            continue
        index = maps.index(spec)
        if isinstance(op, MEM.StoreViewTkoOp):
            plans[op] = TmaPlan(index, box, boxes, buffer, None, nbytes, swizzle=span, carried=op in carried,
                                over_scratch=op is last and buffer < smem_start)
            continue
        reduction = bulk_reduction(op)
        if reduction is not None:
            plans[op] = TmaPlan(index, box, boxes, buffer, None, nbytes, reduction[0], span)
            continue
        plans[op] = TmaPlan(index, box, boxes, buffer, at, nbytes, swizzle=span, stages=n,
                            stage_bytes=_stage_stride(nbytes, swizzle) if n > 1 else 0)
        at += BARRIER_BYTES * n
    return plans, tuple(maps), at


def _stage_stride(nbytes: int, swizzle: int) -> int:
    """Bytes between the stages of a streamed load's buffer (each aligned as the first)."""
    return _align(nbytes, SWIZZLED_ALIGN if swizzle else STAGING_ALIGN)


def enclosing_loop(op: Operation) -> Optional[Operation]:
    """The innermost ``for`` or ``loop`` whose body holds ``op`` (at any depth), or None."""
    block = op.parent
    while block is not None and block.parent is not None and block.parent.parent is not None:
        owner = block.parent.parent
        if isinstance(owner, (CF.ForOp, CF.LoopOp)):
            return owner
        block = owner.parent
    return None


def map_home(op: Operation, specs: list[TensorMapSpec]) -> Union[Optional[Operation], str]:
    """Where the kernel builds the maps among ``specs`` that it builds (``on_device``) for
    ``op``, a ring's K loop or a view store: None, right before ``op`` (or no such map);
    else the outermost loop around ``op`` whose trips do not change them (every value they
    come from is made outside it), before which they are built once, as NVIDIA's tool
    builds a persistent grouped GEMM's maps before each group's loop over tiles, not per
    tile; or why no place works (a str): a map that changes while copies through its last
    version may still be in flight."""
    ops = {f.op for spec in specs for f in (spec.base, *spec.dims, *spec.strides) if f.on_device}
    if not ops:
        return None
    if isinstance(op, (CF.ForOp, CF.LoopOp)) and ops & set(op.walk()):
        return "its views are made in the loop (no map can be built before it)"
    home, outer = None, enclosing_loop(op)
    while outer is not None and not ops & set(outer.walk()):
        home, outer = outer, enclosing_loop(outer)
    if outer is not None:
        return "its views are made in a loop around it (each trip would build maps that copies may still read)"
    return home


def collect_device_maps(tas) -> None:
    """``tas.device_maps``: the maps the kernel builds (``TensorMapSpec.on_device``) of its
    TMA rings and TMA stores, once each, in the order their ops come; map ``k`` takes slot
    ``k`` of the workspace (``codegen.device_maps``).  Run once every plan is final."""
    found: list[TensorMapSpec] = []
    for op in tas.aa.function.walk():
        plan = tas.pipelines.get(op)
        specs = list(getattr(plan, "specs", ()))
        if op in tas.tma and tas.tma[op].device_map is not None:
            specs.append(tas.tma[op].device_map)
        found += [spec for spec in specs if spec.on_device and spec not in found]
    tas.device_maps = tuple(found)


def _shared_staging(after: dict[Operation, Optional[set[Operation]]]) -> dict[Operation, Operation]:
    """The stores that may share a staging buffer, each mapped to the first of its group:
    those one token orders one after another (``stores_after``), each of which waits until
    the copies of the one before have written memory (``TmaPlan.carried``), so that the
    buffer is free again when it stages its tile (the 4 epilogues of a persistent grouped
    GEMM's 4 groups take one buffer, not 4)."""
    root: dict[Operation, Operation] = {}

    def find(op: Operation) -> Operation:
        while root.get(op, op) is not op:
            op = root[op]
        return op
    for op, later in after.items():
        for other in later or ():
            a, b = find(op), find(other)
            if a is not b:
                root[b] = a
    return {op: find(op) for op in after}


def _whole_chains(chosen: list[tuple], after: dict[Operation, Optional[set[Operation]]],
                  dropped: Optional[dict[Operation, str]]) -> list[tuple]:
    """``chosen`` less the stores whose token orders a store that does not go through TMA
    (it would not wait for their copies), until none is left."""
    while True:
        ops = {c[0] for c in chosen}
        out = [c for c in chosen if not (after.get(c[0]) or set()) - ops]
        if len(out) == len(chosen):
            return out
        for c in chosen:
            if c not in out and dropped is not None:
                dropped[c[0]] = "a store its token orders after it does not go through TMA"
        chosen = out


def _place(chosen: list[tuple], smem_start: int, shares: Optional[dict[Operation, Operation]] = None,
           last: Optional[Operation] = None) -> tuple[list[int], int]:
    """Each chosen op's buffer offset, one after another from ``smem_start``, and where
    the buffers end (the loads' mbarriers follow); stores of one group of ``shares`` with
    the same bytes and swizzle take the first one's buffer; the store ``last`` takes offset
    0 where its buffer ends within ``smem_start`` (the scratch region)."""
    at = smem_start
    buffers = []
    placed: dict[tuple, int] = {}
    for op, _, _, _, nbytes, swizzle, stages in chosen:
        if op is last and _align(nbytes, STAGING_ALIGN) <= smem_start:
            buffers.append(0)
            continue
        key = ((shares or {}).get(op, op), nbytes, swizzle)
        if key in placed:
            buffers.append(placed[key])
            continue
        at = _align(at, SWIZZLED_ALIGN if swizzle else STAGING_ALIGN)
        buffers.append(at)
        placed[key] = at
        at = _align(at + _stage_stride(nbytes, swizzle) * (stages - 1) + nbytes, STAGING_ALIGN)
    return buffers, at


def _within_limit(chosen: list[tuple], smem_start: int, limit: int,
                  dropped: Optional[dict[Operation, str]],
                  shares: Optional[dict[Operation, Operation]] = None, last: Optional[Operation] = None
                  ) -> tuple[list[tuple], Optional[Operation]]:
    """``chosen`` less its largest buffers (the latest of equal ones) until the rest, with
    their mbarriers, end within ``limit``: those load and store directly instead, the
    fewest copies given up for the bytes won back; and ``last`` where its staging must lie
    over the scratch region for them to fit, else None."""
    chosen = list(chosen)

    def end(over: Optional[Operation]) -> int:
        barriers = sum(c[6] for c in chosen
                       if not isinstance(c[0], MEM.StoreViewTkoOp) and bulk_reduction(c[0]) is None)
        return _place(chosen, smem_start, shares, over)[1] + barriers * BARRIER_BYTES

    over = None if end(None) <= limit else last
    while chosen and end(over) > limit:
        need = end(over)
        largest = max(range(len(chosen)), key=lambda i: (chosen[i][4], i))
        op, nbytes = chosen[largest][0], chosen[largest][4]
        del chosen[largest]
        if dropped is not None:
            dropped[op] = (f"its {nbytes}-byte TMA buffer does not fit in shared memory: with it the kernel "
                           f"needs {need} bytes, the limit is {limit}")
    return chosen, over


def plan_matrix_stores(tas) -> None:
    """Record ``stmatrix`` (``TmaPlan.matrix``) on each TMA store of a (2-D) 16-bit tile whose
    register layout is the m8n8 fragment (``stmatrix_form``: the mma and wgmma accumulators
    are) into a staging of 16-byte-aligned rows: 8 elements a lane's address, one
    instruction per 4 matrices instead of 8 scalar shared stores.  Run once every plan of
    ``tas.tma`` is final (rings and attention re-plan the stores they keep)."""
    for op, plan in list(tas.tma.items()):
        if not isinstance(op, MEM.StoreViewTkoOp) or plan.nbytes != 2 * op.tile.type.num_elements:
            continue
        layout = tas.operand_layout(op, op.operands.index(op.tile))
        form = stmatrix_form(layout) if layout is not None else None
        if form is None or plan.box[-1] % 8:
            continue
        tas.tma[op] = TmaPlan(plan.map_index, plan.box, plan.boxes, plan.buffer, plan.barrier, plan.nbytes,
                              plan.reduce, plan.swizzle, form, plan.carried, plan.device_map, plan.maps_at,
                              over_scratch=plan.over_scratch)
