"""tcgen05 in the PTX emulator on hand-written PTX: tensor-memory allocation, the 32x32b
and 16x32bx2 loads and stores (with 16-bit packing), and an MMA from shared-memory
descriptors into tensor memory (K-major or MN-major operands), checked against numpy.  NVIDIA's own sm_100 gemm PTX is
checked against the interpreter in test_differential."""
from __future__ import annotations

import numpy as np
import pytest
from test_emulate_mma import copy_to_shared, interleaved_image

from tileiras.emulate import launch

HEADER = ".version 8.7\n.target sm_100a\n.address_size 64\n"
REGS = ".reg .pred %p<8>;\n.reg .b16 %rs<8>;\n.reg .b32 %r<200>;\n.reg .b64 %rd<16>;\n"


def kernel(body: str, params: str = ".param .u64 k_in, .param .u64 k_out", threads: int = 32) -> str:
    return (HEADER + ".shared .align 1024 .b8 smem[8192];\n"
            f".visible .entry k({params})\n.reqntid {threads}\n{{\n{REGS}{body}\nret;\n}}\n")


ALLOC = """
mov.u32 %r1, %tid.x;
mov.u32 %r2, smem;
tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r2], {cols};
tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r2+4], 64;
ld.shared.b32 %r3, [%r2];
ld.shared.b32 %r4, [%r2+4];
"""


def test_alloc_hands_out_disjoint_columns():
    body = ALLOC.format(cols=128) + """
ld.param.b64 %rd1, [k_out];
st.global.b32 [%rd1], %r3;
st.global.b32 [%rd1+4], %r4;
tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 128;
tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
"""
    out = np.zeros(2, np.uint32)
    launch(kernel(body), "k", (1,), [np.zeros(1, np.uint32), out]).check()
    assert list(out) == [0, 128]


def test_alloc_of_a_bad_column_count_traps():
    result = launch(kernel(ALLOC.format(cols=48)), "k", (1,), [np.zeros(1, np.uint32), np.zeros(1, np.uint32)])
    assert result.trap is not None and result.trap.kind == "tcgen05" and "48 columns" in str(result.trap)


def test_dealloc_of_unallocated_columns_traps():
    body = ALLOC.format(cols=32) + "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r4, 128;\n"
    result = launch(kernel(body), "k", (1,), [np.zeros(1, np.uint32), np.zeros(1, np.uint32)])
    assert result.trap is not None and "not allocated" in str(result.trap)


def vec(first: int, n: int) -> str:
    return "{" + ", ".join(f"%r{first + i}" for i in range(n)) + "}"


def roundtrip(st: str, ld: str, regs_in: int, regs_out: int, data: np.ndarray) -> np.ndarray:
    """Lane l stores registers from in[r * 32 + l] with ``st``, reads back with ``ld`` into
    out[r * 32 + l]; the tensor memory starts zeroed."""
    loads = "\n".join(f"ld.global.b32 %r{20 + r}, [%rd3+{128 * r}];" for r in range(regs_in))
    stores = "\n".join(f"st.global.b32 [%rd4+{128 * r}], %r{100 + r};" for r in range(regs_out))
    body = ALLOC.format(cols=128) + f"""
mul.wide.u32 %rd2, %r1, 4;
ld.param.b64 %rd1, [k_in];
add.s64 %rd3, %rd1, %rd2;
ld.param.b64 %rd1, [k_out];
add.s64 %rd4, %rd1, %rd2;
{loads}
{st.replace("REGS", vec(20, regs_in))}
tcgen05.wait::st.sync.aligned;
{ld.replace("REGS", vec(100, regs_out))}
tcgen05.wait::ld.sync.aligned;
{stores}
"""
    out = np.zeros((regs_out, 32), np.uint32)
    launch(kernel(body), "k", (1,), [data, out]).check()
    return out


