"""Interleaved CTAs with weak global memory: the emulator's adversarial mode
(``launch(..., interleave=seed)``).

By default a batch of CTAs runs in lockstep on one sequentially consistent global memory, so
a kernel that forgets a release or an acquire still gives the right answer.  In this mode:

* **Order.**  Every CTA of the launch is in one batch and each step executes one instruction
  (per warp, as ``Batch.divergent_step``) of *one* CTA, drawn from those with runnable
  threads by a ``numpy`` generator seeded with ``seed`` (with ``burst``, the same CTA again
  for ``BURST`` steps on average, so that CTAs drift far apart at times, as a GPU's do: what
  catches a CTA refilling another's shared memory before that one released it).  So CTAs
  interleave at instruction granularity (finer than memory operations) in an order the seed
  fixes: a seed is one reproducible interleaving, several seeds several.
* **Memory.**  Each CTA sees global memory through its own copy (an L1 that is never
  invalidated behind its back, plus a store buffer):
  - weak accesses (``ld``/``st`` without ``.relaxed``/``.acquire``/``.release``/``.volatile``,
    ``ld.global.nc``, ``cp.async``, bulk copies) read and write the CTA's copy; what it
    writes is *unpublished*;
  - a **release** (an ``atom``/``red``/``st`` with ``.release``/``.acq_rel``/``.sc``,
    ``fence.sc|acq_rel`` or ``membar`` at GPU or system scope, and exiting) publishes every
    byte the CTA wrote (before the releasing access itself);
  - an **acquire** (``atom``/``ld`` with ``.acquire``/``.acq_rel``/``.sc``, the same fences)
    refreshes the CTA's copy from global memory, keeping its unpublished bytes (after the
    acquiring access);
  - strong accesses (atomics, ``.relaxed``/``.volatile`` loads and stores) go to global memory
    at their own addresses (the CTA's unpublished bytes there first) and update the copy.
  Threads of one CTA share its copy, so ``bar.sync`` keeps ordering them as on the GPU.
  A kernel whose cross-CTA communication lacks a release or an acquire therefore reads
  stale data here on every seed where the reader runs before the writer exits.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

RELEASING = frozenset({"release", "acq_rel", "sc"})
ACQUIRING = frozenset({"acquire", "acq_rel", "sc"})
STRONG = frozenset({"relaxed", "acquire", "release", "acq_rel", "sc", "volatile", "mmio"})
CTA_SCOPE = frozenset({"cta"})
#: steps one CTA runs in a row on average in ``launch(..., burst=True)``'s interleavings
#: (``WeakMemory.pick``)
BURST = 64


class WeakMemory:
    """Per-CTA copies of global memory (``views``) and their unpublished bytes (``dirty``)."""

    def __init__(self, data: np.ndarray, ncta: int, seed: int, burst: int = 1):
        self.data = data
        self.burst = burst
        self.views = np.tile(data, (ncta, 1))
        self.dirty = np.zeros((ncta, data.size), bool)
        self.current = 0
        self.rng = np.random.default_rng(seed)

    @property
    def view(self) -> np.ndarray:
        """The running CTA's copy (``locate`` returns it for global accesses)."""
        return self.views[self.current]

    def pick(self, candidates: np.ndarray) -> int:
        """The CTA that runs the next step: one drawn among ``candidates``, or with ``burst``
        > 1 the running one again for ``burst`` steps on average.  Bursts let a CTA
        run far ahead of the others of its cluster, as a GPU's CTAs drift apart: a refill
        issued into another CTA's stage before that CTA released it (a missing remote
        "empty" arrival) then lands while the stage is still in use there."""
        if self.burst > 1 and self.current in candidates and self.rng.random() < 1 - 1 / self.burst:
            return self.current
        self.current = int(candidates[self.rng.integers(len(candidates))])
        return self.current

    def publish(self, cta: Optional[int] = None) -> None:
        """Release: every byte CTA ``cta`` (the running one) wrote becomes globally visible."""
        c = self.current if cta is None else cta
        mask = self.dirty[c]
        self.data[mask] = self.views[c][mask]
        mask[:] = False

    def refresh(self) -> None:
        """Acquire: the running CTA's copy catches up with global memory (its own
        unpublished bytes stay)."""
        keep = self.dirty[self.current]
        np.copyto(self.views[self.current], self.data, where=~keep)

    def byte_index(self, offsets: np.ndarray, width: int) -> np.ndarray:
        return (np.asarray(offsets, np.int64)[:, None] + np.arange(width, dtype=np.int64)).reshape(-1)

    def written(self, offsets: np.ndarray, width: int) -> None:
        """A weak store of the running CTA wrote these bytes of its copy."""
        self.dirty[self.current, self.byte_index(offsets, width)] = True

    def strong_before(self, offsets: np.ndarray, width: int) -> None:
        """Before a strong access: the CTA's unpublished bytes at its addresses go out."""
        b = self.byte_index(offsets, width)
        c = self.current
        mine = b[self.dirty[c, b]]
        self.data[mine] = self.views[c][mine]
        self.dirty[c, mine] = False

    def strong_after(self, offsets: np.ndarray, width: int) -> None:
        """After a strong access: the CTA's copy holds global memory's bytes there."""
        b = self.byte_index(offsets, width)
        self.views[self.current, b] = self.data[b]


def ordering(parts: list[str]) -> tuple[bool, bool, bool]:
    """(strong, releases, acquires) of a memory instruction's qualifiers; CTA-scope orderings
    do not reach other CTAs (a CTA's threads share one copy)."""
    mods = set(parts[1:])
    if mods & CTA_SCOPE:
        return bool(mods & STRONG), False, False
    return bool(mods & STRONG), bool(mods & RELEASING), bool(mods & ACQUIRING)
