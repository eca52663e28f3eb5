"""mbarrier in the PTX emulator, on hand-written PTX: phases, counts, transaction counts,
waits across warps; and ldmatrix/stmatrix, which NVIDIA's multimem kernels use beside it."""
from __future__ import annotations

import numpy as np
import pytest
from test_emulate_ptx import kernel

from tileiras.emulate import launch

SMEM = ".shared .align 8 .b8 bar[16];\n.shared .align 16 .b8 buf[512];\n"
OUT = ".param .u64 k_out"


def run(body: str, nthreads: int = 32, nout: int = 32, grid: int = 1):
    """Run ``body`` (``%rd1`` = out + 4 * global thread id, ``%r1`` = tid) and return out."""
    prologue = f"""
ld.param.b64 %rd9, [k_out];
mov.u32 %r1, %tid.x;
mov.u32 %r2, %ctaid.x;
mad.lo.s32 %r3, %r2, {nthreads}, %r1;
mul.wide.u32 %rd8, %r3, 4;
add.s64 %rd1, %rd9, %rd8;
"""
    ptx = kernel(prologue + body, OUT, directives=f".reqntid {nthreads}", extra=SMEM)
    out = np.full(nout * grid, -1, np.int32)
    return out, launch(ptx, "k", (grid,), [out], max_steps=20_000)


def checked(body: str, **kw) -> np.ndarray:
    out, result = run(body, **kw)
    assert result.trap is None, result.trap
    return out


INIT_BY_THREAD_0 = """
setp.ne.u32 %p1, %r1, 0;
@%p1 bra INITED;
mbarrier.init.shared::cta.b64 [bar], {count};
INITED:
bar.sync 0;
"""


def test_consumer_warp_waits_for_producer_warp():
    """Warp 0 computes slowly (a loop) and then writes; warp 1 waits on the mbarrier with a
    try_wait loop and must see every value, not the shared memory's zeros."""
    out = checked(INIT_BY_THREAD_0.format(count=32) + """
setp.ge.u32 %p2, %r1, 32;
@%p2 bra CONSUMER;
mov.u32 %r10, 0;
mov.u32 %r11, 0;
SLOW:
add.s32 %r11, %r11, %r1;
add.s32 %r10, %r10, 1;
setp.lt.u32 %p3, %r10, 40;
@%p3 bra SLOW;
shl.b32 %r12, %r1, 2;
mov.u32 %r13, buf;
add.s32 %r14, %r13, %r12;
st.shared.u32 [%r14], %r11;
mbarrier.arrive.release.cta.shared::cta.b64 %rd2, [bar];
bra DONE;
CONSUMER:
WAIT:
mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p4, [bar], 0;
@!%p4 bra WAIT;
sub.s32 %r15, %r1, 32;
shl.b32 %r16, %r15, 2;
mov.u32 %r13, buf;
add.s32 %r17, %r13, %r16;
ld.shared.u32 %r18, [%r17];
st.global.u32 [%rd1], %r18;
DONE:
ret;
""", nthreads=64, nout=64)
    lane = np.arange(32)
    np.testing.assert_array_equal(out[32:], 40 * lane)
    assert (out[:32] == -1).all()


def test_phase_parity_over_several_phases():
    """A ping-pong of four rounds through one slot: ``full`` (bar) and ``empty`` (bar+8)
    mbarriers; each side waits on parity ``round & 1``.  A wrong parity lets the consumer
    read a stale round or the producer overwrite an unread one."""
    out = checked("""
setp.ne.u32 %p1, %r1, 0;
@%p1 bra INITED;
mbarrier.init.shared.b64 [bar], 32;
mbarrier.init.shared.b64 [bar+8], 32;
INITED:
bar.sync 0;
and.b32 %r20, %r1, 31;
shl.b32 %r21, %r20, 2;
mov.u32 %r22, buf;
add.s32 %r23, %r22, %r21;
mov.u32 %r30, 0;
setp.ge.u32 %p2, %r1, 32;
@%p2 bra CONSUMER;
PRODUCE:
and.b32 %r31, %r30, 1;
setp.eq.u32 %p3, %r30, 0;
@%p3 bra FILL;
xor.b32 %r32, %r31, 1;
EMPTY_WAIT:
mbarrier.try_wait.parity.shared.b64 %p4, [bar+8], %r32;
@!%p4 bra EMPTY_WAIT;
FILL:
mad.lo.s32 %r33, %r30, 100, %r20;
st.shared.u32 [%r23], %r33;
mbarrier.arrive.shared.b64 %rd2, [bar];
add.s32 %r30, %r30, 1;
setp.lt.u32 %p5, %r30, 4;
@%p5 bra PRODUCE;
bra DONE;
CONSUMER:
and.b32 %r31, %r30, 1;
FULL_WAIT:
mbarrier.test_wait.parity.shared.b64 %p4, [bar], %r31;
@!%p4 bra FULL_WAIT;
ld.shared.u32 %r34, [%r23];
mul.wide.u32 %rd3, %r30, 128;
add.s64 %rd4, %rd1, %rd3;
sub.s64 %rd4, %rd4, 128;
st.global.u32 [%rd4], %r34;
mbarrier.arrive.shared.b64 %rd2, [bar+8];
add.s32 %r30, %r30, 1;
setp.lt.u32 %p5, %r30, 4;
@%p5 bra CONSUMER;
DONE:
ret;
""", nthreads=64, nout=160)
    lane = np.arange(32)
    got = out.reshape(5, 32)
    np.testing.assert_array_equal(got[:4], 100 * np.arange(4)[:, None] + lane)
    assert (got[4] == -1).all()


