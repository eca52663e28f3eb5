"""TMA rings: tensor-core K loops software-pipelined through TMA (the decision).

sm_90 ``wgmma`` K loops, and on sm_90 and later those multiplying with ``mma.sync``
(NVIDIA's tileiras builds every aligned GEMM of sm_100 and sm_120 so): for ``mma.sync``
the boxes land each operand in rows of at most 128 bytes in TMA's swizzle of that width,
box after box (``mma_forms.mma_ring_staging``), which ``ldmatrix`` reads without bank
conflicts, and nothing is left in flight across iterations (``SYNC_SERIAL``).  The rest
of this text describes the ``wgmma`` form; the stages, mbarriers, maps, persistence and
warp specialization are the same for both.

A GEMM K loop whose multiply runs as ``wgmma`` (the body ``software_pipeline.k_loop``
accepts) becomes a ``RingPlan`` (``plan_ring``): A's and B's tiles are TMA boxes
(``lower.tma.tma_spec``'s maps, with the box one swizzle atom wide and the swizzle of the
operand's ``wgmma`` layout, ``mma_forms.tma_ring_staging``), so the copies land exactly
where the descriptors read and no thread touches the tiles; one "full" mbarrier a stage.
Its stage count is the hint, else ``sched.pipeline.tma_ring_schedule``'s, at least 2, at
most what the shared memory holds beside the kernel's other TMA buffers (which
``place_rings`` places again after the ring), and no more than a known trip count needs.
A ring whose loop runs inside another loop (a persistent GEMM's K loop inside its loop over
output tiles) is persistent: its mbarriers go after TMA's buffers, outside the scratch
region, initialized once and their phases carried across the loop's entries (``RingPlan``).
A loop that multiplies its A tile by a second B as well (a LoRA layer's x @ W and x @ A) has
that B boxed into every stage too, where both multiplies read it (``RingSecond``).  An 8-bit
B lying K x N, which ``wgmma`` cannot read, lands MN-major and the consumers copy it K-major
within the stage before each multiply (``RingPlan.b_landed``).
``codegen.emit_ring`` emits the plan.
"""
from __future__ import annotations

from typing import Optional, Union

from ..ir.core import Operation
from ..tile.traits import NoMemoryEffect, has_trait
from ..knobs import knobs
from ..layout.linear import LinearLayout, default_blocked, mma_blocks
from ..layout.shared import Swizzle
from ..layout.tensor_core import wgmma_shared_operand, widest_swizzle
from ..record import record
from ..sched.ddg import trip_count
from ..sched.latency import model_for
from ..sched.modulo import SchedulingError
from ..sched.pipeline import tma_ring_schedule
from ..target import smem_limit, stages_hint
from ..tile import ops_control as CF
from .k_loop_body import columns_contiguous, second_of, zeros_before
from .mma_forms import (WGMMA_MAX_N, MmaRingStaging, OperandStaging, WgmmaStaging, k_steps, mma_ring_staging,
                        tcgen05_ring_staging, tma_ring_staging)
from .software_pipeline import (Decision, KLoopPlan, k_loop, known_trips, loads_reason, second_b_reason,
                                wgmma_in_flight)
from .tiles import is_tile
from .tma import (MAX_BOX, TensorMapSpec, enclosing_loop, map_home, other_tma_bytes, plan_again,
                  tma_spec)


