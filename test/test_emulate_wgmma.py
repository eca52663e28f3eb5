"""wgmma matrix descriptors in the PTX emulator, on hand-made descriptors: K-major and
MN-major operands (the instruction's transpose immediates), without swizzle and with the
32/64/128-byte swizzles, leading and stride byte offsets with gaps, a non-zero start and
base offset, A from registers, negated operands.  The shared-memory image is placed here
from the PTX ISA's canonical layouts written as CUTLASS writes them (shape:stride over
16-byte units, then ``Swizzle<B, 4, 3>``), independently of the emulator's reader; D is
checked against numpy's A @ B + C."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_emulate_mma import HEADER, copy_to_shared, wgmma_d

from tileiras.emulate import launch
from tileiras.emulate.ops import mma
from tileiras.layout.shared import Swizzle
from tileiras.layout.tensor_core import wgmma_shared_operand

RNG = np.random.default_rng(11)
SMEM = 65536
MODES = {0: 0, 32: 3, 64: 2, 128: 1}            # swizzle bytes -> the descriptor's field


def canonical_offset(mn: int, k: int, width: int, mn_major: bool, lbo: int, sbo: int,
                     elem_bytes: int = 2) -> int:
    """Byte offset of element (m or n, k) from the matrix start, before swizzling (PTX ISA,
    "Shared Memory Matrix Layout"; CUTLASS ``make_gmma_desc``'s canonical layouts, with
    T the elements of 16 bytes and W = width / 16):

    - K-major, none: ((8, m), (T, k)) : ((16 B, SBO), (1, LBO))
    - K-major, swizzled: ((8, m), (T W)) : ((W 16 B, SBO), 1)
    - MN-major, none: ((T, m), (8, k)) : ((1, SBO), (16 B, LBO))
    - MN-major, swizzled: ((T W, m), (8, k)) : ((1, LBO), (W 16 B, SBO))"""
    t = 16 // elem_bytes
    if not mn_major:
        if width == 0:
            return (mn % 8) * 16 + (mn // 8) * sbo + (k % t) * elem_bytes + (k // t) * lbo
        assert k * elem_bytes < width
        return (mn % 8) * width + (mn // 8) * sbo + k * elem_bytes
    if width == 0:
        return (mn % t) * elem_bytes + (mn // t) * sbo + (k % 8) * 16 + (k // 8) * lbo
    row = width // elem_bytes
    return (mn % row) * elem_bytes + (mn // row) * lbo + (k % 8) * width + (k // 8) * sbo


def cutlass_swizzle(offset: int, width: int) -> int:
    """``Swizzle<B, 4, 3>`` (B = log2(width / 16)): bits 7.. 7+B XORed into bits 4.. 4+B."""
    bits = {0: 0, 32: 1, 64: 2, 128: 3}[width]
    return offset ^ ((offset >> 3) & (((1 << bits) - 1) << 4))


def place(image: np.ndarray, x: np.ndarray, pattern: int, width: int, mn_major: bool,
          lbo: int, sbo: int) -> None:
    """Store ``x`` ([m or n, k], f16) into ``image``: the swizzle pattern starts at byte
    ``pattern`` (the repeat of 8 width bytes counted from there)."""
    raw = x.view(np.uint16)
    where = [(pattern + cutlass_swizzle(canonical_offset(mn, k, width, mn_major, lbo, sbo), width)) // 2
             for mn, k in itertools.product(*map(range, x.shape))]
    assert len(set(where)) == x.size and not image[where].any(), "elements overlap"
    image[where] = raw.reshape(-1)


def descriptor(start: int, lbo: int, sbo: int, width: int, base: int = 0) -> int:
    return (start >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | base << 49 | MODES[width] << 62


def kernel(opcode: str, n: int, a_regs: int, tail: str) -> str:
    """128 threads copy the shared image, then one wgmma: D from ``c`` (register r of thread
    t at c[r * 128 + t]), A from the descriptor parameter or, with ``a_regs``, from
    ``a`` likewise; D stored to ``out`` as C was loaded."""
    regs = n // 2
    vec = lambda prefix, count: "{" + ", ".join(f"%{prefix}{i}" for i in range(count)) + "}"
    load_d = "\n".join(f"ld.global.f32 %f{i}, [%rd7+{i * 512}];" for i in range(regs))
    load_a = "\n".join(f"ld.global.b32 %ra{i}, [%rd11+{i * 512}];" for i in range(a_regs))
    stores = "\n".join(f"st.global.f32 [%rd8+{i * 512}], %f{i};" for i in range(regs))
    a = vec("ra", a_regs) if a_regs else "%rd9"
    return HEADER.replace("sm_120a", "sm_90a") + f""".shared .align 1024 .b8 smem[{SMEM}];
