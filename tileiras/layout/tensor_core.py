"""Tensor-core layouts as named constructors: which register of which lane (and warp)
holds which element of an MMA operand or accumulator, and where the operands and
accumulators sit in shared and tensor memory.

Register layouts count elements, not 32-bit registers: register index ``e`` of a lane is
element ``e % per`` of 32-bit register ``e / per`` (``per = 32 / bits``), the low bits of
a register first, as the PTX ISA packs them.  Lanes are grouped as ``g = lane / 4`` and
``t = lane % 4`` (the PTX ISA's ``groupID`` and ``threadID_in_group``).  Every layout is
checked against the PTX ISA's fragment figures and, where the emulator runs the
instruction, against the emulator's own mapping (``test/test_layout_tensor_core.py``).
"""
from __future__ import annotations

from collections.abc import Sequence

from ..record import record
from .core import LANE, OFFSET, REG, WARP, Base, LinearLayout, log2, unit_base
from .shared import Padding, Swizzle, nvmma_shared

#: the input dims of a tensor-memory layout: its 128 lanes (rows) and 32-bit columns
TMEM_ROW, TMEM_COL = "row", "col"
#: the two warps bits of a warpgroup: warp w of the four takes rows 16 w .. 16 w + 15
WARPGROUP_WARPS = ((16, 0), (32, 0))


def _group_lanes(g_dim: int, t_dim: int, t_step: int) -> tuple[Base, ...]:
    """Lane bases: ``t`` (bits 0-1) steps ``t_step`` along ``t_dim``, ``g`` (bits 2-4) one
    along ``g_dim``."""
    return (unit_base(2, t_dim, t_step), unit_base(2, t_dim, 2 * t_step),
            unit_base(2, g_dim, 1), unit_base(2, g_dim, 2), unit_base(2, g_dim, 4))


def mma_a_layout(k: int, bits: int = 16) -> LinearLayout:
    """Operand A (16 x ``k``, row-major) of ``mma.sync.m16n8kK`` with ``bits``-bit elements
    (the container: 8 for the f8f6f4 kinds).  32-bit register ``r`` holds row
    ``g + 8 (r % 2)``, the word ``t + 4 (r / 2)`` of the row (PTX ISA, "Matrix Fragments for
    mma.m16n8k16 with floating point type", figure "MMA .m16n8k16 fragment layout for
    matrix A"; the k8/k32/k64 and tf32 figures follow the same word pattern)."""
    per = 32 // bits
    regs = k * bits // 64
    elements = tuple((0, 1 << i) for i in range(log2(per)))
    words = ((8, 0),) + tuple((0, 4 * per << j) for j in range(log2(regs) - 1))
    return LinearLayout(((REG, elements + words), (LANE, _group_lanes(0, 1, per))), (16, k))


def mma_b_layout(k: int, bits: int = 16) -> LinearLayout:
    """Operand B (``k`` x 8, column-major) of ``mma.sync.m16n8kK``: 32-bit register ``r``
    holds column ``g``, the word ``t + 4 r`` along K (PTX ISA, figure "MMA .m16n8k16
    fragment layout for matrix B" and its siblings)."""
    per = 32 // bits
    regs = k * bits // 128
    elements = tuple((1 << i, 0) for i in range(log2(per)))
    words = tuple((4 * per << j, 0) for j in range(log2(regs)))
    return LinearLayout(((REG, elements + words), (LANE, _group_lanes(1, 0, per))), (k, 8))


def mma_c_layout() -> LinearLayout:
    """The accumulator C/D (16 x 8) of ``mma.sync.m16n8kK``: element ``i`` of a lane is row
    ``g + 8 (i / 2)``, column ``2 t + i % 2`` (PTX ISA, figure "MMA .m16n8k16 fragment
    layout for accumulator matrix C/D"); an f16 accumulator packs elements 2j, 2j+1 in
    register j."""
    return LinearLayout(((REG, ((0, 1), (8, 0))), (LANE, _group_lanes(0, 1, 2))), (16, 8))


def dmma_a_layout() -> LinearLayout:
    """Operand A (8 x 4, row-major) of the f64 ``mma.sync.m8n8k4``: each lane holds one
    element, row ``g``, column ``t`` (PTX ISA, "Matrix Fragments for mma.m8n8k4 with .f64
    floating point type", figure "MMA .m8n8k4 fragment layout for matrix A with .f64")."""
    return LinearLayout(((REG, ()), (LANE, _group_lanes(0, 1, 1))), (8, 4))


