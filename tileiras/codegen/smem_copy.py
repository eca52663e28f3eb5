"""Copies of tiles between registers and shared memory: the one place that addresses a
tile's elements in shared memory.

A tile in shared memory is a ``SharedTile``: a shared layout (offset -> coordinates:
row-major, a bank-conflict-free swizzle, an ``ldmatrix`` operand's swizzle), the element
size, where the buffer starts, and paddings (Triton's padded shared layout: elements
skipped after every so many, as rows of a pitch wider than the row or matrices of a
batch further apart; not linear, so kept beside the layout).  A copy composes the register layout with the inverse
of the shared one (``LinearLayout.invert_and_compose``): the result maps each register of
each lane and warp (and chunk iteration) to its element offset.  The lanes' and warps' part
is computed once per layout (``KernelEmitter.coords``) and each register's constant part
folds into the access's immediate offset; registers at consecutive offsets move in one
access of up to 16 bytes.

A register tile may be a part of the shared one (``origin``: where its first element sits,
a multiple of its shape along each dim, known or computed at run time), as ``cat``,
``extract`` and ``insert`` place their parts; a register layout whose coordinates are
fewer or folded (a lookup by some of the coordinates, a K slice) is composed the same way.

What stays outside: scratch arrays that algorithms index by thread or by position
(reductions' warp partials, sequential scans of a line, the SIMT multiply's inner loop,
sub-byte repacking) address elements with ``KernelEmitter.smem_slot`` directly.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from typing import Optional, Union

from llvmlite import ir

from ..layout.core import dim_name, log2
from ..layout.linear import REG, LinearLayout
from ..layout.shared import Padding, shared_identity
from ..lower.chunks import ITER
from ..lower.exchanges import exchange_vector
from ..record import record
from .nvvm import I32, KernelEmitter, runtime_mask
from .values import TileVal, byte_gep, from_smem, smem_type, to_smem

Coordinate = Union[int, ir.Value]


@record(frozen=True)
class SharedTile:
    """A tile in shared memory: coordinates ``layout.apply(offset=offset)`` are at byte
    ``base + padded(offset) * elem_bytes`` of the CTA's shared memory, where ``padded``
    adds each padding's ``amount`` per whole ``interval`` of the offset."""
    layout: LinearLayout
    elem_bytes: int
    base: int = 0
    paddings: tuple[Padding, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape


def row_major(shape: Sequence[int], elem_bytes: int, base: int = 0, paddings: tuple[Padding, ...] = ()) -> SharedTile:
    return SharedTile(shared_identity(tuple(shape)), elem_bytes, base, paddings)


def store(em: KernelEmitter, tv: TileVal, at: SharedTile, origin: Optional[Sequence[Coordinate]] = None,
          where: Optional[Callable[[int], Union[bool, ir.Value]]] = None,
          placed: Optional[LinearLayout] = None, shift: Optional[ir.Value] = None) -> None:
    """Write the elements ``tv`` holds (each register that is not a copy of a lower one)
    where ``at`` keeps them.  ``where(reg)``: False skips the access that starts at
    register ``reg``, an i1 guards it.  ``placed``: the layout whose coordinates place the
    registers in ``at`` when it is not ``tv``'s (a K slice's, coordinates folded into it).
    ``shift``: ``at`` lies that many bytes further (i32, a multiple of 16: a ring's stage)."""
    b = em.b
    ty = smem_type(tv.regs[0].type)
    skip = tv.layout.broadcast_mask(REG)
    for reg, n, slot in accesses(em, placed or tv.layout, at, origin, shift):
        if reg & skip:
            continue
        guard = True if where is None else where(reg)
        if guard is False:
            continue
        values = [to_smem(b, tv.regs[reg + k], ty) for k in range(n)]
        if guard is True:
            _store(b, values, slot, n * at.elem_bytes)
        else:
            with b.if_then(guard):
                _store(b, values, slot, n * at.elem_bytes)


def load(em: KernelEmitter, layout: LinearLayout, at: SharedTile, elem_type: ir.Type,
         origin: Optional[Sequence[Coordinate]] = None, shift: Optional[ir.Value] = None) -> list[ir.Value]:
    """The registers of ``layout``, read from where ``at`` keeps their elements (``shift``
    bytes further, as ``store``'s)."""
    ty = smem_type(elem_type)
    regs: list[ir.Value] = []
    for _, n, slot in accesses(em, layout, at, origin, shift):
        regs += [from_smem(em.b, v, elem_type) for v in _load(em.b, slot, ty, n, n * at.elem_bytes)]
    return regs


def accesses(em: KernelEmitter, layout: LinearLayout, at: SharedTile,
             origin: Optional[Sequence[Coordinate]] = None, shift: Optional[ir.Value] = None
             ) -> Iterator[tuple[int, int, ir.Value]]:
    """(first register, registers, address) of each access that copies ``layout``'s
    registers to or from ``at`` (``shift`` bytes further, when given), in register order."""
    offsets = element_offsets(layout, at)
    where = _origin_offset(em, at, origin, layout.shape)
    n = copy_vector(layout, at, where)
    thread = None if ITER in offsets.names else _thread_offset(em, layout, at, offsets)
    # a register's known part: an address offset where the coordinates are row-major (it
    # folds there, where adding it to the index would turn into an OR LLVM does not fold),
    # added to the index in a swizzle (there LLVM folds it; measured on transposes)
    in_address = _dim_strides(at.layout) is not None
    for reg in range(0, layout.size(REG), n):
        index, known = _offset(em, offsets, reg, thread, at.paddings, where)
        if known and not in_address:
            index, known = em.b.add(index, ir.Constant(I32, known), flags=["nuw", "nsw"]), 0
        slot = em.smem_slot(index, at.elem_bytes, at.base)
        if shift is not None:
            slot = byte_gep(em.b, slot, shift)
        yield reg, n, slot if not known else byte_gep(em.b, slot, ir.Constant(I32, known * at.elem_bytes))


@lru_cache(maxsize=512)
def element_offsets(layout: LinearLayout, at: SharedTile) -> LinearLayout:
    """(reg, lane, warp...) -> element offset of ``layout``'s registers in ``at`` (before
    padding)."""
    return layout.invert_and_compose(at.layout)


def copy_vector(layout: LinearLayout, at: SharedTile, origin: Optional["_Origin"] = None) -> int:
    """Consecutive registers of ``layout`` that one access moves: as many as an exchange
    through ``at``'s layout moves (``exchanges.exchange_vector``), starting aligned to
    the access, no padding inside."""
    n = exchange_vector(layout, at.layout, at.elem_bytes)
    while n > 1 and (at.base % (n * at.elem_bytes) or (origin is not None and origin.bits & (n - 1))
                     or any(p.interval % n or p.amount % n for p in at.paddings)):
        n //= 2
    return n


@record(frozen=True)
class _Origin:
    """Where a part of the shared tile starts: its element offset (i32 or known), and the
    offset bits it may set."""
    value: Union[int, ir.Value]
    bits: int


def _origin_offset(em: KernelEmitter, at: SharedTile, origin: Optional[Sequence[Coordinate]],
                   part: Sequence[int]) -> Optional[_Origin]:
    """The offset of the part of shape ``part`` at ``origin`` (each coordinate a multiple
    of the part's size along its dim): the inverse shared layout applied to the
    coordinates' bits above the part's.  A dim whose bits step the offset by consecutive
    powers of two (row-major) is one multiplication."""
    if origin is None:
        return None
    inverse = at.layout.invert()
    known, runtime, bits = 0, [], 0
    for d, c in enumerate(origin):
        low = log2(part[d])
        steps = [base[0] for base in inverse.bases(dim_name(d))][low:]
        for step in steps:
            bits |= step
        if isinstance(c, int):
            for k, step in enumerate(steps, low):
                if c >> k & 1:
                    known ^= step
            continue
        if steps and all(s == steps[0] << k for k, s in enumerate(steps)):
            stride = steps[0] >> low
            runtime.append(c if stride == 1 else em.b.mul(c, ir.Constant(I32, stride)))
            continue
        for k, step in enumerate(steps, low):
            bit = em.b.and_(em.b.lshr(c, ir.Constant(I32, k)), ir.Constant(I32, 1))
            runtime.append(em.b.mul(bit, ir.Constant(I32, step)))
    if _overlap(inverse, part):
        raise ValueError("a part's offsets overlap the offsets of where it starts")
    value: Union[int, ir.Value] = known
    for r in runtime:
        value = r if isinstance(value, int) and value == 0 else em.b.add(value if not isinstance(value, int)
                                                                          else ir.Constant(I32, value), r)
    if not isinstance(value, int) and known:
        value = em.b.add(value, ir.Constant(I32, known))
    return _Origin(value, bits)


def _overlap(inverse: LinearLayout, part: Sequence[int]) -> bool:
    """Do the offset bits of the part's coordinates and of its origin's share a bit (then
    adding them would carry)?  Never for row-major tiles."""
    inside = above = 0
    for d, size in enumerate(part):
        for k, base in enumerate(inverse.bases(dim_name(d))):
            if k < log2(size):
                inside |= base[0]
            else:
                above |= base[0]
    return bool(inside & above)


def _thread_offset(em: KernelEmitter, layout: LinearLayout, at: SharedTile, offsets: LinearLayout) -> ir.Value:
    """The lanes' and warps' part of the offsets.  Where the shared layout steps each dim's
    offset by powers of two (row-major), it is the register layout's thread coordinates
    times the strides: the coordinates every other use of the layout shares.  Otherwise
    (swizzles) the composition's own."""
    strides = _dim_strides(at.layout)
    if strides is None:
        return em.runtime_coords(offsets)[0]
    b = em.pb
    acc: Optional[ir.Value] = None
    for c, stride in zip(em.runtime_coords(layout), strides):
        if isinstance(c, ir.Constant) and c.constant == 0:
            continue
        term = c if stride == 1 else b.mul(c, ir.Constant(I32, stride))
        acc = term if acc is None else b.add(acc, term, flags=["nuw", "nsw"])
    return acc if acc is not None else ir.Constant(I32, 0)


@lru_cache(maxsize=256)
def _dim_strides(shared: LinearLayout) -> Optional[tuple[int, ...]]:
    """Per dim, the offset step of one along it, when each dim's coordinate bits step the
    offset by consecutive powers of two (no swizzle); else None."""
    inverse = shared.invert()
    strides = []
    for d in range(shared.rank):
        steps = [base[0] for base in inverse.bases(dim_name(d))]
        if any(s != steps[0] << k for k, s in enumerate(steps)):
            return None
        strides.append(steps[0] if steps else 0)
    return tuple(strides)


def _offset(em: KernelEmitter, offsets: LinearLayout, reg: int, thread: Optional[ir.Value],
            paddings: tuple[Padding, ...], origin: Optional[_Origin]) -> tuple[ir.Value, int]:
    """Element offset of register ``reg`` (padded), as a value and a known part added to
    the address (which folds into the access's immediate offset): the thread's part
    combined with the register's constant as ``KernelEmitter.coords`` combines them, the
    constant's bits that the thread's cannot set added after the padding
    (``Padding.apply`` is additive on disjoint bits)."""
    b = em.b
    if thread is None:          # inside a chunk loop: the iteration's bits too
        return pad(b, _started(b, em.coords(offsets, reg)[0], origin), paddings), 0
    (const,) = offsets.apply(reg=reg)
    mask = runtime_mask(offsets, 0)
    value = thread if not const & mask else b.xor(thread, ir.Constant(I32, const & mask))
    value = _started(b, value, origin)
    if origin is not None and paddings:
        return pad(b, b.add(value, ir.Constant(I32, const & ~mask)), paddings), 0
    return pad(b, value, paddings), padded(const & ~mask, paddings)


def _started(b: ir.IRBuilder, value: ir.Value, origin: Optional[_Origin]) -> ir.Value:
    """``value`` offset by where the part starts."""
    if origin is None or (isinstance(origin.value, int) and origin.value == 0):
        return value
    return b.add(ir.Constant(I32, origin.value) if isinstance(origin.value, int) else origin.value, value)


def padded(offset: int, paddings: tuple[Padding, ...]) -> int:
    return offset + sum(offset // p.interval * p.amount for p in paddings)


def pad(b: ir.IRBuilder, offset: ir.Value, paddings: tuple[Padding, ...]) -> ir.Value:
    """``offset`` (i32) with ``paddings`` applied, as ``padded`` does on known offsets."""
    out = offset
    for p in paddings:
        skip = b.lshr(offset, ir.Constant(I32, log2(p.interval)))
        out = b.add(out, b.mul(skip, ir.Constant(I32, p.amount)))
    return out


def _store(b: ir.IRBuilder, values: list[ir.Value], slot: ir.Value, align: int) -> None:
    if len(values) == 1:
        b.store(values[0], slot)
        return
    vec: ir.Value = ir.Constant(ir.VectorType(values[0].type, len(values)), ir.Undefined)
    for k, x in enumerate(values):
        vec = b.insert_element(vec, x, ir.Constant(I32, k))
    b.store(vec, slot, align=align)


def _load(b: ir.IRBuilder, slot: ir.Value, ty: ir.Type, n: int, align: int) -> list[ir.Value]:
    if n == 1:
        return [b.load(slot, typ=ty)]
    vec = b.load(slot, typ=ir.VectorType(ty, n), align=align)
    return [b.extract_element(vec, ir.Constant(I32, k)) for k in range(n)]
