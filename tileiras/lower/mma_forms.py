"""The tensor-core form of each matrix multiply, and how its operands wait in shared memory.

Decided once, by TileAS (``tileas.assign_layouts`` records ``tensor_core_mma`` per op and
the ``_mma`` layout rule records the staging); ``codegen.emit_mma`` only reads it.
"""
from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import Optional

from ..ir import types as T
from ..ir.core import Operation
from ..layout.core import LANE, OFFSET, REG, WARP
from ..layout.linear import LinearLayout, mma_blocks, mma_fragment
from ..layout.shared import Padding, Swizzle, bank_wavefronts, nvmma_shared, swizzled_shared
from ..layout.tensor_core import (
    WGMMA_SWIZZLE_MODE,
    batched_fragment,
    tcgen05_accumulator,
    descriptor_strides,
    wgmma_a_registers,
    wgmma_shared_operand,
    widest_swizzle,
)
from ..record import record
from ..target import smem_limit
from ..tile import ops_arith as AR
from ..tile.enums import Signedness
from .tiles import element_bytes


@record(frozen=True)
class TensorCoreMma:
    """One tensor-core form: ``mma.sync.aligned.m16n8kK.row.col`` a warp at a time, or
    with ``warpgroup`` ``wgmma.mma_async.sync.aligned.m64nNkK`` a warpgroup at a time
    (sm_90a; the accumulator layout is the same ``mma_fragment``, see ``tensor_core_mma``).
    Its type suffix (``f32.f16.f16.f32``), K per instruction, the operands' element bits
    and the accumulator kind.  ``m`` is the instruction's rows: 8 for f64 (DMMA,
    ``m8n8k4``), two of which make each m16n8 block of the accumulator."""
    types: str
    k: int
    bits: int
    integer: bool
    warpgroup: bool = False
    m: int = 16
    #: block-scaled (``mmaf_scaled``): the ``kind::`` of ``mma.sync...block_scale``, else ""
    kind: str = ""
    #: 8-bit B staged K x N is read with ``ldmatrix.m16n16.x2.trans.b8`` (sm_100a, sm_120a:
    #: ``B8_MATRIX_ARCH``), two column blocks a K step, its rows 16 bytes aligned
    #: (``mma_staging_pitches``), as NVIDIA's tileiras reads it; else byte by byte
    b_matrix8: bool = False
    #: ``tcgen05.mma`` (sm_100 family): one thread issues the whole multiply from shared
    #: memory into tensor memory, the accumulator read back with ``tcgen05.ld``
    #: (``tcgen05_form``); ``warpgroup`` is then False
    tcgen05: bool = False

    @property
    def opcode(self) -> str:
        scaled = f"kind::{self.kind}.block_scale.scale_vec::1X." if self.kind else ""
        return f"mma.sync.aligned.{scaled}m{self.m}n8k{self.k}.row.col.{self.types}"

    def wgmma_opcode(self, n: int) -> str:
        """``wgmma.mma_async`` for an m64 x ``n`` accumulator block (``.dtype.atype.btype``)."""
        return f"wgmma.mma_async.sync.aligned.m64n{n}k{self.k}.{self.types.rsplit('.', 1)[0]}"

    @property
    def tcgen05_kind(self) -> str:
        """The ``kind::`` of ``tcgen05.mma`` for the operand types."""
        return TCGEN05_KINDS[self.types.split(".")[1]][0]

    def instruction_descriptor(self, m: int, n: int, a_mn_major: bool, b_mn_major: bool) -> int:
        """``tcgen05.mma``'s 32-bit instruction descriptor (PTX ISA, "Instruction descriptor"):
        f32 D (bits 4-5), A's and B's formats (7-9, 10-12), MN-major A and B (15, 16), N / 8
        (17-22) and M / 16 (24-28); dense, no negation, no saturation."""
        _, a, b, _ = self.types.split(".")
        return (1 << 4 | TCGEN05_KINDS[a][1] << 7 | TCGEN05_KINDS[b][1] << 10 | a_mn_major << 15
                | b_mn_major << 16 | (n >> 3) << 17 | (m >> 4) << 24)


#: mma.sync operand formats per Tile IR element type: (PTX name, bits, K, lowest arch)
MMA_SYNC_FORMATS = {"f16": ("f16", 16, 16, 80), "bf16": ("bf16", 16, 16, 80), "tf32": ("tf32", 32, 8, 80),
                    "f8E4M3FN": ("e4m3", 8, 32, 89), "f8E5M2": ("e5m2", 8, 32, 89)}
#: the f64 form (DMMA, sm_80+): ``mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64``
DMMA = TensorCoreMma("f64.f64.f64.f64", 4, 64, False, False, 8)
#: ``tcgen05.mma`` kind and format code (instruction descriptor bits 7-9 / 10-12) of each operand type
TCGEN05_KINDS = {"f16": ("f16", 0), "bf16": ("f16", 1), "tf32": ("tf32", 2), "e4m3": ("f8f6f4", 0),
                 "e5m2": ("f8f6f4", 1)}
#: rows of the accumulator block one ``tcgen05.mma`` (cta_group::1) computes: 128, or 64 for a 64-row tile
TCGEN05_ROWS = 128
#: tensor-memory columns of an SM (32-bit each, 128 lanes)
TMEM_COLUMNS = 512
#: architectures with ``wgmma`` (sm_90a only: sm_100 and later have tcgen05 instead)
WGMMA_ARCHS = (90,)
#: rows of the accumulator block one ``wgmma`` computes (m64)
WGMMA_ROWS = 64
#: warps of a warpgroup, the unit ``wgmma`` runs on
WARPGROUP = 4


