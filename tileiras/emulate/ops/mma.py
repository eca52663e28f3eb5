"""Tensor-core matrix multiply-accumulate: ``mma.sync`` (PTX ISA, "Warp Level Matrix
Multiply-Accumulate Instructions", the ``m16n8kK`` shapes and the f64 ``m8n8k4``,
``compile_dmma``) and ``wgmma.mma_async``
(warpgroup MMA with K-major or MN-major operands in shared memory, see
``descriptor_offsets``, or A in registers; it is computed when issued, and
``asynchrony.py`` keeps its operands in flight until ``wgmma.wait_group``).

Every ``m16n8kK`` fragment follows one pattern once the operands are seen as 32-bit words
(``K * bits / 32`` words per row of A and per column of B).  With ``g = lane / 4`` and
``t = lane % 4``:

- A (16 x K, row-major): register ``r`` holds row ``g + 8 (r % 2)``, word ``t + 4 (r / 2)``;
- B (K x 8, column-major): register ``r`` holds column ``g``, word ``t + 4 r``;
- C and D (16 x 8): element ``i`` is row ``g + 8 (i / 2)``, column ``2 t + i % 2`` (f16
  accumulators pack elements ``2j`` and ``2j + 1`` into register ``j``),

and a word's elements are consecutive along K, lowest bits first.  That covers f16/bf16
(k8, k16), tf32 (k4, k8), 8-bit floats and integers (k16, k32), 4-bit integers (k32,
k64) and the block-scaled ``kind::mxf4``/``mxf4nvf4`` (k64).  ``kind::f8f6f4`` and
``kind::mxf8f6f4`` keep every 4- and 6-bit element in a byte of its own.

Products are exact and the sum is taken in f64 (integers: exactly) and rounded once;
tensor cores round their f32 sums in an unspecified order, so results may differ from a
GPU's in the last bits, not more.

Block scaling (``.block_scale``): each row of A is split along K into 1, 2 or 4 chunks
(``.scale_vec::1X/2X/4X``), each multiplied by its own scale factor, and so is each
column of B.  ``scale_factors`` says which lane and byte hold which factor; NVIDIA's
block-scaled sm_120 PTX (``scale_vec::1X`` and ``2X``) agrees with the interpreter with
this assignment and not with the neighbouring guesses (test_differential's real mma.sync
tests).
"""
from __future__ import annotations

import re
from typing import Callable

import numpy as np

from ..asynchrony import check_issue
from ..machine import EXITED, WAITING, KernelTrap
from ..operands import reader, vector_items, writer
from ..ptxtypes import FORMAT_DTYPES, ptx_type
from ..registry import UnsupportedInstruction, gathered, handles
from .warp import warp_groups

U32, U16 = ptx_type("u32"), ptx_type("u16")
#: operand element types and their widths in bits
ELEMENT_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "e3m2": 6, "e2m3": 6,
                "e2m1": 4, "s8": 8, "u8": 8, "s4": 4, "u4": 4}
INTEGER = ("s8", "u8", "s4", "u4")
#: how an accumulator register is read and written (f16 ones hold a pair)
ACCUMULATOR_REGISTER = {"f32": ptx_type("f32"), "s32": ptx_type("s32"), "f16": U32}


