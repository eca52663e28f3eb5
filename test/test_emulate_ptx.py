"""PTX emulator on hand-written PTX (LLVM NVPTX style): kernels checked against numpy and
known-answer tests for instruction semantics."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tileiras.emulate import launch, parse_ptx

HEADER = ".version 8.5\n.target sm_90a\n.address_size 64\n"


def kernel(body: str, params: str = "", regs: str = "", directives: str = ".reqntid 32",
           extra: str = "", name: str = "k") -> str:
    return (HEADER + extra + f"\n.visible .entry {name}({params})\n{directives}\n{{\n"
            + (regs or DEFAULT_REGS) + body + "\n}\n")


DEFAULT_REGS = """
.reg .pred %p<16>;
.reg .b16 %rs<16>;
.reg .b32 %r<64>;
.reg .b64 %rd<32>;
"""


def run_unary(op_lines: str, inputs: np.ndarray, out_dtype, in_width: int = 4, out_width: int = 4,
              ld: str = "ld.global.b32 %r1, [%rd3];", st: str = "st.global.b32 [%rd4], %r2;"):
    """One thread per element: r1 = in[i]; <op_lines> ; out[i] = r2."""
    body = f"""
ld.param.b64 %rd1, [k_in];
ld.param.b64 %rd2, [k_out];
mov.u32 %r10, %tid.x;
mov.u32 %r11, %ctaid.x;
mad.lo.s32 %r12, %r11, 32, %r10;
mul.wide.u32 %rd5, %r12, {in_width};
add.s64 %rd3, %rd1, %rd5;
mul.wide.u32 %rd6, %r12, {out_width};
add.s64 %rd4, %rd2, %rd6;
{ld}
{op_lines}
{st}
ret;
"""
    ptx = kernel(body, ".param .u64 k_in, .param .u64 k_out")
    n = inputs.size
    assert n % 32 == 0
    out = np.zeros(n, out_dtype)
    result = launch(ptx, "k", (n // 32,), [inputs, out]).check()
    return out, result


# ----------------------------------------------------------------------------- whole kernels
VADD = kernel("""
ld.param.b64 %rd1, [k_param_0];
ld.param.b64 %rd2, [k_param_1];
ld.param.b64 %rd3, [k_param_2];
ld.param.b32 %r1, [k_param_3];
mov.u32 %r2, %ctaid.x;
mov.u32 %r3, %ntid.x;
mov.u32 %r4, %tid.x;
mad.lo.s32 %r5, %r2, %r3, %r4;
setp.ge.s32 %p1, %r5, %r1;
@%p1 bra $L__BB0_2;
mul.wide.s32 %rd4, %r5, 4;
add.s64 %rd5, %rd1, %rd4;
add.s64 %rd6, %rd2, %rd4;
ld.global.b32 %r6, [%rd5];
ld.global.b32 %r7, [%rd6];
add.rn.f32 %r8, %r6, %r7;
add.s64 %rd7, %rd3, %rd4;
st.global.b32 [%rd7], %r8;
$L__BB0_2:
ret;
""", ".param .u64 .ptr .global .align 1 k_param_0, .param .u64 .ptr .global .align 1 k_param_1,"
     ".param .u64 .ptr .global .align 1 k_param_2, .param .u32 k_param_3", directives=".reqntid 128")


def test_vector_add_with_tail():
    rng = np.random.default_rng(0)
    n = 1000
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = np.full(n + 24, -1.0, np.float32)
    result = launch(VADD, "k", (8,), [a, b, c, n]).check()
    np.testing.assert_array_equal(c[:n], a + b)
    assert (c[n:] == -1).all()
    assert result.instruction_counts["add.rn.f32"] == n
    assert result.instruction_counts["ret"] == 8 * 128


def test_out_of_bounds_store_is_a_memory_trap():
    a = np.zeros(10, np.float32)
    result = launch(VADD, "k", (1,), [a, a, a, 128])
    assert result.trap is not None and result.trap.kind == "memory"


REDUCE = kernel("""
ld.param.b64 %rd1, [k_x];
ld.param.b64 %rd2, [k_out];
mov.u32 %r1, %tid.x;
mov.u32 %r2, %ctaid.x;
shl.b32 %r3, %r2, 8;
add.s32 %r4, %r3, %r1;
mul.wide.u32 %rd3, %r4, 4;
add.s64 %rd4, %rd1, %rd3;
ld.global.nc.f32 %r5, [%rd4];
shfl.sync.bfly.b32 %r6, %r5, 16, 31, -1;
add.f32 %r5, %r5, %r6;
shfl.sync.bfly.b32 %r6, %r5, 8, 31, -1;
add.f32 %r5, %r5, %r6;
shfl.sync.bfly.b32 %r6, %r5, 4, 31, -1;
add.f32 %r5, %r5, %r6;
shfl.sync.bfly.b32 %r6, %r5, 2, 31, -1;
add.f32 %r5, %r5, %r6;
shfl.sync.bfly.b32 %r6, %r5, 1, 31, -1;
add.f32 %r5, %r5, %r6;
and.b32 %r7, %r1, 31;
setp.ne.s32 %p1, %r7, 0;
shr.u32 %r8, %r1, 5;
shl.b32 %r9, %r8, 2;
mov.u32 %r10, smem;
add.s32 %r11, %r10, %r9;
@!%p1 st.shared.f32 [%r11], %r5;
bar.sync 0;
setp.ne.s32 %p2, %r1, 0;
@%p2 bra DONE;
mov.f32 %r12, 0f00000000;
mov.u32 %r13, 0;
LOOP:
shl.b32 %r14, %r13, 2;
add.s32 %r15, %r10, %r14;
ld.shared.f32 %r16, [%r15];
add.f32 %r12, %r12, %r16;
add.s32 %r13, %r13, 1;
setp.lt.u32 %p3, %r13, 8;
@%p3 bra LOOP;
mul.wide.u32 %rd5, %r2, 4;
add.s64 %rd6, %rd2, %rd5;
st.global.f32 [%rd6], %r12;
red.global.add.f32 [k_total_dummy_unused], %r12;
DONE:
ret;
""".replace("red.global.add.f32 [k_total_dummy_unused], %r12;\n", ""),
    ".param .u64 k_x, .param .u64 k_out", directives=".reqntid 256",
    extra=".shared .align 4 .b8 smem[32];\n")


def test_block_reduction_with_shuffles_and_shared_memory():
    rng = np.random.default_rng(1)
    x = rng.integers(-100, 100, 256 * 6).astype(np.float32)
    out = np.zeros(6, np.float32)
    launch(REDUCE, "k", (6,), [x, out]).check()
    np.testing.assert_array_equal(out, x.reshape(6, 256).sum(axis=1))


SOFTMAX = kernel("""
// one warp per row of 64 floats: two elements per lane
ld.param.b64 %rd1, [k_x];
ld.param.b64 %rd2, [k_y];
mov.u32 %r1, %tid.x;
mov.u32 %r2, %ctaid.x;
shl.b32 %r3, %r2, 6;
add.s32 %r4, %r3, %r1;
mul.wide.u32 %rd3, %r4, 4;
add.s64 %rd4, %rd1, %rd3;
ld.global.b32 %r5, [%rd4];
ld.global.b32 %r6, [%rd4+128];
max.f32 %r7, %r5, %r6;
shfl.sync.bfly.b32 %r8, %r7, 16, 31, -1;
max.f32 %r7, %r7, %r8;
shfl.sync.bfly.b32 %r8, %r7, 8, 31, -1;
max.f32 %r7, %r7, %r8;
shfl.sync.bfly.b32 %r8, %r7, 4, 31, -1;
max.f32 %r7, %r7, %r8;
shfl.sync.bfly.b32 %r8, %r7, 2, 31, -1;
max.f32 %r7, %r7, %r8;
shfl.sync.bfly.b32 %r8, %r7, 1, 31, -1;
max.f32 %r7, %r7, %r8;
sub.f32 %r9, %r5, %r7;
sub.f32 %r10, %r6, %r7;
mul.f32 %r9, %r9, 0f3FB8AA3B;
mul.f32 %r10, %r10, 0f3FB8AA3B;
ex2.approx.ftz.f32 %r9, %r9;
ex2.approx.ftz.f32 %r10, %r10;
add.f32 %r11, %r9, %r10;
shfl.sync.down.b32 %r12, %r11, 16, 31, -1;
add.f32 %r11, %r11, %r12;
shfl.sync.down.b32 %r12, %r11, 8, 31, -1;
add.f32 %r11, %r11, %r12;
shfl.sync.down.b32 %r12, %r11, 4, 31, -1;
add.f32 %r11, %r11, %r12;
shfl.sync.down.b32 %r12, %r11, 2, 31, -1;
add.f32 %r11, %r11, %r12;
shfl.sync.down.b32 %r12, %r11, 1, 31, -1;
add.f32 %r11, %r11, %r12;
shfl.sync.idx.b32 %r11, %r11, 0, 31, -1;
div.rn.f32 %r13, %r9, %r11;
div.rn.f32 %r14, %r10, %r11;
add.s64 %rd5, %rd2, %rd3;
st.global.b32 [%rd5], %r13;
st.global.b32 [%rd5+128], %r14;
ret;
""", ".param .u64 k_x, .param .u64 k_y")


def test_softmax_rows():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 64)).astype(np.float32) * 3
    y = np.zeros_like(x)
    launch(SOFTMAX, "k", (16,), [x, y]).check()
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-7)


ATOMICS = kernel("""
ld.param.b64 %rd1, [k_counter];
ld.param.b64 %rd2, [k_slots];
ld.param.b64 %rd3, [k_hist];
ld.param.b64 %rd4, [k_fsum];
mov.u32 %r1, %tid.x;
atom.global.add.u32 %r2, [%rd1], 1;
mul.wide.u32 %rd5, %r2, 4;
add.s64 %rd6, %rd2, %rd5;
st.global.u32 [%rd6], %r1;
and.b32 %r3, %r1, 7;
mul.wide.u32 %rd7, %r3, 4;
add.s64 %rd8, %rd3, %rd7;
red.global.add.u32 [%rd8], 1;
atom.global.max.s32 %r4, [%rd3+32], %r1;
atom.global.cas.b32 %r5, [%rd3+36], 0, %r1;
atom.global.exch.b32 %r6, [%rd3+40], %r1;
cvt.rn.f32.u32 %r7, %r1;
atom.global.acq_rel.gpu.add.f32 %r8, [%rd4], %r7;
ret;
""", ".param .u64 k_counter, .param .u64 k_slots, .param .u64 k_hist, .param .u64 k_fsum",
    directives=".reqntid 64")


def test_atomics_serialise_per_address():
    counter = np.zeros(1, np.uint32)
    slots = np.full(128, -1, np.int32)
    hist = np.zeros(11, np.int32)
    fsum = np.zeros(1, np.float32)
    launch(ATOMICS, "k", (2,), [counter, slots, hist, fsum]).check()
    assert counter[0] == 128
    assert sorted(slots.tolist()) == sorted(list(range(64)) * 2)
    assert hist[:8].tolist() == [16] * 8
    assert hist[8] == 63
    assert hist[9] == 1      # tid 0 writes 0, tid 1 still sees 0 and writes 1, the rest fail
    assert fsum[0] == 2 * sum(range(64))


DIVERGE = kernel("""
ld.param.b64 %rd1, [k_out];
mov.u32 %r1, %tid.x;
and.b32 %r2, %r1, 1;
setp.eq.s32 %p1, %r2, 0;
mov.u32 %r3, 0;
@%p1 bra EVEN;
// odd lanes: loop tid times
mov.u32 %r4, 0;
ODD_LOOP:
add.s32 %r3, %r3, 3;
add.s32 %r4, %r4, 1;
setp.lt.u32 %p2, %r4, %r1;
@%p2 bra ODD_LOOP;
bra.uni JOIN;
EVEN:
add.s32 %r3, %r1, 1000;
JOIN:
// after reconvergence every lane takes part in the shuffle
shfl.sync.up.b32 %r5|%p3, %r3, 1, 0, -1;
selp.b32 %r6, %r5, 77, %p3;
vote.sync.ballot.b32 %r7, %p1, -1;
mul.wide.u32 %rd2, %r1, 8;
add.s64 %rd3, %rd1, %rd2;
st.global.v2.u32 [%rd3], {%r6, %r7};
ret;
""", ".param .u64 k_out")


def test_divergent_loop_reconverges_before_shuffle():
    out = np.zeros((32, 2), np.uint32)
    launch(DIVERGE, "k", (1,), [out]).check()
    tid = np.arange(32)
    value = np.where(tid % 2 == 0, tid + 1000, 3 * tid)
    expected = np.r_[77, value[:-1]]
    np.testing.assert_array_equal(out[:, 0], expected)
    assert (out[:, 1] == 0x55555555).all()


DEADLOCK = kernel("""
mov.u32 %r1, %tid.x;
setp.lt.u32 %p1, %r1, 32;
@%p1 bra SKIP;
bar.sync 0;
SKIP:
bar.sync 1;
ret;
""", "", directives=".reqntid 64")


def test_barrier_deadlock_is_reported():
    result = launch(DEADLOCK, "k", (1,), [])
    assert result.trap is not None and result.trap.kind == "deadlock"


#: Thread 0 initialises something, then the CTA meets at a barrier: once after the branches
#: join (converged, legal), once with the barrier duplicated into both arms (what LLVM's tail
#: duplication made of an inline-asm bar.sync without ``convergent``: it hung an H100).
BARRIER_AFTER_JOIN = """
mov.u32 %r1, %tid.x;
setp.ne.u32 %p1, %r1, 0;
@%p1 bra JOIN;
mov.u32 %r2, 1;
JOIN:
bar.sync 0;
ret;
"""
BARRIER_IN_BOTH_ARMS = """
mov.u32 %r1, %tid.x;
setp.ne.u32 %p1, %r1, 0;
@%p1 bra OTHERS;
mov.u32 %r2, 1;
bar.sync 0;
bra.uni DONE;
OTHERS:
bar.sync 0;
DONE:
ret;
"""
#: a guard that differs within a warp (legal only for the non-.aligned barrier.sync)
BARRIER_UNDER_LANE_GUARD = """
mov.u32 %r1, %tid.x;
setp.ne.u32 %p1, %r1, 3;
@%p1 {op} 0;
ret;
"""


@pytest.mark.parametrize("body, trap", [
    (BARRIER_AFTER_JOIN, None),
    (BARRIER_IN_BOTH_ARMS, "divergence"),
    (BARRIER_UNDER_LANE_GUARD.format(op="bar.sync"), "divergence"),
    (BARRIER_UNDER_LANE_GUARD.format(op="barrier.sync.aligned"), "divergence"),
])
def test_an_aligned_barrier_needs_the_whole_warp(body, trap):
    result = launch(kernel(body, "", directives=".reqntid 64"), "k", (1,), [])
    assert (result.trap and result.trap.kind) == trap, result.trap
    if trap:
        assert "divergent .aligned instruction" in result.trap.message


BARRIER_EXCHANGE = kernel("""
ld.param.b64 %rd1, [k_out];
mov.u32 %r1, %tid.x;
shl.b32 %r2, %r1, 2;
mov.u32 %r3, buf;
add.s32 %r4, %r3, %r2;
mul.lo.s32 %r5, %r1, %r1;
st.shared.u32 [%r4], %r5;
// warps arrive at the barrier at different times
setp.lt.u32 %p1, %r1, 64;
@%p1 bra WAIT;
mov.u32 %r6, 0;
SPIN:
add.s32 %r6, %r6, 1;
setp.lt.u32 %p2, %r6, 50;
@%p2 bra SPIN;
WAIT:
barrier.sync.aligned 0;
mov.u32 %r7, 127;
sub.s32 %r8, %r7, %r1;
shl.b32 %r9, %r8, 2;
add.s32 %r10, %r3, %r9;
ld.shared.u32 %r11, [%r10];
mov.u32 %r12, %ctaid.x;
mad.lo.s32 %r13, %r12, 128, %r1;
mul.wide.u32 %rd2, %r13, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r11;
ret;
""", ".param .u64 k_out", directives=".reqntid 128", extra=".shared .align 4 .b8 buf[512];\n")


def test_barrier_orders_shared_memory():
    out = np.zeros(128 * 3, np.uint32)
    launch(BARRIER_EXCHANGE, "k", (3,), [out]).check()
    t = np.arange(128)
    np.testing.assert_array_equal(out.reshape(3, 128), np.tile((127 - t) ** 2, (3, 1)))


PRINTF = HEADER + """
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
.global .align 1 .b8 fmt[26] = {116, 105, 100, 61, 37, 100, 32, 120, 61, 37, 46, 50, 102, 32, 37, 108, 108, 100, 32, 37, 115, 10, 0};
.global .align 1 .b8 word[3] = {104, 105, 0};
.visible .entry k(.param .f32 k_x)
.reqntid 4
{
.local .align 8 .b8 __local_depot0[32];
.reg .b64 %SP;
.reg .b64 %SPL;
.reg .b32 %r<8>;
.reg .f32 %f<4>;
.reg .f64 %fd<4>;
.reg .b64 %rd<16>;
mov.b64 %SPL, __local_depot0;
cvta.local.u64 %SP, %SPL;
ld.param.f32 %f1, [k_x];
mov.u32 %r1, %tid.x;
cvt.rn.f32.u32 %f2, %r1;
mul.rn.f32 %f3, %f1, %f2;
cvt.f64.f32 %fd1, %f3;
cvt.s64.s32 %rd1, %r1;
mul.lo.s64 %rd2, %rd1, -1000000000000;
add.u64 %rd3, %SP, 0;
add.u64 %rd4, %SPL, 0;
st.local.u32 [%rd4], %r1;
st.local.f64 [%rd4+8], %fd1;
st.local.u64 [%rd4+16], %rd2;
mov.u64 %rd5, word;
cvta.global.u64 %rd6, %rd5;
st.local.u64 [%rd4+24], %rd6;
{ // callseq 0
.reg .b32 temp_param_reg;
.param .b64 param0;
.param .b64 param1;
.param .b32 retval0;
mov.u64 %rd7, fmt;
cvta.global.u64 %rd8, %rd7;
st.param.b64 [param0], %rd8;
st.param.b64 [param1], %rd3;
call.uni (retval0), vprintf, (param0, param1);
ld.param.b32 %r2, [retval0];
}
ret;
}
"""


def test_printf_formats_packed_arguments():
    result = launch(PRINTF, "k", (2,), [1.5]).check()
    lines = result.output.splitlines()
    assert len(lines) == 8
    assert lines[:4] == [f"tid={t} x={1.5 * t:.2f} {-t * 10**12} hi" for t in range(4)]
    assert result.printf[5].ctaid == (1, 0, 0) and result.printf[5].tid == (1, 0, 0)


ASSERT = HEADER + """
.extern .func __assertfail(.param .b64 p0, .param .b64 p1, .param .b32 p2, .param .b64 p3, .param .b64 p4);
.global .align 1 .b8 msg[4] = {120, 62, 48, 0};
.global .align 1 .b8 file[5] = {107, 46, 112, 121, 0};
.global .align 1 .b8 func[2] = {107, 0};
.visible .entry k(.param .u64 k_x)
.reqntid 32
{
.reg .pred %p<2>;
.reg .b32 %r<8>;
.reg .b64 %rd<16>;
ld.param.u64 %rd1, [k_x];
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
ld.global.s32 %r2, [%rd3];
setp.gt.s32 %p1, %r2, 0;
@%p1 bra OK;
{
.param .b64 param0;
.param .b64 param1;
.param .b32 param2;
.param .b64 param3;
.param .b64 param4;
mov.u64 %rd4, msg;
cvta.global.u64 %rd5, %rd4;
st.param.b64 [param0], %rd5;
mov.u64 %rd6, file;
cvta.global.u64 %rd7, %rd6;
st.param.b64 [param1], %rd7;
st.param.b32 [param2], 12;
mov.u64 %rd8, func;
cvta.global.u64 %rd9, %rd8;
st.param.b64 [param3], %rd9;
st.param.b64 [param4], 1;
call.uni __assertfail, (param0, param1, param2, param3, param4);
}
OK:
ret;
}
"""


def test_assertfail_traps_with_message():
    x = np.ones(32, np.int32)
    assert launch(ASSERT, "k", (1,), [x]).ok
    x[5] = -1
    result = launch(ASSERT, "k", (1,), [x])
    assert result.trap.kind == "assert"
    assert result.asserts[0]["message"] == "x>0" and result.asserts[0]["tid"] == (5, 0, 0)
    assert "k.py:12: k: block: [0,0,0], thread: [5,0,0] Assertion `x>0` failed." in result.trap.message


CALL = HEADER + """
.func (.param .b32 func_retval0) twice(.param .b32 twice_param_0)
{
.reg .b32 %r<4>;
.reg .pred %p<2>;
ld.param.b32 %r1, [twice_param_0];
setp.gt.s32 %p1, %r1, 5;
@%p1 bra BIG;
shl.b32 %r2, %r1, 1;
st.param.b32 [func_retval0], %r2;
ret;
BIG:
mul.lo.s32 %r2, %r1, 100;
st.param.b32 [func_retval0], %r2;
ret;
}
.visible .entry k(.param .u64 k_out)
.reqntid 32
{
.reg .pred %p<4>;
.reg .b32 %r<8>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [k_out];
mov.u32 %r1, %tid.x;
mov.u32 %r3, %r1;
and.b32 %r2, %r1, 3;
setp.eq.s32 %p1, %r2, 0;
@%p1 bra SKIP;
{
.param .b32 param0;
.param .b32 retval0;
st.param.b32 [param0], %r1;
call.uni (retval0), twice, (param0);
ld.param.b32 %r3, [retval0];
}
SKIP:
shfl.sync.idx.b32 %r4, %r3, 1, 31, -1;
add.s32 %r5, %r3, %r4;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r5;
ret;
}
"""


def test_call_to_func_and_reconvergence():
    out = np.zeros(32, np.int32)
    launch(CALL, "k", (1,), [out]).check()
    t = np.arange(32)
    v = np.where(t % 4 == 0, t, np.where(t > 5, t * 100, 2 * t))
    np.testing.assert_array_equal(out, v + v[1])


INLINE_ASM = kernel("""
ld.param.b64 %rd1, [k_out];
mov.u32 %r1, %tid.x;
// begin inline asm
{
.reg .pred %p1;
.reg .b32 %r1;
mov.u32 %r1, 7;
setp.ne.u32 %p1, %r1, 7;
@%p1 bra L_skip;
add.u32 %r2, %r1, 1;
L_skip:
}
// end inline asm
{
.reg .b32 %r1;
mov.u32 %r1, 100;
L_skip:
add.u32 %r2, %r2, %r1;
}
add.u32 %r3, %r2, %r1;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r3;
ret;
""", ".param .u64 k_out")


def test_inline_asm_scopes_shadow_registers_and_labels():
    out = np.zeros(32, np.uint32)
    launch(INLINE_ASM, "k", (1,), [out]).check()
    np.testing.assert_array_equal(out, 108 + np.arange(32))


def test_parser_ignores_debug_sections_and_reads_directives():
    text = HEADER + """