def tensor_core_mma(op: Operation, arch: int, num_warps: int = 1, extra_warps: int = 0) -> Optional[TensorCoreMma]:
    """The tensor-core form a 2-D matrix multiply runs as, or None (CUDA cores): mmaf of
    f16, bf16 (f32 sums), tf32 or 8-bit floats (sm_89+; e4m3 and e5m2 may mix) and mmai
    of 8-bit integers, M, N and K multiples of 16, 8 and the instruction's K.  Float sums
    are f32 and an f16 accumulator rounds once at the end, as on CUDA cores; integer sums
    wrap (NVIDIA's tileiras saturates them, ``.satfinite``; the two differ only past 2^31).

    On sm_90 those with M a multiple of 64 in whole warpgroups (``num_warps`` and
    ``extra_warps`` multiples of 4) run as ``wgmma`` (same K per instruction): ``mma_fragment`` then gives warp
    ``w`` of a warpgroup rows ``16 w`` to ``16 w + 15`` of each 64-row block, each 8
    columns an m16n8 accumulator in column order, which is ``wgmma``'s accumulator
    (``tensor_core.wgmma_accumulator``).

    f64 mmaf (all three f64) with M, N and K multiples of 16, 8 and 4 runs as ``DMMA``
    on every architecture from sm_80, as NVIDIA's tileiras does (never ``wgmma``: it has
    no f64 form); the sums are f64 as on CUDA cores.

    A batched multiply (B x M x K @ B x K x N) takes the 2-D form of its matrices, each
    multiplied in turn (``accumulator_layout``: every thread holds its fragment of each);
    never ``wgmma``, as NVIDIA's tileiras keeps batched ones on ``mma.sync`` on sm_90."""
    if isinstance(op, AR.MmaFScaledOp):
        return _block_scaled_mma(op, arch)
    if not isinstance(op, (AR.MmaFOp, AR.MmaIOp)) or arch < 80 or op.result.type.rank not in (2, 3):
        return None
    a, b, c = (T.element_type(v.type).name for v in op.operands[:3])
    (m, n), k = op.result.type.shape[-2:], op.lhs.type.shape[-1]
    if op.result.type.rank == 3:
        num_warps = 0           # no warpgroup form
    if (a, b, c) == ("f64", "f64", "f64"):
        return DMMA if m % 16 == 0 and n % 8 == 0 and k % DMMA.k == 0 else None
    if isinstance(op, AR.MmaIOp):
        if (a, b, c) != ("i8", "i8", "i32"):
            return None
        sign = {Signedness.SIGNED: "s8", Signedness.UNSIGNED: "u8"}
        types = f"s32.{sign[op.signedness_lhs]}.{sign[op.signedness_rhs]}.s32"
        form = (types, 32, 8, True)
    else:
        fa, fb = MMA_SYNC_FORMATS.get(a), MMA_SYNC_FORMATS.get(b)
        if fa is None or fb is None or fa[1:] != fb[1:] or (fa[1] == 16 and a != b) or arch < fa[3]:
            return None
        if c not in ("f32", "f16") or (c == "f16" and a != "f16" and fa[1] != 8):
            return None
        form = (f"f32.{fa[0]}.{fb[0]}.f32", fa[2], fa[1], False)
    if m % 16 or n % 8 or k % form[1]:
        return None
    warpgroup = (arch in WGMMA_ARCHS and m % WGMMA_ROWS == 0 and num_warps > 0 and num_warps % WARPGROUP == 0
                 and extra_warps % WARPGROUP == 0)
    return TensorCoreMma(*form, warpgroup, b_matrix8=form[2] == 8 and not warpgroup and arch >= B8_MATRIX_ARCH)


#: the first architecture with ``ldmatrix.m16n16...b8`` (its ``a`` targets, which tileiras
#: compiles for: sm_100a, sm_120a)
B8_MATRIX_ARCH = 100


def fitted_to(form: TensorCoreMma, accumulator: LinearLayout) -> TensorCoreMma:
    """``form`` for its accumulator layout: B read as 16 x 16 byte matrices
    (``b_matrix8``) only where each warp's columns start 16 elements aligned, so that
    the pair of column blocks a matrix covers is the warp's own; else byte by byte, its
    rows padded as for that (``mma_staging_pitches``)."""
    if not form.b_matrix8 or all(base[-1] % 16 == 0 for base in accumulator.bases("warp")):
        return form
    return TensorCoreMma(form.types, form.k, form.bits, form.integer, form.warpgroup, form.m, form.kind, False)


#: architectures with ``mma.sync...block_scale`` (sm_12x; sm_100 has tcgen05 instead)
BLOCK_SCALED_ARCHS = (120, 121)
#: elements of K one MX scale factor covers (``scale_vec::1X`` of an m16n8k32)
MX_BLOCK = 32


def _block_scaled_mma(op: Operation, arch: int) -> Optional[TensorCoreMma]:
    """The tensor-core form of an ``mmaf_scaled`` on sm_12x, as NVIDIA's tileiras picks it:
    8-bit float operands (e4m3 and e5m2 may mix) with e8m0 scales, one a block of 32 along
    K, f32 sums, M, N and K multiples of 16, 8 and 32, as
    ``mma.sync.aligned.kind::mxf8f6f4.block_scale.scale_vec::1X.m16n8k32`` (each row of A
    and column of B its one factor per instruction); else None (CUDA cores)."""
    if arch not in BLOCK_SCALED_ARCHS or op.result.type.rank != 2:
        return None
    a, b, c, sa, sb = (T.element_type(v.type).name for v in op.operands[:5])
    fa, fb = MMA_SYNC_FORMATS.get(a), MMA_SYNC_FORMATS.get(b)
    if fa is None or fb is None or fa[1] != 8 or fb[1] != 8 or c != "f32" or (sa, sb) != ("f8E8M0FNU",) * 2:
        return None
    (m, n), k = op.result.type.shape, op.lhs.type.shape[-1]
    if m % 16 or n % 8 or k % MX_BLOCK or op.operands[3].type.shape[-1] * MX_BLOCK != k:
        return None
    return TensorCoreMma(f"f32.{fa[0]}.{fb[0]}.f32.ue8m0", 32, 8, False, False, 16, "mxf8f6f4",
                         b_matrix8=arch >= B8_MATRIX_ARCH)