def test_arrivals_of_one_instruction_count_in_thread_order():
    """32 threads arrive at a 16-count mbarrier at once: threads 0-15 complete phase 0,
    16-31 phase 1; their tokens name those phases and the barrier is at phase 2 (parity
    0), so the phase of parity 1 tests complete."""
    out = checked(INIT_BY_THREAD_0.format(count=16) + """
mbarrier.arrive.shared.b64 %rd2, [bar];
shr.b64 %rd3, %rd2, 63;
cvt.u32.u64 %r5, %rd3;
mbarrier.test_wait.parity.shared.b64 %p2, [bar], 1;
selp.u32 %r6, 10, 0, %p2;
add.s32 %r7, %r5, %r6;
st.global.u32 [%rd1], %r7;
""")
    np.testing.assert_array_equal(out, [10] * 16 + [11] * 16)


def test_arrive_with_count_no_complete_and_pending_count():
    """init 40; thread 0 arrives .noComplete with count 8 (pending_count of its token: 32),
    then every thread arrives once: the phase completes and thread 0's token tests true."""
    out = checked(INIT_BY_THREAD_0.format(count=40) + """
@%p1 bra ARRIVED;
mbarrier.arrive.noComplete.shared.b64 %rd5, [bar], 8;
mbarrier.pending_count.b64 %r8, %rd5;
mbarrier.test_wait.shared.b64 %p3, [bar], %rd5;
selp.u32 %r9, 1, 0, %p3;
st.global.u32 [%rd1+4], %r8;
st.global.u32 [%rd1+8], %r9;
ARRIVED:
bar.sync 0;
mbarrier.arrive.release.cta.shared::cta.b64 %rd2, [bar], 1;
bar.sync 0;
@%p1 bra DONE;
mbarrier.test_wait.acquire.cta.shared::cta.b64 %p3, [bar], %rd5;
selp.u32 %r9, 1, 0, %p3;
mbarrier.test_wait.shared.b64 %p4, [bar], %rd2;
selp.u32 %r10, 1, 0, %p4;
mbarrier.pending_count.b64 %r11, %rd2;
st.global.u32 [%rd1], %r9;
st.global.u32 [%rd1+12], %r10;
st.global.u32 [%rd1+16], %r11;
DONE:
ret;
""")
    assert out[:5].tolist() == [1, 32, 0, 1, 31]


def test_transaction_counts_hold_the_phase():
    """After every arrival the phase still waits for 64 transaction bytes (arrive.expect_tx
    48 + expect_tx 16); complete_tx of 40 leaves it open, the last 24 complete it."""
    out = checked(INIT_BY_THREAD_0.format(count=1) + """
@%p1 bra DONE;
mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %rd2, [bar], 48;
mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], 16;
mbarrier.test_wait.shared.b64 %p2, [bar], %rd2;
selp.u32 %r4, 1, 0, %p2;
st.global.u32 [%rd1], %r4;
mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [bar], 40;
mbarrier.test_wait.shared.b64 %p2, [bar], %rd2;
selp.u32 %r4, 1, 0, %p2;
st.global.u32 [%rd1+4], %r4;
mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [bar], 24;
mbarrier.try_wait.shared::cta.b64 %p2, [bar], %rd2, 1000;
selp.u32 %r4, 1, 0, %p2;
st.global.u32 [%rd1+8], %r4;
mbarrier.test_wait.parity.shared.b64 %p2, [bar], 1;
selp.u32 %r4, 1, 0, %p2;
st.global.u32 [%rd1+12], %r4;
DONE:
ret;
""")
    assert out[:4].tolist() == [0, 0, 1, 0]