.file 1 "k.py"
.visible .entry k(.param .u32 k_n)
.reqntid 64, 1, 1
.maxnreg 32
.reqnctapercluster 2, 1, 1
.blocksareclusters
.minnctapersm 1
.language 7
{
.reg .b32 %r<2>;
.loc 1 3 0
ret;
}
.section .debug_str
{
$L__info_string0:
.b8 95,0
}
.nv_intermediate_source_section {
.code_block {
.source_begin
entry @k(%a: tile<i32>) { "}" return }
.source_end
}
}
"""
    module = parse_ptx(text)
    fn = module.entry("k")
    assert fn.directives["reqntid"] == (64, 1, 1)
    assert fn.directives["reqnctapercluster"] == (2, 1, 1)
    assert fn.directives["blocksareclusters"] is True
    assert [i.opcode for i in fn.body] == ["ret"]


CLUSTER = kernel("""
ld.param.b64 %rd1, [k_out];
mov.u32 %r1, %clusterid.x;
mov.u32 %r2, %cluster_ctarank;
mov.u32 %r3, %tid.x;
mov.u32 %r4, %ctaid.x;
mov.u32 %r5, %nclusterid.x;
// write my rank into the peer CTA's shared memory
mov.u32 %r6, buf;
xor.b32 %r7, %r2, 1;
mapa.shared::cluster.u32 %r8, %r6, %r7;
setp.eq.u32 %p1, %r3, 0;
@%p1 st.shared::cluster.u32 [%r8], %r4;
barrier.cluster.arrive;
barrier.cluster.wait;
ld.shared.u32 %r9, [%r6];
shl.b32 %r10, %r1, 8;
or.b32 %r11, %r10, %r9;
mul.wide.u32 %rd2, %r4, 4;
add.s64 %rd3, %rd1, %rd2;
@%p1 st.global.u32 [%rd3], %r11;
ret;
""", ".param .u64 k_out", directives=".reqntid 32\n.reqnctapercluster 2\n.blocksareclusters",
    extra=".shared .align 4 .b8 buf[4];\n")


def test_clusters_and_distributed_shared_memory():
    out = np.zeros(6, np.uint32)
    result = launch(CLUSTER, "k", (3,), [out])
    result.check()
    cta = np.arange(6)
    np.testing.assert_array_equal(out, ((cta // 2) << 8) | (cta ^ 1))


def test_shared_memory_of_an_exited_cta_is_gone():
    """The same exchange without the cluster barrier, CTA rank 1 leaving at once: rank 0's
    store into rank 1's shared memory traps (on the GPU it is undefined)."""
    early = CLUSTER.replace("mov.u32 %r6, buf;", "setp.eq.u32 %p2, %r2, 1;\n@%p2 ret;\nmov.u32 %r6, buf;")
    early = early.replace("barrier.cluster.arrive;\nbarrier.cluster.wait;\n", "")
    assert early.count("@%p2 ret;") == 1 and "barrier.cluster" not in early
    result = launch(early, "k", (1,), [np.zeros(2, np.uint32)])
    assert result.trap is not None and result.trap.kind == "memory"
    assert "CTA rank 1 of the cluster, whose threads have all exited" in result.trap.message


