"""Tensor-core layouts against the PTX ISA's fragment tables (written out here for a few
lanes) and against the emulator's own fragment mappings (tileiras/emulate/ops/mma.py,
matrix.py, tcgen05.py), element by element."""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from tileiras.emulate.ops import matrix, mma, tcgen05
from tileiras.layout.core import LANE, REG, WARP, LinearLayout
from tileiras.layout.linear import mma_blocks, mma_fragment
from tileiras.layout.shared import Padding, Swizzle
from tileiras.layout.tensor_core import (
    TMEM_COL,
    TMEM_ROW,
    descriptor_strides,
    ldmatrix_layout,
    ldmatrix_rows,
    mma_a_layout,
    mma_b_layout,
    mma_c_layout,
    tcgen05_ld_layout,
    tmem_accumulator,
    wgmma_a_registers,
    wgmma_accumulator,
    wgmma_shared_operand,
)

#: (K, container bits) of every m16n8kK shape the emulator runs
MMA_SHAPES = [(8, 16), (16, 16), (4, 32), (8, 32), (16, 8), (32, 8), (32, 4), (64, 4)]


def test_a_fragment_of_m16n8k16_f16_written_out():
    """PTX ISA, "MMA .m16n8k16 fragment layout for matrix A" (.f16/.bf16): a0..a7 of lane 5
    (groupID 1, threadID_in_group 1)."""
    a = mma_a_layout(16, 16)
    assert [a.apply(reg=i, lane=5) for i in range(8)] == [(1, 2), (1, 3), (9, 2), (9, 3),
                                                          (1, 10), (1, 11), (9, 10), (9, 11)]
    assert a.ins == ((REG, ((0, 1), (8, 0), (0, 8))), (LANE, ((0, 2), (0, 4), (1, 0), (2, 0), (4, 0))))


@pytest.mark.parametrize("k, bits", MMA_SHAPES)
def test_a_and_b_fragments_are_the_emulators(k, bits):
    per = 32 // bits
    a, b = mma_a_layout(k, bits), mma_b_layout(k, bits)
    assert a.is_bijective() and b.is_bijective()
    rows, cols = mma.a_positions(k, bits)
    for r, lane, j in itertools.product(*map(range, rows.shape)):
        assert a.apply(reg=r * per + j, lane=lane) == (rows[r, lane, j], cols[r, lane, j])
    rows, cols = mma.b_positions(k, bits)
    for r, lane, j in itertools.product(*map(range, rows.shape)):
        assert b.apply(reg=r * per + j, lane=lane) == (rows[r, lane, j], cols[r, lane, j])


def test_c_fragment_is_the_emulators_and_block_zero_of_mma_fragment():
    c = mma_c_layout()
    rows, cols = mma.c_positions(4)
    for i, lane in itertools.product(range(4), range(32)):
        assert c.apply(reg=i, lane=lane) == (rows[i, lane], cols[i, lane])
    tiled = mma_fragment((64, 32), 4)
    assert tiled.sublayout([REG, LANE], [0, 1]).divide_left(c) is not None
    assert tiled.divide_left(c.with_bases(WARP, ())) == LinearLayout(
        ((REG, ((0, 1), (0, 2))), (LANE, ()), (WARP, ((1, 0), (2, 0)))), (4, 4))


def _fake_warp(row_address):
    """What element_addresses reads of a machine: one warp whose lane l gives ``row_address(l)``."""
    m = SimpleNamespace(n=32, linear_tid=np.arange(32), warp_base=np.zeros(32, np.int64))
    rows = np.array([row_address(lane) for lane in range(32)], np.uint64)
    return m, (lambda m_, _s: rows)


