"""mma.sync in the PTX emulator, on hand-written PTX: each lane loads its fragment
registers, one warp-wide mma runs, each lane stores its accumulator registers.  The test
packs the fragments from numpy matrices with the PTX ISA's per-element tables (written
out here element by element, independently of the emulator's word pattern) and checks D
against numpy's A @ B + C."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tileiras.emulate import launch

HEADER = ".version 8.7\n.target sm_120a\n.address_size 64\n"


# -- the PTX ISA's fragment tables, element by element ----------------------------------------
def a_16bit(lane: int, i: int) -> tuple[int, int]:
    """m16n8k16 .f16/.bf16 A element a_i (i < 8): (row, column)."""
    g, t = lane // 4, lane % 4
    return g + (8 if i in (2, 3, 6, 7) else 0), 2 * t + (i & 1) + (8 if i >= 4 else 0)


def b_16bit(lane: int, i: int) -> tuple[int, int]:
    g, t = lane // 4, lane % 4
    return 2 * t + (i & 1) + (8 if i >= 2 else 0), g


def a_8bit(lane: int, i: int) -> tuple[int, int]:
    """m16n8k32 8-bit A element a_i (i < 16)."""
    g, t = lane // 4, lane % 4
    return g + (8 if 4 <= i < 8 or i >= 12 else 0), 4 * t + (i & 3) + (16 if i >= 8 else 0)


def b_8bit(lane: int, i: int) -> tuple[int, int]:
    g, t = lane // 4, lane % 4
    return 4 * t + (i & 3) + (16 if i >= 4 else 0), g


def a_tf32(lane: int, i: int) -> tuple[int, int]:
    """m16n8k8 .tf32 A element a_i (i < 4)."""
    g, t = lane // 4, lane % 4
    return g + (8 if i in (1, 3) else 0), t + (4 if i >= 2 else 0)


def b_tf32(lane: int, i: int) -> tuple[int, int]:
    g, t = lane // 4, lane % 4
    return t + (4 if i else 0), g


def c_elem(lane: int, i: int) -> tuple[int, int]:
    g, t = lane // 4, lane % 4
    return g + (8 if i >= 2 else 0), 2 * t + (i & 1)


def pack(matrix: np.ndarray, where, count: int, bits: int) -> np.ndarray:
    """Fragment registers, [register, lane] as uint32, of ``count`` elements per lane."""
    raw = matrix.view({8: np.uint8, 16: np.uint16, 32: np.uint32}[bits]).astype(np.uint32)
    per = 32 // bits
    out = np.zeros((count // per, 32), np.uint32)
    for lane in range(32):
        for i in range(count):
            out[i // per, lane] |= raw[where(lane, i)] << np.uint32(bits * (i % per))
    return out


def unpack_c(regs: np.ndarray, dtype) -> np.ndarray:
    out = np.zeros((16, 8), dtype)
    flat = regs.view(dtype) if dtype != np.float16 else regs.view(np.float16).reshape(2, 32, 2)
    for lane in range(32):
        for i in range(4):
            out[c_elem(lane, i)] = flat[i // 2, lane, i % 2] if dtype == np.float16 else flat[i, lane]
    return out


def pack_c(c: np.ndarray) -> np.ndarray:
    if c.dtype == np.float16:
        return pack(c, c_elem, 4, 16)
    return pack(c.view(np.uint32), c_elem, 4, 32)


# -- the kernel -------------------------------------------------------------------------------
def mma_kernel(opcode: str, a_regs: int, b_regs: int, c_regs: int, scale: str = "",
               guard: str = "") -> str:
    """Lane l loads register r of operand X from X[r * 32 + l]; stores D likewise."""
    def loads(name: str, param: str, count: int, first: int) -> str:
        return "\n".join(f"ld.param.b64 %rd1, [{param}];\nadd.s64 %rd2, %rd1, %rd9;\n"
                         f"ld.global.b32 %r{first + r}, [%rd2+{r * 128}];" for r in range(count))
    vec = lambda first, n: "{" + ", ".join(f"%r{first + i}" for i in range(n)) + "}" 
    stores = "\n".join(f"st.global.b32 [%rd3+{r * 128}], %r{40 + r};" for r in range(c_regs))
    body = f"""
