"""Instruction order inside each basic block: every pure value just before its first use.

Emitters work op by op over whole tiles, so the LLVM IR computes op 1 for every
register, then op 2 for every register, and so on: all of a tile's registers are
live between two ops.  NVPTX keeps the IR order and ptxas's register allocator
follows it closely, so registers grow with the tile.  Reordering each block
depth-first from its side effects (stores, inline asm with side effects, calls,
the terminator) computes one register's chain, then the next: the live values
are those of one element at a time, as in NVIDIA's code.

Side effects keep their order; only pure instructions move, and only later, to
just before the first instruction (in the new order) that uses them, but never past
a collective (barrier, shuffle, redux) emitted after them: the values a phase of
warp- or CTA-wide work (a scan, a conversion through shared memory) leaves behind
are computed before the next phase starts, rather than keeping what they are
computed from live through it (scans_builtin f32 sm_80: 40 -> 27 registers).  A pure
value used in another block stays where it was (it is ordered as a side effect).

Instructions that ptxas turns into a call of a slow-path subroutine (IEEE f32/f64
division, square root and reciprocal, 64-bit integer division; ``becomes_call``) are then
moved up again where that helps (``_place_calls``): every value live across such a call
needs a register the subroutine does not use, so a division is best computed before a
store's address and predicate rather than between them (softmax_rows f16 sm_80: 22
registers right before its store, 18 moved up, NVIDIA 19), but not so early that its
result waits across the next element's divisions (ew_arith: 25 per element, 28 with all
divisions first).

Loads are side effects too, but the emitter names those (``sinkable``: weak loads that no
write is token-ordered after, nvvm.KernelEmitter.sinkable_load) that may run later than
emitted: they move like pure values, past other loads and plain stores (``passes_loads``),
but never past anything else with an effect (a barrier, fence, atomic, asynchronous copy),
before which they are placed.  A tile's loads, whole-tile op by whole-tile op, otherwise
all come before the first store of the values computed from them: layer norm's weight and
bias rows (two loads of 64 registers each, f32 n8192 sm_80) were all live at once, 202
registers against NVIDIA's 112, which loads each element just before the store that uses it.
A layout conversion's reads of its shared-memory scratch are sinkable too
(``emit_shape.exchange``; they follow its last barrier), but they stay before any plain
store to shared memory, which may write what they read: the weight row a persistent RMS
norm converts to its tile's layout every trip was read whole (a register for each of the
thread's 256 elements, bf16 4x8192 sm_80) beside the tile (ptxas -v: 3176 bytes spilled
and reloaded, 1008 with the reads sunk).

Calls of the math library (libdevice's ``__nv_sinf``...; inlined later, in the back end)
are pure values too.  Their inlined bodies branch (the trig functions' argument reduction
loops through local memory), and whatever is live across those branches needs registers of
its own, so of an op's operands the one that calls the library more is computed first
(Sethi-Ullman's rule with library calls for weight): ``exp(x) + sin(x) * cos(x)`` computes
the sine and cosine before the exponential (ew_transcendental f32 sm_120: 38 -> 34 registers,
f64: 44 -> 36; NVIDIA 29 and 42).

Loop headers (blocks whose phis take a value over a back edge) keep emission order, because
measuring (``bench/code_quality.py`` on sm_90) found it better there: LLVM's loop strength
reduction picks its induction variables from the order of the address arithmetic (the
CUDA-core gemm K loop of gemm_splitk: 128 registers in emission order, 148 reordered).
"""
from __future__ import annotations

import bisect
import re
from typing import Optional

from llvmlite import ir
from llvmlite.ir import instructions as I

from . import libdevice
from .intrinsics import is_collective

#: Instruction classes that compute a value from their operands and nothing else.
_PURE_CLASSES = (I.CastInstr, I.CompareInstr, I.SelectInstr, I.GEPInstr, I.ExtractValue, I.InsertValue,
                 I.ExtractElement, I.InsertElement, I.ShuffleVector)
#: LLVM intrinsics that may run anywhere in their block (no memory, no convergence).
_PURE_INTRINSICS = ("llvm.fma.", "llvm.fabs.", "llvm.minnum.", "llvm.maxnum.", "llvm.minimum.",
                    "llvm.maximum.", "llvm.copysign.", "llvm.ctlz.", "llvm.cttz.", "llvm.ctpop.",
                    "llvm.bitreverse.", "llvm.bswap.", "llvm.fshl.", "llvm.fshr.", "llvm.smax.",
                    "llvm.smin.", "llvm.umax.", "llvm.umin.", "llvm.abs.", "llvm.sqrt.",
                    "llvm.nvvm.mul.hi.", "llvm.nvvm.mulhi.", "llvm.floor.", "llvm.ceil.",
                    "llvm.trunc.", "llvm.rint.", "llvm.nearbyint.", "llvm.round.", "llvm.roundeven.")


