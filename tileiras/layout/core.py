"""The linear layout type and its algebra over GF(2).

A ``LinearLayout`` maps named input dimensions (``reg``, ``lane``, ``warp`` for registers;
``offset`` for shared memory; ``row``/``col`` for tensor memory) to the coordinates of a
tile.  Each input dimension has one *base* per bit of its index: the coordinates reached
when only that bit is set.  The image of an index is the XOR of the bases of its set bits,
so a layout is a matrix over GF(2) whose columns are the bases, as in Triton's
``LinearLayout``.  The output dimensions are positional (``shape``, one size per tile
dimension, each a power of two); a layout whose outputs are another layout's inputs lists
them in that layout's input order (``compose``), and ``invert`` names the inputs it makes
``dim0``, ``dim1``...  Layouts are frozen records: two are equal when their inputs (names,
order, bases) and shape are; ``is_bijective``/``is_injective``/``is_surjective`` and
``num_distinct_outputs`` compare them as maps.

Everything here is exact bit arithmetic on small integers: a base is packed into one
integer (``_pack``, 32 bits per coordinate) and Gaussian elimination over those integers
answers rank, preimage and independence questions.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from ..record import record

REG, LANE, WARP, OFFSET = "reg", "lane", "warp", "offset"
Base = tuple[int, ...]


def log2(n: int) -> int:
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{n} is not a power of two")
    return n.bit_length() - 1


def dim_name(d: int) -> str:
    """The name ``invert`` gives the input that stands for output dimension ``d``."""
    return f"dim{d}"


@record(frozen=True)
class LinearLayout:
    #: (input dim name, bases); each base is a tuple with one coordinate per output dim.
    ins: tuple[tuple[str, tuple[Base, ...]], ...]
    #: output (tile) dimension sizes.
    shape: tuple[int, ...]

    # -- queries ------------------------------------------------------------------
    def bases(self, name: str) -> tuple[Base, ...]:
        for n, b in self.ins:
            if n == name:
                return b
        return ()

    def size(self, name: str) -> int:
        return 1 << len(self.bases(name))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.ins)

    @property
    def in_bits(self) -> int:
        """Bits of all inputs together (log2 of the number of input indices)."""
        return sum(len(b) for _, b in self.ins)

    @property
    def out_bits(self) -> int:
        """log2 of the number of tile elements."""
        return sum(log2(s) for s in self.shape)

    def apply(self, **index: int) -> Base:
        """Coordinates of the element at the given input indices (missing ones are 0)."""
        out = [0] * self.rank
        for name, bases in self.ins:
            i = index.get(name, 0)
            for bit, base in enumerate(bases):
                if i >> bit & 1:
                    for d, c in enumerate(base):
                        out[d] ^= c
        return tuple(out)

    def table(self) -> dict[tuple[int, ...], Base]:
        """Every input index (one value per input dim, in ``names`` order) and its image."""
        return {idx: self.apply(**dict(zip(self.names, idx))) for idx in _index_space(self)}

    def broadcast_mask(self, name: str) -> int:
        """Bits of input ``name`` whose bases are zero (copies of the same element)."""
        return sum(1 << i for i, b in enumerate(self.bases(name)) if not any(b))

    def matrix_rank(self) -> int:
        """Rank of the layout as a GF(2) matrix: log2 of its number of distinct outputs."""
        return len(_Echelon([b for _, bs in self.ins for b in bs]).pivots)

    def num_distinct_outputs(self) -> int:
        return 1 << self.matrix_rank()

    def is_surjective(self) -> bool:
        """Does every element of the tile appear somewhere?"""
        return self.matrix_rank() == self.out_bits and self._inside()

    def is_injective(self) -> bool:
        """Does every input index reach an element no other index reaches?"""
        return self.matrix_rank() == self.in_bits

    def is_bijective(self) -> bool:
        return self.is_injective() and self.is_surjective()

    def _inside(self) -> bool:
        return all(0 <= c < s for _, bs in self.ins for b in bs for c, s in zip(b, self.shape))

    def free_variable_masks(self) -> dict[str, int]:
        """Per input dim, the bits whose base the earlier bits already reach (inputs in
        order, low bits first): setting them changes nothing another index could not
        give, so a preimage may leave them 0.  Zero bases are free."""
        ech = _Echelon([])
        masks: dict[str, int] = {}
        for name, bases in self.ins:
            masks[name] = 0
            for bit, base in enumerate(bases):
                if not ech.add(base):
                    masks[name] |= 1 << bit
        return masks

    def num_consecutive(self, dim: int, name: str = REG) -> int:
        """How many consecutive indices of input ``name``, from 0, reach consecutive
        coordinates along ``dim`` (and nothing else): the first bits' bases are 1, 2, 4..."""
        n = 0
        for bit, base in enumerate(self.bases(name)):
            if base != unit_base(self.rank, dim, 1 << bit):
                break
            n += 1
        return 1 << n

    def largest_vectorization(self, dim: int, limit: int, name: str = REG) -> int:
        """The widest vector, at most ``limit`` elements, that every index moves as aligned
        consecutive coordinates along ``dim``: this layout divided on the left by an
        identity of that many ``name`` indices (``divide_left``).  For a register ->
        shared-offset map (``invert_and_compose``) it is the copy's vector width."""
        v = min(self.num_consecutive(dim, name), limit)
        while v > 1 and self.divide_left(identity_1d(v, name, dim, self.rank)) is None:
            v //= 2
        return max(v, 1)

    # -- algebra ------------------------------------------------------------------
    def compose(self, outer: LinearLayout) -> LinearLayout:
        """``outer(self(x))``: this layout's output dim ``d`` feeds ``outer``'s ``d``-th input
        dim, whose size must be at least ``shape[d]``."""
        if self.rank != len(outer.ins):
            raise ValueError(f"compose: {self.rank} output dims into {len(outer.ins)} input dims")
        for d, (name, _) in enumerate(outer.ins):
            if self.shape[d] > outer.size(name):
                raise ValueError(f"compose: output dim {d} of size {self.shape[d]} into {name!r} "
                                 f"of size {outer.size(name)}")
        names = outer.names
        return LinearLayout(tuple((n, tuple(outer.apply(**dict(zip(names, b))) for b in bases))
                                  for n, bases in self.ins), outer.shape)

    def pseudo_invert(self) -> LinearLayout:
        """A right inverse of a surjective layout: inputs ``dim0``, ``dim1``... (one per
        output dim) mapped to the inputs of this layout (output dims in ``names`` order,
        sized as the inputs), with every free variable 0, so ``P.compose(self)`` is the
        identity.  For a bijective layout it is the inverse."""
        if not self.is_surjective():
            raise ValueError("pseudo_invert: the layout does not reach every element")
        return self._preimages([(dim_name(d), [unit_base(self.rank, d, 1 << k) for k in range(log2(s))])
                                for d, s in enumerate(self.shape)])

    def invert(self) -> LinearLayout:
        """The inverse of a bijective layout (see ``pseudo_invert``)."""
        if not self.is_bijective():
            raise ValueError("invert: the layout is not a bijection")
        return self.pseudo_invert()

    def invert_and_compose(self, outer: LinearLayout) -> LinearLayout:
        """``C`` with ``C.compose(outer) == self``: for each input of this layout, the input
        of ``outer`` that reaches the same element (free variables of ``outer`` left 0).
        With this a register layout and ``outer`` a shared layout, ``C`` says which offset
        each register of each lane and warp reads or writes."""
        if len(outer.shape) != self.rank or any(a > b for a, b in zip(self.shape, outer.shape)):
            raise ValueError(f"invert_and_compose: tile {self.shape} is not inside {outer.shape}")
        return outer._preimages([(n, list(bs)) for n, bs in self.ins])

    def _preimages(self, targets: list[tuple[str, list[Base]]]) -> LinearLayout:
        """Layout with inputs ``targets`` whose bases are the preimages of the given
        coordinates under this layout, as indices of this layout's inputs."""
        flat = [(n, bit) for n, bs in self.ins for bit in range(len(bs))]
        ech = _Echelon([b for _, bs in self.ins for b in bs])
        ins = []
        for name, coords in targets:
            bases = []
            for c in coords:
                mask = ech.solve(c)
                if mask is None:
                    raise ValueError(f"no input reaches {c}")
                idx = dict.fromkeys(self.names, 0)
                for k, (n, bit) in enumerate(flat):
                    if mask >> k & 1:
                        idx[n] |= 1 << bit
                bases.append(tuple(idx[n] for n in self.names))
            ins.append((name, tuple(bases)))
        return LinearLayout(tuple(ins), tuple(self.size(n) for n in self.names))

    def __mul__(self, other: LinearLayout) -> LinearLayout:
        """The product: ``other`` tiled over this layout's tile.  The shapes multiply dim
        by dim; an input dim of both takes this layout's bits first, then ``other``'s,
        whose bases are scaled by this layout's shape; other input dims are appended."""
        if other.rank != self.rank:
            raise ValueError(f"product of rank {self.rank} and rank {other.rank}")
        scale = lambda b: tuple(c * s for c, s in zip(b, self.shape))
        ins = [(n, bs + tuple(scale(b) for b in other.bases(n))) for n, bs in self.ins]
        ins += [(n, tuple(scale(b) for b in bs)) for n, bs in other.ins if n not in self.names]
        return LinearLayout(tuple(ins), tuple(a * b for a, b in zip(self.shape, other.shape)))

    def divide_left(self, divisor: LinearLayout) -> LinearLayout | None:
        """``Q`` with ``divisor * Q == self``, or None: the divisor's bits are the low bits
        of each of its input dims here, and what is left moves in whole divisor tiles."""
        if divisor.rank != self.rank or any(s % d for s, d in zip(self.shape, divisor.shape)):
            return None
        ins = []
        for name, bases in self.ins:
            low = divisor.bases(name)
            if bases[:len(low)] != low:
                return None
            rest = bases[len(low):]
            if any(c % s for b in rest for c, s in zip(b, divisor.shape)):
                return None
            ins.append((name, tuple(tuple(c // s for c, s in zip(b, divisor.shape)) for b in rest)))
        if any(n not in self.names for n in divisor.names if divisor.bases(n)):
            return None
        return LinearLayout(tuple(ins), tuple(s // d for s, d in zip(self.shape, divisor.shape)))

    def concat_ins(self, other: LinearLayout) -> LinearLayout:
        """Both layouts' inputs side by side (distinct names, the same tile)."""
        if self.shape != other.shape or set(self.names) & set(other.names):
            raise ValueError("concat_ins: the tiles differ or input names repeat")
        return LinearLayout(self.ins + other.ins, self.shape)

    def concat_outs(self, other: LinearLayout) -> LinearLayout:
        """One input space (same names and sizes) mapped to both tiles: this layout's
        output dims, then ``other``'s."""
        if [(n, len(b)) for n, b in self.ins] != [(n, len(b)) for n, b in other.ins]:
            raise ValueError("concat_outs: the input dims differ")
        return LinearLayout(tuple((n, tuple(a + b for a, b in zip(bs, other.bases(n)))) for n, bs in self.ins),
                            self.shape + other.shape)

    def sublayout(self, names: Sequence[str], dims: Sequence[int]) -> LinearLayout:
        """Only inputs ``names`` (in that order) and output dims ``dims``."""
        return LinearLayout(tuple((n, tuple(tuple(b[d] for d in dims) for b in self.bases(n))) for n in names),
                            tuple(self.shape[d] for d in dims))

    def transpose_ins(self, names: Sequence[str]) -> LinearLayout:
        """The same map with the input dims in the order ``names``."""
        if sorted(names) != sorted(self.names):
            raise ValueError(f"transpose_ins: {list(names)} is not a permutation of {list(self.names)}")
        return LinearLayout(tuple((n, self.bases(n)) for n in names), self.shape)

    def flatten_ins(self, names: Sequence[str], into: str) -> LinearLayout:
        """Inputs ``names`` merged into one input ``into``, the first name's bits lowest
        (``reg``/``lane``/``warp`` into one thread-and-register index, say)."""
        merged = tuple(b for n in names for b in self.bases(n))
        rest = tuple((n, b) for n, b in self.ins if n not in names)
        return LinearLayout(((into, merged),) + rest, self.shape)

    # -- transformations ----------------------------------------------------------
    def with_bases(self, name: str, bases: Sequence[Base]) -> LinearLayout:
        ins = tuple((n, tuple(bases) if n == name else b) for n, b in self.ins)
        if name not in self.names:
            ins += ((name, tuple(bases)),)
        return LinearLayout(ins, self.shape)

    def map_coords(self, fn, shape: tuple[int, ...]) -> LinearLayout:
        """Apply a linear coordinate transform to every base (reshape, permute, slice)."""
        return LinearLayout(tuple((n, tuple(fn(b) for b in bases)) for n, bases in self.ins), shape)

    def permute(self, perm: Sequence[int]) -> LinearLayout:
        """Transpose of the output dims: result dim i is input dim perm[i] (the
        cuda_tile.permute convention)."""
        return self.map_coords(lambda b: tuple(b[p] for p in perm), tuple(self.shape[p] for p in perm))

    def reshape(self, shape: Sequence[int]) -> LinearLayout:
        """Reshape of the output dims: same elements in row-major order, new shape."""
        shape = tuple(shape)

        def remap(b: Base) -> Base:
            return unflatten(flatten(b, self.shape), shape)
        return self.map_coords(remap, shape)

    def drop_dim(self, dim: int) -> LinearLayout:
        """Remove tile dimension ``dim`` (the result layout of a reduction along it).

        Register bases that only moved along ``dim`` become zero and are removed;
        lane and warp bases that become zero stay, as broadcast bits."""
        shape = self.shape[:dim] + self.shape[dim + 1:]
        out = self.map_coords(lambda b: b[:dim] + b[dim + 1:], shape)
        regs = tuple(b for b in out.bases(REG) if any(b))
        return out.with_bases(REG, regs)

    def expand_dim(self, dim: int, size: int) -> LinearLayout:
        """Insert tile dimension ``dim``; existing bases have coordinate 0 along it."""
        shape = self.shape[:dim] + (size,) + self.shape[dim:]
        return self.map_coords(lambda b: b[:dim] + (0,) + b[dim:], shape)

    def squash(self, dims: Iterable[int]) -> LinearLayout:
        """Zero the coordinates along ``dims`` and set their size to 1: the layout of
        a broadcast's input that makes the broadcast a register copy."""
        dims = set(dims)
        shape = tuple(1 if d in dims else s for d, s in enumerate(self.shape))
        out = self.map_coords(lambda b: tuple(0 if d in dims else c for d, c in enumerate(b)), shape)
        return out.with_bases(REG, tuple(b for b in out.bases(REG) if any(b)))

    def concat(self, dim: int) -> LinearLayout:
        """The layout of ``cat`` of two tiles held in this layout along ``dim``: the same
        bases and one more register bit, the top one, that moves to the second tile (the
        result's registers are the first tile's, then the second's)."""
        shape = tuple(2 * s if d == dim else s for d, s in enumerate(self.shape))
        out = LinearLayout(self.ins, shape)
        return out.with_bases(REG, self.bases(REG) + (unit_base(self.rank, dim, self.shape[dim]),))

    def select_block(self, origin: Sequence[int], shape: Sequence[int]) -> tuple[LinearLayout, list[int]] | None:
        """The block of ``shape`` at ``origin`` (a multiple of ``shape``) as a choice of
        registers, when each thread already holds its part of it: every lane and warp base,
        and each register base, either stays inside a block (those registers remain, as the
        result's register bits) or only moves between blocks (the origin fixes them).
        Returns the block's layout and, per result register, the source register; None when
        the block is spread differently (then it goes through shared memory)."""
        shape = tuple(shape)
        inside = lambda b: all(c < s for c, s in zip(b, shape))
        if not all(inside(b) for name in (LANE, WARP) for b in self.bases(name)):
            return None
        regs = self.bases(REG)
        kept = [i for i, b in enumerate(regs) if inside(b)]
        between = [i for i, b in enumerate(regs) if i not in kept]
        if any(c % s for i in between for c, s in zip(regs[i], shape)):
            return None
        choice = _Echelon([regs[i] for i in between]).solve(tuple(origin))
        if choice is None:
            return None
        fixed = sum(1 << between[k] for k in range(len(between)) if choice >> k & 1)
        picks = [fixed | sum(1 << kept[j] for j in range(len(kept)) if r >> j & 1) for r in range(1 << len(kept))]
        out = LinearLayout(self.ins, shape).with_bases(REG, tuple(regs[i] for i in kept))
        return out, picks


class _Echelon:
    """Gaussian elimination over GF(2) of vectors added one at a time: ``pivots`` maps
    the top bit of each independent (packed) vector to it and to the mask of the added
    vectors whose XOR it is."""

    def __init__(self, vectors: Iterable[Base]):
        self.pivots: dict[int, tuple[int, int]] = {}
        self.count = 0
        for v in vectors:
            self.add(v)

    def add(self, v: Base) -> bool:
        """Add the next vector; False when the earlier ones already reach it."""
        x, m = _pack(v), 1 << self.count
        self.count += 1
        while x:
            top = x.bit_length() - 1
            if top not in self.pivots:
                self.pivots[top] = (x, m)
                return True
            x, m = x ^ self.pivots[top][0], m ^ self.pivots[top][1]
        return False

    def solve(self, target: Base) -> int | None:
        """A subset (bit mask over the added vectors) whose XOR is ``target``, or None."""
        x, m = _pack(target), 0
        while x:
            top = x.bit_length() - 1
            if top not in self.pivots:
                return None
            x, m = x ^ self.pivots[top][0], m ^ self.pivots[top][1]
        return m


def _pack(v: Sequence[int]) -> int:
    return sum(c << (32 * d) for d, c in enumerate(v))


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


def _index_space(layout: LinearLayout) -> Iterator[tuple[int, ...]]:
    sizes = [layout.size(n) for n in layout.names]

    def rec(i: int, prefix: tuple[int, ...]):
        if i == len(sizes):
            yield prefix
            return
        for v in range(sizes[i]):
            yield from rec(i + 1, prefix + (v,))
    yield from rec(0, ())


def unit_base(rank: int, dim: int, value: int) -> Base:
    """The base with ``value`` along ``dim`` and 0 elsewhere."""
    return tuple(value if d == dim else 0 for d in range(rank))


def identity_1d(size: int, name: str, dim: int, rank: int = 1) -> LinearLayout:
    """Input ``name`` of ``size`` indices along output dim ``dim`` of a rank-``rank`` tile
    (the other dims of size 1)."""
    shape = tuple(size if d == dim else 1 for d in range(rank))
    return LinearLayout(((name, tuple(unit_base(rank, dim, 1 << k) for k in range(log2(size)))),), shape)


def zeros_1d(size: int, name: str, rank: int = 1) -> LinearLayout:
    """Input ``name`` of ``size`` indices that all reach the same element (a broadcast)."""
    return LinearLayout(((name, tuple(unit_base(rank, 0, 0) for _ in range(log2(size)))),), (1,) * rank)
