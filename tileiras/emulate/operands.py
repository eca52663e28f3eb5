"""Operand access compiled once per instruction: readers ``(m, idx) -> array`` and writers
``(m, idx, value)``.

Registers hold raw bits; a reader reinterprets them as the instruction's type, truncating a
wider register and zero-extending a narrower one.  A writer stores a value of the
instruction's type, zero- or sign-extending (``.s`` types) into a wider register.
Immediates become 0-d arrays of the instruction's type and broadcast.
"""
from __future__ import annotations

import struct
from typing import Callable

import numpy as np

from .parser import Addr, Imm, Reg, Sym, Vec
from .ptxtypes import RAW_DTYPES, SIGNED_DTYPES, Kind, PtxType, find_types, ptx_type
from .registry import UnsupportedInstruction

Reader = Callable
Writer = Callable

SPECIAL_PREFIXES = ("%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid",
                    "%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid",
                    "%cluster_ctarank", "%cluster_nctarank", "%is_explicit_cluster", "%clock",
                    "%clock64", "%globaltimer", "%smid", "%nsmid", "%gridid", "%lanemask_",
                    "%dynamic_smem_size", "%total_smem_size", "%aggr_smem_size", "%envreg",
                    "%pm", "%globaltimer_lo", "%globaltimer_hi", "%reserved_smem_offset",
                    "%current_graph_exec", "%perctamemoryoffset")


def is_special(name: str) -> bool:
    return name.startswith(SPECIAL_PREFIXES)


def imm_array(imm: Imm, ty: PtxType) -> np.ndarray:
    """An immediate as a 0-d array of ``ty`` (hex float literals keep their exact bits)."""
    fb = imm.float_bits
    neg = imm.literal.startswith("-")
    if ty.kind is Kind.FLOAT:
        if fb is not None and fb[1] == ty.bits and not neg:
            return np.array(fb[0], RAW_DTYPES[ty.bits]).view(ty.dtype)
        return np.array(float(imm.value)).astype(ty.dtype)
    if ty.kind is Kind.PRED:
        return np.array(bool(imm.value))
    bits = min(ty.bits, 64)
    if fb is not None:
        raw = fb[0] if not neg else fb[0] ^ (1 << (fb[1] - 1))
        if fb[1] != bits:
            fmt = "<f" if fb[1] == 32 else "<d"
            value = struct.unpack(fmt, raw.to_bytes(fb[1] // 8, "little"))[0]
            raw = int.from_bytes(struct.pack("<d" if bits == 64 else "<f", value), "little")
        return np.array(raw % (1 << bits), RAW_DTYPES[bits]).view(ty.dtype)
    if isinstance(imm.value, float):
        if bits in (32, 64):
            fmt = "<f" if bits == 32 else "<d"
            raw = int.from_bytes(struct.pack(fmt, imm.value), "little")
            return np.array(raw, RAW_DTYPES[bits]).view(ty.dtype)
        return np.array(int(imm.value) % (1 << bits), RAW_DTYPES[bits]).view(ty.dtype)
    return np.array(int(imm.value) % (1 << bits), RAW_DTYPES[bits]).view(ty.dtype)


def convert_raw(raw: np.ndarray, src_bits: int, ty: PtxType) -> np.ndarray:
    if ty.kind is Kind.PRED:
        return raw.astype(bool) if raw.dtype != bool else raw
    want = RAW_DTYPES[min(ty.bits, 64)]
    if src_bits == 1:
        raw = raw.astype(want)
    elif raw.dtype != want:
        raw = raw.astype(want)
    return raw.view(ty.dtype) if ty.dtype != want else raw


def reader(ctx, op, ty: PtxType) -> Reader:
    """A function ``(m, idx) -> array of ty`` for a source operand."""
    if isinstance(op, Imm):
        value = imm_array(op, ty)
        return lambda m, idx: value
    if isinstance(op, Reg):
        if is_special(op.name):
            return special_reader(op.name, ty)
        slot, bits = ctx.register(op.name)
        negate = op.negate
        if ty.kind is Kind.PRED or bits == 1:
            if negate:
                return lambda m, idx: ~m.reg(slot)[idx]
            if ty.kind is Kind.PRED:
                return lambda m, idx: m.reg(slot)[idx]
        if bits == ty.bits and ty.dtype == RAW_DTYPES[bits]:
            return lambda m, idx: m.reg(slot)[idx]
        if bits == ty.bits:
            dt = ty.dtype
            return lambda m, idx: m.reg(slot)[idx].view(dt)
        return lambda m, idx: convert_raw(m.reg(slot)[idx], bits, ty)
    if isinstance(op, Sym):
        address = ctx.symbol_value(op.name) + op.offset
        value = np.array(address % (1 << 64), np.uint64).astype(RAW_DTYPES[min(ty.bits, 64)])
        value = value.view(ty.dtype) if ty.kind is not Kind.FLOAT else value
        return lambda m, idx: value
    if isinstance(op, Addr) and isinstance(op.base, Reg):
        base = reader(ctx, op.base, ty)
        off = imm_array(Imm(op.offset), ty)
        return lambda m, idx: base(m, idx) + off
    raise UnsupportedInstruction(f"cannot read operand {op!r}")


def special_reader(name: str, ty: PtxType) -> Reader:
    key = name[1:]

    def read(m, idx):
        return convert_raw(m.special(key, idx), 64, ty)
    return read


def writer(ctx, op, ty: PtxType) -> Writer:
    """A function ``(m, idx, value)`` storing ``value`` (of type ty) into a register."""
    if op is None:
        return lambda m, idx, v: None
    if not isinstance(op, Reg):
        raise UnsupportedInstruction(f"cannot write operand {op!r}")
    slot, bits = ctx.register(op.name)
    if bits == 1:
        return lambda m, idx, v: m.set_reg(slot, idx, v)
    want = ty.dtype
    raw_w = RAW_DTYPES[min(ty.bits, 64)]
    raw_reg = RAW_DTYPES[bits]
    if bits == ty.bits:
        def write(m, idx, v):
            v = np.asarray(v)
            if v.dtype != want:
                v = v.astype(want)
            m.set_reg(slot, idx, v.view(raw_reg))
        return write
    signed = ty.kind is Kind.SIGNED
    sdt = SIGNED_DTYPES.get(bits)

    def write_resized(m, idx, v):
        v = np.asarray(v)
        if v.dtype != want:
            v = v.astype(want)
        if bits > ty.bits and signed:
            out = v.astype(sdt).view(raw_reg)
        else:
            out = v.view(raw_w).astype(raw_reg)
        m.set_reg(slot, idx, out)
    return write_resized


def vector_items(op) -> list:
    return list(op.items) if isinstance(op, Vec) else [op]


def full(value: np.ndarray, n: int) -> np.ndarray:
    value = np.asarray(value)
    if value.ndim == 0 or value.shape[0] != n:
        return np.broadcast_to(value, (n,) + value.shape[1:] if value.ndim else (n,)).copy()
    return value


def count(idx, m) -> int:
    return m.n if isinstance(idx, slice) else len(idx)


def type_of(parts: list[str], position: int = -1) -> PtxType:
    types = find_types(parts[1:])
    if not types:
        raise UnsupportedInstruction(f"no type suffix in '{'.'.join(parts)}'")
    return types[position]
