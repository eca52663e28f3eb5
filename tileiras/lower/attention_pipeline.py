"""Software pipelining of flash attention's K/V loop on sm_80-class ``mma.sync`` targets.

Flash attention's inner loop, once per KV block, loads a K tile, multiplies S = Q @ K^T
on tensor cores, runs the online softmax on S, loads a V tile and multiplies
O += P @ V.  Unpipelined, both loads wait on DRAM in every iteration.  Pipelined, the K
and V tiles of iteration ``i + S - 1`` are ``cp.async`` copies into a ring of ``S``
shared-memory stages (a stage holds one K and one V tile, each XOR-swizzled for
``ldmatrix``) while iteration ``i`` computes; ``codegen.emit_attention`` expands it.  K
and V travel in separate commit groups, so Q @ K^T waits for K(i) only
(``cp.async.wait_group 2S - 3``) and P @ V for V(i) (``2S - 2``), as NVIDIA's sm_80 code
does (two commit groups an iteration, ``wait_group 1`` then ``0`` with its two stages).

``plan_attention`` decides, once per loop; the plan (or why not) goes into
``TileAS.pipelines`` like a GEMM K loop's (``software_pipeline.plan_loop`` sends a loop
with two tensor-core multiplies here).  A loop is pipelined when

* its body has exactly two ``mma.sync`` multiplies (16-bit operands, fragments as
  accumulators), each with B a tile loaded in the loop by a weak, zero-padded (or
  unpadded) partition-view load whose index is the induction variable or values from
  outside the loop, reaching the multiply only through a reshape that drops unit dims
  and perhaps a ``permute [1, 0]``; rank-3 ``1 x R x C`` tiles and a ``dim_map`` that
  transposes them (K^T loaded from K stored keys x head-dim) are fine: a tile is staged
  in memory order, rows of its contiguous dim, read with ``ldmatrix`` (``.trans`` for a
  K x N one, plain for an N x K one);
* no op of the body writes memory (the copies run iterations ahead of it), and the
  second multiply uses the first's result (so they run in order: the waits count on it);
* (sm_120) K/V loads ``lower.tma`` chose for TMA are taken over by the ring; the
  kernel's other TMA buffers go after it;
* each thread's pieces of a tile row are at least 4 aligned bytes (``cp.async``);
* two stages fit beside the scratch the body's other ops use.

A multiply's A held in its accumulator fragment layout (P, from the softmax of S) is
multiplied from its registers (``a_in_registers``).  An A made before the loop (Q) is
staged once before the ring's first copies and its fragments read into registers, as
NVIDIA keeps Q's; another A is staged every iteration as the unpipelined multiply
stages it, at the start of the scratch region, XOR-swizzled.  The ring starts after
the largest scratch any other op needs, so no op's scratch meets a stage a copy may
still be landing in.  The stage count is the ``num_stages`` hint, else the modulo
schedule's (``sched.pipeline.attention_schedule``), at least 2, at most what shared
memory holds and a known trip count needs.  Dynamic trip counts (causal masking bounds
the loop by the block id) need nothing more: copies past the end read nothing
(src-size 0), so every iteration commits the same groups.
"""
from __future__ import annotations

from typing import Optional, Union

from ..ir import types as T
from ..ir.core import Operation, Value
from ..layout.linear import LinearLayout, default_blocked
from ..record import record
from ..sched.ddg import work_of
from ..sched.latency import classify, model_for
from ..sched.modulo import SchedulingError
from ..sched.pipeline import attention_schedule
from ..target import smem_limit, stages_hint
from ..tile import ops_arith as AR
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from .gathered_copy import UNLAID, index_slice, record_index_slices
from ..tile.enums import MemoryOrderingSemantics
from ..tile.traits import DATA_RESOURCES, is_contraction, writes
from .mma_forms import MmaSwizzle, mma_swizzle
from .software_pipeline import NARROWEST_COPY, WIDEST_COPY, KLoopPlan, clamped_stages
from .tiles import element_bytes
from .tma import SWIZZLED_ALIGN, other_tma_bytes, plan_again

#: where a ring stage's tiles start (bytes): a whole number of 128-byte bank lines
RING_ALIGN = 128
#: where a multiply's A fragments come from (``AttentionPlan.a_from``)
A_HELD, A_BEFORE_LOOP, A_STAGED = "registers", "before the loop", "staged"