def a_positions(k: int, container: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of A's elements, indexed [register, lane, element of the register]."""
    per = 32 // container
    regs = k * container // 32 // 2
    r, lane, j = np.meshgrid(np.arange(regs), np.arange(32), np.arange(per), indexing="ij")
    g, t = lane // 4, lane % 4
    return g + 8 * (r % 2), (t + 4 * (r // 2)) * per + j


def b_positions(k: int, container: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows along K, columns) of B's elements, indexed [register, lane, element]."""
    per = 32 // container
    regs = k * container // 32 // 4
    r, lane, j = np.meshgrid(np.arange(regs), np.arange(32), np.arange(per), indexing="ij")
    g, t = lane // 4, lane % 4
    return (t + 4 * r) * per + j, g


def c_positions(count: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the accumulator elements, indexed [element, lane]."""
    i, lane = np.meshgrid(np.arange(count), np.arange(32), indexing="ij")
    return lane // 4 + 8 * (i // 2), 2 * (lane % 4) + i % 2


def decode(words: np.ndarray, name: str, container: int) -> np.ndarray:
    """The elements packed in ``words`` (uint32, [..., register]) as f64 or int64, with a
    last axis for the elements of each word."""
    per = 32 // container
    shifts = (np.arange(per, dtype=np.uint32) * container)
    raw = (words[..., None] >> shifts) & np.uint32((1 << container) - 1)
    bits = ELEMENT_BITS[name]
    if name in INTEGER:
        raw = raw.astype(np.int64) & ((1 << bits) - 1)
        return raw - ((raw >> (bits - 1)) << bits) if name[0] == "s" else raw
    if name == "tf32":
        return (raw & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    dtype = FORMAT_DTYPES[name]
    raw = raw & np.uint32((1 << bits) - 1)
    return raw.astype({16: np.uint16}.get(dtype.itemsize * 8, np.uint8)).view(dtype).astype(np.float64)


class Shape:
    """The parsed opcode: shape, element types, block scaling."""

    def __init__(self, parts: list[str]):
        mods = parts[1:]
        if "sync" not in mods or "aligned" not in mods:
            raise UnsupportedInstruction("mma without .sync.aligned")
        if "sp" in mods or any(p.startswith("sp::") for p in mods):
            raise UnsupportedInstruction("sparse mma")
        shape = next((p for p in mods if re.fullmatch(r"m\d+n\d+k\d+", p)), None)
        if shape is None:
            raise UnsupportedInstruction("mma without a shape")
        self.m, self.n, self.k = map(int, re.findall(r"\d+", shape))
        if (self.m, self.n) != (16, 8):
            raise UnsupportedInstruction(f"mma.{shape} (only m16n8kK shapes)")
        if "row" not in mods or "col" not in mods:
            raise UnsupportedInstruction("mma layouts other than .row.col")
        kind = next((p[6:] for p in mods if p.startswith("kind::")), None)
        self.block_scale = "block_scale" in mods
        self.scale_vec = int(next((p[11:-1] for p in mods if p.startswith("scale_vec::")), "1"))
        self.satfinite = "satfinite" in mods
        types = [p for p in mods[mods.index("col") + 1:] if p != "satfinite"]
        if self.block_scale:
            self.dtype, self.atype, self.btype, self.ctype, self.stype = types
        else:
            self.dtype, self.atype, self.btype, self.ctype = types
            self.stype = None
        for t in (self.atype, self.btype):
            if t not in ELEMENT_BITS:
                raise UnsupportedInstruction(f"mma with .{t} operands")
        if self.dtype not in ("f32", "f16", "s32"):
            raise UnsupportedInstruction(f"mma with a .{self.dtype} accumulator")
        # f8f6f4 kinds keep each element in a byte of its own
        self.a_container = 8 if kind in ("f8f6f4", "mxf8f6f4") else ELEMENT_BITS[self.atype]
        self.b_container = 8 if kind in ("f8f6f4", "mxf8f6f4") else ELEMENT_BITS[self.btype]
        self.a_regs = self.k * self.a_container // 64
        self.b_regs = self.k * self.b_container // 128
        self.acc_regs = 2 if self.dtype == "f16" else 4


def scale_factors(data: np.ndarray, byte_id: np.ndarray, thread_id: np.ndarray,
                  rows: int, vec: int, name: str) -> np.ndarray:
    """The block scale factors of A (``rows`` = 16) or B (``rows`` = 8) as f64, [warp,
    row or column, chunk along K], from each lane's scale register (``data``, [warp, lane]),
    with the byte and thread selectors of lane 0.  Row (or column) ``i`` of the operand
    takes the factors of the lane ``4 (i % 8) + thread_id + i / 8`` (the 16 rows of A use
    two lanes of each quad), chunk ``c`` from byte ``byte_id + c``."""
    dtype = FORMAT_DTYPES[name]
    i, c = np.meshgrid(np.arange(rows), np.arange(vec), indexing="ij")
    out = np.empty((data.shape[0], rows, vec), np.float64)
    for w in range(data.shape[0]):
        lane = 4 * (i % 8) + int(thread_id[w]) + i // 8
        byte = int(byte_id[w]) + c
        raw = (data[w][lane] >> (8 * byte).astype(np.uint32)) & np.uint32(0xFF)
        out[w] = raw.astype(np.uint8).view(dtype).astype(np.float64)
    return out


def round_accumulator(d: np.ndarray, name: str, satfinite: bool) -> np.ndarray:
    if name == "s32":
        if satfinite:
            return np.clip(d, -2**31, 2**31 - 1).astype(np.int64)
        return ((d + 2**31) % 2**32 - 2**31).astype(np.int64)
    return d.astype(np.float32 if name == "f32" else np.float16)


#: the f64 multiply (DMMA, sm_80+): one shape, one register per A and B element
DMMA = ("m8n8k4", "row", "col", "f64", "f64", "f64", "f64")


def dmma_positions() -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """(rows, columns) of A (8 x 4, [lane]), B (4 x 8, [lane]) and C/D (8 x 8, [element,
    lane]) of ``mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64`` (PTX ISA, "Matrix
    Fragments for mma.m8n8k4 with .f64 floating point type"): A row ``g`` column ``t``, B
    row ``t`` column ``g``, C element ``i`` row ``g`` column ``2 t + i``."""
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    i, cl = np.meshgrid(np.arange(2), lane, indexing="ij")
    return (g, t), (t, g), (cl // 4, 2 * (cl % 4) + i)


def compile_dmma(ctx, ins):
    """``mma.sync.aligned.m8n8k4.row.col.f64``: D = A B + C per warp, the products and the
    sum in f64 (a GPU's DMMA rounds each fused step; the order is the sum's)."""
    ops = ins.operands
    d_ops, a_ops, b_ops, c_ops = (vector_items(op) for op in ops[:4])
    if (len(a_ops), len(b_ops), len(c_ops), len(d_ops)) != (1, 1, 2, 2) or len(ops) != 4:
        raise UnsupportedInstruction(f"{'.'.join(ins.parts)} with {len(a_ops)}/{len(b_ops)}/{len(c_ops)} "
                                     "A/B/C registers")
    f64 = ptx_type("f64")
    a_r, b_r = reader(ctx, a_ops[0], f64), reader(ctx, b_ops[0], f64)
    c_rs = [reader(ctx, r, f64) for r in c_ops]
    d_ws = [writer(ctx, r, f64) for r in d_ops]
    (a_rows, a_cols), (b_rows, b_cols), (c_rows, c_cols) = dmma_positions()
    name = ".".join(ins.parts)

    def run(m, idx):
        idx = _whole_warps(m, idx, name)
        warps = idx.size // 32
        value = lambda r: np.broadcast_to(np.asarray(r(m, idx), np.float64), idx.shape).reshape(warps, 32)
        a = np.zeros((warps, 8, 4))
        b = np.zeros((warps, 4, 8))
        c = np.zeros((warps, 8, 8))
        a[:, a_rows, a_cols] = value(a_r)
        b[:, b_rows, b_cols] = value(b_r)
        for e, r in enumerate(c_rs):
            c[:, c_rows[e], c_cols[e]] = value(r)
        d = np.einsum("wmk,wkn->wmn", a, b) + c
        for e, write in enumerate(d_ws):
            write(m, idx, d[:, c_rows[e], c_cols[e]].reshape(idx.size))
    return run


def _whole_warps(m, idx, name: str) -> np.ndarray:
    """``idx`` ordered warp by warp; a trap unless every warp runs with all 32 lanes."""
    idx, _, starts = warp_groups(m, idx)
    sizes = np.diff(np.r_[starts, idx.size])
    if np.any(sizes != 32) or np.any(m.linear_tid[idx].reshape(-1, 32) % 32 != np.arange(32)):
        raise KernelTrap("mma", f"{name}: executed by {int(sizes.min())} threads of a warp, "
                         "not all 32 (.aligned requires the whole warp)")
    return idx


@handles("mma")
def compile_mma(ctx, ins):
    if tuple(p for p in ins.parts[1:] if p not in ("sync", "aligned")) == DMMA:
        return compile_dmma(ctx, ins)
    s = Shape(ins.parts)
    ops = ins.operands
    d_ops, a_ops, b_ops, c_ops = (vector_items(op) for op in ops[:4])
    if (len(a_ops), len(b_ops), len(c_ops), len(d_ops)) != (s.a_regs, s.b_regs, s.acc_regs, s.acc_regs):
        raise UnsupportedInstruction(f"{'.'.join(ins.parts)} with {len(a_ops)}/{len(b_ops)}/"
                                     f"{len(c_ops)} A/B/C registers")
    a_rs = [reader(ctx, r, U32) for r in a_ops]
    b_rs = [reader(ctx, r, U32) for r in b_ops]
    c_rs = [reader(ctx, r, ACCUMULATOR_REGISTER[s.ctype]) for r in c_ops]
    d_ws = [writer(ctx, r, ACCUMULATOR_REGISTER[s.dtype]) for r in d_ops]
    scale_rs = None
    if s.block_scale:
        if len(ops) != 8:
            raise UnsupportedInstruction("block-scaled mma without its four scale operands")
        scale_rs = [(reader(ctx, vector_items(ops[4 + 2 * q])[0], U32),
                     *(reader(ctx, sel, U16) for sel in vector_items(ops[5 + 2 * q]))) for q in (0, 1)]
    a_rows, a_cols = a_positions(s.k, s.a_container)
    b_rows, b_cols = b_positions(s.k, s.b_container)
    c_rows, c_cols = c_positions(4)
    name = ".".join(ins.parts)

    def gather(readers, m, idx, dtype):
        return np.stack([np.broadcast_to(np.asarray(r(m, idx)), (len(idx),)).astype(dtype)
                         for r in readers], axis=-1).reshape(-1, 32, len(readers))

    def run(m, idx):
        idx = _whole_warps(m, idx, name)
        warps = idx.size // 32
        a_words = gather(a_rs, m, idx, np.uint32).transpose(0, 2, 1)      # [warp, reg, lane]
        b_words = gather(b_rs, m, idx, np.uint32).transpose(0, 2, 1)
        a_val = decode(a_words, s.atype, s.a_container)                    # [warp, reg, lane, j]
        b_val = decode(b_words, s.btype, s.b_container)
        vtype = np.int64 if s.dtype == "s32" else np.float64
        a = np.zeros((warps, 16, s.k), vtype)
        b = np.zeros((warps, s.k, 8), vtype)
        a[:, a_rows, a_cols] = a_val
        b[:, b_rows, b_cols] = b_val
        if scale_rs is not None:
            (sa, ba, ta), (sb, bb, tb) = scale_rs
            fa = scale_factors(gather([sa], m, idx, np.uint32)[..., 0], gather([ba], m, idx, np.int64)[:, 0, 0],
                               gather([ta], m, idx, np.int64)[:, 0, 0], 16, s.scale_vec, s.stype)
            fb = scale_factors(gather([sb], m, idx, np.uint32)[..., 0], gather([bb], m, idx, np.int64)[:, 0, 0],
                               gather([tb], m, idx, np.int64)[:, 0, 0], 8, s.scale_vec, s.stype)
            chunk = s.k // s.scale_vec
            a = a * np.repeat(fa, chunk, axis=2)
            b = b * np.repeat(fb, chunk, axis=2).transpose(0, 2, 1)
        c = read_accumulator(gather(c_rs, m, idx, vtype if s.ctype != "f16" else np.uint32), s.ctype)
        cm = np.zeros((warps, 16, 8), vtype)
        cm[:, c_rows, c_cols] = c.transpose(0, 2, 1)
        d = round_accumulator(np.einsum("wmk,wkn->wmn", a, b) + cm, s.dtype, s.satfinite)
        write_accumulator(d_ws, m, idx, d[:, c_rows, c_cols].transpose(0, 2, 1).reshape(idx.size, 4), s.dtype)
    return run


def read_accumulator(regs: np.ndarray, name: str) -> np.ndarray:
    """Accumulator elements, [..., element], from registers [..., register]: f16 pairs unpacked."""
    if name != "f16":
        return regs
    halves = np.stack([regs & np.uint32(0xFFFF), regs >> np.uint32(16)], axis=-1)
    return halves.astype(np.uint16).view(np.float16).astype(np.float64).reshape(*regs.shape[:-1], -1)


# -- wgmma: warpgroup MMA with operands in shared memory ----------------------------------------
#: the descriptor's swizzle field (bits 62-63) -> the swizzle width in bytes (0: none)
SWIZZLE_BYTES = {0: 0, 1: 128, 2: 64, 3: 32}
#: bytes of a core matrix row (the swizzle's chunk), and the rows of a core matrix or atom
CHUNK, CORE_ROWS = 16, 8


def descriptor_offsets(desc: int, rows: int, row_bytes: int, mn_major: bool = False) -> np.ndarray:
    """Shared-memory byte offsets [row, byte] of an operand described by a wgmma matrix
    descriptor (PTX ISA, "Shared Memory Matrix Layout", "Matrix Descriptor Format"): start
    address, leading and stride byte offsets (bits 0-13, 16-29, 32-45, in 16-byte units),
    base offset (bits 49-51) and swizzle mode (bits 62-63).  A row runs along the operand's
    contiguous dimension: K-major, ``rows`` rows of A (columns of B) of ``row_bytes`` bytes
    of K; MN-major (the instruction's transpose bit), ``rows`` steps along K of
    ``row_bytes`` bytes of M (or N).

    Without swizzle the operand is made of core matrices, 8 rows of 16 bytes: K-major, the
    next 8 rows start ``SBO`` bytes on and the next 16 bytes of K ``LBO`` bytes on;
    MN-major, the next 16 bytes of M/N ``SBO`` bytes on and the next 8 steps of K ``LBO``
    bytes on.  With a swizzle of W bytes it is made of atoms of 8 rows of W bytes: K-major,
    the next 8 rows ``SBO`` bytes on (K of one instruction stays in a row); MN-major, the
    next 8 steps of K ``SBO`` bytes on and the next W bytes of M/N ``LBO`` bytes on (the
    leading and stride offsets trade places).  ``swizzle_address`` then permutes the
    16-byte chunks of each address."""
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    width = SWIZZLE_BYTES[(desc >> 62) & 0x3]
    row, byte = np.meshgrid(np.arange(rows), np.arange(row_bytes), indexing="ij")
    group, within = row // CORE_ROWS, row % CORE_ROWS
    if width == 0:
        chunk_step, group_step = (sbo, lbo) if mn_major else (lbo, sbo)
        return start + group * group_step + (byte // CHUNK) * chunk_step + within * CHUNK + byte % CHUNK
    if not mn_major and row_bytes > width:
        raise UnsupportedInstruction(f"wgmma operand of {row_bytes}-byte rows in a {width}-byte swizzle")
    atom_step = lbo if mn_major else 0
    addr = start + group * sbo + (byte // width) * atom_step + within * width + byte % width
    return swizzle_address(addr, width, (desc >> 49) & 0x7)


def swizzle_address(addr: np.ndarray, width: int, base: int = 0) -> np.ndarray:
    """The shared address the hardware reads for ``addr`` under a ``width``-byte swizzle: the
    16-byte chunk index (bits 4 up) XOR the 128-byte line's index within the swizzle's
    repeat (8 lines of 128 bytes for 128, 4 for 64, 2 for 32; bits 7 up), as CUTLASS's
    ``Swizzle<B, 4, 3>``.  The repeat starts on a ``8 width``-byte boundary, or ``base``
    lines past one (the descriptor's base offset, ``(pattern start >> 7) & 7``): the line
    index counts from there."""
    mask = width // CHUNK - 1
    phase = ((addr >> 7) - base) & mask
    return addr ^ (phase << 4)


def shared_matrix(m, cta: int, offsets: np.ndarray, element: str, container: int, what: str) -> np.ndarray:
    """The operand at byte ``offsets`` ([row, byte], from a matrix descriptor) of CTA
    ``cta``'s shared memory, decoded: [row, element along K]."""
    if offsets.max() >= m.smem_size:
        raise KernelTrap("mma", f"{what} reaches past the {m.smem_size}-byte shared window")
    raw = m.shared[cta * m.smem_size + offsets]
    rows, row_bytes = offsets.shape
    words = raw.reshape(rows, row_bytes // 4, 4).view(np.uint32)[..., 0]
    return decode(words, element, container).reshape(rows, -1)


def wgmma_immediates(values: list[int], a_in_registers: bool) -> tuple[int, int, bool, bool]:
    """(scale of A, scale of B, A MN-major, B MN-major) from the immediates after scale-d:
    ``imm-scale-a, imm-scale-b`` (floats; 1 or -1), then ``imm-trans-a`` (A from shared
    memory only) and ``imm-trans-b`` (16-bit types); integer forms have none."""
    scale_a, scale_b, *trans = values + [1, 1][len(values):]
    if any(v not in (1, -1) for v in (scale_a, scale_b)):
        raise UnsupportedInstruction(f"wgmma with scales {scale_a}, {scale_b} (1 or -1)")
    if a_in_registers:
        trans = [0] + trans
    trans_a, trans_b = (trans + [0, 0])[:2]
    if len(trans) > 2 or any(t not in (0, 1) for t in trans):
        raise UnsupportedInstruction(f"wgmma with immediates {values}")
    return scale_a, scale_b, bool(trans_a), bool(trans_b)


class WgmmaShape:
    def __init__(self, parts: list[str]):
        mods = parts[2:]
        shape = next((p for p in mods if re.fullmatch(r"m\d+n\d+k\d+", p)), None)
        if shape is None or "sync" not in mods or "aligned" not in mods:
            raise UnsupportedInstruction(f"{'.'.join(parts)}")
        self.m, self.n, self.k = map(int, re.findall(r"\d+", shape))
        self.satfinite = "satfinite" in mods
        self.dtype, self.atype, self.btype = [p for p in mods[mods.index(shape) + 1:] if p != "satfinite"]
        for t in (self.atype, self.btype):
            if t not in ELEMENT_BITS or ELEMENT_BITS[t] < 8:
                raise UnsupportedInstruction(f"wgmma with .{t} operands")
        if self.dtype not in ACCUMULATOR_REGISTER:
            raise UnsupportedInstruction(f"wgmma with a .{self.dtype} accumulator")
        self.acc_regs = self.n // (4 if self.dtype == "f16" else 2)


def wgmma_d_positions(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the m64nN accumulator, [element, thread of the warpgroup]: warp w
    holds rows 16w..16w+15 as an m16n8 accumulator per 8 columns."""
    i, tid = np.meshgrid(np.arange(n // 2), np.arange(128), indexing="ij")
    lane, w = tid % 32, tid // 32
    j, e = i // 4, i % 4
    return 16 * w + lane // 4 + 8 * (e // 2), 8 * j + 2 * (lane % 4) + e % 2


@handles("wgmma", control=True)
def compile_wgmma(ctx, ins):
    """``wgmma`` instructions (control: ``mma_async`` holds the warps of a warpgroup until
    all four have issued it, ``Batch.gather_warpgroups``; the others step on)."""
    if ins.guard is not None:
        raise UnsupportedInstruction(f"{ins.opcode} under a predicate (.aligned)")
    kind = ins.parts[1]
    if kind == "fence":
        return stepping(lambda m, idx: m.asynchrony.fence(idx))
    if kind == "commit_group":
        return stepping(lambda m, idx: m.asynchrony.commit("wgmma", idx))
    if kind == "wait_group":
        keep = int(ins.operands[0].value)
        return stepping(lambda m, idx: m.asynchrony.complete_groups("wgmma", idx, keep))
    run = compile_mma_async(ctx, ins)

    name = ".".join(ins.parts)
    return gathered(run, lambda m, idx: m.gather_warpgroups(idx), lambda m, idx: stranded(m, idx, name))


def stranded(m, idx: np.ndarray, name: str) -> None:
    """Threads held at ``wgmma.mma_async`` whose warpgroup has exited threads can never
    run it: the ``.aligned`` instruction needs the whole warpgroup."""
    held = idx[m.status[idx] == WAITING]
    if not held.size:
        return
    group = m.cta_of * m.nthreads + m.linear_tid // 128
    alive = np.bincount(group[m.status != EXITED], minlength=int(group.max()) + 1)
    short = held[alive[group[held]] < 128]
    if short.size:
        count = int(np.count_nonzero(group[held] == group[short[0]]))
        raise KernelTrap("wgmma", f"{name}: executed by {count} threads of a warpgroup, not all 128 "
                         "(.aligned requires the whole warpgroup; the others have exited)")


def stepping(fn: Callable) -> Callable:
    """``fn``, then the threads go on to the next instruction."""
    def run(m, idx):
        fn(m, idx)
        m.pc[idx] += 1
    return run


def compile_mma_async(ctx, ins):
    """``wgmma.mma_async`` for whole warpgroups of threads ``idx``."""
    kind = ins.parts[1]
    if kind != "mma_async":
        raise UnsupportedInstruction(f"wgmma.{kind}")
    s = WgmmaShape(ins.parts)
    ops = ins.operands
    d_ops = vector_items(ops[0])
    if len(d_ops) != s.acc_regs:
        raise UnsupportedInstruction(f"{'.'.join(ins.parts)} with {len(d_ops)} accumulator registers")
    a_in_registers = len(vector_items(ops[1])) > 1
    a_rs = [reader(ctx, r, U32) for r in vector_items(ops[1])] if a_in_registers else None
    a_desc = None if a_in_registers else reader(ctx, ops[1], ptx_type("u64"))
    b_desc = reader(ctx, ops[2], ptx_type("u64"))
    scale_d = reader(ctx, ops[3], ptx_type("pred"))
    scale_a, scale_b, a_mn_major, b_mn_major = wgmma_immediates([int(op.value) for op in ops[4:]], a_in_registers)
    if (a_mn_major or b_mn_major) and ELEMENT_BITS[s.atype] != 16:
        raise UnsupportedInstruction(f"{'.'.join(ins.parts)}: MN-major operands are for 16-bit types only")
    in_flight = [r for r in d_ops + (vector_items(ops[1]) if a_in_registers else [])]
    slots = tuple(ctx.register(r.name)[0] for r in in_flight)
    names = tuple(r.name for r in in_flight)
    pc = ctx.pc
    d_rs = [reader(ctx, r, ACCUMULATOR_REGISTER[s.dtype]) for r in d_ops]
    d_ws = [writer(ctx, r, ACCUMULATOR_REGISTER[s.dtype]) for r in d_ops]
    d_rows, d_cols = wgmma_d_positions(s.n)
    a_rows, a_cols = a_positions(s.k, ELEMENT_BITS[s.atype])        # per warp, 16 rows
    name = ".".join(ins.parts)
    vtype = np.int64 if s.dtype == "s32" else np.float64

    def operand(m, cta: int, desc: int, mn: int, element: str, mn_major: bool, thread: int) -> np.ndarray:
        """The operand [row of A or column of B, k] the descriptor ``desc`` describes."""
        bits = ELEMENT_BITS[element]
        shape = (s.k, mn * bits // 8) if mn_major else (mn, s.k * bits // 8)
        offsets = descriptor_offsets(desc, *shape, mn_major)
        out = shared_matrix(m, cta, offsets, element, bits, f"{name}: descriptor {desc:#x}")
        read_in_flight(m, cta * m.smem_size + offsets.reshape(-1), thread, "wgmma")
        return out.T if mn_major else out

    def run(m, idx):
        idx = np.arange(m.n) if isinstance(idx, slice) else idx
        check_issue(m, slots, names, idx, pc, fenced=True)
        group = m.cta_of[idx] * m.nthreads + m.linear_tid[idx] // 128 * 128
        starts = np.r_[0, np.flatnonzero(np.diff(group)) + 1]
        sizes = np.diff(np.r_[starts, idx.size])
        if np.any(sizes != 128) or np.any(m.linear_tid[idx].reshape(-1, 128) % 128 != np.arange(128)):
            raise KernelTrap("wgmma", f"{name}: executed by {int(sizes.min())} threads of a warpgroup, "
                             "not all 128 (.aligned requires the whole warpgroup)")
        regs = np.stack([np.broadcast_to(np.asarray(r(m, idx)), idx.shape) for r in d_rs], -1)
        acc = read_accumulator(regs[None], s.dtype)[0] if s.dtype == "f16" else regs.astype(vtype)
        keep = np.broadcast_to(np.asarray(scale_d(m, idx)), idx.shape)
        b_descs = np.broadcast_to(np.asarray(b_desc(m, idx)), idx.shape)
        if a_in_registers:
            a_words = np.stack([np.broadcast_to(np.asarray(r(m, idx)), idx.shape).astype(np.uint32)
                                for r in a_rs], -1)
        else:
            a_descs = np.broadcast_to(np.asarray(a_desc(m, idx)), idx.shape)
        out = np.empty_like(acc)
        for q, first in enumerate(starts):
            cta = int(m.cta_of[idx[first]])
            b = operand(m, cta, int(b_descs[first]), s.n, s.btype, b_mn_major, int(idx[first])).T  # K x N
            if a_in_registers:
                words = a_words[first:first + 128].reshape(4, 32, -1).transpose(0, 2, 1)   # [warp, reg, lane]
                a = np.zeros((4, 16, s.k), vtype)
                a[:, a_rows, a_cols] = decode(words, s.atype, ELEMENT_BITS[s.atype])
                a = a.reshape(64, s.k)
            else:
                a = operand(m, cta, int(a_descs[first]), 64, s.atype, a_mn_major, int(idx[first]))
            c = np.zeros((64, s.n), vtype)
            if keep[first]:
                c[d_rows, d_cols] = acc[first:first + 128].T
            d = round_accumulator(scale_a * scale_b * (a.astype(vtype) @ b.astype(vtype)) + c, s.dtype, s.satfinite)
            out[first:first + 128] = d[d_rows, d_cols].T
        write_accumulator(d_ws, m, idx, out, s.dtype)
        m.asynchrony.lock_registers("wgmma", slots, idx, pc)
    return run


def read_in_flight(m, region: np.ndarray, thread: int, family: str) -> None:
    """An asynchronous unit issued by ``thread`` reads shared bytes ``region`` (of
    m.shared) through the async proxy until its ``family``'s wait: pending copies there are
    an error, the read counts for the race detector (a generic-proxy write not followed by
    its writer's ``fence.proxy.async`` is a race), and writing the bytes before the wait is
    an error."""
    region = np.unique(region)
    threads = np.full(region.size, thread, np.int64)
    m.asynchrony.check_read(region, 1, threads)
    races = m.shared_races()
    if races is not None:
        races.access(threads, region, 1, False)
        races.proxy_read(region, thread)
    m.asynchrony.protect(region, thread, family, seq=m.asynchrony.group_of(family, np.array([thread]))[0])


def write_accumulator(writers, m, idx, values: np.ndarray, name: str) -> None:
    """Store accumulator elements ([thread, element]) into D's registers, f16 ones in pairs."""
    if name == "f16":
        bits = values.astype(np.float16).view(np.uint16).astype(np.uint32)
        values = bits[:, 0::2] | (bits[:, 1::2] << np.uint32(16))
    for j, write in enumerate(writers):
        write(m, idx, values[:, j])
