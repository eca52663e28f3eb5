"""tensormap: tensor maps a kernel builds on the device (PTX ISA, "Parallel Synchronization
and Communication Instructions: tensormap.cp_fenceproxy").

NVIDIA's tileiras builds the tensor maps of arrays whose addresses a kernel loads (grouped
GEMM's tables on sm_90) in shared memory, then publishes each with

    tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [g], [s], 128;

a copy of the 128-byte map from shared to global memory fused with a release fence of the
tensormap proxy; the TMA instructions then name the global copy.  The copy is what has an
effect here: ``.sync.aligned`` means the whole warp executes it with the same operands, so
every thread's copy writes the same bytes.  The proxy fences that go with it
(``fence.proxy.tensormap::generic``) are ``data.compile_fence``'s.
"""
from __future__ import annotations

import numpy as np

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
    return run