@record(frozen=True)
class RingTile:
    """One B operand copied into the ring: ``load`` (reaching ``mma`` through ``relabels``)
    lands in each stage at ``offset`` bytes as ``rows`` rows of ``cols`` contiguous
    elements, swizzled (``swizzle``); ``transposed``: the rows are B's N (an N x K tile,
    read with plain ``ldmatrix``), else B's K (read with ``.trans``).  ``copy_layout``
    (over the loaded tile's dims) gives each thread its ``copy_bytes`` runs,
    ``staged_layout`` the same registers over (rows, cols)."""
    load: Operation
    mma: Operation
    relabels: tuple[Operation, ...]
    rows: int
    cols: int
    transposed: bool
    swizzle: MmaSwizzle
    copy_bytes: int
    copy_layout: LinearLayout
    staged_layout: LinearLayout
    offset: int

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.swizzle.esize

    def at(self, offset: int) -> "RingTile":
        """This tile placed ``offset`` bytes into each stage."""
        return RingTile(self.load, self.mma, self.relabels, self.rows, self.cols, self.transposed, self.swizzle,
                        self.copy_bytes, self.copy_layout, self.staged_layout, offset)


@record(frozen=True)
class AttentionPlan(KLoopPlan):
    """How one K/V loop is pipelined: ``tiles`` (K's, V's; ``loads`` their loads, ``mma``
    the first multiply) are copied into a ring of ``stages`` stages of ``stage_bytes``
    from byte ``ring_base``; ``mmas`` (Q @ K^T, P @ V) stage their A at byte 0, swizzled
    by ``a_swizzles``.  ``source`` says where the stage count came from."""
    mmas: tuple[Operation, Operation]
    tiles: tuple[RingTile, RingTile]
    a_swizzles: tuple[MmaSwizzle, MmaSwizzle]
    ring_base: int
    stage_bytes: int
    source: str
    #: per multiply, where its A fragments come from: ``A_HELD`` (A's registers are
    #: already its fragments, ``a_in_registers``), ``A_BEFORE_LOOP`` (A is made before the
    #: loop: staged and read with ``ldmatrix`` once, before the ring's first copies, and
    #: kept in registers) or ``A_STAGED`` (staged every iteration below the ring)
    a_from: tuple[str, str] = ("", "")

    def pending_before(self, mma: Operation) -> int:
        """``cp.async.wait_group`` count before ``mma``: the groups committed after its
        tile's.  Groups go K(i), V(i), K(i+1), ... and iteration i has issued up to
        V(i + S - 1) when it multiplies, so 2S - 3 follow K(i) and 2S - 2 follow V(i)."""
        return 2 * self.stages - 3 + self.mmas.index(mma)

    @property
    def smem_end(self) -> int:
        return self.ring_base + self.ring_bytes


