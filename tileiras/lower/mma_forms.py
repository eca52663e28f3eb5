"""The tensor-core form of each matrix multiply, and how its operands wait in shared memory.

Decided once, by TileAS (``tileas.assign_layouts`` records ``tensor_core_mma`` per op and
the ``_mma`` layout rule records the staging); ``codegen.emit_mma`` only reads it.
"""
from __future__ import annotations

from typing import Optional

from ..ir import types as T
from ..ir.core import Operation
from ..layout.core import OFFSET
from ..layout.linear import LinearLayout
from ..layout.shared import Padding, Swizzle, bank_wavefronts, swizzled_shared
from ..layout.tensor_core import wgmma_shared_operand
from ..record import record
from ..tile import ops_arith as AR
from ..tile.enums import Signedness
from .tiles import element_bytes


@record(frozen=True)
class TensorCoreMma:
    """One tensor-core form: ``mma.sync.aligned.m16n8kK.row.col`` a warp at a time, or
    with ``warpgroup`` ``wgmma.mma_async.sync.aligned.m64nNkK`` a warpgroup at a time
    (sm_90a; the accumulator layout is the same ``mma_fragment``, see ``tensor_core_mma``).
    Its type suffix (``f32.f16.f16.f32``), K per instruction, the operands' element bits
    and the accumulator kind."""
    types: str
    k: int
    bits: int
    integer: bool
    warpgroup: bool = False

    @property
    def opcode(self) -> str:
        return f"mma.sync.aligned.m16n8k{self.k}.row.col.{self.types}"

    def wgmma_opcode(self, n: int) -> str:
        """``wgmma.mma_async`` for an m64 x ``n`` accumulator block (``.dtype.atype.btype``)."""
        return f"wgmma.mma_async.sync.aligned.m64n{n}k{self.k}.{self.types.rsplit('.', 1)[0]}"


#: mma.sync operand formats per Tile IR element type: (PTX name, bits, K, lowest arch)
MMA_SYNC_FORMATS = {"f16": ("f16", 16, 16, 80), "bf16": ("bf16", 16, 16, 80), "tf32": ("tf32", 32, 8, 80),
                    "f8E4M3FN": ("e4m3", 8, 32, 89), "f8E5M2": ("e5m2", 8, 32, 89)}
