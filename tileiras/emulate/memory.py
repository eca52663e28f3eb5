"""Address spaces: one flat numpy byte array per space.

* global: one array for the whole launch; device addresses start at ``GLOBAL_BASE``.  Kernel
  arguments and module ``.global``/``.const`` variables are allocated in it.
* shared: one window of ``smem_size`` bytes per CTA, stored as ``(ctas, smem_size)``;
  shared::cta addresses are offsets in the window.  A shared::cluster address of the CTA
  with cluster rank r is ``(r + 1) << SHARED_RANK_SHIFT | offset``.
* local: ``(threads, local_size)``; local addresses are offsets in the thread's frame.
* generic: global addresses are themselves; shared and local addresses are mapped to the
  windows starting at ``SHARED_GENERIC_BASE`` and ``LOCAL_GENERIC_BASE``; kernel
  parameters (``cvta.param``, the tensor maps of TMA) to ``PARAM_GENERIC_BASE``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GLOBAL_BASE = 0x1_0000_0000
SHARED_GENERIC_BASE = 0x7F00_0000_0000
LOCAL_GENERIC_BASE = 0x7E00_0000_0000
PARAM_GENERIC_BASE = 0x7D00_0000_0000     # kernel parameters (cvta.param: tensor maps)
WINDOW_SIZE = 0x0100_0000_0000
SHARED_RANK_SHIFT = 24
SHARED_OFFSET_MASK = (1 << SHARED_RANK_SHIFT) - 1


class MemoryFault(RuntimeError):
    """An access outside every allocation (the message names the address and space)."""


@dataclass
class Allocation:
    name: str
    address: int
    size: int


class GlobalMemory:
    """A bump allocator over a growable byte array."""

    def __init__(self, capacity: int = 1 << 16):
        self.data = np.zeros(capacity, np.uint8)
        self.top = 0
        self.allocations: list[Allocation] = []

    def allocate(self, name: str, size: int, align: int = 256) -> int:
        offset = -(-self.top // align) * align
        end = offset + max(size, 1)
        if end > len(self.data):
            grown = np.zeros(max(end, 2 * len(self.data)), np.uint8)
            grown[:self.top] = self.data[:self.top]
            self.data = grown
        self.top = end
        addr = GLOBAL_BASE + offset
        self.allocations.append(Allocation(name, addr, size))
        return addr

    def write(self, address: int, payload: bytes) -> None:
        off = address - GLOBAL_BASE
        self.data[off:off + len(payload)] = np.frombuffer(payload, np.uint8)

    def read(self, address: int, size: int) -> bytes:
        off = address - GLOBAL_BASE
        return self.data[off:off + size].tobytes()

    def offsets(self, addr: np.ndarray, width: int) -> np.ndarray:
        """Byte offsets into ``data`` for accesses of ``width`` bytes; faults if out of range."""
        off = addr.astype(np.uint64) - np.uint64(GLOBAL_BASE)
        off = off.astype(np.int64)
        if off.size and (off.min() < 0 or off.max() + width > self.top):
            bad = addr[(off < 0) | (off + width > self.top)][0]
            raise MemoryFault(f"global access of {width} bytes at address {int(bad):#x} is outside "
                              f"every allocation ({self.describe()})")
        return off

    def read_string(self, address: int, limit: int = 1 << 16) -> bytes:
        off = address - GLOBAL_BASE
        if off < 0 or off >= self.top:
            raise MemoryFault(f"string read at {address:#x} outside global memory")
        chunk = self.data[off:min(off + limit, self.top)].tobytes()
        return chunk.split(b"\0", 1)[0]

    def describe(self) -> str:
        return ", ".join(f"{a.name}@{a.address:#x}+{a.size}" for a in self.allocations[-8:])


def gather(flat: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """Read ``width``-byte little-endian values at byte ``offsets`` of a flat uint8 array,
    returned as raw unsigned bits (uint8/16/32/64) or, for 16 bytes, as (n, 2) uint64."""
    n = offsets.shape[0]
    if width in (1, 2, 4, 8) and n and not np.any(offsets % width):
        view = flat.view(np.dtype(f"u{width}")) if flat.size % width == 0 else None
        if view is not None:
            return view[offsets // width]
    idx = offsets[:, None] + np.arange(width, dtype=np.int64)
    raw = flat[idx]
    if width == 16:
        return raw.view(np.uint64).reshape(n, 2)
    return raw.view(np.dtype(f"u{width}")).reshape(n)


def scatter(flat: np.ndarray, offsets: np.ndarray, width: int, values: np.ndarray) -> None:
    """Write raw little-endian values (dtype of ``width`` bytes) at byte ``offsets``."""
    n = offsets.shape[0]
    values = np.ascontiguousarray(values)
    if width in (1, 2, 4, 8) and n and not np.any(offsets % width) and flat.size % width == 0:
        flat.view(np.dtype(f"u{width}"))[offsets // width] = values.reshape(n).view(
            np.dtype(f"u{width}"))
        return
    idx = offsets[:, None] + np.arange(width, dtype=np.int64)
    flat[idx] = values.reshape(n, -1).view(np.uint8).reshape(n, width)
