"""Asynchronous operations, modelled adversarially: results appear as late as the PTX ISA
allows, and touching them earlier is an error (``AsyncHazard``, a trap of kind ``async``)
that names the instruction (PTX line and text) and a thread.

Four kinds of state are pending:

* **Shared-memory writes** (``defer``): the bytes of an asynchronous copy (``cp.async``,
  ``cp.async.bulk``) land only when the wait that covers them completes: a thread's
  ``cp.async.wait_group N``/``wait_all`` (``complete_groups``), or the completion of an
  mbarrier phase (``attach``).  Until then reading *or* writing those bytes is an error.
  ``protect`` marks bytes that an asynchronous unit still reads (the shared-memory
  operands of ``wgmma.mma_async`` until its ``wait_group``, of ``tcgen05.mma`` until its
  commit's phase); writing them is an error.
* **Tensor memory** (``defer_tmem``): the D cells of ``tcgen05.mma`` until its commit's
  mbarrier phase completes, the cells of ``tcgen05.st`` until ``wait::st``, the cells
  ``tcgen05.ld`` reads until ``wait::ld`` (the ld's registers are not kept: NVIDIA's own
  PTX packs them with ``mov`` before the wait, so ptxas orders those).
* **Registers** (``lock_registers``): the accumulators and A registers of an in-flight
  ``wgmma.mma_async``.  Any other instruction that names them before the covering
  ``wgmma.wait_group`` is an error, except a ``mov`` that copies them, whose destination
  is in flight in turn (``guard_registers`` wraps exactly the instructions that can name
  such registers, so other code pays nothing).  A warpgroup's first ``wgmma.mma_async``
  needs a ``wgmma.fence`` before it.
* **mbarrier operations of asynchronous units** (``queue_mbarrier``): the ``complete_tx``
  of a bulk copy, the arrive of ``tcgen05.commit`` and of ``cp.async.mbarrier.arrive``
  are applied only when a thread looks at that mbarrier (``try_wait``/``test_wait``,
  ``settle``) or already waits on it; so a thread that reads a copy's destination without
  waiting finds it pending even when the phase could have completed.

Groups: each thread numbers its operations of a family (``cp.async``, ``wgmma``) by the
count of its ``commit_group``s so far; a ``wait_group N`` completes those whose number is
below that count minus ``N`` (``tcgen05.wait::ld/st``: all of the family).

The API is generic so that other asynchronous units (TMA, ``cp.async.bulk.tensor``) use
it as they are added: ``defer(region, data, owner, family, seq, mbarrier)`` with
``region`` byte offsets of ``m.shared`` (``ops/cpasync.copy_to_shared`` for a copy that
completes transaction bytes on an mbarrier); every shared access calls
``check_read``/``check_write``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from .machine import KernelTrap
from .memory import gather


class AsyncHazard(KernelTrap):
    def __init__(self, message: str):
        super().__init__("async", message)


@dataclass
class Pending:
    """One asynchronous operation's bytes of shared memory, with per byte: the issuing
    thread, its group number (-1: none) and the mbarrier offset and phase parity whose
    completion lands it (-1: none, or parity not yet known)."""
    family: str                        # cp.async, bulk, wgmma, ...
    region: np.ndarray                 # byte offsets of m.shared
    data: Optional[np.ndarray]         # uint8 per byte; None: an in-flight read (protect)
    owner: np.ndarray
    seq: np.ndarray
    mbar: np.ndarray
    parity: np.ndarray
    pc: int                            # the issuing instruction
    clock: Optional[tuple] = None      # race detector: Races.snapshot of the issuers
    space: str = "shared"              # or "tmem": region indexes m.tmem (written already)
    #: more mbarrier phases that land bytes already tracked by one (a later
    #: ``tcgen05.commit`` tracks every earlier MMA of the thread, as the first did): per
    #: entry, (bytes, mbarrier offset, parity); the first of them to complete lands them
    also: list = field(default_factory=list)

    def select(self, keep: np.ndarray) -> "Pending":
        return Pending(self.family, self.region[keep], None if self.data is None else self.data[keep],
                       self.owner[keep], self.seq[keep], self.mbar[keep], self.parity[keep],
                       self.pc, self.clock, self.space,
                       [(sel[keep], mbar, parity) for sel, mbar, parity in self.also if sel[keep].any()])


def describe(m, pc: int, thread: int) -> str:
    return f"PTX line {m.prog.instructions[pc].line} ({render(m.prog.instructions[pc])}), " \
           f"{m.launch.describe_thread(m, int(thread))}"


def render(ins) -> str:
    """The instruction as PTX text (operands as parsed), for messages."""
    text = ins.opcode + (" " + ", ".join(render_operand(op) for op in ins.operands) if ins.operands else "")
    guard = f"@{'!' if ins.guard.negate else ''}{ins.guard.name} " if ins.guard is not None else ""
    return guard + text + ";"


def render_operand(op) -> str:
    from .parser import Addr, ArgList, Imm, Pair, Reg, Sym, Vec
    if isinstance(op, Reg):
        return ("!" if op.negate else "") + op.name
    if isinstance(op, Imm):
        return op.literal or str(op.value)
    if isinstance(op, Sym):
        return op.name + (f"+{op.offset}" if op.offset else "")
    if isinstance(op, Addr):
        base = render_operand(op.base) if op.base is not None else ""
        offset = f"+{op.offset}" if op.offset and base else (str(op.offset) if not base else "")
        return f"[{base}{offset}]"
    if isinstance(op, (Vec, ArgList)):
        items = ", ".join("_" if item is None else render_operand(item) for item in op.items)
        return "{" + items + "}" if isinstance(op, Vec) else f"({items})"
    if isinstance(op, Pair):
        return "|".join(render_operand(x) for x in (op.first, op.second) if x is not None)
    return str(op)


class Asynchrony:
    """The pending asynchronous state of one batch (``Batch.asynchrony``)."""

    def __init__(self, m):
        self.m = m
        self.pending: list[Pending] = []
        self.blocked: Optional[np.ndarray] = None     # pending writes per shared byte
        self.reading: Optional[np.ndarray] = None     # in-flight reads per shared byte
        self.groups: dict[str, np.ndarray] = {}       # family -> commits per thread
        self.locks: dict[int, tuple] = {}             # slot -> (family, seq[n], pc[n])
        self.dirty: dict[int, np.ndarray] = {}        # wgmma slot -> pc of last touch (-1 clean)
        self.queued: dict[int, list] = {}             # mbarrier offset -> [apply(m)]
        self.tmem_blocked: Optional[np.ndarray] = None   # in-flight writes per tensor-memory cell
        for slot in getattr(m.prog, "fenced_registers", ()):
            self.dirty[slot] = np.full(m.n, -2, np.int64)       # -2: no wgmma.fence yet

    # -- groups
    def group_of(self, family: str, idx) -> np.ndarray:
        g = self.groups.get(family)
        if g is None:
            g = self.groups[family] = np.zeros(self.m.n, np.int64)
        return g[idx]

    def commit(self, family: str, idx) -> None:
        self.group_of(family, idx)
        self.groups[family][idx] += 1

    def complete_groups(self, family: str, idx, keep: int) -> None:
        """Threads ``idx`` wait until at most ``keep`` of their committed groups of
        ``family`` are in flight (``keep`` < 0: every operation, committed or not)."""
        limit = np.full(self.m.n, -1, np.int64)
        limit[idx] = self.group_of(family, idx) - keep if keep >= 0 else np.iinfo(np.int64).max
        self.land(lambda p: (p.seq >= 0) & (p.seq < limit[p.owner]) if p.family == family else False)
        for slot, (fam, seq, _) in list(self.locks.items()):
            if fam == family:
                seq[(seq >= 0) & (seq < limit)] = -1

    # -- shared memory
    def defer(self, region: np.ndarray, data: Optional[np.ndarray], owner, family: str,
              seq=None, mbarrier: int = -1, clock: Optional[tuple] = None) -> Pending:
        """``data`` (uint8 per byte) lands at byte ``region`` of ``m.shared`` when its
        thread's wait of ``family`` covers its group ``seq``, or when the mbarrier at
        ``mbarrier`` completes the phase given later by ``attach`` (``data`` None: the
        bytes are being read until then)."""
        m = self.m
        region = np.asarray(region, np.int64).reshape(-1)
        owner = np.broadcast_to(np.asarray(owner, np.int64), region.shape).copy()
        if region.size and data is not None:      # in-flight reads may overlap each other
            self.check_write_bytes(region, owner, m.at)
        seq = np.full(region.size, -1, np.int64) if seq is None else \
            np.broadcast_to(np.asarray(seq, np.int64), region.shape).copy()
        p = Pending(family, region, data, owner, seq, np.full(region.size, mbarrier, np.int64),
                    np.full(region.size, -1, np.int64), m.at, clock)
        if region.size:
            self.pending.append(p)
            np.add.at(self.counts("blocked" if data is not None else "reading"), region, 1)
        return p

    def protect(self, region: np.ndarray, owner, family: str, seq=None) -> Pending:
        return self.defer(region, None, owner, family, seq)

    def attach(self, family: str, thread: int, mbarrier: int, parity: int, cta: int = -1) -> None:
        """The operations of ``family`` that ``thread`` (or, ``thread`` < 0, any thread of
        CTA ``cta``) issued and no mbarrier tracks yet land when the mbarrier completes its
        phase of ``parity``."""
        for p in self.pending:
            if p.family == family:
                mine = (self.m.cta_of[p.owner] == cta) if thread < 0 else (p.owner == thread)
                sel = mine & (p.mbar < 0)
                p.mbar[sel] = mbarrier
                p.parity[sel] = parity
                tracked = mine & (p.mbar >= 0) & ~sel
                if tracked.any() and not (p.mbar[tracked] == mbarrier).all():
                    p.also.append((tracked, mbarrier, parity))

    def counts(self, name: str) -> np.ndarray:
        arr = getattr(self, name)
        if arr is None:
            arr = np.zeros(self.m.shared.size, np.int16)
            setattr(self, name, arr)
        return arr

    def land(self, select: Callable) -> None:
        """Complete the bytes of every pending operation where ``select(p)`` (a bool per
        byte) holds: writes land (and are seen by the race detector), reads end."""
        keep = []
        for p in self.pending:
            done = np.broadcast_to(np.asarray(select(p), bool), p.region.shape)
            if not done.any():
                keep.append(p)
                continue
            region = p.region[done]
            if p.space == "tmem":
                np.add.at(self.tmem_blocked, region, -1)
            elif p.data is not None:
                np.add.at(self.blocked, region, -1)
                self.m.shared[region] = p.data[done]
                if self.m.races is not None and p.clock is not None:
                    self.m.races.async_write(region, p.owner[done], p.clock, p.pc, generic=p.family == "cp.async")
            else:
                np.add.at(self.reading, region, -1)
            if not done.all():
                keep.append(p.select(~done))
        self.pending = keep

    # -- tensor memory
    def defer_tmem(self, cells: np.ndarray, owner, family: str, seq=None) -> Pending:
        """Cells (flat indices of ``m.tmem``) an asynchronous tcgen05 operation writes:
        not to be read or written until its wait or its commit's mbarrier phase."""
        cells = np.asarray(cells, np.int64).reshape(-1)
        p = Pending(family, cells, None, np.broadcast_to(np.asarray(owner, np.int64), cells.shape).copy(),
                    np.full(cells.size, -1, np.int64) if seq is None else
                    np.broadcast_to(np.asarray(seq, np.int64), cells.shape).copy(),
                    np.full(cells.size, -1, np.int64), np.full(cells.size, -1, np.int64), self.m.at,
                    space="tmem")
        if cells.size:
            if self.tmem_blocked is None:
                self.tmem_blocked = np.zeros(self.m.tmem.size, np.int16)
            self.pending.append(p)
            np.add.at(self.tmem_blocked, cells, 1)
        return p

    def check_tmem(self, cells: np.ndarray, threads: np.ndarray, verb: str, families: tuple) -> None:
        if self.tmem_blocked is None or not self.pending:
            return
        cells = np.asarray(cells, np.int64).reshape(-1)
        hit = self.tmem_blocked[cells] > 0
        if not hit.any():
            return
        bad = cells[hit]
        for p in self.pending:
            if p.space == "tmem" and p.family in families and np.isin(p.region, bad).any():
                wait = {"tcgen05.mma": "the mbarrier phase of its tcgen05.commit",
                        "tcgen05.st": "tcgen05.wait::st", "tcgen05.ld": "tcgen05.wait::ld"}[p.family]
                lane, col = divmod(int(bad[0]) % (128 * 512), 512)
                used = "read" if p.family == "tcgen05.ld" else "written"
                raise AsyncHazard(f"{describe(self.m, self.m.at, threads.reshape(-1)[0])} {verb} tensor "
                                  f"memory lane {lane}, column {col}, {used} by the asynchronous "
                                  f"{describe(self.m, p.pc, p.owner[0])}, before {wait}")

    def mbarrier_changed(self) -> None:
        """Land what waits for an mbarrier phase that has completed."""
        if not any((p.mbar >= 0).any() or p.also for p in self.pending):
            return
        shared = self.m.shared

        def completed(p: Pending):
            tracked = (p.mbar >= 0) & (p.parity >= 0)
            if not tracked.any():
                return False
            phase = (gather(shared, np.where(tracked, p.mbar, 0), 8) >> np.uint64(63)).astype(np.int64)
            done = tracked & (phase != p.parity)
            for sel, mbar, parity in p.also:
                if parity >= 0 and int(gather(shared, np.array([mbar]), 8)[0] >> np.uint64(63)) != parity:
                    done = done | sel
            return done
        self.land(completed)

    def first_pending(self, byte_set: np.ndarray, reads: bool) -> Pending:
        for p in self.pending:
            if p.space == "shared" and (p.data is not None or not reads) and np.isin(p.region, byte_set).any():
                return p
        raise AssertionError("pending byte without a pending operation")

    def check_read(self, offs: np.ndarray, width: int, idx) -> None:
        if self.blocked is None or not self.pending:
            return
        nbytes = (offs[:, None] + np.arange(width)).reshape(-1)
        hit = self.blocked[nbytes] > 0
        if hit.any():
            self.hazard(nbytes[hit], np.repeat(thread_array(self.m, idx, offs), width)[hit], "reads")

    def check_write(self, offs: np.ndarray, width: int, idx) -> None:
        if not self.pending:
            return
        nbytes = (offs[:, None] + np.arange(width)).reshape(-1)
        self.check_write_bytes(nbytes, np.repeat(thread_array(self.m, idx, offs), width), self.m.at)

    def check_write_bytes(self, nbytes: np.ndarray, threads: np.ndarray, pc: int) -> None:
        for name, verb in (("blocked", "writes"), ("reading", "overwrites")):
            arr = getattr(self, name)
            if arr is not None and self.pending:
                hit = arr[nbytes] > 0
                if hit.any():
                    self.hazard(nbytes[hit], threads[hit], verb, pc, reads=name == "blocked")

    def hazard(self, nbytes: np.ndarray, threads: np.ndarray, verb: str, pc: Optional[int] = None,
               reads: bool = True) -> None:
        m = self.m
        p = self.first_pending(nbytes, reads)
        offset = int(nbytes[0]) % m.smem_size
        what = "the destination of" if p.data is not None else "an operand still being read by"
        wait = {"cp.async": "cp.async.wait_group/wait_all or the mbarrier phase that tracks it",
                "wgmma": "wgmma.wait_group", "bulk": "the mbarrier phase that completes it",
                "bulk.store": "cp.async.bulk.wait_group.read"}.get(p.family, "")
        raise AsyncHazard(f"{describe(m, m.at if pc is None else pc, threads[0])} {verb} shared "
                          f"byte {offset:#x}, {what} the asynchronous {describe(m, p.pc, p.owner[0])}, "
                          f"before {wait or 'its completion'}")

    def check_exit(self, threads: np.ndarray) -> None:
        """Threads leaving the kernel: a bulk copy they issued that still reads shared memory
        (a bulk tensor store before ``cp.async.bulk.wait_group.read``) would read the CTA's
        shared memory after it is gone."""
        for p in self.pending:
            if p.family == "bulk.store" and p.data is None:
                gone = np.isin(p.owner, threads)
                if gone.any():
                    owner = int(p.owner[gone][0])
                    raise AsyncHazard(f"{describe(self.m, self.m.at, owner)} exits while the asynchronous "
                                      f"{describe(self.m, p.pc, owner)} still reads shared memory, before "
                                      "cp.async.bulk.wait_group.read")

    # -- mbarrier operations of asynchronous units
    def queue_mbarrier(self, offset: int, apply: Callable) -> None:
        """``apply(m)`` updates the mbarrier at ``offset`` when a thread looks at it."""
        self.queued.setdefault(int(offset), []).append(apply)
        waiters = self.m.mbarrier_waiters()
        if waiters.size and (self.m.mbar_offset[waiters] == offset).any():
            self.settle([offset])

    def tracks_mbarrier(self, offset: int) -> bool:
        """Whether an asynchronous operation still has to arrive on (``queue_mbarrier``) or
        land with (``defer``'s ``mbarrier``) the mbarrier at shared byte ``offset``."""
        return bool(self.queued.get(int(offset))) or any((p.mbar == offset).any() for p in self.pending)

    def settle(self, offsets) -> None:
        if not self.queued:
            return
        for off in {int(o) for o in np.asarray(offsets).reshape(-1)}:
            for apply in self.queued.pop(off, ()):
                apply(self.m)

    # -- registers
    def lock_registers(self, family: str, slots, idx, pc: int) -> None:
        m = self.m
        seq_now = self.group_of(family, idx)
        for slot in slots:
            entry = self.locks.get(slot)
            if entry is None or entry[0] != family:
                entry = self.locks[slot] = (family, np.full(m.n, -1, np.int64), np.zeros(m.n, np.int64))
            entry[1][idx] = seq_now
            entry[2][idx] = pc

    def locked_by(self, slot: int, idx) -> Optional[tuple]:
        """(pc, thread) of the in-flight operation holding ``slot`` for one of ``idx``."""
        entry = self.locks.get(slot)
        if entry is None:
            return None
        held = entry[1][idx] >= 0
        if not np.any(held):
            return None
        t = thread_array(self.m, idx)[np.flatnonzero(held)[0]]
        return int(entry[2][t]), int(t)

    def touch(self, slots: tuple, names: tuple, idx, pc: int, copies_to: tuple = ()) -> None:
        """An instruction other than the asynchronous one names ``slots``; a ``mov`` that
        only copies or packs them (into ``copies_to``) passes the in-flight state on."""
        for slot, name in zip(slots, names):
            held = self.locked_by(slot, idx)
            if held is not None and copies_to and slot not in copies_to:
                family, seq, pcs = self.locks[slot]
                for dst in copies_to:
                    entry = self.locks.get(dst)
                    if entry is None or entry[0] != family:
                        entry = self.locks[dst] = (family, np.full(self.m.n, -1, np.int64),
                                                   np.zeros(self.m.n, np.int64))
                    entry[1][idx] = np.maximum(entry[1][idx], seq[idx])
                    entry[2][idx] = np.where(seq[idx] >= 0, pcs[idx], entry[2][idx])
                continue
            if held is not None:
                family = self.locks[slot][0]
                wait = {"wgmma": "wgmma.wait_group"}[family]
                raise AsyncHazard(f"{describe(self.m, pc, held[1])} uses {name}, a register of the "
                                  f"in-flight {describe(self.m, held[0], held[1])}, before {wait}")
            dirty = self.dirty.get(slot)
            if dirty is not None:
                dirty[idx] = np.where(dirty[idx] == -2, -2, pc)     # -2: never fenced stays

    def fence(self, idx) -> None:
        for dirty in self.dirty.values():
            dirty[idx] = -1

    def dirty_of(self, slot: int) -> np.ndarray:
        d = self.dirty.get(slot)
        if d is None:
            d = self.dirty[slot] = np.full(self.m.n, -2, np.int64)     # -2: no fence yet
        return d