#: architectures with ``wgmma`` (sm_90a only: sm_100 and later have tcgen05 instead)
WGMMA_ARCHS = (90,)
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
    (``tensor_core.wgmma_accumulator``)."""
    if not isinstance(op, (AR.MmaFOp, AR.MmaIOp)) or arch < 80 or op.result.type.rank != 2:
        return None
    a, b, c = (T.element_type(v.type).name for v in op.operands[:3])
    (m, n), k = op.result.type.shape, op.lhs.type.shape[-1]
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
    warpgroup = arch in WGMMA_ARCHS and m % 64 == 0 and num_warps % WARPGROUP == 0 and extra_warps % WARPGROUP == 0
    return TensorCoreMma(*form, warpgroup)


@record(frozen=True)
class WgmmaStaging:
    """Where ``wgmma`` operands wait in shared memory: ``a`` offset -> (m, k) of A, ``b``
    offset -> (k, n) of B (its bytes after A's, ``b_base``), each K-major without swizzle
    (``tensor_core.wgmma_shared_operand``: 8x16-byte core matrices, each 8 rows' together,
    then each K step of 16 bytes after all the rows), with ``padding`` (or None) after
    each core matrix or each K column of them: ``Padding`` is affine on the core
    matrices, so the descriptors' byte offsets stay constant (``descriptor_strides``)."""
    a: LinearLayout
    b: LinearLayout
    a_padding: Optional[Padding]
    b_padding: Optional[Padding]
    elem_bytes: int

    def _bytes(self, layout: LinearLayout, padding: Optional[Padding]) -> int:
        size = layout.size(OFFSET)
        return self.elem_bytes * (padding.padded_size(size) if padding else size)

    @property
    def b_base(self) -> int:
        return self._bytes(self.a, self.a_padding)

    @property
    def nbytes(self) -> int:
        return self.b_base + self._bytes(self.b, self.b_padding)


def wgmma_staging(op: Operation, a_regs: LinearLayout, b_regs: LinearLayout) -> WgmmaStaging:
    """The staging of ``op``'s operands for ``wgmma``, given the register layouts A and B
    arrive in: each padded as ``staging_padding`` finds best for its stores."""
    esize = element_bytes(op.lhs.type)
    (m, k), n = op.lhs.type.shape, op.rhs.type.shape[-1]
    a = wgmma_shared_operand(m, k, esize, Swizzle.NONE)
    b = wgmma_shared_operand(n, k, esize, Swizzle.NONE).permute((1, 0))
    return WgmmaStaging(a, b, staging_padding(a_regs, a, m, esize), staging_padding(b_regs, b, n, esize), esize)


def staging_padding(regs: LinearLayout, shared: LinearLayout, mn: int, esize: int) -> Optional[Padding]:
    """None, 16 bytes after each core matrix (the stride byte offset grows by 16) or after
    each K column of ``mn`` rows of them (the leading one does): whichever the stores of
    ``regs`` (as wide as their consecutive offsets allow, up to 16 bytes) take the fewest
    shared-memory wavefronts with (``bank_wavefronts``; the first on ties).  Without
    padding, lanes that hold the same element of different core matrices all meet one
    bank, as B's lanes along N do (32-way) and A's along K."""
    vector = regs.invert_and_compose(shared).largest_vectorization(0, 16 // esize)
    best, fewest = None, None
    for padding in (None, Padding(128 // esize, 16 // esize), Padding(mn * 16 // esize, 16 // esize)):
        try:
            cost = sum(bank_wavefronts(regs, shared, esize, vector, padding=padding))
        except ValueError:      # a vector across the padding
            continue
        if fewest is None or cost < fewest:
            best, fewest = padding, cost
    return best


#: bytes each row of a tensor-core operand staged in shared memory is padded by: the rows an
#: ldmatrix phase (8 rows of 16 bytes) or a fragment load reads then start in different
#: banks (a 64-byte row pitch would put every other row in the same 4 banks)
MMA_ROW_PAD = 16


def mma_staging_pitches(op: Operation) -> tuple[int, int]:
    """Row pitches, in elements, of A (M x K) and B (K x N) staged in shared memory for a
    tensor-core matrix multiply, each row padded by ``MMA_ROW_PAD`` bytes, except B's where
    its fragments read other rows (emit_mma.TensorCoreOperands): an 8-bit B's by 4 bytes
    (bytes of rows 4t + e, t = 0..3, which 16 bytes would put in the same banks two by
    two), a 32-bit B's to a pitch of 8 words mod 32 (words of rows t, t = 0..3, at the
    columns of 8 lanes)."""
    size = element_bytes(op.lhs.type)
    n = op.rhs.type.shape[-1]
    b_pad = {1: 4, 4: 4 * ((8 - n) % 32)}.get(size, MMA_ROW_PAD)
    return op.lhs.type.shape[-1] + MMA_ROW_PAD // size, n + b_pad // size


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

    @property
    def vec(self) -> int:
        """Elements of a 16-byte chunk."""
        return 16 // self.esize

    @property
    def period(self) -> int:
        """Rows after which the swizzle repeats."""
        return self.per_phase * self.max_phase

    def layout(self) -> LinearLayout:
        return swizzled_shared((self.rows, self.cols), self.vec, self.per_phase, self.max_phase)


def mma_swizzle(rows: int, cols: int, esize: int) -> Optional[MmaSwizzle]:
    """The swizzle of a 16-bit operand tile: rows of ``cols`` elements share a 128-byte
    line ``per_phase`` at a time, and the phase takes as many values as the 8 rows of an
    ``ldmatrix`` phase need (or the row has chunks); None for other element sizes or rows
    narrower than a chunk.  The swizzle repeats every 8 rows or fewer, so it is the same
    for every 16-row block and every 16-row K step (``TensorCoreOperands`` relies on it)."""
    row_bytes = cols * esize
    if esize != 2 or row_bytes < 16 or rows % 8:
        return None
    per_phase = max(1, 128 // row_bytes)
    max_phase = max(1, min(8 // per_phase, row_bytes // 16))
    return MmaSwizzle(rows, cols, esize, per_phase, max_phase)
