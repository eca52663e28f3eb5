"""Tile-shaped ops: constants, iota, broadcast, reshape, permute, cat, extract, insert,
pack and unpack.

Relabelling ops move no data (TileAS gave their results the relabelled layout); the ops
that move elements between arbitrary positions go through shared memory
(``smem_copy``, the one register <-> shared-memory copy).
Reductions and scans are in ``emit_reduce``.
"""
from __future__ import annotations

import struct
from typing import Optional, Sequence

from llvmlite import ir

from ..ir import attrs as A
from ..ir import types as T
from ..ir.core import Operation
from ..layout.linear import LANE, REG, LinearLayout
from ..lower.exchanges import exchange_layout
from ..lower.layout_rules import cat_in_registers, extract_by_shuffle
from ..lower.software_pipeline import pipelined_op
from ..lower.tiles import element_bytes
from ..tile import ops_core as CO
from . import intrinsics as X
from . import smem_copy
from .emit_reduce import shuffle
from .nvvm import I32, KernelEmitter, emits, xor_bits
from .smem_copy import SharedTile
from .values import TileVal, llvm_type

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
    layout ``exchanges.exchange_layout`` chose (row-major, or a swizzle without bank
    conflicts)."""
    at = SharedTile(exchange_layout(tv.layout, dst, esize), esize)
    X.barrier(em.b)
    smem_copy.store(em, tv, at)
    X.barrier(em.b)
    # each register is read where it is first used (order.py), not all of them here: a
    # broadcast row converted for a whole tile (layer norm's weights) would otherwise be
    # live beside the tile
    with em.sinking(lambda inst: isinstance(inst, ir.LoadInstr)):
        return TileVal(dst, smem_copy.load(em, dst, at, tv.regs[0].type))


def lookup_by_coord(em: KernelEmitter, tv: TileVal, ty: T.Type, layout: LinearLayout,
                    dims: Sequence[int]) -> list[ir.Value]:
    """For each register of ``layout``: the element of ``tv`` whose coordinates are
    that register's coordinates along ``dims`` (e.g. gather indices per row)."""
    at = smem_copy.row_major(tv.layout.shape, element_bytes(ty))
    X.barrier(em.b)
    smem_copy.store(em, tv, at)
    X.barrier(em.b)
    return smem_copy.load(em, layout.sublayout(layout.names, dims), at, tv.regs[0].type)


def redistribute_owned(em: KernelEmitter, layout: LinearLayout, regs: list[ir.Value], ty: T.Type) -> list[ir.Value]:
    """Copies of an element take the value computed by its owner thread/register."""
    at = smem_copy.row_major(layout.shape, element_bytes(ty))
    owner = em.owner_predicate(layout)
    X.barrier(em.b)
    smem_copy.store(em, TileVal(layout, regs), at, where=None if owner is None else lambda _: owner)
    X.barrier(em.b)
    return smem_copy.load(em, layout, at, regs[0].type)


@emits(CO.CatOp)
def _cat(em: KernelEmitter, op: Operation) -> None:
    lhs, rhs = em.tile(op, 0), em.tile(op, 1)
    out = em.result_layout(op.result)
    if cat_in_registers(op):
        em.put(op.result, TileVal(out, lhs.regs + rhs.regs))
        return
    d = op.dim
    at = smem_copy.row_major(op.result.type.shape, element_bytes(op.result.type))
    X.barrier(em.b)
    smem_copy.store(em, lhs, at)
    smem_copy.store(em, rhs, at, origin=[op.lhs.type.shape[d] if k == d else 0 for k in range(len(out.shape))])
    X.barrier(em.b)
    em.put(op.result, TileVal(out, smem_copy.load(em, out, at, lhs.regs[0].type)))


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
    origin = _slice_origin(em, op, 1, op.result.type.shape)
    if extract_by_shuffle(src.layout, op.source.type):
        regs = [_shuffled(em, src, [em.b.add(o, c) for o, c in zip(origin, em.coords(out, r))])
                for r in range(out.size(REG))]
        em.put(op.result, TileVal(out, regs))
        return
    at = smem_copy.row_major(op.source.type.shape, element_bytes(op.source.type))
    X.barrier(em.b)
    smem_copy.store(em, src, at)
    X.barrier(em.b)
    em.put(op.result, TileVal(out, smem_copy.load(em, out, at, src.regs[0].type, origin)))


def _shuffled(em: KernelEmitter, src: TileVal, coords: list[ir.Value]) -> ir.Value:
    """The element of ``src`` at ``coords`` (i32, known at run time), in every thread: the
    lane holding it (``extract_by_shuffle``: every warp holds all of ``src``) selects the
    register among its own and ``shfl.sync.idx`` passes it to the others.  Register and
    lane are linear in the coordinates' bits (``LinearLayout.pseudo_invert``)."""
    b = em.b
    inverse = src.layout.pseudo_invert()
    names = src.layout.names
    reg_at, lane_at = names.index(REG), names.index(LANE)
    reg: ir.Value = ir.Constant(I32, 0)
    lane: ir.Value = ir.Constant(I32, 0)
    for d, c in enumerate(coords):
        bases = inverse.bases(inverse.names[d])
        reg = xor_bits(b, reg, c, [base[reg_at] for base in bases])
        lane = xor_bits(b, lane, c, [base[lane_at] for base in bases])
    value = src.regs[0]
    for j in range(1, len(src.regs)):
        value = b.select(b.icmp_unsigned("==", reg, ir.Constant(I32, j)), src.regs[j], value)
    return shuffle(em, value, 0, "idx", lane)


@emits(CO.InsertOp)
def _insert(em: KernelEmitter, op: Operation) -> None:
    src, dst = em.tile(op, 0), em.tile(op, 1)
    out = em.result_layout(op.result)
    origin = _slice_origin(em, op, 2, op.source.type.shape)
    at = smem_copy.row_major(op.result.type.shape, element_bytes(op.result.type))
    X.barrier(em.b)
    smem_copy.store(em, dst, at)
    X.barrier(em.b)
    smem_copy.store(em, src, at, origin)
    X.barrier(em.b)
    em.put(op.result, TileVal(out, smem_copy.load(em, out, at, dst.regs[0].type)))


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
    smem_copy.store(em, src, smem_copy.row_major(src_t.shape, element_bytes(src_t)))
    X.barrier(em.b)
    if T.element_type(src_t).bitwidth == 4:
        regs = [_packed_byte(em, em.flat_index(em.coords(out, reg), out.shape)) for reg in range(out.size(REG))]
    elif T.element_type(dst_t).bitwidth == 4:
        regs = [_unpacked_nibble(em, em.flat_index(em.coords(out, reg), out.shape)) for reg in range(out.size(REG))]
    else:
        regs = smem_copy.load(em, out, smem_copy.row_major(dst_t.shape, element_bytes(dst_t)), llvm_type(dst_t))
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
