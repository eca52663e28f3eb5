"""Atomics: read-modify-write and compare-and-swap on pointer tiles, atomic reductions
into a view's tile.

They share the addressing of loads and stores (``emit_memory.Access``) but not their
ownership rule: a copy of an element held by several threads (broadcast bits of the
layout) must update memory once, so only its owner issues the atomic, and the threads
holding copies receive the owner's result (``_share_from_owner``).
"""
from __future__ import annotations

from typing import Iterator, Optional

from llvmlite import ir

from ..ir import types as T
from ..ir.core import Operation
from ..tile import ops_memory as MEM
from ..tile.enums import AtomicRMWMode, MemoryOrderingSemantics, MemoryScope
from . import intrinsics as X
from .emit_memory import Access, barrier_if_ordered, element_bits, gather_indices, scalar_indices
from .nvvm import KernelEmitter, emits
from .values import TiledViewVal, TileVal, llvm_type


def _atom_type(mode: AtomicRMWMode, ty: ir.Type) -> tuple[str, str]:
    bits = element_bits(ty)
    is_float = not isinstance(ty, ir.IntType)
    if mode == AtomicRMWMode.ADDF or (mode == AtomicRMWMode.ADD and is_float):
        name = {16: "noftz.f16" if isinstance(ty, ir.HalfType) else "noftz.bf16", 32: "f32", 64: "f64"}[bits]
        return "add", name
    if mode == AtomicRMWMode.ADD:
        return "add", f"u{bits}"
    if mode in (AtomicRMWMode.AND, AtomicRMWMode.OR, AtomicRMWMode.XOR):
        return mode.keyword, f"b{bits}"
    if mode == AtomicRMWMode.XCHG:
        return "exch", f"b{bits}"
    if mode in (AtomicRMWMode.MAX, AtomicRMWMode.MIN):
        return mode.keyword, (f"f{bits}" if is_float else f"s{bits}")
    return mode.keyword[1:], f"u{bits}"  # umax/umin


def _atom_qualifiers(op: Operation) -> str:
    sem = op.attributes.get("memory_ordering_semantics", MemoryOrderingSemantics.RELAXED)
    scope = {MemoryScope.TL_BLK: ".cta", MemoryScope.DEVICE: ".gpu", MemoryScope.SYS: ".sys"}[
        op.attributes.get("memory_scope", MemoryScope.DEVICE)]
    name = {MemoryOrderingSemantics.WEAK: "relaxed", MemoryOrderingSemantics.RELAXED: "relaxed",
            MemoryOrderingSemantics.ACQUIRE: "acquire", MemoryOrderingSemantics.RELEASE: "release",
            MemoryOrderingSemantics.ACQ_REL: "acq_rel"}[sem]
    return f".{name}{scope}"


def _atomic(em: KernelEmitter, inst: str, ty: ir.Type, address: ir.Value, args: list[ir.Value],
            pred: ir.Value, offset: int = 0) -> ir.Value:
    b = em.b
    if str(ty) == "bfloat" or isinstance(ty, ir.HalfType):  # 16-bit floats travel as b16
        raw = _atomic(em, inst, ir.IntType(16), address, [b.bitcast(a, ir.IntType(16)) for a in args], pred,
                      offset)
        return b.bitcast(raw, ty)
    letter, _ = X.reg_class(ty)
    ins = ", ".join(f"${i + 3}" for i in range(len(args)))
    where = f"[$1+{offset}]" if offset else "[$1]"
    text = f"mov.b{element_bits(ty)} $0, 0; @$2 {inst} $0, {where}, {ins};"
    cons = f"={letter},l,b," + ",".join(letter for _ in args) + ",~{memory}"
    return X.asm(b, ty, text, cons, [address, pred, *args], side_effect=True)


def _share_from_owner(em: KernelEmitter, layout, regs: list[ir.Value], ty: T.Type) -> list[ir.Value]:
    """Threads holding copies get the value their element's owner computed."""
    if em.owner_predicate(layout) is None and not layout.broadcast_mask("reg"):
        return regs
    from .emit_shape import redistribute_owned  # noqa: PLC0415
    return redistribute_owned(em, layout, regs, ty)


