"""CTAs that talk through global memory: a lock-protected accumulation and an in-place
rotary embedding, interpreter against our PTX, under several CTA interleavings.

The emulator's ``interleave=seed`` mode (``tileiras/emulate/weak.py``) runs one CTA per step
in a seeded order, each CTA seeing global memory through its own copy that only releases
publish and only acquires refresh; the litmus tests show it catches a missing release or
acquire, which the default lockstep mode (sequentially consistent) cannot.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels.realworld import LOCKED_ROWS, ROPE_INPLACE  # noqa: E402

from tileiras import diffcheck, interp  # noqa: E402
from tileiras.emulate import launch  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def locked(request):
    cache = {}

    def get(arch):
        if arch not in cache:
            module = read_bytecode(export(LOCKED_ROWS, arch))
            cache[arch] = (module, diffcheck.compile_ptx(module, arch))
        return cache[arch]
    return get


def _lock_args(ctas: int, groups: int, cols: int = 48):
    """x (ctas x cols), acc (groups x cols) and zeroed locks, as cuTile passes them."""
    rng = np.random.default_rng(ctas)
    x = rng.uniform(-4, 4, (ctas, cols)).astype(np.float32)
    acc = rng.uniform(-4, 4, (groups, cols)).astype(np.float32)
    return interp.cutile_args(x, acc, np.zeros(groups, np.int32))


def _emulate(ptx, entry, grid, args, seed):
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    result = launch(ptx, entry, grid, copies, interleave=seed)
    assert result.ok, result.trap
    return copies


def _expected_acc(args):
    x, acc = args[0], args[5].copy()
    for i, row in enumerate(x):
        acc[i % len(acc)] += row
    return acc


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("ctas, groups", [(4, 2), (6, 3)])
def test_locked_accumulation_under_interleavings(locked, arch, ctas, groups):
    module, ptx = locked(arch)
    entry = module.functions[0].name
    args = _lock_args(ctas, groups)
    want = diffcheck.run_interpreter(module, entry, (ctas, 1, 1), args).arrays[1]
    np.testing.assert_allclose(want, _expected_acc(args), rtol=1e-5, atol=1e-5)
    for seed in SEEDS:
        got = _emulate(ptx, entry, (ctas, 1, 1), args, seed)
        np.testing.assert_allclose(got[5], want, rtol=1e-5, atol=1e-5, err_msg=f"seed {seed}")
        assert not got[10].any()      # every lock released


@pytest.mark.parametrize("weakened", ["atom.release.gpu", "atom.acquire.gpu"])
def test_interleaving_catches_missing_ordering(locked, weakened):
    """The same PTX with the lock's release (or acquire) made relaxed loses contributions."""
    module, ptx = locked("sm_80")
    assert weakened in ptx
    broken = ptx.replace(weakened, "atom.relaxed.gpu")
    args = _lock_args(4, 2)
    want = _expected_acc(args)
    lost = [not np.allclose(_emulate(broken, module.functions[0].name, (4, 1, 1), args, seed)[5], want)
            for seed in SEEDS]
    assert all(lost)
    lockstep = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    launch(broken, module.functions[0].name, (4, 1, 1), lockstep).check()
    np.testing.assert_allclose(lockstep[5], want, rtol=1e-5)  # lockstep cannot tell


MESSAGE_PASSING = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry mp(.param .u64 data, .param .u64 flag, .param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [data];
    ld.param.u64 %rd2, [flag];
    ld.param.u64 %rd3, [out];
    mov.u32 %r1, %ctaid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra READ;
    mov.u32 %r2, 42;
    st.global.u32 [%rd1], %r2;
    mov.u32 %r3, 1;
    st.STORE.gpu.global.u32 [%rd2], %r3;
    exit;
READ:
    ld.LOAD.gpu.global.u32 %r4, [%rd2];
    setp.eq.u32 %p2, %r4, 0;
    @%p2 bra READ;
    ld.global.u32 %r5, [%rd1];
    st.global.u32 [%rd3], %r5;
    exit;
}
"""


@pytest.mark.parametrize("store, load, stale", [("release", "acquire", False), ("relaxed", "acquire", True),
                                                ("release", "relaxed", True)])
def test_message_passing_litmus(store, load, stale):
    """CTA 0 writes data then a flag; CTA 1 waits for the flag and reads the data."""
    ptx = re.sub("STORE", store, MESSAGE_PASSING).replace("LOAD", load)
    seen = []
    for seed in range(8):
        out = np.zeros(1, np.uint32)
        launch(ptx, "mp", 2, [np.zeros(1, np.uint32), np.zeros(1, np.uint32), out],
               interleave=seed).check()
        seen.append(int(out[0]))
    assert (0 in seen) == stale and set(seen) <= {0, 42}


def test_diffcheck_zeroes_lock_words(locked):
    """Lock words are zeroed as frameworks allocate them; random ones let two CTAs into the
    protected region at once (issue 18: 'about half' of the contributions were lost)."""
    module, _ = locked("sm_80")
    fn = module.functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), extent=16)
    assert args[10].shape == (256,) and not args[10].any()
    assert args[5].any()              # the accumulator stays random
    [report] = diffcheck.check_module(module, "sm_80", grid=(2, 2, 1), extent=16)
    assert report.problem is None, report.problem


def test_rope_in_place_runs_on_its_own_grid():
    """The kernel reads only block id x: CTAs duplicated along y would rotate the same rows in
    place twice (interpreter, one after the other) or once (lockstep), so diffcheck drops y."""
    module = read_bytecode(export(ROPE_INPLACE, "sm_80"))
    fn = module.functions[0]
    assert diffcheck.distinct_grid(fn, (2, 2, 1)) == (2, 1, 1)
    assert diffcheck.distinct_grid(fn, (3,)) == (3, 1, 1)
    [report] = diffcheck.check_module(module, "sm_80", grid=(2, 2, 1), extent=16)
    assert report.problem is None, report.problem
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), extent=16)
    ptx = diffcheck.compile_ptx(module, "sm_80")
    want = diffcheck.run_interpreter(module, fn.name, (4, 1, 1), args)
    assert not np.array_equal(want.arrays[0], args[0])        # q was rotated
    for seed in SEEDS:
        got = [a for a in _emulate(ptx, fn.name, (4, 1, 1), args, seed) if isinstance(a, np.ndarray)]
        assert diffcheck.compare(want, diffcheck.Outcome(got, False)) is None, seed
