"""Flash attention's K/V loop as a TMA ring: on sm_90 feeding the two ``wgmma`` multiplies,
on sm_100 and sm_120 two ``mma.sync`` multiplies that read the stage with ``ldmatrix``
(``plan_attention_sync_ring``, ``SyncConsumers``: NVIDIA's design there).  What follows
describes the sm_90 ring; the ``mma.sync`` one has the same stages, mbarriers and refills.

Unpipelined, each iteration TMA-loads K and V into a plain buffer, waits, reads them
into registers and stores them again into the ``wgmma`` staging (``st.shared``, two
barriers) before each multiply: the tiles are handled twice and nothing is in flight.
Here the K and V tiles of iteration ``i + S - 1`` are TMA boxes that one elected thread
issues straight into stage ``(i + S - 1) % S`` of a ring, in the swizzled layouts the
two multiplies' B descriptors read (``mma_forms.tma_ring_staging``: K lands K-major as
the B of Q @ K^T, V MN-major as the B of P @ V), while iteration ``i`` computes;
``codegen.emit_attention_tma`` expands it.  Each stage has two "full" mbarriers, K's and
V's, so Q @ K^T waits for K(i) only and P @ V for V(i); ``expect_tx`` announces each
tile's bytes, and iteration i waits for phase parity ``(i / S) % 2``.

``plan_attention_ring`` decides, once per loop (``software_pipeline.plan_loop`` sends a
``wgmma`` loop with two multiplies here); the plan, or the reason it is refused, goes
into ``TileAS.pipelines`` and the ``--remarks``.  The loop must have the shape
``attention_pipeline`` checks for sm_80 (two multiplies, the second using the first's
result, each B a tile loaded in the loop at the induction variable or values from
outside it, reaching the multiply only through relabels, no op of the body writing
memory), and besides:

* both multiplies run as ``wgmma`` with the accumulator in its fragments;
* the first multiply's A is made before the loop (Q, read by every iteration's
  descriptors from one staging) or held in registers as ``wgmma``'s A fragments, and
  the second's A is held so (P, the softmax of the first's result).  Where Q is a
  TMA-able load of the loop's block reaching the multiply only through reshapes
  (``_q_box``), its boxes land before the loop straight in the K-major swizzled layout
  ``tma_ring_staging`` gives A, on an mbarrier of its own, and no thread loads or
  stores it; else it is stored once from registers where TileAS's ``wgmma_staging``
  puts it;
* each tile is one TMA box per swizzle atom along its contiguous dim (``tma`` rules:
  aligned, zero-padded, at most 256 rows), and ``tma_ring_staging`` has a layout that
  those boxes land in and the descriptors step through;
* two stages fit in shared memory beside Q's staging and the kernel's other buffers.

Shared memory: the other ops' scratch from 0, Q's staging, then the ring (stage ``s``
at ``ring_base + s * stage_bytes``: K's boxes, then V's, each 1024-byte aligned, the
128-byte swizzle's repeat), then the mbarriers (K's "full", V's "full" and the "empty"
one of each stage, then Q's).  The stage
count is the ``num_stages`` hint, else the modulo schedule of the ring's copies and
``wgmma`` (``sched.pipeline.tma_ring_schedule``), at most what shared memory holds and
a known trip count needs, and never below 2 (``MIN_STAGES``).  A stage is refilled only
after every thread's two ``wgmma`` that read it have completed: each multiply ends with
``wgmma.wait_group 0``, after P @ V every thread arrives on the stage's "empty"
mbarrier, and the refill of iteration i + S waits for that phase; with no CTA barrier
in the loop, S-1 iterations are in flight while one computes.
"""
from __future__ import annotations

from typing import Optional, Union

from ..ir import types as T
from ..ir.core import Operation
from ..knobs import knobs
from ..layout.linear import mma_blocks
from ..record import record
from ..sched.latency import model_for
from ..sched.modulo import SchedulingError
from ..sched.pipeline import tma_ring_schedule
from ..target import smem_limit, stages_hint
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.traits import DATA_RESOURCES, writes
from .attention_pipeline import (A_BEFORE_LOOP, A_HELD, A_STAGED, a_in_registers, attention_multiplies, attention_pair,
                                 b_load, body_multiplies, inside_value, wanted_stages)
