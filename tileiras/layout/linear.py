"""Linear layouts: which thread/register holds which tile element.

The ``LinearLayout`` type and its algebra live in ``core``; this module keeps the
register distributions the lowering uses (Triton's blocked layouts and the MMA
accumulator fragment) and re-exports the core names its callers import.  Shared-memory
layouts and swizzles are in ``shared``, the tensor-core operand and accumulator
layouts in ``tensor_core``.

A base of all zeros means that bit does not change the element: those threads
(or registers) hold copies of the same element (a broadcast).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from .core import LANE, OFFSET, REG, WARP, LinearLayout, flatten, log2, unflatten, unit_base
from .tensor_core import mma_c_layout

__all__ = ["LANE", "OFFSET", "REG", "WARP", "LinearLayout", "blocked", "default_blocked", "flatten", "log2",
           "mma_blocks", "mma_fragment", "sector_blocked", "unflatten"]


def blocked(shape: Sequence[int], size_per_thread: Sequence[int], threads_per_warp: Sequence[int],
            warps_per_cta: Sequence[int], order: Sequence[int]) -> LinearLayout:
    """Triton's blocked distribution over a tile of ``shape``.

    ``order`` lists dims fastest first.  Each thread holds a ``size_per_thread``
    block; lanes then warps tile the shape along ``order``; a shape larger than one
    pass wraps around in extra registers; a smaller one leaves broadcast bits."""
    shape = tuple(shape)
    rank = len(shape)
    regs: list[tuple[int, ...]] = []
    lanes: list[tuple[int, ...]] = []
    warps: list[tuple[int, ...]] = []
    covered = [1] * rank

    def put(dest: list, count: int, dim: int) -> None:
        for _ in range(log2(count)):
            step = covered[dim]
            dest.append(unit_base(rank, dim, step) if step < shape[dim] else unit_base(rank, dim, 0))
            covered[dim] *= 2

    for d in order:
        put(regs, size_per_thread[d], d)
    for d in order:
        put(lanes, threads_per_warp[d], d)
    for d in order:
        put(warps, warps_per_cta[d], d)
    for d in order:  # wrap: shapes bigger than one pass take more registers
        while covered[d] < shape[d]:
            regs.append(unit_base(rank, d, covered[d]))
            covered[d] *= 2
    return LinearLayout(((REG, tuple(regs)), (LANE, tuple(lanes)), (WARP, tuple(warps))), shape)


def default_blocked(shape: Sequence[int], num_warps: int, vector: int = 1,
                    order: Sequence[int] = ()) -> LinearLayout:
    """The canonical layout of a tile: ``vector`` contiguous elements per thread
    along the last dim, lanes then warps filling dims fastest-first (``order``, fastest
    first; the last dim first by default)."""
    shape = tuple(shape)
    rank = len(shape)
    if rank == 0:
        return LinearLayout(((REG, ()), (LANE, tuple(() for _ in range(5))),
                             (WARP, tuple(() for _ in range(log2(num_warps))))), ())
    order = list(order) or list(reversed(range(rank)))
    spt = [1] * rank
    spt[-1] = min(vector, shape[-1])
    return blocked(shape, spt, *_fill_threads(shape, spt, order, num_warps), order)


def outer_product(shape: Sequence[int], num_warps: int, vector: int = 4, value_cost: int = 0
                  ) -> Optional[LinearLayout]:
    """The layout of a CUDA-core multiply's M x N accumulator: each thread holds an r x c
    block (``vector`` consecutive columns, ``c / vector`` such runs spread over the row)
    that makes a K step cheapest: r reads of A (one a row; lanes with the same rows share
    them) and c / vector reads of B, plus ``value_cost`` instructions for each of the
    r + c values read (widening fp8 or f16, multiplying by a block scale).  A 128x128 f32
    tile over 128 threads: 8 rows x 16 columns (12 reads a step for 128 multiply-adds,
    against 33 for 32 rows x 4 columns), as NVIDIA's tool blocks it; 64x64 block-scaled
    fp8 over 256 threads stays 4 x 4 (values cost more than reads there).  Lanes prefer
    the row (ties go to more lanes along it: whole sectors when the tile is stored); warps
    take rows, then columns.  None where no block covers the tile once (a tile smaller
    than the CTA)."""
    if len(shape) != 2:
        return None
    m, n = shape
    threads = 32 * num_warps
    if m * n % threads:
        return None
    per_thread = m * n // threads
    v = min(vector, n, per_thread)
    best = None
    lanes_col = 1
    while lanes_col <= 32:
        lanes_row = 32 // lanes_col
        warps_row = min(num_warps, max(1, m // lanes_row))
        warps_col = num_warps // warps_row
        rows_out, cols_out = lanes_row * warps_row, v * lanes_col * warps_col
        if rows_out <= m and cols_out <= n and m % rows_out == 0 and n % cols_out == 0:
            r, g = m // rows_out, n // cols_out
            if r * g * v == per_thread:
                key = (r + g + value_cost * (r + g * v), -lanes_col)
                if best is None or key < best[0]:
                    best = (key, [lanes_row, lanes_col], [warps_row, warps_col])
        lanes_col *= 2
    if best is None:
        return None
    return blocked(shape, [1, v], best[1], best[2], [1, 0])


def _fill_threads(shape: tuple[int, ...], spt: Sequence[int], order: Sequence[int],
                  num_warps: int) -> tuple[list[int], list[int]]:
    """Lanes, then warps, per dim: each dim along ``order`` takes what its elements left
    after ``spt`` have room for; leftovers broadcast along the slowest dim."""
    rank = len(shape)
    tpw, wpc = [1] * rank, [1] * rank
    lanes_left, warps_left = 32, num_warps
    room = [s // t for s, t in zip(shape, spt)]
    for d in order:
        take = min(lanes_left, room[d])
        tpw[d] = take
        lanes_left //= take
        room[d] //= take
    tpw[order[-1]] *= lanes_left  # leftover lanes broadcast along the slowest dim
    for d in order:
        take = min(warps_left, max(room[d], 1))
        wpc[d] = take
        warps_left //= take
        room[d] = max(room[d] // take, 1)
    wpc[order[-1]] *= warps_left
    return tpw, wpc


def sector_blocked(shape: Sequence[int], num_warps: int, vector: int, run: int, regs: int) -> LinearLayout:
    """A coalesced layout that keeps a thread on few rows: ``vector`` contiguous elements a
    thread, ``run`` lanes over consecutive ones (together a whole number of 32-byte
    sectors), then up to ``regs`` elements of the thread further along the last dim, at a
    stride of ``vector * run`` (compile-time offsets from one row address), and only then
    lanes and warps over the rest of the last dim and over the other dims.

    A warp's access then touches as few sectors as ``default_blocked``'s, while a thread
    meets as few rows as with many contiguous elements: each row a thread touches costs
    it a 64-bit address and a bounds predicate when the row stride is known only at run
    time (atomic_tile_reduce 32x32: 8 rows a thread with lanes along the whole row, 2
    here).  Tiles of one dim, or of one row (1x256: its reshape to 256 must stay free),
    or whose rows fit in one run, are ``default_blocked``'s."""
    shape = tuple(shape)
    rank = len(shape)
    low = vector * run
    rows = 1
    for d in shape[:-1]:
        rows *= d
    if rank < 2 or rows == 1 or shape[-1] <= low or regs <= vector:
        return default_blocked(shape, num_warps, vector)
    high = shape[-1] // low
    split = shape[:-1] + (high, low)
    spt = [1] * (rank - 1) + [min(high, regs // vector), vector]
    order = list(reversed(range(rank + 1)))
    return blocked(split, spt, *_fill_threads(split, spt, order, num_warps), order).reshape(shape)


def mma_fragment(shape: Sequence[int], num_warps: int) -> LinearLayout:
    """The accumulator layout of ``mma.sync.m16n8kK`` tiled over an ``M x N`` tile: lane
    ``l`` of a 16x8 block holds row ``l / 4`` and ``l / 4 + 8``, columns ``2 (l % 4)`` and
    the next (registers 0-3: (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)).  Warps split
    the 16-row blocks first, then the 8-column ones; a warp's further blocks are its
    registers, column blocks first, so block (i, j) of a warp is registers
    ``4 (j + i * column_blocks)`` to ``+ 3``.  Warps beyond the blocks hold copies (zero
    bases).  ``M`` a multiple of 16 and ``N`` of 8."""
    m, n = shape
    warp_bits = log2(num_warps)
    m_bits, n_bits = log2(m // 16), log2(n // 8)
    wm = min(warp_bits, m_bits)
    wn = min(warp_bits - wm, n_bits)
    warps = LinearLayout(((WARP, tuple(unit_base(2, 0, 1 << i) for i in range(wm))
                           + tuple(unit_base(2, 1, 1 << j) for j in range(wn))
                           + ((0, 0),) * (warp_bits - wm - wn)),), (1 << wm, 1 << wn))
    regs = LinearLayout(((REG, tuple(unit_base(2, 1, 1 << j) for j in range(n_bits - wn))
                          + tuple(unit_base(2, 0, 1 << i) for i in range(m_bits - wm))),),
                        (1 << (m_bits - wm), 1 << (n_bits - wn)))
    return mma_c_layout().with_bases(WARP, ()) * warps * regs


def mma_blocks(layout: LinearLayout) -> tuple[int, int]:
    """(16-row blocks, 8-column blocks) one warp holds in an ``mma_fragment`` layout."""
    regs = layout.bases(REG)[2:]
    return 1 << sum(1 for r in regs if r[0]), 1 << sum(1 for r in regs if r[1])