def test_32x32b_store_then_16x32bx2_load():
    """A 32x32b store puts lane l's register r in lane l, column r; a 16x32bx2 load with a
    split of 2 gives warp lane l the tensor lane l % 16, columns r + 2 (l / 16)."""
    data = np.arange(4 * 32, dtype=np.uint32).reshape(4, 32) + 1000
    out = roundtrip("tcgen05.st.sync.aligned.32x32b.x4.b32 [%r3], REGS;",
                    "tcgen05.ld.sync.aligned.16x32bx2.x2.b32 REGS, [%r3], 2;", 4, 2, data)
    lane = np.arange(32)
    for r in range(2):
        np.testing.assert_array_equal(out[r], data[r + 2 * (lane // 16), lane % 16])


def test_16x32bx2_unpack_store_then_pack_load():
    data = np.arange(2 * 32, dtype=np.uint32).reshape(2, 32) * 0x10001 + 0x00020001
    out = roundtrip("tcgen05.st.sync.aligned.16x32bx2.x2.unpack::16b.b32 [%r3], 8, REGS;",
                    "tcgen05.ld.sync.aligned.16x32bx2.x2.pack::16b.b32 REGS, [%r3], 8;", 2, 2, data)
    # warp lanes l and l + 16 share tensor lane l, in columns 0-3 and 8-11 (the split)
    np.testing.assert_array_equal(out, data)


def test_tensor_memory_access_out_of_range_traps():
    body = ALLOC.format(cols=32) + "add.s32 %r5, %r3, 510;\ntcgen05.ld.sync.aligned.32x32b.x4.b32 {%r6, %r7, %r8, %r9}, [%r5];\n"
    result = launch(kernel(body), "k", (1,), [np.zeros(1, np.uint32), np.zeros(1, np.uint32)])
    assert result.trap is not None and "column 513" in str(result.trap)


def sm100_descriptor(start: int, lbo: int, sbo: int) -> int:
    return (start >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | 1 << 46


COMMIT_AND_WAIT = """
tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r2+8008];
ISSUED:
WAIT:
mbarrier.try_wait.parity.shared.b64 %p5, [%r2+8008], 0;
@!%p5 bra WAIT;
"""
#: the planted bug: a barrier instead of the commit's mbarrier, so the MMA may still run
NO_COMMIT = """
ISSUED:
bar.sync 0;
"""


def mma_m128(accumulate: int, wait: str, a_mn_major: bool = False, b_mn_major: bool = False,
             order: str = "bar.sync 0;"):
    """kind::f16, M = 128, N = 16, K = 16: D = A B (+ D) in tensor memory, row i in lane i;
    each of the 4 warps reads its 32 lanes back with 32x32b after ``wait``.  An operand
    is K-major (rows of M or N, 16 bytes of K a core matrix row, the next 16 bytes of K
    LBO = 128 bytes on, the next 8 rows SBO on), or ``*_mn_major`` (the instruction
    descriptor's transpose bit: rows of K, 16 bytes of M or N a core matrix row, the next
    16 bytes of M or N SBO = 128 bytes on, the next 8 steps of K LBO on).  Returns
    (launch result, output, expected).  ``order``: what orders the warps' stores of C
    before thread 0's MMA."""
    rng = np.random.default_rng(3)
    a = (rng.integers(-8, 9, (128, 16)) / 4).astype(np.float16)
    bt = (rng.integers(-8, 9, (16, 16)) / 4).astype(np.float16)        # B as N rows of K
    c = rng.integers(-4, 5, (128, 16)).astype(np.float32)
    a_image, a_desc = ((interleaved_image(np.ascontiguousarray(a.T), 128, 2048, 8192), sm100_descriptor(0, 2048, 128))
                       if a_mn_major else (interleaved_image(a, 128, 256, 8192), sm100_descriptor(0, 128, 256)))
    b_image, b_desc = ((interleaved_image(np.ascontiguousarray(bt.T), 128, 256, 8192), sm100_descriptor(4096, 256, 128))
                       if b_mn_major else (interleaved_image(bt, 128, 256, 8192), sm100_descriptor(4096, 128, 256)))
    image = a_image | np.roll(b_image, 4096)
    idesc = 1 << 4 | (16 >> 3) << 17 | (128 >> 4) << 24          # f32 = f16 x f16, N 16, M 128
    idesc |= a_mn_major << 15 | b_mn_major << 16
    body = f"""
mov.u32 %r1, %tid.x;
shr.u32 %r40, %r1, 5;
mov.u32 %r2, smem;
{copy_to_shared("k_in", 16)}
setp.ne.u32 %p3, %r1, 0;
@%p3 bra INITED;
mbarrier.init.shared.b64 [%r2+8008], 1;
INITED:
setp.ne.u32 %p2, %r40, 0;
@%p2 bra ALLOCATED;
tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r2+8000], 32;
ALLOCATED:
bar.sync 0;
ld.shared.b32 %r3, [%r2+8000];
shl.b32 %r41, %r40, 21;
add.s32 %r42, %r3, %r41;
mul.wide.u32 %rd9, %r1, 4;
ld.param.b64 %rd10, [k_c];
add.s64 %rd11, %rd10, %rd9;
{chr(10).join(f"ld.global.b32 %r{60 + j}, [%rd11+{512 * j}];" for j in range(16))}
tcgen05.st.sync.aligned.32x32b.x16.b32 [%r42], {vec(60, 16)};
tcgen05.wait::st.sync.aligned;
{order}
setp.ne.u32 %p3, %r1, 0;
@%p3 bra ISSUED;
mov.b64 %rd4, {a_desc};
mov.b64 %rd5, {b_desc};
mov.b32 %r20, {idesc};
setp.ne.u32 %p4, {accumulate}, 0;
tcgen05.mma.cta_group::1.kind::f16 [%r3], %rd4, %rd5, %r20, %p4;
{wait}
tcgen05.ld.sync.aligned.32x32b.x16.b32 {vec(100, 16)}, [%r42];
tcgen05.wait::ld.sync.aligned;
ld.param.b64 %rd6, [k_out];
add.s64 %rd7, %rd6, %rd9;
{chr(10).join(f"st.global.b32 [%rd7+{512 * j}], %r{100 + j};" for j in range(16))}
"""
    out = np.zeros((16, 128), np.float32)
    ptx = kernel(body, ".param .u64 k_in, .param .u64 k_c, .param .u64 k_out", threads=128)
    result = launch(ptx, "k", (1,), [image, np.ascontiguousarray(c.T), out])
    expected = a.astype(np.float64) @ bt.astype(np.float64).T + (c if accumulate else 0)
    return result, out, expected


@pytest.mark.parametrize("accumulate", [0, 1])
def test_mma_m128_from_shared_descriptors(accumulate):
    result, out, expected = mma_m128(accumulate, COMMIT_AND_WAIT)
    result.check()
    np.testing.assert_allclose(out.T, expected.astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("a_mn_major, b_mn_major", [(False, True), (True, False), (True, True)])
def test_mma_m128_with_mn_major_operands(a_mn_major, b_mn_major):
    """The transpose bits: an operand lying M- or N-contiguous (as NVIDIA's sm_100 GEMMs
    land a K x N B) is read along its rows of K."""
    result, out, expected = mma_m128(1, COMMIT_AND_WAIT, a_mn_major, b_mn_major)
    result.check()
    np.testing.assert_allclose(out.T, expected.astype(np.float32), rtol=1e-6)


def test_reading_an_mma_result_before_its_commit_completes_traps():
    """Without the commit's mbarrier wait the MMA may still be running when tcgen05.ld
    reads its cells: the emulator names the load, the MMA and the missing wait."""
    result, _, _ = mma_m128(0, NO_COMMIT)
    assert result.trap is not None and result.trap.kind == "async"
    message = result.trap.message
    assert "tcgen05.ld.sync.aligned.32x32b.x16.b32" in message and "tcgen05.mma.cta_group::1.kind::f16" in message
    assert "reads tensor memory lane 0, column 0" in message and "tcgen05.commit" in message


@pytest.mark.parametrize("accumulate", [1, 0], ids=["reads", "overwrites"])
def test_an_mma_unordered_after_other_warps_stores_is_a_race(accumulate):
    """The race detector covers tensor memory: warps 1-3 store C into their lanes and thread
    0's MMA reads (accumulating) or overwrites those cells with no barrier between them.
    The emulator ran the stores first, so the result is right: only the missing ordering
    is wrong, and it is reported, naming both instructions."""
    result, out, expected = mma_m128(accumulate, COMMIT_AND_WAIT, order="")
    assert result.trap is not None and result.trap.kind == "race"
    message = result.trap.message
    assert message.startswith("tensor-memory race at lane 32, column 0")
    assert "tcgen05.mma.cta_group::1.kind::f16" in message and "tcgen05.st.sync.aligned.32x32b.x16.b32" in message
    assert ("reads it" if accumulate else "writes it") in message
