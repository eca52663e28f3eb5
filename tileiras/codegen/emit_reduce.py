"""Reductions and scans: ops whose combiner region runs on scalars.

Reductions combine in three steps, each in a fixed order (ascending coordinate
along the reduced dim): registers within a thread, lanes of a warp with
butterfly shuffles (one redux.sync for 32-bit integer ops over a whole warp, whose
result does not depend on the order), then warps through shared memory (read back one
warp's partial a lane and folded by a butterfly, where every lane of a warp holds the same
results).  Scans run in place, bit by bit of the position along the scanned dim, where
TileAS gave them a layout that allows it (``layout_rules.scans_in_place``), else a line
at a time through shared memory.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from llvmlite import ir

from ..errors import CompileError
from ..ir import types as T
from ..ir.core import Block, Operation
from ..layout.linear import LANE, REG, WARP, LinearLayout
from ..lower.layout_rules import scan_steps, scans_in_place, spreads_warp_fold, warp_fold_padding
from ..lower.tiles import element_bytes
from ..tile import ops_arith as CA
from ..tile import ops_core as CO
from ..tile.enums import Signedness
from . import intrinsics as X
from . import smem_copy
from .loops import counted_loop
from .nvvm import I32, I64, KernelEmitter, emits
from .values import TileVal, from_smem, smem_type, to_smem


# -- regions as scalar functions ------------------------------------------------------------
def inline_combiner(em: KernelEmitter, block: Block, args: Sequence[ir.Value]) -> list[ir.Value]:
    """Emit a reduce/scan body on scalars; return what its ``yield`` yields."""
    for a, v in zip(block.args, args):
        em.put(a, TileVal(em.result_layout(a), [v]))
    for body_op in block.ops[:-1]:
        emitter = _emitter(body_op)
        emitter(em, body_op)
    term = block.ops[-1]
    return [em.values[v].scalar for v in term.operands]


def _emitter(op: Operation) -> Callable:
    from .nvvm import EMITTERS  # noqa: PLC0415
    fn = EMITTERS.get(type(op))
    if fn is None:
        raise CompileError(f"code generation for '{op.definition.full_name}' is not supported yet")
    return fn


def _combine(em: KernelEmitter, block: Block, lhs: Sequence[ir.Value], rhs: Sequence[ir.Value]) -> list[ir.Value]:
    args = [x for pair in zip(lhs, rhs) for x in pair]  # (lhs0, rhs0, lhs1, rhs1, ...)
    return inline_combiner(em, block, args)


def shuffle(em: KernelEmitter, v: ir.Value, mask: int, mode: str = "bfly",
             lane: Optional[ir.Value] = None) -> ir.Value:
    """Shuffle of any scalar of at most 64 bits: butterfly over ``mask``, or another
    ``X.shfl_sync`` mode with ``lane`` (``mask`` when none)."""
    b = em.b
    t = v.type
    lane = ir.Constant(I32, mask) if lane is None else lane
    bits = t.width if isinstance(t, ir.IntType) else {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(t)]
    it = ir.IntType(bits)
    raw = v if isinstance(t, ir.IntType) else b.bitcast(v, it)
    if bits <= 32:
        wide = b.zext(raw, I32) if bits < 32 else raw
        got = X.shfl_sync(b, mode, wide, lane)
        back = b.trunc(got, it) if bits < 32 else got
    else:       # the two halves as a register pair (``mov.b64 {lo, hi}``), each shuffled
        pair = b.asm(ir.FunctionType(ir.LiteralStructType([I32, I32]), [I64]), "mov.b64 {$0, $1}, $2;",
                     "=r,=r,l", [raw], side_effect=False)
        halves = [X.shfl_sync(b, mode, b.extract_value(pair, k), lane) for k in range(2)]
        back = b.asm(ir.FunctionType(I64, [I32, I32]), "mov.b64 $0, {$1, $2};", "=l,r,r", halves,
                     side_effect=False)
    return back if isinstance(t, ir.IntType) else b.bitcast(back, t)


@emits(CO.ReduceOp)
def _reduce(em: KernelEmitter, op: Operation) -> None:
    dim = op.dim
    srcs = [em.tile(op, i) for i in range(len(op.operands))]
    src_layout = srcs[0].layout
    out = em.result_layout(op.results[0])
    block = op.regions[0].blocks[0]
    for name in (REG, LANE, WARP):
        for base in src_layout.bases(name):
            if base[dim] and any(c for d, c in enumerate(base) if d != dim):
                raise CompileError("reduction over a layout that mixes the reduced dim with others")
    # 1. registers: fold the registers that differ only along ``dim``
    kept = [i for i, base in enumerate(src_layout.bases(REG)) if any(c for d, c in enumerate(base) if d != dim)]
    along = [i for i, base in enumerate(src_layout.bases(REG)) if base[dim]]
    along.sort(key=lambda i: src_layout.bases(REG)[i][dim])
    partial: list[list[ir.Value]] = []
    for q in range(out.size(REG)):
        base_reg = sum(1 << bit for k, bit in enumerate(kept) if q >> k & 1)
        acc: Optional[list[ir.Value]] = None
        for step in range(1 << len(along)):
            r = base_reg | sum(1 << bit for k, bit in enumerate(along) if step >> k & 1)
            vals = [s.regs[r] for s in srcs]
            acc = vals if acc is None else _combine(em, block, acc, vals)
        partial.append(acc)
    # 2. lanes: butterfly over the lane bits that move along ``dim``
    lane_bases = src_layout.bases(LANE)
    redux = _warp_redux_kind(em, block, src_layout, dim)
    if redux is not None:
        partial = [[X.redux_sync(em.b, redux, acc[0])] for acc in partial]
        lane_bases = []
    for bit in sorted((i for i, base in enumerate(lane_bases) if base[dim]), key=lambda i: lane_bases[i][dim]):
        partial = [_butterfly(em, block, acc, bit) for acc in partial]
    # 3. warps: through shared memory, in warp order along ``dim``
    warp_bases = src_layout.bases(WARP)
    warp_bits = sorted((i for i, base in enumerate(warp_bases) if base[dim]), key=lambda i: warp_bases[i][dim])
    if warp_bits:
        partial = _reduce_warps(em, op, out, partial, warp_bits, block)
    for k, r in enumerate(op.results):
        em.put(r, TileVal(out, [p[k] for p in partial]))


#: Combiners that one redux.sync instruction computes over a warp, by signedness where it matters.
#: Stage-local: an instruction-selection fact of this emitter (which PTX instruction folds a warp).
_REDUX = {CA.AddIOp: "add", CA.AndIOp: "and", CA.OrIOp: "or", CA.XOrIOp: "xor",
          CA.MaxIOp: ("umax", "max"), CA.MinIOp: ("umin", "min")}


def _warp_redux_kind(em: KernelEmitter, block: Block, layout: LinearLayout, dim: int) -> Optional[str]:
    """The redux.sync flavour that folds all 32 lanes at once, as NVIDIA's PTX does for
    32-bit integer reductions (sm_80+; one instruction instead of five shuffle-and-combine
    steps, and fewer live registers), or None.  Every lane bit must move along ``dim`` (a
    broadcast lane would be counted twice) and the body must be one such op on (lhs, rhs)."""
    if em.target.arch < 80 or len(block.args) != 2 or len(block.ops) != 2:
        return None
    op = block.ops[0]
    kind = _REDUX.get(type(op))
    if kind is None or set(op.operands) != set(block.args) or block.ops[1].operands != [op.result]:
        return None
    if not isinstance(op.result.type, T.TileType) or op.result.type.element != T.I32:
        return None
    lanes = layout.bases(LANE)
    if len(lanes) != 5 or not all(base[dim] for base in lanes):
        return None
    if isinstance(kind, tuple):
        kind = kind[op.signedness == Signedness.SIGNED]
    return kind


def _butterfly(em: KernelEmitter, block: Block, acc: list[ir.Value], bit: int) -> list[ir.Value]:
    """One butterfly step over lane bit ``bit``: each lane combines its values with its
    partner's, the lower lane's on the left, so both lanes compute the same result."""
    b = em.b
    upper = b.icmp_unsigned("!=", b.and_(em.lane, ir.Constant(I32, 1 << bit)), ir.Constant(I32, 0))
    other = [shuffle(em, v, 1 << bit) for v in acc]
    lo = [b.select(upper, o, a) for a, o in zip(acc, other)]
    hi = [b.select(upper, a, o) for a, o in zip(acc, other)]
    return _combine(em, block, lo, hi)


def _reduce_warps(em: KernelEmitter, op: Operation, out: LinearLayout, partial: list[list[ir.Value]],
                  warp_bits: list[int], block: Block) -> list[list[ir.Value]]:
    b = em.b
    n = max(1, _count(out.shape))
    groups = 1 << len(warp_bits)
    sizes = [element_bytes(r.type) for r in op.results]
    spread = spreads_warp_fold(out, groups, n, em.tas.layout_threads)
    areas = [(warp_fold_padding(s).padded_size(groups * n) if spread else groups * n) * s for s in sizes]
    offsets = [sum(areas[:k]) for k in range(len(sizes))]
    slot_at = _padded_slot if spread else KernelEmitter.smem_slot
    # this warp's position along the reduced dim
    wd: ir.Value = ir.Constant(I32, 0)
    for k, bit in enumerate(warp_bits):
        part = b.and_(b.lshr(em.warp, ir.Constant(I32, bit)), ir.Constant(I32, 1))
        wd = b.or_(wd, b.shl(part, ir.Constant(I32, k)))
    X.barrier(b)
    for q, vals in enumerate(partial):
        flat = em.flat_index(em.coords(out, q), out.shape) if out.rank else ir.Constant(I32, 0)
        if spread:      # a result's warps side by side: the lanes that fold them read them so
            slot_index = b.add(b.mul(flat, ir.Constant(I32, groups)), wd)
        else:
            slot_index = b.add(b.mul(wd, ir.Constant(I32, n)), flat)
        for k, v in enumerate(vals):
            st = smem_type(v.type)
            b.store(to_smem(b, v, st), slot_at(em, slot_index, sizes[k], offsets[k]))
    X.barrier(b)
    if spread:
        return _fold_warps_spread(em, out, partial, groups, n, sizes, offsets, block)
    if 4 <= groups <= 32 and not any(any(base) for base in out.bases(LANE)):
        return _fold_warps_in_lanes(em, out, partial, groups, n, sizes, offsets, block)
    result = []
    for q, vals in enumerate(partial):
        flat = em.flat_index(em.coords(out, q), out.shape) if out.rank else ir.Constant(I32, 0)
        acc: Optional[list[ir.Value]] = None
        for g in range(groups):
            idx = b.add(ir.Constant(I32, g * n), flat)
            got = [from_smem(b, b.load(em.smem_slot(idx, sizes[k], offsets[k]), typ=smem_type(v.type)), v.type)
                   for k, v in enumerate(vals)]
            acc = got if acc is None else _combine(em, block, acc, got)
        result.append(acc)
    return result


def _fold_warps_in_lanes(em: KernelEmitter, out: LinearLayout, partial: list[list[ir.Value]], groups: int,
                         n: int, sizes: list[int], offsets: list[int], block: Block) -> list[list[ir.Value]]:
    """The warps' partial results (in shared memory, warp ``g``'s at slot ``g * n + flat``)
    folded as NVIDIA's PTX folds them: lane ``l`` reads warp ``l mod groups``'s and a
    butterfly over the low lane bits combines them, so every lane ends with the whole tree.

    Only for results every lane of a warp holds alike (no lane bits in ``out``).  Reading
    all ``groups`` slots in every lane instead is one ``ld.shared.v4`` whose register quad
    must be aligned, which cost float_compare_where two registers on sm_80 (18 against 16)."""
    b = em.b
    mine = b.and_(em.lane, ir.Constant(I32, groups - 1))
    result = []
    for q, vals in enumerate(partial):
        flat = em.flat_index(em.coords(out, q), out.shape) if out.rank else ir.Constant(I32, 0)
        idx = b.add(b.mul(mine, ir.Constant(I32, n)), flat)
        acc = [from_smem(b, b.load(em.smem_slot(idx, sizes[k], offsets[k]), typ=smem_type(v.type)), v.type)
               for k, v in enumerate(vals)]
        for bit in range(groups.bit_length() - 1):
            acc = _butterfly(em, block, acc, bit)
        result.append(acc)
    return result


def _fold_warps_spread(em: KernelEmitter, out: LinearLayout, partial: list[list[ir.Value]], groups: int,
                       n: int, sizes: list[int], offsets: list[int], block: Block) -> list[list[ir.Value]]:
    """The warps' partial results (in shared memory, warp ``g``'s of result element ``f`` at
    slot ``f * groups + g``) folded by all the CTA's threads, as NVIDIA's PTX folds column
    reductions: thread ``t`` reads slot ``t`` (and ``t + threads``, ...), a butterfly over
    the low ``log2(groups)`` lane bits combines the ``groups`` partials of one element, in
    warp order, and the lane holding warp 0's slot writes the total back there (no other
    thread reads that slot).  After a barrier each thread reads its result registers' totals.

    Slots are padded (``layout_rules.warp_fold_padding``) so that none of these accesses
    meets a bank conflict.  Threads past the last slot (fewer slots than threads) read slot
    1, which no thread writes (totals go to slots ``f * groups``), and write nothing: the
    butterfly needs every lane of the warp."""
    b = em.b
    threads = em.tas.layout_threads
    total = n * groups
    position = b.add(b.mul(em.warp, ir.Constant(I32, 32)), em.lane)
    types = [v.type for v in partial[0]]
    first = b.icmp_unsigned("==", b.and_(em.lane, ir.Constant(I32, groups - 1)), ir.Constant(I32, 0))
    for j in range(-(-total // threads)):
        slot = b.add(position, ir.Constant(I32, j * threads))
        inside = b.icmp_unsigned("<", slot, ir.Constant(I32, total))
        read = b.select(inside, slot, ir.Constant(I32, 1)) if (j + 1) * threads > total else slot
        acc = [from_smem(b, b.load(_padded_slot(em, read, sizes[k], offsets[k]), typ=smem_type(t)), t)
               for k, t in enumerate(types)]
        for bit in range(groups.bit_length() - 1):
            acc = _butterfly(em, block, acc, bit)
        with b.if_then(b.and_(first, inside) if (j + 1) * threads > total else first):
            for k, v in enumerate(acc):
                b.store(to_smem(b, v, smem_type(v.type)), _padded_slot(em, slot, sizes[k], offsets[k]))
    X.barrier(b)
    result = []
    for q in range(len(partial)):
        flat = em.flat_index(em.coords(out, q), out.shape) if out.rank else ir.Constant(I32, 0)
        idx = b.mul(flat, ir.Constant(I32, groups))
        result.append([from_smem(b, b.load(_padded_slot(em, idx, sizes[k], offsets[k]), typ=smem_type(t)), t)
                       for k, t in enumerate(types)])
    return result


def _padded_slot(em: KernelEmitter, index: ir.Value, elem_bytes: int, base: int) -> ir.Value:
    """The address of slot ``index`` of a spread warp fold (``warp_fold_padding``)."""
    return em.smem_slot(smem_copy.pad(em.b, index, (warp_fold_padding(elem_bytes),)), elem_bytes, base)


def _count(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


@emits(CO.ScanOp)
def _scan(em: KernelEmitter, op: Operation) -> None:
    """A scan where the layout keeps ``dim`` apart from the other dims runs in place, bit by
    bit (``_scan_by_bits``); otherwise each line is scanned sequentially in shared memory,
    lines spread over threads."""
    b = em.b
    srcs = [em.tile(op, i) for i in range(len(op.operands))]
    layout = srcs[0].layout
    if scans_in_place(layout, op.dim):
        for r, regs in zip(op.results, _scan_by_bits(em, op, srcs)):
            em.put(r, TileVal(layout, regs))
        return
    shape = op.results[0].type.shape
    d = op.dim
    n = _count(shape)
    inner = _count(shape[d + 1:])
    length = shape[d]
    lines = n // length
    block = op.regions[0].blocks[0]
    sizes = [element_bytes(v.type) for v in op.operands]
    offsets = [sum(n * s for s in sizes[:k]) for k in range(len(sizes))]
    X.barrier(b)
    for k, (tv, v) in enumerate(zip(srcs, op.operands)):
        smem_copy.store(em, tv, smem_copy.row_major(shape, sizes[k], offsets[k]))
    X.barrier(b)
    threads = em.tas.num_threads
    for j in range((lines + threads - 1) // threads):
        line = b.add(em.tid, ir.Constant(I32, j * threads))
        with b.if_then(b.icmp_unsigned("<", line, ir.Constant(I32, lines))):
            start = b.add(b.mul(b.udiv(line, ir.Constant(I32, inner)), ir.Constant(I32, length * inner)),
                          b.urem(line, ir.Constant(I32, inner)))
            _scan_line(em, op, block, srcs, start, inner, length, sizes, offsets)
    X.barrier(b)
    for k, r in enumerate(op.results):
        em.put(r, TileVal(layout, smem_copy.load(em, layout, smem_copy.row_major(shape, sizes[k], offsets[k]),
                                                 srcs[k].regs[0].type)))


def _scan_by_bits(em: KernelEmitter, op: Operation, srcs: list[TileVal]) -> list[list[ir.Value]]:
    """Inclusive scan along ``dim`` in the layout the operands are in, one bit of the
    position along ``dim`` at a time, lowest first (registers, lanes and warps in whatever
    order the layout gives them).  Each element keeps its prefix within its aligned block of
    positions and that block's total; a bit step pairs each block with the one the bit
    flips: the later of the two adds the earlier one's total to its prefixes, and both get
    the sum as their total.  The partner's total is another register (register bits) or a
    butterfly shuffle (lane bits); warp bits go through shared memory, in the spans
    ``warp_spans`` picks (``_scan_across_warps``).  ``reverse`` scans from the last
    position: the block whose bit is clear is then the later one.  Lane bits that hold the
    lowest positions, in order, scan first with one value a register (``_scan_lanes``).

    The combiner runs on (earlier, later) values, as the sequential scan does; the register
    steps keep a thread's registers in place (NVIDIA's PTX scans with shuffles too, where
    the sequential scan in shared memory kept 25 values live in unrolled loops)."""
    layout = srcs[0].layout
    pre = [[s.regs[r] for s in srcs] for r in range(layout.size(REG))]
    steps = scan_steps(layout, op.dim)
    run = _lane_run(steps)
    held = None
    if run:
        pre = _scan_lanes(em, op, pre, steps[0][2], run)
        held = _HeldTotals(em, op, pre, steps[0][2], run)
    tot = held if held is not None else list(pre)
    spans = {span[0]: span for span in warp_spans(steps)}
    k = run
    while k < len(steps):
        if k in spans:
            pre, tot = _scan_across_warps(em, op, pre, tot, [steps[i] for i in spans[k]], held)
            k = spans[k][-1] + 1
        else:
            _, name, bit = steps[k]
            pre, tot = _scan_bit(em, op, pre, tot, name, bit, last=k + 1 == len(steps))
            k += 1
        held = None
    return [[p[k] for p in pre] for k in range(len(srcs))]


def _lane_run(steps: list[tuple[int, str, int]]) -> int:
    """How many of a scan's first ``steps`` are lane bits next to each other that hold the
    positions 1, 2, 4, ... in order (``_scan_lanes`` scans those), or 0 where the steps
    after them need every register's total: ``_HeldTotals`` shuffles those one by one, and
    the butterfly, which keeps them, took fewer registers (an f32 8x64 row scan with two
    register bits and a lane bit after three lane bits: 32 against 38 on sm_80/90).  The
    run's totals are free for a warp round (read from shared memory) and cheap for a
    closing register step (the earlier registers' only: scans_builtin i32 16x16, 32 -> 23
    registers on sm_80, NVIDIA 26)."""
    m = 0
    while m < len(steps) and steps[m][:2] == (1 << m, LANE) and steps[m][2] == steps[0][2] + m:
        m += 1
    rest = steps[m:]
    if rest and rest[0][1] != WARP and not (len(rest) == 1 and rest[0][1] == REG):
        return 0
    return m


def _scan_lanes(em: KernelEmitter, op: Operation, pre: Totals, first: int, count: int) -> Totals:
    """The inclusive scan of each register over the ``count`` lane bits from lane bit
    ``first`` (``_lane_run``), as NVIDIA's PTX does it: a step per bit, each lane combines
    the value of the lane that many positions earlier (a ``shfl.up``, ``shfl.down`` when
    ``reverse``) with its own if there is one.  One value a register stays live, where the
    butterfly of ``_scan_bit`` keeps a prefix and a total."""
    b = em.b
    reverse = bool(op.attributes.get("reverse"))
    block = op.regions[0].blocks[0]
    group = ((1 << count) - 1) << first
    position = b.and_(em.lane, ir.Constant(I32, group))
    for j in range(count):
        d = 1 << (first + j)
        if reverse:
            valid = b.icmp_unsigned("<=", position, ir.Constant(I32, group - d))
        else:
            valid = b.icmp_unsigned(">=", position, ir.Constant(I32, d))
        step = []
        for p in pre:
            partner = [shuffle(em, v, d, "down" if reverse else "up") for v in p]
            step.append([b.select(valid, x, y) for x, y in zip(_combine(em, block, partner, p), p)])
        pre = step
    return pre


class _HeldTotals:
    """After ``_scan_lanes``, each register's total over the lane bits is the prefix held by
    the run's last lane in scan order (``lane_bits``); a register step shuffles it from
    there when it needs it (``[r]``, once a register), a warp round reads it from that
    lane's slot in shared memory (``_SharedTotals``)."""

    def __init__(self, em: KernelEmitter, op: Operation, pre: Totals, first: int, count: int):
        self.em, self.pre = em, pre
        self.group = ((1 << count) - 1) << first
        self.lane_bits = 0 if op.attributes.get("reverse") else self.group
        self.cache: dict[int, list[ir.Value]] = {}
        self.source: Optional[ir.Value] = None    # the lane a register step shuffles from

    def __getitem__(self, r: int) -> list[ir.Value]:
        if r not in self.cache:
            if self.source is None:
                b = self.em.b
                self.source = b.or_(b.and_(self.em.lane, ir.Constant(I32, ~self.group & 31)),
                                    ir.Constant(I32, self.lane_bits))
            self.cache[r] = [shuffle(self.em, v, 0, "idx", self.source) for v in self.pre[r]]
        return self.cache[r]


