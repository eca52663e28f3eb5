"""The 128-byte TMA tensor map (``CUtensorMap``) as NVIDIA's tileiras writes it.

NVIDIA documents the tensor map as opaque.  The layout here was established from NVIDIA's own
encoder as a black box: the ``ON_ARGUMENTS_CHANGE`` callback in the ``.nv.host`` object of
cubins that its tileiras 13.5 writes for sm_90, run on synthetic argument buffers
(``tileiras.emulate.nvhost``) over ranks 1-5, every element width, signed and unsigned
integers, f16/bf16/f32/f64, tile boxes, mma operands (which get swizzles) and tensors small and
large.  ``test/test_tensormap.py`` is the evidence: it runs NVIDIA's callback where NVIDIA's
tileiras is installed and compares its maps with ``encode`` byte for byte.

Little-endian; dimension 0 is the innermost (contiguous) one, so a row-major ``(M, N)`` array
is ``dims = (N, M)``::

    bytes  bits    field
    0x00   0-3     zero (the address is 16-byte aligned)
    0x00   4-56    global address bits 4-56
    0x08   0-3     0x2, always
    0x08   4-6     rank - 1
    0x08   7-10    element type (ELEMENT_TYPE_CODES; not the driver's CUtensorMapDataType)
    0x08   13-14   swizzle: 0 none, 1 32B, 2 64B, 3 128B
    0x08   18      1, always (NVIDIA's encoder never varies it)
    0x08   21      1 when the tensor spans at least 128 KiB: (sum over dims of (dim-1) *
                   stride) + dims[0] * element size >= 2**17
    0x0c   u32 x4  byte stride of dims 1..4, divided by 16
    0x20   u32 x5  dims 0..4, minus 1
    0x37   u8 x5   box of dims 0..4, minus 1
    the rest       zero

What NVIDIA's encoder never varies, and so the black box cannot locate: element (traversal)
strides (always 1; the zero bytes 0x34-0x36 and 0x3c-0x3f are the likely place), interleave
(always none), L2 promotion (bit 18 is the one constant bit that may be it) and the
out-of-bounds fill mode (always zeros: NVIDIA loads NaN-padded views without TMA).  ``encode``
therefore writes only maps of that kind, and ``decode`` refuses bits outside the fields above.
"""
from __future__ import annotations

import enum
import struct

from ..record import record

MAP_BYTES = 128
MAX_RANK = 5
LARGE_SPAN = 1 << 17
FIXED_BITS = 0x2 | 1 << 18
RANK_SHIFT, TYPE_SHIFT, SWIZZLE_SHIFT, LARGE_BIT = 4, 7, 13, 1 << 21
STRIDES_AT, DIMS_AT, BOX_AT = 0x0C, 0x20, 0x37
KNOWN_WORD_BITS = 0xF | 0x7 << RANK_SHIFT | 0xF << TYPE_SHIFT | 0x3 << SWIZZLE_SHIFT | 1 << 18 | LARGE_BIT


class ElementType(enum.IntEnum):
    """Element-type codes at bits 7-10 of the word at 0x08, as NVIDIA's encoder writes them.
    8-bit floats and signed 8/16-bit integers travel as U8/U16; signed 32-bit as S32."""
    U8 = 0
    U16 = 1
    U32 = 2
    S32 = 3
    U64 = 4
    F16 = 6
    F32 = 7
    F64 = 9
    BF16 = 10


ELEMENT_BYTES = {ElementType.U8: 1, ElementType.U16: 2, ElementType.U32: 4, ElementType.S32: 4,
                 ElementType.U64: 8, ElementType.F16: 2, ElementType.F32: 4, ElementType.F64: 8,
                 ElementType.BF16: 2}


class Swizzle(enum.IntEnum):
    NONE = 0
    B32 = 1
    B64 = 2
    B128 = 3

    @property
    def span(self) -> int:
        """Bytes of the swizzle pattern's row (0 for none)."""
        return 16 << self.value if self.value else 0


class TensorMapError(ValueError):
    """Bytes that are not a tensor map of the layout above, or parameters it cannot hold."""


