"""Linear layouts: which thread/register holds which tile element.

A ``LinearLayout`` maps named input dimensions (``reg``, ``lane``, ``warp`` for
registers; ``offset`` for shared memory) to tile coordinates.  Every input
dimension has a list of *bases*, one per bit of its index: the coordinates of the
element selected when only that bit is set.  The image of an index is the XOR of
the bases of its set bits (linear algebra over GF(2)), as in Triton's
LinearLayout.  Tile dimensions are powers of two, so every blocked, sliced,
broadcast, reshaped or transposed distribution is such a map.

A base of all zeros means that bit does not change the element: those threads
(or registers) hold copies of the same element (a broadcast).
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

from ..record import record

REG, LANE, WARP = "reg", "lane", "warp"


def log2(n: int) -> int:
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{n} is not a power of two")
    return n.bit_length() - 1


@record(frozen=True)
class LinearLayout:
    #: (input dim name, bases); each base is a tuple with one coordinate per output dim.
    ins: tuple[tuple[str, tuple[tuple[int, ...], ...]], ...]
    #: output (tile) dimension sizes.
    shape: tuple[int, ...]

    # -- queries ------------------------------------------------------------------
    def bases(self, name: str) -> tuple[tuple[int, ...], ...]:
        for n, b in self.ins:
            if n == name:
                return b
        return ()

    def size(self, name: str) -> int:
        return 1 << len(self.bases(name))

    @property
    def rank(self) -> int:
        return len(self.shape)

    def apply(self, **index: int) -> tuple[int, ...]:
        """Coordinates of the element at the given input indices (missing ones are 0)."""
        out = [0] * self.rank
        for name, bases in self.ins:
            i = index.get(name, 0)
            for bit, base in enumerate(bases):
                if i >> bit & 1:
                    for d, c in enumerate(base):
                        out[d] ^= c
        return tuple(out)

    def is_surjective(self) -> bool:
        """Does every element of the tile appear somewhere?"""
        seen = {self.apply(**dict(zip(self.names, idx))) for idx in _index_space(self)}
        n = 1
        for s in self.shape:
            n *= s
        return len(seen) == n

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.ins)

    def broadcast_mask(self, name: str) -> int:
        """Bits of input ``name`` whose bases are zero (copies of the same element)."""
        return sum(1 << i for i, b in enumerate(self.bases(name)) if not any(b))

    # -- transformations ----------------------------------------------------------
    def with_bases(self, name: str, bases: Sequence[tuple[int, ...]]) -> "LinearLayout":
        ins = tuple((n, tuple(bases) if n == name else b) for n, b in self.ins)
        if name not in self.names:
            ins += ((name, tuple(bases)),)
        return LinearLayout(ins, self.shape)

    def map_coords(self, fn, shape: tuple[int, ...]) -> "LinearLayout":
        """Apply a linear coordinate transform to every base (reshape, permute, slice)."""
        return LinearLayout(tuple((n, tuple(fn(b) for b in bases)) for n, bases in self.ins), shape)

    def permute(self, perm: Sequence[int]) -> "LinearLayout":
        """Result dim i is input dim perm[i] (the cuda_tile.permute convention)."""
        return self.map_coords(lambda b: tuple(b[p] for p in perm), tuple(self.shape[p] for p in perm))

    def reshape(self, shape: Sequence[int]) -> "LinearLayout":
        """Same elements in row-major order, new shape."""
        shape = tuple(shape)

        def remap(b: tuple[int, ...]) -> tuple[int, ...]:
            return unflatten(flatten(b, self.shape), shape)
        return self.map_coords(remap, shape)

    def drop_dim(self, dim: int) -> "LinearLayout":
        """Remove tile dimension ``dim`` (the result layout of a reduction along it).

        Register bases that only moved along ``dim`` become zero and are removed;
        lane and warp bases that become zero stay, as broadcast bits."""
        shape = self.shape[:dim] + self.shape[dim + 1:]
        out = self.map_coords(lambda b: b[:dim] + b[dim + 1:], shape)
        regs = tuple(b for b in out.bases(REG) if any(b))
        return out.with_bases(REG, regs)

    def expand_dim(self, dim: int, size: int) -> "LinearLayout":
        """Insert tile dimension ``dim``; existing bases have coordinate 0 along it."""
        shape = self.shape[:dim] + (size,) + self.shape[dim:]
        return self.map_coords(lambda b: b[:dim] + (0,) + b[dim:], shape)

    def squash(self, dims: Iterable[int]) -> "LinearLayout":
        """Zero the coordinates along ``dims`` and set their size to 1: the layout of
        a broadcast's input that makes the broadcast a register copy."""
        dims = set(dims)
        shape = tuple(1 if d in dims else s for d, s in enumerate(self.shape))
        out = self.map_coords(lambda b: tuple(0 if d in dims else c for d, c in enumerate(b)), shape)
        return out.with_bases(REG, tuple(b for b in out.bases(REG) if any(b)))

    def concat(self, dim: int) -> "LinearLayout":
        """The layout of ``cat`` of two tiles held in this layout along ``dim``: the same
        bases and one more register bit, the top one, that moves to the second tile (the
        result's registers are the first tile's, then the second's)."""
        shape = tuple(2 * s if d == dim else s for d, s in enumerate(self.shape))
        out = LinearLayout(self.ins, shape)
        return out.with_bases(REG, self.bases(REG) + (_unit(self.rank, dim, self.shape[dim]),))

    def select_block(self, origin: Sequence[int], shape: Sequence[int]) -> "Optional[tuple[LinearLayout, list[int]]]":
        """The block of ``shape`` at ``origin`` (a multiple of ``shape``) as a choice of
        registers, when each thread already holds its part of it: every lane and warp base,
        and each register base, either stays inside a block (those registers remain, as the
        result's register bits) or only moves between blocks (the origin fixes them).
        Returns the block's layout and, per result register, the source register; None when
        the block is spread differently (then it goes through shared memory)."""
        shape = tuple(shape)
        inside = lambda b: all(c < s for c, s in zip(b, shape))  # noqa: E731
        if not all(inside(b) for name in (LANE, WARP) for b in self.bases(name)):
            return None
        regs = self.bases(REG)
        kept = [i for i, b in enumerate(regs) if inside(b)]
        between = [i for i, b in enumerate(regs) if i not in kept]
        if any(c % s for i in between for c, s in zip(regs[i], shape)):
            return None
        choice = _solve_xor(tuple(origin), [regs[i] for i in between])
        if choice is None:
            return None
        fixed = sum(1 << between[k] for k in range(len(between)) if choice >> k & 1)
        picks = [fixed | sum(1 << kept[j] for j in range(len(kept)) if r >> j & 1) for r in range(1 << len(kept))]
        out = LinearLayout(self.ins, shape).with_bases(REG, tuple(regs[i] for i in kept))
        return out, picks


