"""Loads and stores of 4-bit elements (f4E2M1FN) through views.

Memory holds two elements a byte, element ``2i`` in the low nibble (spec 5.2.2); registers
hold one element each, in the low bits of an i8.  Element offset ``o`` (the usual
sum of coordinate x stride, in elements) lives in byte ``o >> 1`` at bit ``4 * (o & 1)``.

* Loads read the byte (``ld.b8``, predicated per element) and shift the nibble down; when a
  thread holds both elements of a byte (the layout's register bits include bit 0 of a
  unit-stride dimension, and the first element's offset is even at run time) one load
  serves both.
* Stores must not lose the other nibble of a byte, which another thread may be writing at
  the same time.  When this thread holds both elements of the byte and both are in bounds it
  stores the whole byte (``st.b8``, as NVIDIA's tileiras does: one thread owns a pair) when
  the pair starts a byte (odd strides elsewhere can break that at run time).
  Otherwise each element goes through ``atom.and`` (clear) + ``atom.or`` (set) on its
  aligned 32-bit word: and/or of disjoint bits commute, so concurrent writers of the other
  nibbles of the word, plain or atomic, are kept.
* The spec (5.2.2) makes a 4-bit view's unit-stride dims even in length, so its rows start
  on bytes and a pair starting at an even coordinate is one byte, in bounds or not as a
  whole.  NVIDIA's tileiras relies on that (one bounds check, one ``ld.b8``/``st.b8`` a pair,
  no run-time parity test); so do we, unless an extent or stride known at compile time is
  odd (outside the spec), where the run-time checks and the atomic path above stay.
"""
from __future__ import annotations

from typing import Optional, Sequence

from llvmlite import ir

from ..ir import types as T
from ..layout.linear import LinearLayout
from ..record import record
from . import intrinsics as X
from .nvvm import I64, KernelEmitter, runtime_mask
from .values import TiledViewVal

I1, I8, I32 = ir.IntType(1), ir.IntType(8), ir.IntType(32)


def is_subbyte(t: T.Type) -> bool:
    e = T.element_type(t) if isinstance(t, T.TileType) else t
    return isinstance(e, T.ScalarType) and e.bitwidth == 4


@record
class NibbleAccess:
    """Per register: element offset (i64, in elements from the tensor base), in-bounds
    predicate, and the register holding the other element of the same byte (None when
    another thread holds it or the pairing is not known at compile time)."""

    view: TiledViewVal
    offsets: list[ir.Value]
    masks: list[ir.Value]
    partner: list[Optional[int]]
    #: pairs are whole bytes, in bounds together (see the module docstring)
    whole: bool = False


def _i64(em: KernelEmitter, v) -> ir.Value:
    if isinstance(v, int):
        return ir.Constant(I64, v)
    return em.b.sext(v, I64) if v.type.width < 64 else v


def nibble_access(em: KernelEmitter, view: TiledViewVal, layout: LinearLayout, indices: Sequence,
                  gather: Optional[list[ir.Value]] = None) -> NibbleAccess:
    from .emit_memory import tile_starts  # noqa: PLC0415  (emit_memory imports this module)
    b = em.b
    tv = view.tensor
    rank = len(view.tile_shape)
    starts = tile_starts(em, view, indices)
    offsets, masks = [], []
    for reg in range(layout.size("reg")):
        c = em.coords(layout, reg)
        ok: ir.Value = ir.Constant(I1, 1)
        offset: ir.Value = ir.Constant(I64, 0)
        for k in range(rank):
            d = view.dim_map[k]
            t = _i64(em, gather[reg]) if view.sparse_dim == k else b.add(starts[k], b.zext(c[k], I64))
            ok = b.and_(ok, b.icmp_unsigned("<", t, _i64(em, tv.shape[d])))
            offset = b.add(offset, b.mul(t, _i64(em, tv.strides[d])))
        offsets.append(offset)
        masks.append(ok)
    partner, dim = _partners(view, layout)
    return NibbleAccess(view, offsets, masks, partner, dim is not None and _byte_aligned(view, dim))


