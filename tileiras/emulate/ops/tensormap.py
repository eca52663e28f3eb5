"""tensormap: tensor maps a kernel builds on the device (PTX ISA, "Parallel Synchronization
and Communication Instructions: tensormap.cp_fenceproxy").

NVIDIA's tileiras builds the tensor maps of arrays whose addresses a kernel loads (grouped
GEMM's tables on sm_90) in shared memory, then publishes each with

    tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [g], [s], 128;

a copy of the 128-byte map from shared to global memory fused with a release fence of the
tensormap proxy; the TMA instructions then name the global copy.  ``.sync.aligned`` means
the whole warp executes it with the same operands, so every thread's copy writes the same
bytes.  A thread may read the map through the tensormap proxy (a ``cp.async.bulk.tensor``
naming it) only after its own ``fence.proxy.tensormap::generic.acquire`` of the address
that follows the release (PTX ISA, "Memory Consistency Model: proxy fences"): each release
is counted per address, each acquire records the count it saw, and a bulk tensor copy
reading a map released in this launch whose latest release its thread has not acquired
traps (``check_acquired``).  Maps the kernel never released (the host wrote them) need no
acquire.
"""
from __future__ import annotations

import numpy as np

from ..machine import KernelTrap
from ..operands import reader
from ..ptxtypes import ptx_type
from ..registry import UnsupportedInstruction, handles
from .memory import address_reader, read_memory, thread_ids, write_memory

U32 = ptx_type("u32")
MAP_BYTES = 128
WORD = 8


@handles("tensormap")
def compile_tensormap(ctx, ins):
    """tensormap.cp_fenceproxy.global.shared::cta...: copy ``size`` (128) bytes from shared
    to global memory, 8 bytes at a time, for every executing thread."""
    if len(ins.parts) < 2 or ins.parts[1] != "cp_fenceproxy":
        raise UnsupportedInstruction(f"{ins.opcode}: only tensormap.cp_fenceproxy is modelled")
    if "global" not in ins.parts or not any(p.startswith("shared") for p in ins.parts):
        raise UnsupportedInstruction(f"{ins.opcode}: expected a copy from shared to global memory")
    dst, _ = address_reader(ctx, ins.operands[0], "global")
    src, _ = address_reader(ctx, ins.operands[1], "shared")
    size = reader(ctx, ins.operands[2], U32)

    def run(m, idx):
        tids = thread_ids(m, idx)
        nbytes = int(np.asarray(size(m, idx)).reshape(-1)[0])
        if nbytes != MAP_BYTES:
            raise UnsupportedInstruction(f"{ins.opcode}: size {nbytes}; the ISA allows only {MAP_BYTES}")
        step = np.arange(0, MAP_BYTES, WORD, dtype=np.uint64)
        rows = np.repeat(tids, len(step))

        def words_of(address) -> np.ndarray:
            """The address of every word of every thread's map, thread by thread."""
            base = np.broadcast_to(np.asarray(address(m, idx), np.uint64), tids.shape)
            return (base[:, None] + step).reshape(-1)
        words = read_memory(m, rows, words_of(src), WORD, "shared")
        write_memory(m, rows, words_of(dst), WORD, "global", words, strong=True)
        for at in np.unique(np.asarray(dst(m, idx), np.uint64)).tolist():
            m.map_releases[at] = m.map_releases.get(at, 0) + 1
    return run


def acquire(ctx, ins):
    """``fence.proxy.tensormap::generic.acquire.<scope> [a], 128``: each executing thread
    has acquired the latest release of the map at generic address ``a``."""
    if len(ins.operands) != 2:
        raise UnsupportedInstruction(f"{ins.opcode}: expected [address], size")
    addr, _ = address_reader(ctx, ins.operands[0], "generic")

    def run(m, idx):
        tids = thread_ids(m, idx)
        at = np.broadcast_to(np.asarray(addr(m, idx), np.uint64), tids.shape)
        for t, a in zip(tids.tolist(), at.tolist()):
            m.map_acquires[(t, a)] = m.map_releases.get(a, 0)
    return run


def check_acquired(m, tid: int, address: int, where: str) -> None:
    """Trap unless thread ``tid`` acquired the latest release of the map at ``address``
    (generic) before reading it through the tensormap proxy."""
    released = m.map_releases.get(address, 0)
    if released and m.map_acquires.get((tid, address), 0) != released:
        raise KernelTrap("tensormap", f"{where}: thread {tid} reads the tensor map at {address:#x} through "
                                      "the tensormap proxy without a fence.proxy.tensormap::generic.acquire "
                                      "after its tensormap.cp_fenceproxy release")
