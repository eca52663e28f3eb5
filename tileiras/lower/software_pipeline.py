"""Software pipelining of tensor-core K loops (sm_80 and later, ``mma.sync``).

A GEMM K loop loads an A tile and a B tile per iteration and multiplies them into a
loop-carried accumulator.  Unpipelined, each iteration loads both into registers, stores
them to shared memory, waits on a barrier and multiplies: the loads' latency is never
hidden.  Pipelined, the two loads become 16-byte (or 4/8-byte) ``cp.async`` copies
straight into a ring of ``stages`` shared-memory stages, the copies of iteration
``i + stages - 1`` in flight while iteration ``i`` multiplies (``codegen.emit_async``
expands the plan into prologue, steady state and drain).

``plan_pipelines`` decides, once per loop, whether and how; the decision (a
``PipelinePlan``, or the reason it is not pipelined) is recorded in ``TileAS.pipelines``
and codegen only reads it.  A loop is pipelined when

* its body is exactly two view loads, one tensor-core ``mma.sync`` multiply of them (B
  perhaps through a ``permute [1, 0]``: an N x K tile, staged as loaded and read with
  non-transposing ``ldmatrix``; either through a ``reshape`` that drops a 3-D tile's unit
  batch dim, ``unit_reshape``) and the ``continue`` (and ``join_tokens`` of the loads'
  tokens): any other op might use the shared memory the ring occupies; A may instead be
  a gather through a tile of pointers whose rows are contiguous runs, the body then also
  computing its pointers and mask (``gathered_copy``: each copy computes them again for
  its iteration);
* each load is a weak, non-gather load of a partition view whose rows are contiguous (or
  B's columns: a view with its dims swapped, ``columns_contiguous``, staged as N rows of K
  like a transposed B, 8-bit ones padded and read a 32-bit word of four K at a time),
  padded with zeros or not at all (out-of-bounds parts are zero-filled copies, src-size
  0), indexed by the loop's induction variable or values from outside the loop (so the
  index of a later iteration is the induction variable plus steps), and feeds only the
  multiply;
* each global row piece a thread copies is at least 4 bytes wide and aligned
  (``TileAS.vectors``) and the staging rows' pitch keeps the copies aligned;
* two stages fit in the architecture's shared memory.

Loads that ``lower.tma`` gave TMA (sm_90 and later: one box and its mbarrier wait a trip,
nothing in flight) are the ring's too: ``record_plans`` places the kernel's other TMA
buffers again after the ring.

The stage count is the bytecode's ``num_stages`` hint when present, else the modulo
schedule's (``sched.pipeline``: the graph of the pipelined loop's copies, wait and
multiply with the architecture's latency model), at least 2, at most what the shared
memory holds, and no more than a known trip count needs.  16-bit operands are staged in
XOR-swizzled rows (``mma_forms.mma_swizzle``: the layout algebra's ``swizzled_shared``),
whose copies and ``ldmatrix`` phases meet no bank twice; 8- and 32-bit ones, whose B
fragments are not read with ``ldmatrix``, keep the padded rows of the unpipelined multiply
(``mma_forms.mma_staging_pitches``).

On sm_90 and later a loop whose tiles TMA can copy becomes a ``tma_ring.RingPlan`` first
(``mma.sync`` ones too, NVIDIA's form there; TILEIRAS_MMA_TMA_RING=0 keeps them on
``cp.async``), and the ``cp.async`` ring below is for the loops it refuses.
On sm_90 a loop whose multiply runs as ``wgmma`` becomes a ``tma_ring.RingPlan`` instead
(views made at run time, as a grouped GEMM's from its table of arrays, through maps the
kernel builds, as NVIDIA's tool does: ``codegen.device_maps``), or where TMA cannot copy
its tiles (``TILEIRAS_DEVICE_TENSOR_MAPS=0``, a loop inside another whose trips make
such views anew: ``tma.map_home``) a
``PipelinePlan`` whose ``staging`` is the TMA ring's (``mma_forms.tma_ring_staging``): the
same ``cp.async`` ring, its copies landing the tiles in the swizzled layouts ``wgmma``'s
descriptors read (``_wgmma_copy_ring``).  A block-scaled multiply's loop always takes the
``cp.async`` ring (``PipelinePlan.scales``)."""
from __future__ import annotations

from typing import Optional, Union

from ..ir.core import Operation, Value
from ..layout.core import LANE, REG, WARP
from ..layout.linear import LinearLayout, default_blocked
from ..knobs import knobs
from ..record import record
from ..sched.ddg import known_trips, trip_count, work_of
from ..sched.latency import model_for
from ..sched.modulo import SchedulingError
from ..sched.pipeline import pipeline_schedule
from ..target import smem_limit, stages_hint
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.enums import MemoryOrderingSemantics
from .gathered_copy import AddressSlice, address_ops, address_slice, gathered_load_reason
from .k_loop_body import (columns_contiguous, consumer_of, defined_outside, extra_reason, gathered_a, loop_body,
                          operand_loads, second_multiply, second_of, transposing, unit_reshape,
                          view_copy_reason)
from .mma_forms import MmaSwizzle, WgmmaStaging, mma_staging_pitches, mma_swizzle, tma_ring_staging
from .tiles import element_bytes
from .tma import MIN_ARCH as TMA_MIN_ARCH