def scale_offsets(op: Operation, form: Optional["TensorCoreMma"] = None) -> tuple[int, int]:
    """Bytes from the staging's start to the block scales of a block-scaled multiply,
    A's (M x K/32) then B's (K/32 x N), each row-major after the operands' rows."""
    sa = batch_stride(op, None, form) * element_bytes(op.lhs.type)
    return sa, sa + op.operands[3].type.num_elements


def accumulator_layout(op: Operation, num_warps: int, form: Optional[TensorCoreMma] = None) -> LinearLayout:
    """The layout of a tensor-core multiply's accumulator: ``mma_fragment`` over M x N,
    and for a batched one that fragment of each matrix (``tensor_core.batched_fragment``);
    a ``tcgen05`` one's as ``tcgen05.ld`` reads it (``tensor_core.tcgen05_accumulator``)."""
    shape = op.result.type.shape
    if form is not None and form.tcgen05:
        return tcgen05_accumulator(*shape, num_warps)
    fragment = mma_fragment(shape[-2:], num_warps)
    return batched_fragment(fragment, shape[0]) if len(shape) == 3 else fragment


def mma_staging_bytes(op: Operation, k_slice: Optional[int] = None, form: Optional["TensorCoreMma"] = None,
                      b_rows: bool = False) -> int:
    """Shared-memory bytes ``mma.sync``'s operands are staged in: A and B of each matrix
    in rows of ``mma_staging_pitches``, one matrix after the other (``batch_stride``);
    with ``k_slice``, the K slice of them one stage holds (``mma_k_slice``)."""
    scales = sum(v.type.num_elements for v in op.operands[3:5]) if isinstance(op, AR.MmaFScaledOp) else 0
    return batch_count(op) * batch_stride(op, k_slice, form, b_rows) * element_bytes(op.lhs.type) + scales


#: Bytes of A one lane reads at a time in a CUDA-core multiply (``simt_mma._OuterProduct``)
SIMT_READ_BYTES = 16


def simt_a_pitch(op: Operation, acc: "LinearLayout", arch: int) -> int:
    """Row pitch (elements) of A staged for a CUDA-core multiply whose accumulator has
    layout ``acc`` (``codegen/simt_mma``): K, unless the rows the lanes of a warp read at
    one K step (``acc``'s lane bases along M) would then share banks; then
    ``mma_staging_pitches``'s, 16 bytes more (an odd multiple of 16 bytes where K's bytes
    are a multiple of 32: a 128x128 f32 accumulator blocked 8x16 a thread reads 4 rows of
    128 bytes a warp, all in the same banks unpadded).  Staging that takes more than half
    of ``arch``'s shared memory stays unpadded: a kernel that fits without the padding
    must not be refused for it."""
    k, eb = op.lhs.type.shape[-1], element_bytes(op.lhs.type)
    if arch and 2 * simt_offsets(op, k)[-1] > smem_limit(f"sm_{arch}"):
        return k
    rows = sorted({acc.apply(lane=lane)[-2] for lane in range(32)})

    def clash(pitch: int) -> bool:
        width = min(SIMT_READ_BYTES, k * eb)
        starts = sorted({r * pitch * eb % 128 for r in rows})
        return len(starts) < len(rows) or any(b - a < width for a, b in zip(starts, starts[1:] + [starts[0] + 128]))

    padded = mma_staging_pitches(op)[0]
    return padded if len(rows) > 1 and clash(k) and not clash(padded) else k


def simt_staging_bytes(op: Operation, acc: "LinearLayout", arch: int) -> int:
    """Shared-memory bytes a CUDA-core multiply stages its operands in
    (``simt_offsets``'s end)."""
    return simt_offsets(op, simt_a_pitch(op, acc, arch))[-1]


def simt_offsets(op: Operation, a_pitch: int) -> tuple[int, ...]:
    """Byte offsets at which a CUDA-core multiply stages B and (``mmaf_scaled``) A's and
    B's block scales, after A in rows of ``a_pitch`` elements, then the end of the
    staging: what the scratch holds and where ``codegen/simt_mma`` writes."""
    a_t = op.operands[0].type
    at = a_t.num_elements // a_t.shape[-1] * a_pitch * element_bytes(a_t)
    offsets = []
    for v in [v for i, v in enumerate(op.operands) if i not in (0, 2)]:
        offsets.append(at)
        at += v.type.num_elements * element_bytes(v.type)
    return (*offsets, at)


def mma_k_slice(op: Operation, form: "TensorCoreMma", budget: int) -> Optional[int]:
    """The K slice an ``mma.sync`` multiply stages its operands in when staging them whole
    would take more than ``budget`` bytes: the largest power-of-two multiple of the
    instruction's K that divides K and whose staging (A's M x slice, B's slice x N, rows
    padded as ``mma_staging_pitches`` pads them) fits; the emitter then stages and
    multiplies one slice after another (``emit_mma._tensor_core_mma``).  None where the
    whole operands fit, for block-scaled forms (their scales are staged whole), and where
    no slice fits (a real overflow, which ``smem_limit`` reports)."""
    k = op.lhs.type.shape[-1]
    if form.kind or mma_staging_bytes(op, None, form) <= budget:
        return None
    slice_k = form.k
    while k % (2 * slice_k) == 0 and 2 * slice_k < k and mma_staging_bytes(op, 2 * slice_k, form) <= budget:
        slice_k *= 2
    return slice_k if mma_staging_bytes(op, slice_k, form) <= budget else None


