"""TMA view loads, stores and atomic reductions (sm_90+), as ``lower.tma`` planned them.

At kernel start thread 0 initializes one mbarrier per TMA load (arrival count 1) and fences
the initialization for the async proxy; a CTA barrier publishes it.  Each load then:

* (in a loop) waits at a CTA barrier until every thread has read the previous tile out of
  the staging buffer the copy is about to overwrite;
* thread 0 announces the tile's bytes on the load's mbarrier (``arrive.expect_tx``) and
  issues one ``cp.async.bulk.tensor`` per box, at the tile's start in the tensor;
* every thread waits for the mbarrier's current phase (``try_wait.parity``; the parity is a
  per-load variable that flips after each wait, so loops alternate phases), then reads its
  registers from the staged tile with ``ld.shared`` (vectors where ``tas.vectors`` says).

Elements outside the tensor arrive as zeros, which is the view's padding (``lower.tma``
only plans zero- or un-padded views), so nothing is masked.

A load a streaming loop issues trips ahead (``tma_stream.TmaStream``: ``S`` stages,
each a buffer and an mbarrier) instead: its first ``S`` trips' boxes go out before the loop
(``stream_prologue``, or earlier in the block: ``hoisted_prologues``), each guarded by the
loop's own comparison so that every copy issued is waited for; trip i waits for stage
i % S (a parity bit a stage in the load's phase variable), reads its registers, then, once
a CTA barrier says every thread has (``all_have_read``), thread 0 issues trip i + S's boxes
into the same stage (``_streamed_load``).

Each store, as NVIDIA's tool emits it:

* (in a loop) a CTA barrier: thread 0 has waited until the previous trip's bulk copies
  finished reading the staging buffer; where the store's token orders it after its own
  previous trip (``TmaPlan.carried``: a persistent GEMM's tiles), thread 0 first waits
  until those copies have written global memory (``wait_group 0``; issued a whole tile
  earlier, they have);
* every thread writes the elements it owns into the staging buffer (``st.shared``, the
  buffer laid out as a load's; ``stmatrix`` where the plan says, ``_write_matrices``) and
  fences them for the async proxy;
* a CTA barrier, then thread 0 issues one ``cp.async.bulk.tensor`` store per box, commits
  them as a bulk async-group and waits until the group has read shared memory
  (``wait_group.read 0``): the buffer may be reused and the kernel may exit.  A carried
  store leaves that wait to its next trip's ``wait_group 0`` and to the end of its loop
  (``wait_carried_stores``): its copies read the staging while the next tile is computed
  (NVIDIA's store warp waits at once, but it is not the warp that issues the next tile's
  loads, as our thread 0 is).  TMA clips what falls outside the tensor, so partial edge
  tiles are not masked either.

An atomic reduction into a view's tile is staged and issued as a store is, with
``cp.reduce.async.bulk.tensor`` (its op from the plan) in place of the bulk store.
"""
from __future__ import annotations

import itertools
from contextlib import nullcontext
from typing import Optional

from llvmlite import ir

from ..ir.core import Operation
from ..lower.tma_stream import TmaStream, tma_stream
from ..lower.tma import BARRIER_BYTES, TmaPlan
from . import device_maps
from . import intrinsics as X
from .emit_async import below, iteration_number, loop_bounds
from .nvvm import I32, KernelEmitter
from .values import TileVal, byte_gep, llvm_type


def _shared_address(em: KernelEmitter, b: ir.IRBuilder, offset) -> ir.Value:
    """32-bit shared-memory address of ``offset`` bytes into the kernel's shared memory."""
    off = ir.Constant(I32, offset) if isinstance(offset, int) else offset
    return b.ptrtoint(byte_gep(b, em.smem(), off), I32)


def init_barriers(em: KernelEmitter) -> None:
    """Thread 0 initializes every TMA load's mbarrier; each load's phase parity starts at 0."""
    b = em.b
    loads = [plan for plan in em.tas.tma.values() if not plan.is_store]
    if not loads:
        return
    with b.if_then(b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))):
        for plan in loads:
            for stage in range(plan.stages):
                X.mbarrier_init(b, _shared_address(em, b, plan.barrier + stage * BARRIER_BYTES), 1)
        X.fence_mbarrier_init(b)
    X.barrier(b)
    for op, plan in em.tas.tma.items():
        if plan.is_store:
            continue
        slot = em.pb.alloca(I32, name="tma.phase")
        em.pb.store(ir.Constant(I32, 0), slot)
        em.tma_phases[op] = slot


