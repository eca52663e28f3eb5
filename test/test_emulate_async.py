"""The emulator's adversarial model of asynchrony and its shared-memory race detector, on
hand-written PTX: each test plants a missing wait or barrier and checks that the message
names the instruction, and runs the same PTX with the wait present clean."""
from __future__ import annotations

import numpy as np
import pytest
from test_emulate_mbarrier import run
from test_emulate_mma import wgmma_kernel

from tileiras.emulate import launch

#: thread t copies 16 bytes of ``k_out`` (the output array, read before it is written:
#: out[4t..4t+3]) into buf[16t..16t+15] with cp.async; {size}: the src-size operand
CP_ASYNC = """
shl.b32 %r20, %r1, 4;
mov.u32 %r21, buf;
add.s32 %r22, %r21, %r20;
cp.async.cg.shared.global [%r22], [%rd1], 16{size};
cp.async.commit_group;
{wait}
ld.shared.u32 %r23, [%r22+{at}];
st.global.u32 [%rd1], %r23;
"""


def cp_async(wait: str, size: str = "", at: int = 0, nthreads: int = 32):
    out = np.arange(nthreads * 4, dtype=np.int32) + 100
    from test_emulate_mbarrier import OUT, SMEM
    from test_emulate_ptx import kernel
    prologue = """
ld.param.b64 %rd9, [k_out];
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd8, %r1, 16;
add.s64 %rd1, %rd9, %rd8;
"""
    body = prologue + CP_ASYNC.format(wait=wait, size=size, at=at)
    ptx = kernel(body, OUT, directives=f".reqntid {nthreads}", extra=SMEM)
    result = launch(ptx, "k", (1,), [out], max_steps=20_000)
    return out.reshape(-1, 4)[:, 0], result


def test_cp_async_lands_at_its_wait_group():
    got, result = cp_async("cp.async.wait_group 0;")
    assert result.trap is None, result.trap
    np.testing.assert_array_equal(got, 100 + 4 * np.arange(32))


def test_cp_async_src_size_zero_fills():
    got, result = cp_async("cp.async.wait_all;", size=", 4", at=4)
    assert result.trap is None, result.trap
    np.testing.assert_array_equal(got, 0)


def test_reading_a_cp_async_destination_before_its_wait_traps():
    _, result = cp_async("")
    assert result.trap is not None and result.trap.kind == "async"
    message = result.trap.message
    assert message.startswith("PTX line ") and "(ld.shared.u32 %r23, [%r22];)" in message
    assert "block [0, 0, 0], thread [0, 0, 0] reads shared byte 0x10, the destination of" in message   # buf at 16
    assert "cp.async.cg.shared.global [%r22], [%rd1], 16;" in message
    assert "before cp.async.wait_group/wait_all" in message


def test_a_wait_group_that_leaves_the_group_in_flight_traps():
    """wait_group 1 with one group committed waits for nothing."""
    _, result = cp_async("cp.async.wait_group 1;")
    assert result.trap is not None and result.trap.kind == "async"
    assert "cp.async.wait_group/wait_all" in result.trap.message


MBARRIER_TRACKED = """
setp.ne.u32 %p1, %r1, 0;
@%p1 bra INITED;
mbarrier.init.shared.b64 [bar], 32;
INITED:
bar.sync 0;
shl.b32 %r20, %r1, 2;
mov.u32 %r21, buf;
add.s32 %r22, %r21, %r20;
cp.async.ca.shared.global [%r22], [%rd1], 4;
cp.async.mbarrier.arrive.noinc.shared.b64 [bar];
{wait}
xor.b32 %r24, %r20, 4;
add.s32 %r25, %r21, %r24;
ld.shared.u32 %r23, [%r25];
st.global.u32 [%rd1], %r23;
"""
WAIT_PHASE_0 = """
WAIT:
mbarrier.test_wait.parity.shared.b64 %p2, [bar], 0;
@!%p2 bra WAIT;
"""