def _solve_xor(target: tuple[int, ...], vectors: Sequence[tuple[int, ...]]) -> "Optional[int]":
    """A subset (bit mask over ``vectors``) whose XOR is ``target``, or None (GF(2)
    elimination; coordinates are packed into one integer, 32 bits per dim)."""
    def pack(v: Sequence[int]) -> int:
        return sum(c << (32 * d) for d, c in enumerate(v))
    pivots: dict[int, tuple[int, int]] = {}
    for i, v in enumerate(vectors):
        x, m = pack(v), 1 << i
        while x:
            top = x.bit_length() - 1
            if top not in pivots:
                pivots[top] = (x, m)
                break
            x, m = x ^ pivots[top][0], m ^ pivots[top][1]
    x, m = pack(target), 0
    while x:
        top = x.bit_length() - 1
        if top not in pivots:
            return None
        x, m = x ^ pivots[top][0], m ^ pivots[top][1]
    return m


def flatten(coords: Sequence[int], shape: Sequence[int]) -> int:
    i = 0
    for c, s in zip(coords, shape):
        i = i * s + c
    return i


def unflatten(index: int, shape: Sequence[int]) -> tuple[int, ...]:
    out = []
    for s in reversed(shape):
        out.append(index % s)
        index //= s
    return tuple(reversed(out))


def _index_space(layout: LinearLayout):
    sizes = [layout.size(n) for n in layout.names]

    def rec(i: int, prefix: tuple[int, ...]):
        if i == len(sizes):
            yield prefix
            return
        for v in range(sizes[i]):
            yield from rec(i + 1, prefix + (v,))
    yield from rec(0, ())


def _unit(rank: int, dim: int, value: int) -> tuple[int, ...]:
    return tuple(value if d == dim else 0 for d in range(rank))


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
            dest.append(_unit(rank, dim, step) if step < shape[dim] else _unit(rank, dim, 0))
            covered[dim] *= 2

    for d in order:
        put(regs, size_per_thread[d], d)
    for d in order:
        put(lanes, threads_per_warp[d], d)
    for d in order:
        put(warps, warps_per_cta[d], d)
    for d in order:  # wrap: shapes bigger than one pass take more registers
        while covered[d] < shape[d]:
            regs.append(_unit(rank, d, covered[d]))
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
    regs = [(0, 1), (8, 0)] + [(0, 8 << (wn + j)) for j in range(n_bits - wn)] \
        + [(16 << (wm + i), 0) for i in range(m_bits - wm)]
    lanes = [(0, 2), (0, 4), (1, 0), (2, 0), (4, 0)]
    warps = [(16 << i, 0) for i in range(wm)] + [(0, 8 << j) for j in range(wn)] \
        + [(0, 0)] * (warp_bits - wm - wn)
    return LinearLayout(((REG, tuple(regs)), (LANE, tuple(lanes)), (WARP, tuple(warps))), (m, n))


def mma_blocks(layout: LinearLayout) -> tuple[int, int]:
    """(16-row blocks, 8-column blocks) one warp holds in an ``mma_fragment`` layout."""
    regs = layout.bases(REG)[2:]
    return 1 << sum(1 for r in regs if r[0]), 1 << sum(1 for r in regs if r[1])
