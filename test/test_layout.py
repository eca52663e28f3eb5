"""Linear layout algebra: cat in registers and extracting blocks by picking registers."""
from __future__ import annotations

import itertools

import pytest

from tileiras.layout.linear import LANE, REG, WARP, default_blocked


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
