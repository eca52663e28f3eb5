"""The TileAS verifier: the invariants later passes and codegen rely on, checked after
each pass (``pipeline.run_stages`` with ``CompileOptions.verify_each``; the test suite
turns it on for every compilation).

* every tile value has a layout once layouts are assigned, and each layout's shape is
  its value's, its threads the CTA's (32 lanes, ``num_warps`` warps);
* a conversion's operand exists and has a layout (its source), the target has the
  operand's shape; recomputed conversions are conversions, and compute the operand
  again in the conversion's layout;
* shared buffers (``shared_buffers``) lie at offsets aligned as their users need (TMA
  128 bytes, 1024 swizzled; wgmma descriptors' swizzles; rings), inside their parent and,
  once memory is allocated, inside the CTA's ``smem_bytes`` with its base aligned for
  them; buffers live at the same time do not overlap;
* a pipelined loop has at least one stage, its ring fits the multiply's scratch, a TMA
  load has its mbarrier; nothing else in the loop over tiles of a warp-specialized
  persistent ring uses the scratch region (its producer runs ahead into the next tile);
* a vector width is a power of two that divides what the facts allow and the run of
  consecutive elements the thread's layout holds;
* each tensor-core form exists on the architecture and fits its multiply's shape;
* once the emission order is recorded, every op comes after the ops of its block whose
  values it reads.

A violation raises ``TileASVerifyError`` naming the function, the op (its walk index,
as ``--emit=tileas`` labels it) and the invariant.  Each check is one pass over a table:
cheap enough to run after every pass.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..errors import CompileError
from ..ir.core import Operation, Value
from ..layout.core import LANE, WARP, LinearLayout
from ..tile import ops_memory as MEM
from .chunks import chunk_layout_of
from .cta_size import TCGEN05_ARCHS
from .mma_forms import BLOCK_SCALED_ARCHS, MMA_SYNC_FORMATS, WARPGROUP, WGMMA_ARCHS
from .shared_buffers import Buffer, shared_buffers
from .software_pipeline import PipelinePlan
from .tma_ring import RingPlan
from .tiles import is_tile
from .vectorize import access_dim, register_run

if TYPE_CHECKING:
    from .tileas import TileAS

#: bits of K one tensor-core instruction takes per row (every mma.sync and wgmma form)
MMA_K_BITS = 256
#: the lowest architecture of each mma operand format (PTX name)
FORMAT_ARCH = {ptx: arch for ptx, _bits, _k, arch in MMA_SYNC_FORMATS.values()}
#: the stages after which a check's table is complete
LAYOUTS, MEMORY = "assign-layouts", "allocate-shared-memory"


class TileASVerifyError(CompileError):
    """A TileAS that breaks an invariant (a compiler bug)."""


class Verifier:
    def __init__(self, tas: TileAS, arch: int):
        self.tas = tas
        self.arch = arch
        self.fn = tas.aa.function
        self._index: Optional[dict[Operation, int]] = None
        #: layouts (by identity) whose threads were found to be the CTA's
        self.spans_cta: set[int] = set()

    @property
    def index(self) -> dict[Operation, int]:
        if self._index is None:
            self._index = {op: i for i, op in enumerate(self.fn.walk())}
        return self._index

    def fail(self, op: Optional[Operation], message: str) -> TileASVerifyError:
        where = f"@{self.index[op]} {op.name}: " if op is not None else ""
        return TileASVerifyError(f"tileas @{self.fn.name}: {where}{message}")

    # -- emission order ----------------------------------------------------------------------
    def emission(self) -> None:
        """Each emitted op comes after the ops of its block whose values it reads (a chunked
        loop's members inside the loop, at its anchor's place outside it)."""
        from .emission_order import reads

        tas = self.tas
        if not tas.emission:
            return

        def place(op: Operation) -> Optional[int]:
            group = tas.chunked.get(op)
            return tas.emission.get(op if group is None else group.anchor)

        for op in tas.emission:
            group = tas.chunked.get(op)
            mine = place(op)
            for v in reads(tas, op):
                src = _owner(v)
                if src is None or src.parent is not op.parent or (group is not None and src in group.ops):
                    continue
                before = place(src)
                if before is None or mine is None or before >= mine:
                    raise self.fail(op, f"is emitted before @{self.index[src]} {src.name}, whose value it reads")

    # -- layouts ---------------------------------------------------------------------------
    def layout(self, op: Optional[Operation], what: str, layout: LinearLayout, shape: tuple) -> None:
        if layout.shape != tuple(shape):
            raise self.fail(op, f"{what} has layout of shape {list(layout.shape)}, its type {list(shape)}")
        if id(layout) in self.spans_cta:    # many values share a layout object
            return
        self.spans_cta.add(id(layout))
        if layout.size(LANE) != 32 or layout.size(WARP) != self.tas.num_warps:
            raise self.fail(op, f"{what}'s layout spans {layout.size(LANE)} lanes and {layout.size(WARP)} "
                                f"warps, the CTA 32 and {self.tas.num_warps}")

    def layouts(self, complete: bool) -> None:
        tas = self.tas
        for v, layout in tas.layouts.items():
            self.layout(_owner(v), f"value #{v.index}", layout, v.type.shape)
        if not complete:
            return
        for op in tas.aa.live_ops():
            for r in op.results:
                if is_tile(r) and r not in tas.layouts:
                    raise self.fail(op, f"result #{r.index} ({r.type}) has no layout")

    def converts(self) -> None:
        tas = self.tas
        for (op, i), layout in tas.converts.items():
            if i >= len(op.operands):
                raise self.fail(op, f"converts operand {i} of {len(op.operands)}")
            v = op.operands[i]
            if v not in tas.layouts:
                raise self.fail(op, f"operand {i} is converted but has no layout to convert from")
            self.layout(op, f"operand {i}'s conversion", layout, v.type.shape)
        for table in ("recomputed", "recompute_converts"):
            for op, i in getattr(tas, table):
                if (op, i) not in tas.converts:
                    raise self.fail(op, f"operand {i} is in {table} but not converted")
        for (op, i), way in tas.recomputed.items():
            if way.get(op.operands[i]) != tas.converts[op, i]:
                raise self.fail(op, f"operand {i} is recomputed into another layout than its conversion's")

    # -- shared memory ---------------------------------------------------------------------
    def span(self, b: Buffer) -> tuple[int, int]:
        """Walk indices from the buffer's first user to the end of the last (a loop: its
        body), or the whole kernel."""
        if b.whole_kernel:
            return 0, len(self.index)
        users = b.users
        first = min(self.index[u] for u in users)
        last = max(self.index[u] + sum(1 for _ in u.walk()) - 1 for u in users)
        return first, last

    def buffers(self, allocated: bool) -> None:
        tas = self.tas
        buffers = shared_buffers(tas)
        by_name = {b.name: b for b in buffers}
        for b in buffers:
            op = b.users[0]
            if b.offset % b.align:
                raise self.fail(op, f"buffer @{b.name} at offset {b.offset} is not {b.align}-byte aligned")
            parent = by_name.get(b.parent)
            if parent is not None and not (parent.offset <= b.offset and b.end <= parent.end):
                raise self.fail(op, f"buffer @{b.name} [{b.offset}, {b.end}) is outside @{parent.name} "
                                    f"[{parent.offset}, {parent.end})")
            if allocated and b.end > tas.smem_bytes:
                raise self.fail(op, f"buffer @{b.name} ends at {b.end}, past the {tas.smem_bytes} bytes allocated")
            if allocated and tas.smem_align % b.align:
                raise self.fail(op, f"buffer @{b.name} needs {b.align}-byte alignment, shared memory has "
                                    f"{tas.smem_align}")
        self.overlaps([b for b in buffers if not b.parent])

    def overlaps(self, buffers: list[Buffer]) -> None:
        spans = [self.span(b) for b in buffers]
        for k, b in enumerate(buffers):
            for j in range(k):
                o, (s0, s1), (t0, t1) = buffers[j], spans[k], spans[j]
                if s0 <= t1 and t0 <= s1 and b.offset < o.end and o.offset < b.end:
                    raise self.fail(b.users[0], f"buffer @{b.name} [{b.offset}, {b.end}) overlaps @{o.name} "
                                                f"[{o.offset}, {o.end}) while both are live")

    def pipelines(self) -> None:
        tas = self.tas
        for loop, plan in tas.pipelines.items():
            if not isinstance(plan, (PipelinePlan, RingPlan)):
                continue
            if plan.stages < 1:
                raise self.fail(loop, f"a ring of {plan.stages} stages")
            need = plan.smem_bytes if isinstance(plan, RingPlan) else plan.ring_bytes
            if tas.scratch.get(plan.mma, 0) < need:
                raise self.fail(plan.mma, f"the ring needs {need} bytes (stages and barriers), the multiply's "
                                          f"scratch has {tas.scratch.get(plan.mma, 0)}")
            outer = plan.outer if isinstance(plan, RingPlan) else None
            for op in outer.walk() if outer is not None else ():
                if op is not outer and op is not plan.mma and tas.scratch.get(op, 0):
                    raise self.fail(op, "uses the scratch region in the loop over tiles whose next stages a "
                                        "warp-specialized ring's producer fills meanwhile")
        for op, plan in tas.tma.items():
            if isinstance(op, MEM.LoadViewTkoOp) and plan.barrier is None:
                raise self.fail(op, "a TMA load without an mbarrier")

    # -- accesses and multiplies -----------------------------------------------------------
    def vectors(self) -> None:
        tas = self.tas
        for op, v in tas.vectors.items():
            allowed = tas.access_allowed.get(op, 1)
            if v & (v - 1) or allowed % v:
                raise self.fail(op, f"vector width {v} does not divide the {allowed} elements the facts allow")
            layout = _accessed_layout(tas, op)
            if layout is not None and register_run(layout, access_dim(op)) % v:
                raise self.fail(op, f"vector width {v} does not divide the run of "
                                    f"{register_run(layout, access_dim(op))} elements a thread holds")

    def tensor_cores(self, complete: bool) -> None:
        for op, form in self.tas.tensor_cores.items():
            problem = self.mma_problem(op, form)
            if problem:
                raise self.fail(op, f"{form.opcode}: {problem}")
            if complete and (form.warpgroup or form.tcgen05) and op not in self.tas.wgmma_staging:
                raise self.fail(op, "a wgmma or tcgen05 multiply without a shared-memory staging")
            if complete and form.tcgen05 and self.tas.tmem_alloc and op not in self.tas.tmem_columns:
                raise self.fail(op, "a tcgen05 multiply without tensor-memory columns")
            if complete and self.tas.operand_layout(op, 2) != self.tas.mma_layouts.get(tuple(op.result.type.shape)):
                raise self.fail(op, f"{form.opcode}: the accumulator is not laid out as its fragments")

    def mma_problem(self, op: Operation, form) -> str:
        """Why ``form`` cannot run ``op`` on this architecture ("" if it can)."""
        arch = self.arch
        operand = form.types.split(".")[1]
        (m, n), k = op.results[0].type.shape[-2:], op.operands[0].type.shape[-1]
        if form.k * form.bits != MMA_K_BITS or form.m != (8 if form.bits == 64 else 16):
            return f"no m{form.m} k{form.k} form of {form.bits}-bit operands"
        if arch < max(80, FORMAT_ARCH.get(operand, 80)):
            return f"{operand} operands need sm_{max(80, FORMAT_ARCH.get(operand, 80))}"
        if form.kind and arch not in BLOCK_SCALED_ARCHS:
            return f"block-scaled forms need sm_{BLOCK_SCALED_ARCHS[0]}"
        if form.warpgroup and (arch not in WGMMA_ARCHS or form.kind or form.bits == 64):
            return f"no wgmma form on sm_{arch}"
        if form.tcgen05 and (arch not in TCGEN05_ARCHS or form.kind or form.bits == 64 or form.integer):
            return f"no tcgen05 form on sm_{arch}"
        if form.tcgen05 and (m % 64 or self.tas.num_warps not in (WARPGROUP, 2 * WARPGROUP)):
            return f"tcgen05 needs 64 or 128-row blocks read by 4 or 8 warps (M={m}, {self.tas.num_warps} warps)"
        if form.warpgroup and (m % 64 or self.tas.num_warps % WARPGROUP):
            return f"wgmma needs 64-row blocks over whole warpgroups (M={m}, {self.tas.num_warps} warps)"
        if m % 16 or n % 8 or k % form.k:
            return f"the {m}x{n}x{k} multiply is not whole 16x8x{form.k} blocks"
        return ""


def _owner(v: Value) -> Optional[Operation]:
    return v.owner if isinstance(v.owner, Operation) else None


def _accessed_layout(tas: TileAS, op: Operation) -> Optional[LinearLayout]:
    """The layout of the tile a view access moves (inside its chunked loop, if in one)."""
    if isinstance(op, MEM.LoadViewTkoOp):
        layout = tas.layouts.get(op.results[0])
    elif isinstance(op, MEM.AtomicRedViewTkoOp):
        layout = tas.operand_layout(op, 1 + len(op.index))
    else:
        layout = tas.operand_layout(op, 0)
    group = tas.chunked.get(op)
    return chunk_layout_of(layout, group.regs) if layout is not None and group is not None else layout


def verify_tileas(tas: TileAS, arch: int, done: frozenset = frozenset({LAYOUTS, MEMORY})) -> None:
    """Check ``tas`` after the passes ``done`` (the tables those complete are checked
    for completeness too); raise ``TileASVerifyError`` at the first violation."""
    v = Verifier(tas, arch)
    laid_out = LAYOUTS in done
    v.layouts(laid_out)
    v.converts()
    v.tensor_cores(laid_out)
    v.vectors()
    v.pipelines()
    v.buffers(MEMORY in done)
    v.emission()
