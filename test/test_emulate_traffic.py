"""Global-memory traffic counted by the emulator (tileiras/emulate/traffic.py): requests and
distinct 32-byte sectors per warp-level access, as Nsight Compute counts them."""
from __future__ import annotations

import numpy as np
import pytest

from test_emulate_ptx import VADD, kernel

from tileiras.emulate import launch
from tileiras.emulate.traffic import Traffic

#: thread t copies element t * STRIDE: STRIDE 1 coalesces, 4 touches four times the sectors
STRIDED_COPY = """
ld.param.b64 %rd1, [k_param_0];
ld.param.b64 %rd2, [k_param_1];
ld.param.b32 %r1, [k_param_2];
mov.u32 %r4, %tid.x;
mul.lo.s32 %r5, %r4, %r1;
mul.wide.s32 %rd4, %r5, 4;
add.s64 %rd5, %rd1, %rd4;
add.s64 %rd6, %rd2, %rd4;
ld.global.b32 %r6, [%rd5];
st.global.b32 [%rd6], %r6;
ret;
"""
COPY = kernel(STRIDED_COPY, ".param .u64 .ptr .global .align 1 k_param_0, .param .u64 .ptr .global .align 1 k_param_1,"
                            ".param .u32 k_param_2", directives=".reqntid 128")

#: each thread loads a v4 of four consecutive floats: a warp reads 512 contiguous bytes
VECTOR_LOAD = kernel("""
ld.param.b64 %rd1, [k_param_0];
mov.u32 %r4, %tid.x;
mul.wide.s32 %rd4, %r4, 16;
add.s64 %rd5, %rd1, %rd4;
ld.global.v4.b32 {%r6, %r7, %r8, %r9}, [%rd5];
ret;
""", ".param .u64 .ptr .global .align 1 k_param_0", directives=".reqntid 128")


@pytest.mark.parametrize("stride,sectors_per_request", [(1, 4), (2, 8), (4, 16), (8, 32), (16, 32)])
def test_strided_access_sectors(stride, sectors_per_request):
    src = np.arange(128 * stride, dtype=np.float32)
    dst = np.zeros_like(src)
    t = launch(COPY, "k", (1,), [src, dst, stride], traffic=True).check().traffic
    assert (t.loads.requests, t.stores.requests) == (4, 4)          # 4 warps, one access each
    assert t.loads.sectors_per_request == t.stores.sectors_per_request == sectors_per_request
    assert t.loads.bytes == 128 * 4
    assert t.loads.efficiency == pytest.approx(4 / (32 * sectors_per_request / 32))
    assert np.array_equal(dst[::stride], src[::stride])


def test_vector_loads_count_their_whole_width():
    t = launch(VECTOR_LOAD, "k", (1,), [np.zeros(512, np.float32)], traffic=True).check().traffic
    assert (t.loads.requests, t.loads.sectors, t.loads.bytes) == (4, 64, 2048)
    assert t.loads.efficiency == 1.0 and t.stores.requests == 0


def test_inactive_threads_and_partial_warps():
    """Predicated-off threads neither request nor touch sectors (the tail of vector add)."""
    n = 200
    a, b = np.ones(n, np.float32), np.ones(n, np.float32)
    t = launch(VADD, "k", (2,), [a, b, np.zeros(n, np.float32), n], traffic=True).check().traffic
    # 200 threads active: warps 0-5 full, warp 6 has 8 threads (one sector per array)
    assert t.stores.requests == 7 and t.stores.sectors == 6 * 4 + 1
    assert t.loads.requests == 14 and t.loads.bytes == 2 * 200 * 4


def test_off_by_default():
    assert launch(VADD, "k", (1,), [np.ones(4, np.float32)] * 3 + [4]).traffic is None
    assert Traffic().loads.efficiency == 1.0


# -- shared memory: bank conflicts ------------------------------------------------------------
def shared_kernel(access: str, stride_bytes: int, width: int = 4) -> str:
    """Thread t stores then loads shared memory at t * stride_bytes (``access``: st/ld
    suffix, e.g. ``b32`` or ``v4.b32``)."""
    regs = "{%r6, %r7, %r8, %r9}" if access.startswith("v4") else "%r6"
    return kernel(f"""
mov.u32 %r4, %tid.x;
mul.lo.s32 %r5, %r4, {stride_bytes};
mov.u32 %r10, smem;
add.s32 %r11, %r10, %r5;
mov.u32 %r6, 0;
mov.u32 %r7, 0;
mov.u32 %r8, 0;
mov.u32 %r9, 0;
st.shared.{access} [%r11], {regs};
ld.shared.{access} {regs}, [%r11];
ret;
""", "", directives=".reqntid 32", extra=".shared .align 16 .b8 smem[8192];\n")