def test_cp_async_tracked_by_an_mbarrier_lands_at_its_phase():
    """Each thread copies its own out[t] into buf and, after the mbarrier phase, reads its
    neighbour's (t ^ 1): the wait orders the copies and the other warps' reads."""
    out, result = run(MBARRIER_TRACKED.format(wait=WAIT_PHASE_0))
    assert result.trap is None, result.trap
    np.testing.assert_array_equal(out, -1)        # out starts as -1 everywhere

    out, result = run(MBARRIER_TRACKED.format(wait=""))
    assert result.trap is not None and result.trap.kind == "async"
    assert "ld.shared.u32 %r23, [%r25];" in result.trap.message
    assert "cp.async.ca.shared.global [%r22], [%rd1], 4;" in result.trap.message
    assert "the mbarrier phase that tracks it" in result.trap.message


BULK = """
setp.ne.u32 %p1, %r1, 0;
@%p1 bra ISSUED;
mbarrier.init.shared.b64 [bar], 1;
mbarrier.arrive.expect_tx.shared.b64 %rd2, [bar], 128;
mov.u32 %r21, buf;
cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [%r21], [%rd9], 128, [bar];
ISSUED:
bar.sync 0;
{wait}
shl.b32 %r20, %r1, 2;
mov.u32 %r21, buf;
add.s32 %r22, %r21, %r20;
ld.shared.u32 %r23, [%r22];
add.s32 %r23, %r23, 1;
st.global.u32 [%rd1], %r23;
"""


def test_bulk_copy_lands_at_its_mbarrier_phase():
    out, result = run(BULK.format(wait=WAIT_PHASE_0))
    assert result.trap is None, result.trap
    np.testing.assert_array_equal(out, 0)              # -1 copied in, plus one

    _, result = run(BULK.format(wait=""))
    assert result.trap is not None and result.trap.kind == "async"
    assert "ld.shared.u32 %r23, [%r22];" in result.trap.message
    assert "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes" in result.trap.message


# ----------------------------------------------------------------------------- wgmma
WGMMA = "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16"
WGMMA_ARGS = [np.zeros(16384, np.uint8), np.zeros((8, 128), np.float32), np.zeros((8, 128), np.float32),
              np.uint64(1 << 32 | 16 << 16), np.uint64(8192 >> 4 | 1 << 32 | 16 << 16), np.uint32(1)]


def wgmma_variant(old: str, new: str):
    ptx = wgmma_kernel(WGMMA, 16)
    assert old in ptx
    return launch(ptx.replace(old, new), "k", (1,), [a.copy() for a in WGMMA_ARGS])


def test_wgmma_with_its_fence_and_wait_runs_clean():
    assert wgmma_variant("ret;", "ret;").trap is None
    # registers written between the fence and the MMA (ptxas serialises): as NVIDIA's PTX does
    assert wgmma_variant("wgmma.fence.sync.aligned;\n",
                         "wgmma.fence.sync.aligned;\nmov.f32 %f3, 0f00000000;\n").trap is None


@pytest.mark.parametrize("old, new, message", [
    ("wgmma.wait_group.sync.aligned 0;\n", "",
     "(st.global.f32 [%rd8], %f0;), block [0, 0, 0], thread [0, 0, 0] uses %f0, a register of the in-flight"),
    ("wgmma.wait_group.sync.aligned 0;\n", "wgmma.wait_group.sync.aligned 1;\n", "before wgmma.wait_group"),
    ("wgmma.fence.sync.aligned;\n", "", "no wgmma.fence before the first wgmma.mma_async"),
    ("wgmma.commit_group.sync.aligned;\n", "wgmma.commit_group.sync.aligned;\nst.shared.u32 [smem+8192], %r1;\n",
     "overwrites shared byte 0x2000, an operand still being read by the asynchronous"),
])
def test_wgmma_hazards_trap(old, new, message):
    result = wgmma_variant(old, new)
    assert result.trap is not None and result.trap.kind == "async", result.trap
    assert message in result.trap.message
    assert WGMMA in result.trap.message


# ----------------------------------------------------------------------------- races
def exchange(between: str, order: str = "write-read"):
    """64 threads: thread t writes buf[t], ``between``, reads buf[(t + 32) % 64] (the
    other warp's slot); ``order`` read-write: reads first, then writes."""
    write = """
shl.b32 %r20, %r1, 2;
mov.u32 %r21, buf;
add.s32 %r22, %r21, %r20;
st.shared.u32 [%r22], %r1;
"""
    read = """
add.s32 %r24, %r1, 32;
and.b32 %r24, %r24, 63;
shl.b32 %r25, %r24, 2;
mov.u32 %r21, buf;
add.s32 %r26, %r21, %r25;
ld.shared.u32 %r23, [%r26];
st.global.u32 [%rd1], %r23;
"""
    body = write + between + read if order == "write-read" else read + between + write
    return run(body, nthreads=64, nout=64)