def _align(n: int, to: int = RING_ALIGN) -> int:
    return -(-n // to) * to


def _body(loop: CF.ForOp) -> list[Operation]:
    return [op for op in loop.regions[0].blocks[0].ops if not isinstance(op, (CF.ContinueOp, MEM.JoinTokensOp))]


def is_attention_loop(tas, loop: CF.ForOp) -> bool:
    """Does the loop body hold two tensor-core multiplies (the shape this plans)?"""
    return len(body_multiplies(tas, loop)) == 2


def body_multiplies(tas, loop: CF.ForOp) -> list[Operation]:
    """The tensor-core multiplies of the loop body."""
    return [op for op in _body(loop) if op in tas.tensor_cores]


def attention_multiplies(tas, loop: CF.ForOp, warpgroup: bool, tcgen05: bool = False
                         ) -> Union[list[Operation], str]:
    """The loop's two multiplies (Q @ K^T, P @ V) where the body has the shape a K/V ring
    needs (``attention_pair``), or why not: both run as ``wgmma`` (``warpgroup``),
    ``tcgen05.mma`` (``tcgen05``) or ``mma.sync``, into their tensor-core layout."""
    mmas = attention_pair(loop)
    if isinstance(mmas, str):
        return mmas
    kind = "tcgen05" if tcgen05 else "wgmma" if warpgroup else "mma.sync"
    for mma in mmas:
        form = tas.tensor_cores.get(mma)
        if form is None or form.warpgroup != warpgroup or form.tcgen05 != tcgen05:
            return f"a multiply does not run as a 2-D {kind}"
    return mmas


def attention_pair(loop: CF.ForOp) -> Union[list[Operation], str]:
    """The loop's two multiplies where its body is flash attention's, or why not: two 2-D
    floating-point multiplies and no other, the second using the first's result (the
    order the ring's waits assume), and no op of the body writing memory (the copies run
    iterations ahead of it).  Asked before the tensor-core forms are chosen, too
    (``attention_tma.tcgen05_attention_reason``)."""
    body = _body(loop)
    mmas = [op for op in body if is_contraction(op)]
    if len(mmas) != 2 or not all(isinstance(op, AR.MmaFOp) and op.result.type.rank == 2 for op in mmas):
        return "the loop body does not hold exactly two 2-D floating-point multiplies"
    if any(writes(op, *DATA_RESOURCES) for top in body for op in top.walk()):
        return "the loop body writes memory"
    if not _depends_on(mmas[1], mmas[0], loop):
        return "the second multiply does not use the first's result (the order of the ring's waits)"
    return mmas


def plan_attention(tas, loop: CF.ForOp, arch: int) -> Union[AttentionPlan, str]:
    """The loop's ``AttentionPlan``, or the reason it is not pipelined (a sentence)."""
    mmas = attention_multiplies(tas, loop, warpgroup=False)
    if isinstance(mmas, str):
        return mmas
    found = [_ring_tile(tas, loop, mma) for mma in mmas]
    for f in found:
        if isinstance(f, str):
            return f
    a_swizzles = [mma_swizzle(*mma.lhs.type.shape, element_bytes(mma.lhs.type)) for mma in mmas]
    if None in a_swizzles:
        return "an A operand is not 16-bit with rows of whole 16-byte chunks"
    k_tile, v_tile = found
    v_tile = v_tile.at(_align(k_tile.nbytes))
    stage_bytes = _align(k_tile.nbytes) + _align(v_tile.nbytes)
    a_from = tuple(A_HELD if a_in_registers(tas, mma) else A_BEFORE_LOOP if not inside_value(mma.lhs, loop)
                   else A_STAGED for mma in mmas)
    a_bytes = [mma.lhs.type.num_elements * element_bytes(mma.lhs.type) for mma in mmas]
    a_need = max((n for n, where in zip(a_bytes, a_from) if where == A_STAGED), default=0)
    # the ops after the loop use their scratch once the ring is drained (its copies landed,
    # a barrier): it may overlap the ring (the output's exchange to 16-byte stores)
    others = max((n for op, n in tas.scratch.items() if op not in mmas and not _after(op, loop)), default=0)
    ring_base = _align(max(a_need, others))
    others = other_tma_bytes(tas, (k_tile.load, v_tile.load), SWIZZLED_ALIGN if tas.tma else 0)
    fit = (smem_limit(f"sm_{arch}") - ring_base - others) // stage_bytes
    if fit < 2:
        return f"two stages of {stage_bytes} bytes do not fit in shared memory beside {ring_base} of scratch"
    copies = tuple(t.copy_layout.size("reg") // (t.copy_bytes // t.swizzle.esize) for t in (k_tile, v_tile))
    wanted, source = wanted_stages(tas, loop, arch, mmas, (k_tile, v_tile), copies)
    stages = clamped_stages(tas, loop, wanted, fit)
    return AttentionPlan(loop, mmas[0], (k_tile.load, v_tile.load), stages, tuple(mmas), (k_tile, v_tile),
                         tuple(a_swizzles), ring_base, stage_bytes, source, a_from)


def _after(op: Operation, loop: CF.ForOp) -> bool:
    """Does ``op`` run after ``loop`` (in an op that follows the loop in its block)?"""
    ops = loop.parent.ops
    return any(op is o for later in ops[ops.index(loop) + 1:] for o in later.walk())


def a_in_registers(tas, mma: Operation) -> bool:
    """Are the registers of ``mma``'s A its ``mma.sync`` A fragments already?  So when A
    is held in the accumulator layout of its own M x K shape (``mma_fragment``: as
    flash attention's P is, the softmax of the first multiply's result) and a warp holds
    whole rows of it, the same rows as of the accumulator: the C fragments of column
    blocks 2k and 2k + 1, two by two packed, are the A fragment of K step k (the PTX
    ISA's m16n8k16 tables), with no trip through shared memory."""
    a_layout = tas.operand_layout(mma, 0)
    acc = tas.operand_layout(mma, 2)
    if element_bytes(mma.lhs.type) != 2 or a_layout is None or tas.tensor_cores[mma].k != 16:
        return False
    if a_layout != tas.mma_layouts.get(tuple(mma.lhs.type.shape)):
        return False
    return (all(b[1] == 0 for b in a_layout.bases("warp")) and a_layout.bases("warp") == acc.bases("warp")
            and a_layout.bases("lane") == acc.bases("lane")
            and [b for b in a_layout.bases("reg") if b[0]] == [b for b in acc.bases("reg") if b[0]])


def b_load(tas, loop: CF.ForOp, mma: Operation, slices_ok: bool = False
           ) -> Union[tuple[Operation, tuple[Operation, ...], bool], str]:
    """(the load of ``mma``'s B in the loop, the relabels from it to the multiply, whether
    one of them is a 2-D transpose), or why B is not such a tile (then the ring cannot
    copy it iterations ahead); ``slices_ok``: its index may be computed in the loop
    (``gathered_copy.index_slice``: the ``cp.async`` ring's copies compute it again)."""
    chain: list[Operation] = []
    v = mma.rhs
    permuted = False
    while isinstance(v.owner, (CO.ReshapeOp, CO.PermuteOp)) and _inside(v.owner, loop):
        op = v.owner
        if isinstance(op, CO.PermuteOp):
            if list(op.permutation) != [1, 0] or permuted:
                return "a multiply's B is permuted other than by one 2-D transpose"
            permuted = True
        elif [d for d in op.source.type.shape if d != 1] != [d for d in op.result.type.shape if d != 1]:
            return "a multiply's B is reshaped other than by dropping unit dims"
        chain.append(op)
        v = op.source
    ld = v.owner
    if not isinstance(ld, MEM.LoadViewTkoOp) or not _inside(ld, loop):
        return "a multiply's B is not a tile loaded in the loop"
    chain.reverse()                 # from the load to the multiply
    values = [ld.results[0], *(op.result for op in chain)]
    for value, consumer in zip(values, [*chain, mma]):
        if any(u is not consumer for u in tas.users(value)):
            return "a loaded K/V tile has users besides its multiply"
    reason = _load_reason(tas, ld, loop, slices_ok)
    return reason or (ld, tuple(chain), permuted)


def _ring_tile(tas, loop: CF.ForOp, mma: Operation) -> Union[RingTile, str]:
    """How ``mma``'s B is copied into the ring, or why it cannot be."""
    found = b_load(tas, loop, mma, slices_ok=True)
    if isinstance(found, str):
        return found
    ld, chain, permuted = found
    shape = ld.results[0].type.shape
    vt = ld.view.type
    rank = len(shape)
    if any(d != 1 for d in shape[:-2]):
        return "a loaded K/V tile has more than two dims that are not 1"
    contiguous = vt.dim_map.index(len(vt.tensor_view.shape) - 1)
    if contiguous < rank - 2:
        return "a loaded K/V tile's contiguous dim is a unit dim"
    # B = (t0, t1), or (t1, t0) through the transpose; its K dim is its first
    k_dim = rank - 1 if permuted else rank - 2
    transposed = contiguous == k_dim
    rows, cols = shape[rank - 2 + (contiguous == rank - 2)], shape[contiguous]
    esize = element_bytes(ld.results[0].type)
    swizzle = mma_swizzle(rows, cols, esize)
    if swizzle is None:
        return "a K/V tile is not 16-bit with rows of whole 16-byte chunks"
    width = _copy_bytes(tas, ld, cols, esize)
    if width < NARROWEST_COPY:
        return "a thread's piece of a K/V tile row is narrower than 4 bytes or not aligned (cp.async copies 4, 8 or 16)"
    staged = default_blocked((rows, cols), tas.num_warps, width // esize)
    tile = staged if contiguous == rank - 1 else staged.permute([1, 0])
    for _ in range(rank - 2):
        tile = tile.expand_dim(0, 1)
    return RingTile(ld, mma, chain, rows, cols, transposed, swizzle, width, tile, staged, 0)


def _depends_on(later: Operation, earlier: Operation, loop: CF.ForOp) -> bool:
    """Does ``later`` use ``earlier``'s result through ops of the loop body?  Then the
    code runs them in this order, which the wait counts (``pending_before``) assume."""
    seen: set[int] = set()
    work = [v for v in later.operands]
    while work:
        v = work.pop()
        op = v.owner
        if not isinstance(op, Operation) or id(op) in seen or not _inside(op, loop):
            continue
        if op is earlier:
            return True
        seen.add(id(op))
        work.extend(op.operands)
    return False


def _load_reason(tas, ld: Operation, loop: CF.ForOp, slices_ok: bool = False) -> Optional[str]:
    """Why the load cannot be copied iterations early, or None (``slices_ok``: see ``b_load``)."""
    vt = ld.view.type
    if not isinstance(vt, T.PartitionViewType):
        return "a K/V load is not from a partition view"
    if vt.padding_value not in (None, T.PaddingValue.ZERO):
        return "a K/V load pads with other than zeros (cp.async fills only zeros)"
    if vt.tensor_view.strides[-1] != 1:
        return "a K/V tensor's last dim is not contiguous"
    if ld.attributes.get("memory_ordering_semantics", MemoryOrderingSemantics.WEAK) != MemoryOrderingSemantics.WEAK:
        return "a K/V load is ordered"
    iv = loop.regions[0].blocks[0].args[0]
    if inside_value(ld.view, loop) and not _invariant_view(ld.view, loop):
        return "a K/V load's view is computed inside the loop from values of the loop"
    if any(i is not iv and inside_value(i, loop) for i in ld.index):
        indices = index_slice(tas, loop, ld) if slices_ok else "not the induction variable"
        # asked before layouts exist (tensor_memory's tcgen05 check): the plan asks again
        # (should it fail then, the multiplies stay on tcgen05 without the ring)
        if isinstance(indices, str) and not (indices == UNLAID and not tas.layouts):
            return f"a K/V load's index is computed inside the loop ({indices})"
    return None


def _invariant_view(view: Value, loop: CF.ForOp) -> bool:
    """Is ``view`` a partition view made in the loop of a tensor view from outside it (as
    bytecode 13.1 exports them)?  Making one emits nothing, so the copies of later
    iterations make it where they are issued (``emit_async.copy_tile``)."""
    op = view.owner
    return isinstance(op, MEM.MakePartitionViewOp) and not inside_value(op.tensor_view, loop)


def _inside(op: Operation, loop: CF.ForOp) -> bool:
    return any(op is o for o in loop.walk())


def inside_value(v: Value, loop: CF.ForOp) -> bool:
    """Is ``v`` made in ``loop`` (by an op of it, or an argument of its body's blocks)?"""
    if isinstance(v.owner, Operation):
        return _inside(v.owner, loop)
    return any(v.owner is blk for op in loop.walk() for r in op.regions for blk in r.blocks)


def _copy_bytes(tas, ld: Operation, cols: int, esize: int) -> int:
    """The widest ``cp.async`` the load's facts, its rows and a power of two allow."""
    width = min(min(tas.access_allowed.get(ld, 1), cols) * esize, WIDEST_COPY)
    while width > 1 and ((cols * esize) % width or width & (width - 1)):
        width //= 2
    return width


def wanted_stages(tas, loop: CF.ForOp, arch: int, mmas: list[Operation], tiles, copies: tuple[int, int]
                  ) -> tuple[int, str]:
    """The ``num_stages`` hint, else the stage count of the modulo schedule of the loop's
    copies (``copies``: the instructions that issue K's and V's, a thread's ``cp.async``
    or the elected thread's TMA boxes), waits, multiplies and the softmax between them
    (the body's ops but the ``tiles``' loads and relabels)."""
    hinted = stages_hint(tas.aa.function.hints, arch)
    if hinted:
        return hinted, "num_stages hint"
    threads = tas.layout_threads
    skip = {*mmas, *(t.load for t in tiles), *(op for t in tiles for op in t.relabels)}
    softmax = tuple((classify(op), work_of(op, threads), 1) for top in _body(loop) if top not in skip
                    for op in top.walk() if op is top or not op.regions)
    try:
        schedule = attention_schedule(copies, tuple(work_of(m, threads) for m in mmas), softmax, model_for(arch))
    except SchedulingError:
        return 2, "default (no modulo schedule)"
    return schedule.num_stages, "modulo schedule"


def record_attention(tas, plan: KLoopPlan, arch: int) -> None:
    """Mark the loop, loads, relabels and multiplies as the plan's, and make the scratch
    region reach the ring's end (the multiplies now stage only their A below it).  K/V
    loads that ``lower.tma`` gave TMA (sm_120) are the ring's now: the kernel's other TMA
    loads and stores are planned again after the scratch (``tma.plan_tma`` keeps its
    choices for a subset of its candidates).  An sm_90 TMA ring records itself
    (``attention_tma.record_attention_ring``)."""
    from .attention_tma import AttentionRingPlan, record_attention_ring  # noqa: PLC0415  (it builds on this)

    if isinstance(plan, AttentionRingPlan):
        record_attention_ring(tas, plan, arch)
        return
    for op in (plan.loop, *plan.mmas, *(t.load for t in plan.tiles), *(r for t in plan.tiles for r in t.relabels)):
        tas.pipelined[op] = plan
    # a page id the copies compute again for its iteration
    record_index_slices(tas, plan.loop, [t.load for t in plan.tiles])
    for mma in plan.mmas:           # an A made before the loop is staged at 0 before the copies
        before = mma.lhs.type.num_elements * element_bytes(mma.lhs.type) if plan.a_from[plan.mmas.index(mma)] == \
            A_BEFORE_LOOP else 0
        tas.scratch[mma] = max(plan.smem_end, before)
    if tas.tma:
        plan_again(tas, arch, set(plan.loads))
