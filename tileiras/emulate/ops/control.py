"""Control flow: bra, ret/exit, trap, bar/barrier, call (vprintf, __assertfail)."""
from __future__ import annotations

import numpy as np

from ..machine import KernelTrap
from ..operands import reader
from ..parser import ArgList, Sym
from ..program import guard_mask
from ..ptxtypes import ptx_type
from ..registry import UnsupportedInstruction, gathered, handles, modifiers
from .memory import read_memory
from .printf import format_printf, read_c_string

U32 = ptx_type("u32")
U64 = ptx_type("u64")


def taken_split(m, idx, g):
    """(threads whose guard holds, the others)."""
    if g is None:
        return idx, idx[:0]
    return idx[g], idx[~g]


@handles("bra", "brx", control=True)
def compile_bra(ctx, ins):
    target_op = ins.operands[0]
    if not isinstance(target_op, Sym):
        raise UnsupportedInstruction("indirect branches")
    target = ctx.label(target_op.name, ins.scope_path)
    gm = guard_mask(ctx, ins.guard)

    def run(m, idx):
        g = gm(m, idx)
        if g is None:
            m.pc[idx] = target
        else:
            m.pc[idx] = np.where(g, target, m.pc[idx] + 1)
    return run


@handles("ret", "exit", control=True)
def compile_exit(ctx, ins):
    gm = guard_mask(ctx, ins.guard)
    if ins.parts[0] == "ret" and not ctx.fn.is_entry:
        return make_return(ctx.program, gm)

    def run(m, idx):
        taken, rest = taken_split(m, idx, gm(m, idx))
        m.pc[rest] += 1
        m.exit_threads(taken)
    return run


@handles("trap", "brkpt", control=True)
def compile_trap(ctx, ins):
    gm = guard_mask(ctx, ins.guard)
    line = ins.line
    is_trap = ins.parts[0] == "trap"

    def run(m, idx):
        taken, rest = taken_split(m, idx, gm(m, idx))
        m.pc[rest] += 1
        if is_trap and taken.size:
            raise KernelTrap("trap", f"trap executed by {taken.size} threads (PTX line {line}); "
                             f"first: {m.launch.describe_thread(m, int(taken[0]))}",
                             {"line": line, "threads": int(taken.size)})
        m.pc[taken] += 1
    return run


@handles("bar", "barrier", control=True)
def compile_bar(ctx, ins):
    mods = modifiers(ins.parts)
    if "warp" in mods:
        # bar.warp.sync -1: the warp reconverges there (``Batch.gather_warps``: the lowest-PC-
        # first scheduler does not where its paths join at a lower PC, a loop's next trip)
        if bool(ins.operands) and getattr(ins.operands[0], "value", None) in (-1, 0xFFFFFFFF):
            return gathered(lambda m, idx: None, lambda m, idx: m.gather_warps(idx))
        return lambda m, idx: m.pc.__setitem__(idx, m.pc[idx] + 1)
    if "cluster" in mods:
        return make_cluster_barrier(ctx, ins, mods)
    wait = not ({"arrive"} & mods)
    # bar.sync/bar.arrive are barrier.sync.aligned/barrier.arrive.aligned
    aligned = ins.parts[0] == "bar" or "aligned" in mods
    if {"red"} & mods:
        raise UnsupportedInstruction("bar.red")
    ops = [op for op in ins.operands]
    bar_r = reader(ctx, ops[0], U32) if ops else (lambda m, idx: np.uint32(0))
    count_r = reader(ctx, ops[1], U32) if len(ops) > 1 else None
    gm = guard_mask(ctx, ins.guard)

    def run(m, idx):
        taken, rest = taken_split(m, idx, gm(m, idx))
        if aligned:
            m.check_converged(idx, rest, ins, barrier=True)
        m.pc[idx] += 1
        if taken.size:
            if wait:
                m.wait_at_aligned_barrier(taken, aligned)
            bar = np.broadcast_to(np.asarray(bar_r(m, taken)).astype(np.int64), taken.shape)
            count = None
            if count_r is not None:
                count = np.broadcast_to(np.asarray(count_r(m, taken)).astype(np.int64), taken.shape)
            m.arrive(taken, bar & 15, count, wait)
    return run


def make_cluster_barrier(ctx, ins, mods):
    """barrier.cluster.arrive / .wait (arrive counts a phase; wait blocks until every live
    thread of the cluster has arrived as often)."""
    gm = guard_mask(ctx, ins.guard)
    arrive, wait = "arrive" in mods, "wait" in mods

    def run(m, idx):
        taken, rest = taken_split(m, idx, gm(m, idx))
        m.pc[idx] += 1
        if taken.size and arrive:
            m.cluster_arrive(taken)
        if taken.size and wait:
            m.cluster_wait(taken)
    return run


# ----------------------------------------------------------------------------- calls
def call_parts(ins) -> tuple[list, str, list]:
    ops = list(ins.operands)
    rets: list = []
    if ops and isinstance(ops[0], ArgList):
        rets = list(ops.pop(0).items)
    func = ops.pop(0)
    args = list(ops[0].items) if ops and isinstance(ops[0], ArgList) else []
    if not isinstance(func, Sym):
        raise UnsupportedInstruction("indirect calls")
    return rets, func.name, args


