"""ld/ldu/st (all state spaces, vectors, generic addressing), atom/red, multimem, isspacep, mapa.

Address resolution turns a per-thread address into (flat byte array, byte offsets) for one
state space; generic addresses are split by window first.  Cache hints are ignored.  Memory
ordering qualifiers (.relaxed/.acquire/.release/.volatile, scopes) matter only in the
interleaved mode (``weak.py``): there weak global accesses use the running CTA's copy of
global memory, strong ones global memory itself, and releases/acquires publish/refresh the
copy; otherwise every access is sequentially consistent.  Atomics on the same address within one instruction are applied in thread
order, one "round" of distinct addresses at a time.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import numpy as np

from ..memory import (LOCAL_GENERIC_BASE, PARAM_GENERIC_BASE, SHARED_GENERIC_BASE, SHARED_OFFSET_MASK,
                      SHARED_RANK_SHIFT, WINDOW_SIZE, MemoryFault, gather, scatter)
from ..operands import reader, type_of, vector_items, writer
from ..parser import Addr, Reg, Sym
from ..ptxtypes import BF16, RAW_DTYPES, PtxType, ptx_type
from ..registry import UnsupportedInstruction, handles
from ..weak import ordering

U64 = ptx_type("u64")
SPACES = {"global": "global", "shared": "shared", "shared::cta": "shared",
          "shared::cluster": "shared", "local": "local", "param": "param",
          "param::entry": "param", "param::func": "param", "const": "global"}


def space_of(parts: list[str]) -> str:
    for p in parts[1:]:
        if p in SPACES:
            return SPACES[p]
    return "generic"


def thread_ids(m, idx) -> np.ndarray:
    if isinstance(idx, slice):
        return np.arange(m.n)[idx]
    return idx


def address_reader(ctx, op, space: str) -> tuple[Callable, str]:
    """(reader of per-thread u64 addresses, refined space) for an address operand."""
    if not isinstance(op, Addr):
        op = Addr(op, 0) if isinstance(op, (Reg, Sym)) else op
    if isinstance(op.base, Sym):
        sym_space = ctx.symbol_space(op.base.name)
        value = np.uint64((ctx.symbol_value(op.base.name) + op.base.offset + op.offset) % (1 << 64))
        if space == "param" and sym_space == "callparam":
            space = "callparam"
        elif space == "generic" and sym_space in ("global", "const"):
            space = "global"
        elif space == "generic" and sym_space in ("shared", "local"):
            space = sym_space
        return (lambda m, idx: value), space
    if op.base is None:
        value = np.uint64(op.offset % (1 << 64))
        return (lambda m, idx: value), space
    base = reader(ctx, op.base, U64)
    off = np.uint64(op.offset % (1 << 64))
    if op.offset == 0:
        return base, space
    if isinstance(op.base, Reg) and ctx.register(op.base.name)[1] == 32:
        # a 32-bit address (shared, local under -nvptx-short-ptr) wraps at 32 bits: [%r - 8 + 24]
        return (lambda m, idx: (base(m, idx) + off) & np.uint64(0xFFFFFFFF)), space
    return (lambda m, idx: base(m, idx) + off), space


def locate(m, idx, addr: np.ndarray, width: int, space: str,
           strong: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(flat byte array, byte offsets) of the accessed bytes in one state space; global
    bytes are the running CTA's copy for weak accesses in the interleaved mode."""
    addr = np.asarray(addr, np.uint64)
    tids = thread_ids(m, idx)
    if addr.ndim == 0:
        addr = np.full(len(tids), addr, np.uint64)
    if space == "global":
        flat = m.gmem.data if m.weak is None or strong else m.weak.view
        return flat, m.gmem.offsets(addr, width)
    if space == "shared":
        rank = (addr >> np.uint64(SHARED_RANK_SHIFT)).astype(np.int64)
        off = (addr & np.uint64(SHARED_OFFSET_MASK)).astype(np.int64)
        cta = m.cta_of[tids]
        per = m.launch.cta_per_cluster
        target = np.where(rank == 0, cta, (cta // per) * per + rank - 1)
        if off.size and (off.max() + width > m.smem_size or (rank > per).any()):
            bad = int(addr[(off + width > m.smem_size) | (rank > per)][0])
            raise MemoryFault(f"shared access of {width} bytes at {bad:#x} outside the "
                              f"{m.smem_size}-byte shared window")
        if per > 1 and rank.any():      # mapa'd addresses: another CTA's may be gone
            for other in np.unique(target[target != cta]).tolist():
                if m.exited(other):
                    raise MemoryFault(f"shared::cluster access to CTA rank {other % per} of the cluster, "
                                      f"whose threads have all exited (its shared memory is gone)")
        return m.shared, target * m.smem_size + off
    if space == "local":
        off = addr.astype(np.int64)
        if off.size and (off.min() < 0 or off.max() + width > m.local_size):
            raise MemoryFault(f"local access at {int(off.max()):#x} outside the "
                              f"{m.local_size}-byte local frame")
        return m.local, tids * m.local_size + off
    if space == "param":
        off = addr.astype(np.int64)
        if off.size and off.max() + width > m.params.size:
            raise MemoryFault(f"kernel parameter access at offset {int(off.max())} out of range")
        return m.params, off
    if space == "callparam":
        return m.callparams, tids * m.callparam_size + addr.astype(np.int64)
    raise UnsupportedInstruction(f"state space {space}")


def generic_split(addr: np.ndarray) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """[(space, mask, space address)] for generic addresses."""
    addr = np.asarray(addr, np.uint64)
    shared = (addr >= np.uint64(SHARED_GENERIC_BASE)) & (addr < np.uint64(SHARED_GENERIC_BASE + WINDOW_SIZE))
    local = (addr >= np.uint64(LOCAL_GENERIC_BASE)) & (addr < np.uint64(LOCAL_GENERIC_BASE + WINDOW_SIZE))
    param = (addr >= np.uint64(PARAM_GENERIC_BASE)) & (addr < np.uint64(PARAM_GENERIC_BASE + WINDOW_SIZE))
    out = []
    glob = ~(shared | local | param)
    if glob.any():
        out.append(("global", glob, addr))
    if shared.any():
        out.append(("shared", shared, addr - np.uint64(SHARED_GENERIC_BASE)))
    if local.any():
        out.append(("local", local, addr - np.uint64(LOCAL_GENERIC_BASE)))
    if param.any():
        out.append(("param", param, addr - np.uint64(PARAM_GENERIC_BASE)))
    return out


def read_memory(m, idx, addr, width: int, space: str, strong: bool = False) -> np.ndarray:
    """Raw little-endian values (uint of ``width`` bytes) at ``addr`` per thread."""
    if space != "generic":
        return read_space(m, idx, addr, width, space, strong)
    tids = thread_ids(m, idx)
    addr = np.broadcast_to(np.asarray(addr, np.uint64), tids.shape)
    out = np.zeros(len(tids), RAW_DTYPES[width * 8])
    for sp, mask, a in generic_split(addr):
        out[mask] = read_space(m, tids[mask], a[mask], width, sp, strong)
    return out


def read_space(m, idx, addr, width: int, space: str, strong: bool) -> np.ndarray:
    flat, offs = locate(m, idx, addr, width, space, strong)
    if space == "shared":
        shared_access(m, idx, offs, width, None)
    if m.weak is None or space != "global" or not strong:
        return gather(flat, offs, width)
    m.weak.strong_before(offs, width)
    out = gather(flat, offs, width)
    m.weak.strong_after(offs, width)
    return out


def write_memory(m, idx, addr, width: int, space: str, values: np.ndarray,
                 strong: bool = False) -> None:
    tids = thread_ids(m, idx)
    values = np.broadcast_to(np.asarray(values), tids.shape)
    if space != "generic":
        write_space(m, idx, addr, width, space, values, strong)
        return
    addr = np.broadcast_to(np.asarray(addr, np.uint64), tids.shape)
    for sp, mask, a in generic_split(addr):
        write_space(m, tids[mask], a[mask], width, sp, values[mask], strong)


def shared_access(m, idx, offs: np.ndarray, width: int, values) -> None:
    """Every thread access to shared memory: asynchronous operations in flight there
    (``asynchrony``) and races (``races``); ``values`` None for a read."""
    if values is None:
        m.asynchrony.check_read(offs, width, idx)
    else:
        m.asynchrony.check_write(offs, width, idx)
    races = m.shared_races()
    if races is not None:
        races.access(idx, offs, width, values is not None, values)


def write_space(m, idx, addr, width: int, space: str, values: np.ndarray, strong: bool) -> None:
    flat, offs = locate(m, idx, addr, width, space, strong)
    if space == "shared":
        shared_access(m, idx, offs, width, values)
    if m.weak is None or space != "global":
        scatter(flat, offs, width, values)
    elif strong:
        m.weak.strong_before(offs, width)
        scatter(flat, offs, width, values)
        m.weak.strong_after(offs, width)
    else:
        scatter(flat, offs, width, values)
        m.weak.written(offs, width)


def ordered(m, releases: bool, acquires: bool, access: Callable) -> Any:
    """``access()`` with the interleaved mode's release before it and acquire after it."""
    if m.weak is None:
        return access()
    if releases:
        m.weak.publish()
    out = access()
    if acquires:
        m.weak.refresh()
    return out


def vec_count(parts: list[str]) -> int:
    for p in parts[1:]:
        if p in ("v2", "v4", "v8"):
            return int(p[1:])
    return 1


def count_traffic(m, idx, addr, nbytes: int, space: str, store: bool) -> None:
    """Global accesses in sectors, shared ones (within the CTA's window) in wavefronts."""
    if space == "global":
        m.launch.traffic.record(thread_ids(m, idx), addr, nbytes, store=store)
    elif space == "shared":
        offsets = np.asarray(addr, np.uint64) & np.uint64(SHARED_OFFSET_MASK)
        m.launch.traffic.record_shared(thread_ids(m, idx), offsets.astype(np.int64), nbytes, store=store)


@handles("ld", "ldu")
def compile_ld(ctx, ins):
    ty = type_of(ins.parts)
    space = space_of(ins.parts)
    vec = vec_count(ins.parts)
    addr_r, space = address_reader(ctx, ins.operands[1], space)
    width = max(ty.bits // 8, 1)
    writers = [writer(ctx, op, ty) for op in vector_items(ins.operands[0])]
    if len(writers) != vec:
        raise UnsupportedInstruction(f"ld with {len(writers)} destinations for .v{vec}")
    if ty.bits == 128:
        raise UnsupportedInstruction("128-bit loads")
    step = np.uint64(width)
    strong, releases, acquires = ordering(ins.parts)

    def load(m, idx, addr):
        for k, w in enumerate(writers):
            raw = read_memory(m, idx, addr + step * np.uint64(k) if k else addr, width, space, strong)
            w(m, idx, raw.view(ty.dtype) if raw.dtype != ty.dtype else raw)

    def run(m, idx):
        addr = addr_r(m, idx)
        if m.launch.traffic is not None:
            count_traffic(m, idx, addr, width * vec, space, store=False)
        ordered(m, releases, acquires, lambda: load(m, idx, addr))
    return run


@handles("st")
def compile_st(ctx, ins):
    ty = type_of(ins.parts)
    space = space_of(ins.parts)
    addr_r, space = address_reader(ctx, ins.operands[0], space)
    width = max(ty.bits // 8, 1)
    readers = [reader(ctx, op, ty) for op in vector_items(ins.operands[1])]
    raw_t = RAW_DTYPES[width * 8]
    step = np.uint64(width)
    strong, releases, acquires = ordering(ins.parts)

    def store(m, idx, addr):
        for k, r in enumerate(readers):
            v = np.asarray(r(m, idx))
            v = v.view(raw_t) if v.dtype != raw_t else v
            write_memory(m, idx, addr + step * np.uint64(k) if k else addr, width, space, v, strong)

    def run(m, idx):
        addr = addr_r(m, idx)
        if m.launch.traffic is not None:
            count_traffic(m, idx, addr, width * len(readers), space, store=True)
        ordered(m, releases, acquires, lambda: store(m, idx, addr))
    return run


# ----------------------------------------------------------------------------- atomics
def atomic_update(op: str, ty: PtxType, old: np.ndarray, b, c) -> np.ndarray:
    """New memory values (of ty) for op applied to old values."""
    if op == "add":
        if ty.name in ("f16x2", "bf16x2"):
            edt = np.float16 if ty.name == "f16x2" else BF16
            o = np.ascontiguousarray(old).view(edt).reshape(-1, 2)
            v = np.ascontiguousarray(np.broadcast_to(b, old.shape)).view(edt).reshape(-1, 2)
            return (o.astype(np.float32) + v.astype(np.float32)).astype(edt).reshape(-1).view(ty.dtype)
        if ty.dtype in (np.dtype(np.float16), BF16):
            return (old.astype(np.float32) + np.asarray(b).astype(np.float32)).astype(ty.dtype)
        return np.add(old, b, dtype=ty.dtype)
    if op in ("min", "max"):
        return (np.minimum if op == "min" else np.maximum)(old, b).astype(ty.dtype)
    if op == "and":
        return old & b
    if op == "or":
        return old | b
    if op == "xor":
        return old ^ b
    if op == "exch":
        return np.broadcast_to(b, old.shape).astype(ty.dtype)
    if op == "cas":
        return np.where(old == b, c, old).astype(ty.dtype)
    if op == "inc":
        return np.where(old >= b, 0, old + 1).astype(ty.dtype)
    if op == "dec":
        return np.where((old == 0) | (old > b), b, old - 1).astype(ty.dtype)
    raise UnsupportedInstruction(f"atomic .{op}")


ATOM_OPS = ("add", "min", "max", "and", "or", "xor", "exch", "cas", "inc", "dec")


def atomic(m, idx, addr, space: str, ty: PtxType, op: str, b, c) -> np.ndarray:
    """Apply the atomic per thread, in thread order; returns the old values."""
    tids = thread_ids(m, idx)
    width = max(ty.bits // 8, 1)
    addr = np.broadcast_to(np.asarray(addr, np.uint64), tids.shape)
    if space == "generic":
        parts = generic_split(addr)
        if len(parts) != 1:
            raise UnsupportedInstruction("atomics mixing generic address windows")
        space, _, addr = parts[0]
    flat, offs = locate(m, tids, addr, width, space, strong=True)
    if space == "shared":                     # atomics are not races; in-flight bytes are
        m.asynchrony.check_write(offs, width, tids)
    weak = m.weak if space == "global" else None
    if weak is not None:
        weak.strong_before(offs, width)
    b = np.broadcast_to(np.asarray(b), tids.shape)
    c = np.broadcast_to(np.asarray(c), tids.shape) if c is not None else None
    order = np.argsort(offs, kind="stable")
    sorted_offs = offs[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_offs)) + 1]
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(offs)]))
    rank = np.empty(len(offs), np.int64)
    rank[order] = np.arange(len(offs)) - group_start
    old_all = np.zeros(len(tids), ty.dtype)
    raw_t = RAW_DTYPES[width * 8]
    for r in range(int(rank.max()) + 1 if len(rank) else 0):
        sel = np.flatnonzero(rank == r)
        old = gather(flat, offs[sel], width).view(ty.dtype)
        new = atomic_update(op, ty, old, b[sel], c[sel] if c is not None else None)
        scatter(flat, offs[sel], width, np.asarray(new, ty.dtype).view(raw_t))
        old_all[sel] = old
    if weak is not None:
        weak.strong_after(offs, width)
    return old_all