def tile_coords(b: ir.IRBuilder, indices: list[ir.Value], tile: tuple[int, ...]) -> list[ir.Value]:
    """The tile's first element, per dim (i32: TMA coordinates are 32-bit)."""
    out = []
    for index, size in zip(indices, tile):
        i32 = b.trunc(index, I32) if index.type.width > 32 else index
        out.append(b.mul(i32, ir.Constant(I32, size)))
    return out


def _issue(em: KernelEmitter, op: Operation, plan: TmaPlan, indices: list[ir.Value], stage=0,
           runs: Optional[ir.Value] = None) -> None:
    """Thread 0 (where ``runs``, if given) announces the tile's bytes on the mbarrier of
    ``stage`` (an int or an i32) and copies its boxes into the stage's buffer."""
    b = em.b
    tile = tuple(op.view.type.tile_shape)
    tmap = device_maps.map_address(em, plan.map_index)
    barrier = _shared_address(em, b, _plus(b, plan.barrier, stage, BARRIER_BYTES))
    buffer = _plus(b, plan.buffer, stage, plan.stage_bytes)
    first = b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))
    with b.if_then(first if runs is None else b.and_(first, runs)):
        X.mbarrier_expect_tx(b, barrier, plan.nbytes)
        for coords, dst in _boxes(em, plan, indices, tile, buffer):
            X.bulk_tensor_load(b, dst, tmap, coords, barrier)


def _plus(b: ir.IRBuilder, base: int, stage, stride: int):
    """``base + stage * stride`` (an int where ``stage`` is one, else an i32)."""
    if isinstance(stage, int):
        return base + stage * stride
    return b.add(ir.Constant(I32, base), b.mul(stage, ir.Constant(I32, stride)))


def _boxes(em: KernelEmitter, plan: TmaPlan, indices: list[ir.Value], tile: tuple[int, ...], buffer=None):
    """(coordinates innermost first, staging address) of each box of the tile, the boxes
    one after another from ``buffer`` (the plan's buffer by default; an int or an i32)."""
    b = em.b
    eb = plan.nbytes // (plan.box_elements * _count(plan.boxes))
    buffer = plan.buffer if buffer is None else buffer
    starts = tile_coords(b, indices, tile)
    for n, q in enumerate(itertools.product(*(range(k) for k in plan.boxes))):
        coords = [s if not qk else b.add(s, ir.Constant(I32, qk * bk))
                  for s, qk, bk in zip(starts, q, plan.box)]
        at = n * plan.box_elements * eb
        yield coords[::-1], _shared_address(em, b, buffer + at if isinstance(buffer, int)
                                            else b.add(buffer, ir.Constant(I32, at)))


def _count(boxes: tuple[int, ...]) -> int:
    n = 1
    for k in boxes:
        n *= k
    return n


def _wait(em: KernelEmitter, op: Operation, plan: TmaPlan) -> None:
    """Spin on ``try_wait.parity`` until the load's phase completes, then flip the parity."""
    b = em.b
    slot = em.tma_phases[op]
    parity = b.load(slot)
    wait_phase(em, _shared_address(em, b, plan.barrier), parity)
    b.store(b.xor(parity, ir.Constant(I32, 1)), slot)


def wait_phase(em: KernelEmitter, barrier: ir.Value, parity: ir.Value) -> None:
    """Spin on ``mbarrier.try_wait.parity`` until the phase of ``parity`` of the mbarrier
    at shared address ``barrier`` has completed."""
    b = em.b
    spin = em.llfn.append_basic_block("tma.wait")
    landed = em.llfn.append_basic_block("tma.landed")
    b.branch(spin)
    b.position_at_end(spin)
    done = X.mbarrier_try_wait(b, barrier, parity)
    b.cbranch(b.icmp_unsigned("!=", done, ir.Constant(I32, 0)), landed, spin)
    b.position_at_end(landed)


def _staged_offset(em: KernelEmitter, plan: TmaPlan, coords: list[ir.Value]) -> ir.Value:
    """Element offset in the staging buffer of tile coordinates ``coords``: boxes one after
    another (row-major over the box grid), each row-major inside."""
    b = em.b
    offset: ir.Value = ir.Constant(I32, 0)
    grid_stride, row_stride = 1, 1
    for k in reversed(range(len(coords))):
        c, box = coords[k], plan.box[k]
        if plan.boxes[k] > 1:
            q = b.lshr(c, ir.Constant(I32, box.bit_length() - 1))
            offset = b.add(offset, b.mul(q, ir.Constant(I32, grid_stride * plan.box_elements)))
            c = b.and_(c, ir.Constant(I32, box - 1))
        offset = b.add(offset, b.mul(c, ir.Constant(I32, row_stride)))
        grid_stride *= plan.boxes[k]
        row_stride *= box
    return offset


