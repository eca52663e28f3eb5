"""Asynchronous copies into shared memory (PTX ISA, "Data Movement and Conversion
Instructions: cp.async"): ``cp.async.ca/cg`` with their groups (``commit_group``,
``wait_group``, ``wait_all``), ``cp.async.mbarrier.arrive{.noinc}`` and the non-tensor
bulk copy ``cp.async.bulk.shared::{cta,cluster}.global.mbarrier::complete_tx::bytes``.

The source is read when the copy is issued; the destination bytes land only when a wait
covers them (``asynchrony``: reading or writing them earlier traps).  An mbarrier that
tracks copies (``cp.async.mbarrier.arrive``, a bulk copy's ``complete_tx``) gets its
arrival or transaction bytes when a thread next looks at it, and the copies land when the
phase completes.  ``copy_to_shared`` is that path for any asynchronous unit.
"""
from __future__ import annotations

import numpy as np

from ..machine import KernelTrap
from ..memory import SHARED_GENERIC_BASE, WINDOW_SIZE
from ..operands import reader
from ..parser import Imm
from ..ptxtypes import ptx_type
from ..registry import UnsupportedInstruction, handles
from . import bulk
from .mbarrier import MbarrierState, add_tx, mbarrier_slots, read_word, write_word
from .memory import address_reader, locate, read_memory, thread_ids

U32, PRED = ptx_type("u32"), ptx_type("pred")


def shared_offsets(m, idx, addr, width: int, space: str) -> np.ndarray:
    """Byte offsets of ``m.shared`` for shared (or generic shared) destination addresses."""
    addr = np.asarray(addr, np.uint64)
    if space == "generic":
        if not ((addr >= np.uint64(SHARED_GENERIC_BASE)) & (addr < np.uint64(SHARED_GENERIC_BASE + WINDOW_SIZE))).all():
            raise KernelTrap("memory", "cp.async destination outside shared memory")
        addr = addr - np.uint64(SHARED_GENERIC_BASE)
    return locate(m, idx, addr, width, "shared")[1]


def snapshot(m, threads):
    races = m.shared_races()
    return races.snapshot(threads) if races is not None else None


def compile_copy(ctx, ins):
    """cp.async.{ca,cg}.shared{::cta}.global{hints} [dst], [src], cp-size{, src-size |
    ignore-src}{, cache-policy}: ``src-size`` bytes are copied, the rest of the
    ``cp-size`` bytes are zeros (all of them when the ``ignore-src`` predicate is true)."""
    ops = ins.operands
    if not isinstance(ops[2], Imm) or int(ops[2].value) not in (4, 8, 16):
        raise UnsupportedInstruction("cp.async with a cp-size other than 4, 8 or 16")
    size = int(ops[2].value)
    if "cg" in ins.parts and size != 16:
        raise UnsupportedInstruction("cp.async.cg of other than 16 bytes")
    shared = any(p.startswith("shared") for p in ins.parts)
    dst_r, dst_space = address_reader(ctx, ops[0], "shared" if shared else "generic")
    src_r, src_space = address_reader(ctx, ops[1], "global")
    hinted = any(p.startswith("L2::cache_hint") for p in ins.parts)
    extra = ops[3:len(ops) - 1] if hinted else ops[3:]
    src_size = ignore = None
    if extra:
        name = getattr(extra[0], "name", "")
        is_pred = bool(name) and ctx.program.reg_bits[ctx.register(name)[0]] == 1
        src_size = None if is_pred else reader(ctx, extra[0], U32)
        ignore = reader(ctx, extra[0], PRED) if is_pred else None

    def run(m, idx):
        tids = thread_ids(m, idx)
        count = np.full(len(tids), size, np.int64)
        if src_size is not None:
            count = np.minimum(np.broadcast_to(np.asarray(src_size(m, idx)).astype(np.int64), count.shape), size)
        if ignore is not None:
            count = np.where(np.broadcast_to(np.asarray(ignore(m, idx)), count.shape), 0, count)
        src = np.broadcast_to(np.asarray(src_r(m, idx), np.uint64), tids.shape)
        if m.launch.traffic is not None:    # one request a warp: the sectors its copies read
            reads = count > 0                 # (a partial copy counted whole: a tile's edge)
            m.launch.traffic.record(tids[reads], src[reads], size, store=False)
        data = np.zeros((len(tids), size), np.uint8)
        whole = count == size
        if whole.any():
            flat, offs = locate(m, tids[whole], src[whole], size, src_space)
            data[whole] = flat[offs[:, None] + np.arange(size)]
        for k in range(size):
            live = (count > k) & ~whole
            if live.any():
                data[live, k] = read_memory(m, tids[live], src[live] + np.uint64(k), 1, src_space)
        dst = dst_r(m, idx)
        # the address, not the offset in m.shared: CTAs' windows lie there back to back
        if (np.asarray(dst, np.uint64) % np.uint64(size)).any():
            raise KernelTrap("memory", f"cp.async of {size} bytes to a misaligned shared address")
        offs = np.broadcast_to(shared_offsets(m, idx, dst, size, dst_space), tids.shape)
        m.asynchrony.defer((offs[:, None] + np.arange(size)).reshape(-1), data.reshape(-1),
                           np.repeat(tids, size), "cp.async",
                           seq=np.repeat(m.asynchrony.group_of("cp.async", tids), size),
                           clock=snapshot(m, tids))
    return run


def compile_group(ctx, ins):
    kind = ins.parts[2]
    if kind == "commit_group":
        return lambda m, idx: m.asynchrony.commit("cp.async", idx)
    if kind == "wait_all":
        def wait_all(m, idx):
            m.asynchrony.commit("cp.async", idx)
            m.asynchrony.complete_groups("cp.async", idx, 0)
        return wait_all
    keep = int(ins.operands[0].value)
    return lambda m, idx: m.asynchrony.complete_groups("cp.async", idx, keep)