def warp_spans(steps: list[tuple[int, str, int]]) -> list[range]:
    """Which of a scan's ``steps`` go through shared memory together: a round per warp bit.
    NVIDIA's PTX takes every bit from the lowest warp bit to the highest in one round (each
    warp's totals written once, then folded one after another); ``_scan_across_warps`` does
    that for ``[range(lowest, highest + 1)]``, but ptxas gave it more registers wherever a
    thread holds several lines (sm_80/90/100/120, scans_builtin f32 8x64: 36-40 against
    32; i32 16x16: 32 against 30-32; a 64x64 max-scan: 126 against 109), as it loads
    every earlier warp's totals of every line, where a round loads one partner's."""
    return [range(k, k + 1) for k, (_, name, _) in enumerate(steps) if name == WARP]


Totals = list[list[ir.Value]]   # per register, a value per operand


def _scan_bit(em: KernelEmitter, op: Operation, pre: Totals, tot: Totals, name: str,
              bit: int, last: bool = False) -> tuple[Totals, Totals]:
    """One register or lane bit of ``_scan_by_bits``: new prefixes and totals (a register
    step that is the ``last`` asks only the earlier registers for their totals)."""
    b = em.b
    reverse = bool(op.attributes.get("reverse"))
    block = op.regions[0].blocks[0]
    if name == REG:
        new_pre, new_tot = list(pre), None if last else list(tot)
        sums: dict[tuple[int, int], list[ir.Value]] = {}   # registers that share totals share their sum
        for r in range(len(pre)):
            if r >> bit & 1:
                continue
            early, late = (r | 1 << bit, r) if reverse else (r, r | 1 << bit)
            new_pre[late] = _combine(em, block, tot[early], pre[late])
            if new_tot is None:
                continue
            key = (id(tot[early]), id(tot[late]))
            if key not in sums:
                sums[key] = _combine(em, block, tot[early], tot[late])
            new_tot[early] = new_tot[late] = sums[key]
        return new_pre, tot if new_tot is None else new_tot
    later = _bit_set(em, name, bit)
    if reverse:
        later = b.not_(later)
    partner = _shuffled_totals(em, tot, bit)
    sums: dict[int, list[ir.Value]] = {}   # registers that share a total share its sum
    new_pre, new_tot = [], []
    for p, t, o in zip(pre, tot, partner):
        if id(t) not in sums:
            early = [b.select(later, x, y) for x, y in zip(o, t)]
            late = [b.select(later, y, x) for x, y in zip(o, t)]
            sums[id(t)] = _combine(em, block, early, late)
        new_tot.append(sums[id(t)])
        new_pre.append([b.select(later, x, y) for x, y in zip(_combine(em, block, o, p), p)])
    return new_pre, new_tot