def _swizzle(b: ir.IRBuilder, plan: TmaPlan, offset):
    """Byte ``offset`` (an ``ir.Value`` or an int) moved as the buffer's swizzle moves it:
    rows of ``plan.swizzle`` bytes, the 16-byte chunk bits XORed with the bits of the
    128-byte line within the 8-line pattern, as TMA's 32/64/128-byte swizzles do (the
    buffer aligned to the pattern).  Linear over XOR, as the staging offsets are."""
    if not plan.swizzle:
        return offset
    mask = plan.swizzle // 16 - 1
    if isinstance(offset, int):
        return offset ^ ((offset >> 7) & mask) << 4
    lines = b.and_(b.lshr(offset, ir.Constant(I32, 7)), ir.Constant(I32, mask))
    return b.xor(offset, b.shl(lines, ir.Constant(I32, 4)))


def _staged_pointer(em: KernelEmitter, plan: TmaPlan, layout, reg: int, eb: int, buffer=None) -> ir.Value:
    """Pointer to register ``reg``'s element in the staging buffer (``_swizzle``) at
    ``buffer`` (the plan's by default; an int or an i32)."""
    b = em.b
    offset = b.mul(_staged_offset(em, plan, em.coords(layout, reg)), ir.Constant(I32, eb))
    base = buffer if isinstance(buffer, ir.Value) else ir.Constant(I32, plan.buffer if buffer is None else buffer)
    return byte_gep(b, em.smem(), b.add(base, _swizzle(b, plan, offset)))