def test_arrive_drop_lowers_the_expected_count():
    """init 2; thread 1 arrive_drops, thread 0 arrives: phase 0 completes, and phase 1
    needs thread 0 alone."""
    out = checked(INIT_BY_THREAD_0.format(count=2) + """
setp.gt.u32 %p2, %r1, 1;
@%p2 bra DONE;
setp.eq.u32 %p3, %r1, 1;
@%p3 mbarrier.arrive_drop.shared.b64 %rd2, [bar];
@!%p3 mbarrier.arrive.shared.b64 %rd2, [bar];
@%p3 bra DONE;
mbarrier.arrive.shared.b64 %rd2, [bar];
mbarrier.test_wait.parity.shared.b64 %p4, [bar], 1;
selp.u32 %r4, 1, 0, %p4;
shr.b64 %rd3, %rd2, 63;
cvt.u32.u64 %r5, %rd3;
st.global.u32 [%rd1], %r4;
st.global.u32 [%rd1+4], %r5;
DONE:
ret;
""")
    assert out[:2].tolist() == [1, 1]


def test_try_wait_with_a_time_hint_times_out_then_succeeds():
    """Warp 1 counts its failed try_waits (they time out only while warp 0, the arriving
    one, cannot run: never here, so each returns on completion) and then succeeds."""
    out = checked(INIT_BY_THREAD_0.format(count=1) + """
setp.lt.u32 %p2, %r1, 32;
@%p2 bra PRODUCER;
mov.u32 %r4, 0;
RETRY:
mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0, 100;
@%p3 bra OK;
add.s32 %r4, %r4, 1;
bra RETRY;
OK:
st.global.u32 [%rd1], %r4;
bra DONE;
PRODUCER:
@%p1 bra DONE;
mov.u32 %r10, 0;
SLOW:
add.s32 %r10, %r10, 1;
setp.lt.u32 %p4, %r10, 20;
@%p4 bra SLOW;
mbarrier.arrive.shared.b64 %rd2, [bar];
DONE:
ret;
""", nthreads=64, nout=64)
    assert (out[32:] == 0).all()


def test_waiting_for_a_phase_nobody_completes_is_a_deadlock():
    _, result = run(INIT_BY_THREAD_0.format(count=64) + """
WAIT:
mbarrier.try_wait.parity.shared.b64 %p2, [bar], 0;
@!%p2 bra WAIT;
""")
    assert result.trap is not None and result.trap.kind == "deadlock"
    assert "mbarrier" in result.trap.message


@pytest.mark.parametrize("body, message", [
    ("mbarrier.arrive.shared.b64 %rd2, [bar];", "no initialised mbarrier"),
    ("mbarrier.init.shared.b64 [bar], 8;\nmbarrier.arrive.noComplete.shared.b64 %rd2, [bar], 1;",
     "completed the phase"),
    ("mbarrier.init.shared.b64 [bar], 1;\nmbarrier.arrive.shared.b64 %rd2, [bar], 2;", "arrival count 2"),
    ("mbarrier.init.shared.b64 [bar], 1;\nmbarrier.inval.shared.b64 [bar];\n"
     "mbarrier.test_wait.parity.shared.b64 %p1, [bar], 0;", "no initialised mbarrier"),
    ("mbarrier.init.shared.b64 [bar+4], 1;", "not 8-byte aligned"),
])
def test_misuse_traps(body, message):
    _, result = run(body)
    assert result.trap is not None and result.trap.kind == "mbarrier"
    assert message in result.trap.message


def test_whole_warp_inval_then_elected_init_is_legal():
    """NVIDIA's Hopper producers re-arm a one-shot barrier with ``inval`` by the whole warp,
    then ``init`` by one elected thread: the first round invalidates memory never
    initialised, later threads of the warp an invalidated object.  Both are no-ops; each
    round's phase then completes with its expect_tx and complete_tx."""
    out = checked("""
mov.u32 %r30, 0;
ROUND:
mbarrier.inval.shared.b64 [bar];
elect.sync %r4|%p1, -1;
@!%p1 bra ARMED;
mbarrier.init.shared.b64 [bar], 1;
mbarrier.arrive.expect_tx.relaxed.cta.shared.b64 %rd2, [bar], 64;
mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [bar], 64;
ARMED:
bar.warp.sync -1;
WAIT:
mbarrier.try_wait.parity.shared.b64 %p2, [bar], 0;
@!%p2 bra WAIT;
add.s32 %r30, %r30, 1;
setp.lt.u32 %p3, %r30, 3;
@%p3 bra ROUND;
st.global.u32 [%rd1], %r30;
""")
    np.testing.assert_array_equal(out, np.full(32, 3))


def test_inval_with_a_thread_waiting_traps():
    """Warp 1 is suspended in try_wait when warp 0 invalidates the barrier (after a loop
    long enough for warp 1 to get there): the object is still in use."""
    _, result = run(INIT_BY_THREAD_0.format(count=64) + """
setp.ge.u32 %p2, %r1, 32;
@%p2 bra WAIT;
mov.u32 %r10, 40;
COUNTDOWN:
sub.s32 %r10, %r10, 1;
setp.ne.u32 %p3, %r10, 0;
@%p3 bra COUNTDOWN;
mbarrier.inval.shared.b64 [bar];
bra DONE;
WAIT:
mbarrier.try_wait.parity.shared.b64 %p4, [bar], 0;
@!%p4 bra WAIT;
DONE:
ret;
""", nthreads=64, nout=64)
    assert result.trap is not None and result.trap.kind == "mbarrier"
    assert "still in use: 32 threads wait on it" in result.trap.message