def _byte_aligned(view: TiledViewVal, dim: int) -> bool:
    """Rows along tile dim ``dim`` (unit stride) start on bytes and hold whole bytes, unless an
    extent or stride known at compile time says otherwise."""
    tv = view.tensor
    d = view.dim_map[dim]
    odd = [x for k, x in enumerate(tv.strides) if k != d] + [tv.shape[d]]
    return not any(isinstance(x, int) and x % 2 for x in odd)


def _partners(view: TiledViewVal, layout: LinearLayout) -> tuple[list[Optional[int]], Optional[int]]:
    """For each register, the register of the same thread whose element shares its byte,
    when that is known at compile time: a register basis moves by one along a tile dim
    mapped to a tensor dim of constant stride 1, whose tile start is even (tile sizes and
    steps even, no gather along it), and the register's coordinate there is even.  Also
    that tile dim (None when there are no pairs)."""
    n = layout.size("reg")
    out: list[Optional[int]] = [None] * n
    for j, basis in enumerate(layout.bases("reg")):
        moved = [k for k, v in enumerate(basis) if v]
        if len(moved) != 1 or basis[moved[0]] != 1:
            continue
        k = moved[0]
        step = view.traversal[k] if view.traversal else view.tile_shape[k]
        if view.sparse_dim is not None or view.tensor.strides[view.dim_map[k]] != 1 or step % 2 \
                or runtime_mask(layout, k) & 1:
            continue
        for reg in range(n):
            if reg & (1 << j) == 0 and layout.apply(reg=reg)[k] % 2 == 0:
                out[reg], out[reg | (1 << j)] = reg | (1 << j), reg
        return out, k
    return out, None


def padding_bits(padding: Optional[T.PaddingValue]) -> int:
    """The f4E2M1FN bit pattern of a view's padding value (as the interpreter converts it)."""
    import ml_dtypes
    import numpy as np

    value = {None: 0.0, T.PaddingValue.ZERO: 0.0, T.PaddingValue.NEG_ZERO: -0.0, T.PaddingValue.NAN: np.nan,
             T.PaddingValue.POS_INF: np.inf, T.PaddingValue.NEG_INF: -np.inf}[padding]
    return int(np.array(value).astype(ml_dtypes.float4_e2m1fn).view(np.uint8)) & 0xF


def _byte_address(em: KernelEmitter, acc: NibbleAccess, reg: int) -> ir.Value:
    b = em.b
    return b.gep(acc.view.tensor.base, [b.ashr(acc.offsets[reg], ir.Constant(I64, 1))], source_etype=I8)


def _shift(em: KernelEmitter, acc: NibbleAccess, reg: int) -> ir.Value:
    b = em.b
    odd = b.trunc(b.and_(acc.offsets[reg], ir.Constant(I64, 1)), I32)
    return b.shl(odd, ir.Constant(I32, 2))


def _is_even(em: KernelEmitter, acc: NibbleAccess, reg: int) -> ir.Value:
    """The element starts its byte (strides of other dims may be odd at run time)."""
    b = em.b
    return b.icmp_unsigned("==", b.and_(acc.offsets[reg], ir.Constant(I64, 1)), ir.Constant(I64, 0))


def _nibble_of(em: KernelEmitter, acc: NibbleAccess, reg: int, byte: ir.Value) -> ir.Value:
    b = em.b
    return b.trunc(b.and_(b.lshr(b.zext(byte, I32), _shift(em, acc, reg)), ir.Constant(I32, 0xF)), I8)