@handles("atom", "red")
def compile_atom(ctx, ins):
    ty = type_of(ins.parts)
    op = next(p for p in ins.parts[1:] if p in ATOM_OPS)
    space = space_of(ins.parts)
    has_dst = ins.parts[0] == "atom"
    ops = ins.operands
    addr_op = ops[1] if has_dst else ops[0]
    addr_r, space = address_reader(ctx, addr_op, space)
    first = 2 if has_dst else 1
    if vec_count(ins.parts) > 1:
        raise UnsupportedInstruction("vector atomics")
    b_r = reader(ctx, ops[first], ty)
    c_r = reader(ctx, ops[first + 1], ty) if op == "cas" else None
    write = writer(ctx, ops[0], ty) if has_dst else None
    _, releases, acquires = ordering(ins.parts)

    def apply(m, idx):
        return atomic(m, idx, addr_r(m, idx), space, ty, op, b_r(m, idx), c_r(m, idx) if c_r else None)

    def run(m, idx):
        old = ordered(m, releases, acquires, lambda: apply(m, idx))
        if write is not None:
            write(m, idx, old)
    return run


@handles("multimem")
def compile_multimem(ctx, ins):
    """multimem.ld_reduce / st / red with a multicast group of one GPU (the emulator runs one
    device, so a multicast address is ordinary global memory): a load-reduce reads the one
    copy (the reduction of one value is that value, also for ``.acc::f32``), a store
    writes it, a reduction applies the atomic operation to each element of the vector."""
    kind = ins.parts[1]
    vec = [p for p in ins.parts[2:] if p in ("v2", "v4", "v8")]
    ty_name = ins.parts[-1]
    if kind == "ld_reduce":
        return compile_ld(ctx, replace(ins, parts=["ld", "global", *vec, ty_name]))
    if kind == "st":
        return compile_st(ctx, replace(ins, parts=["st", "global", *vec, ty_name]))
    if kind != "red":
        raise UnsupportedInstruction(f"multimem.{kind}")
    ty = type_of(ins.parts)
    op = next(p for p in ins.parts[2:] if p in ATOM_OPS)
    addr_r, space = address_reader(ctx, ins.operands[0], "global")
    readers = [reader(ctx, item, ty) for item in vector_items(ins.operands[1])]
    step = np.uint64(max(ty.bits // 8, 1))

    def run(m, idx):
        addr = addr_r(m, idx)
        if m.launch.traffic is not None:
            count_traffic(m, idx, addr, int(step) * len(readers), space, store=True)
        for k, r in enumerate(readers):
            atomic(m, idx, addr + step * np.uint64(k) if k else addr, space, ty, op, r(m, idx), None)
    return run


@handles("isspacep")
def compile_isspacep(ctx, ins):
    space = next(SPACES[p] for p in ins.parts[1:] if p in SPACES)
    read = reader(ctx, ins.operands[1], U64)
    write = writer(ctx, ins.operands[0], ptx_type("pred"))
    base = {"shared": SHARED_GENERIC_BASE, "local": LOCAL_GENERIC_BASE}.get(space)

    def run(m, idx):
        a = np.asarray(read(m, idx), np.uint64)
        if base is None:
            hit = ~(((a >= np.uint64(SHARED_GENERIC_BASE)) & (a < np.uint64(SHARED_GENERIC_BASE + WINDOW_SIZE)))
                    | ((a >= np.uint64(LOCAL_GENERIC_BASE)) & (a < np.uint64(LOCAL_GENERIC_BASE + WINDOW_SIZE))))
        else:
            hit = (a >= np.uint64(base)) & (a < np.uint64(base + WINDOW_SIZE))
        write(m, idx, hit)
    return run


@handles("mapa")
def compile_mapa(ctx, ins):
    """mapa{.shared::cluster}.u32/u64 d, a, rank: the address of a's variable in CTA rank."""
    ty = type_of(ins.parts)
    read = reader(ctx, ins.operands[1], ty)
    rank_r = reader(ctx, ins.operands[2], ptx_type("u32"))
    write = writer(ctx, ins.operands[0], ty)
    generic = not any(p.startswith("shared") for p in ins.parts[1:])

    def run(m, idx):
        a = np.asarray(read(m, idx)).astype(np.uint64)
        if generic:
            a = a - np.uint64(SHARED_GENERIC_BASE)
        r = np.asarray(rank_r(m, idx)).astype(np.uint64)
        out = ((r + np.uint64(1)) << np.uint64(SHARED_RANK_SHIFT)) | (a & np.uint64(SHARED_OFFSET_MASK))
        if generic:
            out = out + np.uint64(SHARED_GENERIC_BASE)
        write(m, idx, out.astype(ty.dtype))
    return run