# ----------------------------------------------------------------------------- known answers
def test_cvt_float_to_int_rounding_and_saturation():
    x = np.array([2.5, -2.5, 3.5, -0.5, 1e10, -1e10, np.nan, np.inf, 0.49999997, -7.7] + [0.0] * 22,
                 np.float32)
    expected = {
        "rni": [2, -2, 4, 0, 2**31 - 1, -2**31, 0, 2**31 - 1, 0, -8],
        "rzi": [2, -2, 3, 0, 2**31 - 1, -2**31, 0, 2**31 - 1, 0, -7],
        "rmi": [2, -3, 3, -1, 2**31 - 1, -2**31, 0, 2**31 - 1, 0, -8],
        "rpi": [3, -2, 4, 0, 2**31 - 1, -2**31, 0, 2**31 - 1, 1, -7],
    }
    for mode, want in expected.items():
        out, _ = run_unary(f"cvt.{mode}.s32.f32 %r2, %r1;", x, np.int32)
        assert out[:10].tolist() == want, mode
    out, _ = run_unary("cvt.rzi.u32.f32 %r2, %r1;", x, np.uint32)
    assert out[:10].tolist() == [2, 0, 3, 0, 2**32 - 1, 0, 0, 2**32 - 1, 0, 0]


def test_cvt_int_narrowing_and_sat():
    x = np.array([300, -300, 127, -129, 70000, -1] + [0] * 26, np.int32)
    out, _ = run_unary("cvt.s8.s32 %rs1, %r1;\ncvt.s32.s8 %r2, %rs1;", x, np.int32)
    assert out[:6].tolist() == [44, -44, 127, 127, 112, -1]
    out, _ = run_unary("cvt.sat.s8.s32 %rs1, %r1;\ncvt.s32.s8 %r2, %rs1;", x, np.int32)
    assert out[:6].tolist() == [127, -128, 127, -128, 127, -1]
    out, _ = run_unary("cvt.sat.u16.s32 %rs1, %r1;\ncvt.u32.u16 %r2, %rs1;", x, np.int32)
    assert out[:6].tolist() == [300, 0, 127, 0, 65535, 0]


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_cvt_f32_to_f16_rounding_modes(mode):
    rng = np.random.default_rng(3)
    x = np.r_[rng.standard_normal(60).astype(np.float32) * 1000, np.float32(65520), np.float32(1e-7),
              np.float32(-65519.9), np.float32(5.9604645e-08)]
    out, _ = run_unary(f"cvt.{mode}.f16.f32 %rs1, %r1;\nmov.b32 %r2, {{%rs1, %rs1}};", x, np.uint32)
    got = (out & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)
    exact = x.astype(np.float64)
    nearest = x.astype(np.float16).astype(np.float64)
    if mode == "rn":
        np.testing.assert_array_equal(got, nearest)
    elif mode == "rz":
        assert np.all(np.abs(got) <= np.abs(exact)) and np.all(np.abs(got - exact) < np.abs(exact) * 1e-3 + 1e-7)
    elif mode == "rm":
        assert np.all(got <= exact)
    else:
        assert np.all(got >= exact)
    assert np.all(np.abs(got - nearest) <= np.abs(nearest) * 2**-10 + 2**-24) | np.isinf(nearest).any()