def _bit_set(em: KernelEmitter, name: str, bit: int) -> ir.Value:
    """i1: is ``bit`` of this thread's lane (or warp) set?"""
    source = em.lane if name == LANE else em.warp
    return em.b.icmp_unsigned("!=", em.b.and_(source, ir.Constant(I32, 1 << bit)), ir.Constant(I32, 0))


def _shuffled_totals(em: KernelEmitter, tot: Totals, bit: int) -> Totals:
    """Per register, the totals held by the lane whose ``bit`` differs."""
    shuffled: dict[int, list[ir.Value]] = {}   # registers that share a total shuffle it once
    for vals in tot:
        if id(vals) not in shuffled:
            shuffled[id(vals)] = [shuffle(em, v, 1 << bit) for v in vals]
    return [shuffled[id(vals)] for vals in tot]


def _scan_across_warps(em: KernelEmitter, op: Operation, pre: Totals, tot: Totals,
                       steps: list[tuple[int, str, int]],
                       held: Optional[_HeldTotals] = None) -> tuple[Totals, Totals]:
    """The bits ``steps`` (warp bits, with any register and lane bits between them) in one
    round through shared memory: each thread writes its distinct totals once, a barrier,
    then it folds the totals of the blocks of its span (the blocks that differ from its own
    in ``steps`` only) one after another in scan order, combining (earlier, later), and
    picks the fold of the blocks before its own as it goes (a select per block, so only the
    running fold and the pick stay live).  A register's new prefix is that pick combined
    with its prefix; the span's first block keeps its prefix.  A closing barrier keeps the
    results computed here (codegen/order.py moves no value past one) rather than at their
    use, where the folds would stay live instead (scans_builtin i32 sm_80: 34 -> 32).
    Totals ``held`` by one lane of a lane run (``_scan_lanes``) are read from that lane's
    slot."""
    b = em.b
    reverse = bool(op.attributes.get("reverse"))
    block = op.regions[0].blocks[0]
    if held is not None:
        tot = held.pre
    shared = _SharedTotals(em, op, tot, steps, held)
    runtime = _tid_mask([(name, bit) for _, name, bit in steps if name != REG])
    span_bits = range(len(steps))
    reg_part = [sum(1 << k for k in span_bits if steps[k][1] == REG and r >> steps[k][2] & 1)
                for r in range(len(pre))]
    order = list(range(1 << len(steps)))[::-1 if reverse else 1]
    lines: dict[tuple, list[int]] = {}   # registers whose spans hold the same totals
    for r in range(len(pre)):
        lines.setdefault(tuple(shared.source(r, j) for j in order), []).append(r)
    mine = b.and_(em.tid, ir.Constant(I32, runtime))
    new_pre, new_tot = list(pre), list(tot)
    for sources, regs in lines.items():
        picked: dict[int, Optional[list[ir.Value]]] = {r: None for r in regs}
        acc: Optional[list[ir.Value]] = None
        for j, source in zip(order, sources):
            if acc is not None:
                here = b.icmp_unsigned("==", mine, ir.Constant(I32, shared.thread_bits(j)))
                for r in regs:
                    if _span_reg_bits(steps, j) == reg_part[r]:
                        picked[r] = acc if picked[r] is None else [b.select(here, x, y) for x, y in zip(acc, picked[r])]
            totals = shared.load(source)
            acc = totals if acc is None else _combine(em, block, acc, totals)
        for r in regs:
            new_tot[r] = acc
            if picked[r] is None:
                continue
            new_pre[r] = _combine(em, block, picked[r], pre[r])
            if _span_reg_bits(steps, order[0]) == reg_part[r]:   # the first block keeps its prefix
                first = b.icmp_unsigned("==", mine, ir.Constant(I32, shared.thread_bits(order[0])))
                new_pre[r] = [b.select(first, x, y) for x, y in zip(pre[r], new_pre[r])]
    X.barrier(b)
    return new_pre, new_tot