def batch_count(op: Operation) -> int:
    """Matrices a (possibly batched) multiply multiplies."""
    shape = op.result.type.shape
    return shape[0] if len(shape) == 3 else 1


def batch_stride(op: Operation, k_slice: Optional[int] = None, form: Optional["TensorCoreMma"] = None,
                 b_rows: bool = False) -> int:
    """Elements of one matrix's staged A and B (``mma_staging_pitches``): all of K, or
    ``k_slice`` of it."""
    a_pitch, b_pitch = mma_staging_pitches(op, k_slice, form, b_rows)
    rows = op.rhs.type.shape[-1] if b_rows else k_slice or op.rhs.type.shape[-2]
    return op.lhs.type.shape[-2] * a_pitch + rows * b_pitch


#: the widest accumulator block of one ``wgmma`` (m64n256)
WGMMA_MAX_N = 256
#: instruction K steps one iteration of the wgmma K loop issues as one commit group
WGMMA_STEPS = 4


def k_steps(elem_bytes: int, k: int) -> tuple[int, int]:
    """(K of one ``wgmma``: 32 bytes, K of one iteration of the K loop: up to
    ``WGMMA_STEPS`` instructions)."""
    step = 32 // elem_bytes
    return step, min(WGMMA_STEPS, k // step) * step


@record(frozen=True)
class OperandStaging:
    """One ``wgmma`` operand waiting in shared memory from byte ``base`` on: ``layout`` maps
    an element offset to (row of A or column of B, k), as ``wgmma_shared_operand`` builds
    it for ``swizzle`` and ``k_major``; ``mn_dim`` is the tile dim of M (0, A) or N (1, B).
    A warpgroup whose first row of A (column of B) is ``o`` finds its operand
    ``o / origin_unit`` times ``offset(origin_unit, 0)`` bytes on (``_descriptors_step``
    checked that offsets add up so).  ``padding`` (K-major without swizzle only) spaces
    the core matrices: affine on them, so the descriptors' strides stay constant; it is
    for operands no swizzle spreads over the banks (an 8-bit B held along N: wgmma
    has no MN-major 8-bit operands)."""
    layout: LinearLayout
    swizzle: Swizzle
    k_major: bool
    mn_dim: int
    base: int
    elem_bytes: int
    #: the warpgroups' first rows of A (columns of B) are multiples of this (0: all 0)
    origin_unit: int = 0
    #: without swizzle, 16 bytes after each core matrix or each K column of them (or none)
    padding: Optional[Padding] = None

    @property
    def tile(self) -> LinearLayout:
        """offset -> the tile's own coordinates: A's (m, k), B's (k, n)."""
        return self.layout if self.mn_dim == 0 else self.layout.permute((1, 0))

    @property
    def nbytes(self) -> int:
        size = self.layout.size(OFFSET)
        return self.elem_bytes * (self.padding.padded_size(size) if self.padding else size)

    @property
    def mode(self) -> int:
        """The descriptor's swizzle field."""
        return WGMMA_SWIZZLE_MODE[self.swizzle]

    @property
    def transposed(self) -> bool:
        """The instruction's ``imm-trans`` for this operand: MN-major."""
        return not self.k_major

    def strides(self, spacing: int = 8) -> tuple[int, int]:
        """(leading, stride) byte offsets of its descriptors (``descriptor_strides``), the
        instruction's 8-row groups ``spacing`` rows apart (B's columns of one warpgroup
        interleaved with another's): K-major, or MN-major without swizzle, the group step
        is the stride offset, so it is the offset of row ``spacing``."""
        lbo, sbo = descriptor_strides(self.layout, self.elem_bytes, self.swizzle, self.k_major, self.padding)
        if spacing == 8:
            return lbo, sbo
        if not self.k_major and self.swizzle is not Swizzle.NONE:
            raise ValueError("a swizzled MN-major operand keeps its rows contiguous")
        return lbo, self.offset(spacing, 0)

    def offset(self, mn: int, k: int) -> int:
        """Byte offset (from ``base``) of element (mn, k)."""
        (offset,) = _inverse(self.layout).apply(dim0=mn, dim1=k)
        return self.elem_bytes * (self.padding.apply(offset) if self.padding else offset)


@functools.lru_cache(maxsize=64)
def _inverse(layout: LinearLayout) -> LinearLayout:
    return layout.invert()


@record(frozen=True)
class WgmmaStaging:
    """Where ``wgmma`` operands wait in shared memory (A's bytes first, B's from ``b.base``)
    and the accumulator blocks they feed: each warpgroup holds ``columns`` columns of
    each of its 64-row blocks, 8-column blocks ``spacing`` apart (8: contiguous; more
    where warpgroups interleave along N).  With ``a_registers`` A is not staged: its
    registers already hold ``wgmma``'s A fragments (``a_register_fragments``), and
    ``a_registers[i][s]`` lists the registers of 64-row block ``i``, K step ``s``."""
    a: Optional[OperandStaging]
    b: OperandStaging
    columns: int
    spacing: int
    a_registers: Optional[tuple] = None

    @property
    def nbytes(self) -> int:
        return self.b.base + self.b.nbytes

    @property
    def align(self) -> int:
        """Alignment the shared buffer needs: a swizzle repeats every 8 rows of its width,
        and the hardware swizzles absolute addresses."""
        return max(16, 8 * self.b.swizzle.value, 8 * self.a.swizzle.value if self.a else 0)


def a_register_fragments(a_regs: LinearLayout, acc: LinearLayout, bits: int) -> Optional[tuple]:
    """Whether A's registers (``a_regs``, M x K of ``bits``-bit elements) already hold
    ``wgmma``'s register operand for every 64-row block of the accumulator ``acc`` and
    every K step (``tensor_core.wgmma_a_registers``, as an f16 P = softmax(Q K^T) left in
    the Q K^T accumulator's layout does): its lanes and first two warp bits those of the
    fragment, the further warp bits the accumulator's (each warpgroup its own rows), and
    for block ``i`` (rows from ``R_i``) and K step ``s`` a register of A for each
    fragment register, at the fragment's element plus (R_i, K of ``s`` steps).  The
    registers, [block][step][fragment register], or None."""
    frag = wgmma_a_registers(bits)
    if (a_regs.bases(LANE) != frag.bases(LANE) or a_regs.bases(WARP)[:2] != frag.bases(WARP)
            or a_regs.bases(WARP)[2:] != acc.bases(WARP)[2:]):
        return None
    rows_blocks, cols_blocks = mma_blocks(acc)
    step = frag.shape[1]
    holder = {a_regs.apply(reg=r): r for r in range(a_regs.size(REG))}
    out = []
    for i in range(rows_blocks):
        origin = acc.apply(reg=4 * cols_blocks * i)[0]
        steps = []
        for k0 in range(0, a_regs.shape[1], step):
            at = [frag.apply(reg=e) for e in range(frag.size(REG))]
            regs = [holder.get((origin + r, k0 + c)) for r, c in at]
            if None in regs:
                return None
            steps.append(tuple(regs))
        out.append(tuple(steps))
    return tuple(out)


def warpgroup_columns(acc: LinearLayout) -> tuple[int, int]:
    """(columns, spacing) of each 64-row block of ``acc`` (an ``mma_fragment`` holding wgmma
    accumulators) one warpgroup holds: its 8-column blocks in register order (registers
    ``4 j`` on), ``spacing`` columns apart."""
    _, cols_blocks = mma_blocks(acc)
    spacing = acc.apply(reg=4)[1] if cols_blocks > 1 else 8
    if any(acc.apply(reg=4 * j) != (0, j * spacing) for j in range(cols_blocks)):
        raise ValueError(f"{acc} is not wgmma accumulators")
    return 8 * cols_blocks, spacing


def wgmma_staging(op: Operation, a_regs: LinearLayout, b_regs: LinearLayout, acc: LinearLayout) -> WgmmaStaging:
    """The staging of ``op``'s operands for ``wgmma``, given the register layouts A, B and
    the accumulator arrive in: each operand K-major or (16-bit types) MN-major, in the
    widest swizzle its contiguous extent fills, whichever its register->shared stores
    take the fewest shared-memory wavefronts with (``bank_wavefronts``, the stores as wide
    as their consecutive offsets allow, up to 16 bytes), then the widest stores; among
    the forms whose descriptors the K loop and each warpgroup's blocks can step
    (``_descriptors_step``).  B starts at the alignment the swizzles need.  A 16-bit A
    whose registers already hold wgmma's A fragments is not staged at all
    (``a_register_fragments``)."""
    esize = element_bytes(op.lhs.type)
    (m, k), n = op.lhs.type.shape, op.rhs.type.shape[-1]
    columns, spacing = warpgroup_columns(acc)
    origins = {(acc.apply(warp=w)[0] & ~63, acc.apply(warp=w)[1] & ~7) for w in range(acc.size(WARP))}
    fragments = a_register_fragments(a_regs, acc, 8 * esize) if esize == 2 else None
    a = None if fragments else _best_staging(a_regs, m, k, 0, esize, 0, {o[0] for o in origins}, range(0, m, 64),
                                             64, 8)
    b_base = -(-a.nbytes // 1024) * 1024 if a else 0
    chunks = [c // 8 * spacing for c in range(0, columns, WGMMA_MAX_N)]
    b = _best_staging(b_regs, n, k, 1, esize, b_base, {o[1] for o in origins}, chunks,
                      min(columns, WGMMA_MAX_N) if spacing == 8 else 8, spacing)
    return WgmmaStaging(a, b, columns, spacing, fragments)


def tma_ring_staging(op: Operation, acc: LinearLayout, b_k_major: bool, a_k_major: bool = True
                     ) -> Optional[WgmmaStaging]:
    """``wgmma``'s operands as TMA boxes land them in one stage of a ring
    (``tma_ring.RingPlan``): A (M x K, K contiguous) K-major (MN-major with ``a_k_major``
    False: M contiguous, 16-bit elements only), B MN-major (K x N,
    N contiguous; 16-bit elements only: wgmma has no other MN-major operands) or K-major
    (loaded N x K), each in the widest swizzle its contiguous extent fills, which is the
    layout a tensor map with that swizzle writes a column of atoms in (``nvmma_shared``);
    B from A's end rounded up to 1024 bytes (the 128-byte swizzle's repeat).  None where an
    extent fills no swizzle or the descriptors cannot step (``_descriptors_step``)."""
    esize = element_bytes(op.lhs.type)
    (m, k), n = op.lhs.type.shape, op.rhs.type.shape[-1]
    if (not b_k_major or not a_k_major) and esize != 2:
        return None
    columns, spacing = warpgroup_columns(acc)
    origins = {(acc.apply(warp=w)[0] & ~63, acc.apply(warp=w)[1] & ~7) for w in range(acc.size(WARP))}
    a = _landed_staging(m, k, 0, esize, 0, a_k_major, {o[0] for o in origins}, range(0, m, 64), 8)
    if a is None:
        return None
    chunks = [c // 8 * spacing for c in range(0, columns, WGMMA_MAX_N)]
    b = _landed_staging(n, k, 1, esize, -(-a.nbytes // 1024) * 1024, b_k_major, {o[1] for o in origins}, chunks,
                        spacing)
    return None if b is None else WgmmaStaging(a, b, columns, spacing)


def tcgen05_form(op: Operation, form: Optional[TensorCoreMma], num_warps: int) -> Optional[TensorCoreMma]:
    """``form`` (an ``mma.sync`` one) as ``tcgen05.mma``, or None: a 2-D float multiply
    with f32 sums (f16, bf16, tf32, e4m3/e5m2 operands), computed by one warpgroup
    (``num_warps`` 4 or 8: the warps that read the accumulator back, each its quarter of the
    tensor-memory lanes; 8: the second warpgroup the other half of the columns), M 64 or 128 times a power of two (blocks of 128 rows), N a
    power of two from 16 to 256 (one instruction), K a multiple of the instruction's."""
    if form is None or form.integer or form.kind or form.bits == 64 or num_warps not in (WARPGROUP, 2 * WARPGROUP):
        return None
    if not isinstance(op, AR.MmaFOp) or op.result.type.rank != 2 or T.element_type(op.result.type).name != "f32":
        return None
    (m, n), k = op.result.type.shape, op.lhs.type.shape[-1]
    if not (m == 64 or (m % TCGEN05_ROWS == 0 and m & (m - 1) == 0)) or n & (n - 1) or not 16 <= n <= 256:
        return None
    if k % form.k or tcgen05_columns(op) > TMEM_COLUMNS:
        return None
    return TensorCoreMma(form.types, form.k, form.bits, False, tcgen05=True)


def tcgen05_columns(op: Operation) -> int:
    """Tensor-memory columns a ``tcgen05`` multiply's accumulator takes: N per 128-row block."""
    m, n = op.result.type.shape
    return max(1, m // TCGEN05_ROWS) * n


def tcgen05_rows(op: Operation) -> int:
    """Rows of A each ``tcgen05.mma`` of the multiply reads (its M)."""
    return min(op.result.type.shape[0], TCGEN05_ROWS)


def tcgen05_staging(op: Operation, a_regs: LinearLayout, b_regs: LinearLayout) -> WgmmaStaging:
    """Where a ``tcgen05`` multiply's operands wait in shared memory, stored there from
    registers: each in the form its stores take the fewest wavefronts with
    (``_best_staging``, as for ``wgmma``), A's descriptors one per block of
    ``tcgen05_rows`` rows, B's one for all N columns."""
    esize = element_bytes(op.lhs.type)
    (m, k), n = op.lhs.type.shape, op.rhs.type.shape[-1]
    rows = tcgen05_rows(op)
    a = _best_staging(a_regs, m, k, 0, esize, 0, {0}, range(0, m, rows), rows, 8)
    b = _best_staging(b_regs, n, k, 1, esize, -(-a.nbytes // 1024) * 1024, {0}, [0], n, 8)
    return WgmmaStaging(a, b, n, 8)


def tcgen05_ring_staging(op: Operation, b_k_major: bool, a_k_major: bool = True) -> Optional[WgmmaStaging]:
    """A ``tcgen05`` multiply's operands as TMA boxes land them in a ring's stage (as
    ``tma_ring_staging`` for ``wgmma``, 8-bit ones MN-major too: NVIDIA's fp8 GEMMs), or None."""
    esize = element_bytes(op.lhs.type)
    (m, k), n = op.lhs.type.shape, op.rhs.type.shape[-1]
    if (not b_k_major or not a_k_major) and esize == 4:
        return None
    a = _landed_staging(m, k, 0, esize, 0, a_k_major, {0}, range(0, m, tcgen05_rows(op)), 8)
    if a is None:
        return None
    b = _landed_staging(n, k, 1, esize, -(-a.nbytes // 1024) * 1024, b_k_major, {0}, [0], 8)
    return None if b is None else WgmmaStaging(a, b, n, 8)


def _landed_staging(mn: int, k: int, mn_dim: int, esize: int, base: int, k_major: bool, origins: set,
                    blocks: Sequence[int], spacing: int) -> Optional[OperandStaging]:
    """One operand of ``tma_ring_staging``, or None."""
    swizzle = widest_swizzle((k if k_major else mn) * esize)
    if swizzle is Swizzle.NONE:
        return None
    unit = min((o for o in origins if o), default=0)
    staging = OperandStaging(wgmma_shared_operand(mn, k, esize, swizzle, k_major), swizzle, k_major, mn_dim, base,
                             esize, unit)
    return staging if _descriptors_step(staging, origins, blocks, spacing, k) else None


def _best_staging(regs: LinearLayout, mn: int, k: int, mn_dim: int, esize: int, base: int, origins: set,
                  blocks: Sequence[int], span: int, spacing: int) -> OperandStaging:
    """The cheapest staging (``wgmma_staging``) of one operand, ``mn`` x ``k``, whose
    descriptors read ``span`` contiguous rows of A (columns of B) each, at the warpgroup
    ``origins`` plus ``blocks``."""
    best, best_cost = None, None
    unit = min((o for o in origins if o), default=0)
    for k_major, swizzle, padding in _forms(esize, mn, k, min(span, mn)):
        staging = OperandStaging(wgmma_shared_operand(mn, k, esize, swizzle, k_major), swizzle, k_major,
                                 mn_dim, base, esize, unit, padding)
        if not _descriptors_step(staging, origins, blocks, spacing, k):
            continue
        vector = regs.invert_and_compose(staging.tile).largest_vectorization(0, 16 // esize)
        try:
            cost = (sum(bank_wavefronts(regs, staging.tile, esize, vector, padding=padding)), -vector,
                    staging.nbytes)
        except ValueError:      # a vector across the padding
            continue
        if best_cost is None or cost < best_cost:
            best, best_cost = staging, cost
    if best is None:
        raise ValueError(f"no wgmma staging for a {mn}x{k} operand")
    return best


def _forms(esize: int, mn: int, k: int, mn_span: int) -> list[tuple[bool, Swizzle, Optional[Padding]]]:
    """(K-major, swizzle, padding) forms an operand may take: K-major, or (16-bit types)
    MN-major, each in the swizzles whose width divides its contiguous extent, widest
    first; then K-major without swizzle, padded after each core matrix or each K column
    of them (``OperandStaging.padding``)."""
    out: list[tuple[bool, Swizzle, Optional[Padding]]] = []
    for k_major in ((True, False) if esize == 2 else (True,)):
        widest = widest_swizzle((k if k_major else mn_span) * esize)
        out += [(k_major, s, None) for s in (Swizzle.B128, Swizzle.B64, Swizzle.B32) if s.value <= widest.value]
        if not k_major or widest is Swizzle.NONE:
            out.append((k_major, Swizzle.NONE, None))
    chunk = 16 // esize
    return out + [(True, Swizzle.NONE, Padding(8 * chunk, chunk)), (True, Swizzle.NONE, Padding(mn * chunk, chunk))]


def _descriptors_step(staging: OperandStaging, origins: set, blocks: Sequence[int], spacing: int, k: int) -> bool:
    """Whether ``emit_mma._warpgroup_mma``'s descriptors read ``staging`` right: each
    descriptor starts at the offset of (warpgroup origin + block, K step), which it
    computes as the origin's share (a multiple of one origin's offset), the K loop's (a
    multiple of one iteration's) and a constant, so those offsets must add up; the
    descriptor's strides must exist for the blocks' ``spacing``; and a swizzled MN-major
    block must start on an atom (its rows run along M/N inside atoms)."""
    try:
        staging.strides(spacing)
    except ValueError:
        return False
    unit = staging.origin_unit
    if unit & (unit - 1) or any(o % unit for o in origins if o):
        return False
    k_step, per_iteration = k_steps(staging.elem_bytes, k)
    swizzled_mn = not staging.k_major and staging.swizzle is not Swizzle.NONE
    atom = staging.swizzle.width // staging.elem_bytes if swizzled_mn else 1
    if any((o + r) % atom for o, r in itertools.product(origins, blocks) if not o & r):
        return False
    for o, r, j, s in itertools.product(origins, blocks, range(0, k, per_iteration), range(0, per_iteration, k_step)):
        if o & r:
            continue
        runtime = (o // unit * staging.offset(unit, 0) if o else 0) + j // per_iteration * staging.offset(0, per_iteration)
        if staging.offset(o + r, j + s) != runtime + staging.offset(r, s):
            return False
    return True


#: bytes each row of a tensor-core operand staged in shared memory is padded by: the rows an
#: ldmatrix phase (8 rows of 16 bytes) or a fragment load reads then start in different
#: banks (a 64-byte row pitch would put every other row in the same 4 banks)
MMA_ROW_PAD = 16


def mma_staging_pitches(op: Operation, k_slice: Optional[int] = None, form: Optional["TensorCoreMma"] = None,
                        b_rows: bool = False) -> tuple[int, int]:
    """Row pitches, in elements, of A (M x K) and B (K x N; with ``b_rows`` N x K,
    ``TileAS.mma_b_rows``, padded as A) staged in shared memory for a tensor-core matrix
    multiply, each row padded by ``MMA_ROW_PAD`` bytes, except B's where its fragments read
    other rows (emit_mma.TensorCoreOperands): an 8-bit B's by 8 bytes (bytes of rows 4t + e,
    t = 0..3, then 8t words apart: four bank groups, where 16 bytes would put them in the
    same banks two by two; and a ``cp.async`` ring copies 8 bytes at a time where 4 would
    keep rows 8-byte aligned only; by 16 where ``form`` reads it with ``ldmatrix...b8``,
    ``TensorCoreMma.b_matrix8``: 16-byte rows, and the 8 rows of each of its phases 80
    bytes apart fall in 8 distinct 16-byte bank groups), a 32-bit B's to a pitch of 8
    words mod 32 (words of rows t, t = 0..3, at the columns of 8 lanes).  With ``k_slice``
    A's rows hold that slice of K (``mma_k_slice``)."""
    size = element_bytes(op.lhs.type)
    k, n = k_slice or op.lhs.type.shape[-1], op.rhs.type.shape[-1]
    if size == 8:
        return dmma_pitch(k), dmma_pitch(n)
    b_pad = {1: 16 if form is not None and form.b_matrix8 else 8, 4: 4 * ((8 - n) % 32)}.get(size, MMA_ROW_PAD)
    return k + MMA_ROW_PAD // size, (k + MMA_ROW_PAD // size) if b_rows else n + b_pad // size


def dmma_pitch(cols: int) -> int:
    """Row pitch (elements) of an f64 operand staged for ``DMMA``: 4 mod 16, the least
    above ``cols``.  Each fragment load reads element (g, t) of A (or (t, g) of B) at
    ``g * pitch + t``, and a 64-bit load is served a half warp (g < 4 or g >= 4) at a
    time: the 16 double words ``g * pitch + t`` then fall in 16 different bank pairs."""
    return cols + (4 - cols) % 16


@record(frozen=True)
class MmaSwizzle:
    """A 16-bit ``mma.sync`` operand (``rows`` x ``cols``, row-major) staged without
    padding, its 16-byte chunks XOR-swizzled by row: chunk ``c`` of row ``r`` is stored at
    chunk ``c ^ (r / per_phase) % max_phase`` (``layout``: ``shared.swizzled_shared``).
    The eight rows one ``ldmatrix`` phase reads (8 consecutive rows at one chunk) then
    fall in eight different 16-byte bank groups, as do the copies of consecutive rows."""
    rows: int
    cols: int
    esize: int
    per_phase: int
    max_phase: int
    #: the rows are split into boxes of ``box_cols`` columns, stored one box (all the rows)
    #: after another, each swizzled as a tile of its own: how TMA lands a tile whose rows
    #: are wider than 128 bytes (``mma_ring_staging``); 0: whole rows
    box_cols: int = 0

    @property
    def vec(self) -> int:
        """Elements of a 16-byte chunk."""
        return 16 // self.esize

    @property
    def period(self) -> int:
        """Rows after which the swizzle repeats."""
        return self.per_phase * self.max_phase

    @property
    def pitch(self) -> int:
        """Elements from one row to the next (of a box)."""
        return self.box_cols or self.cols

    def layout(self) -> LinearLayout:
        if self.box_cols:       # TMA's boxes: 8-row atoms of one box, then the next box
            return nvmma_shared((self.rows, self.cols), self.esize, Swizzle(self.box_cols * self.esize))
        return swizzled_shared((self.rows, self.cols), self.vec, self.per_phase, self.max_phase)


def mma_swizzle(rows: int, cols: int, esize: int) -> Optional[MmaSwizzle]:
    """The swizzle of a 16-bit operand tile: rows of ``cols`` elements share a 128-byte
    line ``per_phase`` at a time, and the phase takes as many values as the 8 rows of an
    ``ldmatrix`` phase need (or the row has chunks); None for other element sizes or rows
    narrower than a chunk.  The swizzle repeats every 8 rows or fewer, so it is the same
    for every 16-row block and every 16-row K step (``TensorCoreOperands`` relies on it).
    For rows of 32, 64 or 128 bytes it is TMA's swizzle of that width (CUTLASS's
    ``Swizzle<B, 4, 3>`` on the byte offsets: the 16-byte chunk XOR bits 7 and up)."""
    row_bytes = cols * esize
    if esize != 2 or row_bytes < 16 or rows % 8:
        return None
    return MmaSwizzle(rows, cols, esize, *_phases(row_bytes))


def _phases(row_bytes: int) -> tuple[int, int]:
    """(per_phase, max_phase) of ``mma_swizzle``'s XOR for rows of ``row_bytes``."""
    per_phase = max(1, 128 // row_bytes)
    return per_phase, max(1, min(8 // per_phase, row_bytes // 16))


@record(frozen=True)
class LandedOperand:
    """One ``mma.sync`` operand of a TMA ring's stage from byte ``base`` on, as its boxes
    land it (``form``: the tile as loaded, rows x columns contiguous in memory, in TMA's
    swizzle of the box width, box after box), read with ``ldmatrix``."""
    form: MmaSwizzle
    base: int

    @property
    def elem_bytes(self) -> int:
        return self.form.esize

    @property
    def nbytes(self) -> int:
        return self.form.rows * self.form.cols * self.form.esize

    @property
    def swizzle(self) -> Swizzle:
        """The tensor map's swizzle: the width of a box's row."""
        return Swizzle(self.form.pitch * self.form.esize)

    @property
    def layout(self) -> LinearLayout:
        return self.form.layout()


@record(frozen=True)
class MmaRingStaging:
    """Where a TMA ring's boxes land ``mma.sync``'s operands in a stage: A (M x K) from 0,
    B (K x N, or N x K where ``b_k_rows``) from ``b.base``, each in the swizzle of its box
    width (``mma_ring_staging``)."""
    a: LandedOperand
    b: LandedOperand
    b_k_rows: bool = False
    #: A's tile lies column by column in memory: its stage holds K rows of M
    a_columns: bool = False

    @property
    def nbytes(self) -> int:
        return self.b.base + self.b.nbytes

    @property
    def align(self) -> int:
        """The swizzles repeat every 8 rows of their width, on absolute addresses."""
        return max(8 * self.a.swizzle.value, 8 * self.b.swizzle.value)

    @property
    def swizzles(self) -> tuple[MmaSwizzle, MmaSwizzle]:
        return self.a.form, self.b.form


def mma_ring_staging(op: Operation, b_k_rows: bool, a_columns: bool = False) -> Optional[MmaRingStaging]:
    """How TMA boxes land an ``mma.sync`` multiply's A (M x K, K contiguous) and B (K x N,
    N contiguous; N x K where ``b_k_rows``) in a ring's stage so that ``ldmatrix`` reads
    them without bank conflicts: each tile in boxes of rows of at most 128 bytes, in TMA's
    swizzle of that width, which is ``mma_swizzle``'s for such rows (NVIDIA's sm_120
    GEMMs: A's 64-byte rows in the 64-byte swizzle, a 128-column f16 B in two boxes of
    128-byte rows); B from A's end rounded up to 1024 bytes (the swizzles' repeat).
    16-bit elements, or 8-bit ones (``ldmatrix`` reads A and an N x K B as pairs of bytes;
    an 8-bit K x N B is read a byte at a time, as NVIDIA's integer GEMMs read theirs).
    With ``a_columns`` (16-bit) A lands as K rows of M, read with ``ldmatrix.trans``.
    None otherwise, for rows narrower than 32 bytes or not a whole number of boxes."""
    esize = element_bytes(op.lhs.type)
    if esize == 1 and a_columns:
        return None
    (m, k), n = op.lhs.type.shape, op.rhs.type.shape[-1]
    a = landed_form(*((k, m) if a_columns else (m, k)), esize)
    b = landed_form(*((n, k) if b_k_rows else (k, n)), esize)
    if a is None or b is None:
        return None
    a_operand = LandedOperand(a, 0)
    return MmaRingStaging(a_operand, LandedOperand(b, -(-a_operand.nbytes // 1024) * 1024), b_k_rows, a_columns)


def landed_form(rows: int, cols: int, esize: int) -> Optional[MmaSwizzle]:
    """The ``MmaSwizzle`` of a rows x cols tile (1- or 2-byte elements) TMA lands in boxes
    of at most 128-byte rows: ``mma_swizzle``'s for rows of the box's width, 16-byte
    chunk c of row r at c ^ (r / (128 / width)) % (width / 16)."""
    width = min(cols * esize, 128)
    if esize not in (1, 2) or width not in (32, 64, 128) or cols * esize % width or rows % 8:
        return None
    return MmaSwizzle(rows, cols, esize, *_phases(width), width // esize if width < cols * esize else 0)