def test_cvt_to_bf16_rounds_once():
    """``cvt.rn.bf16.s32`` and ``.f64`` round the exact value once: 2^24 + 2^16 + 1 is just
    above a bf16 tie and goes up (through f32 it would be the tie itself and go to even),
    as 1 + 2^-8 + 2^-30 does; checked against exact rounding on near-tie sweeps."""
    from tileiras.interp.floats import FORMATS, round_f64
    p = [1 << k for k in range(31)]
    ints = np.array(sorted({a + b + c for a in p for b in p[:20] for c in (0, 1)}), np.int64)[:1024]
    ints = np.resize(np.concatenate([ints, -ints]).astype(np.int32), 2048)
    out, _ = run_unary("cvt.rn.bf16.s32 %rs1, %r1;\ncvt.u32.u16 %r2, %rs1;", ints, np.uint32)
    got = out.astype(np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_array_equal(got, round_f64(ints.astype(np.float64), FORMATS["bf16"]))
    assert got[np.flatnonzero(ints == 2**24 + 2**16 + 1)[0]] == 2**24 + 2**17
    x = np.resize(np.array([1 + 2.0**-8 + 2.0**-30, -(1 + 2.0**-8 + 2.0**-30), 1 + 2.0**-8, 3.5e38, 2.0**-133 * 1.5]),
                  64) * np.repeat([1.0, 2.0**-100], 32)
    out, _ = run_unary("cvt.rn.bf16.f64 %rs1, %rd7;\ncvt.u32.u16 %r2, %rs1;", x, np.uint32, in_width=8,
                       ld="ld.global.b64 %rd7, [%rd3];")
    got = out.astype(np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_array_equal(got, round_f64(x, FORMATS["bf16"]))
    assert got[:3].tolist() == [1 + 2.0**-7, -(1 + 2.0**-7), 1.0]

def test_cvt_fp8_satfinite_pairs_and_back():
    a = np.array([1.0, 500.0, -1000.0, np.nan, 0.1, 3.3] + [0.0] * 26, np.float32)
    b = np.array([2.0, -0.015625, 448.0, 1e-9, -7.0, 57344.0 * 2] + [0.0] * 26, np.float32)
    inputs = np.stack([a, b], axis=1).reshape(-1)
    body = """
ld.global.b32 %r1, [%rd3];
ld.global.b32 %r5, [%rd3+4];
cvt.rn.satfinite.e4m3x2.f32 %rs1, %r1, %r5;
cvt.rn.satfinite.e5m2x2.f32 %rs2, %r1, %r5;
mov.b32 %r2, {%rs1, %rs2};
"""
    out, _ = run_unary(body, inputs[:64], np.uint32, in_width=8, ld="")
    e4 = (out & 0xFFFF).astype(np.uint16)
    e5 = (out >> 16).astype(np.uint16)
    hi4 = (e4 >> 8).astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    lo4 = (e4 & 0xFF).astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    assert hi4[:6].tolist()[:3] == [1.0, 448.0, -448.0] and np.isnan(hi4[3])
    assert lo4[:6].tolist() == [2.0, -0.015625, 448.0, 0.0, -7.0, 448.0]
    hi5 = (e5 >> 8).astype(np.uint8).view(ml_dtypes.float8_e5m2).astype(np.float32)
    lo5 = (e5 & 0xFF).astype(np.uint8).view(ml_dtypes.float8_e5m2).astype(np.float32)
    assert hi5[:3].tolist() == [1.0, 512.0, -1024.0]
    assert lo5[5] == 57344.0
    # widen back: cvt.rn.f16x2.e4m3x2
    out2, _ = run_unary("cvt.rn.f16x2.e4m3x2 %r2, %rs1;", e4.astype(np.uint16)[:32].copy(), np.uint32,
                        in_width=2, ld="ld.global.b16 %rs1, [%rd3];")
    halves = out2.view(np.float16).reshape(-1, 2)
    np.testing.assert_array_equal(halves[:, 1][:3], np.array([1.0, 448.0, -448.0], np.float16))
    np.testing.assert_array_equal(halves[:, 0][:3], np.array([2.0, -0.015625, 448.0], np.float16))


#: (x, rz code, rp code): |x| as a power of two; zero and up to 2^-127 give 0x00, NaN 0xFF.
UE8M0_CASES = [(1.0, 127, 127), (3.0, 128, 129), (-3.0, 128, 129), (0.75, 126, 127), (0.0, 0, 0), (-0.0, 0, 0),
               (2.0**-127, 0, 0), (3 * 2.0**-128, 0, 1), (2.0**-149, 0, 0), (2.0**127, 254, 254),
               (1.5 * 2.0**127, 254, 255), (np.inf, 255, 255), (-np.inf, 255, 255), (np.nan, 255, 255)]


@pytest.mark.parametrize("rounding", ["rz", "rp"])
@pytest.mark.parametrize("satfinite", ["", ".satfinite"])
def test_cvt_f32_to_ue8m0(rounding, satfinite):
    """As cuda_fp8.hpp spells these instructions out; ``.satfinite`` turns overflow (0xFF, not
    NaN) into 0xFE."""
    x = np.resize(np.array([c[0] for c in UE8M0_CASES], np.float32), 32)
    out, _ = run_unary(f"cvt.{rounding}{satfinite}.ue8m0x2.f32 %rs1, %r1, %r1;\ncvt.u32.u16 %r2, %rs1;", x,
                       np.uint32)
    want = np.array([c[1 if rounding == "rz" else 2] for c in UE8M0_CASES])
    if satfinite:
        want = np.where(np.isnan([c[0] for c in UE8M0_CASES]), 255, np.minimum(want, 254))
    assert (out[:len(want)] & 0xFF).tolist() == want.tolist()
    assert (out[:len(want)] >> 8).tolist() == want.tolist()


def test_cvt_nan_to_a_format_without_nan_is_max():
    """e2m1 has no NaN: ``cvt.rn.satfinite.e2m1x2.f32`` gives +6 (0x7) for it, as cuda_fp4.hpp."""
    x = np.resize(np.array([np.nan, -np.nan, 7.0, -1.0], np.float32), 32)
    out, _ = run_unary("{ .reg .b8 b; cvt.rn.satfinite.e2m1x2.f32 b, %r1, %r1; cvt.u32.u8 %r2, b; }", x, np.uint32)
    assert out[:4].tolist() == [0x77, 0x77, 0x77, 0xAA]


def test_cvt_f16x2_and_bf16x2_from_f32_pairs():
    x = np.array([1.0001, -2.5, 3.14159, 65504.0 * 2] * 8, np.float32)
    out, _ = run_unary("cvt.rn.f16x2.f32 %r2, %r1, %r1;", x, np.uint32)
    pair = out.view(np.float16).reshape(-1, 2)
    np.testing.assert_array_equal(pair[:, 0], x.astype(np.float16))
    np.testing.assert_array_equal(pair[:, 1], x.astype(np.float16))
    out, _ = run_unary("cvt.rz.bf16x2.f32 %r2, %r1, %r1;", x, np.uint32)
    bits = (out & 0xFFFF).astype(np.uint16)
    np.testing.assert_array_equal(bits, (x.view(np.uint32) >> 16).astype(np.uint16))


def test_div_rem_signedness_and_division_by_zero():
    a = np.array([7, -7, 7, -7, -2**31, 5, 0] + [1] * 25, np.int32)
    b = np.array([2, 2, -2, -2, -1, 0, 3] + [1] * 25, np.int32)
    inputs = np.stack([a, b], axis=1).reshape(-1)
    body = """
ld.global.b32 %r1, [%rd3];
ld.global.b32 %r5, [%rd3+4];
div.s32 %r6, %r1, %r5;
rem.s32 %r7, %r1, %r5;
div.u32 %r8, %r1, %r5;
rem.u32 %r9, %r1, %r5;
"""
    for reg, want in (("%r6", [3, -3, -3, 3, -2**31, -1, 0]), ("%r7", [1, -1, 1, -1, 0, 5, 0]),
                      ("%r8", [3, 2147483644, 0, 0, 0, 4294967295, 0]),
                      ("%r9", [1, 1, 7, 4294967289, 2**31, 5, 0])):
        out, _ = run_unary(body + f"mov.b32 %r2, {reg};", inputs, np.uint32, in_width=8, ld="")
        assert out[:7].tolist() == [w % 2**32 for w in want], reg


def test_mul_hi_wide_and_64bit():
    a = np.array([0xFFFFFFFF, 0x80000000, 12345678, 3] * 8, np.uint32)
    out, _ = run_unary("mul.hi.u32 %r2, %r1, %r1;", a, np.uint32)
    assert out[:4].tolist() == [(int(v) * int(v)) >> 32 for v in a[:4]]
    out, _ = run_unary("mul.hi.s32 %r2, %r1, %r1;", a, np.int32)
    s = a[:4].view(np.int32).astype(np.int64)
    assert out[:4].tolist() == [int(v * v) >> 32 for v in s]
    body = "cvt.u64.u32 %rd10, %r1;\nmul.lo.u64 %rd11, %rd10, %rd10;\nmul.lo.u64 %rd11, %rd11, -3;\n" \
           "mul.hi.s64 %rd12, %rd11, %rd11;\ncvt.u32.u64 %r2, %rd12;"
    out, _ = run_unary(body, a, np.uint32)
    for v, got in zip(a[:4].tolist(), out[:4].tolist()):
        x = ((v * v) % 2**64 * (2**64 - 3)) % 2**64
        xs = x - 2**64 if x >= 2**63 else x
        assert got == ((xs * xs) >> 64) % 2**32


def test_bit_instructions():
    a = np.array([0x12345678, 0xF0000001, 0, 0xFFFFFFFF] * 8, np.uint32)
    cases = {
        "popc.b32 %r2, %r1;": [bin(int(v)).count("1") for v in a[:4]],
        "clz.b32 %r2, %r1;": [3, 0, 32, 0],
        "brev.b32 %r2, %r1;": [int(f"{int(v):032b}"[::-1], 2) for v in a[:4]],
        "bfe.u32 %r2, %r1, 4, 8;": [(int(v) >> 4) & 0xFF for v in a[:4]],
        "bfe.s32 %r2, %r1, 28, 4;": [1, 0xFFFFFFFF, 0, 0xFFFFFFFF],
        "bfi.b32 %r2, 0xAB, %r1, 8, 8;": [(int(v) & ~0xFF00) | 0xAB00 for v in a[:4]],
        "prmt.b32 %r2, %r1, 0x9988, 0x4321;": [0x88123456, 0x88F00000, 0x88000000, 0x88FFFFFF],
        "prmt.b32 %r2, %r1, 0, 0x0008;": [0x78787800, 0x01010100, 0, 0xFFFFFFFF],
        "shf.l.wrap.b32 %r2, %r1, %r1, 4;": [0x23456781, 0x0000001F, 0, 0xFFFFFFFF],
        "shf.r.clamp.b32 %r2, %r1, 0, 40;": [0, 0, 0, 0],
        "bfind.u32 %r2, %r1;": [28, 31, 0xFFFFFFFF, 31],
        "lop3.b32 %r2, %r1, 0xFF00FF00, 0x0F0F0F0F, 0x96;": [int(v) ^ 0xFF00FF00 ^ 0x0F0F0F0F for v in a[:4]],
    }
    for line, want in cases.items():
        out, _ = run_unary(line, a, np.uint32)
        assert out[:4].tolist() == [w % 2**32 for w in want], line


def test_carry_chain_64bit_add_from_32bit_halves():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 2**63, 64, dtype=np.uint64)
    body = """
ld.global.v2.u32 {%r1, %r5}, [%rd3];
add.cc.u32 %r6, %r1, 0xFFFFFFFF;
addc.u32 %r7, %r5, 0x7;
mov.b64 %rd20, {%r6, %r7};
"""
    out, _ = run_unary(body, x[:32].copy(), np.uint64, in_width=8, out_width=8, ld="",
                       st="st.global.u64 [%rd4], %rd20;")
    np.testing.assert_array_equal(out, x[:32] + np.uint64(0x7FFFFFFFF))


def test_shfl_modes_clamps_and_predicates():
    lanes = np.arange(32, dtype=np.uint32) * 10
    cases = {
        "shfl.sync.up.b32 %r2|%p1, %r1, 3, 0, -1;": lambda t: np.where(t >= 3, (t - 3) * 10, t * 10),
        "shfl.sync.down.b32 %r2|%p1, %r1, 3, 31, -1;": lambda t: np.where(t + 3 <= 31, (t + 3) * 10, t * 10),
        "shfl.sync.bfly.b32 %r2, %r1, 5, 31, -1;": lambda t: (t ^ 5) * 10,
        "shfl.sync.idx.b32 %r2, %r1, 7, 31, -1;": lambda t: np.full(32, 70),
        # width 8 segments: c = ((32 - 8) << 8) | 31 = 0x181f
        "shfl.sync.idx.b32 %r2, %r1, 2, 0x181f, -1;": lambda t: ((t & ~7) + 2) * 10,
        "shfl.sync.down.b32 %r2, %r1, 2, 0x181f, -1;": lambda t: np.where((t & 7) + 2 <= 7, t + 2, t) * 10,
    }
    t = np.arange(32)
    for line, want in cases.items():
        out, _ = run_unary(line, lanes, np.uint32)
        np.testing.assert_array_equal(out, want(t), err_msg=line)


#: lane 0 takes a branch whose arm the code places after the join (LLVM's layout of a
#: ``tid == 0`` block that issues copies); the shuffle after the join needs its new value
SHFL_AFTER_A_LATE_ARM = """
ld.param.b64 %rd1, [k_out];
mov.u32 %r1, %tid.x;
mov.u32 %r2, 7;
setp.eq.u32 %p1, %r1, 0;
@%p1 bra ARM;
JOIN:
elect.sync %r5|%p2, -1;
shfl.sync.bfly.b32 %r3, %r2, 1, 31, -1;
vote.sync.ballot.b32 %r4, %p1, -1;
mul.wide.u32 %rd2, %r1, 16;
add.s64 %rd3, %rd1, %rd2;
st.global.v4.b32 [%rd3], {%r3, %r4, %r5, %r2};
ret;
ARM:
mov.u32 %r2, 100;
setp.ne.u32 %p1, %r1, 0;
bra.uni JOIN;
"""


def test_a_whole_warp_shuffle_waits_for_the_lanes_of_a_late_arm():
    """``shfl.sync``/``vote.sync``/``elect.sync`` with member mask -1: every lane waits
    there until all have come (PTX ISA), so lane 1 reads lane 0's value as the arm left it
    (100), not the one before (7), which the lanes that skipped the arm would see if they
    ran it first, as the lowest-PC-first scheduler brings them there first; and the warp
    elects one leader, not one a group."""
    out = np.zeros((32, 4), np.uint32)
    launch(kernel(SHFL_AFTER_A_LATE_ARM, ".param .u64 k_out"), "k", (1,), [out]).check()
    assert out[1, 0] == 100 and out[0, 0] == 7 and (out[2:, 0] == 7).all()
    assert (out[:, 1] == 0).all()       # lane 0's predicate turned false in its arm too
    assert (out[:, 2] == 0).all()       # lane 0 leads the whole warp


def test_setp_unordered_and_combined_predicates():
    a = np.array([1.0, np.nan, 2.0, -0.0] * 8, np.float32)
    cases = {
        "setp.lt.f32 %p1, %r1, 0f3FC00000;": [1, 0, 0, 1],
        "setp.ltu.f32 %p1, %r1, 0f3FC00000;": [1, 1, 0, 1],
        "setp.ne.f32 %p1, %r1, %r1;": [0, 0, 0, 0],
        "setp.neu.f32 %p1, %r1, %r1;": [0, 1, 0, 0],
        "setp.nan.f32 %p1, %r1, %r1;": [0, 1, 0, 0],
        "setp.eq.f32 %p1, %r1, 0f00000000;": [0, 0, 0, 1],
        "setp.ge.and.f32 %p1, %r1, 0f3F800000, %p2;": [1, 0, 1, 0],
        "setp.ge.or.f32 %p3|%p1, %r1, 0f40000000, %p2;": [1, 1, 1, 1],
    }
    for line, want in cases.items():
        body = "setp.eq.u32 %p2, 1, 1;\n" + line + "\nselp.u32 %r2, 1, 0, %p1;"
        out, _ = run_unary(body, a, np.uint32)
        assert out[:4].tolist() == want, line


def test_float_rounding_modes_are_exact():
    rng = np.random.default_rng(5)
    a = rng.standard_normal(64).astype(np.float32)
    b = (rng.standard_normal(64) * 1e-4).astype(np.float32)
    inputs = np.stack([a, b], axis=1).reshape(-1)
    from fractions import Fraction
    for mode in ("rn", "rz", "rm", "rp"):
        body = f"ld.global.b32 %r1, [%rd3];\nld.global.b32 %r5, [%rd3+4];\nfma.{mode}.f32 %r2, %r1, %r5, %r1;"
        out, _ = run_unary(body, inputs, np.float32, in_width=8, ld="")
        for x, y, got in zip(a[:32], b[:32], out):
            exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(x))
            lo, hi = sorted([got, np.nextafter(got, np.float32(np.inf) if Fraction(float(got)) < exact else np.float32(-np.inf))])
            assert Fraction(float(lo)) <= exact <= Fraction(float(hi)) or Fraction(float(got)) == exact
            if mode == "rm":
                assert Fraction(float(got)) <= exact
            if mode == "rp":
                assert Fraction(float(got)) >= exact
            if mode == "rz":
                assert abs(Fraction(float(got))) <= abs(exact)


