"""Software-pipelined flash-attention loops: the code of an ``attention_pipeline.AttentionPlan``.

The loop's K and V loads become ``cp.async`` copies into a ring of ``S`` stages (each a
K tile and a V tile, XOR-swizzled), K and V in separate commit groups, and the loop is
expanded as

* prologue (``emit_async.prologue``, before the loop): a barrier (earlier users of the shared
  memory are done with it), then for iterations 0 .. S-2 the K copies and their commit,
  the V copies and theirs;
* Q @ K^T (``pipelined_mma`` at the first multiply): ``cp.async.wait_group 2S-3`` (this
  thread's K(i) has landed; V(i) and the S-2 later iterations' groups may fly),
  ``bar.sync`` (every thread's K(i) has landed, and every thread is done with iteration
  i-1, so stage (i-1) % S and the scratch region are free), the K and V copies of
  iteration i + S-1 into stage (i + S-1) % S (two groups), A staged swizzled at the start
  of the scratch region, ``bar.sync``, ``ldmatrix`` + ``mma.sync`` from stage i % S;
* the online softmax, as unpipelined (its scratch lies below the ring);
* P @ V (at the second multiply): ``cp.async.wait_group 2S-2`` (V(i) has landed),
  ``bar.sync``, P staged, ``bar.sync``, ``ldmatrix.trans`` + ``mma.sync``;
* drain (``emit_async.drain``, after the loop): ``cp.async.wait_group 0`` and a barrier.

Copies of an iteration past the loop's end and out-of-bounds rows are issued with
src-size 0 (``emit_async.copy_tile``): every iteration commits the same two groups, so
the wait counts hold for any trip count, dynamic ones included.
"""
from __future__ import annotations

from weakref import WeakKeyDictionary

from llvmlite import ir

from ..ir.core import Operation
from ..lower.attention_pipeline import A_BEFORE_LOOP, A_HELD, A_STAGED, AttentionPlan, RingTile
from ..lower.mma_forms import LandedOperand, MmaSwizzle
from . import intrinsics as X
from . import smem_copy
from .emit_async import below, commit, copy_tile, iteration_number, loop_bounds, wait_group
from .emit_mma import TensorCoreOperands, mma_steps
from .nvvm import I32, KernelEmitter
from .smem_copy import SharedTile
from .values import TileVal


def _tile_base(em: KernelEmitter, plan: AttentionPlan, tile: RingTile, stage: ir.Value) -> ir.Value:
    """Byte offset (i32) of ``tile`` in ``stage`` from the start of shared memory."""
    b = em.b
    return b.add(b.mul(stage, ir.Constant(I32, plan.stage_bytes)), ir.Constant(I32, plan.ring_base + tile.offset))


def issue(em: KernelEmitter, plan: AttentionPlan, iv: ir.Value, stage: ir.Value, runs: ir.Value) -> None:
    """Iteration ``iv``'s K copies and their commit, then its V copies and theirs, into
    ``stage``; reading nothing where ``runs`` is false."""
    for tile in plan.tiles:
        to_offset = tile.staged_layout.invert_and_compose(tile.swizzle.layout())
        copy_tile(em, plan.loop, tile.load, iv, tile.copy_layout, lambda r, t=to_offset: em.coords(t, r)[0],
                  tile.copy_bytes, _tile_base(em, plan, tile, stage), runs)
        commit(em.b)


def _refill(em: KernelEmitter, plan: AttentionPlan, i: ir.Value) -> None:
    """Iteration i + S-1's copies into stage (i + S-1) % S, which iteration i-1 read."""
    b = em.b
    _, ub, step = loop_bounds(em, plan)
    iv = em.values[plan.loop.regions[0].blocks[0].args[0]].scalar
    ahead = b.add(iv, b.mul(step, ir.Constant(iv.type, plan.stages - 1)))
    stage = b.urem(b.add(i, ir.Constant(I32, plan.stages - 1)), ir.Constant(I32, plan.stages))
    issue(em, plan, ahead, stage, below(em, plan, ahead, ub))


def _stage_a(em: KernelEmitter, tv: TileVal, swizzle: MmaSwizzle) -> None:
    """A row-major tile with ``swizzle``'s XOR on 16-byte chunks, at the start of shared
    memory (what ``TensorCoreOperands`` reads with ``ldmatrix``)."""
    smem_copy.store(em, tv, SharedTile(swizzle.layout(), swizzle.esize))


def pipelined_mma(em: KernelEmitter, op: Operation, plan: AttentionPlan) -> None:
    """One of the loop's two multiplies: wait for its tile (Q @ K^T also refills the
    freed stage), stage A, then ``mma.sync`` with B read from stage i % S."""
    b = em.b
    k = plan.mmas.index(op)
    tile = plan.tiles[k]
    i = iteration_number(em, plan)
    wait_group(b, plan.pending_before(op))
    X.barrier(b)
    if k == 0:
        _refill(em, plan, i)
    stage = b.urem(i, ir.Constant(I32, plan.stages))
    first = b.udiv(_tile_base(em, plan, tile, stage), ir.Constant(I32, tile.swizzle.esize))
    multiply_from_stage(em, op, plan.a_from[k], plan.a_swizzles[k], tile.swizzle, tile.transposed, first, True)