.visible .entry k(.param .u64 k_image, .param .u64 k_c, .param .u64 k_out, .param .u64 k_da,
                  .param .u64 k_db, .param .u32 k_keep, .param .u64 k_a)
.reqntid 128
{{
.reg .pred %p<4>;
.reg .b32 %r<200>;
.reg .b32 %ra<8>;
.reg .f32 %f<128>;
.reg .b64 %rd<16>;
mov.u32 %r1, %tid.x;
{copy_to_shared("k_image", SMEM // 512)}
mul.wide.u32 %rd6, %r1, 4;
ld.param.b64 %rd4, [k_c];
add.s64 %rd7, %rd4, %rd6;
ld.param.b64 %rd5, [k_out];
add.s64 %rd8, %rd5, %rd6;
ld.param.b64 %rd10, [k_a];
add.s64 %rd11, %rd10, %rd6;
{load_d}
{load_a}
ld.param.b64 %rd9, [k_da];
ld.param.b64 %rd10, [k_db];
ld.param.b32 %r9, [k_keep];
setp.ne.b32 %p2, %r9, 0;
wgmma.fence.sync.aligned;
{opcode} {vec("f", regs)}, {a}, %rd10, %p2, {tail};
wgmma.commit_group.sync.aligned;
wgmma.wait_group.sync.aligned 0;
{stores}
ret;
}}
"""


def run(a, b_t, image, da, db, tail, keep=1, a_regs=None):
    """D of one m64nNk16 f16 wgmma (B given as N x K), from C random."""
    n = b_t.shape[0]
    rows, cols = wgmma_d(n)
    c = RNG.standard_normal((64, n)).astype(np.float32)
    c_regs = c[rows, cols]
    out = np.zeros_like(c_regs)
    regs = np.zeros((4, 128), np.uint32) if a_regs is None else a_regs
    ptx = kernel(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16", n, 0 if a_regs is None else 4, tail)
    launch(ptx, "k", (1,), [image.view(np.uint8), c_regs, out, np.uint64(da), np.uint64(db),
                            np.uint32(keep), regs]).check()
    d = np.zeros((64, n), np.float32)
    d[rows, cols] = out
    return d, c


def operands(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A (64 x 16) and B as N x 16, small multiples of 1/4 (exact products and sums)."""
    return ((RNG.integers(-8, 9, (64, 16)) / 4).astype(np.float16),
            (RNG.integers(-8, 9, (n, 16)) / 4).astype(np.float16))


def strides(mn: int, width: int, mn_major: bool, gap: int) -> tuple[int, int]:
    """(LBO, SBO) of a tight canonical layout of an mn x 16 f16 operand, each with ``gap``
    more bytes (the reader must follow the descriptor, not assume tight packing)."""
    if not mn_major:
        lbo, sbo = (mn * 16, 128) if width == 0 else (16, 8 * width)      # swizzled K-major: LBO unused
        return lbo + (gap if width == 0 else 0), sbo + gap
    if width == 0:                       # MN steps of 16 bytes, then K steps of 8 rows
        return mn // 8 * 128 + gap, 128 + gap
    return 2 * 8 * width + gap, 8 * width + gap     # MN atoms after both K atoms


@pytest.mark.parametrize("width", [0, 32, 64, 128])
@pytest.mark.parametrize("a_mn, b_mn", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("n", [16, 64])
def test_descriptor_layouts(width, a_mn, b_mn, n):
    """Every major-ness and swizzle, leading and stride offsets with gaps, B after A at a
    swizzle-aligned offset; the immediates say which operand is MN-major."""
    a, b_t = operands(n)
    image = np.zeros(SMEM // 2, np.uint16)
    gap = 1024 if width == 128 else 512
    a_lbo, a_sbo = strides(64, width, a_mn, gap)
    b_lbo, b_sbo = strides(n, width, b_mn, gap)
    b_at = SMEM // 2
    place(image, a, 0, width, a_mn, a_lbo, a_sbo)
    place(image, b_t, b_at, width, b_mn, b_lbo, b_sbo)
    d, c = run(a, b_t, image, descriptor(0, a_lbo, a_sbo, width), descriptor(b_at, b_lbo, b_sbo, width),
               f"1, 1, {int(a_mn)}, {int(b_mn)}")
    np.testing.assert_array_equal(d, (a.astype(np.float64) @ b_t.astype(np.float64).T + c).astype(np.float32))


@pytest.mark.parametrize("width", [32, 64, 128])
@pytest.mark.parametrize("mn_major", [False, True])
def test_base_offset_moves_the_swizzle_pattern(width, mn_major):
    """A swizzle pattern starting 128 bytes past a repeat boundary (PTX ISA: base offset =
    (pattern start >> 7) & 7) reads right with that base offset and wrong without it."""
    n = 16
    a, b_t = operands(n)
    image = np.zeros(SMEM // 2, np.uint16)
    a_lbo, a_sbo = strides(64, width, False, 0)
    b_lbo, b_sbo = strides(n, width, mn_major, 0)
    b_at = SMEM // 2 + 3 * 128                         # lines 3.. of a repeat
    place(image, a, 0, width, False, a_lbo, a_sbo)
    place(image, b_t, b_at, width, mn_major, b_lbo, b_sbo)
    tail = f"1, 1, 0, {int(mn_major)}"
    expected = (a.astype(np.float64) @ b_t.astype(np.float64).T).astype(np.float32)
    d, _ = run(a, b_t, image, descriptor(0, a_lbo, a_sbo, width), descriptor(b_at, b_lbo, b_sbo, width, 3),
               tail, keep=0)
    np.testing.assert_array_equal(d, expected)
    d, _ = run(a, b_t, image, descriptor(0, a_lbo, a_sbo, width), descriptor(b_at, b_lbo, b_sbo, width, 0),
               tail, keep=0)
    assert not np.array_equal(d, expected)


def test_k_step_inside_a_swizzle_row():
    """NVIDIA's K loop over a 64-byte-swizzled K-major A (K = 32) adds 32 bytes to the start
    address for the second k16 step: the swizzle applies to the whole address."""
    a_full = (RNG.integers(-8, 9, (64, 32)) / 4).astype(np.float16)
    b_t = (RNG.integers(-8, 9, (16, 16)) / 4).astype(np.float16)
    image = np.zeros(SMEM // 2, np.uint16)
    place(image, a_full, 0, 64, False, 16, 512)
    place(image, b_t, SMEM // 2, 128, False, 16, 1024)
    d, _ = run(a_full[:, 16:], b_t, image, descriptor(32, 16, 512, 64), descriptor(SMEM // 2, 16, 1024, 128),
               "1, 1, 0, 0", keep=0)
    np.testing.assert_array_equal(d, (a_full[:, 16:].astype(np.float64) @ b_t.astype(np.float64).T))


def a_fragment_registers(a: np.ndarray) -> np.ndarray:
    """A (64 x 16 f16) as wgmma's register operand, [register, thread]: warp w's 16 rows as
    mma.m16n8k16's A (PTX ISA, "WGMMA .m64nNk16 register fragment layout for matrix A")."""
    regs = np.zeros((4, 128), np.uint32)
    raw = a.view(np.uint16).astype(np.uint32)
    for t, i in itertools.product(range(128), range(8)):
        lane, w = t % 32, t // 32
        g, q = lane // 4, lane % 4
        row = 16 * w + g + (8 if i in (2, 3, 6, 7) else 0)
        col = 2 * q + (i & 1) + (8 if i >= 4 else 0)
        regs[i // 2, t] |= raw[row, col] << np.uint32(16 * (i % 2))
    return regs


@pytest.mark.parametrize("b_mn", [False, True])
def test_a_from_registers_with_transposed_b(b_mn):
    """``wgmma ... {a regs}, b-desc, p, scale-a, scale-b, trans-b`` (flash attention's P @ V):
    the one transpose immediate is B's; scale-a -1 negates A."""
    n = 64
    a, b_t = operands(n)
    image = np.zeros(SMEM // 2, np.uint16)
    lbo, sbo = strides(n, 128, b_mn, 0)
    place(image, b_t, SMEM // 2, 128, b_mn, lbo, sbo)
    d, c = run(a, b_t, image, 0, descriptor(SMEM // 2, lbo, sbo, 128), f"-1, 1, {int(b_mn)}",
               a_regs=a_fragment_registers(a))
    np.testing.assert_array_equal(d, (-(a.astype(np.float64) @ b_t.astype(np.float64).T) + c).astype(np.float32))


@pytest.mark.parametrize("swizzle", [Swizzle.NONE, Swizzle.B32, Swizzle.B64, Swizzle.B128])
def test_mn_major_layout_is_what_the_descriptor_reads(swizzle):
    """The layout algebra's MN-major operand (``wgmma_shared_operand(k_major=False)``, 64 x 32
    f16) holds at each byte the emulator reads for (m, k) the element (m, k), with the
    descriptor strides of that layout: swizzled, SBO to the next 8 K-rows and LBO to the
    next atom along M; without swizzle, SBO to the next 16 bytes of M and LBO to the next
    8 K-rows (the two trade places)."""
    mn, k, eb = 64, 32, 2
    layout = wgmma_shared_operand(mn, k, eb, swizzle, k_major=False)
    to_offset = layout.invert()
    at = lambda m, kk: eb * to_offset.apply(dim0=m, dim1=kk)[0]
    if swizzle is Swizzle.NONE:
        lbo, sbo = at(0, 8), at(8, 0)
    else:
        lbo, sbo = at(swizzle.width // eb, 0), at(0, 8)
    offsets = mma.descriptor_offsets(descriptor(0, lbo, sbo, swizzle.value), k, mn * eb, mn_major=True)
    for m, kk in itertools.product(range(mn), range(k)):
        assert offsets[kk, m * eb] == at(m, kk)


def test_nvidia_gemm_descriptors():
    """The descriptors NVIDIA's tileiras gives a 128x128x32 f16 GEMM on sm_90: A K-major
    with a 64-byte swizzle (SBO 512: 8 rows of 64 bytes), B N-major with a 128-byte
    swizzle (LBO 4096: the next 64 columns after 32 K-rows; SBO 1024: the next 8 K-rows)."""
    a = mma.descriptor_offsets(0x8000002000010000, 64, 32)
    assert a[1, 2] == 64 + 2 and a[10, 2] == (512 + 128 + 2) ^ 16      # rows 2, 3 of a 64-byte atom: phase 1
    b = mma.descriptor_offsets(0x4000004001000000, 16, 256, mn_major=True)     # 16 K-rows, 128 columns
    assert b[1, 0] == 128 ^ 16 and b[9, 0] == (1024 + 128) ^ 16 and b[0, 128] == 4096 and b[9, 130] == 4096 + 1154 ^ 16