#: the widest and narrowest ``cp.async`` (``.cg`` takes only 16 bytes, ``.ca`` 4, 8 or 16)
WIDEST_COPY, NARROWEST_COPY = 16, 4


@record(frozen=True)
class KLoopPlan:
    """What every pipelined K loop's plan records: the loop, its multiply, A's and B's
    loads and the ring's stage count (``stage_bytes`` each, in the subclasses)."""
    loop: CF.ForOp
    mma: Operation
    loads: tuple[Operation, Operation]
    stages: int

    @property
    def ring_bytes(self) -> int:
        return self.stages * self.stage_bytes

    @property
    def ahead(self) -> int:
        """How many iterations ahead of the multiply the copies are issued (the prologue's
        count): every stage but the one being read."""
        return self.stages - 1


@record(frozen=True)
class RingScales:
    """A block-scaled multiply's scales in a ``cp.async`` ring: the ``loads`` of A's and B's
    scales, which each stage holds row-major ``at`` (bytes from its start, A's M x K/32 then
    B's K/32 x N).  B's scales are copied like the operands (``copy`` bytes a ``cp.async``,
    ``layouts[1]``); A's rows are narrower than any ``cp.async`` (and 2-byte aligned), so
    each thread loads its bytes of them (``layouts[0]``) when it issues the stage's copies
    and stores them to the stage after the iteration's multiply (NVIDIA's tool loads A's
    scales with ``ld.global.b8`` too)."""

    loads: tuple[Operation, Operation]
    at: tuple[int, int]
    copy: int
    layouts: tuple[LinearLayout, LinearLayout]

    @property
    def end(self) -> int:
        """Where the stage's B scales end, 16-byte aligned: the stage's end."""
        return self.at[1] + -(-self.loads[1].results[0].type.num_elements // SCALE_ALIGN) * SCALE_ALIGN


@record(frozen=True)
class SecondB:
    """A second multiply of the ring's A (``k_loop_body.second_multiply``: a LoRA layer's
    x @ A beside x @ W): its B's ``load``, copied as B's is (``copy`` bytes a ``cp.async``,
    ``layout``) to ``at`` bytes into each stage in rows ``pitch`` elements apart (swizzled
    as ``swizzle`` where the ring's operands are), read with A's fragments."""
    mma: Operation
    load: Operation
    pitch: int
    at: int
    copy: int
    layout: LinearLayout
    swizzle: Optional[MmaSwizzle] = None

    @property
    def end(self) -> int:
        """Where its rows end in the stage (bytes)."""
        return self.at + self.load.results[0].type.num_elements // _row(self.load) * self.pitch * \
            element_bytes(self.load.results[0].type)


@record(frozen=True)
class PipelinePlan(KLoopPlan):
    """How one K loop is pipelined: ``loads`` (A's, B's) become ``cp.async`` copies of
    ``copy_bytes`` each into a ring of ``stages`` stages of ``stage_bytes``; in a stage
    A's rows (``a_pitch`` elements apart) come first and B's (``b_pitch`` apart) start at
    ``a_bytes``; with ``swizzles`` (16-bit operands) the rows are not padded (pitches of
    K and N) and their 16-byte chunks are XOR-swizzled instead.  ``copy_layouts`` (A's,
    B's) give each thread its copies, ``copy_bytes`` consecutive bytes of a row a register
    run.  ``source`` says where the stage count came from."""
    a_pitch: int
    b_pitch: int
    a_bytes: int
    stage_bytes: int
    copy_bytes: tuple[int, int]
    copy_layouts: tuple[LinearLayout, LinearLayout]
    source: str
    swizzles: Optional[tuple[MmaSwizzle, MmaSwizzle]] = None
    #: B is loaded as N x K and permuted (an "NT" GEMM): its stage holds N rows of K
    b_transposed: bool = False
    #: sm_90: the multiply runs as ``wgmma`` and the stage holds its operands as this staging
    #: places them (swizzled, B from ``staging.b.base``; the pitches are the tiles' contiguous
    #: extents), read through matrix descriptors, not ``ldmatrix``
    staging: Optional[WgmmaStaging] = None
    #: B's tile lies column by column in memory (``columns_contiguous``): its stage holds N
    #: rows of K as with ``b_transposed``, copied along K
    b_columns: bool = False
    #: sm_90 ``wgmma``: the groups left running at the end of an iteration (1: the next
    #: iteration's waits and copies overlap the tensor cores; the copies then go one
    #: iteration less ahead, since the stage the previous group reads is still busy), the
    #: accumulator being loop result ``carried``; 0 where ``serial_reason`` says why not
    in_flight: int = 0
    carried: int = 0
    serial_reason: str = ""
    #: A's tile lies column by column in memory (16-bit, swizzled): its stage holds K rows of
    #: M, copied along M and read with ``ldmatrix.trans``
    a_columns: bool = False
    #: a block-scaled multiply (``mmaf_scaled``): its scales in the ring
    scales: Optional["RingScales"] = None
    #: A is gathered through a tile of pointers: how the copies compute its addresses
    a_addresses: Optional[AddressSlice] = None
    #: a second multiply of the same A, its B in the stage too
    second: Optional[SecondB] = None

    @property
    def ahead(self) -> int:
        return self.stages - 1 - self.in_flight

    @property
    def scale_loads(self) -> tuple[Operation, ...]:
        """The loads of a block-scaled multiply's scales the ring copies (none elsewhere)."""
        return self.scales.loads if self.scales else ()

    @property
    def b_k_rows(self) -> bool:
        """Is B's stage N rows of K (transposed, or column-major in memory)?"""
        return self.b_transposed or self.b_columns

    def landed(self, k: int) -> Optional[LinearLayout]:
        """Element offset in a stage (from operand ``k``'s start) -> coordinates of the
        tile as loaded, where the rows are not simply ``pitch`` apart (None)."""
        if self.staging is not None:
            return _landed(self.staging, self.b_transposed)[k]
        if not self.swizzles:
            return None
        layout = self.swizzles[k].layout()
        return layout.permute((1, 0)) if (self.b_columns if k else self.a_columns) else layout

    def operand_bytes(self, k: int) -> int:
        """Byte offset of operand ``k`` in a stage."""
        if self.staging is not None:
            return (self.staging.a, self.staging.b)[k].base
        return self.a_bytes if k else 0


#: per loop: its plan (a ``PipelinePlan`` or ``tma_ring.RingPlan``), or why it is not pipelined
Decision = Union[KLoopPlan, str]


def plan_pipelines(tas, arch: int) -> dict[CF.ForOp, Decision]:
    """The decision for every ``for`` loop whose body holds a tensor-core multiply."""
    out: dict[CF.ForOp, Decision] = {}
    for op in tas.aa.live_ops():
        if isinstance(op, CF.ForOp) and any(o in tas.tensor_cores for o in loop_body(op)):
            out[op] = plan_loop(tas, op, arch)
    return out


def plan_loop(tas, loop: CF.ForOp, arch: int) -> Decision:
    """The loop's ``PipelinePlan`` (or a ``RingPlan``: on sm_90 with ``wgmma``, and on sm_90
    and later with ``mma.sync`` where TMA copies its tiles; a flash-attention loop's
    ``AttentionPlan``, or its ``AttentionRingPlan`` where TMA copies K and V), or the reason
    it is not pipelined (a sentence)."""
    form = next((tas.tensor_cores.get(op) for op in loop_body(loop) if op in tas.tensor_cores), None)
    from .attention_pipeline import is_attention_loop, plan_attention  # noqa: PLC0415  (it builds on KLoopPlan)

    attention = is_attention_loop(tas, loop) and second_of(loop) is None
    if form is not None and form.tcgen05:      # the accumulator stays in tensor memory: a TMA ring
        if attention:                           # flash attention's: S and O each in tensor memory
            from .attention_tma import plan_attention_ring  # noqa: PLC0415

            return plan_attention_ring(tas, loop, arch)
        from .tma_ring import plan_ring  # noqa: PLC0415  (tma_ring builds on this module)

        return plan_ring(tas, loop, arch)
    if form is not None and form.warpgroup:
        if attention:                           # flash attention's K/V loop: a TMA ring (``attention_tma``)
            from .attention_tma import plan_attention_ring  # noqa: PLC0415

            return plan_attention_ring(tas, loop, arch)
        from .tma_ring import plan_ring  # noqa: PLC0415  (tma_ring builds on this module)

        ring = plan_ring(tas, loop, arch)
        if not isinstance(ring, str):
            return ring
        copied = _wgmma_copy_ring(tas, loop, arch)
        return copied if not isinstance(copied, str) else f"{ring}; by cp.async: {copied}"

    if attention:
        if arch >= TMA_MIN_ARCH and knobs.mma_tma_ring:     # NVIDIA's: K and V by TMA
            from .attention_tma import plan_attention_sync_ring  # noqa: PLC0415

            ring = plan_attention_sync_ring(tas, loop, arch)
            if not isinstance(ring, str):
                return ring
            copied = plan_attention(tas, loop, arch)
            return f"no TMA ring ({ring}); {copied}" if isinstance(copied, str) and copied != ring else copied
        return plan_attention(tas, loop, arch)
    ring_reason = ""
    if arch >= TMA_MIN_ARCH and knobs.mma_tma_ring:     # NVIDIA's: TMA boxes, mbarrier stages
        from .tma_ring import plan_ring  # noqa: PLC0415  (tma_ring builds on this module)

        ring = plan_ring(tas, loop, arch)
        if not isinstance(ring, str):
            return ring
        ring_reason = f"no TMA ring ({ring}); "
    copied = _mma_sync_copy_ring(tas, loop, arch)
    return f"{ring_reason}{copied}" if isinstance(copied, str) and ring_reason else copied


def _mma_sync_copy_ring(tas, loop: CF.ForOp, arch: int) -> Decision:
    """The ``cp.async`` ``PipelinePlan`` of an ``mma.sync`` K loop, or why not."""
    shape = _copied_k_loop(tas, loop, a_columns_ok=True)
    if isinstance(shape, str):
        return shape
    mma, a, b, permute, second_mma = shape
    if tas.tensor_cores[mma].warpgroup:
        return "the multiply does not run as mma.sync"
    esize = element_bytes(mma.lhs.type)
    columns = permute is None and columns_contiguous(b)
    a_columns = columns_contiguous(a)
    swizzles = _swizzles(mma, esize, permute is not None or columns, a_columns)
    if a_columns and swizzles is None:
        return "a column-major A is read (with ldmatrix.trans) only for 16-bit elements"
    if permute is not None and swizzles is None:
        return "a transposed B is read with ldmatrix only for 16-bit elements"
    if columns and swizzles is None and esize != 1:
        return "a column-major B is read from N rows of K only for 8- and 16-bit elements"
    a_pitch, b_pitch = ((_row(a), _row(b)) if swizzles else mma_staging_pitches(mma, None, tas.tensor_cores[mma]))
    if columns and swizzles is None:        # 8-bit: N rows of K, padded as A's K rows are
        b_pitch = a_pitch
    copies = tuple(_copy_bytes(tas, ld, pitch * esize) for ld, pitch in ((a, a_pitch), (b, b_pitch)))
    if min(copies) < NARROWEST_COPY:
        return "a thread's piece of a tile row is narrower than 4 bytes or not aligned (cp.async copies 4, 8 or 16)"
    a_bytes = a.results[0].type.num_elements // _row(a) * a_pitch * esize
    stage_bytes = a_bytes + b.results[0].type.num_elements // _row(b) * b_pitch * esize
    layouts = tuple(copy_layout(ld, tas.num_warps, nbytes // esize) for ld, nbytes in zip((a, b), copies))
    addresses = _addresses(tas, loop, a, layouts[0])
    if isinstance(addresses, str):
        return addresses
    scales = _copied_scales(tas, loop, mma, stage_bytes)
    if isinstance(scales, str):
        return scales
    if scales is not None:
        stage_bytes = scales.end
    plain = not (a_columns or columns or permute or scales or addresses)
    second = _second_b(tas, loop, mma, second_mma, swizzles, plain, stage_bytes)
    if isinstance(second, str):
        return second
    if second is not None:
        stage_bytes = -(-second.end // SCALE_ALIGN) * SCALE_ALIGN
    stages = _stages(tas, loop, arch, mma, copies, layouts, stage_bytes)
    if isinstance(stages, str):
        return stages
    return PipelinePlan(loop, mma, (a, b), stages[0], a_pitch, b_pitch, a_bytes, stage_bytes, copies, layouts,
                        stages[1], swizzles, permute is not None, b_columns=columns, a_columns=a_columns,
                        scales=scales, a_addresses=addresses, second=second)


#: where a second multiply's B starts in a stage: a whole 128-byte line, which its swizzle
#: (``mma_swizzle``) assumes
SECOND_ALIGN = 128


def _second_b(tas, loop: CF.ForOp, mma: Operation, second: Optional[Operation], swizzles, plain: bool,
              stage_bytes: int) -> Union[str, SecondB, None]:
    """The B of ``second``, a second multiply of the ring's A (``k_loop_body.second_multiply``),
    in each stage after ``stage_bytes``, copied and laid out as the first B is; None where
    the loop has none; or why it cannot be (``plain``: the first's operands are row-major,
    not gathered, not block-scaled)."""
    if second is None:
        return None
    ld = second.rhs.owner
    form, first = tas.tensor_cores.get(second), tas.tensor_cores[mma]
    if form is None or form.warpgroup or form.tcgen05 or form.bits != first.bits or not plain:
        return "the second multiply of A does not run as the first's mma.sync of row-major operands"
    reason = second_b_reason(tas, loop, second)
    if reason:
        return reason
    esize = element_bytes(ld.results[0].type)
    k, n = second.rhs.type.shape
    swizzle = mma_swizzle(k, n, esize) if swizzles else None
    if swizzles and swizzle is None:
        return "the second multiply's B has no swizzle beside the first's"
    pitch = n if swizzles else mma_staging_pitches(second, None, form)[1]
    copy = _copy_bytes(tas, ld, pitch * esize)
    if copy < NARROWEST_COPY:
        return "a thread's piece of the second B's rows is narrower than 4 bytes or not aligned"
    at = -(-stage_bytes // SECOND_ALIGN) * SECOND_ALIGN
    return SecondB(second, ld, pitch, at, copy, copy_layout(ld, tas.num_warps, copy // esize), swizzle)


def second_b_reason(tas, loop: CF.ForOp, second: Operation, columns_ok: bool = False) -> Optional[str]:
    """Why the B of ``second``, a second multiply of a ring's A, cannot be copied
    iterations early as the ring's operands are (``_load_reason``), or None."""
    return _load_reason(tas, second.rhs.owner, loop, loop.regions[0].blocks[0].args[0], second, tma_ok=True,
                        columns_ok=columns_ok)


def _addresses(tas, loop: CF.ForOp, a: Operation, layout: LinearLayout) -> Union[str, AddressSlice, None]:
    """How the copies of a gathered A (``gathered_copy``) compute its addresses in the copy
    ``layout``, or why they cannot; None for a view load."""
    return address_slice(tas, loop, a, layout) if isinstance(a, MEM.LoadPtrTkoOp) else None


#: where a stage's block scales start: 16-byte aligned for B's ``cp.async`` copies
SCALE_ALIGN = 16


def _copied_scales(tas, loop: CF.ForOp, mma: Operation, operands_end: int) -> Union[str, RingScales, None]:
    """A block-scaled multiply's scales in the ring (``PipelinePlan.scales``), after the
    operands that end at ``operands_end``; None for other multiplies, or why B's scales
    cannot be copied."""
    if not isinstance(mma, AR.MmaFScaledOp):
        return None
    sa, sb = scale_loads(loop, mma)
    copy = _copy_bytes(tas, sb, _row(sb))
    if copy < NARROWEST_COPY or columns_contiguous(sb) or columns_contiguous(sa):
        return "a thread's piece of B's block scales is narrower than 4 bytes or not aligned (cp.async copies 4, 8 or 16)"
    a_at = -(-operands_end // SCALE_ALIGN) * SCALE_ALIGN
    b_at = a_at + -(-sa.results[0].type.num_elements // SCALE_ALIGN) * SCALE_ALIGN
    layouts = (copy_layout(sa, tas.num_warps, 1), copy_layout(sb, tas.num_warps, copy))
    return RingScales((sa, sb), (a_at, b_at), copy, layouts)


def _row(ld: Operation) -> int:
    """Elements of a row of the load's tile as it lies in memory (a column if
    ``columns_contiguous``)."""
    shape = ld.results[0].type.shape
    return shape[0] if columns_contiguous(ld) else shape[-1]


def copy_layout(ld: Operation, num_warps: int, vector: int) -> LinearLayout:
    """Each thread's ``cp.async`` copies of the load's tile: runs of ``vector`` elements
    along the dim contiguous in memory (the columns of a ``columns_contiguous`` one)."""
    shape = ld.results[0].type.shape[-2:]       # a unit_reshape's B: its K x N
    if columns_contiguous(ld):
        return default_blocked(shape[::-1], num_warps, vector).permute((1, 0))
    return default_blocked(shape, num_warps, vector)


def _copied_k_loop(tas, loop: CF.ForOp, a_columns_ok: bool = False) -> Union[
        str, tuple[Operation, Operation, Operation, Optional[CO.PermuteOp], Optional[Operation]]]:
    """``k_loop``'s parts of a loop whose loads ``cp.async`` may copy iterations early
    (``loads_reason``; loads ``lower.tma`` gave TMA too: ``record_plans`` takes them
    back; a column-major A only where ``a_columns_ok``) and its second multiply of A
    (``k_loop_body.second_multiply``) or None, or why not."""
    shape = k_loop(tas, loop, scales_ok=True, gathers_ok=True, extras_ok=True, second_ok=True)
    if isinstance(shape, str):
        return shape
    second = second_of(loop)
    reason = loads_reason(tas, loop, *shape, tma_ok=True, b_columns_ok=True, a_columns_ok=a_columns_ok,
                          also=(second,) if second else ())
    if reason is None and isinstance(shape[0], AR.MmaFScaledOp):
        iv = loop.regions[0].blocks[0].args[0]
        reason = next(filter(None, (_load_reason(tas, ld, loop, iv, shape[0], tma_ok=True)
                                    for ld in scale_loads(loop, shape[0]))), None)
    return reason or (*shape, second)


def _stages(tas, loop: CF.ForOp, arch: int, mma: Operation, copies: tuple[int, int],
            layouts: tuple[LinearLayout, LinearLayout], stage_bytes: int, floor: int = 2
            ) -> Union[str, tuple[int, str]]:
    """(stage count, where it came from) of a ``cp.async`` ring of ``stage_bytes`` stages:
    ``_wanted_stages``, at least 2 (``floor`` unless hinted), at most what shared memory
    holds and a known trip count needs; or why no ring fits."""
    wanted, source = _wanted_stages(tas, loop, arch, mma, copies, layouts)
    if source != "num_stages hint" and wanted < floor:
        wanted, source = floor, f"measured floor (the modulo schedule's {wanted})"
    fit = smem_limit(f"sm_{arch}") // stage_bytes
    if fit < 2:
        return f"two stages of {stage_bytes} bytes do not fit in shared memory"
    return clamped_stages(tas, loop, wanted, fit), source


def _wgmma_copy_ring(tas, loop: CF.ForOp, arch: int) -> Decision:
    """The ``PipelinePlan`` of an sm_90 ``wgmma`` K loop that no TMA ring copies, or why
    not: its loads become ``cp.async`` copies straight into the layouts the TMA ring would
    have landed them in (``tma_ring_staging``), each copy one run of a thread's registers
    that lands whole in one 16-byte chunk of the swizzle (``_lands_whole``)."""
    shape = _copied_k_loop(tas, loop, a_columns_ok=True)
    if isinstance(shape, str):
        return shape
    mma, a, b, permute, second = shape
    if second is not None:      # (its A would be in the ring alone)
        return "a second multiply of A is copied only by mma.sync's cp.async ring (SecondB)"
    columns = permute is None and columns_contiguous(b)
    staging = tma_ring_staging(mma, tas.operand_layout(mma, 2), permute is not None or columns,
                               a_k_major=not columns_contiguous(a))
    if staging is None:
        return "no swizzled layout holds both operands where wgmma's descriptors step through them"
    esize = element_bytes(mma.lhs.type)
    copies = tuple(_copy_bytes(tas, ld, WIDEST_COPY) for ld in (a, b))
    if min(copies) < NARROWEST_COPY:
        return "a thread's piece of a tile row is narrower than 4 bytes or not aligned (cp.async copies 4, 8 or 16)"
    layouts = tuple(copy_layout(ld, tas.num_warps, nbytes // esize) for ld, nbytes in zip((a, b), copies))
    if not all(_lands_whole(layout.invert_and_compose(shared), nbytes // esize)
               for layout, shared, nbytes in zip(layouts, _landed(staging, permute is not None), copies)):
        return "a copy's elements do not land side by side in the swizzled stage"
    addresses = _addresses(tas, loop, a, layouts[0])
    if isinstance(addresses, str):
        return addresses
    stage_bytes = -(-staging.nbytes // staging.align) * staging.align
    stages = _stages(tas, loop, arch, mma, copies, layouts, stage_bytes, WGMMA_COPY_MIN_STAGES)
    if isinstance(stages, str):
        return stages
    carried, serial = wgmma_in_flight(tas, loop, mma)
    if not serial and stages[0] < MIN_IN_FLIGHT_STAGES:
        serial = f"{stages[0]} stages: with a group in flight no copy would run ahead"
    return PipelinePlan(loop, mma, (a, b), stages[0], a.results[0].type.shape[-1], _row(b), staging.b.base,
                        stage_bytes, copies, layouts, stages[1], None, permute is not None, staging, columns,
                        0 if serial else 1, max(carried, 0), serial, a_addresses=addresses)


#: the fewest stages of a ``cp.async`` ring whose ``wgmma`` leaves a group in flight: the
#: stage being read, the one the previous group still reads, one being filled
MIN_IN_FLIGHT_STAGES = 3
#: the fewest stages a ``cp.async`` ring feeding ``wgmma`` takes where shared memory and
#: the trips allow (unless hinted), as the TMA ring's measured floor
#: (``tma_ring.UNSPECIALIZED_MIN_STAGES``): the modulo schedule's 2 for a 128x128x32 tile
#: would leave no copy in flight beside the group
WGMMA_COPY_MIN_STAGES = 4


def wgmma_in_flight(tas, loop: CF.ForOp, mma: Operation) -> tuple[int, str]:
    """(which loop result the accumulator is, or -1; why no ``wgmma`` group may stay in
    flight across iterations, or ""): the accumulator must go from one iteration's
    ``wgmma`` to the next one's unchanged (carried straight from the multiply to the
    ``continue`` and back into the multiply, in the registers ``wgmma`` accumulates in), so
    that no instruction touches it before the group's ``wait_group 0``."""
    block = loop.regions[0].blocks[0]
    terminator = block.ops[-1]
    results = [k for k, v in enumerate(terminator.operands) if v is mma.result]
    if len(results) != 1 or mma.acc is not block.args[1 + results[0]]:
        return -1, "the accumulator is not carried straight from one multiply to the next"
    if element_bytes(mma.result.type) != 4:
        return -1, "the accumulator is converted between the multiplies (wgmma sums 16-bit ones in 32-bit registers)"
    if len(tas.users(block.args[1 + results[0]])) != 1 or len(tas.users(mma.result)) != 1:
        return -1, "the accumulator has users besides the multiply"
    return results[0], ""


def _landed(staging: WgmmaStaging, b_transposed: bool) -> tuple[LinearLayout, LinearLayout]:
    """Element offset -> coordinates of A's and B's tiles as loaded (B N x K if transposed)."""
    return staging.a.tile, staging.b.layout if b_transposed else staging.b.tile


def _lands_whole(to_offset: LinearLayout, chunk: int) -> bool:
    """Does each run of ``chunk`` registers (a copy) land at ``chunk`` consecutive,
    ``chunk``-aligned offsets: the run's register bits give the offset's low bits in order,
    and no other bit of any input sets them?"""
    low = chunk.bit_length() - 1
    regs = to_offset.bases(REG)
    if any(regs[j] != (1 << j,) for j in range(low)):
        return False
    others = [*regs[low:], *to_offset.bases(LANE), *to_offset.bases(WARP)]
    return all(base[0] & (chunk - 1) == 0 for base in others)


def k_loop(tas, loop: CF.ForOp, scales_ok: bool = False, laid_out: bool = True, gathers_ok: bool = False,
           reshapes_ok: bool = False, extras_ok: bool = False, second_ok: bool = False
           ) -> Union[str, tuple[Operation, Operation, Operation, Optional[CO.PermuteOp]]]:
    """(multiply, A's load, B's load, B's transpose or None) of a loop whose body loads two
    tiles and multiplies them on tensor cores into fragments it carries, or why not; with
    ``scales_ok`` the multiply may be block-scaled, its two scale tiles loaded in the loop
    too (``scale_loads``).  Without ``laid_out`` (before TileAS has chosen the forms and
    layouts: ``tensor_memory``) only the body's shape is checked.  With ``reshapes_ok`` A
    and B may be view loads of rank 3 or more whose leading unit dims a ``reshape`` drops
    (``unit_reshape``: a batched GEMM's 3-D tiles, an expert's weights); with ``gathers_ok``
    (a ``cp.async`` ring: reshapes too) A may also be a gather through a tile of pointers,
    the body then also computing its addresses (``gathered_copy``).  With ``extras_ok`` the
    body may do other work too, as long as it touches no shared memory (``extra_reason``):
    an fp8 GEMM's per-block scaling of each K tile's product, its scale tiles loaded as
    they are.  With ``second_ok`` a second multiply of A by another loaded B may stand
    beside the first (``k_loop_body.second_multiply``; the parts returned are the first's)."""
    body = loop_body(loop)
    mmas = [op for op in body if isinstance(op, (AR.MmaFOp, AR.MmaIOp, AR.MmaFScaledOp))]
    pair = second_multiply(body) if second_ok else None
    if pair is not None:
        mmas = [pair[0]]
    loads = [op for op in body if isinstance(op, MEM.LoadViewTkoOp)]
    permute = transposing(mmas[0], body) if len(mmas) == 1 else None
    scaled = 2 if len(mmas) == 1 and isinstance(mmas[0], AR.MmaFScaledOp) else 0
    extra: set[Operation] = {pair[1], pair[1].rhs.owner} if pair is not None else set()
    loads = [ld for ld in loads if ld not in extra]
    reshapes_ok = reshapes_ok or gathers_ok
    if reshapes_ok and len(mmas) == 1 and not scaled and permute is None:
        gathered = gathered_a(mmas[0], body) if gathers_ok else None
        if gathered is not None:
            loads.append(gathered)
            extra |= address_ops(tas, body, gathered)
        extra.update(r for r in (unit_reshape(mmas[0], body, 0), unit_reshape(mmas[0], body, 1)) if r is not None)
    if extras_ok and len(mmas) == 1 and not scaled:
        found = operand_loads(mmas[0], body, permute, reshapes_ok)
        if isinstance(found, str):
            return found
        rest = [op for op in body if op not in (*found, mmas[0], permute, *extra)]
        reason = next(filter(None, (extra_reason(tas, op, laid_out) for op in rest)), None)
        if reason:
            return reason
        loads = list(found)
        extra.update(rest)
    if (len(mmas) != 1 or len(loads) != 2 + scaled
            or len(body) != 3 + scaled + (permute is not None) + len(extra)):
        return "the loop body does more than load two tiles (B perhaps transposed) and multiply them"
    if scaled and not scales_ok:
        return "the multiply's block scales are copied only by cp.async rings"
    mma = mmas[0]
    if scaled and scale_loads(loop, mma) is None:
        return "the multiply's block scales are not tiles the loop loads"
    if mma.result.type.rank != 2:
        return "the multiply is batched"
    if laid_out and tas.tensor_cores.get(mma) is None:
        return "the multiply does not run on tensor cores"
    by_result = {ld.results[0]: ld for ld in loads}
    a_reshape, b_reshape = (unit_reshape(mma, body, k) if reshapes_ok else None for k in (0, 1))
    a = by_result.get(a_reshape.source if a_reshape else mma.lhs)
    b = by_result.get(permute.source if permute else b_reshape.source if b_reshape else mma.rhs)
    if a is None or b is None or a is b:
        return "the multiply's operands are not the two loaded tiles"
    return mma, a, b, permute


def scale_loads(loop: CF.ForOp, mma: Operation) -> Optional[tuple[Operation, Operation]]:
    """The loads in ``loop``'s body of a block-scaled multiply's A and B scales, or None."""
    found = []
    for v in mma.operands[3:5]:
        ld = None if v.is_block_argument else v.owner
        if not isinstance(ld, MEM.LoadViewTkoOp) or ld.parent is not loop.regions[0].blocks[0]:
            return None
        found.append(ld)
    return (found[0], found[1]) if found[0] is not found[1] else None


def loads_reason(tas, loop: CF.ForOp, mma: Operation, a: Operation, b: Operation,
                  permute: Optional[CO.PermuteOp], tma_ok: bool = False, b_columns_ok: bool = False,
                  a_columns_ok: bool = False, also: tuple[Operation, ...] = ()) -> Optional[str]:
    """Why A's and B's loads cannot be issued iterations early (``_load_reason``), or None
    (``b_columns_ok``, ``a_columns_ok``: B's, A's tile may lie column by column,
    ``columns_contiguous``; ``also``: a second multiply that reads A too)."""
    iv = loop.regions[0].blocks[0].args[0]
    for ld, consumer in ((a, consumer_of(mma, 0)), (b, consumer_of(mma, 1, permute))):
        columns_ok = (b_columns_ok and permute is None) if ld is b else a_columns_ok
        if isinstance(ld, MEM.LoadPtrTkoOp):
            reason = gathered_load_reason(tas, ld, consumer)
        else:
            reason = _load_reason(tas, ld, loop, iv, consumer, tma_ok, columns_ok, also if ld is a else ())
        if reason:
            return reason
    for consumer in (consumer_of(mma, 0), consumer_of(mma, 1, permute)):
        if consumer is not mma and any(u is not mma for u in tas.users(consumer.results[0])):
            return "a transposed or reshaped operand has users besides the multiply"
    return None


def _swizzles(mma: Operation, esize: int, b_transposed: bool, a_columns: bool = False
              ) -> Optional[tuple[MmaSwizzle, MmaSwizzle]]:
    """XOR swizzles of A (M x K, or K x M with ``a_columns``) and B (K x N, or N x K
    transposed) where both operands have one (``mma_swizzle``: 16-bit elements, read with
    ``ldmatrix``), else None (padded rows)."""
    k, n = mma.rhs.type.shape
    a = mma_swizzle(*mma.lhs.type.shape[::-1 if a_columns else 1], esize)
    b = mma_swizzle(n, k, esize) if b_transposed else mma_swizzle(k, n, esize)
    return (a, b) if a is not None and b is not None else None


def clamped_stages(tas, loop: CF.ForOp, wanted: int, fit: int, floor: int = 2) -> int:
    """A ring's stage count: ``wanted`` (the hint's or the modulo schedule's), at most what
    shared memory holds (``fit``) and a known trip count needs, never below ``floor``."""
    stages = min(wanted, fit)
    if known_trips(loop, tas.aa):
        stages = min(stages, trip_count(loop, tas.aa))
    return max(floor, stages)


def _load_reason(tas, ld: Operation, loop: CF.ForOp, iv: Value, consumer: Operation, tma_ok: bool = False,
                 columns_ok: bool = False, also: tuple[Operation, ...] = ()) -> Optional[str]:
    """Why the load ``ld`` cannot become asynchronous copies, or None (``tma_ok``: it may
    be one ``lower.tma`` planned: the ring takes it over; ``columns_ok``: its tile may lie
    column by column; ``also``: other multiplies that may read it, from the ring too)."""
    reason = view_copy_reason(ld, columns_ok)
    if reason:
        return reason
    sem = ld.attributes.get("memory_ordering_semantics", MemoryOrderingSemantics.WEAK)
    if sem != MemoryOrderingSemantics.WEAK or (ld in tas.tma and not tma_ok):
        return "a load is ordered or goes through TMA"
    if any(u is not consumer and u not in also for u in tas.users(ld.results[0])):
        return "a loaded tile has users besides the multiply"
    if not defined_outside(ld.view, loop):
        return "a load's view is made inside the loop"
    for index in ld.index:
        if index is not iv and not defined_outside(index, loop):
            return "a load's index is computed inside the loop (not the induction variable)"
    return None


def _copy_bytes(tas, ld: Operation, pitch_bytes: int) -> int:
    """The widest ``cp.async`` the load's alignment facts (``vectorize.allowed_vectors``),
    its tile's row and the staging pitch allow."""
    width = min(tas.access_allowed.get(ld, 1), _row(ld)) * element_bytes(ld.results[0].type)
    width = min(width, WIDEST_COPY)
    while width > 1 and (pitch_bytes % width or width & (width - 1)):
        width //= 2
    return width


def _wanted_stages(tas, loop: CF.ForOp, arch: int, mma: Operation, copies: tuple[int, int],
                   layouts: tuple[LinearLayout, LinearLayout]) -> tuple[int, str]:
    """The ``num_stages`` hint, else the stage count of the modulo schedule of the
    pipelined loop's copies, wait and multiply (``sched.pipeline``) under the
    architecture's latency model."""
    hinted = stages_hint(tas.aa.function.hints, arch)
    if hinted:
        return hinted, "num_stages hint"
    per_thread = tuple(layout.size("reg") // (nbytes // element_bytes(mma.lhs.type))
                       for layout, nbytes in zip(layouts, copies))
    model = model_for(arch)
    try:
        schedule = pipeline_schedule(per_thread, work_of(mma, tas.layout_threads), model)
    except SchedulingError:
        return 2, "default (no modulo schedule)"
    return schedule.num_stages, "modulo schedule"


def pipelined_op(tas, op: Operation) -> Optional[KLoopPlan]:
    """The plan whose loop, loads, B's transpose or multiply ``op`` is, or None (a
    ``PipelinePlan``, a ``RingPlan`` or an ``attention_pipeline.AttentionPlan``)."""
    plan = tas.pipelined.get(op)
    return plan if isinstance(plan, KLoopPlan) else None


def record_plans(tas, arch: int) -> None:
    """Decide every K loop (``plan_pipelines``) and record it in ``tas``: ``pipelines``
    per loop, ``pipelined`` per loop, load and multiply of a pipelined loop, and the ring's
    shared memory as the multiply's scratch.  A ``cp.async`` ring may take loads that
    ``lower.tma`` gave TMA (sm_100, sm_120: its own copies are the pipelined form); the
    kernel's other TMA loads and stores are then planned again after the scratch
    (``tma.plan_tma`` keeps its choices for a subset of its candidates).  A TMA ring takes
    its loads from ``lower.tma``'s plan, whose other buffers are placed again after the
    ring, and appends its tensor maps to the kernel's; its staging replaces the multiply's."""
    from .tma import plan_again  # noqa: PLC0415  (tma_ring, which builds on this module, imports it too)
    from .tma_ring import RingPlan, place_rings  # noqa: PLC0415  (tma_ring builds on this module)

    tas.pipelines = plan_pipelines(tas, arch)
    copied = [d for d in tas.pipelines.values() if isinstance(d, PipelinePlan)]
    for decision in copied:
        tas.scratch[decision.mma] = max(tas.scratch.get(decision.mma, 0), decision.ring_bytes)
        if decision.staging is not None:
            tas.wgmma_staging[decision.mma] = decision.staging
    taken = {ld for d in copied for ld in (*d.loads, *d.scale_loads, *((d.second.load,) if d.second else ()))}
    if tas.tma and copied:
        plan_again(tas, arch, taken)
    rings = [d for d in tas.pipelines.values() if isinstance(d, RingPlan)]
    if rings:
        place_rings(tas, arch, rings)
    for decision in tas.pipelines.values():
        if isinstance(decision, (PipelinePlan, RingPlan)):
            second = getattr(decision, "second", None)
            for op in (decision.loop, decision.mma, *decision.loads, *getattr(decision, "scale_loads", ()),
                       *((second.mma, second.load) if second else ())):
                tas.pipelined[op] = decision
            if second is not None:          # it reads its operands from the ring
                tas.scratch.pop(second.mma, None)
            for k in (0, 1):        # B's transpose, A's or B's unit reshape
                relabel = consumer_of(decision.mma, k, decision.mma.rhs.owner if decision.b_transposed else None)
                if relabel is not decision.mma:
                    tas.pipelined[relabel] = decision
        elif isinstance(decision, KLoopPlan):
            from .attention_pipeline import record_attention  # noqa: PLC0415

            record_attention(tas, decision, arch)