def dmma_b_layout() -> LinearLayout:
    """Operand B (4 x 8, column-major) of the f64 ``mma.sync.m8n8k4``: each lane holds one
    element, row ``t`` along K, column ``g`` (figure "... matrix B with .f64")."""
    return LinearLayout(((REG, ()), (LANE, _group_lanes(1, 0, 1))), (4, 8))


def dmma_c_layout() -> LinearLayout:
    """The accumulator C/D (8 x 8) of the f64 ``mma.sync.m8n8k4``: element ``i`` of a lane
    is row ``g``, column ``2 t + i`` (figure "... accumulator matrix C/D with .f64"): the
    upper half (elements 0 and 1) of ``mma_c_layout``, so an m16n8 block of
    ``mma_fragment`` is two of them, rows 0-7 in its registers 0-1 and rows 8-15 in 2-3."""
    return LinearLayout(((REG, ((0, 1),)), (LANE, _group_lanes(0, 1, 2))), (8, 8))


def batched_fragment(fragment: LinearLayout, batch: int) -> LinearLayout:
    """A batched (B x M x N) accumulator: each matrix held as ``fragment`` (M x N) holds
    it, except that warps ``fragment`` leaves holding copies (zero warp bases) take other
    matrices instead, and a thread's further matrices are its high registers: its
    ``i``-th matrix in registers ``i * R`` to ``i * R + R - 1`` (``R`` the fragment's
    registers), so each matrix multiplies as the 2-D form does."""
    bits = [(1 << i, 0, 0) for i in range(log2(batch))]
    warps = []
    for base in fragment.bases(WARP):
        warps.append((0, *base) if any(base) or not bits else bits.pop(0))
    lifted = fragment.expand_dim(0, batch)
    return lifted.with_bases(WARP, tuple(warps)).with_bases(REG, lifted.bases(REG) + tuple(bits))


def batch_slice(layout: LinearLayout) -> LinearLayout:
    """The 2-D fragment of one matrix of a ``batched_fragment``: its registers are the
    batched layout's first ``R``, and a thread's ``i``-th matrix is the one its register
    ``i * R`` lies in; warps that hold other matrices hold copies here."""
    sliced = layout.drop_dim(0)
    regs = sliced.size(REG)
    if layout.bases(REG)[:log2(regs)] != sliced.expand_dim(0, 1).bases(REG) or \
            any(b[1:] != (0, 0) and b[0] for b in layout.bases(WARP) + layout.bases(REG)):
        raise ValueError(f"{layout} does not hold whole matrices in its low registers")
    return sliced


def ldmatrix_layout(count: int, trans: bool = False,
                    matrices: Sequence[Base] | None = None) -> LinearLayout:
    """The registers ``ldmatrix.sync.aligned.m8n8.x{count}[.trans].b16`` fills (and
    ``stmatrix`` stores), over the tile in shared memory: matrix ``i`` (32-bit register
    ``i``) is the 8x8 block at the XOR of the ``matrices`` bases of ``i``'s bits (by
    default stacked along the rows).  Lane ``l`` holds row ``l / 4``, columns ``2 (l % 4)``
    and the next; with ``.trans`` column ``l / 4``, rows ``2 (l % 4)`` and the next (PTX ISA,
    "Warp-level matrix load instruction: ldmatrix", figures "ldmatrix fragment layout").
    ``matrices = ((8, 0), (0, 8))`` gives the A operand of ``mma.m16n8k16`` with x4."""
    if matrices is None:
        matrices = tuple((8 << i, 0) for i in range(log2(count)))
    if len(matrices) != log2(count):
        raise ValueError(f"ldmatrix .x{count} takes {log2(count)} matrix bases, not {len(matrices)}")
    shape = tuple(8 + sum(b[d] for b in matrices) for d in (0, 1))
    for s in shape:
        log2(s)
    inner = ((1, 0),) if trans else ((0, 1),)
    lanes = _group_lanes(1, 0, 2) if trans else _group_lanes(0, 1, 2)
    return LinearLayout(((REG, inner + tuple(matrices)), (LANE, lanes)), shape)


