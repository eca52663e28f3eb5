"""The memory model and pointer-based memory ops.

Global memory is a set of byte buffers at distinct 64-bit addresses: every array argument,
every module global and every ``alloca`` gets its own buffer (256-byte aligned, with a 256-byte
gap after it so an access just past the end hits no buffer).  A pointer is its ``uint64`` byte
address, so ``offset``, ``ptr_to_int`` and ``int_to_ptr`` are plain integer arithmetic.  An
unmasked access that falls outside every buffer, or is misaligned for its element type, raises
``InterpError``.

Accesses are applied at once, in row-major element order (a repeated address in one store
keeps the last element's value); atomics are applied one element at a time in row-major order.
Tile blocks run one after another, so token and memory-ordering attributes need no modelling.

4-bit elements (f4E2M1FN, i4) are packed two to a byte, the lower-indexed element in the low
nibble (spec 5.2.2).  Accesses to them take *nibble addresses* (``2 * byte + 1`` for the high
nibble): ``load``/``store`` read and modify the containing bytes, low nibbles first, so two
elements of one byte written by one store both land.  A ``ptr<f4E2M1FN>`` value is a byte
address (the low nibble); ``offset`` by an odd element count is not byte-addressable and raises
(NVIDIA's tileiras rejects tiles of ``ptr<f4E2M1FN>`` of rank > 0 altogether: "use an f4 tile
view for memory accesses").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..ir import types as T
from ..tile import ops_core as C
from ..tile import ops_memory as M
from ..tile.enums import AtomicRMWMode
from .core import CHUNK_ELEMENTS, impl
from .errors import InterpError
from .values import (TOKEN_VALUE, UINT_OF_BITS, bits_of, dtype_of, from_int, is_subbyte, scalar_of,
                     storage_bytes, to_signed, to_unsigned)

FIRST_ADDRESS = 1 << 32
ALIGNMENT = 256


@dataclass
class Buffer:
    base: int
    data: np.ndarray   # writable uint8 view of the memory
    name: str

    @property
    def end(self) -> int:
        return self.base + self.data.size


class Memory:
    def __init__(self) -> None:
        self.buffers: list[Buffer] = []
        self._next = FIRST_ADDRESS

    def add(self, array: np.ndarray, name: str, alignment: int = ALIGNMENT) -> int:
        """Map ``array`` (C-contiguous, writable) into memory; returns its address."""
        if not array.flags.c_contiguous:
            raise InterpError(f"{name}: memory arrays must be C-contiguous")
        data = array.reshape(-1).view(np.uint8)
        align = max(alignment, ALIGNMENT)
        base = -(-self._next // align) * align
        self.buffers.append(Buffer(base, data, name))
        self._next = base + data.size + ALIGNMENT
        return base

    def allocate(self, nbytes: int, name: str, alignment: int = ALIGNMENT) -> int:
        return self.add(np.zeros(nbytes, dtype=np.uint8), name, alignment)

    def _locate(self, addrs: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Buffer index and byte offset of each address (raises if any is outside)."""
        bases = np.array([b.base for b in self.buffers], dtype=np.uint64)
        ends = np.array([b.end for b in self.buffers], dtype=np.uint64)
        which = np.searchsorted(bases, addrs, side="right").astype(np.int64) - 1
        bad = which < 0
        safe = np.where(bad, 0, which)
        if len(self.buffers):
            bad |= addrs + np.uint64(size) > ends[safe]
        if bad.any():
            a = int(addrs[bad][0])
            raise InterpError(f"access of {size} bytes at address {a:#x} is outside every buffer "
                              f"({self.describe()})")
        misaligned = addrs % np.uint64(size) != 0
        if misaligned.any():
            raise InterpError(f"misaligned {size}-byte access at address {int(addrs[misaligned][0]):#x}")
        return safe, (addrs - bases[safe]).astype(np.int64)

    def describe(self) -> str:
        return ", ".join(f"{b.name}=[{b.base:#x}, {b.end:#x})" for b in self.buffers) or "no buffers"

    def read_bytes(self, addrs: np.ndarray, size: int) -> np.ndarray:
        """The ``size`` bytes at each of ``addrs`` (flat), ``CHUNK_ELEMENTS`` addresses at a
        time (the byte indices take 8 bytes a byte read)."""
        out = np.zeros((addrs.size, size), dtype=np.uint8)
        span = np.arange(size)
        for i in range(0, addrs.size, CHUNK_ELEMENTS):
            chunk = addrs[i:i + CHUNK_ELEMENTS]
            which, offs = self._locate(chunk, size)
            for b in np.unique(which):
                rows = which == b
                out[i:i + CHUNK_ELEMENTS][rows] = self.buffers[b].data[offs[rows][:, None] + span]
        return out

    def write_bytes(self, addrs: np.ndarray, raw: np.ndarray) -> None:
        """Chunks in row-major order: a repeated address keeps the last element's bytes."""
        size = raw.shape[1]
        span = np.arange(size)
        for i in range(0, addrs.size, CHUNK_ELEMENTS):
            chunk, values = addrs[i:i + CHUNK_ELEMENTS], raw[i:i + CHUNK_ELEMENTS]
            which, offs = self._locate(chunk, size)
            for b in np.unique(which):
                rows = which == b
                self.buffers[b].data[offs[rows][:, None] + span] = values[rows]

    # -- 4-bit elements --------------------------------------------------------------------
    def load_nibbles(self, naddrs: np.ndarray, active: np.ndarray) -> np.ndarray:
        """The 4-bit values at nibble addresses ``naddrs`` (flat; zero where not active)."""
        out = np.zeros(naddrs.shape, np.uint8)
        na = naddrs[active]
        raw = self.read_bytes(na >> np.uint64(1), 1)[:, 0]
        out[active] = (raw >> ((na & np.uint64(1)) * np.uint64(4)).astype(np.uint8)) & np.uint8(0xF)
        return out

    def store_nibbles(self, naddrs: np.ndarray, nibbles: np.ndarray, active: np.ndarray) -> None:
        """Read-modify-write of the bytes holding ``naddrs``: low nibbles, then high ones."""
        for half in (0, 1):
            sel = active & ((naddrs & np.uint64(1)) == np.uint64(half))
            byte_addrs = naddrs[sel] >> np.uint64(1)
            old = self.read_bytes(byte_addrs, 1)[:, 0]
            keep = np.uint8(0xF0 if half == 0 else 0x0F)
            new = (old & keep) | ((nibbles[sel] & np.uint8(0xF)) << np.uint8(4 * half))
            self.write_bytes(byte_addrs, new.astype(np.uint8).reshape(-1, 1))

    # -- typed access --------------------------------------------------------------------
    def load(self, addrs: np.ndarray, elem: T.Type, mask: Optional[np.ndarray] = None) -> np.ndarray:
        """Elements of type ``elem`` at ``addrs`` (nibble addresses for 4-bit elements);
        masked-off elements read as zero."""
        addrs = np.asarray(addrs, dtype=np.uint64)
        if is_subbyte(elem):
            flat = addrs.reshape(-1)
            active = np.ones(flat.shape, bool) if mask is None else \
                np.broadcast_to(np.asarray(mask, bool), addrs.shape).reshape(-1)
            return self.load_nibbles(flat, active).view(dtype_of(elem)).reshape(addrs.shape)
        size = storage_bytes(elem)
        flat = addrs.reshape(-1)
        active = np.ones(flat.shape, bool) if mask is None else \
            np.broadcast_to(np.asarray(mask, bool), addrs.shape).reshape(-1)
        raw = np.zeros((flat.size, size), dtype=np.uint8)
        raw[active] = self.read_bytes(flat[active], size)
        return decode_elements(raw, elem).reshape(addrs.shape)

    def store(self, addrs: np.ndarray, values: np.ndarray, elem: T.Type,
              mask: Optional[np.ndarray] = None) -> None:
        addrs = np.asarray(addrs, dtype=np.uint64)
        values = np.broadcast_to(np.asarray(values), addrs.shape)
        flat = addrs.reshape(-1)
        active = np.ones(flat.shape, bool) if mask is None else \
            np.broadcast_to(np.asarray(mask, bool), addrs.shape).reshape(-1)
        if is_subbyte(elem):
            nibbles = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
            self.store_nibbles(flat, nibbles, active)
            return
        raw = encode_elements(values.reshape(-1), elem)
        self.write_bytes(flat[active], raw[active])