def _staged_constant(plan: TmaPlan, coords: tuple[int, ...], eb: int) -> int:
    """``_staged_offset`` of constant ``coords``, in bytes, swizzled."""
    offset, grid_stride, row_stride = 0, 1, 1
    for k in reversed(range(len(coords))):
        c, box = coords[k], plan.box[k]
        offset += (c // box) * grid_stride * plan.box_elements + (c % box) * row_stride
        grid_stride *= plan.boxes[k]
        row_stride *= box
    return _swizzle(None, plan, offset * eb)


def _read_staged(em: KernelEmitter, op: Operation, plan: TmaPlan, layout, buffer=None) -> list[ir.Value]:
    b = em.b
    ty = llvm_type(op.results[0].type)
    eb = plan.nbytes // (plan.box_elements * _count(plan.boxes))
    vector = em.tas.vectors.get(op, 1)
    regs: list[ir.Value] = []
    for r in range(0, layout.size("reg"), vector):
        ptr = _staged_pointer(em, plan, layout, r, eb, buffer)
        if vector == 1:
            regs.append(b.load(ptr, typ=ty, align=eb))
            continue
        vec = b.load(ptr, typ=ir.VectorType(ty, vector), align=eb * vector)
        regs += [b.extract_element(vec, ir.Constant(I32, i)) for i in range(vector)]
    return regs


def emit_tma_load(em: KernelEmitter, op: Operation, indices: list[ir.Value]) -> None:
    """The load ``op`` through TMA (``em.tas.tma[op]``)."""
    plan = em.tas.tma[op]
    layout = em.result_layout(op.results[0])
    stream = tma_stream(em.tas, op)
    if stream is not None:
        _streamed_load(em, op, plan, stream, layout)
        return
    if op not in em.tma_staged:
        if em.in_loop:  # the previous trip's readers must be done with the buffer
            X.barrier(em.b)
        _issue(em, op, plan, indices)
        _wait(em, op, plan)
        em.tma_staged.add(op)
    # else ``op`` is computed again (layout_rules.recompute_plan) where its first emission,
    # earlier in program order, has staged the tile: the buffer is the load's alone for the
    # kernel, so its tile is read again in the layout wanted here.  Copying it again would
    # overwrite the buffer while other threads may still read it (a race), with nothing
    # to gain.
    em.put(op.results[0], TileVal(layout, _read_staged(em, op, plan, layout)))
    em.put(op.results[1], None)


def _write_staged(em: KernelEmitter, op: Operation, plan: TmaPlan, tile: TileVal) -> None:
    """Each element into the staging buffer, by the one thread that owns it (vectors where
    ``tas.vectors`` says: a run of registers stays inside one box row)."""
    from .emit_memory import store_groups

    b = em.b
    eb = plan.nbytes // (plan.box_elements * _count(plan.boxes))
    owner = em.owner_predicate(tile.layout)
    with b.if_then(owner) if owner is not None else nullcontext():
        if plan.matrix is not None:
            _write_matrices(em, plan, tile)
            return
        for group in store_groups(em.unique_regs(tile.layout), em.tas.vectors.get(op, 1)):
            ptr = _staged_pointer(em, plan, tile.layout, group[0], eb)
            if len(group) == 1:
                b.store(tile.regs[group[0]], ptr, align=eb)
                continue
            vec: ir.Value = ir.Constant(ir.VectorType(tile.regs[group[0]].type, len(group)), None)
            for i, r in enumerate(group):
                vec = b.insert_element(vec, tile.regs[r], ir.Constant(I32, i))
            b.store(vec, ptr, align=eb * len(group))


def _write_matrices(em: KernelEmitter, plan: TmaPlan, tile: TileVal) -> None:
    """The tile into the staging buffer with ``stmatrix`` (``plan.matrix``): instruction
    ``i`` stores registers ``2 count i`` on, two elements to a 32-bit register, each lane
    naming the 16-byte row ``form.rows`` gives it (the owner predicate, if any, is
    warp-uniform: only warp bits hold copies in a ``stmatrix_form`` layout).

    The staging offset and the swizzle are linear over XOR (power-of-two boxes), so a
    row's address is this thread's part (lane and warp bits, computed once) XOR the
    instruction's constant part: the constant's bits the thread's part never sets add as
    the instruction's immediate offset; one ``xor`` (and add) per distinct rest."""
    b = em.b
    form = plan.matrix
    rows = form.rows
    runtime = _swizzle(b, plan, b.mul(_staged_offset(em, plan, em.runtime_coords(rows)), ir.Constant(I32, 2)))
    varying = 0
    for base in rows.bases("lane") + rows.bases("warp"):
        varying |= _staged_constant(plan, base, 2)
    smem = b.ptrtoint(em.smem(), I32)
    addresses: dict[int, ir.Value] = {}      # per constant XOR part: this lane's row address
    pair = ir.VectorType(tile.regs[0].type, 2)
    for i in range(rows.size("reg")):
        words = []
        for r in range(i * form.elements, (i + 1) * form.elements, 2):
            vec = b.insert_element(ir.Constant(pair, None), tile.regs[r], ir.Constant(I32, 0))
            words.append(b.bitcast(b.insert_element(vec, tile.regs[r + 1], ir.Constant(I32, 1)), I32))
        const = _staged_constant(plan, rows.apply(reg=i), 2)
        mixed = const & varying
        if mixed not in addresses:
            addresses[mixed] = b.add(smem, b.xor(runtime, ir.Constant(I32, mixed)) if mixed else runtime)
        X.stmatrix(b, addresses[mixed], words, form.trans, plan.buffer + (const & ~varying))


def _issue_store(em: KernelEmitter, op: Operation, plan: TmaPlan, indices: list[ir.Value]) -> None:
    """Thread 0: one bulk tensor store per box, committed as a group, waited on until the
    group has read the staging buffer; a store carried to its own next trip
    (``TmaPlan.carried``) is waited on there instead (its ``wait_group 0``) and after the
    loop (``wait_carried_stores``), so the copies read the staging while the next tile's K
    loop runs."""
    b = em.b
    tmap = device_maps.map_address(em, plan.map_index, plan.device_map)
    with b.if_then(b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))):
        for coords, src in _boxes(em, plan, indices, tuple(op.view.type.tile_shape)):
            X.bulk_tensor_store(b, tmap, coords, src, plan.reduce)
        X.bulk_commit_group(b)
        if not plan.carried or not em.in_loop:      # outside loops no wait_carried_stores follows
            X.bulk_wait_group_read(b, 0)


def wait_carried_stores(em: KernelEmitter, body: list[Operation]) -> None:
    """After a loop whose ``body`` holds stores carried to their own next trip: thread 0
    waits until their last trip's copies have read the staging buffer."""
    if any(op in em.tas.tma and em.tas.tma[op].carried for op in body):
        b = em.b
        with b.if_then(b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))):
            X.bulk_wait_group_read(b, 0)


def build_store_map(em: KernelEmitter, plan: TmaPlan) -> None:
    """(A store through a map the kernel builds, where it is issued or once before loop
    ``plan.maps_at``) warp 0, whose thread 0 issues the copies, builds the map in its
    workspace slot (``codegen.device_maps``), assembling it in the store's staging buffer
    before the tile goes there."""
    b = em.b
    device_maps.build_maps(em, [(plan.device_map, _shared_address(em, b, plan.buffer))],
                           b.icmp_unsigned("<", em.tid, ir.Constant(I32, 32)),
                           b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0)))