#: PTX instructions that ptxas expands into a CALL of an internal slow-path subroutine
#: (measured with nvdisasm on sm_80): IEEE-rounded division, sqrt and rcp, f64 rsqrt, and
#: 64-bit integer division and remainder (32-bit ones and div.full/approx are inline).
_CALLING_PTX = re.compile(r"^\s*(?:(?:div|sqrt|rcp)\.r[nzmp]\b|rsqrt\.approx(?:\.ftz)?\.f64|(?:div|rem)\.[su]64)")
#: their LLVM spellings (NVPTX selects div.rn / sqrt.rn / div.s64 ... for them)
_CALLING_OPS = ("fdiv", "frem")
_CALLING_INT_OPS = ("sdiv", "udiv", "srem", "urem")


def becomes_call(inst: I.Instruction) -> bool:
    """Does ptxas compile ``inst`` to a call of a slow-path subroutine?"""
    if type(inst) is I.Instruction:
        if inst.opname in _CALLING_OPS:
            return True
        return inst.opname in _CALLING_INT_OPS and isinstance(inst.type, ir.IntType) and inst.type.width == 64
    if isinstance(inst, I.CallInstr):
        callee = inst.callee
        if isinstance(callee, ir.InlineAsm):
            return bool(_CALLING_PTX.match(callee.asm))
        return isinstance(callee, ir.Function) and callee.name.startswith("llvm.sqrt.")
    return False


def is_pure(inst: I.Instruction) -> bool:
    """Computes its value from its operands only (may move inside its block)."""
    if type(inst) is I.Instruction:      # binary and unary operators
        return True
    if isinstance(inst, _PURE_CLASSES):
        return True
    if isinstance(inst, I.CallInstr):
        callee = inst.callee
        if isinstance(callee, ir.InlineAsm):
            return not callee.side_effect
        return isinstance(callee, ir.Function) and callee.name.startswith(_PURE_INTRINSICS + (libdevice.PREFIX,))
    return False


def _calls_library(inst) -> bool:
    return isinstance(inst, I.CallInstr) and isinstance(inst.callee, ir.Function) \
        and inst.callee.name.startswith(libdevice.PREFIX)


#: plain (weak, non-volatile) stores: sinkable loads may move past them
_PLAIN_STORE = re.compile(r"^(?:@\$\d+ )?st\.(global|shared)(?:\.(?!release|relaxed|volatile|mmio)[\w:]+)*\s")


def _plain_store(inst: I.Instruction) -> Optional[re.Match]:
    """The match of ``_PLAIN_STORE`` (group 1 the state space) if ``inst`` is one."""
    if not (isinstance(inst, I.CallInstr) and isinstance(inst.callee, ir.InlineAsm)):
        return None
    return _PLAIN_STORE.match(inst.callee.asm)


def passes_loads(inst: I.Instruction) -> bool:
    """May a sinkable load move past ``inst``: a plain store (the load is token-ordered
    before no write), the read of a special register or an index extension kept apart from
    its copies (intrinsics.sreg_here, widen_here: effects only to LLVM)?"""
    if not (isinstance(inst, I.CallInstr) and isinstance(inst.callee, ir.InlineAsm)):
        return False
    return bool(_plain_store(inst)) or inst.callee.asm.startswith(("mov.u32 $0, %", "cvt."))


def reads_shared(inst: I.Instruction) -> bool:
    """Does the (sinkable) load ``inst`` read shared memory (a layout conversion's read of
    its scratch)?"""
    if isinstance(inst, I.LoadInstr):
        return getattr(inst.operands[0].type, "addrspace", 0) == 3
    return isinstance(inst, I.CallInstr) and isinstance(inst.callee, ir.InlineAsm) and ".shared" in inst.callee.asm


def writes_shared(inst: I.Instruction) -> bool:
    """Is ``inst`` a plain store to shared memory (which a shared-memory load may not pass:
    it may write what the load reads; other stores hold every sinkable load already)?"""
    match = _plain_store(inst)
    return match is not None and match.group(1) == "shared"


def order_function(fn: ir.Function, sinkable: frozenset[int] | set[int] = frozenset()) -> None:
    """Reorder the blocks of ``fn`` (see the module docstring for those left alone);
    ``sinkable``: ids of the load instructions that may run later than emitted."""
    outside = _used_outside_block(fn)
    position = {id(block): k for k, block in enumerate(fn.blocks)}
    for block in fn.blocks:
        if not _heads_a_loop(block, position):
            block.instructions[:] = _place_calls(_ordered(block.instructions, outside, sinkable), outside)