@pytest.mark.parametrize("verb", ["mbarrier.inval.shared.b64 [bar];", "mbarrier.init.shared.b64 [bar], 1;"])
def test_ending_or_restarting_with_transactions_owed_traps(verb):
    """Thread 0's expect_tx raised the tx-count by 64 bytes that no transfer paid back yet."""
    _, result = run(f"""
mbarrier.init.shared.b64 [bar], 1;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], 64;
{verb}
""")
    assert result.trap is not None and result.trap.kind == "mbarrier"
    assert "still in use: tx-count 64 outstanding" in result.trap.message


def test_inval_before_a_cp_async_arrival_lands_traps():
    """cp.async.mbarrier.arrive arrives when the thread's copies complete: invalidating the
    barrier before anyone waited for that would end it with the arrival still in flight."""
    _, result = run("""
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared.b64 [bar], 1;
bar.sync 0;
mov.u32 %r4, buf;
@%p1 cp.async.ca.shared.global [%r4], [%rd9], 4;
@%p1 cp.async.mbarrier.arrive.noinc.shared.b64 [bar];
@%p1 mbarrier.inval.shared.b64 [bar];
""")
    assert result.trap is not None and result.trap.kind == "mbarrier"
    assert "still in use: asynchronous operations have not yet arrived on it" in result.trap.message


def test_mbarriers_of_different_ctas_are_separate():
    """Two CTAs in one batch: each CTA's 32 arrivals complete only its own barrier."""
    out = checked(INIT_BY_THREAD_0.format(count=32) + """
mbarrier.arrive.shared.b64 %rd2, [bar];
mbarrier.test_wait.parity.shared.b64 %p2, [bar], 0;
selp.u32 %r4, 1, 0, %p2;
mbarrier.pending_count.b64 %r5, %rd2;
mad.lo.s32 %r6, %r4, 100, %r5;
st.global.u32 [%rd1], %r6;
""", grid=2)
    expected = 100 + np.arange(31, -1, -1)
    np.testing.assert_array_equal(out, np.r_[expected, expected])


# -- ldmatrix / stmatrix ----------------------------------------------------------------------
MATRIX = """
mul.lo.s32 %r4, %r1, 131074;
add.s32 %r4, %r4, 65536;
shl.b32 %r5, %r1, 2;
mov.u32 %r6, buf;
add.s32 %r7, %r6, %r5;
st.shared.u32 [%r7], %r4;
add.s32 %r4, %r4, 4194368;
st.shared.u32 [%r7+128], %r4;
bar.sync 0;
and.b32 %r8, %r1, 15;
shl.b32 %r9, %r8, 4;
add.s32 %r10, %r6, %r9;
"""


@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_fragments(trans):
    """buf holds two 8x8 b16 matrices with element (i, j) of matrix k = 64k + 8i + j; lane l
    gets row l/4 (column l/4 with .trans), elements 2(l%4) and 2(l%4)+1, of each."""
    t = ".trans" if trans else ""
    out = checked(MATRIX + f"""
ldmatrix.sync.aligned.m8n8.x2{t}.shared.b16 {{%r11, %r12}}, [%r10];
st.global.u32 [%rd1], %r11;
add.s64 %rd2, %rd1, 128;
st.global.u32 [%rd2], %r12;
""", nout=64)
    lane = np.arange(32)
    mats = np.arange(128).reshape(2, 8, 8)
    r, c = lane // 4, 2 * (lane % 4)
    for k in range(2):
        m = mats[k].T if trans else mats[k]
        want = m[r, c] | (m[r, c + 1] << 16)
        np.testing.assert_array_equal(out[32 * k:32 * k + 32], want)


@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_inverts_ldmatrix(trans):
    """stmatrix of what ldmatrix loaded rebuilds the matrices (elsewhere in shared memory)."""
    t = ".trans" if trans else ""
    out = checked(MATRIX + f"""
ldmatrix.sync.aligned.m8n8.x2{t}.shared.b16 {{%r11, %r12}}, [%r10];
add.s32 %r13, %r10, 256;
stmatrix.sync.aligned.m8n8.x2{t}.shared.b16 [%r13], {{%r11, %r12}};
bar.sync 0;
ld.shared.u32 %r14, [%r7+256];
st.global.u32 [%rd1], %r14;
""")
    np.testing.assert_array_equal(out, (2 * np.arange(32)) | ((2 * np.arange(32) + 1) << 16))
