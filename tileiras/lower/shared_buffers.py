"""The CTA's shared-memory buffers, as the TileAS tables place them.

The passes record shared memory where they decide it: each op's scratch (``tas.scratch``,
all at offset 0, ops taking turns between barriers), the rings of pipelined K loops
(``tas.pipelines``: a cp.async ring in the multiply's scratch, or a TMA ring with its
"full" mbarriers), the operands a ``wgmma`` reads from shared memory (``wgmma_staging``),
and TMA's staging buffers and mbarriers (``tas.tma``).  ``shared_buffers`` lists them as
``Buffer`` records, each with the alignment its users need and the ops that use it, so
``--emit=tileas`` can declare them and ``tileas_verify`` can check them; it reads the
tables and decides nothing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir.core import Operation
from ..layout.linear import LinearLayout
from ..record import record
from .mma_forms import OperandStaging
from .software_pipeline import PipelinePlan
from .tma_ring import RingPlan
from .tma import BARRIER_BYTES, STAGING_ALIGN, SWIZZLED_ALIGN

if TYPE_CHECKING:
    from .tileas import TileAS

#: what a scratch region's accesses need: a vector of four 32-bit words (``tileas.SMEM_ALIGN``)
SCRATCH_ALIGN = 16
#: an mbarrier's alignment
BARRIER_ALIGN = 8


@record(frozen=True)
class Buffer:
    """``nbytes`` of shared memory from byte ``offset``, which must be a multiple of
    ``align`` (what its users need), used by ``users`` (a loop: everything in it).
    ``parent``: the buffer this one lies inside (a ring's stage operands), else "".
    ``swizzle`` (bytes of the swizzle row, 0: none) and ``layout`` (offset -> element)
    describe how its elements are placed; ``stages``: a ring's stage count.  A buffer is
    live while its users run (scratch: its op; a ring: its loop), unless ``whole_kernel``."""
    name: str
    kind: str                   # scratch | ring | staging | tma | barrier
    offset: int
    nbytes: int
    align: int
    users: tuple[Operation, ...]
    parent: str = ""
    swizzle: int = 0
    layout: Optional[LinearLayout] = None
    stages: int = 0
    #: live from the kernel's start to its end, not only while its users run: TMA's
    #: buffers and mbarriers (initialized once, at the start)
    whole_kernel: bool = False

    @property
    def end(self) -> int:
        return self.offset + self.nbytes


def shared_buffers(tas: TileAS) -> list[Buffer]:
    """Every buffer the tables place, scratch first (in op order), then TMA's."""
    out: list[Buffer] = []
    if not tas.scratch and not tas.tma:
        return out
    order = {op: i for i, op in enumerate(tas.aa.function.walk())}
    for op in sorted(tas.scratch, key=order.__getitem__):
        plan = tas.pipelines.get(tas.pipelined[op].loop) if op in tas.pipelined else None
        name = f"s{order[op]}"
        if isinstance(plan, (PipelinePlan, RingPlan)) and plan.mma is op:
            out += _ring_buffers(name, plan, tas.scratch[op])
            continue
        out.append(Buffer(name, "scratch", 0, tas.scratch[op], SCRATCH_ALIGN, (op,)))
        staging = tas.wgmma_staging.get(op)
        if staging is not None:
            out += _staging_buffers(name, staging, (op,))
    sharing: dict[int, list[Operation]] = {}   # stores one token orders share a staging (``tma``)
    for op in sorted(tas.tma, key=order.__getitem__):
        if tas.tma[op].carried:
            sharing.setdefault(tas.tma[op].buffer, []).append(op)
    for op in sorted(tas.tma, key=order.__getitem__):
        plan = tas.tma[op]
        users = tuple(sharing[plan.buffer]) if plan.carried else (op,)
        if users[0] is not op:
            continue
        name = f"t{order[op]}"
        align = SWIZZLED_ALIGN if plan.swizzle else STAGING_ALIGN
        stages = plan.stages if plan.stages > 1 else 0      # a streamed load's ring
        out.append(Buffer(name, "tma", plan.buffer, plan.nbytes + plan.stage_bytes * (plan.stages - 1), align,
                          users, swizzle=plan.swizzle, stages=stages, whole_kernel=not plan.over_scratch))
        if plan.barrier is not None:
            out.append(Buffer(f"{name}.full", "barrier", plan.barrier, BARRIER_BYTES * plan.stages, BARRIER_ALIGN,
                              (op,), whole_kernel=True))
    return out


def _ring_buffers(name: str, plan, scratch: int) -> list[Buffer]:
    """A pipelined K loop's ring: the multiply's scratch (its first user), ``stages``
    stages from offset 0; a TMA ring's stages hold ``wgmma``'s swizzled operands and are
    followed by its mbarriers, a "full" one a stage then an "empty" one a stage (a
    persistent ring's lie after TMA's buffers, live the whole kernel)."""
    users = (plan.mma, plan.loop, *plan.loads, *getattr(plan, "scale_loads", ()))
    if isinstance(plan, PipelinePlan):
        return [Buffer(name, "ring", 0, scratch, SCRATCH_ALIGN, users, stages=plan.stages),
                *_stage_operands(name, plan, users)]
    align = max(STAGING_ALIGN, plan.staging.align)      # TMA lands there, in the stagings' swizzles
    barriers = Buffer(f"{name}.barriers", "barrier", plan.barriers, plan.barrier_bytes, BARRIER_ALIGN, users,
                      "" if plan.persistent else name, whole_kernel=plan.persistent)
    return [Buffer(name, "ring", 0, scratch, align, users, stages=plan.stages),
            *_staging_buffers(name, plan.staging, users, STAGING_ALIGN), barriers]


def _stage_operands(parent: str, plan: PipelinePlan, users: tuple[Operation, ...]) -> list[Buffer]:
    """Where A's rows and B's wait in a cp.async ring's first stage (the others follow
    ``stage_bytes`` apart): unpadded and XOR-swizzled by row where ``swizzles`` says so
    (their layout, offset -> element), else padded rows ``a_pitch`` / ``b_pitch`` apart."""
    swizzles = plan.swizzles or (None, None)
    spans = ((0, plan.a_bytes), (plan.a_bytes, plan.stage_bytes - plan.a_bytes))
    return [Buffer(f"{parent}.{key}", "staging", offset, nbytes, SCRATCH_ALIGN, users, parent,
                   layout=None if swizzle is None else swizzle.layout())
            for key, (offset, nbytes), swizzle in zip("ab", spans, swizzles)]


def _staging_buffers(parent: str, staging, users: tuple[Operation, ...], least: int = 0) -> list[Buffer]:
    """A ``wgmma``'s A (unless it comes from registers) and B in shared memory, each
    aligned for its descriptors' swizzle (it repeats on absolute addresses), and at
    least ``least`` (a TMA destination: 128 bytes)."""
    operands: list[tuple[str, OperandStaging]] = [("a", staging.a)] if staging.a is not None else []
    operands.append(("b", staging.b))
    return [Buffer(f"{parent}.{key}", "staging", s.base, s.nbytes, max(least, staging.align), users, parent,
                   s.swizzle.value, s.layout) for key, s in operands]
