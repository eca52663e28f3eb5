"""tcgen05: the fifth-generation tensor core of sm_100 (PTX ISA, "TensorCore 5th Generation
Family Instructions"): tensor memory, its allocation, loads and stores, and the MMA that
reads shared memory (or tensor memory) and accumulates in tensor memory.

Tensor memory is per CTA: 128 lanes of 512 32-bit columns, addressed as ``lane << 16 |
column``.  ``alloc`` hands out column ranges (a power of two, at least 32) and writes the
address of the first to shared memory; ``dealloc`` returns them.

An MMA runs to completion when it is issued, so ``tcgen05.commit`` can arrive on its
mbarrier at once, and the fences and ``wait::ld/st`` have nothing to order (the
emulator's memory is sequentially consistent).

The matrix D of an ``M x N`` MMA (one 32-bit column per element) sits in tensor memory
as ``d_positions`` says: ``M = 128`` puts row i in lane i; ``M = 64`` puts rows
``16 q .. 16 q + 15`` in the first 16 lanes of the q-th 32-lane quarter.  The two shapes of
``ld``/``st`` that NVIDIA's tileiras uses move data between those lanes and a warp's
registers (``fragment``).
"""
from __future__ import annotations

import numpy as np

from ..machine import KernelTrap
from ..operands import reader, vector_items, writer
from ..parser import Addr
from ..ptxtypes import ptx_type
from ..registry import UnsupportedInstruction, handles
from .cpasync import arrive_later
from .mbarrier import mbarrier_slots, per_thread
from .memory import address_reader, space_of, write_memory
from .mma import ELEMENT_BITS, decode, read_in_flight, round_accumulator, shared_matrix
from .mma import SWIZZLE_BYTES as WGMMA_SWIZZLE
from .mma import descriptor_offsets as wgmma_offsets
from .warp import warp_groups

