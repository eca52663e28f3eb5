"""Shared-memory layouts: the identity, the XOR swizzles of ldmatrix, wgmma descriptors and
TMA, and the bank-conflict model that shows the swizzles make padding unnecessary."""
from __future__ import annotations

import itertools

import pytest

from tileiras.emulate.ops.mma import SWIZZLE_BYTES, descriptor_offsets
from tileiras.layout.core import LANE, OFFSET, REG, WARP, LinearLayout, log2
from tileiras.layout.linear import default_blocked, mma_fragment
from tileiras.layout.shared import (
    Padding,
    Swizzle,
    bank_wavefronts,
    cutlass_swizzle,
    nvmma_shared,
    shared_identity,
    swizzled_shared,
)
from tileiras.layout.tensor_core import ldmatrix_layout, ldmatrix_rows

ELEMENT_BYTES = (1, 2, 4, 8)
SWIZZLES = (Swizzle.NONE, Swizzle.B32, Swizzle.B64, Swizzle.B128)


def test_identity_is_row_major_in_the_given_order():
    assert shared_identity((4, 8)).bases(OFFSET) == ((0, 1), (0, 2), (0, 4), (1, 0), (2, 0))
    column_major = shared_identity((4, 8), order=(0, 1))
    assert column_major.bases(OFFSET) == ((1, 0), (2, 0), (0, 1), (0, 2), (0, 4))
    for r, c in itertools.product(range(4), range(8)):
        assert column_major.apply(offset=c * 4 + r) == (r, c)