def multiply_from_stage(em: KernelEmitter, op: Operation, where: str, a_swizzle: MmaSwizzle, b_swizzle: MmaSwizzle,
                        transposed: bool, first: ir.Value, guarded: bool) -> None:
    """``mma.sync`` of ``op`` with B read by ``ldmatrix`` from its stage (``first``: the
    tile's first element, B laid out by ``b_swizzle``, as N rows of K where ``transposed``)
    and A from ``where`` (``attention_pipeline``'s ``A_HELD``, ``A_BEFORE_LOOP``,
    ``A_STAGED``); a staged A goes at the start of shared memory, behind a barrier, and
    also before it unless the caller's wait already was one (``guarded``)."""
    b = em.b
    if where == A_STAGED:
        if not guarded:
            X.barrier(b)            # every thread is done with the previous A
        _stage_a(em, em.tile(op, 0), a_swizzle)
        X.barrier(b)
    form = em.tas.tensor_cores[op]
    acc = em.tile(op, 2)
    kind = TensorCoreOperands if where == A_STAGED else RegisterA
    operands = kind(em, form, acc.layout, op.lhs.type.shape[-1], b_swizzle.pitch, 0, None,
                    (a_swizzle, b_swizzle), transposed, b_first=first)
    if where == A_HELD:
        operands.hold(em.tile(op, 0))
    elif where == A_BEFORE_LOOP:
        operands.a_steps = _HOISTED[em][op]
    em.put(op.result, TileVal(acc.layout, mma_steps(em, op, form, operands, acc)))


#: per emitter, the A fragments ``hoist_fragments`` read before the loop, per multiply
_HOISTED: "WeakKeyDictionary[KernelEmitter, dict[Operation, list]]" = WeakKeyDictionary()


def hoist_fragments(em: KernelEmitter, mmas, a_from: tuple[str, str], a_swizzles: tuple[MmaSwizzle, MmaSwizzle],
                    fence: bool = False) -> None:
    """(Before the loop, after the prologue's barrier, before its copies.)  Each A of
    ``mmas`` made before the loop (``A_BEFORE_LOOP``: Q) staged swizzled at the start of
    shared memory and its fragments of every K step read with ``ldmatrix`` into registers,
    which the loop's multiplies use; a barrier then frees the memory for the loop's ops
    (with ``fence``, after a proxy fence: TMA, the async proxy, writes over it next)."""
    b = em.b
    for k, op in enumerate(mmas):
        if a_from[k] != A_BEFORE_LOOP:
            continue
        _stage_a(em, em.tile(op, 0), a_swizzles[k])
        X.barrier(b)
        _read_fragments(em, op, a_swizzles[k], None)
        if fence:
            X.fence_proxy_async(b)
        X.barrier(b)


def hoist_landed(em: KernelEmitter, op: Operation, landed: LandedOperand) -> None:
    """(Before the loop, once its boxes have landed.)  The fragments of ``op``'s A read
    with ``ldmatrix`` where TMA landed it (``landed``: TMA's swizzle of the box width, box
    after box), as ``hoist_fragments`` reads a staged one; a proxy fence orders the reads
    before the async proxy lands the next boxes there (the loop's next entry)."""
    _read_fragments(em, op, landed.form, ir.Constant(I32, landed.base // landed.elem_bytes))
    X.fence_proxy_async(em.b)


def _read_fragments(em: KernelEmitter, op: Operation, swizzle: MmaSwizzle, first) -> None:
    """``op``'s A fragments of every K step, from A laid out by ``swizzle`` ``first``
    elements into shared memory (None: 0), into ``_HOISTED``."""
    form = em.tas.tensor_cores[op]
    operands = TensorCoreOperands(em, form, em.tas.operand_layout(op, 2), swizzle.pitch, swizzle.pitch, 0, first,
                                  (swizzle, swizzle))
    _HOISTED.setdefault(em, {})[op] = [operands.a_fragments(ir.Constant(I32, s * form.k))
                                       for s in range(swizzle.cols // form.k)]


class RegisterA(TensorCoreOperands):
    """A multiply's operands with A's fragments in registers (``attention_pipeline.
    a_in_registers``: A held in its accumulator fragment layout) and B in a ring stage."""

    def hold(self, a: TileVal) -> None:
        """Pack A's registers into fragments: K step s of row block i is C blocks
        (i, 2s) and (i, 2s + 1), registers 4 (j + i * column blocks) (``mma_fragment``),
        each pair of 16-bit elements one 32-bit register, the lower column in the low half."""
        b = self.em.b
        col_blocks = len(a.regs) // (4 * self.rows_blocks)

        def pair(r: int) -> ir.Value:
            lo, hi = (b.zext(_bits16(b, a.regs[r + q]), I32) for q in range(2))
            return b.or_(lo, b.shl(hi, ir.Constant(I32, 16)))
        self.a_steps = [[[pair(4 * (j + col_blocks * i) + q) for j in (2 * s, 2 * s + 1) for q in (0, 2)]
                         for i in range(self.rows_blocks)] for s in range(col_blocks // 2)]

    def a_fragments(self, k0: ir.Value) -> list[list[ir.Value]]:
        """K step ``k0``'s fragments: picked by ``k0`` (a constant once LLVM unrolls the steps)."""
        b = self.em.b
        out = self.a_steps[0]
        for s in range(1, len(self.a_steps)):
            at = b.icmp_unsigned("==", k0, ir.Constant(I32, s * self.form.k))
            out = [[b.select(at, new, old) for new, old in zip(row_new, row_old)]
                   for row_new, row_old in zip(self.a_steps[s], out)]
        return out


def _bits16(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """A 16-bit element's bits (i16)."""
    return v if isinstance(v.type, ir.IntType) else b.bitcast(v, ir.IntType(16))
