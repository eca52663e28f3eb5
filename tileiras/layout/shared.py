"""Shared-memory layouts: which tile element sits at which element offset.

A shared layout is a ``LinearLayout`` with the one input dimension ``offset`` (in
elements).  ``shared_identity`` is the plain row-major one; the XOR swizzles permute the
16-byte chunks of each row by the row's index so that the rows a warp touches together
fall in different banks:

- ``swizzled_shared`` is Triton's ``SwizzledShared`` (``vec``, ``per_phase``,
  ``max_phase``): column ``c`` of row ``r`` is stored at column ``c ^ vec * ((r / per_phase)
  % max_phase)``;
- ``nvmma_shared`` is the layout the wgmma and tcgen05 descriptors and TMA read for a
  ``Swizzle`` mode: 8-row atoms whose rows are the swizzle's width (32, 64 or 128 bytes;
  16 bytes without swizzle), atoms stacked along the rows first, then along the columns
  (Triton's ``nvmmaSharedToLinearLayout``).  On byte addresses inside an atom it is
  CUTLASS's ``Swizzle<B, 4, 3>`` (``cutlass_swizzle``, ``Swizzle.cutlass``).

Padding (``offset + (offset / interval) * amount``, a few elements after each row) is not
linear over GF(2), so it is not a layout: ``Padding`` is a separate map applied to the
offsets a layout gives.  The swizzles replace it where it served to avoid bank
conflicts; ``bank_wavefronts`` measures either (``test_layout_shared`` shows the swizzled
layouts reach the minimum where padding was needed).
"""
from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from ..record import record
from .core import LANE, OFFSET, REG, WARP, LinearLayout, identity_1d, log2, unit_base

#: shared memory has 32 banks of 4 bytes; one wavefront serves 128 bytes
BANKS, BANK_BYTES = 32, 4


class Swizzle(Enum):
    """The swizzle modes of wgmma/tcgen05 matrix descriptors and TMA tensor maps."""
    NONE = 0
    B32 = 32
    B64 = 64
    B128 = 128

    @property
    def width(self) -> int:
        """Bytes of one row of an 8-row atom (16 without swizzle: the core matrix row)."""
        return max(16, self.value)

    @property
    def cutlass(self) -> tuple[int, int, int]:
        """CUTLASS ``Swizzle<B, M, S>`` on byte addresses: bits ``[M+S, M+S+B)`` are XORed
        into bits ``[M, M+B)`` (128B = Swizzle<3,4,3>: the 16-byte chunk index XOR the row
        of 128 bytes, mod 8)."""
        return {0: 0, 32: 1, 64: 2, 128: 3}[self.value], 4, 3


def _order(rank: int, order: Sequence[int] | None) -> list[int]:
    return list(order) if order else list(reversed(range(rank)))


def shared_identity(shape: Sequence[int], order: Sequence[int] | None = None) -> LinearLayout:
    """Row-major storage: offset bits fill the dims of ``order`` (fastest first; the last
    dim first by default)."""
    shape = tuple(shape)
    bases = [unit_base(len(shape), d, 1 << k) for d in _order(len(shape), order) for k in range(log2(shape[d]))]
    return LinearLayout(((OFFSET, tuple(bases)),), shape)


