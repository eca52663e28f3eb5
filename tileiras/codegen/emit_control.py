"""Structured control flow (if/for/loop with yield/continue/break/return), tile
block ids, tokens, print and assert.

Loop-carried tiles and if results are in their canonical layout (TileAS), so
each register becomes one LLVM phi.  Phis of merge and exit blocks are built
once every edge into them has been emitted.
"""
from __future__ import annotations

from typing import Callable, Optional

from llvmlite import ir

from ..errors import CompileError
from ..ir import types as T
from ..ir.core import Operation, Value
from ..layout.core import OFFSET, REG, LinearLayout
from ..lower.attention_tma import AttentionRingPlan
from ..lower.forwarding import kept_loads, unrolled_loops
from ..lower.software_pipeline import pipelined_op
from ..lower.stream_pipeline import stream_plan
from ..lower.tma_stream import tma_stream
from ..lower.tma_ring import RingPlan
from ..lower.tiles import element_bytes
from ..record import field, record
from ..tile import ops_control as CF
from ..tile import ops_core as CO
from ..tile import ops_memory as MEM
from ..tile.ops_internal import ClusterRankOp
from . import emit_async, emit_attention_tma, emit_ring, emit_stream, emit_tma, smem_copy
from . import intrinsics as X
from .nvvm import I32, I64, KernelEmitter, emits
from .values import TileVal, byte_gep, llvm_type

Incoming = tuple[ir.Block, list[list[ir.Value]]]


@record
class Frame:
    """One enclosing structured op: where yield/continue/break go."""

    op: Operation
    merge: Optional[ir.Block] = None                  # if: after both branches; loop: exit
    header: Optional[ir.Block] = None                 # loops: the header with the phis
    header_phis: list[list[ir.PhiInstr]] = field(default_factory=list)
    exits: list[Incoming] = field(default_factory=list)
    iv_next: Optional[ir.Value] = None                # for: the induction step
    #: for: the loads whose tiles a later loop reads (lower/forwarding.py), each with its
    #: header phis, per trip the tile's registers
    kept: list[tuple[Operation, list[list[ir.PhiInstr]]]] = field(default_factory=list)
    #: for: registers the loop's pipelined code carries from one trip to the next, not a
    #: result of the loop (flash attention's S, computed an iteration ahead on ``wgmma``:
    #: ``emit_attention_tma``): the header's phis, and what the trip now emitted hands on
    ahead: list[ir.PhiInstr] = field(default_factory=list)
    ahead_next: list[ir.Value] = field(default_factory=list)
    #: what completes ``ahead_next`` at the trip's end (a ``wgmma`` group's wait), if anything
    ahead_done: Optional[Callable[[list[ir.Value]], list[ir.Value]]] = None


def _regs_of(em: KernelEmitter, op: Operation) -> list[list[ir.Value]]:
    return [em.tile(op, i).regs for i in range(len(op.operands))]


def _bind_phis(em: KernelEmitter, block: ir.Block, results: list[Value], incoming: list[Incoming]) -> None:
    """At the top of ``block``: one phi per register of each result."""
    em.b.position_at_start(block)
    for k, r in enumerate(results):
        layout = em.result_layout(r) if r in em.tas.layouts else None
        if layout is None:
            em.put(r, None)
            continue
        regs = []
        for j in range(layout.size("reg")):
            first = incoming[0][1][k][j]
            if all(inc[1][k][j] is first for inc in incoming):
                regs.append(first)
                continue
            phi = em.b.phi(first.type)
            for blk, vals in incoming:
                phi.add_incoming(vals[k][j], blk)
            regs.append(phi)
        em.put(r, TileVal(layout, regs))
    em.b.position_at_end(block)


def _tile_results(results: list[Value]) -> list[Value]:
    return [r for r in results if not isinstance(r.type, T.TokenType)]