mov.u32 %r60, %tid.x;
mul.wide.u32 %rd9, %r60, 4;
{loads('a', 'k_a', a_regs, 0)}
{loads('b', 'k_b', b_regs, 10)}
{loads('c', 'k_c', c_regs, 20)}
{guard}
{opcode} {vec(40, c_regs)}, {vec(0, a_regs)}, {vec(10, b_regs)}, {vec(20, c_regs)}{scale};
ld.param.b64 %rd1, [k_d];
add.s64 %rd3, %rd1, %rd9;
{stores}
DONE:
ret;
"""
    return (HEADER + ".visible .entry k(.param .u64 k_a, .param .u64 k_b, .param .u64 k_c, .param .u64 k_d)\n"
            ".reqntid 32\n{\n.reg .pred %p<4>;\n.reg .b16 %rs<8>;\n.reg .b32 %r<64>;\n.reg .b64 %rd<16>;\n"
            + body + "}\n")


def run(opcode, a, b, c, a_where, b_where, a_count, b_count, bits_a, bits_b, scale="", scale_setup=""):
    fa, fb, fc = pack(a, a_where, a_count, bits_a), pack(b, b_where, b_count, bits_b), pack_c(c)
    d = np.zeros_like(fc)
    ptx = mma_kernel(opcode, len(fa), len(fb), len(fc), scale, scale_setup)
    result = launch(ptx, "k", (1,), [fa, fb, fc, d]).check()
    assert result.instruction_counts[opcode] == 32
    return unpack_c(d, c.dtype if c.dtype != np.int32 else np.int32)


RNG = np.random.default_rng(7)


@pytest.mark.parametrize("ab", ["f16", "bf16"])
def test_m16n8k16_16bit_f32(ab):
    dtype = np.float16 if ab == "f16" else ml_dtypes.bfloat16
    a = (RNG.integers(-8, 9, (16, 16)) / 4).astype(dtype)
    b = (RNG.integers(-8, 9, (16, 8)) / 4).astype(dtype)
    c = RNG.standard_normal((16, 8)).astype(np.float32)
    d = run(f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32", a, b, c, a_16bit, b_16bit, 8, 4, 16, 16)
    expected = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float32)
    np.testing.assert_array_equal(d, expected)


def test_m16n8k16_f16_accumulator():
    a = (RNG.integers(-4, 5, (16, 16)) / 2).astype(np.float16)
    b = (RNG.integers(-4, 5, (16, 8)) / 2).astype(np.float16)
    c = (RNG.integers(-4, 5, (16, 8))).astype(np.float16)
    d = run("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", a, b, c, a_16bit, b_16bit, 8, 4, 16, 16)
    np.testing.assert_array_equal(d, (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float16))


def test_m16n8k8_tf32_drops_low_mantissa_bits():
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    b = RNG.standard_normal((8, 8)).astype(np.float32)
    c = np.zeros((16, 8), np.float32)
    d = run("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", a.view(np.uint32).view(np.float32), b, c,
            a_tf32, b_tf32, 4, 2, 32, 32)
    tf32 = lambda x: (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    np.testing.assert_allclose(d, tf32(a) @ tf32(b), rtol=1e-6, atol=1e-6)
    assert not np.allclose(d, a.astype(np.float64) @ b, rtol=1e-7, atol=0)


def test_m16n8k32_fp8_mixed_formats():
    a = RNG.uniform(-4, 4, (16, 32)).astype(ml_dtypes.float8_e4m3fn)
    b = RNG.uniform(-4, 4, (32, 8)).astype(ml_dtypes.float8_e5m2)
    c = RNG.standard_normal((16, 8)).astype(np.float32)
    d = run("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32", a, b, c, a_8bit, b_8bit, 16, 8, 8, 8)
    expected = a.astype(np.float64) @ b.astype(np.float64) + c
    np.testing.assert_allclose(d, expected.astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("satfinite", [False, True])
def test_m16n8k32_s8_u8_wraps_or_saturates(satfinite):
    rng = np.random.default_rng(5)      # its own draws: the module's RNG depends on test order
    a = rng.integers(-128, 128, (16, 32)).astype(np.int8)
    b = rng.integers(0, 256, (32, 8)).astype(np.uint8)
    c = rng.integers(-1000, 1000, (16, 8)).astype(np.int32)
    a[0, :] = 127              # row 0's products are positive: with c at the top, it overflows
    c[0, :] = 2**31 - 1
    sat = ".satfinite" if satfinite else ""
    d = run(f"mma.sync.aligned.m16n8k32.row.col{sat}.s32.s8.u8.s32", a, b, c, a_8bit, b_8bit, 16, 8, 8, 8)
    exact = a.astype(np.int64) @ b.astype(np.int64) + c
    expected = np.clip(exact, -2**31, 2**31 - 1) if satfinite else (exact + 2**31) % 2**32 - 2**31
    assert (exact > 2**31 - 1).any()
    np.testing.assert_array_equal(d, expected.astype(np.int32))


@pytest.mark.parametrize("byte", [0, 1])
def test_block_scaled_mxf8f6f4(byte):
    """Row i of A takes the scale of lane 4 (i % 8) + i / 8, column j of B that of lane
    4 j (thread selectors 0), byte ``byte`` of the lane's scale register: the lanes
    NVIDIA's tileiras gives the scales to (its sm_120 mmaf_scaled PTX agrees with the
    interpreter only so)."""
    a = RNG.uniform(-2, 2, (16, 32)).astype(ml_dtypes.float8_e4m3fn)
    b = RNG.uniform(-2, 2, (32, 8)).astype(ml_dtypes.float8_e4m3fn)
    c = np.zeros((16, 8), np.float32)
    sa = RNG.integers(124, 131, 16)          # e8m0 codes: 2^-3 .. 2^3
    sb = RNG.integers(124, 131, 8)
    lane_a = np.full(32, 127 * 0x01010101, np.int64)
    lane_b = np.full(32, 127 * 0x01010101, np.int64)
    for i in range(16):
        lane_a[4 * (i % 8) + i // 8] = (lane_a[4 * (i % 8) + i // 8] & ~(0xFF << 8 * byte)) | sa[i] << 8 * byte
    for j in range(8):
        lane_b[4 * j] = (lane_b[4 * j] & ~(0xFF << 8 * byte)) | sb[j] << 8 * byte
    setup = "\n".join([
        "mov.u32 %r60, %tid.x;", "mul.wide.u32 %rd10, %r60, 4;",
        "ld.param.b64 %rd11, [k_d];", "add.s64 %rd11, %rd11, %rd10;",
        "ld.global.b32 %r30, [%rd11];", "ld.global.b32 %r31, [%rd11+128];",
        f"mov.b16 %rs1, {byte};", "mov.b16 %rs2, 0;"])
    opcode = "mma.sync.aligned.kind::mxf8f6f4.block_scale.scale_vec::1X.m16n8k32.row.col.f32.e4m3.e4m3.f32.ue8m0"
    fa, fb, fc = pack(a, a_8bit, 16, 8), pack(b, b_8bit, 8, 8), pack_c(c)
    # rows 0 and 1 of D's buffer hold the scale registers until D overwrites them
    out = np.zeros((4, 32), np.uint32)
    out[0], out[1] = lane_a, lane_b
    ptx = mma_kernel(opcode, 4, 2, 4, ", {%r30}, {%rs1, %rs2}, {%r31}, {%rs1, %rs2}", setup)
    launch(ptx, "k", (1,), [fa, fb, fc, out]).check()
    expected = ((a.astype(np.float64) * 2.0 ** (sa[:, None] - 127))
                @ (b.astype(np.float64) * 2.0 ** (sb[None, :] - 127))).astype(np.float32)
    unscaled = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    got = unpack_c(out, np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert not np.allclose(got, unscaled)


def test_partial_warp_traps():
    a = np.zeros((16, 16), np.float16)
    b = np.zeros((16, 8), np.float16)
    c = np.zeros((16, 8), np.float32)
    fa, fb, fc = pack(a, a_16bit, 8, 16), pack(b, b_16bit, 4, 16), pack_c(c)
    ptx = mma_kernel("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 4, 2, 4,
                     guard="setp.ge.u32 %p1, %r60, 16;\n@%p1 bra DONE;")
    result = launch(ptx, "k", (1,), [fa, fb, fc, np.zeros_like(fc)])
    assert result.trap is not None and result.trap.kind == "mma"
    assert "16 threads" in str(result.trap)


def test_a_warp_reconverges_before_mma_sync_whose_join_lies_before_its_arms():
    """Lanes 1-31 branch back to the ``mma.sync`` (the join, lower in the code, as a loop
    latch is) while lane 0 still runs its own arm further on: the emulator holds them at
    the instruction until lane 0 arrives, as ptxas reconverges the warp, and the product
    is the whole warp's (it used to run the 31 lanes alone and trap)."""
    a = RNG.standard_normal((16, 16)).astype(np.float16)
    b = RNG.standard_normal((16, 8)).astype(np.float16)
    c = RNG.standard_normal((16, 8)).astype(np.float32)
    fa, fb, fc = pack(a, a_16bit, 8, 16), pack(b, b_16bit, 4, 16), pack_c(c)
    d = np.zeros_like(fc)
    opcode = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    ptx = mma_kernel(opcode, len(fa), len(fb), len(fc), guard="setp.eq.u32 %p1, %r60, 0;\nbra.uni SPLIT;\nJOIN:")
    ptx = ptx.replace("DONE:\nret;\n", "DONE:\nret;\nSPLIT:\n@%p1 bra EXTRA;\nbra.uni JOIN;\nEXTRA:\n"
                      "add.u32 %r61, %r60, 1;\nbra.uni JOIN;\n")
    result = launch(ptx, "k", (1,), [fa, fb, fc, d]).check()
    assert result.instruction_counts[opcode] == 32
    expected = a.astype(np.float32) @ b.astype(np.float32) + c
    np.testing.assert_allclose(unpack_c(d, np.float32), expected, rtol=1e-3, atol=1e-3)