def param_reader(ctx, op, ty):
    """Per-thread value of a call argument (a call-site .param, or a register)."""
    from .memory import address_reader
    if isinstance(op, Sym):
        addr_r, space = address_reader(ctx, op, "param")

        def read(m, idx):
            return read_memory(m, idx, addr_r(m, idx), ty.bits // 8, space).view(ty.dtype)
        return read
    return reader(ctx, op, ty)


@handles("call", control=True)
def compile_call(ctx, ins):
    rets, name, args = call_parts(ins)
    gm = guard_mask(ctx, ins.guard)
    if name == "vprintf":
        fmt_r, buf_r = param_reader(ctx, args[0], U64), param_reader(ctx, args[1], U64)
        return make_printf(gm, fmt_r, buf_r)
    if name in ("__assertfail", "__assert_fail", "_wassert"):
        readers = [param_reader(ctx, a, U64 if k != 2 else U32) for k, a in enumerate(args)]
        return make_assert(gm, readers, ins.line)
    return make_call(ctx, gm, rets, name, args)


def make_call(ctx, gm, rets, name, args):
    """A call to a ``.func`` of the module: arguments are copied into the callee's
    ``.param`` variables, the return PC is pushed on the thread's call stack, and the
    callee's ``ret`` copies its return variables into the caller's."""
    callee = ctx.request_function(name)
    prog = ctx.program
    layout = prog.call_params
    if len(args) != len(callee.params) or len(rets) > len(callee.returns):
        raise UnsupportedInstruction(f"call to '{name}' with a mismatched parameter list")
    copies = []
    for op, var in zip(args, callee.params):
        if not isinstance(op, Sym):
            raise UnsupportedInstruction("call arguments that are not .param variables")
        copies.append((layout.offsets[op.name] + op.offset, layout.offsets[var.name], var.size))
    return_pc = ctx.pc + 1
    prog.call_sites[return_pc] = [(layout.offsets[var.name], layout.offsets[op.name], var.size)
                                  for op, var in zip(rets, callee.returns)]

    def run(m, idx):
        taken, rest = taken_split(m, idx, gm(m, idx))
        m.pc[rest] += 1
        if not taken.size:
            return
        copy_params(m, taken, copies)
        stack, depth = m.call_stack()
        if depth[taken].max() >= stack.shape[1]:
            raise UnsupportedInstruction(f"call depth over {stack.shape[1]} (recursion?)")
        stack[taken, depth[taken]] = return_pc
        depth[taken] += 1
        m.pc[taken] = prog.function_entry[name]
    return run


def copy_params(m, tids, copies) -> None:
    base = tids.astype(np.int64) * m.callparam_size
    for src, dst, size in copies:
        span = np.arange(size, dtype=np.int64)
        m.callparams[(base + dst)[:, None] + span] = m.callparams[(base + src)[:, None] + span]


def make_return(prog, gm):
    def run(m, idx):
        taken, rest = taken_split(m, idx, gm(m, idx))
        m.pc[rest] += 1
        if not taken.size:
            return
        stack, depth = m.call_stack()
        depth[taken] -= 1
        target = stack[taken, depth[taken]]
        for rpc in np.unique(target):
            group = taken[target == rpc]
            copy_params(m, group, prog.call_sites[int(rpc)])
        m.pc[taken] = target
    return run


def make_printf(gm, fmt_r, buf_r):
    def run(m, idx):
        taken, rest = taken_split(m, idx, gm(m, idx))
        m.pc[idx] += 1
        if not taken.size:
            return
        fmts = np.broadcast_to(np.asarray(fmt_r(m, taken), np.uint64), taken.shape)
        bufs = np.broadcast_to(np.asarray(buf_r(m, taken), np.uint64), taken.shape)
        for t, f, b in zip(taken, fmts, bufs):
            t = int(t)
            fmt = read_c_string(m, t, int(f))
            text = format_printf(m, t, fmt, int(b))
            m.launch.record_printf(m, t, text)
    return run


def make_assert(gm, readers, line):
    def run(m, idx):
        taken, rest = taken_split(m, idx, gm(m, idx))
        m.pc[idx] += 1
        if not taken.size:
            return
        vals = [np.broadcast_to(np.asarray(r(m, taken)), taken.shape) for r in readers]
        for k, t in enumerate(taken):
            t = int(t)
            message = read_c_string(m, t, int(vals[0][k])).decode(errors="replace")
            file = read_c_string(m, t, int(vals[1][k])).decode(errors="replace") if len(vals) > 1 else ""
            lineno = int(vals[2][k]) if len(vals) > 2 else 0
            func = read_c_string(m, t, int(vals[3][k])).decode(errors="replace") if len(vals) > 3 else ""
            m.launch.record_assert(m, t, message, file, lineno, func)
        first = m.launch.asserts[-len(taken)]
        raise KernelTrap("assert", first["text"], first)
    return run
