"""Compile one ``.entry`` of a parsed module into a ``Program``: register slots, memory
layouts of every state space and one ``Exec`` closure per instruction."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from .memory import GLOBAL_BASE
from .parser import Function, Instruction, Module, Variable
from .ptxtypes import TYPES
from .registry import HANDLERS, UnsupportedInstruction, gathered

REG_BITS = {"pred": 1}


def register_bits(type_name: str) -> int:
    if type_name == "pred":
        return 1
    bits = TYPES[type_name].bits
    return 16 if bits < 16 else bits


def align_up(value: int, align: int) -> int:
    return -(-value // max(align, 1)) * max(align, 1)


@dataclass
class Layout:
    """Byte offsets of named variables inside one state space."""
    offsets: dict = field(default_factory=dict)
    variables: dict = field(default_factory=dict)
    size: int = 0

    def place(self, var: Variable, align: Optional[int] = None) -> int:
        off = align_up(self.size, align or var.align)
        self.offsets[var.name] = off
        self.variables[var.name] = var
        self.size = off + var.size
        return off


@dataclass
class Program:
    module: Module
    function: Function
    code: list = field(default_factory=list)          # Exec per instruction (+ final exit)
    control: list = field(default_factory=list)       # bool per instruction
    instructions: list = field(default_factory=list)  # Instruction per code slot
    reg_slots: dict = field(default_factory=dict)     # name -> (slot, bits)
    reg_bits: list = field(default_factory=list)
    globals: Layout = field(default_factory=Layout)   # offsets from GLOBAL_BASE
    shared: Layout = field(default_factory=Layout)
    dynamic_shared: list = field(default_factory=list)
    local: Layout = field(default_factory=Layout)
    params: Layout = field(default_factory=Layout)
    call_params: Layout = field(default_factory=Layout)
    function_entry: dict = field(default_factory=dict)  # .func name -> first code slot
    function_of: list = field(default_factory=list)     # Function per code slot
    call_sites: dict = field(default_factory=dict)      # return pc -> [(src, dst, size)]
    unsupported: list = field(default_factory=list)   # (line, opcode, reason)
    fenced_registers: tuple = ()                      # wgmma.mma_async's (asynchrony.py)

    @property
    def reqntid(self) -> Optional[tuple]:
        return self.function.directives.get("reqntid")

    @property
    def cluster_dims(self) -> Optional[tuple]:
        return self.function.directives.get("reqnctapercluster")


class CompileContext:
    """What handlers ask while compiling: register slots, symbol addresses, labels.
    ``fn`` is the function being compiled; registers and labels of a ``.func`` are
    namespaced by its name."""

    def __init__(self, program: Program, fn: Function, base: int = 0):
        self.program = program
        self.fn = fn
        self.base = base
        self.prefix = "" if fn.is_entry else f"{fn.name}::"
        self.callees: list = []

    def register(self, name: str) -> tuple[int, int]:
        try:
            return self.program.reg_slots[self.prefix + name]
        except KeyError:
            raise UnsupportedInstruction(f"undeclared register '{name}'") from None

    def symbol_space(self, name: str) -> str:
        p = self.program
        for space, layout in (("param", p.params), ("shared", p.shared), ("local", p.local),
                              ("global", p.globals), ("callparam", p.call_params)):
            if name in layout.offsets:
                var = layout.variables[name]
                return "const" if space == "global" and var.space == "const" else space
        if name in self.fn.labels:
            return "label"
        if name in p.module.functions:
            return "function"
        raise UnsupportedInstruction(f"unknown symbol '{name}'")

    def symbol_value(self, name: str) -> int:
        """The address of a variable in its own state space (``mov %rd, var``)."""
        p = self.program
        space = self.symbol_space(name)
        if space in ("global", "const"):
            return GLOBAL_BASE + p.globals.offsets[name]
        layout = {"param": p.params, "shared": p.shared, "local": p.local,
                  "callparam": p.call_params}.get(space)
        if layout is None:
            raise UnsupportedInstruction(f"'{name}' ({space}) has no address")
        return layout.offsets[name]

    def label(self, name: str, scope_path: tuple = ()) -> int:
        labels = self.fn.labels
        for sid in reversed(scope_path):
            if f"{name}@{sid}" in labels:
                return self.base + labels[f"{name}@{sid}"]
        try:
            return self.base + labels[name]
        except KeyError:
            raise UnsupportedInstruction(f"unknown label '{name}'") from None

    def request_function(self, name: str) -> Function:
        fn = self.program.module.functions.get(name)
        if fn is None or not fn.has_body:
            raise UnsupportedInstruction(f"call to '{name}', which has no body in this module")
        self.callees.append(fn)
        place_func_params(self.program, fn)
        return fn


def place_func_params(prog: Program, fn: Function) -> None:
    for var in fn.params + fn.returns:
        if var.name not in prog.call_params.offsets:
            prog.call_params.place(var, 16)


def compile_program(module: Module, kernel: Optional[str] = None) -> Program:
    fn = module.entry(kernel)
    prog = Program(module, fn)
    for var in module.variables:
        if var.space in ("global", "const"):
            prog.globals.place(var, max(var.align, 256 if var.size >= 256 else var.align))
        elif var.space == "shared":
            if var.extern and var.size == 0:
                prog.dynamic_shared.append(var)
            else:
                prog.shared.place(var)
    for var in fn.params:
        natural = max(TYPES[var.type_name].bits // 8, 1)
        prog.params.place(var, max(natural, var.align if var.type_name == "b8" else natural))
    pending = [fn]
    while pending:
        current = pending.pop(0)
        if current.name in prog.function_entry:
            continue
        pending.extend(compile_function(prog, current))
    from .asynchrony import guard_registers     # (it imports machine, which imports this)
    guard_registers(prog)
    return prog


def compile_function(prog: Program, fn: Function) -> list:
    """Append ``fn``'s code to the program; returns the functions it calls."""
    prefix = "" if fn.is_entry else f"{fn.name}::"
    for name, type_name in fn.regs.items():
        bits = register_bits(type_name)
        prog.reg_slots[prefix + name] = (len(prog.reg_bits), bits)
        prog.reg_bits.append(bits)
    for var in fn.variables:
        if var.space == "local":
            prog.local.place(var)
    for name, size in fn.call_params.items():
        if name not in prog.call_params.offsets:
            prog.call_params.place(Variable("param", name, "b8", size, 16))
    if not fn.is_entry:
        place_func_params(prog, fn)
    base = len(prog.code)
    prog.function_entry[fn.name] = base
    ctx = CompileContext(prog, fn, base)
    last = Instruction("exit" if fn.is_entry else "ret", ["exit" if fn.is_entry else "ret"], [],
                       None, 0, "end of body")
    for ins in list(fn.body) + [last]:
        ctx.pc = len(prog.code)
        exec_fn, control = compile_instruction(ctx, ins, prog)
        prog.code.append(exec_fn)
        prog.control.append(control)
        prog.instructions.append(ins)
        prog.function_of.append(fn)
    return ctx.callees