def test_min_max_nan_and_signed_zero():
    a = np.array([np.nan, -0.0, 1.0, 0.0] * 8, np.float32)
    out, _ = run_unary("min.f32 %r2, %r1, 0f40000000;", a, np.float32)
    assert out[:4].tolist() == [2.0, -0.0, 1.0, 0.0]
    out, _ = run_unary("min.NaN.f32 %r2, %r1, 0f40000000;", a, np.float32)
    assert np.isnan(out[0])
    out, _ = run_unary("max.f32 %r2, %r1, 0f00000000;", a, np.float32)
    assert np.signbit(out[1]) == False  # noqa: E712
    out, _ = run_unary("min.f32 %r2, %r1, 0f00000000;", a, np.float32)
    assert np.signbit(out[1])


def test_half_precision_packed_arithmetic():
    x = np.array([1.5, -2.25, 1000.0, 0.1] * 16, np.float16)
    out, _ = run_unary("add.rn.f16x2 %r2, %r1, %r1;\nmul.rn.f16x2 %r2, %r2, 0x3C003800;\nfma.rn.f16x2 %r2, %r2, %r1, %r1;",
                       x.view(np.uint32), np.uint32)
    out = out.view(np.float16)
    pairs = x.reshape(-1, 2).astype(np.float32)
    scale = np.array([0.5, 1.0], np.float32)
    want = (((pairs + pairs).astype(np.float16).astype(np.float32) * scale).astype(np.float16).astype(np.float32)
            * pairs + pairs).astype(np.float16)
    np.testing.assert_array_equal(out.reshape(-1, 2), want)