@pytest.mark.parametrize("vec, per_phase, max_phase", [(1, 1, 8), (2, 1, 4), (4, 2, 4), (8, 1, 8), (2, 4, 2)])
def test_swizzled_shared_stores_column_c_of_row_r_at_c_xor_the_phase(vec, per_phase, max_phase):
    rows, cols = 16, 32
    layout = swizzled_shared((rows, cols), vec, per_phase, max_phase)
    assert layout.is_bijective()
    for r, c in itertools.product(range(rows), range(cols)):
        stored = c ^ (vec * ((r // per_phase) % max_phase)) % cols
        assert layout.apply(offset=r * cols + stored) == (r, c)


def test_swizzled_shared_bases_written_out():
    # Triton's ldmatrix-friendly f16 swizzle on a 8x64 tile: vec 8, per_phase 1, max_phase 8
    layout = swizzled_shared((8, 64), 8, 1, 8)
    assert layout.bases(OFFSET) == ((0, 1), (0, 2), (0, 4), (0, 8), (0, 16), (0, 32), (1, 8), (2, 16), (4, 32))


def nvmma_byte(row: int, byte: int, rows: int, width: int) -> int:
    """Byte offset of byte ``byte`` of row ``row`` in a swizzled K-major operand, written
    from the PTX ISA's description: 8-row atoms of ``width`` bytes a row, 16-byte chunk
    ``c`` of row ``r`` at chunk ``c ^ (r / (128 / width)) % (width / 16)``, atom columns
    after all rows."""
    atom_col, byte = divmod(byte, width)
    r = row % 8
    chunk = (byte // 16) ^ ((r * width // 128) % (width // 16)) if width > 16 else 0
    return atom_col * rows * width + (row // 8) * 8 * width + r * width + 16 * chunk + byte % 16


@pytest.mark.parametrize("elem_bytes", ELEMENT_BYTES)
@pytest.mark.parametrize("swizzle", SWIZZLES)
def test_nvmma_layout_is_the_ptx_swizzle_pattern(elem_bytes, swizzle):
    rows, cols = 16, 2 * swizzle.width // elem_bytes
    layout = nvmma_shared((rows, cols), elem_bytes, swizzle)
    assert layout.is_bijective()
    for r, c in itertools.product(range(rows), range(cols)):
        at = nvmma_byte(r, c * elem_bytes, rows, swizzle.width)
        assert at % elem_bytes == 0 and layout.apply(offset=at // elem_bytes) == (r, c)


@pytest.mark.parametrize("elem_bytes", ELEMENT_BYTES)
@pytest.mark.parametrize("swizzle", SWIZZLES[1:])
def test_nvmma_atom_is_cutlass_swizzle_b_4_3_on_byte_addresses(elem_bytes, swizzle):
    b, m, s = swizzle.cutlass
    assert (b, m, s) == {32: (1, 4, 3), 64: (2, 4, 3), 128: (3, 4, 3)}[swizzle.value]
    rows, cols = 8, swizzle.width // elem_bytes
    # physical offset -> row-major offset (the swizzle is its own inverse) -> coordinates
    by_swizzle = cutlass_swizzle(b, m - log2(elem_bytes), s, rows * cols).compose(shared_identity((rows, cols)))
    assert nvmma_shared((rows, cols), elem_bytes, swizzle) == by_swizzle


def test_cutlass_swizzle_128b_bases_written_out():
    # Swizzle<3,4,3> on 1024 byte addresses: bits 7, 8, 9 also flip bits 4, 5, 6
    layout = cutlass_swizzle(3, 4, 3, 1024)
    assert [b[0] for b in layout.bases(OFFSET)] == [1, 2, 4, 8, 16, 32, 64, 128 | 16, 256 | 32, 512 | 64]
    assert layout.compose(layout) == shared_identity((1024,))


@pytest.mark.parametrize("elem_bytes", (1, 2, 4))
@pytest.mark.parametrize("swizzle", SWIZZLES)
def test_nvmma_layout_is_what_the_emulated_wgmma_descriptor_reads(elem_bytes, swizzle):
    """descriptor_offsets (the emulator's wgmma/tcgen05 operand reader) at a start of 0
    gives the byte of each (row, byte of K); the layout must hold that element there."""
    rows, k = 64, swizzle.width // elem_bytes
    layout = nvmma_shared((rows, k), elem_bytes, swizzle)
    mode = {w: m for m, w in SWIZZLE_BYTES.items()}[swizzle.value]
    if swizzle is Swizzle.NONE:       # core matrices: K-steps rows * 16 bytes apart, row groups 128
        desc = (rows * 16 >> 4) << 16 | (128 >> 4) << 32
    else:                             # 8-row atoms of width bytes, stride 8 * width
        desc = (8 * swizzle.width >> 4) << 32 | mode << 62
    offsets = descriptor_offsets(desc, rows, k * elem_bytes)
    for r, c in itertools.product(range(rows), range(k)):
        assert layout.apply(offset=int(offsets[r, c * elem_bytes]) // elem_bytes) == (r, c)


def test_padding_shifts_each_interval():
    pad = Padding(64, 8)
    assert [pad.apply(o) for o in (0, 63, 64, 130)] == [0, 63, 72, 146]
    assert pad.padded_size(128) == 136


# -- bank conflicts ---------------------------------------------------------------------------
def test_ldmatrix_needs_padding_or_a_swizzle():
    """x4 ldmatrix of the 16x16 f16 A block at the corner of a 16x64 row-major tile (rows
    of 128 bytes): the 8 rows of a matrix fall in the same 4 banks (8 wavefronts per
    matrix); 8 elements of padding a row (what the mma staging used) or the 128-byte
    swizzle make each matrix one wavefront."""
    regs = ldmatrix_layout(4, matrices=((8, 0), (0, 8)))
    plain = shared_identity((16, 64))
    assert bank_wavefronts(regs, plain, 2, 2) == (8, 8, 8, 8)
    assert bank_wavefronts(regs, plain, 2, 2, padding=Padding(64, 8)) == (1, 1, 1, 1)
    assert bank_wavefronts(regs, nvmma_shared((16, 64), 2, Swizzle.B128), 2, 2) == (1, 1, 1, 1)
    assert bank_wavefronts(regs, swizzled_shared((16, 64), 8, 1, 8), 2, 2) == (1, 1, 1, 1)
    # 64-byte rows with the 64-byte swizzle (two rows a phase)
    assert bank_wavefronts(regs, shared_identity((16, 32)), 2, 2) == (4, 4, 4, 4)
    assert bank_wavefronts(regs, nvmma_shared((16, 32), 2, Swizzle.B64), 2, 2) == (1, 1, 1, 1)


@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_as_row_accesses(trans):
    """The instruction reads 8 rows of 16 bytes a matrix (also with .trans): 4 phases,
    8 wavefronts each on 128-byte rows, 1 with padding or the swizzle."""
    rows = ldmatrix_rows(4, ((8, 0), (0, 8)))
    regs = ldmatrix_layout(4, trans, ((8, 0), (0, 8)))
    for matrix in range(4):       # the rows lanes 8i..8i+7 address are what register i holds
        held = {regs.apply(reg=2 * matrix + k, lane=lane) for k in range(2) for lane in range(32)}
        read = {rows.apply(reg=e, lane=8 * matrix + j) for e in range(8) for j in range(8)}
        assert held == read
    assert bank_wavefronts(rows, shared_identity((16, 64)), 2, 8) == (32,)
    assert bank_wavefronts(rows, shared_identity((16, 64)), 2, 8, padding=Padding(64, 8)) == (4,)
    assert bank_wavefronts(rows, nvmma_shared((16, 64), 2, Swizzle.B128), 2, 8) == (4,)
    assert bank_wavefronts(rows, nvmma_shared((16, 32), 2, Swizzle.B64), 2, 8) == (4,)


def test_sixteen_byte_accesses_down_the_rows():
    """Each lane moves 8 f16 (16 bytes) of its own row: 8 lanes a phase, all in the same 4
    banks when the rows are 128 bytes apart."""
    regs = LinearLayout(((REG, ((0, 1), (0, 2), (0, 4))), (LANE, tuple((1 << i, 0) for i in range(5))),
                         (WARP, ())), (32, 8))
    assert bank_wavefronts(regs, shared_identity((32, 64)), 2, 8) == (32,)
    assert bank_wavefronts(regs, shared_identity((32, 64)), 2, 8, padding=Padding(64, 8)) == (4,)
    assert bank_wavefronts(regs, nvmma_shared((32, 64), 2, Swizzle.B128), 2, 8) == (4,)
    # a row-major blocked layout is already conflict-free and stays so
    blocked = default_blocked((32, 64), 4, 8)
    for layout in (shared_identity((32, 64)), nvmma_shared((32, 64), 2, Swizzle.B128)):
        assert set(bank_wavefronts(blocked, layout, 2, 8)) == {4}


def test_mma_accumulator_pairs_store_without_conflicts_on_the_swizzle():
    regs = mma_fragment((64, 64), 4)
    assert set(bank_wavefronts(regs, shared_identity((64, 64)), 2, 2)) == {8}
    assert set(bank_wavefronts(regs, nvmma_shared((64, 64), 2, Swizzle.B128), 2, 2)) == {1}
    assert set(bank_wavefronts(regs, shared_identity((64, 64)), 2, 2, warp=3, padding=Padding(64, 8))) == {1}


def test_vectors_must_be_contiguous_offsets():
    regs = ldmatrix_layout(4, trans=True, matrices=((8, 0), (0, 8)))
    with pytest.raises(ValueError):     # .trans register pairs run down a column
        bank_wavefronts(regs, shared_identity((16, 64)), 2, 2)
    # lanes that all read one word share it
    same = LinearLayout(((REG, ()), (LANE, ((0, 0),) * 5), (WARP, ())), (1, 1))
    assert bank_wavefronts(same, shared_identity((1, 1)), 4, 1) == (1,)