def thread_array(m, idx, like: Optional[np.ndarray] = None) -> np.ndarray:
    if isinstance(idx, slice):
        return np.arange(m.n)[idx]
    idx = np.asarray(idx)
    if like is not None and idx.ndim == 0:
        return np.full(len(like), int(idx), np.int64)
    return idx


# ----------------------------------------------------------------------------- registers
#: the instructions whose registers stay in flight: opcode prefix -> operand positions
ASYNC_REGISTER_OPERANDS = {"wgmma.mma_async": (0, 1)}


def register_names(op) -> list[str]:
    from .parser import Addr, ArgList, Reg, Vec
    if isinstance(op, Reg):
        return [op.name]
    if isinstance(op, (Vec, ArgList)):
        return [n for item in op.items for n in register_names(item)]
    if isinstance(op, Addr):
        return register_names(op.base)
    return []


def async_slots(prog) -> dict:
    """slot -> (name, opcode prefix) of every register an asynchronous instruction of
    ``prog`` keeps in flight."""
    out = {}
    for ins, fn in zip(prog.instructions, prog.function_of):
        for prefix, positions in ASYNC_REGISTER_OPERANDS.items():
            if ins.opcode.startswith(prefix):
                prefix_ns = "" if fn.is_entry else f"{fn.name}::"
                for pos in positions:
                    if pos < len(ins.operands):
                        for name in register_names(ins.operands[pos]):
                            if ins.opcode.startswith("wgmma") and pos == 1 and \
                                    len(register_names(ins.operands[1])) == 1:
                                continue                  # A as a descriptor, not registers
                            slot = prog.reg_slots.get(prefix_ns + name)
                            if slot is not None:
                                out[slot[0]] = (name, prefix)
    return out