def _heads_a_loop(block: ir.Block, position: dict[int, int]) -> bool:
    """Does a phi of ``block`` take a value from ``block`` itself or a later block (a back
    edge)?  Phis of blocks that only merge branches (if/else, guarded accesses) do not."""
    return any(position[id(b)] >= position[id(block)] for inst in block.instructions
               if isinstance(inst, I.PhiInstr) for _, b in inst.incomings)


def _operands(inst: I.Instruction) -> list:
    if isinstance(inst, I.PhiInstr):
        return [v for v, _ in inst.incomings]
    return list(inst.operands)


def _used_outside_block(fn: ir.Function) -> set[int]:
    """ids of instructions used by an instruction of another block or by a phi."""
    out: set[int] = set()
    for block in fn.blocks:
        for inst in block.instructions:
            for v in _operands(inst):
                if isinstance(v, I.Instruction) and (v.parent is not block or isinstance(inst, I.PhiInstr)):
                    out.add(id(v))
    return out


def _ordered(insts: list, outside: set[int], sinkable: frozenset[int] | set[int] = frozenset()) -> list:
    """Side effects in their order, each preceded by the pure values (and sinkable loads)
    it needs that are not computed yet, depth-first, operands in their emission order."""
    used_here = {id(v) for i in insts for v in _operands(i)}
    loads = {id(i) for i in insts if id(i) in sinkable and id(i) not in outside and id(i) in used_here}
    shared_loads = {id(i) for i in insts if id(i) in loads and reads_shared(i)}
    movable = loads | {id(i) for i in insts if is_pure(i) and id(i) not in outside and id(i) in used_here}
    pos = {id(i): k for k, i in enumerate(insts)}
    done: set[int] = set()
    out: list = []
    calls: dict[int, frozenset[int]] = {}

    def library_calls(v) -> frozenset[int]:
        """The math-library calls among ``v`` and the movable values it is computed from."""
        work = [(v, False)]
        while work:
            cur, expanded = work.pop()
            if id(cur) in calls:
                continue
            inputs = [o for o in _operands(cur) if isinstance(o, I.Instruction) and id(o) in movable]
            if expanded:
                own = frozenset([id(cur)]) if _calls_library(cur) else frozenset()
                calls[id(cur)] = own.union(*(calls[id(o)] for o in inputs))
            else:
                work.append((cur, True))
                work += [(o, False) for o in inputs if id(o) not in calls]
        return calls[id(v)]

    def heavy(v) -> int:
        return len(library_calls(v) - done) if any_calls else 0

    any_calls = any(_calls_library(i) for i in insts if id(i) in movable)
    for inst in insts:
        if id(inst) in movable:
            continue
        # a collective (barrier, shuffle) first takes the values emitted before it: they
        # do not move past it; nor do loads past an effect other than a plain store
        if is_collective(inst):
            earlier = [i for i in insts[:pos[id(inst)]] if id(i) in movable]
        elif loads and not passes_loads(inst) and not is_pure(inst) and not isinstance(inst, I.PhiInstr):
            earlier = [i for i in insts[:pos[id(inst)]] if id(i) in loads]
        elif shared_loads and writes_shared(inst):
            earlier = [i for i in insts[:pos[id(inst)]] if id(i) in shared_loads]
        else:
            earlier = []
        # iterative depth-first walk: (instruction, operands already pushed)
        stack = [(inst, False)] + [(v, False) for v in reversed(earlier)]
        while stack:
            cur, expanded = stack.pop()
            if id(cur) in done:
                continue
            if expanded:
                done.add(id(cur))
                out.append(cur)
                continue
            stack.append((cur, True))
            pending = [v for v in _operands(cur)
                       if isinstance(v, I.Instruction) and id(v) in movable and id(v) not in done]
            # operands in their emission order (the earliest on top of the stack), but one
            # that calls more of the math library first (Sethi-Ullman: what is live across
            # an inlined slow path needs registers of its own)
            for v in sorted(pending, key=lambda v: (heavy(v), -pos[id(v)])):
                stack.append((v, False))
    assert len(out) == len(insts), "every instruction is placed once"
    return out


#: _place_calls weighs each position a call may move to at a cost linear in the block:
#: blocks where (instructions from the first such position)^2 exceeds this keep the
#: depth-first order
_PLACE_BUDGET = 40_000