@emits(CF.IfOp)
def _if(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    cond = em.scalar(op, 0)
    then_bb = em.llfn.append_basic_block("if.then")
    else_bb = em.llfn.append_basic_block("if.else")
    merge = em.llfn.append_basic_block("if.end")
    b.cbranch(cond, then_bb, else_bb)
    frame = Frame(op, merge=merge)
    em.frames.append(frame)
    for region, bb in zip(op.regions, (then_bb, else_bb)):
        b.position_at_end(bb)
        if region.blocks:
            em.emit_block(region.blocks[0])
        if not b.block.is_terminated:  # an empty else region yields nothing
            frame.exits.append((b.block, []))
            b.branch(merge)
    em.frames.pop()
    b.position_at_end(merge)
    if not frame.exits:
        b.unreachable()
        return
    _bind_results(em, op, frame.exits, merge)


def _bind_results(em: KernelEmitter, op: Operation, exits: list[Incoming], block: ir.Block) -> None:
    results = list(op.results)
    full = [(blk, vals) for blk, vals in exits if len(vals) == len(results)]
    if results and len(full) != len(exits):
        raise CompileError(f"'{op.name}' region ends without yielding its results")
    # tokens carry no registers: give them empty lists
    norm = [(blk, [v if v is not None else [] for v in vals]) for blk, vals in full]
    if results:
        _bind_phis(em, block, results, norm)


def _token_or_regs(em: KernelEmitter, op: Operation) -> list:
    out = []
    for i, v in enumerate(op.operands):
        out.append(None if isinstance(v.type, T.TokenType) or v not in em.tas.layouts and not
                   isinstance(em.values.get(v), TileVal) else em.tile(op, i).regs)
    return out


@emits(CF.YieldOp)
def _yield(em: KernelEmitter, op: Operation) -> None:
    frame = _enclosing(em, (CF.IfOp,), op)
    frame.exits.append((em.b.block, _token_or_regs(em, op)))
    em.b.branch(frame.merge)


@emits(CF.ContinueOp)
def _continue(em: KernelEmitter, op: Operation) -> None:
    frame = _enclosing(em, (CF.ForOp, CF.LoopOp), op)
    vals = _token_or_regs(em, op)
    handed = frame.ahead_done(frame.ahead_next) if frame.ahead_done else frame.ahead_next
    block = em.b.block
    if isinstance(frame.op, CF.ForOp):
        iv = frame.header_phis[0][0]
        step = frame.iv_next
        next_iv = em.b.add(iv, step)
        frame.header_phis[0][0].add_incoming(next_iv, em.b.block)
        carried = frame.header_phis[1:]
    else:
        carried = frame.header_phis
    for phis, regs in zip(carried, vals):
        for phi, v in zip(phis, regs or []):
            phi.add_incoming(v, block)
    _keep_tiles(em, frame, block)
    for phi, v in zip(frame.ahead, handed):
        phi.add_incoming(v, block)
    back = em.b.branch(frame.header)
    if frame.op in unrolled_loops(em.tas):
        _unroll_fully(em, back)


@emits(CF.BreakOp)
def _break(em: KernelEmitter, op: Operation) -> None:
    frame = _enclosing(em, (CF.LoopOp,), op)
    frame.exits.append((em.b.block, _token_or_regs(em, op)))
    em.b.branch(frame.merge)


def _enclosing(em: KernelEmitter, kinds: tuple[type, ...], op: Operation) -> Frame:
    for frame in reversed(em.frames):
        if isinstance(frame.op, kinds):
            return frame
    raise CompileError(f"'{op.name}' outside of an enclosing {'/'.join(k.definition.name for k in kinds)}")


def _loop_header(em: KernelEmitter, frame: Frame, inits: list, carried: list[Value], header: ir.Block,
                 entry: ir.Block) -> None:
    """Create the header phis with their entry incoming; bind the block arguments."""
    em.b.position_at_end(header)
    for arg, init in zip(carried, inits):
        if init is None:
            frame.header_phis.append([])
            em.put(arg, None)
            continue
        phis = []
        for v in init:
            phi = em.b.phi(v.type)
            phi.add_incoming(v, entry)
            phis.append(phi)
        frame.header_phis.append(phis)
        em.put(arg, TileVal(em.result_layout(arg), list(phis)))


def _build_maps_before(em: KernelEmitter, op: Operation) -> None:
    """Before loop ``op``: the maps the kernel builds whose home it is (``maps_at``, a
    loop whose trips keep them: ``tma.map_home``), once, after a barrier (the code before
    is done with the shared memory they are assembled in)."""
    rings = [p for p in em.tas.pipelines.values() if isinstance(p, RingPlan) and p.maps_at is op]
    stores = [p for p in em.tas.tma.values() if p.maps_at is op]
    if not rings and not stores:
        return
    X.barrier(em.b)
    for ring in rings:
        emit_ring.build_maps(em, ring)
    for store in stores:
        emit_tma.build_store_map(em, store)


@emits(CF.ForOp)
def _for(em: KernelEmitter, op: Operation) -> None:
    _build_maps_before(em, op)
    b = em.b
    split = next((p for p in em.tas.pipelines.values() if isinstance(p, RingPlan) and p.outer is op), None)
    if split is not None:       # a warp-specialized persistent ring's loop over tiles
        emit_ring.split_roles(em, split)
    lb, ub, step = (em.scalar(op, i) for i in range(3))
    inits = _token_or_regs(em, op)[3:]
    plan = pipelined_op(em.tas, op)
    ahead = None
    if isinstance(plan, AttentionRingPlan):     # sm_90 flash attention's TMA ring
        ahead = emit_attention_tma.prologue(em, plan)
    elif plan is not None:      # a software-pipelined K loop: its first stages' copies
        ahead = emit_async.prologue(em, plan)
    stream = stream_plan(em.tas, op)
    if stream is not None:      # a pipelined streaming loop: its first trips' copies
        emit_stream.prologue(em, stream)
    ahead_loads = tma_stream(em.tas, op)
    if ahead_loads is not None and ahead_loads.prologue_at is None:     # its first trips' boxes
        emit_tma.stream_prologue(em, ahead_loads)
        emit_tma.hoisted_prologues(em, op, own_done=True)      # then later loops' placed here
    entry = b.block
    header = em.llfn.append_basic_block("for.header")
    body = em.llfn.append_basic_block("for.body")
    exit_bb = em.llfn.append_basic_block("for.end")
    b.branch(header)
    block = op.regions[0].blocks[0]
    frame = Frame(op, merge=exit_bb, header=header, iv_next=step)
    b.position_at_end(header)
    iv = b.phi(lb.type, name="iv")
    iv.add_incoming(lb, entry)
    frame.header_phis.append([iv])
    em.put(block.args[0], TileVal(em.result_layout(block.args[0]), [iv]))
    _loop_header(em, frame, inits, list(block.args[1:]), header, entry)
    _kept_slots(em, frame, entry)
    for reg in ahead or []:
        phi = b.phi(reg.type)
        phi.add_incoming(reg, entry)
        frame.ahead.append(phi)
    unsigned = bool(op.attributes.get("unsignedCmp"))
    more = b.icmp_unsigned("<", iv, ub) if unsigned else b.icmp_signed("<", iv, ub)
    b.cbranch(more, body, exit_bb)
    em.frames.append(frame)
    b.position_at_end(body)
    if stream is not None:      # wait for trip i's tiles, read them, refill the freed stage
        emit_stream.steady_state(em, stream)
    em.emit_block(block)
    if not b.block.is_terminated:
        raise CompileError("'for' body must end with 'continue'")
    em.frames.pop()
    # results: the carried values as the header saw them when the loop ended
    b.position_at_end(exit_bb)
    for r, phis, arg in zip(op.results, frame.header_phis[1:], block.args[1:]):
        em.put(r, TileVal(em.result_layout(r), list(phis)) if phis else None)
    em.kept_tiles.update((load, [[*regs] for regs in slots]) for load, slots in frame.kept)
    if isinstance(plan, AttentionRingPlan):
        emit_attention_tma.drain(em, plan)
    elif plan is not None:      # after the results: a TMA ring's drain completes its accumulator
        emit_async.drain(em, plan)
    elif stream is not None:
        emit_async.drain(em, stream)
    emit_tma.wait_carried_stores(em, block.ops)


def _kept_slots(em: KernelEmitter, frame: Frame, entry: ir.Block) -> None:
    """Header phis for the tiles of every trip of the loads the loop keeps (undefined
    until their trip)."""
    for load in kept_loads(em.tas, frame.op):
        forward = next(f for f in em.tas.forwarded.values() if f.source is load)
        ty = llvm_type(load.results[0].type)
        slots = []
        for _ in range(forward.trips):
            phis = [em.b.phi(ty) for _ in range(em.result_layout(load.results[0]).size("reg"))]
            for phi in phis:
                phi.add_incoming(ir.Constant(ty, ir.Undefined), entry)
            slots.append(phis)
        frame.kept.append((load, slots))


def _keep_tiles(em: KernelEmitter, frame: Frame, block: ir.Block) -> None:
    """On the back edge: trip k's slot takes the kept load's registers on trip k."""
    if not frame.kept:
        return
    forward = em.tas.forwarded
    iv = frame.header_phis[0][0]
    for load, slots in frame.kept:
        plan = next(f for f in forward.values() if f.source is load)
        tile = em.values.get(load.results[0])
        if not isinstance(tile, TileVal):
            raise CompileError(f"kept load '{load.name}' was not emitted in its loop")
        for k, phis in enumerate(slots):
            now = em.b.icmp_signed("==", iv, ir.Constant(iv.type, plan.lower + k * plan.step))
            for phi, reg in zip(phis, tile.regs):
                phi.add_incoming(em.b.select(now, reg, phi), block)


def _unroll_fully(em: KernelEmitter, back: ir.Instruction) -> None:
    """Ask LLVM to unroll the loop whose back edge is ``back`` completely (its own loop
    ID: a node naming itself, then ``llvm.loop.unroll.full``): the slots of kept tiles and
    the picks among them fold to the registers of each trip only in unrolled code."""
    module = em.llfn.module
    full = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.full")])
    loop = module.add_metadata([ir.MetaDataString(module, f"tileiras.unroll.{len(module.metadata)}"), full])
    loop.operands = (loop, full)
    back.set_metadata("llvm.loop", loop)


def forwarded_load(em: KernelEmitter, op: Operation) -> None:
    """A load whose tile an earlier loop kept: on trip k, that loop's registers of trip k
    (after the loop, those of the trip it reads)."""
    plan = em.tas.forwarded[op]
    slots = em.kept_tiles[plan.source]
    if plan.consumer_loop is None:      # after the loop: one trip's tile
        em.put(op.results[0], TileVal(em.result_layout(op.results[0]), list(slots[plan.trip])))
        em.put(op.results[1], None)
        return
    iv = _enclosing(em, (CF.ForOp,), op).header_phis[0][0]
    regs = list(slots[-1])
    for k in reversed(range(plan.trips - 1)):
        now = em.b.icmp_signed("==", iv, ir.Constant(iv.type, plan.lower + k * plan.step))
        regs = [em.b.select(now, kept, later) for kept, later in zip(slots[k], regs)]
    em.put(op.results[0], TileVal(em.result_layout(op.results[0]), regs))
    em.put(op.results[1], None)


@emits(CF.LoopOp)
def _loop(em: KernelEmitter, op: Operation) -> None:
    _build_maps_before(em, op)
    b = em.b
    inits = _token_or_regs(em, op)
    entry = b.block
    header = em.llfn.append_basic_block("loop.header")
    exit_bb = em.llfn.append_basic_block("loop.end")
    b.branch(header)
    block = op.regions[0].blocks[0]
    frame = Frame(op, merge=exit_bb, header=header)
    _loop_header(em, frame, inits, list(block.args), header, entry)
    em.frames.append(frame)
    em.emit_block(block)
    if not b.block.is_terminated:
        raise CompileError("'loop' body must end with 'continue' or 'break'")
    em.frames.pop()
    b.position_at_end(exit_bb)
    if not frame.exits:
        b.unreachable()
        return
    _bind_results(em, op, frame.exits, exit_bb)
    emit_tma.wait_carried_stores(em, block.ops)


@emits(CF.ReturnOp)
def _return(em: KernelEmitter, op: Operation) -> None:
    em.end_kernel()


# -- ids, tokens -------------------------------------------------------------------------
def _block_ids(em: KernelEmitter, op: Operation, kind: str) -> None:
    """A tile block is a cluster on sm_90+ (one CTA per cluster unless the kernel asks
    for more, when the grid counts clusters), a CTA before."""
    clustered = em.target.uses_clusters and em.cluster_size > 1
    names = {"id": ("clusterid" if em.target.uses_clusters else "ctaid"),
             "count": ("nclusterid" if clustered else "nctaid")}[kind]
    for r, axis in zip(op.results, "xyz"):
        em.put(r, TileVal(em.result_layout(r), [X.sreg(em.b, f"{names}.{axis}")]))


@emits(CO.GetTileBlockIdOp)
def _tile_block_id(em: KernelEmitter, op: Operation) -> None:
    _block_ids(em, op, "id")


@emits(ClusterRankOp)
def _cluster_rank(em: KernelEmitter, op: Operation) -> None:
    em.put(op.result, TileVal(em.result_layout(op.result), [X.sreg(em.b, "cluster.ctaid.x", op.size)]))


@emits(CO.GetNumTileBlocksOp)
def _num_tile_blocks(em: KernelEmitter, op: Operation) -> None:
    _block_ids(em, op, "count")


@emits(MEM.MakeTokenOp, MEM.JoinTokensOp)
def _token(em: KernelEmitter, op: Operation) -> None:
    em.put(op.result, None)


# -- print and assert --------------------------------------------------------------------
def _gather_all(em: KernelEmitter, tv: TileVal, ty: T.Type) -> list[ir.Value]:
    """Every element of a tile, in row-major order, in every thread (through smem)."""
    if tv.layout.rank == 0:
        return [tv.regs[0]]
    at = smem_copy.row_major(tv.layout.shape, element_bytes(ty))
    X.barrier(em.b)
    smem_copy.store(em, tv, at)
    X.barrier(em.b)
    everything = LinearLayout(((REG, at.layout.bases(OFFSET)),), at.shape)     # register i: element i
    out = smem_copy.load(em, everything, at, tv.regs[0].type)
    X.barrier(em.b)
    return out


def _printf_args(b: ir.IRBuilder, values: list[ir.Value]) -> tuple[list[ir.Value], list[str]]:
    """C varargs promotion: floats to double, small ints to i32."""
    out = []
    for v in values:
        t = v.type
        if isinstance(t, (ir.FloatType, ir.HalfType)) or str(t) == "bfloat":
            out.append(b.fpext(v, ir.DoubleType()))
        elif isinstance(t, ir.IntType) and t.width < 32:
            out.append(b.sext(v, I32) if t.width > 1 else b.zext(v, I32))
        elif isinstance(t, ir.PointerType):
            out.append(b.ptrtoint(v, I64))
        else:
            out.append(v)
    return out, []


def _expand_format(fmt: str, shapes: list[tuple[int, ...]]) -> str:
    """Each conversion of a tile argument prints the whole tile: ``[a, b, ...]``."""
    out, i, arg = [], 0, 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%" or i + 1 < len(fmt) and fmt[i + 1] == "%":
            out.append(fmt[i:i + 2] if ch == "%" else ch)
            i += 2 if ch == "%" else 1
            continue
        j = i + 1
        while j < len(fmt) and fmt[j] not in "diouxXeEfgGcsp":
            j += 1
        spec = fmt[i:j + 1]
        shape = shapes[arg] if arg < len(shapes) else ()
        out.append(_nested(spec, shape))
        arg += 1
        i = j + 1
    return "".join(out)


def _nested(spec: str, shape: tuple[int, ...]) -> str:
    if not shape:
        return spec
    inner = _nested(spec, shape[1:])
    return "[" + ", ".join([inner] * shape[0]) + "]"


@emits(CF.PrintTkoOp)
def _print(em: KernelEmitter, op: Operation) -> None:
    b = em.b
    args, shapes = [], []
    for i, v in enumerate(op.args):
        tv = em.tile(op, i)
        args += _gather_all(em, tv, v.type)
        shapes.append(tuple(v.type.shape))
    fmt = _expand_format(op.str, shapes)
    leader = b.icmp_unsigned("==", em.tid, ir.Constant(I32, 0))
    if em.target.uses_clusters:  # once per tile block: the cluster's first CTA prints
        first = b.icmp_unsigned("==", X.sreg(b, "cluster.ctaid.x"), ir.Constant(I32, 0))
        leader = b.and_(leader, first)
    with b.if_then(leader):
        _vprintf(em, fmt, args)
    if op.results:
        em.put(op.results[0], None)


def _vprintf(em: KernelEmitter, fmt: str, args: list[ir.Value]) -> None:
    b = em.b
    data = bytearray(fmt.encode()) + b"\0"
    name = f"printfFormat_{len([g for g in em.module.global_values if g.name.startswith('printfFormat_')])}"
    g = ir.GlobalVariable(em.module, ir.ArrayType(ir.IntType(8), len(data)), name=name, addrspace=1)
    g.global_constant = True
    g.linkage = "internal"
    g.initializer = ir.Constant(ir.ArrayType(ir.IntType(8), len(data)), data)
    fmt_ptr = b.addrspacecast(g, ir.PointerType())
    vals, _ = _printf_args(b, args)
    if vals:
        # the argument buffer: each value at its natural alignment, like a C struct
        offsets, size = [], 0
        for v in vals:
            width = 8 if isinstance(v.type, ir.DoubleType) or getattr(v.type, "width", 0) == 64 else 4
            size += -size % width
            offsets.append(size)
            size += width
        slot = b.alloca(ir.ArrayType(ir.IntType(8), size + -size % 8))
        slot.align = 8
        base = b.bitcast(slot, ir.PointerType())
        base.type = ir.PointerType()
        for off, v in zip(offsets, vals):
            b.store(v, byte_gep(b, base, ir.Constant(I64, off)))
        buf = base
    else:
        buf = ir.Constant(ir.PointerType(), None)
    X.vprintf(b, fmt_ptr, buf)


@emits(CF.AssertOp)
def _assert(em: KernelEmitter, op: Operation) -> None:
    """Each failing element prints NVIDIA's message (source position, tile block,
    element position, message), then the kernel traps."""
    b = em.b
    tv = em.tile(op, 0)
    loc = _source_position(op)
    rank = tv.layout.rank
    fmt = (f"{loc}tile block: [%d, %d, %d], position: [{', '.join(['%d'] * rank)}]: "
           f"{op.message}\n")
    names = "clusterid" if em.target.uses_clusters else "ctaid"
    block = [X.sreg(b, f"{names}.{axis}") for axis in "xyz"]
    for reg in em.unique_regs(tv.layout):
        failed = b.not_(tv.regs[reg])
        with b.if_then(failed, likely=False):
            _vprintf(em, fmt, block + em.coords(tv.layout, reg))
            X.trap(b)


def _source_position(op: Operation) -> str:
    """``file:line: `` of the op's source location ('' when it has none)."""
    from ..ir import debug as D  # noqa: PLC0415

    loc = op.loc
    while isinstance(loc, D.DICallSite):
        loc = loc.callee
    return f"{loc.filename}:{loc.line}: " if isinstance(loc, D.DILoc) else ""


# -- programmatic dependent launch and fences ------------------------------------------------
@emits(CF.GdcWaitTkoOp)
def _gdc_wait(em: KernelEmitter, op: Operation) -> None:
    """Wait for the grids this one depends on (no-op before sm_90)."""
    if em.target.arch >= 90:
        X.asm(em.b, ir.VoidType(), "griddepcontrol.wait;", "~{memory}", [], side_effect=True)
    em.put(op.result_token, None)


@emits(CF.GdcLaunchDependentsTkoOp)
def _gdc_launch(em: KernelEmitter, op: Operation) -> None:
    if em.target.arch >= 90:
        X.asm(em.b, ir.VoidType(), "griddepcontrol.launch_dependents;", "~{memory}", [], side_effect=True)
    em.put(op.result_token, None)


@emits(MEM.MemoryFenceAliasTkoOp)
def _fence_alias(em: KernelEmitter, op: Operation) -> None:
    """Accesses through aliasing views are ordered: all threads' earlier accesses
    complete before any later one (a CTA barrier orders global memory too)."""
    X.barrier(em.b)
    em.put(op.results[0], None)