def swizzled_shared(shape: Sequence[int], vec: int, per_phase: int, max_phase: int,
                    order: Sequence[int] | None = None) -> LinearLayout:
    """Triton's swizzled shared layout: the row-major layout of ``shape`` (``order``
    fastest first) whose columns (``order[0]``) in row ``r`` (``order[1]``) are XORed with
    ``vec * ((r / per_phase) % max_phase)``, modulo the row length."""
    shape = tuple(shape)
    rank = len(shape)
    dims = _order(rank, order)
    col, row = dims[0], dims[1]
    bases = [unit_base(rank, col, 1 << k) for k in range(log2(shape[col]))]
    for k in range(log2(shape[row])):
        r = 1 << k
        base = list(unit_base(rank, row, r))
        base[col] = vec * ((r // per_phase) % max_phase) % shape[col]
        bases.append(tuple(base))
    bases += [unit_base(rank, d, 1 << k) for d in dims[2:] for k in range(log2(shape[d]))]
    return LinearLayout(((OFFSET, tuple(bases)),), shape)


def nvmma_shared(shape: Sequence[int], elem_bytes: int, swizzle: Swizzle) -> LinearLayout:
    """The layout a wgmma/tcgen05 matrix descriptor or a TMA tensor map with ``swizzle``
    describes, for a ``rows x columns`` tile whose columns are contiguous: 8-row atoms of
    ``swizzle.width`` bytes per row, the 16-byte chunk ``c`` of row ``r`` of an atom stored
    at chunk ``c ^ (r / (128 / width)) % (width / 16)``; the atoms of a column of atoms
    ``8 * width`` bytes apart (the descriptor's stride byte offset), the columns of atoms
    after all the rows.  Without swizzle the atoms are the 8x16-byte core matrices."""
    rows, cols = shape
    atom_cols = swizzle.width // elem_bytes
    if rows % 8 or cols % atom_cols:
        raise ValueError(f"a {rows}x{cols} tile of {elem_bytes}-byte elements is not made of "
                         f"8x{atom_cols} {swizzle.name} atoms")
    vec = 16 // elem_bytes if elem_bytes <= 16 else 1
    atom = swizzled_shared((8, atom_cols), vec, 128 // swizzle.width if swizzle.value else 1,
                           swizzle.width // 16)
    return atom * identity_1d(rows // 8, OFFSET, 0, 2) * identity_1d(cols // atom_cols, OFFSET, 1, 2)


def cutlass_swizzle(b: int, m: int, s: int, size: int) -> LinearLayout:
    """CUTLASS ``Swizzle<B, M, S>`` on offsets ``0 .. size - 1`` as a layout from an offset to
    the swizzled offset: offset bit ``i`` in ``[M+S, M+S+B)`` also sets bit ``i - S``.  On
    element offsets, ``M`` is the byte ``M`` less log2 of the element size."""
    bases = tuple((1 << i | (1 << (i - s) if m + s <= i < m + s + b else 0),) for i in range(log2(size)))
    return LinearLayout(((OFFSET, bases),), (size,))


@record(frozen=True)
class Padding:
    """``amount`` elements of padding after every ``interval`` elements of a linear offset
    (Triton's padded shared layout): not linear over GF(2), so kept apart from layouts."""
    interval: int
    amount: int

    def apply(self, offset: int) -> int:
        return offset + (offset // self.interval) * self.amount

    def padded_size(self, size: int) -> int:
        return self.apply(size - 1) + 1


def bank_wavefronts(regs: LinearLayout, shared: LinearLayout, elem_bytes: int, vector: int,
                    warp: int = 0, padding: Padding | None = None) -> tuple[int, ...]:
    """Shared-memory wavefronts of each request of one warp copying its registers to or
    from ``shared``: a request moves ``vector`` consecutive registers of every lane (one
    ldmatrix/stmatrix matrix is a request of 4 bytes a lane).  Lanes are served in phases
    of 128 bytes (all 32 lanes up to 4 bytes each, 16 lanes at 8, 8 lanes at 16); a phase
    takes as many wavefronts as the most distinct 4-byte words any one bank must give
    (lanes reading the same word share it).  Raises ValueError if a request's elements
    are not consecutive aligned offsets (the vector access would be wrong)."""
    cvt = regs.invert_and_compose(shared)
    if cvt.largest_vectorization(0, vector) < vector:
        raise ValueError(f"{vector} consecutive registers are not {vector} consecutive offsets")
    access = vector * elem_bytes
    per_phase = BANKS if access <= BANK_BYTES else BANKS * BANK_BYTES // access
    out = []
    for reg in range(0, regs.size(REG), vector):
        starts = []
        for lane in range(regs.size(LANE)):
            (offset,) = cvt.apply(**{REG: reg, LANE: lane, WARP: warp})
            if padding is not None:
                if offset % padding.interval + vector > padding.interval:
                    raise ValueError(f"a {vector}-element access across the padding at offset {offset}")
                offset = padding.apply(offset)
            starts.append(offset * elem_bytes)
        total = 0
        for first in range(0, len(starts), per_phase):
            banks: dict[int, set[int]] = {}
            for byte in starts[first:first + per_phase]:
                for word in range(byte // BANK_BYTES, (byte + max(access, 1) - 1) // BANK_BYTES + 1):
                    banks.setdefault(word % BANKS, set()).add(word)
            total += max(len(words) for words in banks.values())
        out.append(total)
    return tuple(out)