U32, U64, PRED = ptx_type("u32"), ptx_type("u64"), ptx_type("pred")
LANES, COLUMNS = 128, 512
#: the descriptor's layout field (bits 61-63) -> swizzle width in bytes
SWIZZLE_BYTES = {0: 0, 2: 128, 4: 64, 6: 32}
#: instruction-descriptor element formats per kind (bits 7-9 and 10-12)
KIND_FORMATS = {"f16": {0: "f16", 1: "bf16"}, "tf32": {2: "tf32"},
                "f8f6f4": {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"},
                "i8": {0: "u8", 1: "s8"}}
KIND_K_BYTES = {"f16": 32, "tf32": 32, "f8f6f4": 32, "i8": 32}


def tensor_memory(m) -> np.ndarray:
    """The batch's tensor memory, [cta, lane, column] of uint32, made on first use."""
    tmem = getattr(m, "tmem", None)
    if tmem is None:
        tmem = m.tmem = np.zeros((m.ncta, LANES, COLUMNS), np.uint32)
        m.tmem_owner = np.zeros((m.ncta, COLUMNS), bool)
    return tmem


def split_address(addr: int) -> tuple[int, int]:
    return addr >> 16, addr & 0xFFFF


def first_of_warps(m, idx) -> tuple[np.ndarray, np.ndarray]:
    """(index array, start of each warp's run in it), requiring whole warps (``.aligned``)."""
    idx, _, starts = warp_groups(m, idx)
    sizes = np.diff(np.r_[starts, idx.size])
    if np.any(sizes != 32):
        raise KernelTrap("tcgen05", f"tcgen05 instruction executed by {int(sizes.min())} threads "
                                    "of a warp, not all 32 (.sync.aligned)")
    return idx, starts


# -- allocation -------------------------------------------------------------------------------
def per_warp(first_reader, second_reader):
    """``run(m, idx)`` calling ``each(m, cta, idx of the warp's first thread, first, second)``
    once per warp with the two operands of that warp's first thread (``.sync.aligned``
    instructions that one warp executes together)."""
    def wrap(each):
        def run(m, idx):
            tensor_memory(m)
            idx, starts = first_of_warps(m, idx)
            first = np.broadcast_to(np.asarray(first_reader(m, idx)), idx.shape)
            second = np.broadcast_to(np.asarray(second_reader(m, idx)), idx.shape)
            for s in starts:
                each(m, int(m.cta_of[idx[s]]), idx[s:s + 1], first[s:s + 1], int(second[s]))
        return run
    return wrap


def compile_alloc(ctx, ins):
    """alloc [dst], ncols: the first free run of ``ncols`` columns (a power of 2 from 32 to
    512, aligned to its size), its address written to shared memory at ``dst``."""
    addr_r, space = address_reader(ctx, ins.operands[0], space_of(ins.parts))

    @per_warp(addr_r, reader(ctx, ins.operands[1], U32))
    def run(m, cta, thread, addr, n):
        if n < 32 or n > COLUMNS or n & (n - 1):
            raise KernelTrap("tcgen05", f"tcgen05.alloc of {n} columns (a power of 2 from 32 to 512)")
        owner = m.tmem_owner[cta]
        free = next((c for c in range(0, COLUMNS, n) if not owner[c:c + n].any()), None)
        if free is None:
            raise KernelTrap("tcgen05", f"tcgen05.alloc of {n} columns: tensor memory is full")
        owner[free:free + n] = True
        write_memory(m, thread, addr, 4, space, np.uint32(free))
    return run


def compile_dealloc(ctx, ins):
    @per_warp(reader(ctx, ins.operands[0], U32), reader(ctx, ins.operands[1], U32))
    def run(m, cta, thread, taddr, n):
        _, col = split_address(int(taddr[0]))
        owner = m.tmem_owner[cta]
        if not owner[col:col + n].all():
            raise KernelTrap("tcgen05", f"tcgen05.dealloc of columns {col}..{col + n - 1} that are not allocated")
        owner[col:col + n] = False
    return run


# -- loads and stores -------------------------------------------------------------------------
def fragment(shape: str, num: int, split: int) -> tuple[np.ndarray, np.ndarray]:
    """(lane offset, column offset) of register r of lane l of the warp, [lane, register],
    relative to the instruction's address.

    ``32x32b``: lane l reads lane l, ``num`` consecutive columns.  ``16x32bx2``: the warp
    reads 16 lanes twice: lanes 0-15 of the warp the columns at the address, lanes 16-31
    the columns ``split`` further, each of the 16 tensor-memory lanes by the warp lane
    with the same remainder mod 16.  The other 16-lane shapes read 16 lanes of 2, 4 or 8
    columns a repeat, the lanes of a quad in one row (the PTX ISA's figures):
    ``16x64b`` register r at (l/4 + 8 (l%2), (l/2)%2 + 2r), ``16x128b`` at
    (l/4 + 8 (r%2), l%4 + 4 (r/2)), ``16x256b`` (mma's accumulator fragment) at
    (l/4 + 8 ((r/2)%2), r%2 + 2 (l%4) + 8 (r/4)); ``num`` counts registers."""
    lane, r = np.meshgrid(np.arange(32), np.arange(num), indexing="ij")
    if shape == "32x32b":
        return lane, r
    if shape == "16x32bx2":
        return lane % 16, r + split * (lane // 16)
    if shape == "16x64b":
        return lane // 4 + 8 * (lane % 2), (lane // 2) % 2 + 2 * r
    if shape == "16x128b":
        return lane // 4 + 8 * (r % 2), lane % 4 + 4 * (r // 2)
    if shape == "16x256b":
        return lane // 4 + 8 * ((r // 2) % 2), r % 2 + 2 * (lane % 4) + 8 * (r // 4)
    raise UnsupportedInstruction(f"tcgen05.ld/st shape .{shape}")


def tmem_address(ctx, op):
    """A reader of a tensor-memory address operand (``[%r]``, ``[%r+imm]`` or ``%r``)."""
    if not isinstance(op, Addr):
        return reader(ctx, op, U32)
    base, offset = reader(ctx, op.base, U32), np.uint32(op.offset)
    return base if not op.offset else (lambda m, idx: np.asarray(base(m, idx)) + offset)


def ld_st_operands(ctx, ins, regs_op, addr_op, split_op):
    shape = next((p for p in ins.parts if p in ("32x32b", "16x32bx2", "16x64b", "16x128b", "16x256b")), None)
    num = int(next(p for p in ins.parts if p.startswith("x") and p[1:].isdigit())[1:])
    packed = "pack::16b" in ins.parts or "unpack::16b" in ins.parts
    regs = vector_items(regs_op)
    per = {"32x32b": 1, "16x32bx2": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4}.get(shape)
    if per is None:
        raise UnsupportedInstruction(f"tcgen05.ld/st shape .{shape}")
    if len(regs) != num * per:
        raise UnsupportedInstruction(f"{'.'.join(ins.parts)} with {len(regs)} registers")
    split = int(split_op.value) if split_op is not None else 0
    if packed and shape in ("16x64b", "16x128b"):
        # a register's two halves are the columns 2c and 2c + 1 of its unpacked cell (r, c)
        lanes, cols = fragment(shape, num * per, split)
        lanes, cols = np.repeat(lanes, 2, 1), np.stack([2 * cols, 2 * cols + 1], 2).reshape(32, -1)
    else:   # the others' consecutive registers are adjacent columns: packing pairs them
        lanes, cols = fragment(shape, num * per * (2 if packed else 1), split)
    return regs, tmem_address(ctx, addr_op), lanes, cols, packed


def cells(m, idx, starts, taddr_r, lanes, cols):
    """(cta, lane, column) index arrays [thread, register] of the cells each thread moves."""
    taddr = np.broadcast_to(np.asarray(taddr_r(m, idx)), idx.shape)
    base = taddr[np.repeat(starts, 32)].astype(np.int64)
    lane = (base >> 16)[:, None] + lanes[np.arange(idx.size) % 32]
    col = (base & 0xFFFF)[:, None] + cols[np.arange(idx.size) % 32]
    if lane.max() >= LANES or col.max() >= COLUMNS:
        raise KernelTrap("tcgen05", f"tensor memory access at lane {int(lane.max())}, column {int(col.max())}")
    quarter = (m.linear_tid[idx] // 32 % 4)[:, None]
    if np.any(lane // 32 != quarter):       # warp w reaches lanes 32 (w % 4) .. 32 (w % 4) + 31 only
        t = int(np.flatnonzero(np.any(lane // 32 != quarter, axis=1))[0])
        raise KernelTrap("tcgen05", f"warp {int(m.linear_tid[idx][t]) // 32} accesses tensor-memory lane "
                         f"{int(lane[t].max())}, outside its quarter ({32 * int(quarter[t, 0])} on)")
    cta = np.broadcast_to(m.cta_of[idx][:, None], lane.shape)
    return cta, lane, col


def _ordered(m, cells: np.ndarray, who, write: bool) -> None:
    """The race detector's check of a tensor-memory access (``races.Races.tmem_access``)."""
    races = m.shared_races()
    if races is not None:
        races.tmem_access(cells, who, write)


def flat_cells(cta, lane, col) -> np.ndarray:
    return ((cta * LANES + lane) * COLUMNS + col).reshape(-1)


def compile_ld(ctx, ins):
    """tcgen05.ld: the cells it reads stay in flight until the thread's ``tcgen05.wait::ld``
    (an MMA or store writing them earlier is an error).  Its destination registers are
    used before the wait in NVIDIA's own PTX, so ptxas orders those: they are not kept."""
    ops = ins.operands
    regs, taddr_r, lanes, cols, packed = ld_st_operands(ctx, ins, ops[0], ops[1], ops[2] if len(ops) > 2 else None)
    writers = [writer(ctx, r, U32) for r in regs]

    def run(m, idx):
        tmem = tensor_memory(m)
        idx, starts = first_of_warps(m, idx)
        cta, lane, col = cells(m, idx, starts, taddr_r, lanes, cols)
        where = flat_cells(cta, lane, col)
        m.asynchrony.check_tmem(where, idx, "reads", ("tcgen05.mma", "tcgen05.st"))
        _ordered(m, where, np.repeat(idx, lane.shape[1]), False)
        m.asynchrony.defer_tmem(where, np.repeat(idx, lane.shape[1]), "tcgen05.ld", seq=np.zeros(where.size, np.int64))
        values = tmem[cta, lane, col]
        if packed:          # .pack::16b: the low halves of two adjacent columns in one register
            values = (values[:, 0::2] & np.uint32(0xFFFF)) | (values[:, 1::2] << np.uint32(16))
        for j, write in enumerate(writers):
            write(m, idx, values[:, j])
    return run


def compile_st(ctx, ins):
    ops = ins.operands        # [taddr], {immHalfSplitoff,} registers
    regs, taddr_r, lanes, cols, packed = ld_st_operands(ctx, ins, ops[-1], ops[0], ops[1] if len(ops) > 2 else None)
    readers = [reader(ctx, r, U32) for r in regs]

    def run(m, idx):
        tmem = tensor_memory(m)
        idx, starts = first_of_warps(m, idx)
        cta, lane, col = cells(m, idx, starts, taddr_r, lanes, cols)
        values = np.stack([np.broadcast_to(np.asarray(r(m, idx)), idx.shape) for r in readers], -1)
        if packed:          # .unpack::16b: each register's halves into two adjacent columns
            values = np.stack([values & np.uint32(0xFFFF), values >> np.uint32(16)], -1).reshape(idx.size, -1)
        where = flat_cells(cta, lane, col)
        m.asynchrony.check_tmem(where, idx, "writes", ("tcgen05.mma", "tcgen05.ld"))
        _ordered(m, where, np.repeat(idx, values.shape[1]), True)
        tmem[cta, lane, col] = values
        m.asynchrony.defer_tmem(where, np.repeat(idx, values.shape[1]), "tcgen05.st",
                                seq=np.zeros(where.size, np.int64))
    return run


# -- mma --------------------------------------------------------------------------------------
def descriptor_offsets(desc: int, rows: int, row_bytes: int, mn_major: bool = False) -> np.ndarray:
    """Shared-memory byte offsets [row, byte] of an operand from an sm_100 matrix
    descriptor: start, leading and stride byte offsets as wgmma's (bits 0-13, 16-29,
    32-45, 16-byte units), version 1 in bits 46-48, base offset in bits 49-51 and the
    layout in bits 61-63 (0 none, 2/4/6 a 128/64/32-byte swizzle; see
    ``mma.descriptor_offsets`` for what a swizzle does, and for an MN-major operand's
    ``rows`` steps along K of ``row_bytes`` bytes of M or N, the canonical layouts being
    wgmma's)."""
    layout = (desc >> 61) & 0x7
    if layout not in SWIZZLE_BYTES:
        raise UnsupportedInstruction(f"tcgen05 matrix descriptor layout {layout}")
    if (desc >> 46) & 0x7 != 1:
        raise UnsupportedInstruction(f"tcgen05 matrix descriptor version {(desc >> 46) & 0x7}")
    wgmma_mode = {w: k for k, w in WGMMA_SWIZZLE.items()}[SWIZZLE_BYTES[layout]]
    plain = desc & ((1 << 46) - 1) | ((desc >> 49) & 0x7) << 49
    return wgmma_offsets(plain | wgmma_mode << 62, rows, row_bytes, mn_major)


def _shared_operand(m, cta: int, desc: int, mn: int, k: int, element: str, container: int, mn_major: bool,
                    thread: int) -> np.ndarray:
    """An MMA operand [row of A or column of B, k] from shared memory where the matrix
    descriptor ``desc`` says, K-major or ``mn_major``; its bytes stay in flight for the
    MMA."""
    if mn_major and ELEMENT_BITS[element] != container:
        raise UnsupportedInstruction(f"tcgen05.mma with an MN-major {element} operand")
    shape = (k, mn * container // 8) if mn_major else (mn, k * container // 8)
    offsets = descriptor_offsets(desc, *shape, mn_major)
    out = shared_matrix(m, cta, offsets, element, container, f"tcgen05.mma descriptor {desc:#x}")
    read_in_flight(m, cta * m.smem_size + offsets.reshape(-1), thread, "tcgen05.mma")
    return out.T if mn_major else out


def d_positions(m_rows: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(lane, column offset) of D's element (row, column), [row, column]."""
    row, col = np.meshgrid(np.arange(m_rows), np.arange(n), indexing="ij")
    if m_rows == 128:
        return row, col
    if m_rows == 64:
        return 32 * (row // 16) + row % 16, col
    raise UnsupportedInstruction(f"tcgen05.mma with M = {m_rows}")


class InstructionDescriptor:
    """The 32-bit instruction descriptor of kind::f16/tf32/f8f6f4/i8 (PTX ISA, "Instruction
    descriptor")."""

    def __init__(self, word: int, kind: str):
        if word & 0x7:
            raise UnsupportedInstruction("sparse tcgen05.mma")
        self.saturate = bool(word >> 3 & 1)
        self.dtype = {0: "f16", 1: "f32", 2: "s32"}.get(word >> 4 & 0x3)
        formats = KIND_FORMATS[kind]
        self.atype = formats.get(word >> 7 & 0x7)
        self.btype = formats.get(word >> 10 & 0x7)
        if self.dtype is None or self.atype is None or self.btype is None:
            raise UnsupportedInstruction(f"tcgen05.mma instruction descriptor {word:#x} for kind::{kind}")
        self.negate_a, self.negate_b = bool(word >> 13 & 1), bool(word >> 14 & 1)
        #: "transpose A/B": the operand lies MN-major in shared memory (its M or N contiguous)
        self.a_mn_major, self.b_mn_major = bool(word >> 15 & 1), bool(word >> 16 & 1)
        self.n = (word >> 17 & 0x3F) << 3
        self.m = (word >> 24 & 0x1F) << 4


def compile_mma(ctx, ins):
    mods = ins.parts[2:]
    if "cta_group::1" not in mods:
        raise UnsupportedInstruction("tcgen05.mma other than .cta_group::1")
    kind = next((p[6:] for p in mods if p.startswith("kind::")), None)
    if kind not in KIND_FORMATS or any(p in mods for p in ("block_scale", "ws", "sp")):
        raise UnsupportedInstruction(f"tcgen05.mma.{'.'.join(mods)}")
    ops = ins.operands
    d_r = tmem_address(ctx, ops[0])
    a_tmem = isinstance(ops[1], Addr)
    a_r = tmem_address(ctx, ops[1]) if a_tmem else reader(ctx, ops[1], U64)
    b_r = reader(ctx, ops[2], U64)
    idesc_r = reader(ctx, ops[3], U32)
    rest = ops[4:]
    mask_rs = [reader(ctx, r, U32) for r in vector_items(rest[0])] if len(rest) == 2 else []
    enable_r = reader(ctx, rest[-1], PRED)
    name = ".".join(ins.parts)

    def run(m, idx):
        tmem = tensor_memory(m)
        idx = np.arange(m.n) if isinstance(idx, slice) else idx
        values = {key: np.broadcast_to(np.asarray(r(m, idx)), idx.shape)
                  for key, r in (("d", d_r), ("a", a_r), ("b", b_r), ("i", idesc_r), ("e", enable_r))}
        masks = [np.broadcast_to(np.asarray(r(m, idx)), idx.shape) for r in mask_rs]
        for t in range(idx.size):           # one elected thread issues each MMA
            if any(int(mk[t]) for mk in masks):
                raise UnsupportedInstruction(f"{name} with output lanes disabled")
            issue(m, tmem, int(m.cta_of[idx[t]]), kind, InstructionDescriptor(int(values["i"][t]), kind),
                  int(values["d"][t]), int(values["a"][t]), a_tmem, int(values["b"][t]), bool(values["e"][t]),
                  int(idx[t]))
    return run


def issue(m, tmem, cta: int, kind: str, desc: InstructionDescriptor, d_addr: int, a: int, a_tmem: bool,
          b: int, accumulate: bool, thread: int) -> None:
    """One MMA, computed now; its operands are read now (pending copies there are an
    error) and, like its D cells, stay in flight until its commit's mbarrier phase
    completes."""
    k_bytes = KIND_K_BYTES[kind]
    a_bits, b_bits = ELEMENT_BITS[desc.atype], ELEMENT_BITS[desc.btype]
    container = 8 if kind == "f8f6f4" else None
    a_container = container or a_bits
    b_container = container or b_bits
    k = k_bytes * 8 // a_container
    vtype = np.int64 if desc.dtype == "s32" else np.float64
    lanes, cols = d_positions(desc.m, desc.n)
    d_lane, d_col = split_address(d_addr)
    one = np.array([thread])
    if a_tmem:
        a_lane, a_col = split_address(a)
        a_cells = (cta, a_lane + lanes[:, 0][:, None], a_col + np.arange(k_bytes // 4)[None, :])
        m.asynchrony.check_tmem(flat_cells(*a_cells), one, "reads", ("tcgen05.st",))
        _ordered(m, flat_cells(*a_cells), thread, False)
        words = tmem[a_cells]
        a_val = decode(words, desc.atype, a_container).reshape(desc.m, k)
    else:
        a_val = _shared_operand(m, cta, a, desc.m, k, desc.atype, a_container, desc.a_mn_major, thread)
    b_val = _shared_operand(m, cta, b, desc.n, k, desc.btype, b_container, desc.b_mn_major, thread)
    sign = (-1) ** (desc.negate_a + desc.negate_b)
    product = sign * (a_val.astype(vtype) @ b_val.astype(vtype).T)
    cells = (d_lane + lanes, d_col + cols)
    d_cells = flat_cells(cta, *cells)
    m.asynchrony.check_tmem(d_cells, one, "writes", ("tcgen05.st", "tcgen05.ld"))
    if accumulate:
        _ordered(m, d_cells, thread, False)
    _ordered(m, d_cells, thread, True)
    if accumulate:
        product = product + from_cells(tmem[cta][cells], desc.dtype)
    tmem[cta][cells] = to_cells(round_accumulator(product, desc.dtype, desc.saturate), desc.dtype)
    m.asynchrony.defer_tmem(d_cells, thread, "tcgen05.mma")


def from_cells(words: np.ndarray, dtype: str) -> np.ndarray:
    """Accumulator values from tensor-memory cells (an f16 one in the low half)."""
    if dtype == "s32":
        return words.view(np.int32).astype(np.int64)
    if dtype == "f16":
        return (words & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16).astype(np.float64)
    return words.view(np.float32).astype(np.float64)


def to_cells(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "s32":
        return values.astype(np.int32).view(np.uint32)
    if dtype == "f16":
        return values.astype(np.float16).view(np.uint16).astype(np.uint32)
    return values.astype(np.float32).view(np.uint32)


def compile_commit(ctx, ins):
    """tcgen05.commit...mbarrier::arrive::one [mbar]{, ctaMask}: the mbarrier gets one
    arrival when the MMAs issued before it (by the CTA's threads) complete: when a thread
    next looks at the mbarrier (``asynchrony.queue_mbarrier``); their D cells stay in
    flight until that phase completes.  With ``.multicast::cluster``, the mbarrier at
    the same offset in every CTA of the cluster that ``ctaMask`` names, each of whose
    phases lands them as well (the arrivals all follow their completion)."""
    if "mbarrier::arrive::one" not in ins.parts:
        raise UnsupportedInstruction(".".join(ins.parts))
    multicast = "multicast::cluster" in ins.parts
    slots = mbarrier_slots(ctx, ins.operands[0], ins.parts)
    mask_r = reader(ctx, ins.operands[1], ptx_type("u16")) if multicast else None
    where = ".".join(ins.parts)

    def run(m, idx):
        offs = slots(m, idx)
        tids = np.arange(m.n)[idx] if isinstance(idx, slice) else idx
        masks = per_thread(mask_r(m, idx), len(offs)) if multicast else [None] * len(offs)
        per = m.launch.cta_per_cluster
        races = m.shared_races()
        for t, off, mask in zip(tids.tolist(), offs.tolist(), masks):
            targets = [off]
            if mask is not None:
                first = off // m.smem_size // per * per
                targets = [(first + r) * m.smem_size + off % m.smem_size for r in range(per) if mask >> r & 1]
            cta = int(m.cta_of[t])
            clock = races.snapshot([t]) if races is not None else None
            for target in targets:
                def track(m, phase, target=target, cta=cta):
                    m.asynchrony.attach("tcgen05.mma", -1, target, phase, cta=cta)
                # every target's arrival comes after the MMAs complete: each phase it
                # completes lands them (a remote CTA may refill the stage they read)
                arrive_later(m, target, where, clock, before=track)
    return run


NOTHING_TO_DO = ("relinquish_alloc_permit", "fence::before_thread_sync", "fence::after_thread_sync")
COMPILERS = {"alloc": compile_alloc, "dealloc": compile_dealloc, "ld": compile_ld, "st": compile_st,
             "mma": compile_mma, "commit": compile_commit}


@handles("tcgen05")
def compile_tcgen05(ctx, ins):
    op = ins.parts[1]
    if op in NOTHING_TO_DO:
        return lambda m, idx: None
    if op in ("wait::ld", "wait::st"):
        family = "tcgen05." + op[6:]
        return lambda m, idx: m.asynchrony.complete_groups(family, idx, -1)
    if op not in COMPILERS:
        raise UnsupportedInstruction(f"tcgen05.{op}")
    return COMPILERS[op](ctx, ins)