def decode_elements(raw: np.ndarray, elem: T.Type) -> np.ndarray:
    """(n, size) bytes -> n elements of ``elem`` (i1: any non-zero byte is true)."""
    size = raw.shape[1]
    words = np.ascontiguousarray(raw).view(UINT_OF_BITS[size * 8]).reshape(-1)
    e = scalar_of(elem)
    if isinstance(e, T.PointerType):
        return words.astype(np.uint64)
    assert isinstance(e, T.ScalarType)
    if e.name == "i1":
        return words != 0
    if e.is_int:
        return words.astype(dtype_of(e))
    return words.view(dtype_of(e))


def encode_elements(values: np.ndarray, elem: T.Type) -> np.ndarray:
    size = storage_bytes(elem)
    e = scalar_of(elem)
    v = np.ascontiguousarray(values)
    if isinstance(e, T.ScalarType) and e.is_int:
        words = to_unsigned(v).astype(UINT_OF_BITS[size * 8])
    elif isinstance(e, T.PointerType):
        words = v.astype(np.uint64)
    else:
        words = v.view(UINT_OF_BITS[size * 8])
    return np.ascontiguousarray(words).view(np.uint8).reshape(-1, size)


def pointee(t: T.Type) -> T.Type:
    e = scalar_of(t)
    if not isinstance(e, T.PointerType):
        raise InterpError(f"expected a pointer type, got {t}")
    return e.pointee