from .gathered_copy import record_index_slices
from .k_loop_body import zeros_before
from .mma_forms import (WGMMA_MAX_N, LandedOperand, MmaSwizzle, OperandStaging, WgmmaStaging, k_steps, landed_form,
                        mma_swizzle, tcgen05_form, tcgen05_ring_staging, tcgen05_rows, tensor_core_mma,
                        tma_ring_staging)
from .tensor_memory import NOT_ATTENTION, fits
from .tiles import element_bytes
from .software_pipeline import KLoopPlan, clamped_stages
from .tma import (BARRIER_BYTES, MAP_TYPES, MAX_BOX, TensorMapSpec, allows_tma, other_tma_bytes, plan_again,
                  view_map_spec)
from .tma_ring import MAP_SWIZZLE

#: a stage's and each tile's alignment: the 128-byte swizzle repeats every 1024 bytes
RING_ALIGN = 1024
#: mbarriers of a stage: K's and V's "full" ones, then the "empty" one (index ``EMPTY``)
BARRIERS_PER_STAGE = 3
EMPTY = 2
#: the fewest stages: iteration i + S is issued once iteration i has released its stage
#: (``emit_attention_tma``), so S - 1 whole iterations hide the copies' latency
MIN_STAGES = 2
#: stages a ``wgmma`` ring needs to issue Q @ K^T an iteration ahead (``s_ahead``)
WGMMA_S_AHEAD_STAGES = 3


@record(frozen=True)
class RingBox:
    """One B tile the ring copies by TMA: ``load`` (reaching its multiply through
    ``relabels``) lands in each stage as ``boxes`` boxes of ``box`` (tensor order,
    outermost first: unit dims, ``rows``, one swizzle atom's row of elements), box ``q``
    ``q`` boxes' bytes after ``staging.base`` (stage 0's address of the tile), one atom
    further along the contiguous dim; through the hidden tensor map ``map_index``
    (``spec`` its contents).  ``dims``: per tensor dim, the tile dim that indexes it.
    ``staging`` is where the boxes land: a ``wgmma`` operand, or (``mma.sync``
    consumers, ``SyncConsumers``) a ``LandedOperand``."""
    load: Operation
    relabels: tuple[Operation, ...]
    staging: Union[OperandStaging, LandedOperand]
    box: tuple[int, ...]
    boxes: int
    spec: TensorMapSpec
    dims: tuple[int, ...]
    map_index: int = -1

    @property
    def nbytes(self) -> int:
        """Bytes its boxes complete on its mbarrier (out-of-bounds parts count too)."""
        n = self.boxes * self.staging.elem_bytes
        for d in self.box:
            n *= d
        return n

    def placed(self, map_index: int) -> "RingBox":
        return RingBox(self.load, self.relabels, self.staging, self.box, self.boxes, self.spec, self.dims, map_index)