def ldmatrix_rows(count: int, matrices: Sequence[Base] | None = None) -> LinearLayout:
    """What ``ldmatrix``/``stmatrix`` reads or writes in shared memory, as 16-byte accesses:
    lane ``l`` gives the address of row ``l % 8`` of matrix ``l / 8`` and that row's 8
    elements are its "registers" (lanes past ``8 count`` are not read: zero bases).  The
    same rows whether or not ``.trans``; ``bank_wavefronts(..., vector=8)`` on it counts the
    instruction's wavefronts (one per matrix at best)."""
    matrices = tuple(matrices) if matrices is not None else tuple((8 << i, 0) for i in range(log2(count)))
    shape = tuple(8 + sum(b[d] for b in matrices) for d in (0, 1))
    lanes = ((1, 0), (2, 0), (4, 0)) + matrices + ((0, 0),) * (2 - len(matrices))
    return LinearLayout(((REG, ((0, 1), (0, 2), (0, 4))), (LANE, lanes)), shape)


def wgmma_accumulator(n: int) -> LinearLayout:
    """The accumulator of ``wgmma.mma_async.m64nNkK`` over the 4 warps of a warpgroup: warp
    ``w`` holds rows ``16 w`` to ``16 w + 15``, each 8 columns as an m16n8 accumulator, the
    column blocks in register order (PTX ISA, "Register fragments" of wgmma, figure "WGMMA
    .m64nNk16 register fragment layout for accumulator matrix D")."""
    blocks = tuple((0, 8 << j) for j in range(log2(n // 8)))
    c = mma_c_layout()
    return LinearLayout(((REG, c.bases(REG) + blocks), (LANE, c.bases(LANE)), (WARP, WARPGROUP_WARPS)), (64, n))


def wgmma_a_registers(bits: int) -> LinearLayout:
    """Operand A of ``wgmma`` from registers (64 x K, K = 256 / bits: one 32-byte step):
    each warp's 16 rows as ``mma.m16n8kK``'s A (PTX ISA, figure "WGMMA .m64nNk16 register
    fragment layout for matrix A")."""
    a = mma_a_layout(256 // bits, bits)
    return a * LinearLayout(((WARP, ((1, 0), (2, 0))),), (4, 1))


def wgmma_shared_operand(mn: int, k: int, elem_bytes: int, swizzle: Swizzle,
                         k_major: bool = True) -> LinearLayout:
    """A wgmma (or tcgen05.mma) operand in shared memory, offset -> (row of A or column of B,
    k), as its matrix descriptor describes it (PTX ISA, "Shared Memory Matrix Layout" and
    "Matrix Descriptor Format"): K-major keeps K contiguous in ``swizzle`` atoms of 8 rows,
    MN-major keeps M (or N) contiguous in atoms of 8 K-rows."""
    if k_major:
        return nvmma_shared((mn, k), elem_bytes, swizzle)
    return nvmma_shared((k, mn), elem_bytes, swizzle).permute((1, 0))


#: the swizzle field (bits 62-63) of a wgmma matrix descriptor
WGMMA_SWIZZLE_MODE = {Swizzle.NONE: 0, Swizzle.B128: 1, Swizzle.B64: 2, Swizzle.B32: 3}


def widest_swizzle(extent_bytes: int) -> Swizzle:
    """The widest swizzle whose atom rows an operand's contiguous extent fills exactly
    (``extent_bytes`` a multiple of the width); none below 32 bytes."""
    for swizzle in (Swizzle.B128, Swizzle.B64, Swizzle.B32):
        if extent_bytes % swizzle.value == 0:
            return swizzle
    return Swizzle.NONE


def descriptor_strides(layout: LinearLayout, elem_bytes: int, swizzle: Swizzle, k_major: bool = True,
                       padding: Padding | None = None) -> tuple[int, int]:
    """(leading, stride) byte offsets of the matrix descriptor of an operand stored as
    ``layout`` (offset -> (row of A or column of B, k), as ``wgmma_shared_operand``), read
    off the layout (PTX ISA, "Matrix Descriptor Format", "Strides"):

    - K-major: the stride offset is where the next 8 rows start; the leading one where the
      next 16 bytes of K do without swizzle (with one, K of an instruction stays inside an
      atom's row and the field is unused: 16);
    - MN-major: the stride offset is where the next 16 bytes of M/N start without swizzle,
      the next 8 K-rows with one; the leading one where the next 8 K-rows start without
      swizzle, the next atom along M/N with one.

    ``padding`` (without swizzle: whole core matrices apart) spaces the offsets.  A step
    past the operand's extent (which no instruction takes) is given as the operand's size."""
    mn, k = layout.shape
    to_offset = layout.invert()
    size = elem_bytes * layout.size(OFFSET)

    def at(d_mn: int, d_k: int) -> int:
        if d_mn >= mn or d_k >= k:
            return size
        (offset,) = to_offset.apply(dim0=d_mn, dim1=d_k)
        return elem_bytes * (padding.apply(offset) if padding else offset)

    chunk = 16 // elem_bytes
    if k_major:
        return (at(0, chunk) if swizzle is Swizzle.NONE else 16), at(8, 0)
    if swizzle is Swizzle.NONE:
        return at(0, 8), at(chunk, 0)
    return at(swizzle.width // elem_bytes, 0), at(0, 8)


def tmem_accumulator(m: int, n: int) -> LinearLayout:
    """Where ``tcgen05.mma`` (cta_group::1) keeps its ``m x n`` f32/s32 accumulator D in
    tensor memory, from (lane, 32-bit column) to (row, column) of D (PTX ISA, "Data path
    layout organization"): M = 128 puts row i in lane i; M = 64 puts rows ``16 q .. 16 q +
    15`` in the first 16 lanes of each 32-lane quarter q.  The other 16 lanes of a quarter
    hold nothing: their lane bit has a zero base, which ``pseudo_invert`` leaves 0."""
    cols = tuple((0, 1 << j) for j in range(log2(n)))
    if m == 128:
        rows = tuple((1 << i, 0) for i in range(7))
    elif m == 64:
        rows = ((1, 0), (2, 0), (4, 0), (8, 0), (0, 0), (16, 0), (32, 0))
    else:
        raise ValueError(f"tcgen05.mma with M = {m} (64 or 128)")
    return LinearLayout(((TMEM_ROW, rows), (TMEM_COL, cols)), (m, n))


def tcgen05_ld_layout(shape: str, num: int, split: int = 0) -> LinearLayout:
    """Which tensor-memory cell (lane, column) register ``r`` of lane ``l`` of warp ``w`` of
    a warpgroup moves with ``tcgen05.ld``/``st.sync.aligned.{shape}.x{num}.b32`` (PTX ISA,
    "Matrix fragments for tcgen05.ld/st"): warp ``w`` reaches lanes ``32 (w % 4)`` on.
    ``32x32b``: lane l takes lane l, ``num`` consecutive columns.  ``16x32bx2``: lanes 0-15
    and 16-31 take the same 16 tensor-memory lanes, the second half ``split`` columns
    further (the instruction's immHalfSplitoff)."""
    regs = tuple((0, 1 << i) for i in range(log2(num)))
    warps = ((32, 0), (64, 0))
    if shape == "32x32b":
        return LinearLayout(((REG, regs), (LANE, tuple((1 << i, 0) for i in range(5))), (WARP, warps)), (128, num))
    if shape == "16x32bx2":
        if split < num:
            raise ValueError(f"16x32bx2 halves {split} columns apart overlap {num} columns")
        lanes = tuple((1 << i, 0) for i in range(4)) + ((0, split),)
        return LinearLayout(((REG, regs), (LANE, lanes), (WARP, warps)), (128, 2 * split))
    raise ValueError(f"tcgen05.ld/st shape .{shape} (32x32b or 16x32bx2)")


def tcgen05_accumulator(m: int, n: int, warps: int = 4) -> LinearLayout:
    """The registers an ``m x n`` ``tcgen05.mma`` accumulator is held in by the ``warps``
    (4 or 8) that read it with ``tcgen05.ld`` (``tcgen05_ld_layout`` composed with
    ``tmem_accumulator``): warp ``w`` reaches tensor-memory lanes ``32 (w % 4)`` on, and
    with 8 warps, warps 4-7 take the second half of the columns.  Of each warpgroup's
    ``c`` columns: M = 128 r (r blocks of 128 rows, block i in tensor-memory columns
    ``i n`` on) with ``32x32b``, a thread holds one row of each block, its columns in
    register order, then the blocks; M = 64 with ``16x32bx2`` split ``c / 2``: lanes 0-15
    of warp w hold rows ``16 w`` on, the first ``c / 2`` columns, lanes 16-31 the same
    rows' other half."""
    groups = warps // 4
    if warps not in (4, 8) or n % (2 * groups):
        raise ValueError(f"a tcgen05 accumulator read by {warps} warps")
    c = n // groups
    halves = ((0, c),) if groups == 2 else ()
    if m % 128 == 0 and m & (m - 1) == 0:
        regs = tuple((0, 1 << j) for j in range(log2(c))) + tuple((128 << i, 0) for i in range(log2(m // 128)))
        lanes = tuple((1 << i, 0) for i in range(5))
        warp_bases = ((32, 0), (64, 0)) + halves
    elif m == 64:
        regs = tuple((0, 1 << j) for j in range(log2(c) - 1))
        lanes = ((1, 0), (2, 0), (4, 0), (8, 0), (0, c // 2))
        warp_bases = ((16, 0), (32, 0)) + halves
    else:
        raise ValueError(f"a tcgen05 accumulator of {m} rows (64, or 128 times a power of two)")
    return LinearLayout(((REG, regs), (LANE, lanes), (WARP, warp_bases)), (m, n))


#: the bases of the m8n8 fragment ``stmatrix`` stores from a lane's 32-bit register: the
#: register's second element, then the lane bits (``ldmatrix_layout(1)``); ``.trans`` swaps
#: rows and columns
_STMATRIX_FRAGMENT = ldmatrix_layout(1)
_STMATRIX_FRAGMENT_T = ldmatrix_layout(1, trans=True)


@record(frozen=True)
class StmatrixForm:
    """How a register tile goes to shared memory as ``stmatrix.sync.aligned.m8n8.x{count}
    [.trans].b16``: instruction ``i`` stores a thread's tile registers ``2 count i`` on
    (``elements`` of them, two to a 32-bit register), and ``rows`` maps (instruction as
    ``reg``, ``lane``, ``warp``) to the tile coordinates of the first of the 8 contiguous
    elements whose 16-byte row that lane's address names."""

    count: int
    trans: bool
    rows: LinearLayout

    @property
    def elements(self) -> int:
        """The tile registers (16-bit elements) of a thread one instruction stores."""
        return 2 * self.count


def stmatrix_form(layout: LinearLayout) -> StmatrixForm | None:
    """The ``stmatrix`` form that stores ``layout`` (a 2-D register layout of 16-bit
    elements: reg, lane, warp), or None when its lanes and first register bit are not the
    m8n8 fragment (``ldmatrix_layout(1)``, or transposed: ``.trans``), the next register
    bits (up to two: x2, x4) not whole 8x8 blocks, or registers hold copies.  The mma and
    wgmma accumulators are the fragment (``mma_c_layout``'s lanes and first register).
    Leading dims of size 1 (a batch of one, as attention's output tile) are kept aside."""
    if layout.rank > 2 and all(s == 1 for s in layout.shape[:-2]):
        form = stmatrix_form(layout.drop_dim(0))
        if form is None:
            return None
        return StmatrixForm(form.count, form.trans, form.rows.expand_dim(0, 1))
    if layout.rank != 2 or layout.names[:2] != (REG, LANE) or set(layout.names) - {REG, LANE, WARP}:
        return None
    regs, lanes = layout.bases(REG), layout.bases(LANE)
    if len(lanes) != 5 or not regs or (0, 0) in regs:
        return None
    trans = None
    for fragment, t in ((_STMATRIX_FRAGMENT, False), (_STMATRIX_FRAGMENT_T, True)):
        if (regs[0],) == fragment.bases(REG) and lanes == fragment.bases(LANE):
            trans = t
    if trans is None or any(b[0] % 8 or b[1] % 8 for b in regs[1:]):
        return None
    matrix_bits = min(2, len(regs) - 1)
    row = (regs[0],) + lanes[:2] if trans else lanes[2:]
    matrices = regs[1:1 + matrix_bits]
    lane_bases = row + matrices + ((0, 0),) * (2 - matrix_bits)
    rows = LinearLayout(((REG, regs[1 + matrix_bits:]), (LANE, lane_bases), (WARP, layout.bases(WARP))),
                        layout.shape)
    return StmatrixForm(1 << matrix_bits, trans, rows)