def _place_calls(insts: list, outside: set[int]) -> list:
    """Move each ``becomes_call`` instruction, with the pure operands computed just for it,
    up to where its block needs the fewest registers for values live across its calls
    (``_across_calls``), not above the call before it; of equal costs, the position least
    far up."""
    calls = [i for i in insts if becomes_call(i)]
    if not calls:
        return insts
    # nothing moves above the first position a call may take: weigh only from there (the
    # values defined before and live across a call are live there too)
    lo = min(_earliest(insts, insts.index(c), outside) for c in calls)
    head, tail = insts[:lo], insts[lo:]
    if len(tail) ** 2 > _PLACE_BUDGET:
        return insts
    facts = _Facts(tail, outside)
    previous = -1
    for call in calls:
        best, best_cost = tail, _across_calls(tail, facts)
        k = tail.index(call)
        for p in range(k - 1, max(_earliest(tail, k, outside), previous + 1) - 1, -1):
            moved = _hoisted(tail, k, p)
            cost = _across_calls(moved, facts)
            if cost < best_cost:
                best, best_cost = moved, cost
        tail = best
        previous = tail.index(call)
    return head + tail


def _earliest(insts: list, k: int, outside: set[int]) -> int:
    """The first position ``insts[k]`` may move to, taking along the pure operands it needs
    that are computed in the block: just after the block's phis and the last operand that
    cannot move (a side effect, a phi, a value used in another block)."""
    pos = {id(i): n for n, i in enumerate(insts)}
    start = sum(1 for i in insts if isinstance(i, I.PhiInstr))     # phis stay first
    work, seen = [insts[k]], set()
    while work:
        inst = work.pop()
        for v in _operands(inst):
            n = pos.get(id(v))
            if n is None or id(v) in seen:
                continue
            seen.add(id(v))
            if isinstance(v, I.PhiInstr) or not is_pure(v) or id(v) in outside:
                start = max(start, n + 1)
            else:
                work.append(v)
    return min(start, k)


def _hoisted(insts: list, k: int, p: int) -> list:
    """``insts`` with instruction ``k`` and the operands it needs from ``p`` .. ``k-1``
    placed at ``p``, in their order (``p`` at or after ``_earliest``)."""
    window = insts[p:k]
    inside = {id(i) for i in window}
    needed = {id(insts[k])}
    for inst in reversed(window + [insts[k]]):
        if id(inst) in needed:
            needed.update(id(v) for v in _operands(inst) if id(v) in inside)
    part = [i for i in window if id(i) in needed]
    rest = [i for i in window if id(i) not in needed]
    return insts[:p] + part + [insts[k]] + rest + insts[k + 1:]


def _width(v) -> int:
    """32-bit registers a value takes across a call: none for a kernel parameter (ptxas
    reads it from the constant bank where it is used) or a predicate (the subroutine
    leaves some predicate registers alone)."""
    if isinstance(v, ir.Argument):
        return 0
    t = v.type
    if isinstance(t, ir.IntType) and t.width == 1:
        return 0
    bits = t.width if isinstance(t, ir.IntType) else 64 if isinstance(t, (ir.DoubleType, ir.PointerType)) else 32
    return 2 if bits > 32 else 1


def _across_calls(insts: list, facts: _Facts) -> tuple[int, int]:
    """Registers the values live across a call need, as (most at once, in all): a value is
    live across a call when defined before it (here or in an earlier block) and used after
    it or in another block.  ptxas compiles one slow-path subroutine for all of a kernel's
    calls and gives it registers none of those values occupies, so values live across
    different calls count too when their ranges overlap (all the registers a softmax row
    keeps while dividing them one by one)."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    calls = []
    end = len(insts)
    for k, inst in enumerate(insts):
        key = id(inst)
        first[key] = k
        for v in facts.uses[key]:
            last[v] = k
        if key in facts.outside:
            last[key] = end
        if key in facts.calls:
            calls.append(k)
    change = [0] * (end + 2)
    total = 0
    for v, used in last.items():
        defined = first.get(v, -1)     # -1: from an earlier block
        n = bisect.bisect_right(calls, defined)
        if n < len(calls) and calls[n] < used:     # a call between definition and last use
            w = facts.width[v]
            change[defined + 1] += w
            change[used + 1] -= w
            total += w
    most = live = 0
    for d in change:
        live += d
        most = max(most, live)
    return most, total


class _Facts:
    """What ``_across_calls`` needs of a block's instructions, by id: the values each uses,
    the width of every value, which are calls and which are used in other blocks."""

    def __init__(self, insts: list, outside: set[int]):
        self.uses: dict[int, list[int]] = {}
        self.width: dict[int, int] = {}
        for inst in insts:
            values = [v for v in _operands(inst) if isinstance(v, (I.Instruction, ir.Argument))]
            self.uses[id(inst)] = [id(v) for v in values]
            self.width.update((id(v), _width(v)) for v in values + [inst])
        self.calls = {id(i) for i in insts if becomes_call(i)}
        self.outside = outside