def test_approximate_transcendentals_within_documented_bounds():
    x = np.linspace(-3, 3, 64).astype(np.float32)
    out, _ = run_unary("ex2.approx.f32 %r2, %r1;", x, np.float32)
    np.testing.assert_allclose(out, np.exp2(x.astype(np.float64)), rtol=2**-22)
    out, _ = run_unary("tanh.approx.f32 %r2, %r1;", x, np.float32)
    np.testing.assert_allclose(out, np.tanh(x.astype(np.float64)), rtol=2**-10.9, atol=1e-7)
    out, _ = run_unary("sin.approx.ftz.f32 %r2, %r1;", x, np.float32)
    np.testing.assert_allclose(out, np.sin(x.astype(np.float64)), atol=2**-20.5)
    out, _ = run_unary("rsqrt.approx.f32 %r2, %r1;", np.abs(x) + 1, np.float32)
    np.testing.assert_allclose(out, 1 / np.sqrt(np.abs(x).astype(np.float64) + 1), rtol=2**-22)


def test_unsupported_instruction_is_reported_when_executed():
    from tileiras.emulate import UnsupportedInstruction
    ptx = kernel("bogus.op.b32 %r1, %r2;\nret;", "")
    with pytest.raises(UnsupportedInstruction, match="bogus"):
        launch(ptx, "k", (1,), [])