@pytest.mark.parametrize("stride, wavefronts", [(4, 1), (8, 2), (16, 4), (128, 32), (132, 1), (0, 1)])
def test_shared_bank_conflicts(stride, wavefronts):
    """32 threads, 4 bytes each: a stride of 2 words puts two threads' words in each used
    bank (2 wavefronts), 32 words (128 bytes) all in one bank; 33 words is conflict-free,
    and one word for every thread is a broadcast."""
    t = launch(shared_kernel("b32", stride), "k", (1,), [], traffic=True).check().traffic
    assert (t.shared_loads.requests, t.shared_stores.requests) == (1, 1)
    assert t.shared_loads.wavefronts == t.shared_stores.wavefronts == wavefronts
    assert t.shared_loads.ideal_wavefronts == 1
    assert t.shared_loads.conflicts == wavefronts - 1
    assert t.loads.requests == 0                       # global counts untouched


def test_shared_vector_accesses_need_their_bytes_over_128():
    t = launch(shared_kernel("v4.b32", 16), "k", (1,), [], traffic=True).check().traffic
    assert (t.shared_loads.wavefronts, t.shared_loads.ideal_wavefronts) == (4, 4)
    t = launch(shared_kernel("v4.b32", 32), "k", (1,), [], traffic=True).check().traffic
    assert (t.shared_loads.wavefronts, t.shared_loads.ideal_wavefronts) == (8, 4)


@pytest.mark.parametrize("pitch, wavefronts", [(64, 16), (80, 4), (128, 32)])
def test_ldmatrix_rows_conflict_with_the_row_pitch(pitch, wavefronts):
    """ldmatrix.x4 reads 32 rows of 16 bytes, ``pitch`` bytes apart (512 bytes: 4 passes
    at best).  A 64-byte pitch (32 f16 a row) puts every other row in the same 4 banks
    (16 rows a bank), a 128-byte one every row (32); 80 bytes spreads 8 rows over all 32
    banks."""
    body = f"""
mov.u32 %r4, %tid.x;
mul.lo.s32 %r5, %r4, {pitch};
mov.u32 %r10, smem;
add.s32 %r11, %r10, %r5;
ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%r6, %r7, %r8, %r9}}, [%r11];
ret;
"""
    ptx = kernel(body, "", directives=".reqntid 32", extra=".shared .align 16 .b8 smem[8192];\n")
    t = launch(ptx, "k", (1,), [], traffic=True).check().traffic
    assert t.shared_loads.requests == 1
    assert (t.shared_loads.wavefronts, t.shared_loads.ideal_wavefronts) == (wavefronts, 4)


def test_multimem_reductions_count_as_stores():
    """multimem.red moves its vector to memory like a store (it once failed to count)."""
    body = """
ld.param.b64 %rd1, [k_param_0];
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
multimem.red.relaxed.sys.global.add.u32 [%rd3], %r1;
ret;
"""
    out = np.zeros(32, np.uint32)
    t = launch(kernel(body, ".param .u64 k_param_0", directives=".reqntid 32"), "k", (1,), [out],
               traffic=True).check().traffic
    assert (t.stores.requests, t.stores.sectors, t.stores.bytes) == (1, 4, 128)
    assert list(out[:4]) == [0, 1, 2, 3]


#: each thread copies 16 bytes to shared memory with ``cp.async``: a warp reads 512
#: contiguous bytes of global memory, as the ``ld.global.v4`` of VECTOR_LOAD does
ASYNC_COPY = kernel("""
.shared .align 16 .b8 smem[2048];
ld.param.b64 %rd1, [k_param_0];
mov.u32 %r4, %tid.x;
mul.wide.s32 %rd4, %r4, 16;
add.s64 %rd5, %rd1, %rd4;
mov.u32 %r1, smem;
shl.b32 %r2, %r4, 4;
add.s32 %r3, %r1, %r2;
cp.async.cg.shared.global [%r3], [%rd5], 16;
cp.async.wait_all;
ret;
""", ".param .u64 .ptr .global .align 1 k_param_0", directives=".reqntid 128")


def test_async_copies_count_the_sectors_they_read():
    """``cp.async`` reads global memory as a load does (the benchmark compares our rings'
    copies with NVIDIA's loads and TMA boxes: uncounted, a ring looked 16 times cheaper)."""
    t = launch(ASYNC_COPY, "k", (1,), [np.zeros(512, np.float32)], traffic=True).check().traffic
    assert (t.loads.requests, t.loads.sectors, t.loads.bytes) == (4, 64, 2048)
    assert t.stores.requests == 0
