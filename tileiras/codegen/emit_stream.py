"""Software-pipelined SIMT streaming loops: the code of a ``stream_pipeline.StreamPlan``.

The loop's view loads become ``cp.async`` copies into a ring of ``S`` shared-memory
stages (one commit group a trip, all its tiles), and the loop is expanded as

* prologue (``prologue``, before the loop): the copies of trips 0 .. S-2 into stages
  0 .. S-2, with no barrier before them: the ring lies past every other op's scratch
  (``StreamPlan.ring_base``), and the drain of any earlier ring ends with one;
* steady state (``steady_state``, at the top of the body): ``cp.async.wait_group S-2``
  (this thread's copies of trip i have landed), ``bar.sync`` where threads read what
  others copied (``StreamPlan.barrier``: it also orders every thread's reads of trip
  i-1 before the refill), the tiles of trip i read from stage i % S in their register
  layouts with vector ``ld.shared``, then the copies of trip i + S-1 into stage
  (i + S-1) % S = (i-1) % S, which this thread read in trip i-1, and their commit;
* drain (``emit_async.drain``, after the loop): ``cp.async.wait_group 0`` and a barrier.

Copies of a trip past the loop's end and parts of a tile outside the tensor read nothing
and fill zeros (``emit_async.copy_tile``, src-size 0), so every trip commits one group and
the wait count holds for any trip count, dynamic ones included.  The loads themselves
emit nothing (``emit_memory``): their tiles are the registers the steady state read.
"""
from __future__ import annotations

from llvmlite import ir

from ..lower.stream_pipeline import StreamPlan, StreamTile
from ..lower.tiles import element_bytes
from . import intrinsics as X
from .emit_async import below, commit, copy_tile, iteration_number, loop_bounds, wait_group
from .nvvm import I32, KernelEmitter
from .values import TileVal, byte_gep, from_smem, llvm_type, smem_type


def _to_offset(tile: StreamTile):
    """Register (and lane, warp) -> element offset of the tile in its stage."""
    return tile.layout.invert_and_compose(tile.shared)


def issue(em: KernelEmitter, plan: StreamPlan, iv: ir.Value, stage: ir.Value, runs: ir.Value) -> None:
    """The copies of the tiles trip ``iv`` loads into ``stage`` (i32), reading nothing
    where ``runs`` is false, then their commit: each thread copies the runs of registers it
    will hold."""
    b = em.b
    stage_base = b.add(b.mul(stage, ir.Constant(I32, plan.stage_bytes)), ir.Constant(I32, plan.ring_base))
    for tile in plan.tiles:
        to_offset = _to_offset(tile)
        copy_tile(em, plan.loop, tile.load, iv, tile.layout, lambda r, t=to_offset: em.coords(t, r)[0],
                  tile.copy_bytes, b.add(stage_base, ir.Constant(I32, tile.offset)), runs)
    commit(b)


def prologue(em: KernelEmitter, plan: StreamPlan) -> None:
    """Before the loop: the copies of its first S-1 trips, a group each."""
    b = em.b
    lb, ub, step = loop_bounds(em, plan)
    for s in range(plan.stages - 1):
        iv = b.add(lb, b.mul(step, ir.Constant(step.type, s))) if s else lb
        issue(em, plan, iv, ir.Constant(I32, s), below(em, plan, iv, ub))


def steady_state(em: KernelEmitter, plan: StreamPlan) -> None:
    """At the top of trip i: wait for its stage, read its tiles (the loads' results), then
    refill the stage trip i-1 read with trip i + S-1's copies."""
    b = em.b
    _, ub, step = loop_bounds(em, plan)
    iv = em.values[plan.loop.regions[0].blocks[0].args[0]].scalar
    i = iteration_number(em, plan)
    wait_group(b, plan.stages - 2)
    if plan.barrier:
        X.barrier(b)
    stages = ir.Constant(I32, plan.stages)
    here = b.add(b.mul(b.urem(i, stages), ir.Constant(I32, plan.stage_bytes)), ir.Constant(I32, plan.ring_base))
    for tile in plan.tiles:
        em.put(tile.load.results[0], TileVal(tile.layout, _read(em, tile, b.add(here, ir.Constant(I32, tile.offset)))))
        em.put(tile.load.results[1], None)
    ahead = b.add(iv, b.mul(step, ir.Constant(iv.type, plan.stages - 1)))
    issue(em, plan, ahead, b.urem(b.add(i, ir.Constant(I32, plan.stages - 1)), stages), below(em, plan, ahead, ub))


def _read(em: KernelEmitter, tile: StreamTile, base: ir.Value) -> list[ir.Value]:
    """The tile's registers from its stage at byte ``base`` (i32): one vector ``ld.shared``
    per ``copy_bytes`` run, the run this thread (or the owner of its copies) copied."""
    b = em.b
    ty = llvm_type(tile.load.results[0].type)
    st = smem_type(ty)
    esize = element_bytes(tile.load.results[0].type)
    n = tile.copy_bytes // esize
    to_offset = _to_offset(tile)
    regs: list[ir.Value] = []
    for r in range(0, tile.layout.size("reg"), n):
        at = b.add(base, b.mul(em.coords(to_offset, r)[0], ir.Constant(I32, esize)))
        slot = byte_gep(b, em.smem(), at)
        if n == 1:
            regs.append(from_smem(b, b.load(slot, typ=st), ty))
            continue
        vec = b.load(slot, typ=ir.VectorType(st, n), align=tile.copy_bytes)
        regs += [from_smem(b, b.extract_element(vec, ir.Constant(I32, k)), ty) for k in range(n)]
    return regs