def test_32_bit_local_address_wraps_with_its_offset():
    """A 32-bit address register plus an offset wraps at 32 bits, as the hardware computes it:
    libdevice's sinf indexes its Payne-Hanek words as [%r1 - 4*k + 24] (-nvptx-short-ptr)."""
    body = """
.local .align 4 .b8 __local_depot0[16];
mov.u32 %r20, __local_depot0;
mov.u32 %r21, 7;
st.local.b32 [%r20+8], %r21;
sub.s32 %r22, %r20, 8;
ld.local.b32 %r1, [%r22+16];
ld.param.b64 %rd1, [k_out];
mov.u32 %r10, %tid.x;
mul.wide.u32 %rd5, %r10, 4;
add.s64 %rd4, %rd1, %rd5;
st.global.b32 [%rd4], %r1;
ret;
"""
    out = np.zeros(32, np.int32)
    launch(kernel(body, ".param .u64 k_out"), "k", (1,), [out]).check()
    assert (out == 7).all()


LDMATRIX_UNDER = """
mov.u32 %r1, %tid.x;
mov.u32 %r2, buf;
and.b32 %r3, %r1, 7;
shl.b32 %r3, %r3, 4;
add.s32 %r4, %r2, %r3;
setp.lt.u32 %p1, %r1, {split};
@%p1 ldmatrix.sync.aligned.m8n8.x1.shared.b16 {{%r5}}, [%r4];
ret;
"""