def guard_registers(prog) -> None:
    """Wrap every instruction that names a register of ``async_slots`` (other than the
    asynchronous instructions, which check themselves) with the in-flight check; the
    registers of ``wgmma.mma_async`` are ``prog.fenced_registers`` (``wgmma.fence``).
    A ``mov`` that copies or packs such registers (NVIDIA's tcgen05.ld results go
    through ``mov.b64 %rd, {%r, %r}`` before ``wait::ld``) is a copy, not a use: its
    destination is in flight in turn, and so also guarded."""
    slots = async_slots(prog)
    prog.fenced_registers = tuple(slot for slot, (_, op) in slots.items() if op == "wgmma.mma_async")
    if not slots:
        return
    guarded = set(slots)
    named_at = []
    for ins, fn in zip(prog.instructions, prog.function_of):
        prefix_ns = "" if fn.is_entry else f"{fn.name}::"
        pairs = [(n, prog.reg_slots.get(prefix_ns + n)) for op in ins.operands for n in register_names(op)]
        if ins.guard is not None:
            pairs.append((ins.guard.name, prog.reg_slots.get(prefix_ns + ins.guard.name)))
        named_at.append([(n, s[0]) for n, s in pairs if s is not None])
    copies = {pc: tuple(s for _, s in named_at[pc][:len(register_names(ins.operands[0]))])
              for pc, ins in enumerate(prog.instructions)
              if ins.parts[0] == "mov" and ins.guard is None and ins.operands}
    changed = True
    while changed:                       # what copies of in-flight registers reach
        changed = False
        for pc, dsts in copies.items():
            srcs = {s for _, s in named_at[pc]} - set(dsts)
            if srcs & guarded and not set(dsts) <= guarded:
                guarded |= set(dsts)
                changed = True
    for pc, ins in enumerate(prog.instructions):
        if ins.opcode.startswith(("wgmma", "tcgen05.ld", "tcgen05.wait")):
            continue
        hit = {s: n for n, s in named_at[pc] if s in guarded}
        if hit:
            prog.code[pc] = touching(prog.code[pc], tuple(hit), tuple(hit.values()), pc, copies.get(pc, ()))


def check_issue(m, slots: tuple, names: tuple, idx, pc: int, fenced: bool) -> None:
    """An asynchronous instruction names ``slots``: in flight for another family is an
    error; ``fenced``: each must be untouched since the thread's last ``wgmma.fence``."""
    a = m.asynchrony
    for slot, name in zip(slots, names):
        entry = a.locks.get(slot)
        if entry is not None and entry[0] != "wgmma":
            a.touch((slot,), (name,), idx, pc)
        if fenced:
            # A register touched between the fence and the MMA is legal PTX that ptxas
            # serialises (NVIDIA's PTX zeroes accumulators there): only a thread that never
            # fenced is an error.
            dirty = a.dirty_of(slot)[idx]
            if (dirty == -2).any():
                t = int(thread_array(m, idx)[int(np.flatnonzero(dirty == -2)[0])])
                raise AsyncHazard(f"{describe(m, pc, t)}: no wgmma.fence before the first "
                                  f"wgmma.mma_async ({name})")


def touching(fn: Callable, slots: tuple, names: tuple, pc: int, copies_to: tuple) -> Callable:
    def run(m, idx):
        m.asynchrony.touch(slots, names, idx, pc, copies_to)
        return fn(m, idx)
    return run
