"""TMA: ``cp.async.bulk.tensor`` (tile mode, 1-5-D), ``cp.reduce.async.bulk.tensor`` and the
bulk async-group instructions (PTX ISA, "Data Movement and Conversion Instructions:
cp.async.bulk.tensor").

A tensor operand ``[map, {c0, ...}]`` names a 128-byte tensor map (``codegen.tensormap``) by
its generic address (a kernel parameter after ``cvta.param``, or global memory) and the
signed coordinates of the box's first element, innermost first.  The box is laid out in
shared memory row-major (dim 0 fastest); a swizzle of W bytes XORs the 16-byte chunk index
(address bits 4..) with the row within the repeat (bits 7..), on the absolute shared address,
as ``wgmma`` descriptors read it.  Elements outside the tensor read as zero (NVIDIA's maps
never ask for the NaN fill) and are not written by stores.

Loads complete on an mbarrier (``mbarrier::complete_tx::bytes``): the tx-count drops by the
box's bytes when the copy is issued, but the bytes land in shared memory only when that
mbarrier's phase completes, so a kernel that reads them without waiting sees stale data.
Stores and reductions join the issuing thread's bulk async-group; ``commit_group`` closes
the group and ``wait_group{.read} N`` performs every group but the newest N, reading shared
memory then.  The source is read by the issuing thread for the race detector when the copy
is issued (other warps' writes to it must happen before: a CTA barrier), and writing it
before the wait that ends the read traps (``asynchrony``).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...codegen.tensormap import ElementType, TensorMap, TensorMapError, decode
from ..machine import KernelTrap
from ..memory import gather
from ..operands import reader
from ..parser import Addr
from ..ptxtypes import BF16, ptx_type
from ..registry import UnsupportedInstruction
from .memory import address_reader, locate, read_memory, thread_ids
from .mbarrier import mbarrier_slots
from .mma import read_in_flight
from .tensormap import check_acquired

U32 = ptx_type("u32")
S32 = ptx_type("s32")
NUMPY_TYPES = {ElementType.U8: np.uint8, ElementType.U16: np.uint16, ElementType.U32: np.uint32,
               ElementType.S32: np.int32, ElementType.U64: np.uint64, ElementType.F16: np.float16,
               ElementType.F32: np.float32, ElementType.F64: np.float64, ElementType.BF16: BF16}
#: the asynchrony family of stores' and reductions' shared-memory reads (``wait_group`` ends them)
STORE_FAMILY = "bulk.store"
REDUCTIONS = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
              "or": np.bitwise_or, "xor": np.bitwise_xor}


@lru_cache(maxsize=256)
def decode_map(raw: bytes, where: str) -> TensorMap:
    try:
        return decode(raw)
    except TensorMapError as err:
        raise KernelTrap("tensormap", f"{where}: {err}") from None


def box_offsets(tmap: TensorMap, coords: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(byte offset from the map's address, in-bounds mask) of every box element, in the
    box's shared-memory order."""
    grids = np.meshgrid(*[np.arange(b, dtype=np.int64) for b in reversed(tmap.box)], indexing="ij")
    offset = np.zeros(grids[0].shape, np.int64)
    inside = np.ones(grids[0].shape, bool)
    strides = (tmap.element_bytes, *tmap.strides)
    for k in range(tmap.rank):
        c = grids[tmap.rank - 1 - k] + coords[k]
        inside &= (c >= 0) & (c < tmap.dims[k])
        offset += c * strides[k]
    return offset.reshape(-1), inside.reshape(-1)


