"""mbarrier: arrive-wait barriers in shared memory (PTX ISA, "Parallel Synchronization and
Communication Instructions: mbarrier").

An mbarrier object is 8 bytes of shared memory whose contents the ISA leaves opaque.  It
holds the parity of the current phase, the pending arrival count of that phase, the
expected arrival count of every phase and the tx-count (bytes of asynchronous transfers
still expected).  The current phase completes when the pending arrival count and the
tx-count are both zero; the phase bit then flips, the pending count is reloaded with the
expected count and the tx-count restarts at zero.  Here the object is encoded as

    bits  0-19 pending arrival count   bits 40-60 tx-count (21-bit two's complement)
    bits 20-39 expected arrival count  bit 62 initialised, bit 63 phase parity

so that ``mbarrier.init`` over it, ``mbarrier.inval`` and plain stores behave as on the
GPU, and an operation on memory that holds no initialised mbarrier (a forgotten ``init``,
a wrong address, a wait after ``inval``) traps instead of passing silently.

``mbarrier.inval`` ends an object's life; on memory that holds none it does nothing.  The
ISA leaves every operation but ``init`` on such memory undefined, ``inval`` included, but
NVIDIA's tileiras relies on this one: its Hopper producers run ``inval`` with the whole warp
before the elected thread re-initialises a one-shot barrier, so the first ``inval`` meets
memory never initialised and the warp's later threads one already invalidated.  What stays
a trap is ending (``inval``) or restarting (``init``) an object still in use: threads
suspended on it, or asynchronous arrivals and transfers (``complete_tx`` of bulk copies,
``cp.async.mbarrier.arrive``) not yet applied to it, or a tx-count still owed.  The state token that ``arrive``
returns carries the parity of the phase the arrival counted towards (bit 63) and the
pending count that arrival left (bits 0-19, read back by ``mbarrier.pending_count``).

Threads of one instruction that name the same mbarrier act one after another in thread
order, so arrivals past the completing one count towards the next phase.  Misuse the ISA
calls undefined (counts out of range, an arrival past zero, a ``.noComplete`` arrival
that completes the phase) traps with kind ``mbarrier``.  ``mbarrier.try_wait`` suspends the
thread while the phase is incomplete (see ``machine``); its suspend-time hint is ignored.
Memory-ordering qualifiers (``.release``, ``.acquire``, ``.relaxed``, scopes) need nothing:
the emulator's memory is sequentially consistent.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..machine import KernelTrap
from ..memory import SHARED_GENERIC_BASE, WINDOW_SIZE, gather
from ..operands import reader, writer
from ..program import guard_mask
from ..ptxtypes import ptx_type
from ..registry import UnsupportedInstruction, handles
from .control import taken_split
from .memory import address_reader, locate, space_of, thread_ids

U32 = ptx_type("u32")
U64 = ptx_type("u64")
PRED = ptx_type("pred")
COUNT_MASK = (1 << 20) - 1
MAX_COUNT = COUNT_MASK                # arrival counts and tx-counts: at most 2^20 - 1
EXPECTED_SHIFT, TX_SHIFT, TX_BITS = 20, 40, 21
INITIALISED, PHASE_SHIFT = 1 << 62, 63


class MbarrierState:
    """One mbarrier object, decoded."""

    __slots__ = ("pending", "expected", "tx", "phase")

    def __init__(self, word: int, where: str):
        if not word & INITIALISED:
            raise KernelTrap("mbarrier", f"{where}: no initialised mbarrier at this address "
                                         f"(mbarrier.init missing, or after mbarrier.inval)")
        self.pending = word & COUNT_MASK
        self.expected = (word >> EXPECTED_SHIFT) & COUNT_MASK
        tx = (word >> TX_SHIFT) & ((1 << TX_BITS) - 1)
        self.tx = tx - (1 << TX_BITS) if tx >> (TX_BITS - 1) else tx
        self.phase = word >> PHASE_SHIFT

    def encode(self) -> int:
        return (self.pending | self.expected << EXPECTED_SHIFT
                | (self.tx % (1 << TX_BITS)) << TX_SHIFT | INITIALISED | self.phase << PHASE_SHIFT)

    def complete_if_done(self) -> bool:
        """Complete the current phase if nothing is pending; True if it did."""
        if self.pending or self.tx:
            return False
        self.phase ^= 1
        self.pending = self.expected
        return True


def initialised(count: int, where: str) -> int:
    if not 1 <= count <= MAX_COUNT:
        raise KernelTrap("mbarrier", f"{where}: mbarrier.init count {count} outside 1..{MAX_COUNT}")
    state = MbarrierState(INITIALISED, where)
    state.pending = state.expected = count
    return state.encode()


# ----------------------------------------------------------------------------- addressing
def mbarrier_slots(ctx, op, parts: list[str]) -> Callable:
    """``(m, idx) -> byte offsets into m.shared`` of the mbarrier operand, 8-byte aligned.
    Generic addresses must point into the shared window."""
    addr_r, space = address_reader(ctx, op, space_of(parts))
    if space not in ("shared", "generic"):
        raise UnsupportedInstruction(f"mbarrier in the {space} state space")

    def slots(m, idx):
        tids = thread_ids(m, idx)
        addr = np.broadcast_to(np.asarray(addr_r(m, idx), np.uint64), tids.shape)
        if space == "generic":
            inside = (addr >= np.uint64(SHARED_GENERIC_BASE)) & (addr < np.uint64(SHARED_GENERIC_BASE + WINDOW_SIZE))
            if not inside.all():
                raise KernelTrap("mbarrier", f"mbarrier at generic address {int(addr[~inside][0]):#x}, "
                                             f"outside shared memory")
            addr = addr - np.uint64(SHARED_GENERIC_BASE)
        _, offs = locate(m, tids, addr, 8, "shared")
        misaligned = offs % m.smem_size % 8 != 0       # within its CTA's window
        if misaligned.any():
            raise KernelTrap("mbarrier", f"mbarrier at shared offset {int(offs[misaligned][0] % m.smem_size):#x} "
                                         f"is not 8-byte aligned")
        return offs
    return slots


def read_word(m, off: int) -> int:
    return int(m.shared[off:off + 8].view(np.uint64)[0])


def write_word(m, off: int, word: int) -> None:
    m.shared[off:off + 8] = np.frombuffer(word.to_bytes(8, "little"), np.uint8)


def per_thread(values, n: int) -> list[int]:
    return [int(v) for v in np.broadcast_to(np.asarray(values).astype(np.int64), (n,))]


def phases(m, offs: np.ndarray, where: str) -> np.ndarray:
    """Current phase parity of the mbarriers at ``offs`` (vectorised: waits spin on it)."""
    words = gather(m.shared, offs, 8)
    if not (words & np.uint64(INITIALISED)).all():
        MbarrierState(0, where)                      # raises
    return words >> np.uint64(PHASE_SHIFT)


# ----------------------------------------------------------------------------- instructions
@handles("mbarrier", control=True)
def compile_mbarrier(ctx, ins):
    """A control handler, for ``try_wait`` suspends threads at it; the others advance."""
    kind = ins.parts[1]
    where = f"PTX line {ins.line} ({ins.opcode})"
    if kind == "try_wait":
        return compile_try_wait(ctx, ins, where)
    compile_kind = {"init": compile_init, "inval": compile_inval, "arrive": compile_arrive,
                    "arrive_drop": compile_arrive, "expect_tx": compile_tx, "complete_tx": compile_tx,
                    "test_wait": compile_test_wait,
                    "pending_count": compile_pending_count}.get(kind)
    if compile_kind is None:
        raise UnsupportedInstruction(f"mbarrier.{kind}")
    return advancing(ctx, ins, compile_kind(ctx, ins, where))


def advancing(ctx, ins, fn: Callable) -> Callable:
    """``fn`` for the threads whose guard holds, then every thread to the next instruction."""
    gm = guard_mask(ctx, ins.guard)

    def run(m, idx):
        taken, _ = taken_split(m, idx, gm(m, idx))
        if taken.size:
            fn(m, taken)
        m.pc[idx] += 1
    return run


def updater(ctx, ins, where: str, slot_op, update: Callable, operand_ops: list, token_op=None,
            releases: bool = True) -> Callable:
    """An instruction that changes mbarriers: ``update(state, *operands) -> token`` runs per
    thread in thread order on the decoded object, which is then stored back; waiting
    threads whose phase completed wake up.  ``releases``: the thread's earlier accesses
    happen before what waits for the phase (the race detector's clocks)."""
    slots = mbarrier_slots(ctx, slot_op, ins.parts)
    operands = [reader(ctx, op, U32) for op in operand_ops]
    write = writer(ctx, token_op, U64)

    def run(m, idx):
        offs = slots(m, idx)
        n = len(offs)
        args = [per_thread(r(m, idx), n) for r in operands]
        tokens = np.zeros(n, np.uint64)
        races = m.races
        tids = thread_ids(m, idx)
        for k, off in enumerate(offs.tolist()):
            state = MbarrierState(read_word(m, off), where)
            phase = state.phase
            if races is not None and releases:
                races.mbarrier_arrive(off, int(tids[k]))
            tokens[k] = update(state, *(a[k] for a in args))
            if races is not None and state.phase != phase:
                races.mbarrier_complete(off)
            write_word(m, off, state.encode())
        write(m, idx, tokens)
        m.release_mbarrier_waits()
    return run


def compile_init(ctx, ins, where):
    """mbarrier.init.shared.b64 [addr], count: phase 0, count pending and expected, tx 0.
    Restarting an object still in use (``still_in_use``) traps."""
    slots = mbarrier_slots(ctx, ins.operands[0], ins.parts)
    count_r = reader(ctx, ins.operands[1], U32)

    def run(m, idx):
        offs = slots(m, idx)
        for off, count in zip(offs.tolist(), per_thread(count_r(m, idx), len(offs))):
            refuse_if_in_use(m, off, where, "mbarrier.init")
            write_word(m, off, initialised(count, where))
        m.release_mbarrier_waits()
    return run


def compile_inval(ctx, ins, where):
    """mbarrier.inval: the memory is no longer an mbarrier (using it again needs init).  On
    memory that holds no mbarrier it does nothing (the module docstring says why); ending an
    object still in use traps."""
    slots = mbarrier_slots(ctx, ins.operands[0], ins.parts)

    def run(m, idx):
        for off in slots(m, idx).tolist():
            if read_word(m, off) & INITIALISED:
                refuse_if_in_use(m, off, where, "mbarrier.inval")
                write_word(m, off, 0)
    return run


def refuse_if_in_use(m, off: int, where: str, verb: str) -> None:
    """Trap if the mbarrier at ``off`` is still in use (``still_in_use``)."""
    why = still_in_use(m, off)
    if why:
        raise KernelTrap("mbarrier", f"{where}: {verb} on an mbarrier still in use: {why}")


def still_in_use(m, off: int) -> str:
    """Why the object at shared byte ``off`` may not end or restart yet ('' when it may):
    threads suspended in ``try_wait`` on it, asynchronous operations that will still arrive
    on it or complete transactions on it, or a tx-count that ``expect_tx`` raised and no
    transfer has paid back."""
    waiters = m.mbarrier_waiters()
    if waiters.size and (m.mbar_offset[waiters] == off).any():
        return f"{int((m.mbar_offset[waiters] == off).sum())} threads wait on it"
    if m.asynchrony.tracks_mbarrier(off):
        return "asynchronous operations have not yet arrived on it"
    word = read_word(m, off)
    if word & INITIALISED and MbarrierState(word, "").tx:
        return f"tx-count {MbarrierState(word, '').tx} outstanding"
    return ""


def compile_arrive(ctx, ins, where):
    """mbarrier.arrive{_drop}{.noComplete}{.expect_tx}... state, [addr]{, count | txCount}.

    ``.expect_tx`` first raises the tx-count by its operand, then arrives once.  An arrival
    lowers the pending count by ``count`` (1 when absent); ``arrive_drop`` also lowers the
    expected count of the phases after this one.  The token names the phase arrived at."""
    mods = set(ins.parts[2:])
    drop = ins.parts[1] == "arrive_drop"
    no_complete = "noComplete" in mods
    expect_tx = "expect_tx" in mods
    ops = ins.operands
    if len(ops) > 3:
        raise UnsupportedInstruction("mbarrier arrive with more than one count operand")
    extra = ops[2:]

    def arrive(state: MbarrierState, operand: int = 1) -> int:
        count, tx = (1, operand) if expect_tx else (operand, 0)
        if not 1 <= count <= MAX_COUNT or count > state.pending:
            raise KernelTrap("mbarrier", f"{where}: arrival count {count} with {state.pending} "
                                         f"arrivals pending")
        if expect_tx:
            add_tx(state, tx, where)
        phase = state.phase
        state.pending -= count
        if drop:
            state.expected -= count
        left = state.pending
        if state.complete_if_done() and no_complete:
            raise KernelTrap("mbarrier", f"{where}: a .noComplete arrival completed the phase")
        return phase << PHASE_SHIFT | left
    return updater(ctx, ins, where, ops[1], arrive, extra, token_op=ops[0])


def add_tx(state: MbarrierState, tx: int, where: str) -> None:
    if not 0 <= tx <= MAX_COUNT or abs(state.tx + tx) > MAX_COUNT:
        raise KernelTrap("mbarrier", f"{where}: tx-count {state.tx} + {tx} out of range")
    state.tx += tx


def compile_tx(ctx, ins, where):
    """mbarrier.expect_tx [addr], txCount raises the tx-count; complete_tx lowers it (what
    an asynchronous copy does as its bytes land) and can complete the phase."""
    sign = 1 if ins.parts[1] == "expect_tx" else -1

    def change(state: MbarrierState, tx: int) -> int:
        add_tx(state, 0, where)
        if not 0 <= tx <= MAX_COUNT or abs(state.tx + sign * tx) > MAX_COUNT:
            raise KernelTrap("mbarrier", f"{where}: tx-count {state.tx} {'+-'[sign < 0]} {tx} out of range")
        state.tx += sign * tx
        if sign < 0:
            state.complete_if_done()
        return 0
    return updater(ctx, ins, where, ins.operands[0], change, ins.operands[1:2], releases=sign < 0)


def wait_operands(ctx, ins, where):
    """(mbarrier slots, reader of the parity whose phase is waited for, result writer)."""
    slots = mbarrier_slots(ctx, ins.operands[1], ins.parts)
    if "parity" in ins.parts:
        parity_r = reader(ctx, ins.operands[2], U32)

        def parity(m, idx):
            return np.asarray(parity_r(m, idx)).astype(np.uint64) & np.uint64(1)
    else:
        state_r = reader(ctx, ins.operands[2], U64)

        def parity(m, idx):
            return np.asarray(state_r(m, idx)).astype(np.uint64) >> np.uint64(PHASE_SHIFT)
    return slots, parity, writer(ctx, ins.operands[0], PRED)


def compile_test_wait(ctx, ins, where):
    """mbarrier.test_wait{.parity} p, [addr], state | parity: p = that phase has completed
    (the mbarrier's current parity differs from it).  Never blocks."""
    slots, parity, write = wait_operands(ctx, ins, where)

    def run(m, idx):
        offs = slots(m, idx)
        m.asynchrony.settle(offs)
        done = np.broadcast_to(phases(m, offs, where) != parity(m, idx), offs.shape)
        acquire(m, offs[done], thread_ids(m, idx)[done])
        write(m, idx, done)
    return run


def acquire(m, offs: np.ndarray, tids: np.ndarray) -> None:
    """Threads ``tids`` saw the phases they wait for complete (the race detector's clocks)."""
    if m.races is not None and tids.size:
        m.races.mbarrier_acquire(offs, tids)


def compile_try_wait(ctx, ins, where):
    """mbarrier.try_wait{.parity} p, [addr], state | parity{, suspendTimeHint}: as test_wait,
    but a thread whose phase is incomplete is suspended until it completes (or, when
    nothing else can run, times out and gets false).  See ``machine``."""
    slots, parity, write = wait_operands(ctx, ins, where)
    gm = guard_mask(ctx, ins.guard)

    def run(m, idx):
        taken, rest = taken_split(m, idx, gm(m, idx))
        m.pc[rest] += 1
        if not taken.size:
            return
        offs = slots(m, taken)
        m.asynchrony.settle(offs)
        want = np.broadcast_to(parity(m, taken), taken.shape)
        done = phases(m, offs, where) != want
        acquire(m, offs[done], taken[done])
        finish = done | m.take_timeouts(taken)
        write(m, taken[finish], done[finish])
        m.pc[taken[finish]] += 1
        m.mbarrier_wait(taken[~finish], offs[~finish], want[~finish])
    return run


def compile_pending_count(ctx, ins, where):
    """mbarrier.pending_count.b64 count, state: the pending count a (``.noComplete``)
    arrival left, from its token."""
    state_r = reader(ctx, ins.operands[1], U64)
    write = writer(ctx, ins.operands[0], U32)
    return lambda m, idx: write(m, idx, (np.asarray(state_r(m, idx)) & np.uint64(COUNT_MASK)).astype(np.uint32))