@record(frozen=True)
class TensorMap:
    """A tiled tensor map.  Tuples are innermost dimension first; ``strides`` are the byte
    strides of dims 1.. (dim 0 is contiguous)."""

    address: int
    element_type: ElementType
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: Swizzle = Swizzle.NONE

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.element_type]

    @property
    def box_bytes(self) -> int:
        n = self.element_bytes
        for b in self.box:
            n *= b
        return n

    @property
    def span(self) -> int:
        """Bytes from the first element to one past the last."""
        return sum((d - 1) * s for d, s in zip(self.dims[1:], self.strides)) + self.dims[0] * self.element_bytes


def check(m: TensorMap) -> None:
    if not 1 <= m.rank <= MAX_RANK or len(m.box) != m.rank or len(m.strides) != m.rank - 1:
        raise TensorMapError(f"rank {m.rank} with {len(m.box)} box sizes and {len(m.strides)} strides; "
                             f"expected rank 1-{MAX_RANK}, rank box sizes and rank-1 strides")
    if m.address % 16 or not 0 <= m.address < 1 << 57:
        raise TensorMapError(f"global address {m.address:#x} is not 16-byte aligned below 2**57")
    for s in m.strides:
        if s % 16 or not 0 < s >> 4 < 1 << 32:
            raise TensorMapError(f"byte stride {s} is not a multiple of 16 in (0, 2**36)")
    for d in m.dims:
        if not 1 <= d <= 1 << 32:
            raise TensorMapError(f"dimension {d} outside 1..2**32")
    for b in m.box:
        if not 1 <= b <= 256:
            raise TensorMapError(f"box size {b} outside 1..256")


def encode(m: TensorMap) -> bytes:
    """The 128 bytes NVIDIA's encoder writes for ``m``."""
    check(m)
    out = bytearray(MAP_BYTES)
    word = (FIXED_BITS | (m.rank - 1) << RANK_SHIFT | int(m.element_type) << TYPE_SHIFT
            | int(m.swizzle) << SWIZZLE_SHIFT | (LARGE_BIT if m.span >= LARGE_SPAN else 0))
    struct.pack_into("<QI", out, 0, m.address, word)
    for i, s in enumerate(m.strides):
        struct.pack_into("<I", out, STRIDES_AT + 4 * i, s >> 4)
    for i, d in enumerate(m.dims):
        struct.pack_into("<I", out, DIMS_AT + 4 * i, d - 1)
    for i, b in enumerate(m.box):
        out[BOX_AT + i] = b - 1
    return bytes(out)


def decode(data: bytes) -> TensorMap:
    """The map ``data`` holds; ``TensorMapError`` for bytes outside the established layout."""
    if len(data) != MAP_BYTES:
        raise TensorMapError(f"a tensor map is {MAP_BYTES} bytes, got {len(data)}")
    address, word = struct.unpack_from("<QI", data, 0)
    if word & ~KNOWN_WORD_BITS or word & 0xF != 0x2 or not word & 1 << 18:
        raise TensorMapError(f"flags word {word:#x} has bits outside the established layout")
    rank = (word >> RANK_SHIFT & 0x7) + 1
    try:
        element_type = ElementType(word >> TYPE_SHIFT & 0xF)
    except ValueError:
        raise TensorMapError(f"unknown element type code {word >> TYPE_SHIFT & 0xF}") from None
    strides = tuple(struct.unpack_from("<I", data, STRIDES_AT + 4 * i)[0] << 4 for i in range(rank - 1))
    dims = tuple(struct.unpack_from("<I", data, DIMS_AT + 4 * i)[0] + 1 for i in range(rank))
    box = tuple(data[BOX_AT + i] + 1 for i in range(rank))
    m = TensorMap(address, element_type, dims, strides, box, Swizzle(word >> SWIZZLE_SHIFT & 0x3))
    if encode(m) != bytes(data):
        raise TensorMapError("tensor map has bytes outside the established layout "
                             f"(decoded as {m})")
    return m