@pytest.mark.parametrize("split, trap", [(0, None), (32, None), (16, "divergence")])
def test_an_aligned_instruction_needs_one_guard_per_warp(split, trap):
    """ldmatrix.sync.aligned guarded for the whole warp (or for none of it) is legal; for half
    a warp it is not (the GPU's behaviour is undefined), and the emulator says which."""
    body = LDMATRIX_UNDER.format(split=split)
    result = launch(kernel(body, "", extra=".shared .align 16 .b8 buf[128];"), "k", (1,), [])
    assert (result.trap and result.trap.kind) == trap, result.trap
    if trap:
        assert "ldmatrix" in result.trap.message and "guard is false" in result.trap.message


#: the join of a branch placed before its arms (as LLVM lays out loops): the warp reaches the
#: barrier in two groups, one instruction, which is legal (the hardware reconverges first)
BARRIER_AT_EARLIER_JOIN = """
mov.u32 %r1, %tid.x;
setp.ne.u32 %p1, %r1, 0;
bra.uni START;
JOIN:
bar.sync 0;
ret;
START:
@%p1 bra JOIN;
mov.u32 %r2, 1;
bra.uni JOIN;
"""


def test_a_barrier_reached_in_two_groups_at_one_instruction_is_legal():
    result = launch(kernel(BARRIER_AT_EARLIER_JOIN, "", directives=".reqntid 64"), "k", (1,), [])
    assert result.trap is None, result.trap
