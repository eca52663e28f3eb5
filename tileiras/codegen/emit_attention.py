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

from llvmlite import ir

from ..ir.core import Operation
from ..lower.attention_pipeline import AttentionPlan, RingTile
from ..lower.mma_forms import MmaSwizzle
from . import intrinsics as X
from .emit_async import below, commit, copy_tile, loop_bounds, wait_group
from .emit_shape import spill_tile
from .nvvm import I32, KernelEmitter
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


def _iteration(em: KernelEmitter, plan: AttentionPlan) -> ir.Value:
    """The iteration number i (i32) of the loop's induction variable."""
    b = em.b
    lb, _, step = loop_bounds(em, plan)
    iv = em.values[plan.loop.regions[0].blocks[0].args[0]].scalar
    i = b.udiv(b.sub(iv, lb), step)
    return b.trunc(i, I32) if i.type != I32 else i


def _refill(em: KernelEmitter, plan: AttentionPlan, i: ir.Value) -> None:
    """Iteration i + S-1's copies into stage (i + S-1) % S, which iteration i-1 read."""
    b = em.b
    _, ub, step = loop_bounds(em, plan)
    iv = em.values[plan.loop.regions[0].blocks[0].args[0]].scalar
    ahead = b.add(iv, b.mul(step, ir.Constant(iv.type, plan.stages - 1)))
    stage = b.urem(b.add(i, ir.Constant(I32, plan.stages - 1)), ir.Constant(I32, plan.stages))
    issue(em, plan, ahead, stage, below(em, plan, ahead, ub))


def _swizzled(em: KernelEmitter, swizzle: MmaSwizzle):
    """Element offset of (row, col) in a row-major tile with ``swizzle``'s XOR on 16-byte
    chunks (what ``TensorCoreOperands`` reads with ``ldmatrix``)."""
    b = em.b

    def at(c: list[ir.Value]) -> ir.Value:
        row, col = c[-2], c[-1]
        phase = b.and_(b.lshr(row, ir.Constant(I32, swizzle.per_phase.bit_length() - 1)),
                       ir.Constant(I32, swizzle.max_phase - 1))
        return b.add(b.mul(row, ir.Constant(I32, swizzle.cols)), b.xor(col, b.mul(phase, ir.Constant(I32, swizzle.vec))))
    return at


def pipelined_mma(em: KernelEmitter, op: Operation, plan: AttentionPlan) -> None:
    """One of the loop's two multiplies: wait for its tile (Q @ K^T also refills the
    freed stage), stage A, then ``mma.sync`` with B read from stage i % S."""
    from .emit_mma import TensorCoreOperands, mma_steps  # noqa: PLC0415  (emit_mma dispatches here)

    b = em.b
    k = plan.mmas.index(op)
    tile = plan.tiles[k]
    i = _iteration(em, plan)
    wait_group(b, plan.pending_before(op))
    X.barrier(b)
    if k == 0:
        _refill(em, plan, i)
    spill_tile(em, em.tile(op, 0), op.lhs.type, place=_swizzled(em, plan.a_swizzles[k]))
    X.barrier(b)
    form = em.tas.tensor_cores[op]
    acc = em.tile(op, 2)
    stage = b.urem(i, ir.Constant(I32, plan.stages))
    first = b.udiv(_tile_base(em, plan, tile, stage), ir.Constant(I32, tile.swizzle.esize))
    operands = TensorCoreOperands(em, form, acc.layout, op.lhs.type.shape[-1], tile.cols, 0, None,
                                  (plan.a_swizzles[k], tile.swizzle), tile.transposed, b_first=first)
    em.put(op.result, TileVal(acc.layout, mma_steps(em, op, form, operands, acc)))
