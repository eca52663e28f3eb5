"""TileAS -> NVVM LLVM IR (llvmlite) -> PTX.

``KernelEmitter`` walks one entry function.  Every tile is a ``TileVal``: the
LLVM values of the elements this thread holds, in the order of its layout's
register index.  One emitter per op class (``@emits(AddFOp)``) lives in the
``emit_*`` modules; this module holds what they share: value bookkeeping,
the single "apply layout" emitter (``coords``), layout conversion through
shared memory, and PTX generation with LLVM's NVPTX back end.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Optional, Sequence

from llvmlite import ir

from ..errors import CompileError
from ..ir import types as T
from ..ir.core import Block, Function, Module, Operation, Value
from ..layout.linear import LANE, REG, WARP, LinearLayout
from ..lower.chunks import ITER, ChunkGroup
from ..lower.emission_order import chunk_ops, emitted_ops, is_deferrable
from ..lower.tileas import TileAS
from ..lower.tiles import element_bytes
from ..record import record
from . import intrinsics as X
from .debuginfo import LineInfo
from .llvm_targets import NVPTX_DATA_LAYOUT, NVPTX_TRIPLE, nvptx_assembly
from .order import order_function
from .values import Emitted, TileVal, byte_gep, llvm_type

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)

from ..tile.traits import is_plain_load  # noqa: E402

EmitFn = Callable[["KernelEmitter", Operation], None]
EMITTERS: dict[type, EmitFn] = {}


def emits(*classes: type) -> Callable[[EmitFn], EmitFn]:
    def register(fn: EmitFn) -> EmitFn:
        for c in classes:
            EMITTERS[c] = fn
        return fn
    return register


def _optional_emitter(op_class: type) -> Optional[EmitFn]:
    """The emitter of an op from a family few kernels use (MMA, multimem): its module is
    imported on first use, not at every start (a cold ``tileiras`` imports what it runs)."""
    from . import emit_mma, emit_multimem  # noqa: F401  (register emitters)

    return EMITTERS.get(op_class)


#: Registers a thread of a guarded access inside a loop may hold for its addresses to be
#: computed from hoistable coordinates (KernelEmitter.coordinates_here).
HOISTED_ACCESS_REGISTERS = 8


@record(frozen=True)
class Target:
    arch: int                    # 80, 90, 100, 120...
    lineinfo: bool = False       # attach source locations (.loc) to instructions
    debug: bool = False          # -g: full debug information

    @property
    def name(self) -> str:
        return f"sm_{self.arch}"

    @property
    def uses_clusters(self) -> bool:
        return self.arch >= 90


def dominates(start: ir.Block, a: ir.Block, b: ir.Block) -> bool:
    """Does block ``a`` dominate block ``b`` (the one being built) in the code from block
    ``start`` on, as far as it is built: ``start`` reaches ``b``, but not without passing
    ``a``?  (A block nothing branches to yet dominates nothing.)"""
    return a is b or (_reaches(start, b, None) and not _reaches(start, b, a))


def _reaches(start: ir.Block, target: ir.Block, avoiding: Optional[ir.Block]) -> bool:
    seen, work = {id(avoiding)}, [start]
    while work:
        blk = work.pop()
        if blk is target:
            return True
        if id(blk) in seen:
            continue
        seen.add(id(blk))
        term = blk.terminator
        if term is not None:
            work.extend(o for o in term.operands if isinstance(o, ir.Block))
    return False


class KernelEmitter:
    def __init__(self, module: ir.Module, fn: Function, tas: TileAS, target: Target, cluster_size: int = 1):
        self.module, self.fn, self.tas, self.target = module, fn, tas, target
        self.cluster_size = cluster_size if target.uses_clusters else 1
        params = [llvm_type(a.type) for a in fn.entry_block.args]
        self.llfn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=fn.name)
        module.add_named_metadata("nvvm.annotations", [self.llfn, "kernel", ir.Constant(I32, 1)])
        # values that depend only on the thread index are computed once, in the
        # prologue block, so that they dominate every use
        self.pb = X.KernelBuilder(self.llfn.append_basic_block("entry"))
        self.b = X.KernelBuilder(self.llfn.append_basic_block("body"))
        self.body_start = self.b.block      # where the kernel's code starts (the entry branches here last)
        self.values: dict[Value, Emitted] = {}
        #: what this emitter reads instead of TileAS's layouts and conversions while it emits
        #: ops in layouts TileAS recorded for one place (a chunked loop, a recomputation):
        #: the values' layouts there, and the uses whose conversion is not made there
        self._layouts: dict[Value, LinearLayout] = {}
        self._unconverted: frozenset = frozenset()
        self._converts: dict = {}
        #: ids of the phis that merge a guarded load's registers with its padding
        self.load_merges: set[int] = set()
        #: ids of the load instructions order.py may move later past plain stores
        #: (``sinkable_load``: no write is token-ordered after their load op)
        self.sinkable: set[int] = set()
        self._coord_cache: dict[LinearLayout, list[ir.Value]] = {}
        self._owner_cache: dict[tuple[LinearLayout, bool], Optional[ir.Value]] = {}
        self._smem: Optional[ir.GlobalVariable] = None
        self.tma_phases: dict[Operation, ir.Value] = {}   # TMA load -> its phase parity (emit_tma)
        self.tma_staged: set[Operation] = set()            # TMA loads emitted (their tiles staged)
        self.ring_counters: dict[Operation, ir.Value] = {}   # persistent ring's loop -> its K-tile counter
        self.tmem_base: Optional[ir.Value] = None   # the tensor memory's address (emit_tcgen05)
        self.tmem_uses: Optional[ir.Value] = None   # i32 slot: phases of the tcgen05 mbarrier so far
        self.built_maps: dict = {}      # device-built map (TensorMapSpec) -> its generic address
        self.frames: list = []    # control-flow frames (emit_control)
        self.kept_tiles: dict = {}   # load -> its tile's registers of every trip (emit_control)
        self.hoisted_addresses: dict = {}   # gathered A -> its AddressSlice's hoisted tiles (emit_async)
        self.ring_stages: dict = {}     # pipelined loop -> its current stage's byte offset (emit_async)
        self._recomputed: dict = {}     # recomputation -> (block, inputs, its values): ``recompute``
        self._again_depth = 0           # inside emitted_again (no recomputation is kept there)
        #: op -> the TMA streams whose first copies go out before it (``place_tma_prologues``)
        self.prologues_before: dict[Operation, list] = {}
        for plan in tas.pipelines.values():
            if getattr(plan, "prologue_at", None) is not None:
                self.prologues_before.setdefault(plan.prologue_at, []).append(plan)
        self.iteration: Optional[ir.Value] = None   # the chunk counter inside a chunked loop
        self._iter_cache: dict = {}
        self.here = False       # inside coordinates_here: tile starts are computed afresh
        self._non_negative: dict[int, ir.Value] = {}   # id -> scalar known >= 0 (put)
        self.lineinfo: Optional[LineInfo] = None
        self.scope = None
        if target.lineinfo:
            self.lineinfo = line_info(module)
            self.scope = self.lineinfo.subprogram(fn, self.llfn)
        self._thread_position(X.sreg(self.pb, "tid.x", self.tas.num_threads))
        for arg, llarg, v in zip(fn.entry_block.args, self.llfn.args, fn.entry_block.args):
            llarg.name = f"arg{arg.index}"
            self.values[v] = TileVal(tas.layouts[v], [llarg]) if v in tas.layouts else None

    def _thread_position(self, tid: ir.Value) -> None:
        """tid, lane and warp (built with ``self.pb``) that the layouts' coordinates use."""
        self.tid = tid
        self.lane = self.pb.and_(tid, ir.Constant(I32, 31), name="lane")
        self.warp = self.pb.lshr(tid, ir.Constant(I32, 5), name="warp")
        # warps beyond the layouts' (extra warps in the CTA) mirror the first ones and
        # never own an element
        self.extra = None
        if self.tas.extra_warps:
            self.extra = self.pb.icmp_unsigned(">=", self.warp, ir.Constant(I32, self.tas.num_warps))
            self.warp = self.pb.and_(self.warp, ir.Constant(I32, self.tas.num_warps - 1), name="warp")

    @contextmanager
    def coordinates_here(self, registers: int = 1, tested: bool = True):
        """Inside: thread coordinates are computed again in the current block, from a
        fresh read of %tid.x that LLVM may neither hoist nor merge with another, instead
        of coming from the prologue.  A guarded memory access (emit_memory.tile_in_range)
        then keeps its address arithmetic inside its branch, as NVIDIA's PTX does; ptxas
        keeps fewer values live across the kernel than when every access shares them.
        Tile indices are extended to 64 bits again in here too (``self.here``,
        emit_memory._index_here).

        Inside a loop, for an access of at most ``HOISTED_ACCESS_REGISTERS`` registers a
        thread, the coordinates start from the prologue's %tid.x, in plain arithmetic LLVM
        hoists out of the loop: a fresh read (inline asm, never hoisted) and what is computed
        from it would run on every trip (loop_accumulate, layernorm: 1.5x NVIDIA's executed
        instructions).  Wider accesses (a matrix multiply's operand tiles) still compute
        their addresses afresh: hoisted, each row's address would stay live through the loop
        (gemm_basic 128x128 on sm_120 spilled).

        The fresh read is known to be under the CTA size (``intrinsics._below``) only in
        the branch of a tile test (``tested``): a store without one computes its
        coordinates among the code around it, and there the unmasked %tid.x costs ptxas
        registers (float_compare_where sm_80 16 -> 18, NVIDIA 16)."""
        saved = (self.pb, self.tid, self.lane, self.warp, self.extra, self._coord_cache, self._owner_cache,
                 self._iter_cache, self.here)
        hoisted = self.in_loop and registers <= HOISTED_ACCESS_REGISTERS
        tid = self.tid
        self.pb, self._coord_cache, self._owner_cache, self._iter_cache = self.b, {}, {}, {}
        self.here = not hoisted
        self._thread_position(tid if hoisted else X.sreg_here(self.b, "tid.x", self.tas.num_threads if tested else None))
        try:
            yield
        finally:
            (self.pb, self.tid, self.lane, self.warp, self.extra, self._coord_cache, self._owner_cache,
             self._iter_cache, self.here) = saved

    # -- driving -------------------------------------------------------------------
    def run(self) -> None:
        body = self.b.block
        if self.cluster_size > 1 and not self.tas.cluster_split:
            # the tile block's work runs in the cluster's first CTA; the others stay idle
            # (they exist because the launch shape is kernel ABI; ``lower/cluster_split``
            # divides the work among them where it can)
            rest = self.llfn.append_basic_block("cluster.leader")
            first = self.b.icmp_unsigned("==", X.sreg(self.b, "cluster.ctaid.x"), ir.Constant(I32, 0))
            idle = self.llfn.append_basic_block("cluster.idle")
            self.b.cbranch(first, rest, idle)
            self.b.position_at_end(idle)
            self.b.ret_void()
            self.b.position_at_end(rest)
        if self.tas.tma:
            from .emit_tma import init_barriers

            init_barriers(self)
        if self.tas.pipelines:
            from .emit_ring import init_rings

            init_rings(self)
        if self.tas.tmem_alloc:
            from .emit_tcgen05 import init_tensor_memory

            init_tensor_memory(self)
        self.emit_block(self.fn.entry_block)
        if not self.b.block.is_terminated:
            self.end_kernel()
        self.pb.branch(body)

    def end_kernel(self) -> None:
        """The kernel's end (its last block, or a ``return``)."""
        if self.tas.pipelines:
            from .emit_ring import cluster_exit

            cluster_exit(self)
        if self.tas.tmem_alloc:
            from .emit_tcgen05 import free_tensor_memory

            free_tensor_memory(self)
        self.b.ret_void()

    def emit_block(self, block: Block) -> None:
        """Emit ``block``'s ops in the order the order-ops pass recorded
        (``lower/emission_order.py``: deferred ops where their result is first needed)."""
        for op in emitted_ops(self.tas, block):
            if self.b.block.is_terminated:
                break  # code after break/continue/return is unreachable
            if op in self.prologues_before:     # later loops' first TMA copies (emit_tma)
                from .emit_tma import hoisted_prologues  # noqa: PLC0415 (emit_tma builds on this module)

                hoisted_prologues(self, op)
            group = self.tas.chunked.get(op)
            if group is not None:
                self.emit_chunk_loop(group)
            else:
                self.emit_op(op)

    def emit_chunk_loop(self, group: ChunkGroup) -> None:
        """The group's ops once per chunk of registers (see chunks.ChunkGroup: the layouts inside the loop)."""
        from .loops import counted_loop   # noqa: PLC0415 (loops builds on this module)

        def chunk(i: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            self.iteration = i
            self._iter_cache = {}
            with self.layouts_of_place(group.layouts):
                for op in chunk_ops(self.tas, group):
                    self.emit_op(op)
            return carried

        try:
            counted_loop(self, "chunk.loop", group.trips, 1, [], chunk)
        finally:
            self.iteration = None

    def emit_op(self, op: Operation) -> None:
        if op in self.tas.aa.silent:  # computes or stores undefined values only (tileaa.poison_of)
            for r in op.results:
                layout = self.result_layout(r) if r in self.tas.layouts else None
                undefined = ir.Constant(llvm_type(r.type), ir.Undefined) if layout is not None else None
                self.put(r, None if layout is None else TileVal(layout, [undefined] * layout.size("reg")))
            return
        emitter = EMITTERS.get(type(op)) or _optional_emitter(type(op))
        if emitter is None:
            raise CompileError(f"code generation for '{op.definition.full_name}' is not supported yet")
        if self.scope is not None:
            self.b.debug_metadata = self.lineinfo.location(op, self.scope, self.fn.name)
        if op in self.tas.forwarded:    # reads what an earlier loop loaded (lower/forwarding.py)
            from .emit_control import forwarded_load as emitter
        if not self.sinkable_load(op):
            emitter(self, op)
            return
        with self.sinking(X.is_memory_asm):
            emitter(self, op)

    @contextmanager
    def sinking(self, is_load: Callable[[ir.Instruction], bool]):
        """The instructions emitted inside for which ``is_load`` holds are loads that may
        run later than emitted (``sinkable``, order.py)."""
        block, start, blocks = self.b.block, len(self.b.block.instructions), len(self.llfn.blocks)
        yield
        for blk in [block, *self.llfn.blocks[blocks:]]:
            insts = blk.instructions[start:] if blk is block else blk.instructions
            self.sinkable.update(id(i) for i in insts if is_load(i))

    def sinkable_load(self, op: Operation) -> bool:
        """May ``op``'s load instructions run later than emitted, past plain stores (order.py)?
        A weak load that waits for no write and that no write is token-ordered after."""
        return (is_plain_load(op) and is_deferrable(self.tas, op)
                and not self.tas.aa.observed_by_write(op) and op not in self.tas.chunked)

    # -- values ----------------------------------------------------------------------
    def put(self, v: Value, e: Emitted) -> None:
        self.values[v] = e
        if (isinstance(e, TileVal) and len(e.regs) == 1 and isinstance(e.regs[0].type, ir.IntType)
                and e.regs[0].type.width < 64 and self.tas.aa.fact(v).non_negative):
            self._non_negative[id(e.regs[0])] = e.regs[0]

    @property
    def in_loop(self) -> bool:
        """Is code being emitted inside a loop (a ``for``/``loop`` op or a chunk loop)?"""
        return self.iteration is not None or any(f.header is not None for f in self.frames)

    def is_non_negative(self, x: ir.Value) -> bool:
        """Is the scalar ``x`` a value TileAA knows non-negative (an ``assume bounded<0, ?>``
        shape, a block id)?"""
        return self._non_negative.get(id(x)) is x

    def widen(self, x: ir.Value) -> ir.Value:
        """A scalar integer extended to i64: zero-extended when known non-negative (the
        same value), as NVIDIA's ``cvt.u64.u32``, so that ptxas knows the high word is zero
        instead of keeping a sign copy in a register; else sign-extended."""
        if x.type.width >= 64:
            return x
        return self.b.zext(x, I64) if self.is_non_negative(x) else self.b.sext(x, I64)

    def tile(self, op: Operation, i: int) -> TileVal:
        """Operand ``i`` of ``op`` in the layout TileAS chose for that use."""
        v = op.operands[i]
        want = self.conversion(op, i)
        plan = self.tas.recomputed.get((op, i))
        if want is not None and plan is not None:
            tv = self.recompute(v, plan, self.tas.recompute_converts.get((op, i), {}))
            # the use's own plan makes ``v`` in TileAS's layout for it; a recomputation
            # around this use (a broadcast's source, recompute_converts) may want another
            return tv if tv.layout == want else self.convert(tv, want, v.type)
        tv = self.values[v]
        if not isinstance(tv, TileVal):
            raise CompileError(f"operand {i} of '{op.name}' is not a tile")
        if want is not None and want != tv.layout:
            tv = self.convert(tv, want, v.type)
        return tv

    def recompute(self, v: Value, plan: dict[Value, LinearLayout],
                  leaves: dict[tuple[Operation, int], LinearLayout]) -> TileVal:
        """``v`` computed again by the ops that made it, each emitted as if TileAS had
        given its result the layout ``plan`` says (layout_rules.recompute_plan); then the ops'
        own values are put back for their other users.  The plan gives each op's operands the
        layouts it needs, so none of their conversions is made here but ``leaves``' (a
        broadcast's source, TileAS.recompute_converts)."""
        # the same values made again from the very same inputs where the first dominates:
        # no need (not inside another emitted_again, whose substitutions the key cannot see)
        key = None if self._again_depth else (v, tuple(plan.items()), tuple(leaves.items()))
        inputs = tuple(self.values.get(w) for u in plan for w in u.owner.operands if w not in plan)
        found = self._recomputed.get(key) if key is not None else None
        if (found is not None and all(x is y for x, y in zip(found[1], inputs))
                and dominates(self.body_start, found[0], self.b.block)):
            return found[2]
        with self.emitted_again(plan, leaves):
            tv = self.values[v]
        if key is not None:
            self._recomputed[key] = (self.b.block, inputs, tv)
        return tv

    @contextmanager
    def emitted_again(self, plan: dict[Value, LinearLayout], leaves: Optional[dict] = None,
                      given: Optional[dict] = None):
        """Inside: the ops that make ``plan``'s values (producers first) emitted again in
        the layouts it gives them, their operands unconverted but for ``leaves``', with the
        values ``given`` (value -> Emitted) in place of their own (a later iteration's
        induction variable: ``emit_async``); after, every value as it was."""
        leaves, given = leaves or {}, given or {}
        ops = list(dict.fromkeys(u.owner for u in plan))
        touched = [*plan, *given]
        saved = {u: self.values[u] for u in touched if u in self.values}
        unconverted = [(op, k) for op in ops for k in range(len(op.operands)) if (op, k) not in leaves]
        try:
            self._again_depth += 1
            self.values.update(given)
            with self.layouts_of_place(plan, unconverted, leaves):
                for op in ops:
                    self.emit_op(op)
            yield
        finally:
            self._again_depth -= 1
            for u in touched:
                self.values.pop(u, None)
            self.values.update(saved)

    @contextmanager
    def layouts_of_place(self, layouts: dict[Value, LinearLayout], unconverted: Sequence = (),
                         converts: Optional[dict] = None):
        """Inside: ``result_layout`` and ``conversion`` read ``layouts`` (recorded by TileAS
        for the place being emitted) before TileAS's own, no conversion of the uses in
        ``unconverted`` and the conversions ``converts`` of theirs.  TileAS is not written."""
        saved = self._layouts, self._unconverted, self._converts
        self._layouts = {**self._layouts, **layouts}
        self._unconverted = self._unconverted.union(unconverted)
        self._converts = {**self._converts, **(converts or {})}
        try:
            yield
        finally:
            self._layouts, self._unconverted, self._converts = saved

    def conversion(self, op: Operation, i: int) -> Optional[LinearLayout]:
        """The layout TileAS converts operand ``i`` of ``op`` to here (None: none)."""
        if (op, i) in self._unconverted:
            return None
        here = self._converts.get((op, i))
        return here if here is not None else self.tas.converts.get((op, i))

    def scalar(self, op: Operation, i: int) -> ir.Value:
        return self.tile(op, i).scalar

    def view(self, v: Value) -> Emitted:
        return self.values[v]

    def result_layout(self, r: Value) -> LinearLayout:
        """The layout of ``r`` where it is being emitted (``layouts_of_place``), else TileAS's."""
        layout = self._layouts.get(r)
        return self.tas.layouts[r] if layout is None else layout

    # -- layouts ---------------------------------------------------------------------
    def runtime_coords(self, layout: LinearLayout) -> list[ir.Value]:
        """Per tile dim, the coordinate part contributed by this thread's lane and warp."""
        if layout in self._coord_cache:
            return self._coord_cache[layout]
        b = self.pb
        out = []
        for d in range(layout.rank):
            acc: ir.Value = ir.Constant(I32, 0)
            for src, bases in ((self.lane, layout.bases(LANE)), (self.warp, layout.bases(WARP))):
                acc = xor_bits(b, acc, src, [base[d] for base in bases])
            out.append(acc)
        self._coord_cache[layout] = out
        return out

    def coords(self, layout: LinearLayout, reg: int) -> list[ir.Value]:
        """Tile coordinates (i32 per dim) of register ``reg`` of this thread."""
        const = layout.apply(reg=reg)
        runtime = self.runtime_coords(layout)
        out = [r if c == 0 else self.combine_bits(self.pb, r, c, runtime_mask(layout, d))
               for d, (r, c) in enumerate(zip(runtime, const))]
        if ITER in layout.names:
            if self.iteration is None:
                raise CompileError("internal: a chunked layout used outside its loop")
            key = layout
            if key not in self._iter_cache:
                self._iter_cache[key] = [
                    xor_bits(self.b, ir.Constant(I32, 0), self.iteration, [base[d] for base in layout.bases(ITER)])
                    for d in range(layout.rank)]
            out = [self.b.xor(o, i) if not (isinstance(i, ir.Constant) and i.constant == 0) else o
                   for o, i in zip(out, self._iter_cache[key])]
        return out

    @staticmethod
    def combine_bits(b: ir.IRBuilder, runtime: ir.Value, const: int, mask: int) -> ir.Value:
        """runtime ^ const: the bits of ``const`` that ``runtime`` may set (``mask``) XORed,
        the others added, so LLVM folds them into address offsets (``[%rd+16]``) and
        registers that differ only there share one address register."""
        if const & mask:
            runtime = b.xor(runtime, ir.Constant(I32, const & mask))
        if const & ~mask:
            runtime = b.add(runtime, ir.Constant(I32, const & ~mask), flags=["nuw", "nsw"])
        return runtime

    def owner_predicate(self, layout: LinearLayout, lanes: bool = True) -> Optional[ir.Value]:
        """True in exactly one of the threads holding copies of the same element
        (lane and warp bits with zero bases must be 0, and not an extra warp);
        None if no thread holds a copy.  ``lanes=False``: in the warps holding the first
        copy of their elements, every lane of them (``warp_owner``)."""
        key = (layout, lanes)
        if key in self._owner_cache:
            return self._owner_cache[key]
        b = self.pb
        conds = []
        for src, name in ((self.lane, LANE), (self.warp, WARP)) if lanes else ((self.warp, WARP),):
            mask = layout.broadcast_mask(name)
            if mask:
                conds.append(b.icmp_unsigned("==", b.and_(src, ir.Constant(I32, mask)), ir.Constant(I32, 0)))
        if self.extra is not None:
            conds.append(b.not_(self.extra))
        acc = conds[0] if conds else None
        for c in conds[1:]:
            acc = b.and_(acc, c)
        self._owner_cache[key] = acc
        return acc

    def warp_owner(self, layout: LinearLayout) -> Optional[ir.Value]:
        """True in the warps that hold the first copy of their elements; None where every
        warp holds elements of its own.  A store's copies in one warp are one request; in
        other warps they are more."""
        return self.owner_predicate(layout, lanes=False)

    def unique_regs(self, layout: LinearLayout) -> list[int]:
        """Register indices that are not copies of a lower register index."""
        dup = layout.broadcast_mask(REG)
        return [r for r in range(layout.size(REG)) if not r & dup]

    # -- shared memory -----------------------------------------------------------------
    def smem(self) -> ir.Value:
        if self._smem is None:
            size = max(self.tas.smem_bytes, 16)
            g = ir.GlobalVariable(self.module, ir.ArrayType(ir.IntType(8), size), name=f"global_smem_{self.fn.name}", addrspace=3)
            g.align = self.tas.smem_align
            g.linkage = "internal"
            g.initializer = ir.Constant(ir.ArrayType(ir.IntType(8), size), None)
            self._smem = g
        return self._smem

    def smem_slot(self, index: ir.Value, elem_bytes: int, base: int = 0) -> ir.Value:
        """Address of element ``index`` (i32) of an array of ``elem_bytes`` at ``base``; 32-bit
        arithmetic, as shared addresses are 32 bits (``llvm_targets.NVPTX_OPTIONS``)."""
        b = self.b
        off = b.add(b.mul(index, ir.Constant(I32, elem_bytes)), ir.Constant(I32, base))
        return byte_gep(b, self.smem(), off)

    def flat_index(self, coords: Sequence[ir.Value], shape: Sequence[int]) -> ir.Value:
        b = self.b
        idx: ir.Value = ir.Constant(I32, 0)
        for c, s in zip(coords, shape):
            idx = b.add(b.mul(idx, ir.Constant(I32, s)), c)
        return idx

    def convert(self, tv: TileVal, dst: LinearLayout, ty: T.Type) -> TileVal:
        """Redistribute through shared memory: every thread writes what it holds,
        then reads what ``dst`` says it holds."""
        if tv.layout == dst:
            return tv
        if tv.layout.rank == 0:  # every thread already holds the scalar
            return TileVal(dst, [tv.regs[0]] * dst.size(REG))
        from .emit_shape import exchange   # noqa: PLC0415 (emit_shape builds on this module)
        return exchange(self, tv, dst, element_bytes(ty))


def runtime_mask(layout: LinearLayout, dim: int) -> int:
    """Bits of coordinate ``dim`` that lanes, warps and chunk iterations can set."""
    mask = 0
    for name in (LANE, WARP, ITER):
        for base in layout.bases(name):
            mask |= base[dim]
    return mask


def xor_bits(b: ir.IRBuilder, acc: ir.Value, src: ir.Value, coeffs: list[int]) -> ir.Value:
    """acc ^ XOR over bits k of ``src`` of coeffs[k]; runs of bits whose coefficients
    are consecutive powers of two become one shift-and-mask."""
    k = 0
    while k < len(coeffs):
        c = coeffs[k]
        if c == 0:
            k += 1
            continue
        run = 1
        if c & (c - 1) == 0:
            while k + run < len(coeffs) and coeffs[k + run] == c << run:
                run += 1
            part = b.and_(b.lshr(src, ir.Constant(I32, k)), ir.Constant(I32, (1 << run) - 1))
            shift = c.bit_length() - 1
            if shift:
                part = b.shl(part, ir.Constant(I32, shift))
        else:
            bit = b.and_(b.lshr(src, ir.Constant(I32, k)), ir.Constant(I32, 1))
            part = b.mul(bit, ir.Constant(I32, c))
        acc = part if isinstance(acc, ir.Constant) and acc.constant == 0 else b.xor(acc, part)
        k += run
    return acc


# -- PTX ------------------------------------------------------------------------------
# Architectures ptxas knows but LLVM's NVPTX back end (LLVM 22) does not: code is generated
# for the closest processor LLVM knows (same family, same features we use) and
# ``ptx.set_target`` then names the real one in ``.target``, as NVIDIA's PTX does.
LLVM_CPU_STANDINS = {107: "sm_103a"}


def llvm_cpu(arch: int) -> str:
    """The NVPTX processor LLVM generates code for, for ``sm_<arch>``."""
    return LLVM_CPU_STANDINS.get(arch, f"sm_{arch}{'a' if arch >= 90 else ''}")


def llvm_to_ptx(module: ir.Module, target: Target, opt_level: int = 3) -> str:
    """Optimize with LLVM's pipeline and print PTX with the NVPTX back end."""
    return nvptx_assembly(nvptx_ir(module), llvm_cpu(target.arch), opt_level)


def nvptx_ir(module: ir.Module) -> str:
    """The module's LLVM IR text for the NVPTX target (what the back end compiles); the
    module itself is left as it was (``--emit=llvm`` prints it without a target)."""
    saved = module.triple, module.data_layout
    module.triple, module.data_layout = NVPTX_TRIPLE, NVPTX_DATA_LAYOUT
    try:
        return str(module)
    finally:
        module.triple, module.data_layout = saved


def line_info(module: ir.Module) -> LineInfo:
    return module._tileiras_lineinfo


def emit_module(module: Module, analyses: dict[str, TileAS], target: Target,
                positions: Optional[dict] = None) -> ir.Module:
    """LLVM IR for every entry function of ``module``."""
    from . import emit_arith, emit_atomics, emit_control, emit_memory, emit_reduce, emit_shape  # noqa: F401  (register emitters)

    llmod = ir.Module(name="tileiras")
    if target.lineinfo:
        llmod._tileiras_lineinfo = LineInfo(llmod, positions, full=target.debug)
    emit_memory.define_globals(llmod, module.globals)
    from ..target import HINT_NUM_CTA_IN_CGA, hints_for_arch

    for fn in module.functions:
        if fn.is_entry:
            cga = hints_for_arch(fn.hints, target.name).get(HINT_NUM_CTA_IN_CGA, 1)
            em = KernelEmitter(llmod, fn, analyses[fn.name], target, max(cga, 1))
            em.run()
            order_function(em.llfn, em.sinkable)
    order_globals(llmod, [g.name for g in module.globals])
    return llmod


def define_launch_metadata(llmod: ir.Module) -> None:
    """``___NV_TILE_LAUNCH_META_DATA___``: 64 zero bytes, global, 8-aligned, in every module
    with an entry (the CUDA driver reads it; no code does).  The only place it is made:
    ``ptx.finalize_ptx`` checks it is there."""
    from .abi import LAUNCH_METADATA_NAME

    meta_t = ir.ArrayType(ir.IntType(8), 64)
    meta = ir.GlobalVariable(llmod, meta_t, name=LAUNCH_METADATA_NAME, addrspace=1)
    meta.initializer = ir.Constant(meta_t, None)
    meta.align = 8


def order_globals(llmod: ir.Module, module_globals: Sequence[str]) -> None:
    """Define the launch metadata and order the globals as NVIDIA's PTX lists them.

    NVIDIA's order: the formats ``print`` lowered to, ``___NV_TILE_LAUNCH_META_DATA___``,
    the module's own globals, then the rest (math tables, constants, shared memory)."""
    from .abi import LAUNCH_METADATA_NAME

    define_launch_metadata(llmod)
    own = {name: i for i, name in enumerate(module_globals)}

    def rank(name: str) -> tuple[int, int]:
        if name.startswith("printfFormat_"):
            return (0, 0)
        if name == LAUNCH_METADATA_NAME:
            return (1, 0)
        return (2, own[name]) if name in own else (3, 0)

    items = sorted(llmod.globals.items(), key=lambda kv: rank(kv[0]))  # stable within a rank
    llmod.globals.clear()
    llmod.globals.update(items)