def arrive_later(m, off: int, where: str, clock, count: int = 1, tx: int = 0, before=None) -> None:
    """Queue, on the mbarrier at ``off``, an asynchronous unit's ``count`` arrivals and
    ``tx`` completed transaction bytes (applied when a thread looks at the mbarrier;
    ``before(m, phase)`` first, with the phase they count towards)."""
    def apply(m):
        state = MbarrierState(read_word(m, off), where)
        if before is not None:
            before(m, int(state.phase))
        if tx:
            add_tx(state, 0, where)
            state.tx -= tx
        if count:
            if state.pending < count:
                raise KernelTrap("mbarrier", f"{where}: arrival with {state.pending} arrivals pending")
            state.pending -= count
        races = m.races
        if races is not None and clock is not None:
            races.mbarrier_release(off, clock[2].max(axis=0))
        if state.complete_if_done() and races is not None:
            races.mbarrier_complete(off)
        write_word(m, off, state.encode())
        m.release_mbarrier_waits()
    m.asynchrony.queue_mbarrier(off, apply)


def compile_mbarrier_arrive(ctx, ins):
    """cp.async.mbarrier.arrive{.noinc}.shared{::cta}.b64 [mbar]: the mbarrier tracks the
    thread's earlier cp.async copies: they land when the phase that their (asynchronous)
    arrival completes does.  Without ``.noinc`` the pending count is raised by one first,
    so the arrival is net zero."""
    slots = mbarrier_slots(ctx, ins.operands[0], ins.parts)
    noinc = "noinc" in ins.parts
    where = f"PTX line {ins.line} ({ins.opcode})"

    def run(m, idx):
        tids = thread_ids(m, idx)
        offs = slots(m, idx)
        for t, off in zip(tids.tolist(), offs.tolist()):
            if not noinc:
                state = MbarrierState(read_word(m, off), where)
                state.pending += 1
                write_word(m, off, state.encode())

            def track(m, phase, t=t, off=off):
                m.asynchrony.attach("cp.async", t, off, phase)
            arrive_later(m, off, where, snapshot(m, [t]), before=track)
    return run


def copy_to_shared(m, thread: int, offs: np.ndarray, data: np.ndarray, mbarrier: int, where: str) -> None:
    """An asynchronous unit (bulk copy, TMA) issued by ``thread`` writes ``data`` (uint8)
    at byte ``offs`` of m.shared and completes ``len(data)`` transaction bytes on the
    mbarrier at ``mbarrier``: the bytes land when that phase completes."""
    clock = snapshot(m, [thread])
    record = m.asynchrony.defer(offs, data, thread, "bulk", mbarrier=mbarrier, clock=clock)

    def attach(m, phase):
        record.parity[:] = phase
    arrive_later(m, mbarrier, where, clock, count=0, tx=len(data), before=attach)


def compile_bulk(ctx, ins):
    """cp.async.bulk.shared::{cta,cluster}.global.mbarrier::complete_tx::bytes [dst], [src],
    size, [mbar]: ``size`` bytes (a multiple of 16), for each issuing thread."""
    if "global" not in ins.parts or not any(p.startswith("shared") for p in ins.parts[3:4]) or \
            "mbarrier::complete_tx::bytes" not in ins.parts or "multicast::cluster" in ins.parts:
        raise UnsupportedInstruction(".".join(ins.parts))
    ops = ins.operands
    dst_r, _ = address_reader(ctx, ops[0], "shared")
    src_r, _ = address_reader(ctx, ops[1], "global")
    size_r = reader(ctx, ops[2], U32)
    slots = mbarrier_slots(ctx, ops[3], ["mbarrier", "shared"])
    where = f"PTX line {ins.line} ({ins.opcode})"

    def run(m, idx):
        tids = thread_ids(m, idx)
        dst = np.broadcast_to(np.asarray(dst_r(m, idx), np.uint64), tids.shape)
        src = np.broadcast_to(np.asarray(src_r(m, idx), np.uint64), tids.shape)
        sizes = np.broadcast_to(np.asarray(size_r(m, idx)).astype(np.int64), tids.shape)
        bars = slots(m, idx)
        for k, t in enumerate(tids.tolist()):
            n = int(sizes[k])
            if n % 16:
                raise KernelTrap("memory", f"{where}: bulk copy of {n} bytes (a multiple of 16)")
            one = np.array([t])
            flat, start = locate(m, one, src[k:k + 1], n, "global")
            data = flat[int(start[0]):int(start[0]) + n].copy()
            offs = shared_offsets(m, one, dst[k:k + 1], 1, "shared")[0] + np.arange(n)
            copy_to_shared(m, t, offs, data, int(bars[k]), where)
    return run


@handles("cp")
def compile_cp(ctx, ins):
    parts = ins.parts
    if bulk.is_bulk_group_or_tensor(parts):
        return bulk.compile_bulk_cp(ctx, ins)
    if parts[1] != "async":
        raise UnsupportedInstruction(".".join(parts))
    kind = parts[2]
    if kind in ("ca", "cg"):
        return compile_copy(ctx, ins)
    if kind in ("commit_group", "wait_group", "wait_all"):
        return compile_group(ctx, ins)
    if kind == "mbarrier":
        return compile_mbarrier_arrive(ctx, ins)
    if kind == "bulk" and parts[3].startswith("shared"):
        return compile_bulk(ctx, ins)
    raise UnsupportedInstruction(".".join(parts))
