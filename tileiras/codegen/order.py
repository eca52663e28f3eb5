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

Two kinds of code keep emission order, because measuring (``bench/code_quality.py``
on sm_90) found it better there:

* loop headers (blocks whose phis take a value over a back edge): LLVM's loop
  strength reduction picks its induction variables from the order of the address
  arithmetic (the CUDA-core gemm K loop of gemm_splitk: 128 registers in emission
  order, 148 reordered);
* functions that make a real call (the ``noinline`` slow paths of the math
  library): the values live across the call decide the registers, which this
  order does not look at (ew_transcendental f32: 42 registers, 46 reordered).
"""
from __future__ import annotations

from llvmlite import ir
from llvmlite.ir import instructions as I

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
        return isinstance(callee, ir.Function) and callee.name.startswith(_PURE_INTRINSICS)
    return False


def order_function(fn: ir.Function) -> None:
    """Reorder the blocks of ``fn`` (see the module docstring for those left alone)."""
    if _calls_out_of_line(fn):
        return
    outside = _used_outside_block(fn)
    position = {id(block): k for k, block in enumerate(fn.blocks)}
    for block in fn.blocks:
        if not _heads_a_loop(block, position):
            block.instructions[:] = _ordered(block.instructions, outside)


def _heads_a_loop(block: ir.Block, position: dict[int, int]) -> bool:
    """Does a phi of ``block`` take a value from ``block`` itself or a later block (a back
    edge)?  Phis of blocks that only merge branches (if/else, guarded accesses) do not."""
    return any(position[id(b)] >= position[id(block)] for inst in block.instructions
               if isinstance(inst, I.PhiInstr) for _, b in inst.incomings)


def _calls_out_of_line(fn: ir.Function) -> bool:
    """Does ``fn`` reach, through the (inlined) functions it calls, a ``noinline`` one?"""
    seen: set[str] = set()
    work = [fn]
    while work:
        f = work.pop()
        for block in f.blocks:
            for inst in block.instructions:
                callee = getattr(inst, "callee", None)
                if isinstance(callee, ir.Function) and callee.name not in seen:
                    seen.add(callee.name)
                    if "noinline" in callee.attributes:
                        return True
                    work.append(callee)
    return False


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


def _ordered(insts: list, outside: set[int]) -> list:
    """Side effects in their order, each preceded by the pure values it needs that are
    not computed yet, depth-first, operands in their emission order."""
    used_here = {id(v) for i in insts for v in _operands(i)}
    movable = {id(i) for i in insts if is_pure(i) and id(i) not in outside and id(i) in used_here}
    pos = {id(i): k for k, i in enumerate(insts)}
    done: set[int] = set()
    out: list = []
    for inst in insts:
        if id(inst) in movable:
            continue
        # a collective (barrier, shuffle) first takes the values emitted before it: they
        # do not move past it
        earlier = [i for i in insts[:pos[id(inst)]] if id(i) in movable] if is_collective(inst) else []
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
            # operands in their emission order (the earliest on top of the stack)
            for v in sorted(pending, key=lambda v: -pos[id(v)]):
                stack.append((v, False))
    assert len(out) == len(insts), "every instruction is placed once"
    return out

