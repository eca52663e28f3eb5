"""Linear layout algebra: cat in registers, extracting blocks by picking registers, and the
GF(2) algebra (compose, invert, invert_and_compose, products, division, rank queries)
checked against written-out tables and brute force."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tileiras.layout.core import OFFSET, LinearLayout, identity_1d, zeros_1d
from tileiras.layout.linear import LANE, REG, WARP, default_blocked
from tileiras.layout.shared import shared_identity, swizzled_shared


def _threads(layout):
    return itertools.product(range(layout.size(LANE)), range(layout.size(WARP)))


@pytest.mark.parametrize("dim", [0, 1])
def test_concat_holds_the_second_tile_in_the_top_register_bit(dim):
    src = default_blocked((16, 32), 4, 4)
    out = src.concat(dim)
    assert out.shape == ((32, 32) if dim == 0 else (16, 64))
    n = src.size(REG)
    assert out.size(REG) == 2 * n
    shift = src.shape[dim]
    for (lane, warp), r in itertools.product(_threads(src), range(n)):
        first = src.apply(reg=r, lane=lane, warp=warp)
        assert out.apply(reg=r, lane=lane, warp=warp) == first
        second = list(first)
        second[dim] += shift
        assert out.apply(reg=r + n, lane=lane, warp=warp) == tuple(second)
    assert out.is_surjective()


@pytest.mark.parametrize("shape, dim, origin", [((16, 32), 0, (16, 0)), ((16, 32), 1, (0, 32)),
                                                 ((16, 32), 0, (0, 0)), ((8, 64), 1, (0, 64))])
def test_select_block_picks_the_registers_of_a_block(shape, dim, origin):
    src = default_blocked(shape, 4, 4).concat(dim)
    picked = src.select_block(origin, shape)
    assert picked is not None
    layout, picks = picked
    assert layout.shape == shape and len(picks) == layout.size(REG)
    for (lane, warp), r in itertools.product(_threads(layout), range(layout.size(REG))):
        inner = layout.apply(reg=r, lane=lane, warp=warp)
        whole = src.apply(reg=picks[r], lane=lane, warp=warp)
        assert whole == tuple(o + c for o, c in zip(origin, inner))


def test_select_block_refuses_blocks_spread_over_other_threads():
    # rows 8..15 of a canonical 16x32 tile belong to warps 2 and 3 only
    src = default_blocked((16, 32), 4, 4)
    assert src.select_block((8, 16), (8, 16)) is None
    # an origin that no choice of register bits reaches
    assert src.concat(0).select_block((8, 0), (16, 32)) is None


# -- the algebra: compose, invert, products, queries ---------------------------------------------

#: a 2x4 tile: reg bit 0 -> column 1, reg bit 1 -> row 1, lane bit 0 -> column 2 and row 1
SMALL = LinearLayout(((REG, ((0, 1), (1, 0))), (LANE, ((1, 2),))), (2, 4))
#: (reg, lane) -> element of SMALL, written out
SMALL_TABLE = {(0, 0): (0, 0), (1, 0): (0, 1), (2, 0): (1, 0), (3, 0): (1, 1),
               (0, 1): (1, 2), (1, 1): (1, 3), (2, 1): (0, 2), (3, 1): (0, 3)}


def _inputs(layout):
    return [dict(zip(layout.names, idx)) for idx in itertools.product(*(range(layout.size(n)) for n in layout.names))]


@st.composite
def layouts(draw, names=(REG, LANE), rank=2):
    shape = tuple(1 << draw(st.integers(0, 3)) for _ in range(rank))
    ins = []
    for name in names:
        bits = draw(st.integers(0, 3))
        ins.append((name, tuple(tuple(draw(st.integers(0, s - 1)) for s in shape) for _ in range(bits))))
    return LinearLayout(tuple(ins), shape)


def test_apply_matches_the_written_table():
    assert SMALL.table() == SMALL_TABLE
    assert SMALL.is_bijective() and SMALL.num_distinct_outputs() == 8


def test_compose_feeds_the_outputs_into_the_inputs_of_the_outer_layout():
    # outer: (row, column) of the 2x4 tile -> offset of a 8-element buffer, columns swapped in pairs
    outer = LinearLayout((("row", ((4,),)), ("col", ((1,), (2,)))), (8,))
    out = SMALL.compose(outer)
    assert out.ins == ((REG, ((1,), (4,))), (LANE, ((6,),)))
    for idx, (r, c) in SMALL_TABLE.items():
        assert out.apply(reg=idx[0], lane=idx[1]) == (4 * r + c,)
    with pytest.raises(ValueError):
        outer.compose(SMALL)


def test_invert_is_the_table_read_backwards():
    inv = SMALL.invert()
    assert inv.ins == (("dim0", ((2, 0),)), ("dim1", ((1, 0), (2, 1))))
    assert inv.shape == (4, 2)
    for (reg, lane), (r, c) in SMALL_TABLE.items():
        assert inv.apply(dim0=r, dim1=c) == (reg, lane)
    assert inv.compose(SMALL) == LinearLayout((("dim0", ((1, 0),)), ("dim1", ((0, 1), (0, 2)))), (2, 4))
    assert SMALL.compose(inv) == LinearLayout(((REG, ((1, 0), (2, 0))), (LANE, ((0, 1),))), (4, 2))
    with pytest.raises(ValueError):
        LinearLayout(((REG, ((0, 1), (0, 1))),), (1, 4)).invert()


def test_pseudo_invert_leaves_free_variables_zero():
    # lane bit 1 copies lane bit 0's element: surjective, not injective
    dup = LinearLayout(((REG, ((1,),)), (LANE, ((2,), (2,), (4,)))), (8,))
    assert dup.free_variable_masks() == {REG: 0, LANE: 0b010}
    assert not dup.is_injective() and dup.is_surjective() and dup.num_distinct_outputs() == 8
    p = dup.pseudo_invert()
    assert p.ins == (("dim0", ((1, 0), (0, 1), (0, 4))),)
    for x in range(8):
        reg, lane = p.apply(dim0=x)
        assert lane & 0b010 == 0 and dup.apply(reg=reg, lane=lane) == (x,)
    with pytest.raises(ValueError):
        dup.invert()


def test_invert_and_compose_finds_the_offset_of_every_register():
    shared = swizzled_shared((2, 4), vec=2, per_phase=1, max_phase=2)
    # offset bits: column 1, column 2, row 1 with columns XOR 2
    assert shared.bases(OFFSET) == ((0, 1), (0, 2), (1, 2))
    cvt = SMALL.invert_and_compose(shared)
    assert cvt.ins == ((REG, ((1,), (6,))), (LANE, ((4,),)))
    for (reg, lane), coords in SMALL_TABLE.items():
        (offset,) = cvt.apply(reg=reg, lane=lane)
        assert shared.apply(offset=offset) == coords
    assert cvt.compose(shared) == SMALL


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_invert_and_compose_through_a_swizzle_gives_back_the_layout(layout):
    shared = swizzled_shared(layout.shape, 1, 1, layout.shape[1]) if layout.shape[0] > 1 else shared_identity(layout.shape)
    assert layout.invert_and_compose(shared).compose(shared) == layout


@settings(max_examples=100, deadline=None)
@given(layouts())
def test_rank_queries_agree_with_brute_force(layout):
    images = set(layout.table().values())
    total = 1
    for s in layout.shape:
        total *= s
    assert layout.num_distinct_outputs() == len(images)
    assert layout.is_surjective() == (len(images) == total)
    assert layout.is_injective() == (len(images) == len(layout.table()))
    free = layout.free_variable_masks()
    pinned = {n: (layout.size(n) - 1) & ~free[n] for n in layout.names}
    reached = {layout.apply(**{n: i & pinned[n] for n, i in x.items()}) for x in _inputs(layout)}
    assert reached == images


def test_product_tiles_the_second_layout_over_the_first():
    inner = LinearLayout(((REG, ((0, 1),)), (LANE, ((1, 0),))), (2, 2))
    outer = LinearLayout(((LANE, ((0, 1),)), (WARP, ((1, 0), (0, 0)))), (2, 2))
    prod = inner * outer
    assert prod.ins == ((REG, ((0, 1),)), (LANE, ((1, 0), (0, 2))), (WARP, ((2, 0), (0, 0))))
    assert prod.shape == (4, 4)
    for x in _inputs(prod):
        a = inner.apply(reg=x[REG], lane=x[LANE] & 1)
        b = outer.apply(lane=x[LANE] >> 1, warp=x[WARP])
        assert prod.apply(**x) == (a[0] + 2 * b[0], a[1] + 2 * b[1])
    quotient = prod.divide_left(inner)
    assert quotient == LinearLayout(((REG, ()),) + outer.ins, (2, 2))   # reg keeps its (empty) place
    assert inner * quotient == prod
    assert prod.divide_left(outer) is None
    assert identity_1d(4, REG, 1, 2) * zeros_1d(2, REG, 2) == LinearLayout(((REG, ((0, 1), (0, 2), (0, 0))),), (1, 4))


def test_concat_sublayout_and_transposes():
    other = LinearLayout(((WARP, ((1, 1),)),), (2, 4))
    both = SMALL.concat_ins(other)
    assert both.names == (REG, LANE, WARP) and both.apply(reg=1, warp=1) == (1, 0)
    outs = SMALL.concat_outs(LinearLayout(((REG, ((1,), (2,))), (LANE, ((4,),))), (8,)))
    assert outs.shape == (2, 4, 8) and outs.apply(reg=3, lane=1) == (0, 3, 7)
    assert outs.sublayout([LANE], [2]) == LinearLayout(((LANE, ((4,),)),), (8,))
    assert SMALL.transpose_ins([LANE, REG]).ins == ((LANE, ((1, 2),)), (REG, ((0, 1), (1, 0))))
    assert SMALL.flatten_ins([REG, LANE], "thread").ins == (("thread", ((0, 1), (1, 0), (1, 2))),)
    assert SMALL.permute((1, 0)).ins == ((REG, ((1, 0), (0, 1))), (LANE, ((2, 1),)))
    assert SMALL.reshape((8,)).ins == ((REG, ((1,), (4,))), (LANE, ((6,),)))
    with pytest.raises(ValueError):
        SMALL.concat_ins(SMALL)


def test_largest_vectorization_is_the_aligned_run_of_consecutive_offsets():
    regs = default_blocked((32, 64), 4, 8)          # 8 consecutive columns a thread
    assert regs.num_consecutive(1) == 8 and regs.num_consecutive(0) == 1
    plain = regs.invert_and_compose(shared_identity((32, 64)))
    assert plain.largest_vectorization(0, 16) == 8 and plain.largest_vectorization(0, 4) == 4
    # a swizzle that XORs 2-element pieces keeps vectors of 2 only
    assert regs.invert_and_compose(swizzled_shared((32, 64), 2, 1, 8)).largest_vectorization(0, 16) == 2
    # consecutive registers, but a lane base that XORs the low bits breaks alignment
    skew = LinearLayout(((REG, ((1,), (2,))), (LANE, ((5,),))), (8,))
    assert skew.num_consecutive(0) == 4 and skew.largest_vectorization(0, 4) == 1