@record(frozen=True)
class RingPlan(KLoopPlan):
    """How one K loop is pipelined through TMA (``staging`` a ``WgmmaStaging``, or an
    ``MmaRingStaging`` where ``mma.sync`` reads the stages: ``sync``).  For ``wgmma``:
    ``loads`` (A's, B's) become TMA copies
    (``cp.async.bulk.tensor``, one elected thread) into a ring of ``stages`` stages of
    ``stage_bytes`` from the start of shared memory, each operand landed in the swizzled
    layout ``staging`` gives it (``mma_forms.tma_ring_staging``: the tensor map's swizzle
    is the descriptors'), so ``wgmma`` reads the stage directly.  Operand ``k`` arrives as
    ``boxes[k]`` boxes of ``box[k]`` (tile order: rows, then one swizzle atom's row of
    elements) along its contiguous dim, box ``q`` at ``staging`` base plus ``q`` times the
    box's bytes, through the hidden tensor map ``maps[k]`` (``specs[k]`` its contents).
    Stage ``s``'s "full" mbarrier is at ``barriers + 8 s``; ``tx_bytes`` land on it per
    iteration.  Its "empty" mbarrier, at ``barriers + 8 (stages + s)``, completes a phase
    when each of the ``consumers`` threads has arrived after the ``wgmma`` that read the
    stage has retired; the elected thread waits on it before refilling the stage.
    ``in_flight`` ``wgmma`` groups are left running at the end of an iteration (1: the
    next iteration's copies and waits overlap the tensor cores; 0 where ``serial_reason``
    says why not); the accumulator is loop result ``carried``, completed by the drain's
    ``wait_group 0``.  ``source`` says where the stage count came from.

    ``barrier_at`` >= 0: the ring is persistent (``place_rings``: its loop runs inside
    another loop, as a persistent GEMM's K loop inside its loop over output tiles): its
    mbarriers lie at that offset, outside the scratch region (live the whole kernel, like
    TMA's), initialized once at kernel start, and the ring's stage and phase come from a
    K-tile counter carried across the entries of the loop (use ``u`` of a stage is the
    ``u``-th over the whole kernel, not over one entry).  Else (-1) they follow the stages,
    initialized at each entry of the loop and invalidated after it.

    ``specs[k].on_device``: operand ``k``'s view is made from values the kernel computes
    (a grouped GEMM's, from its table of arrays), so no host callback can fill its map: the
    issuing warp builds it before the first box (``codegen.device_maps``), assembling it in
    ``MAP_BYTES`` at ``map_staging`` (after the mbarriers) and copying it to its slot of the
    kernel's workspace (its place in ``TileAS.device_maps``); ``maps[k]`` is then -1, else
    operand ``k``'s hidden map in ``TileAS.tensor_maps``.  A persistent ring's maps are
    built once, before the outermost loop around its own whose trips keep them
    (``maps_at``, ``tma.map_home``).

    ``producer_warp`` >= 0: the loop is warp-specialized (``place_rings``): the warp group
    from warp ``producer_warp`` on (the CTA's extra warps) runs the producer, its first
    warp waiting on "empty" and its first thread issuing every box, with its registers
    lowered to ``PRODUCER_REGISTERS``, and leaves the kernel after the last box; the
    ``consumers`` (the worker warps) only wait on "full", multiply and release, their
    registers raised to ``registers[1]`` (``registers[0]`` the producers': ``setmaxnreg``).
    Else (-1) ``specialize_reason`` says why not and the worker warps take turns: warp 0
    refills after the multiply.  Warp-specialized and persistent (NVIDIA's persistent
    GEMMs): the producer runs the loop over tiles around the K loop itself, from before
    that loop (the CTA splits there), recomputing per tile ``producer_ops`` (the ops of
    that loop's body the K loop's bounds and the boxes' coordinates come from, in body
    order), so that it fills the next tile's stages while the consumers finish a tile's
    multiply and epilogue; the consumers' barriers from the split on count only them (a
    named barrier: the producer warps are still running).

    ``second``: the loop multiplies A by a second B too (``RingSecond``), which each stage
    holds after the first's operands as operand 2 (``box[2]``, ``boxes[2]``, ``specs[2]``,
    ``maps[2]``; ``all_loads``, ``operands``)."""
    staging: Union[WgmmaStaging, MmaRingStaging]
    stage_bytes: int
    box: tuple[tuple[int, int], ...]
    boxes: tuple[int, ...]
    specs: tuple[TensorMapSpec, ...]
    source: str
    b_transposed: bool = False
    consumers: int = 128
    carried: int = 0
    in_flight: int = 1
    serial_reason: str = ""
    producer_warp: int = -1
    specialize_reason: str = ""
    registers: tuple[int, int] = (0, 0)
    #: the most stages shared memory (beside the kernel's other TMA buffers) and a known
    #: trip count allow
    fit: int = 2
    maps: tuple[int, ...] = (-1, -1)
    barrier_at: int = -1
    #: B's tile lies column by column in memory (a view with its dims swapped,
    #: ``k_loop_body.columns_contiguous``): its boxes are N x K, landed K-major
    b_columns: bool = False
    #: A's tile lies column by column in memory: its boxes are K x M, landed MN-major
    a_columns: bool = False
    #: warp-specialized and persistent: the ops of the loop over tiles the producer
    #: recomputes (``_producer_slice``)
    producer_ops: tuple[Operation, ...] = ()
    #: where the maps the kernel builds are built (``tma.map_home``): None, in the prologue
    #: of each entry; else once, before this loop around the ring's (its trips keep them)
    maps_at: Optional[Operation] = None
    #: of a tile block split over a cluster (``lower/cluster_split``): the operand every CTA
    #: of the cluster reads whole (-1: none), whose boxes go to all ``multicast`` CTAs at
    #: once, each CTA issuing ``1 / multicast`` of every box's rows (``_multicast``)
    shared_operand: int = -1
    multicast: int = 0
    #: ``tcgen05.mma`` reads the stages (one thread issues, into tensor memory): the
    #: MMAs' commit releases each stage ("empty" counts one arrival a CTA), and the
    #: accumulator, loop result ``carried``, stays in tensor memory until the drain
    tcgen05: bool = False
    #: a second multiply of A whose B the stages hold too (a LoRA layer's x @ A)
    second: Optional["RingSecond"] = None
    #: ``tcgen05``: the multiply starts from zeros every iteration and the body reads its
    #: product back into registers (the accumulator is the body's: an fp8 GEMM with block
    #: scales scales each K tile's product before adding it); the stage is released by the
    #: MMAs' commit, the product's columns are free again once every warp has read them
    readback: bool = False
    #: the next iteration's product is computed while the body uses this one's (the
    #: multiply starts from zeros every iteration and the loop does not carry it): with
    #: ``readback`` the MMAs of iteration i + 1 go to a second tensor-memory buffer before
    #: the warps read iteration i's; with ``wgmma`` iteration i issues i + 1's group after
    #: taking its own product (complete) and completes it at the iteration's end, so the
    #: tensor cores multiply while the warps scale and add (NVIDIA's fp8 GEMMs overlap so
    #: too).  Not for a persistent ``wgmma`` ring: its last iteration's group reads a stage
    #: the producer may be refilling for the next tile
    ahead: bool = False
    #: ``wgmma`` with an 8-bit B K x N in memory (wgmma reads 8-bit operands K-major only):
    #: B's boxes land here in each stage, MN-major, and the consumers copy it to
    #: ``staging.b`` (K-major, in the same stage) before the multiply, each thread reading
    #: runs of ``transpose_layout`` (NVIDIA's tileiras transposes such a B through shared
    #: memory too)
    b_landed: Optional[OperandStaging] = None
    transpose_layout: Optional[LinearLayout] = None

    @property
    def persistent(self) -> bool:
        return self.barrier_at >= 0

    @property
    def sync(self) -> bool:
        """Do ``mma.sync`` consumers read the stages (``ldmatrix``), not ``wgmma``?"""
        return isinstance(self.staging, MmaRingStaging)

    @property
    def barriers(self) -> int:
        """Offset of stage 0's "full" mbarrier (the stages' "full" ones, then their
        "empty" ones, 8 bytes each, follow the ring, or lie at ``barrier_at``)."""
        return self.barrier_at if self.persistent else self.ring_bytes

    @property
    def barrier_bytes(self) -> int:
        return RING_BARRIER_BYTES * self.stages

    @property
    def device_maps(self) -> tuple[int, ...]:
        """The operands whose maps the kernel builds (``TensorMapSpec.on_device``)."""
        return tuple(k for k, spec in enumerate(self.specs) if spec.on_device)

    @property
    def map_staging(self) -> int:
        """Offset of the ``MAP_BYTES`` areas, one per device-built map in operand order,
        where the issuing warp assembles them: after the stages and their mbarriers (those
        of a persistent ring lie elsewhere)."""
        return self._map_staging(self.persistent)

    def _map_staging(self, persistent: bool) -> int:
        end = self.ring_bytes + (0 if persistent else self.barrier_bytes)
        return -(-end // MAP_ALIGN) * MAP_ALIGN

    @property
    def smem_bytes(self) -> int:
        """The multiply's scratch: the stages, the mbarriers unless persistent, and the
        areas where device-built maps are assembled."""
        return self.scratch_bytes(self.persistent)

    def scratch_bytes(self, persistent: bool) -> int:
        """``smem_bytes`` of the ring placed persistent or not."""
        if self.device_maps:
            return self._map_staging(persistent) + MAP_BYTES * len(self.device_maps)
        return self.ring_bytes + (0 if persistent else self.barrier_bytes)

    @property
    def tx_bytes(self) -> int:
        """Bytes the boxes of one stage complete on its mbarrier (out-of-bounds parts
        arrive as zeros and count too)."""
        return sum(operand.nbytes for operand in self.operands)

    @property
    def all_loads(self) -> tuple[Operation, ...]:
        """The loads the boxes copy: A's, B's and the second multiply's B's."""
        return (*self.loads, self.second.load) if self.second else self.loads

    @property
    def operands(self) -> tuple:
        """Where each of ``all_loads`` lands in a stage (its staging)."""
        first = (self.staging.a, self.b_landed or self.staging.b)
        return (*first, self.second.staging.b) if self.second else first

    def columns(self, k: int) -> bool:
        """Does operand ``k``'s tile lie column by column in memory (its boxes swapped)?"""
        return (self.a_columns, self.b_columns, self.second.columns if self.second else False)[k]

    def staging_of(self, mma: Operation):
        """The staging the multiply ``mma`` (the ring's or its second) reads."""
        return self.second.staging if self.second and mma is self.second.mma else self.staging

    @property
    def accumulators(self) -> tuple[tuple[Operation, int], ...]:
        """(multiply, the loop result its accumulator is) of the ring's one or two multiplies."""
        first = ((self.mma, self.carried),)
        return (*first, (self.second.mma, self.second.carried)) if self.second else first

    @property
    def specialized(self) -> bool:
        return self.producer_warp >= 0

    @property
    def outer(self) -> Optional[Operation]:
        """A warp-specialized persistent ring's loop over tiles, where the CTA splits."""
        return enclosing_loop(self.loop) if self.specialized and self.persistent else None

    def placed(self, maps: tuple[int, ...], producer_warp: int, consumers: int, reason: str,
               registers: tuple[int, int], stages: int, source: str, barrier_at: int = -1,
               producer_ops: tuple[Operation, ...] = (), ahead: Optional[bool] = None) -> "RingPlan":
        """This plan reading its tiles through hidden tensor maps ``maps``, its producer
        warp ``producer_warp`` (-1: none, ``reason`` why) for ``consumers`` threads, with
        ``registers`` (producers', consumers'), ``stages`` (from ``source``), its
        mbarriers at ``barrier_at`` (-1: after the stages) and, persistent and
        warp-specialized, the ops the producer recomputes per tile."""
        return RingPlan(self.loop, self.mma, self.loads, stages, self.staging, self.stage_bytes, self.box,
                        self.boxes, self.specs, source, self.b_transposed, consumers, self.carried,
                        self.in_flight, self.serial_reason, producer_warp, reason, registers, self.fit, maps,
                        barrier_at, self.b_columns, self.a_columns, producer_ops, self.maps_at,
                        self.shared_operand, self.multicast, self.tcgen05, self.second, self.readback,
                        self.ahead if ahead is None else ahead, self.b_landed, self.transpose_layout)

    @property
    def empty_arrivals(self) -> int:
        """Arrivals that release a stage: every consumer thread of every CTA it is
        multicast to, or with ``tcgen05`` each CTA's commit."""
        return (1 if self.tcgen05 else self.consumers) * max(self.multicast, 1)


@record(frozen=True)
class RingSecond:
    """A second multiply of a TMA ring's A (``k_loop_body.second_multiply``: a LoRA layer's
    x @ A beside x @ W), whose B's ``load`` the boxes copy into every stage too:
    ``staging`` is where it reads its operands (the first's A; its own B after the first's
    operands, from a multiple of ``RING_ALIGN``), ``carried`` the loop result its
    accumulator is, ``columns`` its B's tile lies column by column (boxes N x K).  Its
    ``wgmma`` groups follow the first's in each iteration (the first's ``wait_group``
    retires the previous iteration's, the second's the first's); ``tcgen05``: thread 0
    issues both multiplies' MMAs and one commit releases the stage."""
    mma: Operation
    load: Operation
    staging: WgmmaStaging
    carried: int
    columns: bool = False


#: bytes of one stage's mbarriers ("full" and "empty")
RING_BARRIER_BYTES = 16
#: a tensor map's bytes, and the alignment of the shared memory one is assembled in
#: (``tensormap.cp_fenceproxy`` copies 128 aligned bytes)
MAP_BYTES = MAP_ALIGN = 128
#: an mbarrier's alignment
BARRIER_ALIGN = 8
#: a ring stage's alignment: the 128-byte swizzle repeats every 1024 bytes of address
RING_ALIGN = 1024
#: the warp group a warp-specialized ring adds to the CTA for its producer (NVIDIA's sm_90
#: GEMMs: 256 threads, warps 0-3 consume, warp 4 produces, the rest of warps 4-7 idle)
PRODUCER_WARPS = 4
#: ``setmaxnreg.dec`` of a warp-specialized ring's producer warp group (NVIDIA's)
PRODUCER_REGISTERS = 32
#: the register file of an SM, and the most registers ``setmaxnreg`` and ptxas give a
#: thread (a multiple of 8 below 255)
SM_REGISTERS, MAX_THREAD_REGISTERS = 65536, 248
#: the most threads a CTA has
MAX_CTA_THREADS = 1024
#: the stages a warp-specialized ring takes where shared memory holds them (NVIDIA's 128x128x32)
SPECIALIZED_STAGES = 8
#: the fewest stages an unspecialized ring takes where shared memory and the trips allow:
#: on an H100 a 128x128x32 f16 GEMM's ring of 3 stages (the modulo schedule's) took 1.15x
#: NVIDIA's time at 4096^3, of 4 stages 1.00x (bench/results)
UNSPECIALIZED_MIN_STAGES = 4
#: the stages a ring feeding ``tcgen05.mma`` takes where shared memory and the trips allow
#: (NVIDIA's 128x128x32 f16 GEMM on sm_100 keeps nine; no silicon measurement of ours yet)
TCGEN05_STAGES = 6
#: why a ring is not warp-specialized when nothing says otherwise (``knobs.warp_specialize``)
SPECIALIZE_BY_DEFAULT = ("not by default: on an H100 the unspecialized 4-stage ring ran 128x128x32 GEMMs in "
                         "0.94-0.98x the time of the warp-specialized 8-stage one (TILEIRAS_WARP_SPECIALIZE=1 "
                         "forces it)")
#: a persistent ring (its loop over tiles at the top level) is warp-specialized by default:
#: on an H100 TileGym's persistent 128x128x64 GEMM at 8192^3 took 1.02x NVIDIA's time so,
#: 1.38x with warp 0 refilling (bench/results)


def plan_ring(tas, loop: CF.ForOp, arch: int) -> Decision:
    """The ``RingPlan`` of a ``wgmma`` or ``mma.sync`` K loop, or why it is not pipelined:
    the loads must be TMA-able (``tma.tma_spec``: aligned, zero-padded, matrices: rank 2,
    or a batched GEMM's 3-D tiles reshaped, ``matrix_box``), each
    operand's landed layout one ``wgmma`` reads (``tma_ring_staging``) or ``mma.sync``
    reads (``mma_ring_staging``: 16-bit, or 8-bit with A row-major), each box at most 256
    rows."""
    shape = k_loop(tas, loop, reshapes_ok=True, extras_ok=True, second_ok=True)
    if isinstance(shape, str):
        return shape
    mma, a, b, permute = shape
    second = second_of(loop)
    reason = loads_reason(tas, loop, mma, a, b, permute, tma_ok=True, b_columns_ok=True, a_columns_ok=True,
                          also=(second,) if second else ())
    if reason:
        return reason
    gpu = f"sm_{arch}"
    columns = permute is None and columns_contiguous(b)
    a_columns = columns_contiguous(a)
    loads = (a, b) if second is None else (a, b, second.rhs.owner)
    swapped = (a_columns, columns, second is not None and columns_contiguous(loads[-1]))
    device = bool(knobs.device_tensor_maps)
    found = [tma_spec(tas.aa, ld, gpu, columns_ok=swap, device=device) for ld, swap in zip(loads, swapped)]
    if None in found or not all(matrix_box(ld) for ld in loads):
        return "a loaded tile cannot be copied by TMA (alignment, padding or rank)"
    home = map_home(loop, [spec for spec, _, _ in found])
    if isinstance(home, str):
        return home
    tcgen05 = tas.tensor_cores[mma].tcgen05
    sync = not tas.tensor_cores[mma].warpgroup and not tcgen05
    if tcgen05:
        staging = tcgen05_ring_staging(mma, permute is not None or columns, a_k_major=not a_columns)
    elif sync:
        staging = mma_ring_staging(mma, permute is not None or columns, a_columns)
        if staging is None:
            return ("mma.sync reads TMA-landed operands only of 16-bit elements (8-bit ones with A as M rows "
                    "of K) in rows of 32 bytes or a multiple of 64")
    else:
        staging = tma_ring_staging(mma, tas.operand_layout(mma, 2), permute is not None or columns,
                                   a_k_major=not a_columns)
    landed = None
    if staging is None and not (tcgen05 or sync) and permute is None and not columns and second is None:
        staging, landed = _transposed_b(tas, mma, a_columns)
    if staging is None:
        return ("no swizzled layout TMA lands both operands in is one wgmma's descriptors step through (rows "
                "narrower than 32 bytes, warpgroups interleaved along N)")
    extra = _second(tas, loop, mma, second, staging, swapped[2]) if second is not None else None
    if isinstance(extra, str):
        return extra
    operands = (staging.a, landed or staging.b, *((extra.staging.b,) if extra else ()))
    boxes, box_shapes, specs = [], [], []
    for ld, operand, (spec, _, _), swap in zip(loads, operands, found, swapped):
        shape = ld.results[0].type.shape
        rows, cols = shape[::-1] if swap else shape[-2:]
        inner = operand.swizzle.width // operand.elem_bytes
        if rows > MAX_BOX:
            return "a loaded tile has more than 256 rows (one TMA box)"
        box_shapes.append((rows, inner))
        boxes.append(cols // inner)
        specs.append(TensorMapSpec(spec.element_type, spec.element_bytes, spec.base, spec.dims, spec.strides,
                                   (inner, rows, *shape[:-2]), MAP_SWIZZLE[operand.swizzle]))
    shared, multicast = _multicast(tas, loop, (a, b), box_shapes)
    if multicast:
        spec = specs[shared]
        specs[shared] = TensorMapSpec(spec.element_type, spec.element_bytes, spec.base, spec.dims, spec.strides,
                                      (spec.box[0], spec.box[1] // multicast, *spec.box[2:]), spec.swizzle)
    end = landed.base + landed.nbytes if landed else (extra.staging if extra else staging).nbytes
    stage_bytes = -(-end // RING_ALIGN) * RING_ALIGN
    wanted, source = _ring_stages(tas, loop, arch, mma, staging, sum(boxes))
    built = sum(spec.on_device for spec in specs)
    budget = smem_limit(gpu) - other_tma_bytes(tas, loads) - (MAP_ALIGN + MAP_BYTES * built if built else 0)
    fit = budget // (stage_bytes + RING_BARRIER_BYTES)
    if fit < 2:
        return f"two stages of {stage_bytes} bytes do not fit in shared memory"
    if known_trips(loop, tas.aa):
        fit = max(2, min(fit, trip_count(loop, tas.aa)))
    stages = max(2, min(wanted, fit))
    carried, serial = (-1, SYNC_SERIAL) if sync else wgmma_in_flight(tas, loop, mma)
    if extra is not None and not serial:
        serial = wgmma_in_flight(tas, loop, second)[1]
    # each trip's product from zeros, used by the body (not carried): read back on tcgen05
    fresh = bool(serial) and extra is None and zeros_before(mma.acc, loop)
    readback = tcgen05 and fresh
    if tcgen05 and serial and not readback:
        return f"the accumulator cannot stay in tensor memory: {serial}"
    from .tensor_memory import fits  # noqa: PLC0415  (tensor_memory builds on this module)

    if tcgen05:                 # a second buffer of the product beside the other columns
        ahead = readback and fits(tas, mma)
    else:                       # (off by default: ``knobs.product_ahead``)
        ahead = bool(knobs.product_ahead) and not sync and fresh
    return RingPlan(loop, mma, (a, b), stages, staging, stage_bytes, tuple(box_shapes), tuple(boxes), tuple(specs),
                    source, permute is not None, tas.num_threads, max(carried, 0), 0 if serial else 1, serial,
                    fit=fit, b_columns=columns, a_columns=a_columns, maps_at=home, shared_operand=shared,
                    multicast=multicast, tcgen05=tcgen05, second=extra, readback=readback, ahead=ahead,
                    b_landed=landed, transpose_layout=_transpose_layout(b, tas.num_warps) if landed else None)


#: bytes of B's landed (MN-major) rows each consumer thread reads at once to transpose them
TRANSPOSE_RUN = 16


def _transpose_layout(ld: Operation, num_warps: int) -> LinearLayout:
    """The consumers' registers of B's K x N tile as they transpose it: ``TRANSPOSE_RUN``
    consecutive bytes of a landed row each (one 16-byte read), lanes along K first, so that
    the 32 lanes' bytes of one column land in one K-major row (its 32 consecutive bytes:
    one wavefront a store, where lanes along N put 8 of them in the same bank)."""
    return default_blocked(ld.results[0].type.shape, num_warps, TRANSPOSE_RUN, order=(0, 1))


def _transposed_b(tas, mma: Operation, a_columns: bool) -> tuple[Optional[WgmmaStaging], Optional[OperandStaging]]:
    """(staging, B as its boxes land) of a ``wgmma`` ring whose 8-bit B lies K x N in memory:
    ``wgmma`` reads it K-major from ``staging.b``, where the consumers copy it from the
    MN-major layout its boxes land in after it (in the widest swizzle of its N-byte rows);
    (None, None) for other multiplies."""
    staging = tma_ring_staging(mma, tas.operand_layout(mma, 2), True, a_k_major=not a_columns)
    if staging is None or staging.b.elem_bytes != 1 or staging.b.padding is not None:
        return None, None
    k, n = mma.rhs.type.shape
    swizzle = widest_swizzle(n)
    if swizzle is Swizzle.NONE:
        return None, None
    base = -(-staging.nbytes // RING_ALIGN) * RING_ALIGN
    return staging, OperandStaging(wgmma_shared_operand(n, k, 1, swizzle, False), swizzle, False, 1, base, 1)


def _second(tas, loop: CF.ForOp, mma: Operation, second: Operation, staging: WgmmaStaging, columns: bool
            ) -> Union[str, RingSecond]:
    """The ``RingSecond`` of ``second``, a second multiply of the ring's A, its B landed
    after ``staging``'s operands; or why its B cannot be in the stages: the multiply must
    run as the first does (``wgmma`` or ``tcgen05``), read A from the stage just as the first
    does, and its B copy as the first's."""
    form, first = tas.tensor_cores.get(second), tas.tensor_cores[mma]
    if form is None or form.warpgroup != first.warpgroup or form.tcgen05 != first.tcgen05 or not (
            first.warpgroup or first.tcgen05):
        return "a second multiply of A is pipelined through TMA only where both run as wgmma or as tcgen05"
    reason = second_b_reason(tas, loop, second, columns)
    if reason:
        return reason
    if first.tcgen05:
        own = tcgen05_ring_staging(second, columns, a_k_major=staging.a.k_major)
    else:
        own = tma_ring_staging(second, tas.operand_layout(second, 2), columns, a_k_major=staging.a.k_major)
    if own is None or own.a != staging.a:
        return "the second multiply of A cannot read A where the first's boxes land it"
    carried, serial = wgmma_in_flight(tas, loop, second)
    if first.tcgen05 and serial:
        return f"the second accumulator cannot stay in tensor memory: {serial}"
    b, base = own.b, -(-staging.nbytes // RING_ALIGN) * RING_ALIGN        # its B moved after the first's
    b = OperandStaging(b.layout, b.swizzle, b.k_major, b.mn_dim, base, b.elem_bytes, b.origin_unit, b.padding)
    return RingSecond(second, second.rhs.owner, WgmmaStaging(staging.a, b, own.columns, own.spacing),
                      max(carried, 0), columns)


def matrix_box(ld: Operation) -> bool:
    """Is the load's tile a matrix (2-D, or a 3-D or higher one whose leading dims are 1
    and that its dims are not swapped in: ``unit_reshape``), one box of ``box[k]`` rows?"""
    shape = ld.results[0].type.shape
    return len(shape) == 2 or (len(shape) > 2 and all(d == 1 for d in shape[:-2]) and not columns_contiguous(ld))


#: rows of a swizzled box after which its swizzle pattern repeats (8 rows of the swizzle's
#: width: 1024 bytes for 128-byte rows): a box cut into parts of a multiple of them lands
#: each part where the whole box would have put it
SWIZZLE_ROWS = 8


def _multicast(tas, loop: CF.ForOp, loads: tuple, box_shapes: list) -> tuple[int, int]:
    """(operand, CTAs): in a tile block split over a cluster (``TileAS.cluster_split``), the
    operand every CTA loads whole (``TileAS.cluster_whole``: the same tile in each) is
    multicast (``cp.async.bulk.tensor...multicast::cluster``): each CTA issues its slice of
    every box's rows to all the cluster's CTAs, as NVIDIA's tool does, and each CTA's
    "empty" mbarriers count the consumers of all; (-1, 0) where none applies."""
    ctas = tas.cluster_split
    whole = [k for k, ld in enumerate(loads) if ld in tas.cluster_whole]
    if ctas < 2 or len(whole) != 1:
        return -1, 0
    rows = box_shapes[whole[0]][0]
    if rows % (ctas * SWIZZLE_ROWS):
        return -1, 0
    return whole[0], ctas


#: why a ring feeding ``mma.sync`` leaves nothing in flight: ``ldmatrix`` has read the stage
#: when the iteration's multiplies are issued
SYNC_SERIAL = "mma.sync reads its stage synchronously (ldmatrix)"

#: the tensor map's swizzle field (``codegen.tensormap.Swizzle``) per swizzle
MAP_SWIZZLE = {Swizzle.B32: 1, Swizzle.B64: 2, Swizzle.B128: 3}


def _ring_stages(tas, loop: CF.ForOp, arch: int, mma: Operation, staging, copies: int
                 ) -> tuple[int, str]:
    """The ``num_stages`` hint, else the stage count of the modulo schedule of the ring's
    copies, wait and ``wgmma`` (``sched.pipeline.tma_ring_schedule``); for ``mma.sync``
    consumers the unspecialized ring's floor (the modulo schedule models ``wgmma``)."""
    hinted = stages_hint(tas.aa.function.hints, arch)
    if hinted:
        return hinted, "num_stages hint"
    if isinstance(staging, MmaRingStaging):
        return UNSPECIALIZED_MIN_STAGES, "default (mma.sync consumers)"
    if tas.tensor_cores[mma].tcgen05:
        return TCGEN05_STAGES, "default (tcgen05 consumers)"
    rows_blocks, _ = mma_blocks(tas.operand_layout(mma, 2))
    k = mma.lhs.type.shape[-1]
    wgmmas = rows_blocks * (k // k_steps(staging.b.elem_bytes, k)[0]) * -(-staging.columns // WGMMA_MAX_N)
    try:
        schedule = tma_ring_schedule(copies, wgmmas, model_for(arch))
    except SchedulingError:
        return UNSPECIALIZED_MIN_STAGES, "default (no modulo schedule)"
    if schedule.num_stages < UNSPECIALIZED_MIN_STAGES:
        return UNSPECIALIZED_MIN_STAGES, f"measured floor (the modulo schedule's {schedule.num_stages})"
    return schedule.num_stages, "modulo schedule"


def place_rings(tas, arch: int, rings: list[RingPlan], persistent: bool = True) -> None:
    """The rings' shared memory and tensor maps; the kernel's other TMA loads and stores
    planned again after the largest scratch (``tma.plan_tma`` keeps its choices for a
    subset of its candidates in the same order); the mbarriers of persistent rings
    (``_persistent_loops``) after those, unless they would not fit (``persistent``
    False: every ring's mbarriers follow its stages)."""
    taken = {ld for ring in rings for ld in ring.all_loads}
    nested = _persistent_loops(tas, rings) if persistent else set()
    reason, slice_ = _specialize_reason(tas, rings, nested)
    planned, scratch = rings, dict(tas.scratch)
    if not reason:
        rings = [_deepened(ring) for ring in rings]
    for ring in rings:
        need = ring.scratch_bytes(ring.loop in nested)
        tas.scratch[ring.mma] = max(tas.scratch.get(ring.mma, 0), need)
        if not ring.sync:
            tas.wgmma_staging[ring.mma] = ring.staging
            if ring.second:
                tas.wgmma_staging[ring.second.mma] = ring.second.staging
    plan_again(tas, arch, taken)
    maps = list(tas.tensor_maps)
    barrier_at: dict[CF.ForOp, int] = {}
    at = -(-max(tas.scratch_bytes, tas.tma_end) // BARRIER_ALIGN) * BARRIER_ALIGN
    for ring in rings:
        if ring.loop in nested:
            barrier_at[ring.loop] = at
            at += ring.barrier_bytes
    if barrier_at and at > smem_limit(f"sm_{arch}"):
        tas.scratch = scratch
        place_rings(tas, arch, planned, persistent=False)
        return
    if barrier_at:
        tas.tma_end = at
    if not reason and not tas.extra_warps:
        tas.extra_warps = PRODUCER_WARPS
    for ring in rings:
        for spec in ring.specs:
            if not spec.on_device and spec not in maps:
                maps.append(spec)
        producer, consumers = (-1, tas.num_threads) if reason else (tas.num_warps, tas.layout_threads)
        indices = tuple(-1 if spec.on_device else maps.index(spec) for spec in ring.specs)
        persistent = ring.loop in barrier_at
        tas.pipelines[ring.loop] = ring.placed(indices, producer,
                                               consumers, reason, (0, 0) if reason else _registers(tas),
                                               ring.stages, ring.source, barrier_at.get(ring.loop, -1), slice_,
                                               ring.ahead and (ring.tcgen05 or not persistent))
    tas.tensor_maps = tuple(maps)


def _persistent_loops(tas, rings: list[RingPlan]) -> set[CF.ForOp]:
    """The loops of ``rings`` that run inside another loop (a persistent GEMM's K loop in
    its loop over output tiles), whose rings keep their mbarriers for the whole kernel:
    initialized once, their phases carried across the loop's entries (``RingPlan``).
    None where the kernel has attention loops, which place TMA's buffers again after the
    rings (``attention_pipeline.record_attention``)."""
    from .stream_pipeline import UnrolledLoop  # noqa: PLC0415

    if not all(isinstance(d, (str, RingPlan, UnrolledLoop)) for d in tas.pipelines.values()):
        return set()
    return {ring.loop for ring in rings if enclosing_loop(ring.loop) is not None}


def _deepened(ring: RingPlan) -> RingPlan:
    """A warp-specialized ring's stages: its consumers hold the SM's registers (one CTA an
    SM), so the ring takes the SM's shared memory, as NVIDIA's do (7 or 8 stages of a
    128x128x32 f16 GEMM), up to ``SPECIALIZED_STAGES``; a ``num_stages`` hint stands."""
    if ring.source == "num_stages hint" or ring.stages >= min(ring.fit, SPECIALIZED_STAGES):
        return ring
    return ring.placed(ring.maps, ring.producer_warp, ring.consumers, ring.specialize_reason, ring.registers,
                       min(ring.fit, SPECIALIZED_STAGES), "shared memory (warp-specialized)")


def _registers(tas) -> tuple[int, int]:
    """``setmaxnreg`` of the producers (``dec``) and the consumers (``inc``).  ptxas gives
    the kernel the largest ``setmaxnreg`` count as its register count, which every thread
    of the CTA holds at launch; the consumers take the CTA's whole share of the register
    file (one CTA an SM, as NVIDIA's 255-register GEMMs), the producers keep few."""
    share = SM_REGISTERS // tas.num_threads // 8 * 8
    return PRODUCER_REGISTERS, min(MAX_THREAD_REGISTERS, share)


def _specialize_reason(tas, rings: list[RingPlan], nested: set) -> tuple[str, tuple[Operation, ...]]:
    """Why the ring is not warp-specialized, or "" and the ops its producer recomputes per
    tile.  The producer warps are the CTA's extra warp group (added if the kernel has
    none: ``.reqntid`` grows to NVIDIA's), whose other warps only held copies of the
    workers' values, and leave the kernel after the ring's last box, so the kernel must
    have one ring, either at its top level (not inside another loop or branch, which would
    run it again; not by default, ``SPECIALIZE_BY_DEFAULT``) or persistent, directly in a
    ``for`` over tiles at the top level whose body the producer can run
    (``_producer_slice``)."""
    if knobs.warp_specialize is False:
        return "turned off (TILEIRAS_WARP_SPECIALIZE=0)", ()
    if len(rings) != 1:
        return "the kernel has more than one TMA ring", ()
    if tas.extra_warps not in (0, PRODUCER_WARPS):
        return f"the CTA already has {tas.extra_warps} extra warps", ()
    if tas.layout_threads + 32 * PRODUCER_WARPS > MAX_CTA_THREADS:
        return "a producer warp group does not fit in the CTA", ()
    ring = rings[0]
    top = tas.aa.function.body.blocks[0]
    if ring.loop in nested:
        return _producer_slice(tas, ring, top)
    if knobs.warp_specialize is None:
        return SPECIALIZE_BY_DEFAULT, ()
    if ring.loop.parent is None or ring.loop.parent is not top:
        return "the loop is inside another loop or branch (the producer warps leave after it)", ()
    return "", ()


def _producer_slice(tas, ring: RingPlan, top) -> tuple[str, tuple[Operation, ...]]:
    """("", the ops of the loop over tiles that the K loop's bounds and its loads' views
    and indices come from, in body order), or why a producer cannot run that loop: it must
    be a ``for`` at the kernel's top level holding the K loop directly; those ops pure
    scalar computations without memory effects (a divide traps in the consumers as it
    would in the producer, on the same tile) from values made before the loop and its
    induction variable (not the values it carries); and no other op in it may use the
    scratch region, where the
    producer fills the next tile's stages while the consumers run the tile's epilogue."""
    outer = enclosing_loop(ring.loop)
    body = outer.regions[0].blocks[0]
    if not isinstance(outer, CF.ForOp) or outer.parent is not top or ring.loop.parent is not body:
        return "the K loop is not directly in a 'for' over tiles at the kernel's top level", ()
    users = [op for op in outer.walk() if op is not outer and tas.scratch.get(op, 0) and op is not ring.mma]
    if users:
        return f"'{users[0].name}' in the loop over tiles uses the scratch region the ring's stages lie in", ()
    wanted = [*ring.loop.operands[:3], *(v for ld in ring.all_loads for v in (ld.view, *ld.index))]
    inner_iv = ring.loop.regions[0].blocks[0].args[0]
    found: set[Operation] = set()
    while wanted:
        v = wanted.pop()
        if v is inner_iv or v is body.args[0]:
            continue
        if v.is_block_argument:
            if v.owner is body:
                return "the K loop's copies depend on a value the loop over tiles carries", ()
            if v.owner is not top:
                return "the K loop's copies depend on a value made in the K loop", ()
            continue
        op = v.owner
        if op.parent is not body:
            if op.parent is not top:
                return "the K loop's copies depend on a value made in the K loop", ()
            continue
        if op in found:
            continue
        if op.regions or not has_trait(op, NoMemoryEffect) or any(is_tile(r) and r.type.shape for r in op.results):
            return f"the K loop's copies depend on '{op.name}', which the producer cannot compute again", ()
        found.add(op)
        wanted.extend(op.operands)
    return "", tuple(op for op in body.ops if op in found)