def test_a_barrier_between_write_and_read_is_no_race():
    out, result = exchange("bar.sync 0;")
    assert result.trap is None, result.trap
    np.testing.assert_array_equal(out, (np.arange(64) + 32) % 64)


@pytest.mark.parametrize("order, verbs", [
    ("write-read", ("reads it at PTX line", "(ld.shared.u32 %r23, [%r26];)", "wrote it at PTX line",
                    "(st.shared.u32 [%r22], %r1;)")),
    ("read-write", ("writes it at PTX line", "(st.shared.u32 [%r22], %r1;)", "read it at PTX line",
                    "(ld.shared.u32 %r23, [%r26];)")),
])
def test_a_missing_barrier_is_a_race(order, verbs):
    _, result = exchange("", order)
    assert result.trap is not None and result.trap.kind == "race", result.trap
    message = result.trap.message
    assert message.startswith("shared-memory race at byte 0x")
    for part in verbs:
        assert part in message
    assert "thread [32, 0, 0]" in message or "thread [0, 0, 0]" in message
    assert "with no barrier or mbarrier ordering between them" in message


def test_named_barrier_with_a_count_orders_its_threads():
    out, result = exchange("bar.sync 1, 64;")
    assert result.trap is None, result.trap


def test_a_consumer_that_skips_the_mbarrier_wait_races():
    """Warp 0 writes and arrives; warp 1 reads: clean after its try_wait, a race without."""
    body = """
setp.ne.u32 %p1, %r1, 0;
@%p1 bra INITED;
mbarrier.init.shared.b64 [bar], 32;
INITED:
bar.sync 0;
setp.ge.u32 %p2, %r1, 32;
@%p2 bra CONSUMER;
shl.b32 %r20, %r1, 2;
mov.u32 %r21, buf;
add.s32 %r22, %r21, %r20;
st.shared.u32 [%r22], %r1;
mbarrier.arrive.shared.b64 %rd2, [bar];
bra DONE;
CONSUMER:
{wait}
sub.s32 %r24, %r1, 32;
shl.b32 %r25, %r24, 2;
mov.u32 %r21, buf;
add.s32 %r26, %r21, %r25;
ld.shared.u32 %r23, [%r26];
st.global.u32 [%rd1], %r23;
DONE:
ret;
"""
    wait = "WAIT:\nmbarrier.try_wait.parity.shared.b64 %p4, [bar], 0;\n@!%p4 bra WAIT;"
    out, result = run(body.format(wait=wait), nthreads=64, nout=64)
    assert result.trap is None, result.trap
    np.testing.assert_array_equal(out[32:], np.arange(32))
    _, result = run(body.format(wait=""), nthreads=64, nout=64)
    assert result.trap is not None and result.trap.kind == "race"
    assert "reads it at PTX line" in result.trap.message and "st.shared.u32 [%r22], %r1;" in result.trap.message


def test_shared_atomics_are_not_races_and_the_detector_can_be_turned_off():
    body = """
mov.u32 %r21, buf;
atom.shared.add.u32 %r22, [%r21], 1;
bar.sync 0;
ld.shared.u32 %r23, [%r21];
st.global.u32 [%rd1], %r23;
"""
    out, result = run(body, nthreads=64, nout=64)
    assert result.trap is None, result.trap
    np.testing.assert_array_equal(out, 64)
    from test_emulate_mbarrier import OUT, SMEM
    from test_emulate_ptx import kernel
    racy = kernel("mov.u32 %r1, %tid.x;\nmov.u32 %r21, buf;\nst.shared.u32 [%r21], %r1;\n", OUT,
                  directives=".reqntid 64", extra=SMEM)
    assert launch(racy, "k", (1,), [np.zeros(64, np.int32)]).trap.kind == "race"
    assert launch(racy, "k", (1,), [np.zeros(64, np.int32)], races=False).trap is None
