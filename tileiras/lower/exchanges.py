"""Shared-memory exchanges: how a tile held in one register layout is written to shared
memory and read back in another (``KernelEmitter.convert``), in the row-major layout or in
an XOR swizzle built from the two register layouts where that takes fewer wavefronts.
Decided by lowering (``layout_rules`` reserves the scratch, ``stream_pipeline`` sizes its
staging) and read by codegen (``emit_shape``, ``smem_copy``)."""
from __future__ import annotations

from functools import lru_cache
from typing import Optional

from ..layout.core import OFFSET, log2
from ..layout.linear import LANE, REG, LinearLayout
from ..layout.shared import BANK_BYTES, BANKS, bank_wavefronts, shared_identity

#: the widest access of an exchange (``ld/st.shared.v4.b32``)
EXCHANGE_ACCESS_BYTES = 16


def exchange_layout(src: LinearLayout, dst: LinearLayout, elem_bytes: int) -> LinearLayout:
    """The shared layout a tile goes through from registers in ``src`` to registers in
    ``dst`` (``KernelEmitter.convert``): the row-major one, or the swizzle that
    ``swizzled_exchange`` builds from the two layouts where ``bank_wavefronts`` counts fewer
    wavefronts for the stores and the loads together (a transpose: 768 -> 256 per 64x64 f32
    tile, the minimum, as NVIDIA's).  Both sides keep their vector widths.

    Tiles of one row or column stay row-major for now: RMS norm's persistent bf16 4x2048
    kernel on sm_80 (test_register_pressure) took 127 registers with its 2048-element row
    exchanged through the swizzle (80 wavefronts instead of 272) against 102, for reasons
    not yet found."""
    return _exchange_layout(src, dst, elem_bytes)


@lru_cache(maxsize=256)
def _exchange_layout(src: LinearLayout, dst: LinearLayout, elem_bytes: int) -> LinearLayout:
    plain = shared_identity(src.shape)
    if sum(1 for d in src.shape if d > 1) < 2:
        return plain
    swizzled = swizzled_exchange(src, dst, elem_bytes)
    if swizzled is None:
        return plain
    cost = [exchange_wavefronts(src, dst, s, elem_bytes) for s in (plain, swizzled)]
    return swizzled if cost[1] < cost[0] else plain


def exchange_vector(layout: LinearLayout, shared: LinearLayout, elem_bytes: int) -> int:
    """Consecutive registers of ``layout`` one shared access moves through ``shared``."""
    limit = max(1, EXCHANGE_ACCESS_BYTES // elem_bytes)
    return layout.invert_and_compose(shared).largest_vectorization(0, limit)


def exchange_wavefronts(src: LinearLayout, dst: LinearLayout, shared: LinearLayout, elem_bytes: int) -> int:
    """Wavefronts of warp 0's stores from ``src`` and loads into ``dst`` through ``shared``."""
    return sum(sum(bank_wavefronts(regs, shared, elem_bytes, exchange_vector(regs, shared, elem_bytes)))
               for regs in (src, dst))


def swizzled_exchange(src: LinearLayout, dst: LinearLayout, elem_bytes: int) -> Optional[LinearLayout]:
    """A shared layout (offset -> coordinates, a bijection) that both sides of an exchange
    access without bank conflicts, as Triton's generic swizzling builds one:

    * offset bits below ``vec`` are the row-major ones, so each side's vector stays
      consecutive offsets;
    * a request of one side serves the lanes of a 128-byte phase at once: they meet no
      conflict when no non-zero combination of their coordinates lies in the span of the
      offset bits above the banks (``high``) and the side's own vector bits.  ``high`` is
      chosen a vector at a time outside both sides' spans (a common complement, which
      exists over GF(2) as over any field), registers' coordinates first;
    * the bank bits above ``vec`` complete the basis, registers' coordinates first.

    None when the tile is too small to have bits above the banks, or a layout is not one
    element a register (copies, or a shape the sides do not cover)."""
    shape = src.shape
    rank, bits = len(shape), sum(log2(d) for d in shape)
    bank_bits = log2(BANKS * BANK_BYTES // elem_bytes) if elem_bytes <= BANKS * BANK_BYTES else 0
    if rank == 0 or bits <= bank_bits or elem_bytes > EXCHANGE_ACCESS_BYTES:
        return None
    plain = shared_identity(shape)
    unit = list(plain.bases(OFFSET))          # row-major: offset bit k's coordinates
    sides = []
    for regs in (src, dst):
        v = exchange_vector(regs, plain, elem_bytes)
        phase = max(1, min(32, BANKS * BANK_BYTES // (v * elem_bytes)))
        lanes = [b for b in regs.bases(LANE)[:log2(phase)] if any(b)]
        sides.append((log2(v), lanes))
    vec = max(v for v, _ in sides)
    high: list[tuple[int, ...]] = []
    spans = [_Span(unit[:v] + lanes) for v, lanes in sides]
    registers = [b for regs in (src, dst) for b in regs.bases(REG) if any(b)]
    vector_bits = tuple(map(sum, zip(*unit[:vec]))) if vec else (0,) * rank
    # no other offset bit may move a vector's elements (a vector stays consecutive offsets)
    registers = [b for b in registers if not any(c & m for c, m in zip(b, vector_bits))]
    for candidate in _exchange_candidates(registers, unit):
        if any(c & m for c, m in zip(candidate, vector_bits)):
            continue
        if len(high) == bits - bank_bits:
            break
        if all(not span.reaches(candidate) for span in spans):
            high.append(candidate)
            for span in spans:
                span.add(candidate)
    if len(high) < bits - bank_bits:
        return None
    basis = _Span(unit[:vec] + high)
    low = list(unit[:vec])
    for u in registers + unit[vec:]:
        if len(low) == bank_bits:
            break
        if basis.add(u):
            low.append(u)
    if len(low) != bank_bits:
        return None
    return LinearLayout(((OFFSET, tuple(low + high)),), shape)


def _exchange_candidates(registers: list[tuple[int, ...]], unit: list[tuple[int, ...]]):
    """Coordinate vectors to try for an exchange's high offset bits: the sides' register
    bases first (a register then sits a constant offset from the thread's first, which
    folds into the access's immediate; NVIDIA's transpose stores at +2048, +4096, ...),
    then the row-major bits from the top, then each with a lower one XORed in."""
    yield from registers
    for u in reversed(unit):
        yield u
    for i in reversed(range(len(unit))):
        for j in range(i):
            yield tuple(a ^ b for a, b in zip(unit[i], unit[j]))


class _Span:
    """A subspace of coordinate vectors over GF(2), grown a vector at a time."""

    def __init__(self, vectors: list[tuple[int, ...]]):
        self._pivots: dict[int, int] = {}
        for v in vectors:
            self.add(v)

    @staticmethod
    def _pack(v: tuple[int, ...]) -> int:
        return sum(c << (32 * d) for d, c in enumerate(v))

    def _reduce(self, x: int) -> int:
        while x and (x.bit_length() - 1) in self._pivots:
            x ^= self._pivots[x.bit_length() - 1]
        return x

    def reaches(self, v: tuple[int, ...]) -> bool:
        return self._reduce(self._pack(v)) == 0

    def add(self, v: tuple[int, ...]) -> bool:
        """Add ``v``; False when the span already reaches it."""
        x = self._reduce(self._pack(v))
        if x:
            self._pivots[x.bit_length() - 1] = x
        return bool(x)
