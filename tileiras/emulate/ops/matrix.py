"""ldmatrix / stmatrix: warp-collective moves of 8x8 matrices of 16-bit elements between
shared memory and registers (PTX ISA, "Warp Level Matrix Load/Store Instructions").

For ``.x1``/``.x2``/``.x4`` the warp moves one, two or four matrices; the eight rows of
matrix ``i`` start at the addresses held by lanes ``8i`` to ``8i + 7``.  Register ``i`` of
lane ``l`` holds row ``l / 4``, columns ``2 (l % 4)`` and ``2 (l % 4) + 1`` of matrix ``i``;
with ``.trans`` it holds column ``l / 4``, rows ``2 (l % 4)`` and ``2 (l % 4) + 1`` instead
(the matrix is transposed on the way).  ``ldmatrix.m16n16.trans.b8`` (``.x1``/``.x2``)
loads 16x16 matrices of bytes, rows from lanes ``16i`` to ``16i + 15``: registers
``2i + j`` of lane ``l`` hold column ``l / 4 + 8j``, rows ``4 (l % 4)`` to ``4 (l % 4) + 3``,
low byte first (an 8-bit ``mma`` B fragment read from K rows of N).
"""
from __future__ import annotations

import numpy as np

from ..memory import SHARED_OFFSET_MASK
from ..operands import reader, vector_items, writer
from ..ptxtypes import ptx_type
from ..registry import UnsupportedInstruction, handles
from .memory import address_reader, read_memory, space_of, thread_ids, write_memory

U32 = ptx_type("u32")


def matrix_operands(ctx, ins, addr_op, regs_op):
    """(per-thread row address reader over the whole batch, space, register operands, .trans)."""
    mods = set(ins.parts[1:])
    bytes16 = ins.parts[0] == "ldmatrix" and {"m16n16", "b8", "trans"} <= mods
    if ("m8n8" not in mods or "b16" not in mods) and not bytes16:
        raise UnsupportedInstruction(f"{ins.parts[0]} other than .m8n8 .b16 and .m16n16.trans.b8")
    count = next(int(p[1:]) for p in ins.parts[1:] if p in ("x1", "x2", "x4"))
    regs = vector_items(regs_op)
    if len(regs) != count * (2 if bytes16 else 1):
        raise UnsupportedInstruction(f"{ins.parts[0]}.x{count} with {len(regs)} registers")
    addr_r, space = address_reader(ctx, addr_op, space_of(ins.parts))
    return addr_r, space, regs, "trans" in mods


def element_addresses(m, tids, addr_r, matrix: int, trans: bool) -> list[tuple[np.ndarray, int]]:
    """[(address per thread, bytes)] of what register ``matrix`` of each thread holds, low
    bits first: one 4-byte pair, or with ``.trans`` two 2-byte elements from two rows."""
    rows = np.broadcast_to(np.asarray(addr_r(m, slice(None)), np.uint64), (m.n,))
    lane = m.linear_tid[tids] % 32
    first = m.warp_base[tids] + 8 * matrix
    if not trans:
        return [(rows[first + lane // 4] + (4 * (lane % 4)).astype(np.uint64), 4)]
    column = (2 * (lane // 4)).astype(np.uint64)
    return [(rows[first + 2 * (lane % 4) + k] + column, 2) for k in (0, 1)]


def count_rows(m, tids, addr_r, space: str, count: int, store: bool) -> None:
    """Shared-memory traffic of an ldmatrix/stmatrix: the 16-byte rows lanes 0 to 8 count - 1
    point at."""
    if m.launch.traffic is None or space != "shared":
        return
    rows = np.broadcast_to(np.asarray(addr_r(m, slice(None)), np.uint64), (m.n,))[tids]
    lanes = m.linear_tid[tids] % 32 < 8 * count
    offsets = (rows & np.uint64(SHARED_OFFSET_MASK)).astype(np.int64)
    m.launch.traffic.record_shared(tids[lanes], offsets[lanes], 16, store=store)


@handles("ldmatrix")
def compile_ldmatrix(ctx, ins):
    addr_r, space, regs, trans = matrix_operands(ctx, ins, ins.operands[1], ins.operands[0])
    writers = [writer(ctx, r, U32) for r in regs]
    if "m16n16" in ins.parts:
        return _bytes16(addr_r, space, writers)

    def run(m, idx):
        tids = thread_ids(m, idx)
        count_rows(m, tids, addr_r, space, len(writers), store=False)
        for i, write in enumerate(writers):
            value = np.zeros(len(tids), np.uint32)
            for k, (addr, width) in enumerate(element_addresses(m, tids, addr_r, i, trans)):
                value |= read_memory(m, tids, addr, width, space).astype(np.uint32) << np.uint32(16 * k)
            write(m, idx, value)
    return run


def _bytes16(addr_r, space: str, writers):
    """``ldmatrix.m16n16.trans.b8``: register ``2i + j`` of lane ``l`` holds the bytes of
    rows ``4 (l % 4) + b`` (b = 0..3, low byte first) at column ``l / 4 + 8j`` of matrix
    ``i``, whose 16 rows lanes ``16i`` to ``16i + 15`` point at."""
    def run(m, idx):
        tids = thread_ids(m, idx)
        count_rows(m, tids, addr_r, space, len(writers), store=False)   # 16 rows a pair of registers
        rows = np.broadcast_to(np.asarray(addr_r(m, slice(None)), np.uint64), (m.n,))
        lane = m.linear_tid[tids] % 32
        for r, write in enumerate(writers):
            first = m.warp_base[tids] + 16 * (r // 2) + 4 * (lane % 4)
            column = (lane // 4 + 8 * (r % 2)).astype(np.uint64)
            value = np.zeros(len(tids), np.uint32)
            for b in range(4):
                byte = read_memory(m, tids, rows[first + b] + column, 1, space).astype(np.uint32)
                value |= byte << np.uint32(8 * b)
            write(m, idx, value)
    return run


@handles("stmatrix")
def compile_stmatrix(ctx, ins):
    addr_r, space, regs, trans = matrix_operands(ctx, ins, ins.operands[0], ins.operands[1])
    readers = [reader(ctx, r, U32) for r in regs]

    def run(m, idx):
        tids = thread_ids(m, idx)
        count_rows(m, tids, addr_r, space, len(readers), store=True)
        for i, read in enumerate(readers):
            value = np.broadcast_to(np.asarray(read(m, idx), np.uint32), tids.shape)
            for k, (addr, width) in enumerate(element_addresses(m, tids, addr_r, i, trans)):
                part = value if width == 4 else (value >> np.uint32(16 * k)).astype(np.uint16)
                write_memory(m, tids, addr, width, space, part)
    return run