# -- wgmma ------------------------------------------------------------------------------------
def descriptor(start: int, lbo: int, sbo: int, swizzle: int = 0) -> int:
    return (start >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | swizzle << 62


def interleaved_image(x: np.ndarray, lbo: int, sbo: int, size: int) -> np.ndarray:
    """A K-major operand (rows x K f16) as 8-row x 16-byte core matrices without swizzle:
    core matrix (i, j) at i * sbo + j * lbo, its row r 16 bytes at + 16 r."""
    image = np.zeros(size, np.uint8)
    raw = x.view(np.uint8)
    for i in range(x.shape[0] // 8):
        for j in range(x.shape[1] * 2 // 16):
            for r in range(8):
                at = i * sbo + j * lbo + 16 * r
                image[at:at + 16] = raw[8 * i + r, 16 * j:16 * j + 16]
    return image


def swizzled_image(x: np.ndarray, sbo: int, width: int, size: int) -> np.ndarray:
    """The same with a ``width``-byte swizzle: 8 rows of ``width`` bytes a group, the
    16-byte chunk c of row r of a group stored at chunk c ^ (r / (128 / width)) % (width / 16)."""
    image = np.zeros(size, np.uint8)
    raw = x.view(np.uint8)
    for row in range(x.shape[0]):
        for c in range(x.shape[1] * 2 // 16):
            r = row % 8
            phys = c ^ ((r * width // 128) % (width // 16))
            at = (row // 8) * sbo + r * width + 16 * phys
            image[at:at + 16] = raw[row, 16 * c:16 * c + 16]
    return image


def copy_to_shared(param: str, rounds: int) -> str:
    """PTX: 128 threads copy ``rounds`` x 512 bytes from the global array ``param`` to the
    start of ``smem`` (thread t moves bytes 4t..4t+3 of each 512), then a proxy fence (the
    async proxy ``wgmma`` and ``tcgen05.mma`` read through sees the stores) and a barrier.  Uses
    %r190-%r197, %rd14, %rd15, %p0; the thread id must be in %r1."""
    return f"""ld.param.b64 %rd14, [{param}];
mov.u32 %r190, 0;
COPY:
shl.b32 %r191, %r190, 9;
shl.b32 %r192, %r1, 2;
add.s32 %r193, %r191, %r192;
cvt.u64.u32 %rd15, %r193;
add.s64 %rd15, %rd14, %rd15;
ld.global.b32 %r194, [%rd15];
mov.u32 %r195, smem;
add.s32 %r196, %r195, %r193;
st.shared.b32 [%r196], %r194;
add.s32 %r190, %r190, 1;
setp.lt.u32 %p0, %r190, {rounds};
@%p0 bra COPY;
fence.proxy.async.shared::cta;
bar.sync 0;"""


def wgmma_kernel(opcode: str, n: int, guard: str = "") -> str:
    """128 threads copy the shared image (u32 per thread and round), then one wgmma with
    the descriptors and scale-d from parameters; thread t stores D register r at out[r * 128 + t]."""
    regs = n // 2
    dvec = "{" + ", ".join(f"%f{i}" for i in range(regs)) + "}"
    zero = "\n".join(f"ld.global.f32 %f{i}, [%rd7+{i * 512}];" for i in range(regs))
    stores = "\n".join(f"st.global.f32 [%rd8+{i * 512}], %f{i};" for i in range(regs))
    return HEADER.replace("sm_120a", "sm_90a") + f""".shared .align 1024 .b8 smem[16384];
.visible .entry k(.param .u64 k_image, .param .u64 k_c, .param .u64 k_out, .param .u64 k_da,
                  .param .u64 k_db, .param .u32 k_keep)
.reqntid 128
{{
.reg .pred %p<4>;
.reg .b32 %r<200>;
.reg .f32 %f<64>;
.reg .b64 %rd<16>;
mov.u32 %r1, %tid.x;
{copy_to_shared("k_image", 32)}
mul.wide.u32 %rd6, %r1, 4;
ld.param.b64 %rd4, [k_c];
add.s64 %rd7, %rd4, %rd6;
ld.param.b64 %rd5, [k_out];
add.s64 %rd8, %rd5, %rd6;
{zero}
ld.param.b64 %rd9, [k_da];
ld.param.b64 %rd10, [k_db];
ld.param.b32 %r9, [k_keep];
setp.ne.b32 %p2, %r9, 0;
{guard}
wgmma.fence.sync.aligned;
{opcode} {dvec}, %rd9, %rd10, %p2, 1, 1, 0, 0;
wgmma.commit_group.sync.aligned;
wgmma.wait_group.sync.aligned 0;
{stores}
DONE:
ret;
}}
"""


def wgmma_d(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of D register r of thread t, [r, t] (PTX ISA, wgmma D fragments)."""
    r, t = np.meshgrid(np.arange(n // 2), np.arange(128), indexing="ij")
    lane = t % 32
    return 16 * (t // 32) + lane // 4 + 8 * ((r % 4) // 2), 8 * (r // 4) + 2 * (lane % 4) + r % 2


@pytest.mark.parametrize("layout", ["interleave", "swizzle32", "swizzle64", "swizzle128"])
@pytest.mark.parametrize("keep", [1, 0])
def test_wgmma_descriptors(layout, keep):
    n, size = 16, 16384
    a = (RNG.integers(-8, 9, (64, 16)) / 4).astype(np.float16)
    bt = (RNG.integers(-8, 9, (n, 16)) / 4).astype(np.float16)        # B stored K-major: N rows of K
    b_at = 8192
    if layout == "interleave":       # core matrices along K 128 bytes apart, row groups 256
        image = interleaved_image(a, 128, 256, size) | np.roll(interleaved_image(bt, 128, 256, size), b_at)
        da, db = descriptor(0, 128, 256), descriptor(b_at, 128, 256)
    else:
        width = int(layout[7:])
        image = swizzled_image(a, 8 * width, width, size) | np.roll(swizzled_image(bt, 8 * width, width, size), b_at)
        mode = {128: 1, 64: 2, 32: 3}[width]
        da, db = descriptor(0, 16, 8 * width, mode), descriptor(b_at, 16, 8 * width, mode)
    rows, cols = wgmma_d(n)
    c = RNG.standard_normal((64, n)).astype(np.float32)
    c_regs = c[rows, cols]
    out = np.zeros_like(c_regs)
    ptx = wgmma_kernel(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16", n)
    launch(ptx, "k", (1,), [image, c_regs, out, np.uint64(da), np.uint64(db), np.uint32(keep)]).check()
    d = np.zeros((64, n), np.float32)
    d[rows, cols] = out
    expected = a.astype(np.float64) @ bt.astype(np.float64).T + (c if keep else 0)
    np.testing.assert_allclose(d, expected.astype(np.float32), rtol=1e-6)


def test_wgmma_partial_warpgroup_traps():
    ptx = wgmma_kernel("wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16", 16,
                       guard="setp.ge.u32 %p3, %r1, 64;\n@%p3 bra DONE;")
    result = launch(ptx, "k", (1,), [np.zeros(16384, np.uint8), np.zeros((8, 128), np.float32),
                                    np.zeros((8, 128), np.float32), np.uint64(0), np.uint64(0), np.uint32(1)])
    assert result.trap is not None and result.trap.kind == "wgmma" and "64 threads" in str(result.trap)