def _issuing(em: KernelEmitter, ptrs: TileVal, mask: Optional[TileVal]) -> Iterator[tuple[int, ir.Value]]:
    """Each register with whether this thread issues its atomic: in the mask, the owner of
    its element, and not a repeat of an earlier register (formed as each is issued)."""
    owner = em.owner_predicate(ptrs.layout)
    unique = set(em.unique_regs(ptrs.layout))
    for r in range(len(ptrs.regs)):
        m = mask.regs[r] if mask else ir.Constant(ir.IntType(1), 1)
        if owner is not None:
            m = em.b.and_(m, owner)
        if r not in unique:
            m = ir.Constant(ir.IntType(1), 0)
        yield r, m


def _put_results(em: KernelEmitter, op: Operation, ptrs: TileVal, regs: list[ir.Value]) -> None:
    """The old values (shared with the threads holding copies) and the token."""
    em.put(op.results[0], TileVal(ptrs.layout, _share_from_owner(em, ptrs.layout, regs, op.results[0].type)))
    em.put(op.results[1], None)


@emits(MEM.AtomicRMWTkoOp)
def _atomic_rmw(em: KernelEmitter, op: Operation) -> None:
    barrier_if_ordered(em, op)
    ptrs, args = em.tile(op, 0), em.tile(op, 1)
    ty = llvm_type(op.results[0].type)
    name, suffix = _atom_type(op.mode, ty)
    inst = f"atom{_atom_qualifiers(op)}.global.{name}.{suffix}"
    regs = [_atomic(em, inst, ty, ptrs.regs[r], [args.regs[r]], m)
            for r, m in _issuing(em, ptrs, em.tile(op, 2) if op.segments[2] else None)]
    _put_results(em, op, ptrs, regs)


@emits(MEM.AtomicCASTkoOp)
def _atomic_cas(em: KernelEmitter, op: Operation) -> None:
    barrier_if_ordered(em, op)
    ptrs, cmp, val = em.tile(op, 0), em.tile(op, 1), em.tile(op, 2)
    ty = llvm_type(op.results[0].type)
    inst = f"atom{_atom_qualifiers(op)}.global.cas.b{element_bits(ty)}"
    regs = []
    for r, m in _issuing(em, ptrs, em.tile(op, 3) if op.segments[3] else None):
        c, v = cmp.regs[r], val.regs[r]
        if not isinstance(ty, ir.IntType):
            it = ir.IntType(element_bits(ty))
            old = _atomic(em, inst, it, ptrs.regs[r], [em.b.bitcast(c, it), em.b.bitcast(v, it)], m)
            regs.append(em.b.bitcast(old, ty))
        else:
            regs.append(_atomic(em, inst, ty, ptrs.regs[r], [c, v], m))
    _put_results(em, op, ptrs, regs)


@emits(MEM.AtomicRedViewTkoOp)
def _atomic_red_view(em: KernelEmitter, op: Operation) -> None:
    view = em.values[op.view]
    assert isinstance(view, TiledViewVal)
    value_pos = 1 + len(op.index)
    tile = em.tile(op, value_pos)
    if op in em.tas.tma:            # its barrier ahead of the staging orders it (``emit_tma_store``)
        from .emit_tma import emit_tma_store

        emit_tma_store(em, op, scalar_indices(em, op.index), tile)
        em.put(op.results[0], None)
        return
    barrier_if_ordered(em, op)
    layout = tile.layout
    indices = scalar_indices(em, op.index)
    gather = gather_indices(em, op, view, layout, op.index)
    # measured: from the tile origin helps atomic reductions, not loads and stores (their
    # addresses are computed in their branch from a fresh %tid.x, see tile_in_range)
    acc = Access(em, view, layout, indices, gather, from_tile_origin=True)
    ty = llvm_type(op.value.type)
    name, suffix = _atom_type(op.mode, ty)
    inst = f"atom{_atom_qualifiers(op)}.global.{name}.{suffix}"
    owner = em.owner_predicate(layout)
    for reg in em.unique_regs(layout):
        m = acc.masks[reg] if owner is None else em.b.and_(acc.masks[reg], owner)
        _atomic(em, inst, ty, acc.addresses[reg], [tile.regs[reg]], m, acc.offsets[reg])
    em.put(op.results[0], None)
