"""Tile-shaped ops: constants, iota, broadcast, reshape, permute, cat, extract, insert,
pack and unpack.

Relabelling ops move no data (TileAS gave their results the relabelled layout); the ops
that move elements between arbitrary positions go through shared memory
(``spill_tile``/``fill_tile``, which the reductions, scans and matrix multiplies use too).
Reductions and scans are in ``emit_reduce``.
"""
from __future__ import annotations

import struct
from typing import Callable, Optional, Sequence

from llvmlite import ir

from ..ir import attrs as A
from ..ir import types as T
from ..ir.core import Operation
from ..layout.linear import REG, LinearLayout
from ..layout.shared import shared_identity
from ..lower.layout_rules import cat_in_registers, exchange_layout, exchange_vector
from ..lower.software_pipeline import pipelined_op
from ..lower.tiles import element_bytes
from ..tile import ops_core as CO
from . import intrinsics as X
from .nvvm import I32, KernelEmitter, emits, runtime_mask
from .values import TileVal, from_smem, llvm_type, smem_type, to_smem

I8 = ir.IntType(8)


# -- constants ---------------------------------------------------------------------------
def decode_elements(attr: A.DenseElementsAttr, t: T.TileType) -> list:
    """Python values (ints, or float values) of every element, row-major."""
    e = t.element
    n = t.num_elements
    data = attr.data
    assert isinstance(data, bytes)
    if e.bitwidth == 1:
        return A.i1_elements(data, n)
    width = max(1, e.bitwidth // 8) if e.name != "tf32" else 4
    fmt = {"f16": "<e", "f32": "<f", "tf32": "<f", "f64": "<d"}.get(e.name)
    items = [data[i:i + width] for i in range(0, len(data), width)]
    if fmt:
        vals = [struct.unpack(fmt, x)[0] for x in items]
    elif e.name == "bf16":
        vals = [struct.unpack("<f", b"\0\0" + x)[0] for x in items]
    else:
        vals = [int.from_bytes(x, "little", signed=e.is_int) for x in items]
    return vals * n if len(vals) == 1 else vals


def llvm_constant(t: ir.Type, v) -> ir.Constant:
    if isinstance(t, ir.IntType):
        return ir.Constant(t, int(v) & ((1 << t.width) - 1))
    return ir.Constant(t, float(v))


@emits(CO.ConstantOp)
def _constant(em: KernelEmitter, op: Operation) -> None:
    t = op.result.type
    layout = em.result_layout(op.result)
    ty = llvm_type(t)
    vals = decode_elements(op.value, t)
    if all(v == vals[0] or (v != v and vals[0] != vals[0]) for v in vals):
        c = llvm_constant(ty, vals[0])
        em.put(op.result, TileVal(layout, [c] * layout.size(REG)))
        return
    # a non-uniform constant: read it from a constant array by coordinate
    arr_t = ir.ArrayType(ty if not isinstance(ty, ir.IntType) or ty.width > 1 else ir.IntType(8), len(vals))
    g = ir.GlobalVariable(em.module, arr_t, name=f"tile_constant_{len(em.module.global_values)}", addrspace=1)
    g.global_constant = True
    g.linkage = "internal"
    g.initializer = ir.Constant(arr_t, [llvm_constant(arr_t.element, v) for v in vals])
    regs = []
    for reg in range(layout.size(REG)):
        idx = em.flat_index(em.coords(layout, reg), layout.shape)
        p = em.b.gep(g, [ir.Constant(I32, 0), idx], source_etype=arr_t)
        v = em.b.load(p, typ=arr_t.element)
        regs.append(em.b.trunc(v, ty) if v.type != ty else v)
    em.put(op.result, TileVal(layout, regs))


@emits(CO.IotaOp)
def _iota(em: KernelEmitter, op: Operation) -> None:
    layout = em.result_layout(op.result)
    ty = llvm_type(op.result.type)
    regs = []
    for reg in range(layout.size(REG)):
        c = em.coords(layout, reg)[0]
        regs.append(c if ty.width == 32 else (em.b.zext(c, ty) if ty.width > 32 else em.b.trunc(c, ty)))
    em.put(op.result, TileVal(layout, regs))


# -- relabelling ----------------------------------------------------------------------------
@emits(CO.ReshapeOp, CO.PermuteOp)
def _relabel(em: KernelEmitter, op: Operation) -> None:
    if pipelined_op(em.tas, op) is not None:       # B of a pipelined K loop: read from its stage
        em.put(op.result, None)
        return
    src = em.tile(op, 0)
    em.put(op.result, TileVal(em.result_layout(op.result), src.regs))


@emits(CO.BroadcastOp)
def _broadcast(em: KernelEmitter, op: Operation) -> None:
    src = em.tile(op, 0)
    out = em.result_layout(op.result)
    # the source holds the output's registers with the broadcast dims squashed:
    # output register bit i is source bit j when its base survives the squash
    dims = [d for d, (a, b) in enumerate(zip(op.source.type.shape, op.result.type.shape)) if a != b]
    bit_map: list[Optional[int]] = []
    j = 0
    for base in out.bases(REG):
        if any(c for d, c in enumerate(base) if d not in dims):
            bit_map.append(j)
            j += 1
        else:
            bit_map.append(None)
    regs = []
    for r in range(out.size(REG)):
        s = sum(1 << bit for i, bit in enumerate(bit_map) if bit is not None and r >> i & 1)
        regs.append(src.regs[s] if src.layout.rank else src.regs[0])
    em.put(op.result, TileVal(out, regs))


# -- through shared memory -------------------------------------------------------------------
def exchange(em: KernelEmitter, tv: TileVal, dst: LinearLayout, esize: int) -> TileVal:
    """``tv`` redistributed to ``dst`` through shared memory (``KernelEmitter.convert``):
    every thread writes what it holds, then reads what ``dst`` says it holds, in the shared
    layout ``layout_rules.exchange_layout`` chose: row-major (addresses from coordinates),
    or a swizzle without bank conflicts (addresses from its offsets, each side's vectors
    moved by one access)."""
    b = em.b
    store_ty = smem_type(tv.regs[0].type)
    shared = exchange_layout(tv.layout, dst, esize)
    row_major = shared == shared_identity(dst.shape)
    X.barrier(b)
    if row_major:
        for reg in em.unique_regs(tv.layout):
            slot = em.smem_slot(em.flat_index(em.coords(tv.layout, reg), tv.layout.shape), esize)
            b.store(to_smem(b, tv.regs[reg], store_ty), slot)
    else:
        keep = set(em.unique_regs(tv.layout))
        for reg, slot, v in _swizzled_slots(em, tv.layout, shared, esize, store_ty):
            if reg in keep:
                vals = [to_smem(b, tv.regs[reg + k], store_ty) for k in range(v)]
                _vector_store(b, vals, slot, v * esize)
    X.barrier(b)
    regs: list[ir.Value] = []
    if row_major:
        for reg in range(dst.size(REG)):
            slot = em.smem_slot(em.flat_index(em.coords(dst, reg), dst.shape), esize)
            regs.append(from_smem(b, b.load(slot, typ=store_ty), tv.regs[0].type))
    else:
        for _, slot, v in _swizzled_slots(em, dst, shared, esize, store_ty):
            regs += [from_smem(b, x, tv.regs[0].type) for x in _vector_load(b, slot, store_ty, v, v * esize)]
    return TileVal(dst, regs)


def _swizzled_slots(em: KernelEmitter, layout: LinearLayout, shared: LinearLayout, esize: int, ty: ir.Type):
    """(first register, address, registers) of each vector access of ``layout``'s registers
    to ``shared``: the registers of a vector are consecutive offsets, the lanes' and warps'
    part of the offset never sets the bits below the vector (``exchange_vector``)."""
    offsets = layout.invert_and_compose(shared)
    v = exchange_vector(layout, shared, esize)
    runtime = em.runtime_coords(offsets)[0]
    mask = runtime_mask(offsets, 0)
    for reg in range(0, layout.size(REG), v):
        (const,) = offsets.apply(reg=reg)
        # the bits lanes and warps may set are XORed in (a few distinct values, shared by
        # registers); the others added, which folds into the access's immediate offset
        index = runtime if const & mask == 0 else em.b.xor(runtime, ir.Constant(I32, const & mask))
        if const & ~mask:
            index = em.b.add(index, ir.Constant(I32, const & ~mask), flags=["nuw", "nsw"])
        yield reg, em.smem_slot(index, esize), v


def _vector_store(b: ir.IRBuilder, vals: list[ir.Value], slot: ir.Value, align: int) -> None:
    if len(vals) == 1:
        b.store(vals[0], slot)
        return
    vec = ir.Constant(ir.VectorType(vals[0].type, len(vals)), ir.Undefined)
    for k, x in enumerate(vals):
        vec = b.insert_element(vec, x, ir.Constant(I32, k))
    b.store(vec, slot, align=align)


def _vector_load(b: ir.IRBuilder, slot: ir.Value, ty: ir.Type, n: int, align: int) -> list[ir.Value]:
    if n == 1:
        return [b.load(slot, typ=ty)]
    vec = b.load(slot, typ=ir.VectorType(ty, n), align=align)
    return [b.extract_element(vec, ir.Constant(I32, k)) for k in range(n)]


def spill_tile(em: KernelEmitter, tv: TileVal, ty: T.Type, offset: int = 0,
           place: Optional[Callable[[list[ir.Value]], ir.Value]] = None) -> None:
    """Every thread writes the (unique) elements it holds at their row-major index."""
    esize = element_bytes(ty)
    st = smem_type(tv.regs[0].type)
    for reg in em.unique_regs(tv.layout):
        c = em.coords(tv.layout, reg)
        idx = place(c) if place else em.flat_index(c, tv.layout.shape)
        em.b.store(to_smem(em.b, tv.regs[reg], st), em.smem_slot(idx, esize, offset))


def fill_tile(em: KernelEmitter, layout: LinearLayout, ty: T.Type, elem_type: ir.Type, offset: int = 0,
          place: Optional[Callable[[list[ir.Value]], ir.Value]] = None) -> list[ir.Value]:
    esize = element_bytes(ty)
    st = smem_type(elem_type)
    regs = []
    for reg in range(layout.size(REG)):
        c = em.coords(layout, reg)
        idx = place(c) if place else em.flat_index(c, layout.shape)
        regs.append(from_smem(em.b, em.b.load(em.smem_slot(idx, esize, offset), typ=st), elem_type))
    return regs


def lookup_by_coord(em: KernelEmitter, tv: TileVal, ty: T.Type, layout: LinearLayout,
                    dims: Sequence[int]) -> list[ir.Value]:
    """For each register of ``layout``: the element of ``tv`` whose coordinates are
    that register's coordinates along ``dims`` (e.g. gather indices per row)."""
    X.barrier(em.b)
    spill_tile(em, tv, ty)
    X.barrier(em.b)
    return fill_tile(em, layout, ty, tv.regs[0].type,
                 place=lambda c: em.flat_index([c[d] for d in dims], tv.layout.shape))


def redistribute_owned(em: KernelEmitter, layout: LinearLayout, regs: list[ir.Value], ty: T.Type) -> list[ir.Value]:
    """Copies of an element take the value computed by its owner thread/register."""
    X.barrier(em.b)
    owner = em.owner_predicate(layout)
    esize = element_bytes(ty)
    st = smem_type(regs[0].type)
    for reg in em.unique_regs(layout):
        idx = em.flat_index(em.coords(layout, reg), layout.shape)
        slot = em.smem_slot(idx, esize)
        if owner is None:
            em.b.store(to_smem(em.b, regs[reg], st), slot)
        else:
            with em.b.if_then(owner):
                em.b.store(to_smem(em.b, regs[reg], st), slot)
    X.barrier(em.b)
    return fill_tile(em, layout, ty, regs[0].type)


@emits(CO.CatOp)
def _cat(em: KernelEmitter, op: Operation) -> None:
    lhs, rhs = em.tile(op, 0), em.tile(op, 1)
    out = em.result_layout(op.result)
    if cat_in_registers(op):
        em.put(op.result, TileVal(out, lhs.regs + rhs.regs))
        return
    shape = op.result.type.shape
    d = op.dim
    shift = op.lhs.type.shape[d]
    X.barrier(em.b)
    spill_tile(em, lhs, op.lhs.type, place=lambda c: em.flat_index(c, shape))
    spill_tile(em, rhs, op.rhs.type, place=lambda c: em.flat_index(
        [em.b.add(x, ir.Constant(I32, shift)) if k == d else x for k, x in enumerate(c)], shape))
    X.barrier(em.b)
    em.put(op.result, TileVal(out, fill_tile(em, out, op.result.type, lhs.regs[0].type)))


def _slice_origin(em: KernelEmitter, op: Operation, first_index: int, part_shape: Sequence[int]) -> list[ir.Value]:
    b = em.b
    out = []
    for k, s in enumerate(part_shape):
        idx = em.scalar(op, first_index + k)
        idx = b.trunc(idx, I32) if idx.type.width > 32 else (b.zext(idx, I32) if idx.type.width < 32 else idx)
        out.append(b.mul(idx, ir.Constant(I32, s)))
    return out


@emits(CO.ExtractOp)
def _extract(em: KernelEmitter, op: Operation) -> None:
    out = em.result_layout(op.result)
    picks = em.tas.picks.get(op)
    if picks is not None:
        source = em.tas.pick_sources.get(op)
        src = em.tile(op, 0) if source is None else em.values[source]
        em.put(op.result, TileVal(out, [src.regs[j] for j in picks]))
        return
    src = em.tile(op, 0)
    part = op.result.type.shape
    origin = _slice_origin(em, op, 1, part)
    X.barrier(em.b)
    spill_tile(em, src, op.source.type)
    X.barrier(em.b)
    shape = op.source.type.shape
    regs = fill_tile(em, out, op.result.type, src.regs[0].type,
                 place=lambda c: em.flat_index([em.b.add(o, x) for o, x in zip(origin, c)], shape))
    em.put(op.result, TileVal(out, regs))


@emits(CO.InsertOp)
def _insert(em: KernelEmitter, op: Operation) -> None:
    src, dst = em.tile(op, 0), em.tile(op, 1)
    out = em.result_layout(op.result)
    shape = op.result.type.shape
    origin = _slice_origin(em, op, 2, op.source.type.shape)
    X.barrier(em.b)
    spill_tile(em, dst, op.destination.type)
    X.barrier(em.b)
    spill_tile(em, src, op.source.type,
           place=lambda c: em.flat_index([em.b.add(o, x) for o, x in zip(origin, c)], shape))
    X.barrier(em.b)
    em.put(op.result, TileVal(out, fill_tile(em, out, op.result.type, dst.regs[0].type)))


@emits(CO.PackOp, CO.UnpackOp)
def _repack(em: KernelEmitter, op: Operation) -> None:
    """Reinterpret a rank-1 tile as bytes (pack) or bytes as elements (unpack),
    through shared memory in the tile's byte order.  4-bit elements (one a byte in
    shared memory, in the low nibble) pair up as spec 5.2.2 packs them: element ``2j``
    in the low nibble of byte ``j``, ``2j + 1`` in the high one."""
    src_t, dst_t = op.source.type, op.result.type
    src = em.tile(op, 0)
    out = em.result_layout(op.result)
    X.barrier(em.b)
    spill_tile(em, src, src_t)
    X.barrier(em.b)
    if T.element_type(src_t).bitwidth == 4:
        regs = [_packed_byte(em, em.flat_index(em.coords(out, reg), out.shape)) for reg in range(out.size(REG))]
    elif T.element_type(dst_t).bitwidth == 4:
        regs = [_unpacked_nibble(em, em.flat_index(em.coords(out, reg), out.shape)) for reg in range(out.size(REG))]
    else:
        regs = fill_tile(em, out, dst_t, llvm_type(dst_t))
    em.put(op.result, TileVal(out, regs))


def _packed_byte(em: KernelEmitter, j: ir.Value) -> ir.Value:
    """Byte ``j`` of 4-bit elements spilled one a byte."""
    b = em.b
    two_j = b.shl(j, ir.Constant(I32, 1))
    lo = b.load(em.smem_slot(two_j, 1), typ=I8)
    hi = b.load(em.smem_slot(b.or_(two_j, ir.Constant(I32, 1)), 1), typ=I8)
    return b.or_(b.and_(lo, ir.Constant(I8, 0xF)), b.shl(hi, ir.Constant(I8, 4)))


def _unpacked_nibble(em: KernelEmitter, i: ir.Value) -> ir.Value:
    """4-bit element ``i`` (in the low bits of an i8) of spilled bytes."""
    b = em.b
    byte = b.load(em.smem_slot(b.lshr(i, ir.Constant(I32, 1)), 1), typ=I8)
    shift = b.trunc(b.shl(b.and_(i, ir.Constant(I32, 1)), ir.Constant(I32, 2)), I8)
    return b.and_(b.lshr(byte, shift), ir.Constant(I8, 0xF))