@record(frozen=True)
class AttentionRingPlan(KLoopPlan):
    """How one sm_90 K/V loop is pipelined: ``tiles`` (K's, V's) land by TMA in a ring of
    ``stages`` stages of ``stage_bytes`` from ``ring_base``; ``stagings`` are the two
    multiplies' ``wgmma`` operands in stage 0 (a stage ``s`` bytes further for B), with
    the first's A (Q) staged once before the loop where ``stagings[0].a`` says (None: A
    in registers); ``source`` says where the stage count came from; ``consumers``: the
    threads that arrive on each "empty" mbarrier (all the CTA's).  ``q``: Q's load, when
    TMA lands it before the loop straight in that staging (its boxes on the mbarrier at
    ``q_barrier``), so that no thread loads or stores it; else (None) Q is staged from
    registers."""
    ring_base: int
    stage_bytes: int
    mmas: tuple[Operation, Operation]
    tiles: tuple[RingBox, RingBox]
    stagings: tuple[WgmmaStaging, WgmmaStaging]
    source: str
    consumers: int
    q: Optional[RingBox] = None
    #: the multiplies run as ``mma.sync`` (sm_100, sm_120): how they read the ring
    #: (``stagings`` are then None)
    sync: Optional["SyncConsumers"] = None
    #: ``tcgen05`` multiplies: per multiply, whether its accumulator starts as zeros (the
    #: first MMA does not read tensor memory, nothing is stored there first)
    zero_start: tuple[bool, bool] = (False, False)
    #: Q @ K^T of iteration i + 1 is issued in iteration i, so that the tensor core
    #: computes it while the warps run iteration i's softmax; the first before the loop.
    #: ``tcgen05``: once S(i) is read back, into the other of two S buffers in tensor
    #: memory, completing on its own mbarrier (``s_barrier``); ``wgmma``: as soon as S(i)
    #: is there, into a second set of accumulator registers that the loop carries (P @ V's
    #: ``wait_group 0`` completes it), where the ring has three stages or more (with two,
    #: K(i + 1)'s boxes are issued only at the end of iteration i - 1)
    s_ahead: bool = False
    #: the multiplies run on ``tcgen05.mma`` (S and O in tensor memory, P staged)
    tcgen05: bool = False

    def barrier(self, stage: int, tile: int) -> int:
        """Offset of stage ``stage``'s "full" mbarrier of tile ``tile`` (0: K, 1: V), or its
        "empty" one (``tile`` ``EMPTY``); the variable part is ``stage * 24``."""
        return self.barriers + BARRIER_BYTES * (BARRIERS_PER_STAGE * stage + tile)

    @property
    def barriers(self) -> int:
        return self.ring_base + self.ring_bytes

    @property
    def q_barrier(self) -> int:
        """Offset of Q's mbarrier (its boxes land on it once, before the loop), after the
        stages'."""
        return self.barriers + BARRIERS_PER_STAGE * BARRIER_BYTES * self.stages

    @property
    def s_barrier(self) -> int:
        """Offset of the mbarrier S's MMAs commit to (``tcgen05``, ``s_ahead``), after Q's."""
        return self.q_barrier + (BARRIER_BYTES if self.q else 0)

    @property
    def s_committed(self) -> bool:
        """Does S complete on its own mbarrier (``s_barrier``)?"""
        return self.s_ahead and self.tcgen05

    @property
    def smem_end(self) -> int:
        return self.s_barrier + (BARRIER_BYTES if self.s_committed else 0)

    def placed(self, maps: tuple[int, ...]) -> "AttentionRingPlan":
        """This plan reading its tiles (K's, V's, then Q's if TMA lands it) through hidden
        tensor maps ``maps``."""
        tiles = tuple(t.placed(m) for t, m in zip(self.tiles, maps))
        q = self.q.placed(maps[2]) if self.q else None
        return AttentionRingPlan(self.loop, self.mma, self.loads, self.stages, self.ring_base, self.stage_bytes,
                                 self.mmas, tiles, self.stagings, self.source, self.consumers, q, self.sync,
                                 self.zero_start, self.s_ahead, self.tcgen05)


@record(frozen=True)
class SyncConsumers:
    """How a ring's two ``mma.sync`` multiplies read their operands: B with ``ldmatrix``
    from the stage where its boxes landed it (the tile's ``staging`` is a
    ``LandedOperand``: TMA's swizzle of the box width, box after box), plain where B lands
    as N rows of K (``transposed``: K^T's rows are keys), ``.trans`` where as K rows of
    N (V); A as the cp.async ring's (``attention_pipeline``): per multiply from registers
    (``A_HELD``: P), read once before the loop (``A_BEFORE_LOOP``: Q, landed by TMA where
    the plan's ``q`` says, else staged at byte 0 swizzled by ``a_swizzles``) or staged
    below the ring every iteration (``A_STAGED``)."""
    a_from: tuple[str, str]
    a_swizzles: tuple[MmaSwizzle, MmaSwizzle]
    transposed: tuple[bool, bool]