def emit_tma_store(em: KernelEmitter, op: Operation, indices: list[ir.Value], tile: TileVal) -> None:
    """The store (or atomic reduction) ``op`` of ``tile`` through TMA (``em.tas.tma[op]``)."""
    b = em.b
    plan = em.tas.tma[op]
    if plan.carried:    # the previous trip's copies have written what this one's token follows
        with b.if_then(b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))):
            X.bulk_wait_group(b, 0)
    built_here = plan.device_map is not None and plan.maps_at is None
    if built_here:
        build_store_map(em, plan)
    # thread 0 has waited for the previous trip's (or store's) copies to read the buffer;
    # other threads' writes this store is token-ordered after are done (and warp 0 is done
    # reading the map it assembled in the buffer)
    # (over the scratch region: every scratch user before it is done with it)
    if em.in_loop or em.tas.aa.needs_barrier(op) or built_here or plan.carried or plan.over_scratch:
        X.barrier(b)
    _write_staged(em, op, plan, tile)
    X.fence_proxy_async(b)
    X.barrier(b)
    _issue_store(em, op, plan, indices)
    em.put(op.results[0], None)


# -- loads a streaming loop issues trips ahead (``tma_stream.TmaStream``) -------------
def stream_prologue(em: KernelEmitter, stream: TmaStream) -> None:
    """Before the loop: each load's copies of trips 0 .. S-1 (those the loop runs) into
    its stages 0 .. S-1.  No barrier first, even where an enclosing loop entered it
    before: every read of a stage is followed by the trip's CTA barrier (``all_have_read``),
    so no thread is still reading one when the loop is entered again."""
    b = em.b
    lb, ub, step = loop_bounds(em, stream)
    for ld in stream.loads:
        plan = em.tas.tma[ld]
        for s in range(plan.stages):
            iv = b.add(lb, b.mul(step, ir.Constant(step.type, s))) if s else lb
            _issue(em, ld, plan, _indices_at(em, stream, ld, iv), s, below(em, stream, iv, ub))


def hoisted_prologues(em: KernelEmitter, op: Operation, own_done: bool = False) -> None:
    """The first copies of the later loops placed before ``op`` (``TmaStream.prologue_at``).
    Where ``op`` is a streamed loop of its own, they go out after its own first copies
    (``own_done``: ``_for`` calls this then), which it needs first."""
    own = tma_stream(em.tas, op)
    if not own_done and own is not None and own.loop is op and own.prologue_at is None:
        return
    for stream in em.prologues_before.pop(op, ()):
        stream_prologue(em, stream)

def _indices_at(em: KernelEmitter, stream: TmaStream, ld: Operation, iv: ir.Value) -> list[ir.Value]:
    """The load's (scalar) indices on the trip whose induction variable is ``iv``: the
    loop's own index replaced, the others (made before the loop) as they are."""
    arg = stream.loop.regions[0].blocks[0].args[0]
    return [iv if v is arg else em.values[v].scalar for v in ld.index]


def _streamed_load(em: KernelEmitter, op: Operation, plan: TmaPlan, stream: TmaStream, layout) -> None:
    """Trip i of a streamed load: wait for stage i % S (each stage's phase parity is a bit
    of the load's phase variable), read the tile, a CTA barrier (every thread has read
    the stage), then thread 0 issues trip i + S into it, if the loop runs that trip."""
    b = em.b
    _, ub, step = loop_bounds(em, stream)
    iv = em.values[stream.loop.regions[0].blocks[0].args[0]].scalar
    stage = b.urem(iteration_number(em, stream), ir.Constant(I32, plan.stages)) if plan.stages > 1 else 0
    slot = em.tma_phases[op]
    phases = b.load(slot)
    bit = ir.Constant(I32, 1) if stage == 0 else b.shl(ir.Constant(I32, 1), stage)
    parity = b.lshr(phases, stage) if stage != 0 else phases
    wait_phase(em, _shared_address(em, b, _plus(b, plan.barrier, stage, BARRIER_BYTES)),
               b.and_(parity, ir.Constant(I32, 1)))
    b.store(b.xor(phases, bit), slot)
    buffer = _plus(b, plan.buffer, stage, plan.stage_bytes)
    em.put(op.results[0], TileVal(layout, _read_staged(em, op, plan, layout, buffer)))
    em.put(op.results[1], None)
    all_have_read(b)
    ahead = b.add(iv, b.mul(step, ir.Constant(iv.type, plan.stages)))
    _issue(em, op, plan, _indices_at(em, stream, op, ahead), stage, below(em, stream, ahead, ub))


def all_have_read(b: ir.IRBuilder) -> None:
    """The CTA barrier after which a streamed stage may be refilled: every thread has read it."""
    X.barrier(b)