def load_nibbles(em: KernelEmitter, acc: NibbleAccess, padding: int, qualifiers: str) -> list[ir.Value]:
    """Each register's element (i8, low nibble); ``padding`` (4-bit pattern) where masked."""
    b = em.b
    regs: list[Optional[ir.Value]] = [None] * len(acc.offsets)
    pad = ir.Constant(I8, padding)
    for reg in range(len(acc.offsets)):
        if regs[reg] is not None:
            continue
        p = acc.partner[reg]
        byte = X.predicated_load(b, I8, 1, _byte_address(em, acc, reg), acc.masks[reg], [pad], qualifiers)[0]
        if p is not None and p > reg and acc.whole:  # reg's element is the byte's low nibble
            regs[reg] = b.select(acc.masks[reg], b.and_(byte, ir.Constant(I8, 0xF)), pad)
            regs[p] = b.select(acc.masks[p], b.lshr(byte, ir.Constant(I8, 4)), pad)
            continue
        regs[reg] = b.select(acc.masks[reg], _nibble_of(em, acc, reg, byte), pad)
        if p is not None and p > reg:  # the partner's nibble is in the same byte when reg's is even
            even = _is_even(em, acc, reg)
            apart = b.and_(acc.masks[p], b.xor(even, ir.Constant(I1, 1)))
            own = X.predicated_load(b, I8, 1, _byte_address(em, acc, p), apart, [pad], qualifiers)[0]
            shared = b.lshr(byte, ir.Constant(I8, 4))
            nib = b.select(even, shared, _nibble_of(em, acc, p, own))
            regs[p] = b.select(acc.masks[p], nib, pad)
    return regs  # type: ignore[return-value]


def store_nibbles(em: KernelEmitter, acc: NibbleAccess, values: Sequence[ir.Value], regs: Sequence[int],
                  owner: Optional[ir.Value], qualifiers: str) -> None:
    """Store the elements of ``regs`` (those this thread owns) without losing the other
    nibble of any byte."""
    b = em.b
    mine = set(regs)
    done: set[int] = set()
    for reg in regs:
        if reg in done:
            continue
        mask = acc.masks[reg] if owner is None else b.and_(acc.masks[reg], owner)
        p = acc.partner[reg]
        if p is not None and p in mine:
            lo, hi = (reg, p) if p > reg else (p, reg)
            pmask = acc.masks[p] if owner is None else b.and_(acc.masks[p], owner)
            lo_m, hi_m = (mask, pmask) if lo == reg else (pmask, mask)
            byte = b.or_(b.and_(values[lo], ir.Constant(I8, 0xF)), b.shl(values[hi], ir.Constant(I8, 4)))
            done.update((lo, hi))
            if acc.whole:
                X.predicated_store(b, [byte], _byte_address(em, acc, lo), lo_m, qualifiers)
                continue
            both = b.and_(b.and_(lo_m, hi_m), _is_even(em, acc, lo))
            X.predicated_store(b, [byte], _byte_address(em, acc, lo), both, qualifiers)
            lone = b.xor(both, ir.Constant(I1, 1))
            _store_one(em, acc, lo, values[lo], b.and_(lo_m, lone), qualifiers)
            _store_one(em, acc, hi, values[hi], b.and_(hi_m, lone), qualifiers)
            continue
        _store_one(em, acc, reg, values[reg], mask, qualifiers)
        done.add(reg)


def _store_one(em: KernelEmitter, acc: NibbleAccess, reg: int, value: ir.Value, mask: ir.Value,
               qualifiers: str) -> None:
    """One element through atomics on its aligned 32-bit word."""
    b = em.b
    base = b.ptrtoint(acc.view.tensor.base, I64)
    byte = b.add(base, b.ashr(acc.offsets[reg], ir.Constant(I64, 1)))
    word = b.and_(byte, ir.Constant(I64, ~3 & (2**64 - 1)))
    bit = b.shl(b.trunc(b.and_(byte, ir.Constant(I64, 3)), I32), ir.Constant(I32, 3))
    shift = b.add(bit, _shift(em, acc, reg))
    X.predicated_nibble_store(b, b.inttoptr(word, acc.view.tensor.base.type), shift, b.zext(value, I32),
                              mask, qualifiers)
