"""Execution of a batch of CTAs: per-thread registers as numpy arrays over every thread of
the batch, and the scheduler.

Scheduling (divergence and reconvergence).  Every thread has its own PC and a status
(running, waiting at a barrier, exited).  While all running threads share one PC and none
waits, the batch is *uniform*: each step executes that instruction for all of them.
Otherwise each step picks, **per warp**, the lowest PC among the warp's running threads and
executes it for the threads of that warp that are at it; different warps may execute
different instructions in the same step.  Lowest-PC-first makes threads of a warp that
split at a forward branch reconverge at the join point (the join has the higher PC), and
threads that leave a loop early wait at the exit until the rest of the warp leaves (loop
bodies have lower PCs than their exits).  Because warps advance independently, a warp or
CTA spinning on a flag written by another (mutexes, mbarrier waits) does not starve it.
Calls to ``.func`` bodies push the return PC on a per-thread stack; threads inside calls are
scheduled before their callers (the key is PC minus depth times the code size), so a warp
reconverges at the return point.

Interleaved mode (``launch(..., interleave=seed)``, ``weak.py``): each step runs one CTA,
drawn by a seeded generator, on its own weakly ordered copy of global memory.

Barriers: a thread that executes ``bar.sync b`` waits; when the waiting and arrived threads
of its CTA reach the expected count (every non-exited thread of the CTA, or the explicit
count), they are released.  If no thread can run and some are waiting, that is a deadlock.

mbarrier waits (``ops/mbarrier.py``): a thread whose ``mbarrier.try_wait`` finds its phase
incomplete is suspended at the instruction, as the hardware suspends it, and made runnable
again when an mbarrier operation completes the phase (it then re-executes ``try_wait`` and
sees the phase complete).  When nothing else can run, the suspended threads time out: their
``try_wait`` returns false, as it does on the GPU once the time limit passes.  Timeouts that
repeat with no mbarrier or barrier making progress in between are a deadlock.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .memory import GlobalMemory, gather
from .program import Program
from .ptxtypes import RAW_DTYPES
from .weak import WeakMemory

RUNNING, WAITING, EXITED = 0, 1, 2
NO_PC = np.iinfo(np.int64).max
CLUSTER_BARRIER = 16             # wait_bar value of barrier.cluster.wait
MBARRIER_WAIT = 17               # wait_bar value of a suspended mbarrier.try_wait
WARPGROUP_WAIT = 18              # wait_bar value of a warp held at a warpgroup-wide instruction
WARP_WAIT = 19                   # wait_bar value of a thread held at a warp-wide one (``gather_warps``)
FRUITLESS_TIMEOUTS = 100         # try_wait timeouts in a row without progress: a deadlock


class Deadlock(RuntimeError):
    pass


class StepLimit(RuntimeError):
    pass


class KernelTrap(RuntimeError):
    """``trap``, a failed ``__assertfail`` or a memory fault: ends the launch."""

    def __init__(self, kind: str, message: str, detail: Optional[dict] = None):
        super().__init__(message)
        self.kind = kind
        self.detail = detail or {}


class Batch:
    """All threads of ``len(cta_ids)`` CTAs (whole clusters), executed together."""

    def __init__(self, prog: Program, launch, cta_ids: np.ndarray):
        self.prog = prog
        self.launch = launch
        self.gmem: GlobalMemory = launch.gmem
        self.params: np.ndarray = launch.params
        bx, by, bz = launch.block
        self.nthreads = bx * by * bz
        self.ncta = len(cta_ids)
        self.n = self.ncta * self.nthreads
        self.cta_ids = cta_ids
        n = self.n
        self.regs: list = [None] * len(prog.reg_bits)
        self.pc = np.zeros(n, np.int64)
        self.status = np.zeros(n, np.int8)
        self.wait_bar = np.zeros(n, np.int16)
        self.cc: Optional[np.ndarray] = None
        self.depth: Optional[np.ndarray] = None
        self.cluster_phase: Optional[np.ndarray] = None
        self.mbar_offset: Optional[np.ndarray] = None    # shared byte offset waited on
        self.mbar_parity: Optional[np.ndarray] = None    # parity of the phase waited for
        self.mbar_timed_out: Optional[np.ndarray] = None
        self.bar_pc: Optional[np.ndarray] = None          # the aligned barrier a waiting thread is at
        self.progress = 0                                # mbarrier updates and barrier releases
        self.warp_held = 0                               # threads held at warp-wide instructions
        self.warp_forced = False                         # the next warp-wide one runs whoever is there
        self.timeouts = (0, -1)                          # (fruitless timeouts, progress then)
        self.cta_of = np.repeat(np.arange(self.ncta, dtype=np.int64), self.nthreads)
        self.linear_tid = np.tile(np.arange(self.nthreads, dtype=np.int64), self.ncta)
        warps_per_cta = -(-self.nthreads // 32)
        starts = np.arange(warps_per_cta, dtype=np.int64) * 32
        self.warp_starts = (np.arange(self.ncta, dtype=np.int64)[:, None] * self.nthreads
                            + starts[None, :]).reshape(-1)
        self.warp_sizes = np.diff(np.append(self.warp_starts, n))
        self.warp_base = self.linear_tid - (self.linear_tid % 32) + self.cta_of * self.nthreads
        self.smem_size = max(launch.smem_size, 1)
        self.shared = np.zeros(self.ncta * self.smem_size, np.uint8)
        self.local_size = max(prog.local.size, 1)
        self.local = np.zeros(n * self.local_size, np.uint8)
        self.callparam_size = max(prog.call_params.size, 1)
        self.callparams = np.zeros(n * self.callparam_size, np.uint8)
        self.bar_expected = np.zeros((self.ncta, 16), np.int64)
        self.bar_arrived = np.zeros((self.ncta, 16), np.int64)
        self.issued = np.zeros(len(prog.code), np.int64)
        self.bulk_groups: dict = {}     # thread -> bulk async-groups of stores (ops/bulk.py)
        #: tensor maps built on the device (ops/tensormap.py): global address -> releases so
        #: far, and (thread, address) -> the release that thread last acquired
        self.map_releases: dict = {}
        self.map_acquires: dict = {}
        self.steps = 0
        self.specials: dict = {}
        self.async_groups: dict = {}
        self.weak: Optional[WeakMemory] = None            # interleaved mode (weak.py)
        self.at = 0                                       # the instruction being executed
        from .asynchrony import Asynchrony      # (they import KernelTrap from here)
        self.asynchrony = Asynchrony(self)
        self.races = None                                                # made at the first shared access
        self.check_races = launch.check_races

    def shared_races(self):
        """The race detector (``races.Races``), or None when the launch turned it off."""
        if self.races is None and self.check_races:
            from .races import Races
            self.races = Races(self)
        return self.races

    # -- registers
    def reg(self, slot: int) -> np.ndarray:
        r = self.regs[slot]
        if r is None:
            r = self.regs[slot] = np.zeros(self.n, RAW_DTYPES[self.prog.reg_bits[slot]])
        return r

    def set_reg(self, slot: int, idx, value) -> None:
        r = self.regs[slot]
        if r is None:
            r = self.regs[slot] = np.zeros(self.n, RAW_DTYPES[self.prog.reg_bits[slot]])
        r[idx] = value

    def call_stack(self) -> tuple[np.ndarray, np.ndarray]:
        """(return PCs (threads x depth), current depth per thread), created on first call."""
        if self.depth is None:
            self.stack = np.zeros((self.n, 16), np.int64)
            self.depth = np.zeros(self.n, np.int64)
        return self.stack, self.depth

    def carry(self) -> np.ndarray:
        if self.cc is None:
            self.cc = np.zeros(self.n, np.uint64)
        return self.cc

    # -- special registers
    def special(self, key: str, idx) -> np.ndarray:
        arr = self.specials.get(key)
        if arr is None:
            arr = self.launch.special_values(self, key)
            if not key.startswith(("clock", "globaltimer")):
                self.specials[key] = arr
        if arr.ndim == 0:
            return arr
        return arr[idx]

    # -- scheduling
    def run(self, max_steps: int) -> None:
        if self.weak is not None:
            self.run_interleaved(max_steps)
            return
        code, control = self.prog.code, self.prog.control
        uniform, upc, live = True, 0, slice(None)
        nlive = self.n
        while True:
            self.steps += 1
            if self.steps > max_steps:
                raise StepLimit(f"no completion after {max_steps} steps (infinite loop?)")
            if uniform:
                fn = code[upc]
                self.at = upc
                self.issued[upc] += nlive
                if not control[upc]:
                    fn(self, live)
                    upc += 1
                    continue
                self.pc[live] = upc
                fn(self, np.arange(self.n) if isinstance(live, slice) else live)
            else:
                self.divergent_step(code, control)
            state = self.reconverge()
            if state is None:
                return
            uniform, upc, live, nlive = state

    def run_interleaved(self, max_steps: int) -> None:
        """One CTA per step, drawn by ``self.weak``'s seeded generator (weak.py)."""
        code, control = self.prog.code, self.prog.control
        while True:
            self.steps += 1
            if self.steps > max_steps:
                raise StepLimit(f"no completion after {max_steps} steps (infinite loop?)")
            running = self.status == RUNNING
            if not running.any():
                if self.time_out_mbarrier_waits() or self.release_held_warps():
                    continue
                if (self.status == WAITING).any():
                    self.raise_deadlock()
                return
            cta = self.weak.pick(np.unique(self.cta_of[running]))
            self.divergent_step(code, control, running & (self.cta_of == cta))

    def reconverge(self):
        """(uniform, pc, live, nlive), or None when every thread has exited."""
        running = self.status == RUNNING
        if not running.any():
            if self.time_out_mbarrier_waits() or self.release_held_warps():
                return False, 0, None, 0
            if (self.status == WAITING).any():
                self.raise_deadlock()
            return None
        pcs = self.pc[running]
        lo = pcs.min()
        if lo == pcs.max() and not (self.status == WAITING).any():
            if running.all():
                return True, int(lo), slice(None), self.n
            live = np.flatnonzero(running)
            return True, int(lo), live, len(live)
        return False, 0, None, 0

    def divergent_step(self, code, control, running: Optional[np.ndarray] = None) -> None:
        """One instruction for each warp with ``running`` threads (default: every running one)."""
        if running is None:
            running = self.status == RUNNING
        key = self.pc
        if self.depth is not None and self.depth.any():
            # threads inside calls go first, so callers reconverge at the return point
            key = self.pc - self.depth * (len(code) + 1)
        pcs = np.where(running, key, NO_PC)
        wmin = np.minimum.reduceat(pcs, self.warp_starts)
        chosen = np.flatnonzero((pcs == np.repeat(wmin, self.warp_sizes)) & running)
        if not chosen.size:
            return
        at = self.pc[chosen]
        order = np.argsort(at, kind="stable")
        chosen = chosen[order]
        at = at[order]
        cuts = np.flatnonzero(np.diff(at)) + 1
        for group in np.split(chosen, cuts):
            pc = int(self.pc[group[0]])
            self.at = pc
            self.issued[pc] += len(group)
            code[pc](self, group)
            if not control[pc]:
                self.pc[group] += 1

    def raise_deadlock(self) -> None:
        waiting = np.flatnonzero(self.status == WAITING)
        # a barrier's waiters are past it; a suspended try_wait's (or held wgmma's) are at it
        at = self.pc[waiting] - (self.wait_bar[waiting] < MBARRIER_WAIT)
        lines = sorted({self.prog.instructions[max(int(p), 0)].line for p in at})
        what = "barriers or mbarrier phases" if self.mbarrier_waiters().size else "barriers"
        raise Deadlock(f"deadlock: {len(waiting)} threads wait at {what} (PTX lines {lines}) "
                       f"that the other threads of their CTA never reach")

    # -- barriers
    def check_converged(self, idx: np.ndarray, skipped: np.ndarray, ins, barrier: bool = False) -> None:
        """An ``.aligned`` instruction (``bar.sync`` is ``barrier.sync.aligned``; ``mma.sync``,
        ``ldmatrix``, ``wgmma``... through ``program.converged``) at ``self.at``, reached by
        ``idx`` (``skipped``: those whose guard is false).  The PTX ISA requires the whole warp
        to execute that very instruction; the emulator traps (kind ``divergence``) what it can
        tell breaks that: a guard that differs within a warp, and, for barriers, threads of
        one warp waiting at two different barrier instructions (what LLVM's tail duplication of
        a ``bar.sync`` into both arms of a ``tid == 0`` branch made: it hung an H100).  Threads
        of a warp that reach the same instruction at different steps are not an error: the
        scheduler runs the lowest PC first, and a join placed before the branch's arms is
        reached in two groups where the hardware reconverges the warp first."""
        culprit = None
        if skipped.size:
            ran = np.setdiff1d(idx, skipped)
            mixed = np.isin(self.warp_base[skipped], self.warp_base[ran])
            if mixed.any():
                culprit = (int(skipped[mixed][0]), "skips it (its guard is false)")
        if culprit is None and barrier and self.bar_pc is not None:
            other = ((self.status == WAITING) & (self.wait_bar < CLUSTER_BARRIER) & (self.bar_pc >= 0)
                     & (self.bar_pc != self.at) & np.isin(self.warp_base, np.unique(self.warp_base[idx])))
            if other.any():
                t = int(np.flatnonzero(other)[0])
                culprit = (t, f"waits at another barrier instruction (PTX line "
                              f"{self.prog.instructions[int(self.bar_pc[t])].line})")
        if culprit is not None:
            t, where = culprit
            raise KernelTrap("divergence", f"divergent .aligned instruction: '{ins.text}' (PTX line {ins.line}) is "
                             f"executed by {idx.size - skipped.size} threads while a thread of the same warp "
                             f"{where}; first: {self.launch.describe_thread(self, t)}",
                             {"line": ins.line})

    def wait_at_aligned_barrier(self, idx: np.ndarray, aligned: bool) -> None:
        """Record which barrier instruction ``idx`` wait at (``check_converged``)."""
        if self.bar_pc is None:
            if not aligned:
                return
            self.bar_pc = np.full(self.n, -1, np.int64)
        self.bar_pc[idx] = self.at if aligned else -1

    def arrive(self, idx: np.ndarray, bar: np.ndarray, expected: Optional[np.ndarray],
               wait: bool) -> None:
        """Threads ``idx`` arrive at barrier ``bar`` (per thread); waiting ones block."""
        ctas = self.cta_of[idx]
        if self.races is not None:
            self.races.barrier_arrive(idx, bar)
        if expected is not None:
            self.bar_expected[ctas, bar] = expected
        if wait:
            self.status[idx] = WAITING
            self.wait_bar[idx] = bar
        else:
            np.add.at(self.bar_arrived, (ctas, bar), 1)
        self.release_barriers()

    def exited(self, cta: int) -> bool:
        """Have all of CTA ``cta``'s threads exited (its shared memory is gone: another CTA
        of the cluster may no longer read, write or arrive on it)?"""
        return bool((self.status[self.cta_of == cta] == EXITED).all())

    def cluster_arrive(self, idx: np.ndarray) -> None:
        if self.cluster_phase is None:
            self.cluster_phase = np.zeros(self.n, np.int64)
        self.cluster_phase[idx] += 1
        if self.races is not None:
            self.races.cluster_arrive(idx)

    def cluster_wait(self, idx: np.ndarray) -> None:
        """Wait until every live thread of the cluster has arrived as often as this one."""
        self.status[idx] = WAITING
        self.wait_bar[idx] = CLUSTER_BARRIER
        self.release_barriers()

    def release_cluster_waits(self) -> None:
        waiting = np.flatnonzero((self.status == WAITING) & (self.wait_bar == CLUSTER_BARRIER))
        if not waiting.size:
            return
        phase = self.cluster_phase if self.cluster_phase is not None else np.zeros(self.n, np.int64)
        per = self.nthreads * self.launch.cta_per_cluster
        live_phase = np.where(self.status != EXITED, phase, np.iinfo(np.int64).max)
        low = live_phase.reshape(-1, per).min(axis=1)
        ok = phase[waiting] <= low[waiting // per]
        if self.races is not None:
            self.races.cluster_release(waiting[ok])
        self.status[waiting[ok]] = RUNNING

    def release_barriers(self) -> None:
        self.release_cluster_waits()
        waiting = (self.status == WAITING) & (self.wait_bar < CLUSTER_BARRIER)
        if not waiting.any():
            return
        live = np.bincount(self.cta_of[self.status != EXITED], minlength=self.ncta)
        w = np.flatnonzero(waiting)
        keys = self.cta_of[w] * 16 + self.wait_bar[w]
        counts = np.bincount(keys, minlength=self.ncta * 16).reshape(self.ncta, 16)
        counts = counts + self.bar_arrived
        expected = np.where(self.bar_expected > 0, self.bar_expected, live[:, None])
        done = (counts >= expected) & (counts > 0)
        done &= np.bincount(keys, minlength=self.ncta * 16).reshape(self.ncta, 16) > 0
        if not done.any():
            return
        release = done.reshape(-1)[keys]
        rel = w[release]
        self.status[rel] = RUNNING
        cta_bar = done.nonzero()
        if self.races is not None:
            self.races.barrier_release(rel, cta_bar)
        self.bar_arrived[cta_bar] = 0
        self.bar_expected[cta_bar] = 0
        self.progress += 1

    # -- mbarrier waits
    def mbarrier_wait(self, idx: np.ndarray, offsets: np.ndarray, parity: np.ndarray) -> None:
        """Suspend threads ``idx`` until the mbarrier at shared byte ``offsets`` (of
        ``self.shared``) completes the phase of ``parity``."""
        if self.mbar_offset is None:
            self.mbar_offset = np.zeros(self.n, np.int64)
            self.mbar_parity = np.zeros(self.n, np.uint64)
            self.mbar_timed_out = np.zeros(self.n, bool)
        self.status[idx] = WAITING
        self.wait_bar[idx] = MBARRIER_WAIT
        self.mbar_offset[idx] = offsets
        self.mbar_parity[idx] = parity

    def gather_warpgroups(self, idx: np.ndarray) -> np.ndarray:
        """Threads ``idx`` reach a warpgroup-wide instruction (``wgmma.mma_async``) at
        ``self.at``: the hardware runs it once all four warps of a warpgroup have issued
        it, which they may do at different times (a warp that waited on an mbarrier
        lags).  The threads of the warpgroups now complete (with those held here before)
        are returned, running again; the rest are held, at the instruction."""
        held = np.flatnonzero((self.status == WAITING) & (self.wait_bar == WARPGROUP_WAIT) & (self.pc == self.at))
        everyone = np.union1d(idx, held)
        group = self.cta_of[everyone] * self.nthreads + self.linear_tid[everyone] // 128
        _, inverse, counts = np.unique(group, return_inverse=True, return_counts=True)
        complete = counts[inverse] == 128
        hold = everyone[~complete]
        self.status[hold] = WAITING
        self.wait_bar[hold] = WARPGROUP_WAIT
        ready = everyone[complete]
        self.status[ready] = RUNNING
        return ready

    def gather_warps(self, idx: np.ndarray) -> np.ndarray:
        """Threads ``idx`` (ascending) reach a warp-wide instruction whose lanes exchange
        data (``mma.sync``, ``ldmatrix``, ``stmatrix``) at ``self.at``: the hardware runs it
        for the whole warp at once, ptxas reconverging the warp before it (where the
        branch's join lies before its arms in the code, as a loop latch does, the
        lowest-PC-first scheduling would let the first lanes run it alone).  The threads
        of warps now complete (every lane that has not exited, with those held here
        before) are returned, running again; the rest are held, at the instruction."""
        if self.warp_forced:    # nothing else could run (``release_held_warps``): run it as it stands
            self.warp_forced = False
            return idx
        if not self.warp_held and idx.size % 32 == 0 and \
                np.array_equal(self.warp_base[idx[::32]], self.warp_base[idx[31::32]]):
            return idx          # whole warps, nobody held: the common case
        held = np.flatnonzero((self.status == WAITING) & (self.wait_bar == WARP_WAIT) & (self.pc == self.at))
        everyone = np.union1d(idx, held)
        alive = np.bincount(self.warp_base[self.status != EXITED], minlength=self.n)
        warps, inverse, counts = np.unique(self.warp_base[everyone], return_inverse=True, return_counts=True)
        complete = counts[inverse] >= alive[warps][inverse]
        hold = everyone[~complete]
        ready = everyone[complete]
        self.status[hold] = WAITING
        self.wait_bar[hold] = WARP_WAIT
        self.status[ready] = RUNNING
        self.warp_held += hold.size - held.size      # those held here before are now held or ready
        return ready

    def release_held_warps(self) -> bool:
        """Nothing can run: threads held at warp-wide instructions whose warps will never
        be whole (the other lanes exited or wait elsewhere) run them as they are, which the
        instruction traps (``.aligned`` needs the whole warp).  Whether any were held."""
        if not self.warp_held:
            return False
        held = np.flatnonzero((self.status == WAITING) & (self.wait_bar == WARP_WAIT))
        self.status[held] = RUNNING
        self.warp_held = 0
        self.warp_forced = True
        return True

    def mbarrier_waiters(self) -> np.ndarray:
        if self.mbar_offset is None:
            return np.zeros(0, np.int64)
        return np.flatnonzero((self.status == WAITING) & (self.wait_bar == MBARRIER_WAIT))

    def release_mbarrier_waits(self) -> None:
        """An mbarrier changed: land the asynchronous copies completing on it
        (``asynchrony``) and wake the threads whose phase has completed."""
        self.progress += 1
        self.asynchrony.mbarrier_changed()
        waiting = self.mbarrier_waiters()
        if waiting.size:
            phase = gather(self.shared, self.mbar_offset[waiting], 8) >> np.uint64(63)
            self.status[waiting[phase != self.mbar_parity[waiting]]] = RUNNING

    def take_timeouts(self, idx: np.ndarray) -> np.ndarray:
        """Which of threads ``idx`` come back from a timed-out wait (the flag is cleared)."""
        if self.mbar_timed_out is None:
            return np.zeros(len(idx), bool)
        out = self.mbar_timed_out[idx].copy()
        self.mbar_timed_out[idx] = False
        return out

    def time_out_mbarrier_waits(self) -> bool:
        """Nothing else can run: suspended ``try_wait`` threads resume, their wait failed."""
        waiting = self.mbarrier_waiters()
        if not waiting.size:
            return False
        fruitless, seen = self.timeouts
        fruitless = fruitless + 1 if seen == self.progress else 0
        if fruitless >= FRUITLESS_TIMEOUTS:
            return False
        self.timeouts = (fruitless, self.progress)
        self.mbar_timed_out[waiting] = True
        self.status[waiting] = RUNNING
        return True

    def exit_threads(self, idx) -> None:
        if self.asynchrony.pending:
            self.asynchrony.check_exit(np.arange(self.n)[idx])
        self.status[idx] = EXITED
        if self.weak is not None:       # exiting publishes the CTA's stores
            self.weak.publish()
        self.release_barriers()
