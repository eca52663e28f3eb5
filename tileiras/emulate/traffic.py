"""Global-memory traffic of an emulated launch: how well each warp's accesses coalesce.

A GPU serves a warp's global load or store (a *request*) in 32-byte *sectors*: the fewer
distinct sectors the active threads of the warp touch, the fewer transactions go to L1/L2
and DRAM.  The emulator executes every thread's access, so it can count exactly what
Nsight Compute reports as ``l1tex__t_sectors_pipe_lsu_mem_global_op_{ld,st}`` and
``..._requests``: per request, the distinct sectors its active threads touch.  Dividing the
bytes the threads asked for by 32 times the sectors gives the *sector efficiency* (1.0: every
byte fetched is used).  Two PTX files for the same kernel, run on the same inputs, can then
be compared on memory behaviour (``bench/coalescing.py``), not only on registers.

Shared memory is counted in *wavefronts*: it has 32 banks of 4-byte words and serves a
warp's request in as many passes as the most distinct words any one bank must deliver
(threads reading the same word share it), and never in fewer than its distinct bytes over
128.  A request without bank conflicts takes that minimum (``ideal_wavefronts``); every
extra wavefront is a conflict (``l1tex__data_bank_conflicts_pipe_lsu_mem_shared``).
``ldmatrix``/``stmatrix`` count as requests of their 16-byte rows.

Enabled with ``launch(..., traffic=True)``; ``EmulationResult.traffic`` holds the counts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SECTOR = 32
WARP = 32


@dataclass
class Counts:
    requests: int = 0        # warp-level instructions with at least one active thread
    sectors: int = 0         # distinct 32-byte sectors per request, summed
    bytes: int = 0           # bytes the active threads accessed

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    @property
    def efficiency(self) -> float:
        """Used bytes over fetched bytes (1.0 when every sector byte is used)."""
        return self.bytes / (SECTOR * self.sectors) if self.sectors else 1.0

    def add(self, other: "Counts") -> None:
        self.requests += other.requests
        self.sectors += other.sectors
        self.bytes += other.bytes


@dataclass
class SharedCounts:
    requests: int = 0        # warp-level instructions with at least one active thread
    wavefronts: int = 0      # passes the banks needed, summed
    ideal_wavefronts: int = 0  # passes without bank conflicts (distinct bytes / 128), summed

    @property
    def wavefronts_per_request(self) -> float:
        return self.wavefronts / self.requests if self.requests else 0.0

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.ideal_wavefronts


BANKS, BANK_BYTES = 32, 4


@dataclass
class Traffic:
    loads: Counts = field(default_factory=Counts)
    stores: Counts = field(default_factory=Counts)
    shared_loads: SharedCounts = field(default_factory=SharedCounts)
    shared_stores: SharedCounts = field(default_factory=SharedCounts)

    def record_shared(self, threads: np.ndarray, offsets: np.ndarray, nbytes: int, store: bool) -> None:
        """One shared-memory instruction executed by ``threads`` at per-thread byte
        offsets into the CTA's shared memory, each moving ``nbytes`` bytes."""
        threads = np.asarray(threads, np.int64)
        if threads.size == 0:
            return
        offsets = np.broadcast_to(np.asarray(offsets, np.int64), threads.shape)
        warp = threads // WARP
        words = offsets[:, None] // BANK_BYTES + np.arange(max(1, nbytes // BANK_BYTES))
        keys = np.unique((np.repeat(warp, words.shape[1]) << 32) | words.ravel())
        key_warp, key_word = keys >> 32, keys & 0xFFFFFFFF
        warps, warp_index, words_per_warp = np.unique(key_warp, return_inverse=True, return_counts=True)
        banks, per_bank = np.unique((warp_index << 5) | (key_word % BANKS), return_counts=True)
        deepest = np.zeros(warps.size, np.int64)
        np.maximum.at(deepest, banks >> 5, per_bank)
        ideal = -(-words_per_warp // BANKS)
        counts = self.shared_stores if store else self.shared_loads
        counts.requests += warps.size
        counts.wavefronts += int(np.maximum(deepest, ideal).sum())
        counts.ideal_wavefronts += int(ideal.sum())

    def record(self, threads: np.ndarray, addr: np.ndarray, nbytes: int, store: bool) -> None:
        """One instruction executed by ``threads`` (batch thread indices, warps are runs of 32)
        at per-thread byte addresses ``addr``, each accessing ``nbytes`` bytes."""
        threads = np.asarray(threads, np.int64)
        if threads.size == 0:
            return
        addr = np.broadcast_to(np.asarray(addr, np.uint64), threads.shape)
        warp = (threads // WARP).astype(np.uint64)
        first = addr // np.uint64(SECTOR)
        last = (addr + np.uint64(nbytes - 1)) // np.uint64(SECTOR)
        keys = [warp << np.uint64(40) | (first & np.uint64((1 << 40) - 1))]
        span = int((last - first).max())
        for k in range(1, span + 1):   # accesses that straddle sectors (rare: vectors are aligned)
            more = first + np.uint64(k) <= last
            keys.append(warp[more] << np.uint64(40) | ((first[more] + np.uint64(k)) & np.uint64((1 << 40) - 1)))
        counts = self.stores if store else self.loads
        counts.requests += len(np.unique(warp))
        counts.sectors += len(np.unique(np.concatenate(keys)))
        counts.bytes += nbytes * threads.size