def _align(n: int, to: int = RING_ALIGN) -> int:
    return -(-n // to) * to


def _rebased(operand: OperandStaging, base: int) -> OperandStaging:
    return OperandStaging(operand.layout, operand.swizzle, operand.k_major, operand.mn_dim, base, operand.elem_bytes,
                          operand.origin_unit, operand.padding)


def plan_attention_ring(tas, loop: CF.ForOp, arch: int) -> Union[AttentionRingPlan, str]:
    """The loop's ``AttentionRingPlan``, or the reason it is not pipelined (a sentence):
    ``wgmma`` multiplies (sm_90) or ``tcgen05`` ones (sm_100: P staged every iteration)."""
    tc = any(tas.tensor_cores[op].tcgen05 for op in body_multiplies(tas, loop))
    mmas = attention_multiplies(tas, loop, warpgroup=not tc, tcgen05=tc)
    if isinstance(mmas, str):
        return mmas
    if any(mma not in tas.wgmma_staging for mma in mmas):
        return "a multiply has no wgmma staging"
    if tc:
        if inside_value(mmas[0].lhs, loop):
            return "Q (the first multiply's A) is made in the loop"
    else:
        unstaged = tas.wgmma_staging[mmas[1]].a is not None
        if unstaged or (tas.wgmma_staging[mmas[0]].a is not None and inside_value(mmas[0].lhs, loop)):
            return "an A operand is neither made before the loop nor held as wgmma's A fragments"
    found = [_ring_box(tas, loop, mma, arch) for mma in mmas]
    for f in found:
        if isinstance(f, str):
            return f
    (k_tile, k_staging), (v_tile, v_staging) = found
    staging = (tcgen05_ring_staging(mmas[0], k_tile.staging.k_major) if tc
               else tma_ring_staging(mmas[0], tas.operand_layout(mmas[0], 2), k_tile.staging.k_major))
    q_box = _q_box(tas, loop, mmas[0], arch, staging.a if staging else None)
    q = q_box.staging if q_box else tas.wgmma_staging[mmas[0]].a
    others = max((n for op, n in tas.scratch.items() if op not in mmas), default=0)
    q_base = _align(others)
    q_box = _at(q_box, q_base) if q_box else None
    ring_base = _align(q_base + (q.nbytes if q else 0))
    p = None
    if tc:              # P, stored from registers every iteration where tcgen05.mma reads A
        p = _rebased(tas.wgmma_staging[mmas[1]].a, ring_base)
        ring_base = _align(ring_base + p.nbytes)
    k_tile = _at(k_tile, ring_base)
    v_tile = _at(v_tile, ring_base + _align(k_tile.staging.nbytes))
    stage_bytes = _align(k_tile.staging.nbytes) + _align(v_tile.staging.nbytes)
    stagings = (WgmmaStaging(_rebased(q, q_base) if q else None, k_tile.staging, k_staging.columns,
                             k_staging.spacing, tas.wgmma_staging[mmas[0]].a_registers),
                WgmmaStaging(p, v_tile.staging, v_staging.columns, v_staging.spacing,
                             tas.wgmma_staging[mmas[1]].a_registers))
    per_stage = stage_bytes + BARRIERS_PER_STAGE * BARRIER_BYTES
    taken = (k_tile.load, v_tile.load, *((q_box.load,) if q_box else ()))
    fit = (smem_limit(f"sm_{arch}") - ring_base - BARRIER_BYTES - other_tma_bytes(tas, taken, RING_ALIGN)) // per_stage
    if fit < MIN_STAGES:
        return f"two stages of {stage_bytes} bytes do not fit in shared memory beside {ring_base} of scratch"
    wanted, source = _wanted_stages(tas, loop, arch, mmas, stagings, k_tile.boxes + v_tile.boxes)
    stages = clamped_stages(tas, loop, wanted, fit, MIN_STAGES)
    zero = tuple(tc and zeros_before(mma.operands[2], loop) for mma in mmas)
    if tc:
        ahead = zero[0] and fits(tas, mmas[0])      # a second buffer of S in tensor memory
    else:
        ahead = bool(knobs.s_ahead) and zeros_before(mmas[0].operands[2], loop) and stages >= WGMMA_S_AHEAD_STAGES
    return AttentionRingPlan(loop, mmas[0], (k_tile.load, v_tile.load), stages, ring_base, stage_bytes, tuple(mmas),
                             (k_tile, v_tile), stagings, source, tas.num_threads, q_box, zero_start=zero,
                             s_ahead=ahead, tcgen05=tc)


def tcgen05_attention_reason(tas, loop: CF.ForOp, arch: int) -> Optional[str]:
    """Why flash attention's K/V loop ``loop`` keeps ``mma.sync`` on an sm_100-family
    target, ``tensor_memory.NOT_ATTENTION`` where the loop is not one
    (``attention_pair``), or None: asked by ``tensor_memory.tcgen05_reason`` before the
    forms are chosen, with the rules ``plan_attention_ring`` plans by: both multiplies have
    ``tcgen05`` forms, Q is made before the loop, K and V are tiles of the loop that TMA
    can copy into a layout ``tcgen05.mma`` reads (``tcgen05_ring_staging``), and Q, P and
    two stages fit in shared memory (its other buffers are not known yet: where they
    leave too little room the multiplies still run on ``tcgen05``, their operands stored
    from registers)."""
    mmas = attention_pair(loop)
    if isinstance(mmas, str):
        return NOT_ATTENTION
    for mma in mmas:
        form = tensor_core_mma(mma, arch, tas.num_warps, tas.extra_warps)
        if tcgen05_form(mma, form, tas.num_warps) is None:
            return "a multiply of the attention loop has no tcgen05 form"
    if inside_value(mmas[0].lhs, loop):
        return "Q (the first multiply's A) is made in the loop"
    for mma in mmas:
        found = _b_tile(tas, loop, mma)
        if isinstance(found, str):
            return found
        if _tensor_map(tas, found[0], arch) is None:
            return "a K/V tile cannot be copied by TMA (alignment, padding, ordering or element type)"
        if tcgen05_ring_staging(mma, found[4]) is None:
            return "no swizzled layout TMA lands a K/V tile in is one tcgen05.mma reads"
    q, p, k, v = (_align(x.type.num_elements * element_bytes(x.type))
                  for x in (mmas[0].lhs, mmas[1].lhs, mmas[0].rhs, mmas[1].rhs))
    if q + p + MIN_STAGES * (k + v) > smem_limit(f"sm_{arch}"):
        return "Q, P and two stages of K and V would not fit in shared memory"
    return None


def plan_attention_sync_ring(tas, loop: CF.ForOp, arch: int) -> Union[AttentionRingPlan, str]:
    """The ``AttentionRingPlan`` of a K/V loop whose multiplies run as ``mma.sync`` (sm_100,
    sm_120: NVIDIA's TMA-fed attention there), or why it is not one: the cp.async ring's
    shape (``attention_pipeline``: where A comes from, 16-bit operands) with K and V
    landing by TMA as ``_sync_box`` says, and Q, where it is a TMA-able load before the
    loop (``_q_box``), landing by TMA too, once, where ``ldmatrix`` reads its fragments
    into registers (after the scratch, below the ring: nothing writes it in the loop)."""
    mmas = attention_multiplies(tas, loop, warpgroup=False)
    if isinstance(mmas, str):
        return mmas
    a_swizzles = [mma_swizzle(*mma.lhs.type.shape, element_bytes(mma.lhs.type)) for mma in mmas]
    if None in a_swizzles:
        return "an A operand is not 16-bit with rows of whole 16-byte chunks"
    found = [_sync_box(tas, loop, mma, arch) for mma in mmas]
    for f in found:
        if isinstance(f, str):
            return f
    a_from = tuple(A_HELD if a_in_registers(tas, mma) else A_BEFORE_LOOP if not inside_value(mma.lhs, loop)
                   else A_STAGED for mma in mmas)
    staged = [mma.lhs.type.num_elements * element_bytes(mma.lhs.type) for mma, where in zip(mmas, a_from)
              if where == A_STAGED]
    others = max((n for op, n in tas.scratch.items() if op not in mmas), default=0)
    q_base = _align(max([others, *staged]))
    q_box = _q_box(tas, loop, mmas[0], arch, _landed_a(mmas[0])) if a_from[0] == A_BEFORE_LOOP else None
    q_box = _at(q_box, q_base) if q_box else None
    ring_base = _align(q_base + (q_box.staging.nbytes if q_box else 0))
    (k_tile, k_rows), (v_tile, v_rows) = found
    k_tile = _at(k_tile, ring_base)
    v_tile = _at(v_tile, ring_base + _align(k_tile.staging.nbytes))
    stage_bytes = _align(k_tile.staging.nbytes) + _align(v_tile.staging.nbytes)
    per_stage = stage_bytes + BARRIERS_PER_STAGE * BARRIER_BYTES
    taken = (k_tile.load, v_tile.load, *((q_box.load,) if q_box else ()))
    fit = (smem_limit(f"sm_{arch}") - ring_base - BARRIER_BYTES - other_tma_bytes(tas, taken, RING_ALIGN)) // per_stage
    if fit < MIN_STAGES:
        return f"two stages of {stage_bytes} bytes do not fit in shared memory beside {ring_base} of scratch"
    wanted, source = wanted_stages(tas, loop, arch, mmas, (k_tile, v_tile), (k_tile.boxes, v_tile.boxes))
    stages = clamped_stages(tas, loop, wanted, fit, MIN_STAGES)
    sync = SyncConsumers(a_from, tuple(a_swizzles), (k_rows, v_rows))
    return AttentionRingPlan(loop, mmas[0], (k_tile.load, v_tile.load), stages, ring_base, stage_bytes, tuple(mmas),
                             (k_tile, v_tile), (None, None), source, tas.num_threads, q_box, sync)


def _landed_a(mma: Operation) -> Optional[LandedOperand]:
    """Where TMA lands an ``mma.sync`` multiply's A (M x K, K contiguous) for ``ldmatrix``:
    rows of K in boxes of at most 128 bytes (``landed_form``), 16-bit; None otherwise."""
    form = landed_form(*mma.lhs.type.shape, 2) if element_bytes(mma.lhs.type) == 2 else None
    return LandedOperand(form, 0) if form else None


def _sync_box(tas, loop: CF.ForOp, mma: Operation, arch: int) -> Union[tuple[RingBox, bool], str]:
    """How ``mma``'s B lands by TMA in a stage (at base 0) for ``ldmatrix`` to read, and
    whether it lands as N rows of K, or why it cannot: the tile in memory order, rows of
    its contiguous dim in boxes of at most 128 bytes (``landed_form``), 16-bit."""
    found = _b_tile(tas, loop, mma)
    if isinstance(found, str):
        return found
    ld, relabels, dims, memory, k_rows = found
    rows, cols = memory[-2:]
    esize = element_bytes(ld.results[0].type)
    form = landed_form(rows, cols, esize) if esize == 2 else None
    if form is None:
        return "a K/V tile is not 16-bit in rows TMA's 32-, 64- or 128-byte swizzle fills"
    spec = _tensor_map(tas, ld, arch)
    if spec is None:
        return "a K/V tile cannot be copied by TMA (alignment, padding, ordering or element type)"
    if rows > MAX_BOX:
        return "a K/V tile has more than 256 rows (one TMA box)"
    landed = LandedOperand(form, 0)
    box = (*memory[:-2], rows, form.pitch)
    placed = TensorMapSpec(spec.element_type, spec.element_bytes, spec.base, spec.dims, spec.strides,
                           tuple(reversed(box)), MAP_SWIZZLE[landed.swizzle])
    return RingBox(ld, relabels, landed, box, cols // form.pitch, placed, dims), k_rows


def _b_tile(tas, loop: CF.ForOp, mma: Operation
            ) -> Union[tuple[Operation, tuple[Operation, ...], tuple[int, ...], tuple[int, ...], bool], str]:
    """(the load of ``mma``'s B, its relabels to the multiply, per tensor dim the tile dim
    indexing it, the tile in memory order, whether its contiguous dim is B's K), or why B
    is not a tile a ring can copy: two dims but unit ones (``attention_pipeline.b_load``;
    its index may be one the body computes, ``gathered_copy.index_slice``)."""
    found = b_load(tas, loop, mma, slices_ok=True)
    if isinstance(found, str):
        return found
    ld, relabels, permuted = found
    vt = ld.view.type
    tile = tuple(vt.tile_shape)
    rank = len(tile)
    dims = tuple(vt.dim_map.index(t) for t in range(rank))      # per tensor dim, its tile dim
    memory = tuple(tile[j] for j in dims)                         # the tile in memory order
    if any(d != 1 for d in memory[:-2]):
        return "a loaded K/V tile has more than two dims that are not 1"
    k_dim = rank - 1 if permuted else rank - 2          # B = (t0, t1), or (t1, t0) through the transpose
    return ld, relabels, dims, memory, dims[-1] == k_dim


def _at(tile: RingBox, base: int) -> RingBox:
    return RingBox(tile.load, tile.relabels, _placed(tile.staging, base), tile.box, tile.boxes, tile.spec, tile.dims)


def _placed(operand: Union[OperandStaging, LandedOperand], base: int) -> Union[OperandStaging, LandedOperand]:
    return LandedOperand(operand.form, base) if isinstance(operand, LandedOperand) else _rebased(operand, base)


def _q_box(tas, loop: CF.ForOp, mma: Operation, arch: int, operand: Union[OperandStaging, LandedOperand, None]
           ) -> Optional[RingBox]:
    """How TMA lands Q (the first multiply's A) once before the loop straight in
    ``operand`` (base 0: the K-major swizzled staging ``tma_ring_staging`` gives ``wgmma``'s
    A, or where ``ldmatrix`` reads ``mma.sync``'s), or None where there is no such operand
    or Q is not such a load: a TMA-able load of the loop's block, reaching the multiply
    only through reshapes that drop unit dims, its contiguous dim K, no op between it and
    the loop writing memory (its copy is issued at the loop)."""
    if operand is None:
        return None
    chain, v = [], mma.lhs
    while isinstance(v.owner, CO.ReshapeOp) and not inside_value(v, loop):
        op = v.owner
        if [d for d in op.source.type.shape if d != 1] != [d for d in op.result.type.shape if d != 1]:
            return None
        chain.append(op)
        v = op.source
    ld = v.owner
    if not isinstance(ld, MEM.LoadViewTkoOp) or ld.parent is not loop.parent or inside_value(v, loop):
        return None
    chain.reverse()
    if any(u is not c for value, c in zip([ld.results[0], *(op.result for op in chain)], [*chain, mma])
           for u in tas.users(value)):
        return None
    block = loop.parent.ops
    between = block[block.index(ld) + 1:block.index(loop)]
    if any(writes(op, *DATA_RESOURCES) for top in between for op in top.walk()):
        return None
    vt = ld.view.type
    tile = tuple(vt.tile_shape)
    dims = tuple(vt.dim_map.index(t) for t in range(len(tile)))
    memory = tuple(tile[j] for j in dims)
    spec = _tensor_map(tas, ld, arch)
    if spec is None or dims[-1] != len(tile) - 1 or any(d != 1 for d in memory[:-2]):
        return None
    rows, cols = memory[-2:]
    inner = operand.swizzle.width // operand.elem_bytes
    if rows > MAX_BOX or cols % inner:
        return None
    box = (*memory[:-2], rows, inner)
    placed = TensorMapSpec(spec.element_type, spec.element_bytes, spec.base, spec.dims, spec.strides,
                           tuple(reversed(box)), MAP_SWIZZLE[operand.swizzle])
    return RingBox(ld, tuple(chain), _placed(operand, 0), box, cols // inner, placed, dims)


def _ring_box(tas, loop: CF.ForOp, mma: Operation, arch: int) -> Union[tuple[RingBox, WgmmaStaging], str]:
    """How ``mma``'s B lands by TMA in a stage (at base 0) and the multiply's staging
    ``tma_ring_staging`` gives, or why it cannot."""
    found = _b_tile(tas, loop, mma)
    if isinstance(found, str):
        return found
    ld, relabels, dims, memory, k_major = found
    staging = (tcgen05_ring_staging(mma, k_major) if tas.tensor_cores[mma].tcgen05
               else tma_ring_staging(mma, tas.operand_layout(mma, 2), k_major))
    if staging is None:
        return ("no swizzled layout TMA lands a K/V tile in is one wgmma's descriptors step through (rows "
                "narrower than 32 bytes, or warpgroups interleaved along N)")
    spec = _tensor_map(tas, ld, arch)
    if spec is None:
        return "a K/V tile cannot be copied by TMA (alignment, padding, ordering or element type)"
    rows, cols = memory[-2:]
    inner = staging.b.swizzle.width // staging.b.elem_bytes
    if rows > MAX_BOX or cols % inner:
        return "a K/V tile has more than 256 rows (one TMA box) or rows not whole swizzle atoms"
    box = (*memory[:-2], rows, inner)
    placed = TensorMapSpec(spec.element_type, spec.element_bytes, spec.base, spec.dims, spec.strides,
                           tuple(reversed(box)), MAP_SWIZZLE[staging.b.swizzle])
    return RingBox(ld, relabels, _rebased(staging.b, 0), box, cols // inner, placed, dims), staging


def _tensor_map(tas, ld: Operation, arch: int) -> Optional[TensorMapSpec]:
    """The tensor map of the K/V tensor ``ld`` reads (box and swizzle set by the caller),
    or None where TMA cannot copy it: ``tma.tma_spec``'s rules, except that the view may
    permute the tile's dims (K^T read through ``dim_map``): the ring's boxes are in the
    tensor's order."""
    vt = ld.view.type
    if not allows_tma(ld, f"sm_{arch}") or not isinstance(vt, T.PartitionViewType):
        return None
    view_op = ld.view.owner
    if not isinstance(view_op, MEM.MakePartitionViewOp) or view_op.tensor_view.is_block_argument:
        return None
    if not isinstance(view_op.tensor_view.owner, MEM.MakeTensorViewOp) or vt.tensor_view.strides[-1] != 1:
        return None
    if any(not isinstance(v.type, T.TileType) or v.type.rank for v in ld.index):
        return None
    return view_map_spec(tas.aa, ld, tuple(vt.tile_shape), MAP_TYPES.get(getattr(vt.tensor_view.element, "name", "")))


def _wanted_stages(tas, loop: CF.ForOp, arch: int, mmas: list[Operation], stagings, boxes: int) -> tuple[int, str]:
    """The ``num_stages`` hint, else the stage count of the modulo schedule of the ring's
    boxes and the two multiplies' ``wgmma`` (``tcgen05.mma``) instructions."""
    hinted = stages_hint(tas.aa.function.hints, arch)
    if hinted:
        return hinted, "num_stages hint"
    wgmmas = 0
    for mma, staging in zip(mmas, stagings):
        form = tas.tensor_cores[mma]
        if form.tcgen05:        # one instruction per K step and block of rows
            wgmmas += mma.result.type.shape[0] // tcgen05_rows(mma) * (mma.lhs.type.shape[-1] // form.k)
            continue
        rows_blocks, _ = mma_blocks(tas.operand_layout(mma, 2))
        k = mma.lhs.type.shape[-1]
        wgmmas += rows_blocks * (k // k_steps(staging.b.elem_bytes, k)[0]) * -(-staging.columns // WGMMA_MAX_N)
    try:
        schedule = tma_ring_schedule(boxes, wgmmas, model_for(arch))
    except SchedulingError:
        return MIN_STAGES, "default (no modulo schedule)"
    return schedule.num_stages, "modulo schedule"


def record_attention_ring(tas, plan: AttentionRingPlan, arch: int) -> None:
    """Mark the loop, loads, relabels and multiplies as the plan's; make the scratch reach
    the mbarriers' end; plan the kernel's other TMA loads and stores again after it
    (``tma.plan_tma`` keeps its choices for a subset of its candidates) and append the
    ring's two tensor maps to theirs."""
    for mma in plan.mmas:
        tas.scratch[mma] = plan.smem_end
    tiles = (*plan.tiles, *((plan.q,) if plan.q else ()))
    taken = [t.load for t in tiles]
    plan_again(tas, arch, set(taken))
    maps = list(tas.tensor_maps)
    for tile in tiles:
        if tile.spec not in maps:
            maps.append(tile.spec)
    tas.tensor_maps = tuple(maps)
    plan = plan.placed(tuple(maps.index(t.spec) for t in tiles))
    tas.pipelines[plan.loop] = plan
    for op in (plan.loop, *plan.mmas, *taken, *(r for t in tiles for r in t.relabels)):
        tas.pipelined[op] = plan
    record_index_slices(tas, plan.loop, [t.load for t in plan.tiles])     # a page id the producer computes again for its iteration