def _span_reg_bits(steps: list[tuple[int, str, int]], j: int) -> int:
    """The bits of span block ``j`` that are register bits."""
    return sum(1 << k for k, (_, name, _) in enumerate(steps) if name == REG and j >> k & 1)


def _tid_mask(bits: Sequence[tuple[str, int]]) -> int:
    """The bits of %tid.x that these lane and warp bits are."""
    return sum((1 if name == LANE else 32) << bit for name, bit in bits)


class _SharedTotals:
    """Each distinct total of a thread in its slot of shared memory (a slot per thread and
    distinct total), written at construction between two barriers; ``load`` reads a slot
    once however many registers want it."""

    def __init__(self, em: KernelEmitter, op: Operation, tot: Totals, steps: list[tuple[int, str, int]],
                 held: Optional[_HeldTotals] = None):
        self.em, self.tot, self.steps = em, tot, steps
        b = em.b
        slots: dict[int, int] = {}
        self.slot_of = [slots.setdefault(id(t), len(slots)) for t in tot]
        self.per_thread = len(slots)
        count = em.tas.num_threads * self.per_thread
        self.sizes = [element_bytes(r.type) for r in op.results]
        self.offsets = [sum(count * z for z in self.sizes[:k]) for k in range(len(self.sizes))]
        X.barrier(b)
        for r, vals in enumerate(tot):
            if self.slot_of.index(self.slot_of[r]) == r:   # the first register with this total
                for k, v in enumerate(vals):
                    b.store(to_smem(b, v, smem_type(v.type)), self._address(em.tid, self.slot_of[r], k))
        X.barrier(b)
        runtime = [(name, bit) for _, name, bit in steps if name != REG]
        group, self.held = (held.group, held.lane_bits) if held is not None else (0, 0)
        self.base = b.and_(em.tid, ir.Constant(I32, ~(_tid_mask(runtime) | group) & 0xFFFFFFFF))
        self.cache: dict[tuple[int, int], list[ir.Value]] = {}

    def _address(self, thread: ir.Value, slot: int, k: int) -> ir.Value:
        b = self.em.b
        index = b.add(b.mul(thread, ir.Constant(I32, self.per_thread)), ir.Constant(I32, slot))
        return self.em.smem_slot(index, self.sizes[k], self.offsets[k])

    def thread_bits(self, j: int) -> int:
        """The %tid.x bits of the thread that holds span block ``j``."""
        return _tid_mask([(name, bit) for k, (_, name, bit) in enumerate(self.steps) if name != REG and j >> k & 1])

    def source(self, r: int, j: int) -> tuple[int, int]:
        """Where register ``r`` finds the totals of block ``j`` of its span: (slot, thread bits)."""
        for k, (_, name, bit) in enumerate(self.steps):
            if name == REG:
                r = r | 1 << bit if j >> k & 1 else r & ~(1 << bit)
        return self.slot_of[r], self.thread_bits(j)

    def load(self, source: tuple[int, int]) -> list[ir.Value]:
        if source not in self.cache:
            b = self.em.b
            slot, bits = source
            thread = b.or_(self.base, ir.Constant(I32, bits | self.held))
            r = self.slot_of.index(slot)
            self.cache[source] = [from_smem(b, b.load(self._address(thread, slot, k), typ=smem_type(v.type)), v.type)
                                  for k, v in enumerate(self.tot[r])]
        return self.cache[source]


def _scan_line(em: KernelEmitter, op: Operation, block: Block, srcs: list[TileVal], start: ir.Value,
               stride: int, length: int, sizes: list[int], offsets: list[int]) -> None:
    b = em.b
    types = [s.regs[0].type for s in srcs]
    reverse = bool(op.attributes.get("reverse"))

    def slot(k: int, i: ir.Value) -> ir.Value:
        pos = i if not reverse else b.sub(ir.Constant(I32, length - 1), i)
        return em.smem_slot(b.add(start, b.mul(pos, ir.Constant(I32, stride))), sizes[k], offsets[k])

    first = [from_smem(b, b.load(slot(k, ir.Constant(I32, 0)), typ=smem_type(t)), t) for k, t in enumerate(types)]
    if length == 1:
        return

    def step(i: ir.Value, accs: list[ir.Value]) -> list[ir.Value]:
        cur = [from_smem(b, b.load(slot(k, i), typ=smem_type(t)), t) for k, t in enumerate(types)]
        new = _combine(em, block, accs, cur)
        for k, v in enumerate(new):
            b.store(to_smem(b, v, smem_type(types[k])), slot(k, i))
        return new

    counted_loop(em, "scan.loop", length, 1, first, step, start=1)
