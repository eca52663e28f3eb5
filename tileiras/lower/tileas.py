"""TileAA -> TileAS: decide how every tile is distributed over the CTA.

This pass only decides; ``codegen.nvvm`` applies the decisions.  For each tile
value it records a ``LinearLayout`` (which thread and register hold which
element); for each operand that must be redistributed, the layout it is
converted to (through shared memory); for each op, the shared-memory scratch it
needs.  Ops run one after another, so all scratch users share one region,
guarded by barriers: the CTA's static shared memory is the largest need.

This module holds the record (``TileAS``) and the entry point of each TileAS pass, which
``pipeline.passes_for`` lists in order; the decisions live beside it: CTA sizes fitted to
NVIDIA's (``cta_size``), tensor-core forms (``mma_forms``), the per-op layout rules
(``layout_rules``), chunked loops (``chunks``), vector widths (``vectorize``) and TMA
(``tma``); ``tileas_format`` prints the result.
"""
from __future__ import annotations

from typing import Optional

from ..ir import types as T
from ..ir.core import Operation, Value
from ..layout.linear import LinearLayout, default_blocked, outer_product, sector_blocked
from ..record import field, record
from ..target import smem_limit
from ..tile import ops_arith as AR
from ..tile import ops_memory as MEM
from ..tile.traits import is_contraction
from . import tma, vectorize
from .chunks import ChunkGroup
from .cta_size import choose_num_warps
from .layout_rules import assign_block
from . import tensor_memory
from .mma_forms import accumulator_layout, fitted_to, mma_k_slice, mma_staging_bytes, tcgen05_form, tensor_core_mma
from .subbyte import plan_pairs
from .tileaa import TileAA
from .tiles import access_bytes, element_bytes, is_tile

#: Consecutive last-dim elements per thread where a tile is not accessed in global memory
#: (16 bytes of f32): reductions along the rows fold in registers.
CONTIGUOUS = 4
#: Elements one global load or store instruction moves per thread where the bytecode
#: proves no alignment (``vectorize``: where it does, up to 16 bytes).
GLOBAL_VECTOR = 1
#: Bytes the GPU moves global memory in: a warp's access costs one transaction per
#: distinct sector its threads touch.
SECTOR = vectorize.SECTOR_BYTES
#: Alignment of the CTA's shared memory without TMA buffers or swizzled stagings: the
#: scratch region's accesses need at most 16 (a vector of four 32-bit words).
SMEM_ALIGN = 16