def compile_instruction(ctx: CompileContext, ins: Instruction, prog: Program) -> tuple[Callable, bool]:
    handler = HANDLERS.get(ins.parts[0])
    try:
        if handler is None:
            raise UnsupportedInstruction(f"no semantics for '{ins.parts[0]}'")
        fn = handler.compile(ctx, ins)
    except (UnsupportedInstruction, KeyError, ValueError, IndexError) as e:
        reason = f"line {ins.line}: '{ins.opcode}': {e}"
        prog.unsupported.append((ins.line, ins.opcode, str(e)))
        return make_unsupported(reason), True
    if not handler.control and ins.guard is not None:
        fn = guarded(ctx, ins.guard, fn)
    if "aligned" in ins.parts and ins.parts[0] not in ("bar", "barrier"):  # those check it themselves
        fn = converged(ctx, ins, fn)
    if (ins.parts[0] in WARP_GATHERED or whole_warp_sync(ins)) and not handler.control:
        return gathered_by_warp(fn), True
    return fn, handler.control


#: warp-wide instructions whose lanes exchange data: run once every lane of the warp has
#: reached them (``Batch.gather_warps``)
WARP_GATHERED = ("mma", "ldmatrix", "stmatrix")
#: warp-synchronous instructions that take a member mask (their last operand)
MEMBER_MASKED = ("shfl", "vote", "match", "redux", "elect")


def whole_warp_sync(ins: Instruction) -> bool:
    """``shfl.sync``, ``vote.sync``, ``match.sync``, ``redux.sync`` or ``elect.sync`` over the
    whole warp (member mask -1): the PTX ISA has each lane wait until every lane of the
    mask has executed it, so it runs once the warp is whole (``gather_warps``), not for
    the first lanes the lowest-PC-first scheduler brings there (where the join of a
    ``tid == 0`` branch lies before its arm, those that skipped it, which would read the
    other lane's register before that lane wrote it, or elect a second leader)."""
    if ins.parts[0] not in MEMBER_MASKED or "sync" not in ins.parts or not ins.operands:
        return False
    return getattr(ins.operands[-1], "value", None) in (-1, 0xFFFFFFFF)


def gathered_by_warp(fn: Callable) -> Callable:
    """``fn`` as a control instruction: the threads wait at it until their whole warp has
    come, then it runs for the warp and they go on to the next instruction."""
    return gathered(fn, lambda m, idx: m.gather_warps(idx))


def converged(ctx: CompileContext, ins: Instruction, fn: Callable) -> Callable:
    """``fn`` for a guarded ``.aligned`` instruction (``mma.sync.aligned``, ``ldmatrix``,
    ``wgmma``, ``tcgen05``...): the guard must be the same for every thread of a warp
    (``Machine.check_converged``), as the PTX ISA requires."""
    if ins.guard is None:  # nothing to check that this instruction alone can tell
        return fn
    mask = guard_mask(ctx, ins.guard)

    def run(m, idx):
        ids = np.arange(m.n)[idx] if isinstance(idx, slice) else idx
        g = mask(m, ids)
        m.check_converged(ids, ids[~g], ins)
        return fn(m, idx)
    return run


def make_unsupported(reason: str) -> Callable:
    def run(m, idx):
        raise UnsupportedInstruction(reason)
    return run


def guarded(ctx: CompileContext, guard, fn: Callable) -> Callable:
    slot, _ = ctx.register(guard.name)
    negate = guard.negate

    def run(m, idx):
        g = m.reg(slot)[idx]
        if negate:
            g = ~g
        if g.all():
            return fn(m, idx)
        sub = np.flatnonzero(g) if isinstance(idx, slice) else idx[g]
        if sub.size:
            return fn(m, sub)
        return None
    return run


def guard_mask(ctx: CompileContext, guard) -> Callable:
    """For control handlers: ``(m, idx) -> bool array`` of threads whose guard holds."""
    if guard is None:
        return lambda m, idx: None
    slot, _ = ctx.register(guard.name)
    if guard.negate:
        return lambda m, idx: ~m.reg(slot)[idx]
    return lambda m, idx: m.reg(slot)[idx]