def shared_offsets(tmap: TensorMap, start: int) -> np.ndarray:
    """Byte offsets in the CTA's window of every box element, swizzled as the map says."""
    width = tmap.swizzle.span
    n = tmap.element_bytes
    addr = start + np.arange(tmap.box_bytes // n, dtype=np.int64) * n
    if width:
        if tmap.box[0] * n > width:
            raise KernelTrap("tensormap", f"box rows of {tmap.box[0] * n} bytes exceed the "
                                          f"{width}-byte swizzle")
        addr = addr ^ (((addr >> 7) & (width // 16 - 1)) << 4)
    return addr


def element_bytes_at(flat: np.ndarray, offsets: np.ndarray, n: int) -> np.ndarray:
    """(elements, n) bytes at byte ``offsets`` of ``flat``."""
    return flat[offsets[:, None] + np.arange(n, dtype=np.int64)]


class TensorOperand:
    """``[map, {coords}]``: reads the map and the coordinates of one thread."""

    def __init__(self, ctx, op: Addr, rank: int, where: str):
        if not isinstance(op, Addr) or op.coords is None or len(op.coords.items) != rank:
            raise UnsupportedInstruction(f"{where}: expected a {rank}-D tensor operand")
        self.addr, self.space = address_reader(ctx, Addr(op.base, op.offset), "generic")
        self.coords = [reader(ctx, c, S32) for c in op.coords.items]
        self.where = where

    def read(self, m, tid: np.ndarray) -> tuple[TensorMap, list[int]]:
        base = np.uint64(np.asarray(self.addr(m, tid)).reshape(-1)[0])
        check_acquired(m, int(np.asarray(thread_ids(m, tid)).reshape(-1)[0]), int(base), self.where)
        words = read_memory(m, np.repeat(tid, 16), base + np.arange(16, dtype=np.uint64) * np.uint64(8),
                            8, self.space)
        tmap = decode_map(np.asarray(words, np.uint64).tobytes(), self.where)
        coords = [int(np.asarray(c(m, tid)).reshape(-1)[0]) for c in self.coords]
        return tmap, coords


def global_flat(m, tmap: TensorMap, offsets: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """Offsets into global memory's byte array of the in-bounds elements (faults if any lies
    outside every allocation)."""
    addr = (np.uint64(tmap.address) + offsets[inside].astype(np.uint64))
    if not addr.size:
        return np.zeros(0, np.int64)
    _, offs = locate(m, np.zeros(addr.size, np.int64), addr, tmap.element_bytes, "global", strong=True)
    return offs


def count_box(m, tid: int, warps: set, tmap: TensorMap, coords: list[int], store: bool) -> None:
    """A bulk tensor copy's global traffic (``launch(traffic=True)``): one request of the
    distinct sectors its in-bounds elements lie in, once per warp that issues it (the
    hardware's copy is a warp-uniform instruction: NVIDIA's warp-specialized stores are
    issued by all 32 lanes of one warp); ``warps``: those already counted."""
    if m.launch.traffic is None or tid // 32 in warps:
        return
    warps.add(tid // 32)
    offsets, inside = box_offsets(tmap, coords)
    if inside.any():
        addr = np.uint64(tmap.address) + offsets[inside].astype(np.uint64)
        m.launch.traffic.record(np.full(addr.size, tid, np.int64), addr, tmap.element_bytes, store)


# ----------------------------------------------------------------------------- instructions
def is_bulk_group_or_tensor(parts: list[str]) -> bool:
    """``cp.async.bulk.tensor``, ``cp.reduce.async.bulk.tensor`` and the bulk group's
    commit and wait: this module's (``cpasync`` dispatches every other ``cp``)."""
    return (parts[1:4] in (["async", "bulk", "tensor"], ["async", "bulk", "commit_group"],
                           ["async", "bulk", "wait_group"]) or parts[1:5] == ["reduce", "async", "bulk", "tensor"])


def compile_bulk_cp(ctx, ins):
    parts = ins.parts
    where = f"PTX line {ins.line} ({ins.opcode})"
    if parts[1:4] == ["async", "bulk", "tensor"] or parts[1:5] == ["reduce", "async", "bulk", "tensor"]:
        return compile_tensor(ctx, ins, where)
    if parts[1:] == ["async", "bulk", "commit_group"]:
        return lambda m, idx: commit_group(m, thread_ids(m, idx))
    if parts[1:4] == ["async", "bulk", "wait_group"]:
        keep = reader(ctx, ins.operands[0], U32)
        return lambda m, idx: wait_group(m, thread_ids(m, idx), int(np.max(keep(m, idx))))
    raise UnsupportedInstruction(f"{ins.opcode}")


def compile_tensor(ctx, ins, where: str):
    mods = set(ins.parts[1:])
    rank_part = next((p for p in ins.parts if p[:-1].isdigit() and p.endswith("d")), None)
    if rank_part is None or "tile" not in mods:
        raise UnsupportedInstruction(f"{where}: only the tile mode of cp.async.bulk.tensor")
    rank = int(rank_part[:-1])
    ops = ins.operands
    if ins.parts[1] == "async" and ins.parts.index("global") > ins.parts.index(next(
            p for p in ins.parts if p.startswith("shared"))):
        return compile_load(ctx, ins, rank, where)
    if "shared::cluster" in mods or "multicast::cluster" in mods:
        raise UnsupportedInstruction(f"{where}: cluster sources")
    op = next((p for p in ins.parts if p in REDUCTIONS), None) if ins.parts[1] == "reduce" else None
    if ins.parts[1] == "reduce" and op is None:
        raise UnsupportedInstruction(f"{where}: reduction {ins.parts}")
    tensor = TensorOperand(ctx, ops[0], rank, where)
    src, _ = address_reader(ctx, ops[1], "shared")

    def run(m, idx):
        counted: set = set()
        for tid in thread_ids(m, idx).tolist():
            t = np.array([tid])
            tmap, coords = tensor.read(m, t)
            count_box(m, tid, counted, tmap, coords, store=True)
            start = int(np.asarray(src(m, t)).reshape(-1)[0])
            source = int(m.cta_of[tid]) * m.smem_size + shared_offsets(tmap, start)
            region = (source[:, None] + np.arange(tmap.element_bytes)).reshape(-1)
            read_in_flight(m, region, tid, STORE_FAMILY)
            pending_group(m, tid).append((tmap, coords, int(m.cta_of[tid]), start, op))
    return run


def compile_load(ctx, ins, rank: int, where: str):
    """A box into shared memory, completing on an mbarrier.  A ``shared::cluster``
    destination is taken as the issuing CTA's own (its ``shared::cta`` addresses are
    the same there); with ``.multicast::cluster`` the box lands at the same offset in
    every CTA of the cluster that ``ctaMask`` names, each on its mbarrier at the same
    offset."""
    ops = ins.operands
    if not any(p.startswith("mbarrier::complete_tx") for p in ins.parts):
        raise UnsupportedInstruction(f"{where}: loads complete on an mbarrier")
    dst, _ = address_reader(ctx, ops[0], "shared")
    tensor = TensorOperand(ctx, ops[1], rank, where)
    slots = mbarrier_slots(ctx, ops[2], ["", "shared"])
    mask_r = reader(ctx, ops[3], ptx_type("u16")) if "multicast::cluster" in ins.parts else None
    from .cpasync import copy_to_shared  # noqa: PLC0415  (cpasync imports this module)

    def run(m, idx):
        counted: set = set()
        for tid in thread_ids(m, idx).tolist():
            t = np.array([tid])
            tmap, coords = tensor.read(m, t)
            count_box(m, tid, counted, tmap, coords, store=False)
            offsets, inside = box_offsets(tmap, coords)
            n = tmap.element_bytes
            data = np.zeros((len(offsets), n), np.uint8)
            data[inside] = element_bytes_at(m.gmem.data if m.weak is None else m.weak.view,
                                            global_flat(m, tmap, offsets, inside), n)
            start = int(np.asarray(dst(m, t)).reshape(-1)[0])
            place = shared_offsets(tmap, start)
            if place.max() + n > m.smem_size:
                raise KernelTrap("tensormap", f"{where}: box of {tmap.box_bytes} bytes at shared "
                                              f"offset {start:#x} overflows the window")
            bar = int(slots(m, t)[0]) % m.smem_size
            for cta in _destinations(m, tid, None if mask_r is None else mask_r(m, t), where):
                window = cta * m.smem_size
                # as a bulk copy's: the bytes land when the phase their complete_tx (queued
                # until a thread looks at the mbarrier) completes, so reading them unwaited traps
                copy_to_shared(m, tid, (window + place[:, None] + np.arange(n)).reshape(-1), data.reshape(-1),
                               window + bar, where)
    return run


def _destinations(m, tid: int, mask, where: str) -> list[int]:
    """The CTAs (batch indices) a box of thread ``tid`` lands in: its own, or those of its
    cluster whose rank bit ``mask`` sets."""
    cta = int(m.cta_of[tid])
    if mask is None:
        return [cta]
    per = m.launch.cta_per_cluster
    bits = int(np.asarray(mask).reshape(-1)[0])
    if bits >> per:
        raise KernelTrap("tensormap", f"{where}: ctaMask {bits:#x} names CTAs outside a cluster of {per}")
    ctas = [cta // per * per + r for r in range(per) if bits >> r & 1]
    gone = [c % per for c in ctas if c != cta and m.exited(c)]
    if gone:
        raise KernelTrap("async", f"{where}: multicast to CTA rank {gone[0]} of the cluster, whose threads "
                                  f"have all exited")
    return ctas


# ----------------------------------------------------------------------------- deferred effects
def pending_group(m, tid: int) -> list:
    """The open bulk async-group of thread ``tid``."""
    groups = m.bulk_groups.setdefault(tid, [[]])
    return groups[-1]


def commit_group(m, tids: np.ndarray) -> None:
    m.asynchrony.commit(STORE_FAMILY, tids)
    for tid in tids.tolist():
        pending_group(m, tid)
        m.bulk_groups[tid].append([])


def wait_group(m, tids: np.ndarray, keep: int) -> None:
    m.asynchrony.complete_groups(STORE_FAMILY, tids, keep)
    for tid in tids.tolist():
        pending_group(m, tid)
        groups = m.bulk_groups[tid]
        closed, open_group = groups[:-1], groups[-1]
        done = closed[:max(len(closed) - keep, 0)]
        m.bulk_groups[tid] = closed[len(done):] + [open_group]
        for group in done:
            for entry in group:
                store_box(m, *entry)


def store_box(m, tmap: TensorMap, coords: list[int], cta: int, start: int, op) -> None:
    offsets, inside = box_offsets(tmap, coords)
    n = tmap.element_bytes
    source = cta * m.smem_size + shared_offsets(tmap, start)[inside]
    data = element_bytes_at(m.shared, source, n)
    flat = global_flat(m, tmap, offsets, inside)
    if op is not None:
        # a reduction is atomic per element in global memory (L2), whatever CTAs interleave:
        # in the interleaved mode it goes to global memory, not the CTA's copy
        if m.weak is not None:
            m.weak.strong_before(flat, n)
        memory = m.gmem.data
        dtype = np.dtype(NUMPY_TYPES[tmap.element_type])
        old = gather(memory, flat, n).view(dtype) if n > 1 else memory[flat].view(dtype)
        new = np.ascontiguousarray(data).view(dtype).reshape(-1)
        data = REDUCTIONS[op](old, new).astype(dtype).view(np.uint8).reshape(-1, n)
        memory[flat[:, None] + np.arange(n, dtype=np.int64)] = data
        if m.weak is not None:
            m.weak.strong_after(flat, n)
        return
    memory = m.gmem.data if m.weak is None else m.weak.view
    memory[flat[:, None] + np.arange(n, dtype=np.int64)] = data
    if m.weak is not None:
        m.weak.written(flat, n)