# -- ops ---------------------------------------------------------------------------------

@impl(C.OffsetOp)
def _offset(frame, op, ptr, offset):
    off = to_signed(offset, bits_of(op.offset.type))
    if is_subbyte(pointee(op.ptr.type)):
        if (off % 2 != 0).any():
            raise InterpError(f"offset of a {op.ptr.type} by an odd number of elements: half a byte is "
                              "not addressable through a pointer (use a tensor view)", op)
        return ((to_unsigned(ptr) + (off // 2).view(np.uint64)),)
    step = storage_bytes(pointee(op.ptr.type))
    return ((to_unsigned(ptr) + off.view(np.uint64) * np.uint64(step)),)


def pointee_addresses(ptrs: np.ndarray, elem: T.Type) -> np.ndarray:
    """Addresses of the elements pointers point at (nibble addresses for 4-bit elements)."""
    ptrs = np.asarray(ptrs, dtype=np.uint64)
    return ptrs * np.uint64(2) if is_subbyte(elem) else ptrs


@impl(M.LoadPtrTkoOp)
def _load_ptr(frame, op, *operands):
    mask = frame.get(op.mask) if op.mask is not None else None
    elem = pointee(op.source.type)
    ptrs = pointee_addresses(frame.get(op.source), elem)
    out = frame.machine.memory.load(ptrs, elem, mask)
    if mask is not None and op.paddingValue is not None:
        pad = np.broadcast_to(frame.get(op.paddingValue), out.shape)
        out = np.where(np.broadcast_to(np.asarray(mask, bool), out.shape), out, pad).astype(out.dtype)
    return out, TOKEN_VALUE


@impl(M.StorePtrTkoOp)
def _store_ptr(frame, op, *operands):
    mask = frame.get(op.mask) if op.mask is not None else None
    elem = pointee(op.destination.type)
    frame.machine.memory.store(pointee_addresses(frame.get(op.destination), elem), frame.get(op.value),
                               elem, mask)
    return (TOKEN_VALUE,)


def apply_rmw(mode: AtomicRMWMode, old: np.ndarray, arg: np.ndarray, elem: T.ScalarType) -> np.ndarray:
    """``mode(old, arg)`` for one or more elements of ``elem``."""
    if mode is AtomicRMWMode.XCHG:
        return np.asarray(arg).astype(old.dtype)
    if mode is AtomicRMWMode.ADDF:
        from .floatarith import float_op
        return float_op("add", [old, np.asarray(arg).astype(old.dtype)], elem.name, None)
    bits = elem.bitwidth
    if mode in (AtomicRMWMode.MAX, AtomicRMWMode.MIN):
        x, y = to_signed(old, bits), to_signed(arg, bits)
        return from_int(np.maximum(x, y) if mode is AtomicRMWMode.MAX else np.minimum(x, y), bits)
    x, y = to_unsigned(old), to_unsigned(arg)
    fn = {AtomicRMWMode.AND: np.bitwise_and, AtomicRMWMode.OR: np.bitwise_or,
          AtomicRMWMode.XOR: np.bitwise_xor, AtomicRMWMode.ADD: np.add,
          AtomicRMWMode.UMAX: np.maximum, AtomicRMWMode.UMIN: np.minimum}[mode]
    return from_int(fn(x, y), bits)


def atomic_update(memory: Memory, addrs: np.ndarray, elem: T.ScalarType, update,
                  active: np.ndarray) -> np.ndarray:
    """Apply ``update(old_element) -> new_element`` at each active address in row-major
    order, one element at a time; returns the old values (zero where inactive)."""
    flat = np.asarray(addrs, np.uint64).reshape(-1)
    act = np.broadcast_to(active, np.shape(addrs)).reshape(-1)
    olds = np.zeros(flat.shape, dtype=dtype_of(elem))
    for i in np.nonzero(act)[0]:
        a = flat[i:i + 1]
        old = memory.load(a, elem)
        olds[i] = old[0]
        new = update(i, old)
        if new is not None:
            memory.store(a, new, elem)
    return olds.reshape(np.shape(addrs))


@impl(M.AtomicRMWTkoOp)
def _atomic_rmw(frame, op, *operands):
    elem = pointee(op.pointers.type)
    ptrs = frame.get(op.pointers)
    arg = np.broadcast_to(frame.get(op.arg), np.shape(ptrs)).reshape(-1)
    active = frame.get(op.mask) if op.mask is not None else np.ones(np.shape(ptrs), bool)
    olds = atomic_update(frame.machine.memory, ptrs, elem,
                         lambda i, old: apply_rmw(op.mode, old, arg[i:i + 1], elem), active)
    return olds, TOKEN_VALUE


@impl(M.AtomicCASTkoOp)
def _atomic_cas(frame, op, *operands):
    elem = pointee(op.pointers.type)
    ptrs = frame.get(op.pointers)
    shape = np.shape(ptrs)
    cmp = np.broadcast_to(frame.get(op.cmp), shape).reshape(-1)
    val = np.broadcast_to(frame.get(op.val), shape).reshape(-1)
    active = frame.get(op.mask) if op.mask is not None else np.ones(shape, bool)

    def update(i, old):
        same = encode_elements(old, elem).tobytes() == encode_elements(cmp[i:i + 1], elem).tobytes()
        return val[i:i + 1] if same else None
    olds = atomic_update(frame.machine.memory, ptrs, elem, update, active)
    olds = np.where(np.broadcast_to(active, shape), olds, cmp.reshape(shape)).astype(olds.dtype)
    return olds, TOKEN_VALUE


@impl(C.GetGlobalOp)
def _get_global(frame, op):
    try:
        return (np.array(frame.machine.globals[op.attributes["name"]], dtype=np.uint64),)
    except KeyError:
        raise InterpError(f"no global named @{op.attributes['name']}", op) from None


@impl(M.AllocaOp)
def _alloca(frame, op):
    elem = pointee(op.result.type)
    nbytes = (int(op.num_elem) + 1) // 2 if is_subbyte(elem) else int(op.num_elem) * storage_bytes(elem)
    addr = frame.machine.memory.allocate(nbytes, f"alloca#{id(op) & 0xFFFF:x}", int(op.alignment or 1))
    return (np.array(addr, dtype=np.uint64),)


@impl(M.MakeTokenOp)
def _make_token(frame, op):
    return (TOKEN_VALUE,)


@impl(M.JoinTokensOp)
def _join_tokens(frame, op, *tokens):
    return (TOKEN_VALUE,)


@impl(M.MemoryFenceAliasTkoOp)
def _fence(frame, op, token):
    return (TOKEN_VALUE,)