@record
class TileAS:
    aa: TileAA
    num_warps: int                   # warps the layouts distribute tiles over (a power of two)
    extra_warps: int = 0             # more warps in the CTA that hold copies (ABI: CTA size)
    arch: int = 0                    # the target's compute capability (0: none, no smem limit)
    #: CTAs of a cluster that share each tile block (``cluster_split``; 0: the first does it)
    cluster_split: int = 0
    #: of a split block, the view loads every CTA makes whole (the same tile in each)
    cluster_whole: frozenset = frozenset()
    layouts: dict[Value, LinearLayout] = field(default_factory=dict)
    converts: dict[tuple[Operation, int], LinearLayout] = field(default_factory=dict)
    scratch: dict[Operation, int] = field(default_factory=dict)
    #: ops that run in a chunked loop, and their group (see plan_chunks)
    chunked: dict[Operation, ChunkGroup] = field(default_factory=dict)
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
    #: of those, the broadcasts whose source is converted (through shared memory) rather
    #: than computed again: use -> {(broadcast, 0): the source's layout there}
    recompute_converts: dict[tuple[Operation, int], dict[tuple[Operation, int], LinearLayout]] = field(
        default_factory=dict)
    #: shapes of matrix multiply results: their tiles keep ``contiguous`` layouts (canonical)
    mma_shapes: frozenset = frozenset()
    #: matrix multiplies that run on tensor cores, with their ``mma.sync`` form
    #: (``tensor_core_mma``, decided once here for the layouts and the code)
    tensor_cores: dict = field(default_factory=dict)
    #: shapes of tensor-core matrix multiply results: their tiles take the MMA's fragment
    #: layout (``mma_forms.accumulator_layout``)
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
    #: the tensor maps the kernel builds itself (``TensorMapSpec.on_device``: a grouped
    #: GEMM's, whose views it makes from addresses it loads), in order
    #: (``tma.collect_device_maps``): map ``k`` lies in slot ``k`` of the workspace its
    #: hidden ``.u64`` parameter points to, not in a hidden map parameter
    device_maps: tuple = ()
    tma_end: int = 0
    #: ``tcgen05`` multiplies: the first tensor-memory column of each one's accumulator,
    #: the columns the kernel allocates (0: none) and the shared-memory slot of the
    #: allocation's address and the multiplies' mbarrier (``tensor_memory.allocate``)
    tmem_columns: dict = field(default_factory=dict)
    tmem_alloc: int = 0
    tmem_slot: int = 0
    #: tensor-core K loops: the software-pipelining decision per loop (``software_pipeline``),
    #: and per loop, load and multiply of a pipelined one its plan
    pipelines: dict = field(default_factory=dict)
    pipelined: dict = field(default_factory=dict)
    #: ``mma.sync`` multiplies whose whole operands would not fit the arch's shared memory:
    #: the K slice they are staged and multiplied in (``fit_mma_staging``)
    mma_k_slices: dict = field(default_factory=dict)
    #: ``mma.sync`` multiplies whose 16-bit B is staged as N rows of K, the way its
    #: registers run (``layout_rules.b_staged_as_rows``)
    mma_b_rows: set = field(default_factory=set)
    #: loads and stores TMA would have taken but whose buffers did not fit beside the
    #: scratch region: why (``choose_tma``; the remarks report it)
    tma_dropped: dict = field(default_factory=dict)
    #: loads that read the tiles an earlier constant-trip loop loaded (``forwarding``: the
    #: load -> its Forward), and the loads refused (why)
    forwarded: dict = field(default_factory=dict)
    forward_refused: dict = field(default_factory=dict)
    #: when each op is emitted: its position among its block's emitted ops, or within its
    #: chunked loop (``emission_order``; an op without one is not emitted)
    emission: dict = field(default_factory=dict)
    #: plain loads whose tile only CUDA-core multiplies stage: the first copy's warps load it
    #: (``staged_loads.record_warp_owned_loads``)
    warp_owned: dict = field(default_factory=dict)
    #: pipelined view loads whose index the loop body computes (a paged cache's page id):
    #: how their copies compute it for a later iteration (``gathered_copy.index_slice``)
    index_slices: dict = field(default_factory=dict)
    #: the CTA's static shared memory, its bytes and alignment (``allocate_shared_memory``)
    smem_bytes: int = 0
    smem_align: int = SMEM_ALIGN
    _users: Optional[dict[Value, list[Operation]]] = None
    _operand_costs: Optional[dict[tuple[int, ...], int]] = None

    @property
    def num_threads(self) -> int:
        """Threads per CTA (``.reqntid``)."""
        return 32 * (self.num_warps + self.extra_warps)

    @property
    def layout_threads(self) -> int:
        return 32 * self.num_warps

    @property
    def scratch_bytes(self) -> int:
        """Bytes of the scratch region: the largest need of one op."""
        return max(self.scratch.values(), default=0)

    def canonical(self, shape: tuple[int, ...], min_vector: int = 1, nbytes: int = 4,
                  dim: Optional[int] = None) -> LinearLayout:
        """The layout of a tile of ``shape`` and ``nbytes`` elements (what one element of
        its global accesses takes, ``access_bytes``) that its global accesses coalesce in.
        Each thread holds ``access_vector`` consecutive last-dim elements at a time (at
        least ``min_vector`` where the dim has them) and lanes hold the next ones, so a
        warp's instruction touches consecutive addresses (32 lanes times 4 bytes of f32:
        four 32-byte sectors), as NVIDIA's layouts and Triton's coalesced blocked layouts
        do: thread t holds t, t+128, ... of a 1-D tile.  Rows longer than a sector's worth
        of lanes are held a few elements of a row a thread (``sector_blocked``).

        Tiles of a CUDA-core multiply's result shape (its accumulators, their epilogue)
        take ``outer_product``'s blocks, else ``contiguous``: the multiply reads rows of A
        and columns of B each k, and NVIDIA's epilogues store from the multiply's layout,
        no more coalesced (flash_attention 64x64: 232 registers coalesced, 196 contiguous,
        NVIDIA 198)."""
        if not shape:
            return default_blocked(shape, self.num_warps)
        if shape in self.mma_layouts:
            return self.mma_layouts[shape]
        rows = self.accumulator_rows(shape) if dim is None else None
        if rows is not None:
            return rows
        if shape in self.mma_shapes:
            return outer_product(shape, self.num_warps, value_cost=self.operand_cost(shape)) or self.contiguous(shape)
        shaped = dim is None        # else runs of ``min_vector`` along ``dim`` (one access's own)
        wanted = min_vector
        if shaped:
            dim = vectorize.run_dim(self.shape_access, shape)   # Fortran-order views: not the last
            wanted = max(self.access_vector(shape), min_vector)
        run = self.shape_access.get(tuple(shape), vectorize.Run(dim, 1)) if shaped else vectorize.Run(dim, 1)
        return self.blocked(shape, wanted, nbytes, dim, min_vector, run.across, run.loose)

    def blocked(self, shape: tuple[int, ...], wanted: int, nbytes: int, dim: int, min_vector: int = 1,
                across: bool = False, loose: bool = False) -> LinearLayout:
        """The coalesced layout of ``canonical`` for any shape (a multiply's result shape too):
        runs of up to ``wanted`` consecutive elements of ``dim`` a thread, lanes next along it
        (``across``: rows apart; ``loose``: a warp's lanes over 128 bytes of a row;
        vectorize.Run)."""
        n = 1
        for d in shape:
            n *= d
        regs = max(1, n // self.layout_threads)
        order = [k for k in range(len(shape)) if k != dim] + [dim]
        vector = min(wanted, shape[dim], max(min_vector, regs))
        run = max(1, min(32, (4 if loose else 1) * SECTOR // (vector * nbytes)))
        if across:
            run = shape[dim] // vector                  # rows apart (vectorize.Run)
        layout = sector_blocked(tuple(shape[k] for k in order), self.num_warps, vector, run, regs)
        return layout if dim == len(shape) - 1 else layout.permute([order.index(k) for k in range(len(shape))])

    def operand_cost(self, shape: tuple[int, ...]) -> int:
        """Instructions a CUDA-core multiply of result ``shape`` spends on each operand
        value it reads (``outer_product``): 1 to widen it where A's or B's element is not
        the accumulator's, 1 more to apply a block scale."""
        if self._operand_costs is None:
            self._operand_costs = {}
            for op in self.aa.live_ops():
                if is_contraction(op):
                    acc = T.element_type(op.result.type)
                    widen = any(T.element_type(v.type) != acc for v in op.operands[:2])
                    key = tuple(op.result.type.shape)
                    self._operand_costs[key] = max(self._operand_costs.get(key, 0),
                                                   int(widen) + int(isinstance(op, AR.MmaFScaledOp)))
        return self._operand_costs.get(tuple(shape), 0)

    def contiguous(self, shape: tuple[int, ...], most: Optional[int] = None) -> LinearLayout:
        """Up to ``CONTIGUOUS`` (or ``most``) consecutive last-dim elements a thread, lanes
        over the next: few rows a thread, for loads that are not worth coalescing
        (``_view_access``)."""
        n = 1
        for d in shape:
            n *= d
        vector = min(most or CONTIGUOUS, shape[-1], max(1, n // self.layout_threads)) if shape else 1
        return default_blocked(shape, self.num_warps, vector)

    def accumulator_rows(self, shape: tuple[int, ...]) -> Optional[LinearLayout]:
        """The layout of an ``M x 1`` tile where a multiply's ``M x N`` accumulator lives:
        the accumulator's own row slice (a row's value where the threads holding that row
        hold it), what a reduction along its rows gives.  Row statistics carried across a
        loop (flash attention's running max and sum) then meet the reductions, the
        broadcasts back and the rescaling of the accumulator with no conversion through
        shared memory; NVIDIA's and Triton's slice-of-MMA layouts do the same."""
        if len(shape) != 2 or shape[1] != 1:
            return None
        slices = [layout.drop_dim(1) for acc, layout in sorted(self.mma_layouts.items())
                  if len(acc) == 2 and acc[0] == shape[0]]
        return slices[0].reshape(shape) if slices else None

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


# -- the TileAS passes (``pipeline.passes_for`` lists them in order) -------------------------
def new_tileas(aa: TileAA, num_warps_hint: Optional[int] = None, arch: int = 0) -> TileAS:
    """The CTA size (``cta_size.choose_num_warps``) and an empty TileAS for it."""
    return TileAS(aa, *choose_num_warps(aa, num_warps_hint, arch), arch=arch,
                  mma_shapes=frozenset(op.results[0].type.shape for op in aa.live_ops() if is_contraction(op)))


def choose_tensor_cores(tas: TileAS, arch: int) -> None:
    """The tensor-core form of every matrix multiply that has one (``mma_forms``), and the
    fragment layout its result shape takes.  A shape takes one layout: where some
    multiplies of a shape run on tcgen05 and others cannot (a K loop TMA cannot copy, then
    a multiply into its result), all of them take their ``mma.sync`` or ``wgmma`` form, whose
    fragments the others hold (a LoRA adapter's product added after such a loop on sm_100
    was multiplied into tensor memory's layout by ``mma.sync``: wrong in every element)."""
    plain = {}
    for op in tas.aa.live_ops():
        form = plain[op] = tensor_core_mma(op, arch, tas.num_warps, tas.extra_warps)
        tc = tcgen05_form(op, form, tas.num_warps)
        if tc is not None and tensor_memory.tcgen05_reason(tas, op, arch) is None and tensor_memory.fits(tas, op):
            form = tc
        if form is not None:     # (``fits`` counts the tcgen05 ones chosen so far)
            tas.tensor_cores[op] = form
    mixed = {op.result.type.shape for op, form in tas.tensor_cores.items() if not form.tcgen05} & {
        op.result.type.shape for op, form in tas.tensor_cores.items() if form.tcgen05}
    for op, form in list(tas.tensor_cores.items()):
        if op.result.type.shape in mixed:
            form = plain[op]
        layout = accumulator_layout(op, tas.num_warps, form)
        tas.tensor_cores[op] = fitted_to(form, layout)      # warps beyond the 16x8 blocks hold copies
        tas.mma_layouts[op.result.type.shape] = layout


def access_facts(tas: TileAS) -> None:
    """How many elements a thread's view access may move at once (the facts allow it), per
    access and per tile shape: the canonical layouts are built on the latter."""
    tas.access_allowed = vectorize.allowed_vectors(tas.aa)
    tas.shape_access = vectorize.shape_vectors(tas.aa, tas.access_allowed)


def assign_layouts(tas: TileAS) -> None:
    """The layout of every tile, its operands' conversions and scratch (``layout_rules``)."""
    fn = tas.aa.function
    tas.pairs = plan_pairs(fn)
    for a in fn.entry_block.args:
        if is_tile(a):
            tas.layouts[a] = tas.canonical_type(a.type)
    assign_block(tas, fn.entry_block)


def vector_widths(tas: TileAS) -> None:
    """The width each view access is emitted with (after chunking: a chunk's registers)."""
    tas.vectors = vectorize.plan_vectors(tas)


def fit_mma_staging(tas: TileAS) -> None:
    """``mma.sync`` multiplies whose whole-operand staging would take more shared memory
    than the arch allows (``smem_limit``) stage and multiply K slices instead
    (``mma_forms.mma_k_slice``), recorded in ``mma_k_slices`` with their smaller scratch.
    Not ``wgmma`` ones, nor software-pipelined ones (their ring replaces the staging).  Kernels that fit keep their plan; where no slice
    fits the scratch stays, and ``smem_limit`` reports the overflow in one line."""
    if not tas.arch:
        return
    limit = smem_limit(f"sm_{tas.arch}")
    for op, form in tas.tensor_cores.items():
        if form.warpgroup or form.tcgen05 or op in tas.pipelined or op in tas.mma_k_slices:
            continue
        if op in tas.mma_b_rows and mma_staging_bytes(op, None, form, True) > limit:
            tas.mma_b_rows.discard(op)              # B's N rows of K would not fit; K x N
            tas.scratch[op] = max(mma_staging_bytes(op, None, form), _conversion_bytes(tas, op))
        k_slice = mma_k_slice(op, form, limit)
        if k_slice is not None:
            tas.mma_k_slices[op] = k_slice
            tas.mma_b_rows.discard(op)              # slices stage B as K x N
            tas.scratch[op] = max(mma_staging_bytes(op, k_slice, form), _conversion_bytes(tas, op))


def _conversion_bytes(tas: TileAS, op: Operation) -> int:
    """Scratch ``op``'s operand conversions through shared memory take (``_want``)."""
    return max((op.operands[i].type.num_elements * element_bytes(op.operands[i].type)
                for (user, i) in tas.converts if user is op), default=0)


def choose_tma(tas: TileAS, arch: int) -> None:
    """The loads and stores that go through TMA (``tma.plan_tma``), with their staging
    buffers placed after the scratch region (multiplies fitted to the arch's limit first,
    ``fit_mma_staging``), as many as fit beside it within the limit (``tma_dropped``: the
    others, and why).  Not chunked ones (a chunk is a few registers a thread), nor 4-bit
    tiles held in byte pairs."""
    fit_mma_staging(tas)
    aa = tas.aa
    candidates = [op for op in aa.live_ops() if op not in tas.chunked and op not in aa.silent
                  and not any(r in tas.pairs for r in op.results)
                  and not (isinstance(op, MEM.StoreViewTkoOp) and op.tile in tas.pairs)]
    tas.tma, tas.tensor_maps, tas.tma_end = tma.plan_tma(aa, candidates, f"sm_{arch}", tas.scratch_bytes,
                                                         tas.tma_dropped, last=tma.last_store(tas, candidates))


def allocate_shared_memory(tas: TileAS) -> None:
    """The CTA's static shared memory: the scratch region all scratch users share (ops run
    one after another, between barriers) at offset 0, then TMA's buffers and mbarriers;
    aligned for the TMA buffers (``tma.smem_alignment``) and the wgmma stagings' swizzles,
    which repeat on absolute addresses.  Multiplies are fitted to the arch's limit first
    (``fit_mma_staging``: on targets without TMA it has not run yet)."""
    fit_mma_staging(tas)
    tma.plan_matrix_stores(tas)
    tma.collect_device_maps(tas)
    tensor_memory.allocate(tas)
    tas.smem_bytes = max(tas.scratch_bytes, tas.tma_end)
    rings = [p.staging for p in tas.pipelines.values() if getattr(p, "staging", None) is not None]
    tas.smem_align = max([tma.smem_alignment(tas.tma), *(s.align for s in (*tas.wgmma_staging.values(), *rings))])