@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_registers_are_the_emulators(count, trans):
    """A tile stored row-major with 256-byte rows; lanes give the row addresses of
    ``ldmatrix_rows``; the emulator's element addresses decode to the layout's coordinates."""
    matrices = ((8, 0), (0, 8)) if count == 4 else None
    regs, rows = ldmatrix_layout(count, trans, matrices), ldmatrix_rows(count, matrices)
    pitch = 256

    def address(lane):
        r, c = rows.apply(lane=lane)
        return r * pitch + 2 * c
    m, addr_r = _fake_warp(address)
    for i in range(count):
        parts = matrix.element_addresses(m, np.arange(32), addr_r, i, trans)
        for lane in range(32):
            got = []
            for addrs, width in parts:
                for k in range(width // 2):
                    at = int(addrs[lane]) + 2 * k
                    got.append((at // pitch, at % pitch // 2))
            assert got == [regs.apply(reg=2 * i + k, lane=lane) for k in range(2)]


def test_ldmatrix_x4_is_the_a_operand_and_x2_trans_the_b_operand():
    assert ldmatrix_layout(4, matrices=((8, 0), (0, 8))) == mma_a_layout(16, 16)
    assert ldmatrix_layout(2, trans=True) == mma_b_layout(16, 16)
    assert ldmatrix_layout(1).ins == ((REG, ((0, 1),)), (LANE, ((0, 2), (0, 4), (1, 0), (2, 0), (4, 0))))


@pytest.mark.parametrize("n", [8, 16, 64, 256])
def test_wgmma_accumulator_is_the_emulators(n):
    d = wgmma_accumulator(n)
    assert d.is_bijective()
    rows, cols = mma.wgmma_d_positions(n)
    for i, tid in itertools.product(range(n // 2), range(128)):
        assert d.apply(reg=i, lane=tid % 32, warp=tid // 32) == (rows[i, tid], cols[i, tid])


@pytest.mark.parametrize("bits", [16, 32, 8])
def test_wgmma_a_from_registers_is_the_emulators(bits):
    a = wgmma_a_registers(bits)
    per, k = 32 // bits, 256 // bits
    assert a.shape == (64, k) and a.is_bijective()
    rows, cols = mma.a_positions(k, bits)
    for w, (r, lane, j) in itertools.product(range(4), itertools.product(*map(range, rows.shape))):
        assert a.apply(reg=r * per + j, lane=lane, warp=w) == (16 * w + rows[r, lane, j], cols[r, lane, j])


@pytest.mark.parametrize("elem_bytes", [1, 2, 4])
@pytest.mark.parametrize("swizzle", [Swizzle.B32, Swizzle.B64, Swizzle.B128])
def test_wgmma_mn_major_operand(elem_bytes, swizzle):
    """MN-major (PTX ISA, "Shared Memory Matrix Layout", MN-major swizzled canonical
    layouts): M (or N) contiguous in rows of ``width`` bytes, 8 K-rows an atom with the
    16-byte chunks XORed by the K-row's phase, atoms along K stacked first (the stride
    byte offset 8 * width), then atoms along M (the leading byte offset K * width)."""
    width = swizzle.width
    mn, k = 2 * width // elem_bytes, 16
    layout = wgmma_shared_operand(mn, k, elem_bytes, swizzle, k_major=False)
    assert layout.shape == (mn, k) and layout.is_bijective()
    for i, kk in itertools.product(range(mn), range(k)):
        atom, byte = divmod(i * elem_bytes, width)
        r = kk % 8
        chunk = (byte // 16) ^ ((r * width // 128) % (width // 16))
        at = atom * k * width + (kk // 8) * 8 * width + r * width + 16 * chunk + byte % 16
        assert layout.apply(offset=at // elem_bytes) == (i, kk)
    assert wgmma_shared_operand(64, mn, elem_bytes, swizzle).shape == (64, mn)


FORMS = [(True, sw, None) for sw in Swizzle] + [(False, sw, None) for sw in Swizzle] + \
    [(True, Swizzle.NONE, "core"), (True, Swizzle.NONE, "column")]


@pytest.mark.parametrize("k_major, swizzle, pad", FORMS)
@pytest.mark.parametrize("mn, k", [(64, 64), (128, 64), (256, 128)])
def test_descriptor_strides_are_the_emulators(mn, k, k_major, swizzle, pad):
    """A descriptor whose start is the byte offset of (row r0, k0) and whose leading and
    stride byte offsets are ``descriptor_strides`` of an f16 operand staged as
    ``wgmma_shared_operand`` (K-major or MN-major, each swizzle; K-major without swizzle
    also padded by 16 bytes after each core matrix or each K column of them) makes the
    emulator read exactly that operand's 64 rows from r0 and 16 K elements from k0 (what
    ``emit_mma._warpgroup_mma`` issues per 64-row block and k16 step)."""
    layout = wgmma_shared_operand(mn, k, 2, swizzle, k_major)
    padding = {None: None, "core": Padding(64, 8), "column": Padding(mn * 8, 8)}[pad]
    lbo, sbo = descriptor_strides(layout, 2, swizzle, k_major, padding)
    to_offset = layout.invert()
    place = padding.apply if padding else (lambda x: x)
    at = lambda r, kk: 2 * place(to_offset.apply(dim0=r, dim1=kk)[0])
    mode = {Swizzle.NONE: 0, Swizzle.B128: 1, Swizzle.B64: 2, Swizzle.B32: 3}[swizzle]
    for r0, k0 in itertools.product(range(0, mn, 64), range(0, k, 16)):
        desc = at(r0, k0) >> 4 | (lbo >> 4) << 16 | (sbo >> 4) << 32 | mode << 62
        if k_major:
            got = mma.descriptor_offsets(desc, 64, 32)
            want = [[at(r0 + r, k0 + byte // 2) + byte % 2 for byte in range(32)] for r in range(64)]
        else:
            got = mma.descriptor_offsets(desc, 16, 128, mn_major=True)
            want = [[at(r0 + byte // 2, k0 + kk) + byte % 2 for byte in range(128)] for kk in range(16)]
        assert (got == np.array(want)).all()


@pytest.mark.parametrize("m, n, warps", [(64, 8, 4), (64, 256, 4), (128, 64, 4), (128, 32, 8), (64, 64, 8)])
def test_mma_fragment_holds_wgmma_accumulators(m, n, warps):
    """On 4 warps and more with M a multiple of 64, ``mma_fragment`` gives each warpgroup
    wgmma accumulators: for the 64-row block of its registers ``4 cols i`` on, its first
    warp's rows and columns (multiples of 64 and of 8) plus ``wgmma_accumulator`` (the
    warp within the group, lane and register), its 8-column blocks ``spacing`` apart
    (8 unless warpgroups beyond the rows interleave their columns: then B's descriptor
    steps by the spacing)."""
    layout = mma_fragment((m, n), warps)
    rows_blocks, cols_blocks = mma_blocks(layout)
    acc = wgmma_accumulator(8 * cols_blocks)
    spacing = layout.apply(reg=4)[1] if cols_blocks > 1 else 8
    for group, i in itertools.product(range(warps // 4), range(rows_blocks)):
        origin = layout.apply(warp=4 * group, reg=4 * cols_blocks * i)
        assert origin[0] % 64 == 0 and origin[1] % 8 == 0
        for reg, lane, w in itertools.product(range(acc.size(REG)), range(32), range(4)):
            row, col = acc.apply(reg=reg, lane=lane, warp=w)
            got = layout.apply(reg=4 * cols_blocks * i + reg, lane=lane, warp=4 * group + w)
            assert got == (origin[0] + row, origin[1] + col // 8 * spacing + col % 8)


@pytest.mark.parametrize("m", [64, 128])
def test_tmem_accumulator_is_the_emulators(m):
    n = 32
    d = tmem_accumulator(m, n)
    lanes, cols = tcgen05.d_positions(m, n)
    where = d.pseudo_invert()       # element -> (lane, column); the unused lanes stay 0
    for row, col in itertools.product(range(m), range(n)):
        assert where.apply(dim0=row, dim1=col) == (lanes[row, col], cols[row, col])
        assert d.apply(row=int(lanes[row, col]), col=int(cols[row, col])) == (row, col)
    assert d.free_variable_masks() == {TMEM_ROW: 0 if m == 128 else 0b10000, TMEM_COL: 0}


@pytest.mark.parametrize("shape, num, split", [("32x32b", 1, 0), ("32x32b", 16, 0), ("16x32bx2", 4, 4),
                                               ("16x32bx2", 8, 16)])
def test_tcgen05_ld_cells_are_the_emulators(shape, num, split):
    layout = tcgen05_ld_layout(shape, num, split)
    lanes, cols = tcgen05.fragment(shape, num, split)
    for lane, r in itertools.product(range(32), range(num)):
        for w in range(4):
            assert layout.apply(reg=r, lane=lane, warp=w) == (32 * w + lanes[lane, r], cols[lane, r])


def test_tcgen05_ld_of_the_m128_accumulator_gives_each_thread_one_row():
    held = tcgen05_ld_layout("32x32b", 32, 0).compose(tmem_accumulator(128, 32))
    assert held == LinearLayout(((REG, tuple((0, 1 << i) for i in range(5))),
                                 (LANE, tuple((1 << i, 0) for i in range(5))), (WARP, ((32, 0), (64, 0)))), (128, 32))
    # M = 64 read with 16x32bx2: lanes 16-31 take the second 16 columns of the same rows
    half = tcgen05_ld_layout("16x32bx2", 16, 16).compose(tmem_accumulator(64, 32))
    assert half.is_bijective()
    assert half.apply(lane=17, reg=3, warp=2) == (32 + 1, 16 + 3)
