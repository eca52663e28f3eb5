"""Tiles that change layout through shared memory (``KernelEmitter.convert``) go through
the shared layout ``exchanges.exchange_layout`` picks by ``bank_wavefronts``: row-major,
or a swizzle built from both sides' lanes (``swizzled_exchange``) where that takes fewer
wavefronts.  A transpose's exchange then meets no bank conflict on either side, as
NVIDIA's does, and keeps its 16-byte loads."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from _build import bytecode
from test_vectorize import transpose_kernel

from tileiras import diffcheck
from tileiras.emulate import launch
from tileiras.layout.linear import default_blocked, sector_blocked
from tileiras.layout.shared import bank_wavefronts, shared_identity
from tileiras.lower.exchanges import (exchange_layout, exchange_vector, exchange_wavefronts,
                                         swizzled_exchange)
from tileiras.reader import read_bytecode


def transpose_layouts(n: int = 64) -> tuple:
    """A 64x64 f32 tile as loaded (4 columns a thread) and after ``permute [1, 0]``."""
    loaded = sector_blocked((n, n), 4, 4, 2, n * n // 128)
    return loaded.permute([1, 0]), loaded


def test_the_transpose_exchange_is_conflict_free_on_both_sides():
    """Warp 0 stores its 32 registers one at a time (one wavefront each) and loads 16
    bytes a lane 8 times (4 wavefronts each: 512 bytes); row-major takes 4 per store
    (rows 256 bytes apart) and 8 per load."""
    src, dst = transpose_layouts()
    shared = exchange_layout(src, dst, 4)
    assert shared == swizzled_exchange(src, dst, 4) and shared.is_bijective()
    assert exchange_vector(src, shared, 4) == 1 and exchange_vector(dst, shared, 4) == 4
    for warp in range(4):
        assert bank_wavefronts(src, shared, 4, 1, warp=warp) == (1,) * 32
        assert bank_wavefronts(dst, shared, 4, 4, warp=warp) == (4,) * 8
    plain = shared_identity((64, 64))
    assert exchange_wavefronts(src, dst, plain, 4) == 4 * 32 + 8 * 8
    assert exchange_wavefronts(src, dst, shared, 4) == 32 + 4 * 8


LAYOUTS = {
    "rows4": default_blocked((32, 64), 4, 4),
    "cols": default_blocked((32, 64), 4, 1, order=(0, 1)),
    "cols4": default_blocked((32, 64), 4, 1, order=(0, 1)).permute([1, 0]).permute([1, 0]),
    "sector": sector_blocked((32, 64), 4, 4, 2, 16),
    "scalar": default_blocked((32, 64), 4, 1),
}


@pytest.mark.parametrize("a, b", list(itertools.permutations(LAYOUTS, 2)))
@pytest.mark.parametrize("elem_bytes", [2, 4, 8])
def test_an_exchange_never_takes_more_wavefronts_than_row_major(a, b, elem_bytes):
    """A swizzle built for a pair (None: no common complement among the bits that leave
    the vectors alone) is a bijection that keeps each side's vector width; the layout
    picked never costs more than row-major."""
    src, dst = LAYOUTS[a], LAYOUTS[b]
    plain = shared_identity(src.shape)
    swizzled = swizzled_exchange(src, dst, elem_bytes)
    if swizzled is not None:
        assert swizzled.is_bijective()
        for regs in (src, dst):
            assert exchange_vector(regs, swizzled, elem_bytes) == exchange_vector(regs, plain, elem_bytes)
    shared = exchange_layout(src, dst, elem_bytes)
    cost = [exchange_wavefronts(src, dst, s, elem_bytes) for s in (shared, plain)]
    assert cost[0] <= cost[1]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_transposed_store_exchanges_without_bank_conflicts(arch):
    """``y = x^T`` by 16x64 tiles (test_vectorize checks its 16-byte accesses against the
    interpreter): the exchange's shared stores and loads meet no conflict, in 3x2 tiles
    over 48x128, and y is the transpose."""
    ptx, host = diffcheck.compile_with_host(read_bytecode(bytecode(transpose_kernel())), arch)
    x = diffcheck.random_array(np.random.default_rng(9), np.float32, (48, 128))
    y = np.zeros((128, 48), np.float32)
    t = launch(ptx, "k", (4, 3, 1), [x, y, 48, 128], traffic=True, host_object=host).check().traffic
    np.testing.assert_array_equal(y, x.T)
    assert t.shared_stores.requests > 0 and t.shared_loads.requests > 0
    assert t.shared_stores.conflicts == t.shared_loads.conflicts == 0
