"""A shared-memory race detector: two accesses to the same byte by different threads of a
CTA, at least one a write, with no happens-before ordering between them, trap with kind
``race`` and a message naming both instructions and threads.

Happens-before comes from vector clocks, as in FastTrack (Flanagan and Freund, PLDI
2009), with the **warp** as the agent: one clock per warp, one vector clock per warp over
the warps of its CTA.  A warp's clock advances at each release; what carries clocks:

* ``bar.sync``/``barrier.sync``/``bar.arrive``/``barrier.arrive`` (every barrier id,
  with or without a thread count): the warps a barrier releases acquire the clocks of
  every warp that arrived at it;
* mbarriers: an arrival (``mbarrier.arrive*``, ``tcgen05.commit``, the ``complete_tx``
  of an asynchronous copy, ``cp.async.mbarrier.arrive``) releases into the mbarrier; a
  ``try_wait``/``test_wait`` that finds the phase complete acquires what the phase got;
* ``barrier.cluster.arrive``/``wait``.

Same-warp rule: accesses by lanes of one warp are not checked against each other, except
two lanes of one instruction writing different values to one byte.  The PTX ISA orders
lanes only through ``bar.warp.sync`` (and barriers), so a warp-local exchange through
shared memory that lacks it goes unreported: the emulator runs a warp's lanes in lockstep
where they converge, and NVIDIA's code relies on converged ``.sync.aligned`` collectives
(``elect.sync`` before an mbarrier arrival, ``tcgen05.alloc`` writing its address) in
ways the ISA text does not spell out.  Treating the warp as one agent keeps the clocks
small (warps, not threads), so barriers stay cheap.

What is checked, per byte: the last write (thread, its warp's clock, PTX line) and the
last read.  A read races with the last write, a write with the last write and the last
read, when they come from different warps and the accessing warp's clock of the other
warp does not cover the recorded access.  Keeping one read (FastTrack's exclusive read
epoch, without its shared-read vector) means a write is checked against the most recent
read only: fewer reports, never false ones.  Atomics (``atom``/``red``) are not races.
Asynchronous copies write as the thread that issued them, with its warp's clock at the
issue, when their data lands (``asynchrony``).

Proxies: a bulk copy that reads shared memory (``cp.async.bulk.tensor`` to global, its
``cp.reduce`` form), ``wgmma`` and ``tcgen05.mma`` reading operands through matrix
descriptors read through the async proxy, which sees a generic-proxy write (``st``,
``stmatrix``...) only when the writing thread ran ``fence.proxy.async`` after it (PTX ISA,
"Proxies": the generic and async proxies are ordered by a proxy fence only).  Each byte
keeps whether its last generic write was so fenced; the copy's issue traps on a byte that
was not (kind ``race``), and on one whose last write does not happen before the issue.
``cp.async`` copies write through the generic proxy.  Accesses to another CTA's shared memory
(``shared::cluster``) are not checked; a box multicast into it is recorded as its last write.

Tensor memory (``tmem_access``) is checked the same way, per 32-bit cell: ``tcgen05.st``
writes and ``tcgen05.ld`` reads the cells of its warp, ``tcgen05.mma`` reads (accumulating)
and writes its D cells, and reads A's where A is in tensor memory, as its issuing thread
at the issue.  A warp's store that the MMA of another warp's thread reads, or its load of
cells the next MMA overwrites, needs a barrier or mbarrier ordering between them (the
MMA's own results reach the warps through its commit's mbarrier, which carries the
issuer's clock).  ``tcgen05.fence::before/after_thread_sync`` are not modelled: NVIDIA's
own code orders tensor memory across threads through mbarriers without them.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .asynchrony import render
from .machine import KernelTrap

TID_BITS = 10                         # CTA-local thread id in a record (<= 1024 threads)
TID_MASK = (1 << TID_BITS) - 1
TMEM_COLUMNS = 512                    # tensor memory of a CTA: 128 lanes of 512 32-bit cells
TMEM_CELLS = 128 * TMEM_COLUMNS


class SharedRace(KernelTrap):
    def __init__(self, message: str):
        super().__init__("race", message)


class Races:
    """Vector clocks of a batch's warps and the per-byte records of its shared memory."""

    def __init__(self, m):
        self.m = m
        self.tid = m.linear_tid
        self.per = -(-m.nthreads // 32)                   # warps per CTA
        self.lw = self.tid // 32                           # CTA-local warp of each thread
        self.gw = m.cta_of * self.per + self.lw            # batch warp of each thread
        self.vc = np.zeros((m.ncta * self.per, self.per), np.int32)
        self.vc[np.arange(m.ncta * self.per), np.tile(np.arange(self.per), m.ncta)] = 1
        size = m.shared.size
        self.w_rec = np.zeros(size, np.int32)          # (clock << TID_BITS | tid) + 1; 0: none
        self.w_pc = np.zeros(size, np.int32)
        self.r_rec = np.zeros(size, np.int32)
        self.r_pc = np.zeros(size, np.int32)
        self.unfenced = np.zeros(size, bool)           # last write generic, not yet proxy-fenced
        self.bar_vc = np.zeros((m.ncta, 16, self.per), np.int32)
        self.cluster_vc = np.zeros((m.ncta, self.per), np.int32)
        self.mbar_vc: dict[int, np.ndarray] = {}       # mbarrier offset -> arrivals of its phase
        self.mbar_done: dict[int, np.ndarray] = {}     # -> what its completed phases released
        self.tm_w = self.tm_wpc = self.tm_r = self.tm_rpc = None   # tensor memory: made at its first access

    # -- clocks
    def own(self, idx: np.ndarray) -> np.ndarray:
        return self.vc[self.gw[idx], self.lw[idx]]

    def tick(self, idx: np.ndarray) -> None:
        warps = np.unique(self.gw[idx])
        self.vc[warps, warps % self.per] += 1

    def barrier_arrive(self, idx: np.ndarray, bars: np.ndarray) -> None:
        keys, first = np.unique(self.gw[idx] * 16 + bars, return_index=True)
        for key, k in zip(keys.tolist(), first.tolist()):
            cta, bar = self.m.cta_of[idx[k]], key % 16
            np.maximum(self.bar_vc[cta, bar], self.vc[key // 16], out=self.bar_vc[cta, bar])
        self.tick(idx)

    def barrier_release(self, rel: np.ndarray, cta_bar: tuple) -> None:
        keys, first = np.unique(self.gw[rel] * 16 + self.m.wait_bar[rel], return_index=True)
        warps = keys // 16
        self.vc[warps] = np.maximum(self.vc[warps], self.bar_vc[self.m.cta_of[rel[first]], keys % 16])
        self.bar_vc[cta_bar] = 0

    def cluster_arrive(self, idx: np.ndarray) -> None:
        for warp in np.unique(self.gw[idx]).tolist():
            cta = warp // self.per
            np.maximum(self.cluster_vc[cta], self.vc[warp], out=self.cluster_vc[cta])
        self.tick(idx)

    def cluster_release(self, rel: np.ndarray) -> None:
        warps = np.unique(self.gw[rel])
        self.vc[warps] = np.maximum(self.vc[warps], self.cluster_vc[warps // self.per])

    def mbarrier_release(self, off: int, vc_row: np.ndarray) -> None:
        acc = self.mbar_vc.get(off)
        if acc is None:
            self.mbar_vc[off] = vc_row.copy()
        else:
            np.maximum(acc, vc_row, out=acc)

    def mbarrier_arrive(self, off: int, thread: int) -> None:
        warp = self.gw[thread]
        self.mbarrier_release(off, self.vc[warp])
        self.vc[warp, self.lw[thread]] += 1

    def mbarrier_complete(self, off: int) -> None:
        acc = self.mbar_vc.pop(off, None)
        if acc is not None:
            done = self.mbar_done.get(off)
            self.mbar_done[off] = acc if done is None else np.maximum(done, acc)

    def mbarrier_acquire(self, offs: np.ndarray, idx: np.ndarray) -> None:
        for off in np.unique(offs).tolist():
            done = self.mbar_done.get(off)
            if done is not None:
                warps = np.unique(self.gw[idx[offs == off]])
                self.vc[warps] = np.maximum(self.vc[warps], done)

    def snapshot(self, threads) -> tuple:
        """(threads, their warps' clocks, vector clocks), sorted by thread: what the
        asynchronous writes they issue carry."""
        threads = np.unique(np.asarray(threads, np.int64))
        return threads, self.own(threads).copy(), self.vc[self.gw[threads]].copy()

    # -- accesses
    def access(self, idx, offs: np.ndarray, width: int, write: bool,
               values: Optional[np.ndarray] = None) -> None:
        """Threads ``idx`` read or write ``width`` bytes at ``offs`` of ``m.shared``."""
        m = self.m
        idx = np.arange(m.n)[idx] if isinstance(idx, slice) else np.asarray(idx)
        if idx.ndim == 0:
            idx = np.full(len(offs), int(idx))
        nbytes = (offs[:, None] + np.arange(width)).reshape(-1)
        who = np.repeat(idx, width)
        local = nbytes // m.smem_size == m.cta_of[who]
        if not local.all():
            nbytes, who = nbytes[local], who[local]
        tid = self.tid[who]
        self.check(self.w_rec, self.w_pc, nbytes, who, tid, "wrote", write)
        if write:
            self.check(self.r_rec, self.r_pc, nbytes, who, tid, "read", write)
            raw = None
            if values is not None:
                raw = np.ascontiguousarray(values).view(np.uint8).reshape(len(offs), -1)[:, :width]
                raw = raw.reshape(-1)[local] if not local.all() else raw.reshape(-1)
            self.same_instruction_writes(nbytes, who, raw)
        self.stamp(*((self.w_rec, self.w_pc) if write else (self.r_rec, self.r_pc)), nbytes, who, tid)
        if write:
            self.r_rec[nbytes] = 0
            self.unfenced[nbytes] = True

    def proxy_fence(self, idx: np.ndarray) -> None:
        """Threads ``idx`` ran ``fence.proxy.async``: their generic writes so far are
        visible to the async proxy."""
        m = self.m
        pending = np.flatnonzero(self.unfenced)
        if not pending.size:
            return
        writer = pending // m.smem_size * m.nthreads + ((self.w_rec[pending] - 1) & TID_MASK)
        self.unfenced[pending[np.isin(writer, np.asarray(idx))]] = False

    def proxy_read(self, region: np.ndarray, thread: int) -> None:
        """Thread ``thread`` issues a bulk copy, ``wgmma`` or ``tcgen05.mma`` reading
        ``region`` (bytes of ``m.shared``) through the async proxy: each byte's last write,
        if generic, must have been proxy-fenced by its writer (that the write happens before
        the issue is ``access``'s check of the read)."""
        m = self.m
        region = region[region // m.smem_size == m.cta_of[thread]]
        bad = self.unfenced[region]
        if bad.any():
            byte = int(region[np.flatnonzero(bad)[0]])
            other = byte // m.smem_size * m.nthreads + ((int(self.w_rec[byte]) - 1) & TID_MASK)
            ins, prev = m.prog.instructions[m.at], m.prog.instructions[int(self.w_pc[byte])]
            raise SharedRace(
                f"shared-memory race at byte {byte % m.smem_size:#x}: {m.launch.describe_thread(m, thread)} "
                f"reads it through the async proxy at PTX line {ins.line} ({render(ins)}), and "
                f"{m.launch.describe_thread(m, other)} wrote it at PTX line {prev.line} ({render(prev)}) "
                f"with no fence.proxy.async after the write")

    def async_write(self, region: np.ndarray, owner: np.ndarray, clock: tuple, pc: int,
                    generic: bool = False) -> None:
        """Asynchronous copies land at ``region``, each byte as written by its ``owner``
        with the clocks of ``clock`` (``snapshot`` when it was issued); through the
        generic proxy (``cp.async``: the async proxy sees them after their owner's
        ``fence.proxy.async``) or the async one (bulk copies)."""
        threads, owns, vcs = clock
        m = self.m
        local = region // m.smem_size == m.cta_of[owner]
        # bytes another CTA's multicast writes: not checked (another CTA's clocks), but
        # written now, through the async proxy: the earlier writer's record is gone
        remote = region[~local]
        self.w_rec[remote] = 0
        self.r_rec[remote] = 0
        self.unfenced[remote] = generic
        region, owner = region[local], owner[local]
        row = np.searchsorted(threads, owner)
        tid = self.tid[owner]
        for rec, pcs, verb in ((self.w_rec, self.w_pc, "wrote"), (self.r_rec, self.r_pc, "read")):
            r = rec[region]
            o_tid = (r - 1) & TID_MASK
            o_clk = (r - 1) >> TID_BITS
            o_warp = np.where(r > 0, o_tid // 32, 0)
            bad = (r > 0) & (o_warp != tid // 32) & (vcs[row, o_warp] < o_clk)
            if bad.any():
                k = np.flatnonzero(bad)[0]
                self.report(int(region[k]), int(owner[k]), pc, "writes (asynchronously)",
                            int(o_tid[k]), int(pcs[region[k]]), verb)
        self.w_rec[region] = (owns[row] << TID_BITS | tid) + 1
        self.w_pc[region] = pc
        self.r_rec[region] = 0
        self.unfenced[region] = generic

    # -- tensor memory
    def tmem_access(self, cells: np.ndarray, who: np.ndarray, write: bool) -> None:
        """Threads ``who`` (one per cell: the warp's, or an MMA's issuing thread) read or
        write the tensor-memory ``cells`` (flat indices, ``ops.tcgen05.flat_cells``)."""
        if self.tm_w is None:
            size = self.m.ncta * TMEM_CELLS
            self.tm_w, self.tm_wpc = np.zeros(size, np.int32), np.zeros(size, np.int32)
            self.tm_r, self.tm_rpc = np.zeros(size, np.int32), np.zeros(size, np.int32)
        who = np.broadcast_to(np.asarray(who), cells.shape)
        tid = self.tid[who]
        self.check(self.tm_w, self.tm_wpc, cells, who, tid, "wrote", write, where=_tmem_cell)
        if write:
            self.check(self.tm_r, self.tm_rpc, cells, who, tid, "read", write, where=_tmem_cell)
        self.stamp(*((self.tm_w, self.tm_wpc) if write else (self.tm_r, self.tm_rpc)), cells, who, tid)
        if write:
            self.tm_r[cells] = 0

    def stamp(self, rec: np.ndarray, pcs: np.ndarray, at: np.ndarray, who: np.ndarray, tid: np.ndarray) -> None:
        """Record the accesses of threads ``who`` (CTA-local ``tid``) to ``at``: their warps'
        clocks now, and the instruction."""
        rec[at] = (self.vc[self.gw[who], tid // 32] << TID_BITS | tid) + 1
        pcs[at] = self.m.at

    def check(self, rec: np.ndarray, pcs: np.ndarray, nbytes, who, tid, verb: str, write: bool,
              where=None) -> None:
        """Each access of threads ``who`` to ``nbytes`` against the access ``rec`` recorded
        there (``where``: how the report names a location, else a byte of shared memory)."""
        r = rec[nbytes]
        other = r > 0
        if not other.any():
            return
        o_tid = (r - 1) & TID_MASK
        o_clk = (r - 1) >> TID_BITS
        base = self.m.cta_of[who] * self.m.nthreads
        o_warp = np.where(other, o_tid // 32, 0)
        bad = other & (o_warp != tid // 32) & (self.vc[self.gw[who], o_warp] < o_clk)
        if bad.any():
            k = np.flatnonzero(bad)[0]
            self.report(int(nbytes[k]), int(who[k]), self.m.at, "writes" if write else "reads",
                        int(base[k] + o_tid[k]), int(pcs[nbytes[k]]), verb, local=False, where=where)

    def same_instruction_writes(self, nbytes, who, raw) -> None:
        """Two threads of one instruction writing different values to one byte."""
        if nbytes.size < 2:
            return
        order = np.argsort(nbytes, kind="stable")
        b, w = nbytes[order], who[order]
        dup = (b[1:] == b[:-1]) & (w[1:] != w[:-1])
        if raw is not None:
            v = raw[order]
            dup &= v[1:] != v[:-1]
        if dup.any():
            k = np.flatnonzero(dup)[0]
            self.report(int(b[k]), int(w[k + 1]), self.m.at, "writes", int(w[k]), self.m.at,
                        "wrote a different value", local=False)

    def report(self, byte: int, thread: int, pc: int, verb: str, other: int, other_pc: int,
               other_verb: str, local: bool = True, where=None) -> None:
        m = self.m
        if local:           # ``other`` is a CTA-local thread id of the byte's CTA
            other = byte // m.smem_size * m.nthreads + other
        ins, prev = m.prog.instructions[pc], m.prog.instructions[other_pc]
        place = where(byte) if where is not None else f"shared-memory race at byte {byte % m.smem_size:#x}"
        raise SharedRace(
            f"{place}: {m.launch.describe_thread(m, thread)} "
            f"{verb} it at PTX line {ins.line} ({render(ins)}), and "
            f"{m.launch.describe_thread(m, other)} {other_verb} it at PTX line {prev.line} "
            f"({render(prev)}) with no barrier or mbarrier ordering between them")


def _tmem_cell(cell: int) -> str:
    """A tensor-memory cell (flat index, ``ops.tcgen05.flat_cells``) as a race report names it."""
    return f"tensor-memory race at lane {cell % TMEM_CELLS // TMEM_COLUMNS}, column {cell % TMEM_COLUMNS}"
