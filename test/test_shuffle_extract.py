"""An ``extract`` at indices known only at run time, from a tile every warp holds whole,
reads its elements with ``shfl.sync.idx`` (``layout_rules.extract_by_shuffle``): the lane
holding an element selects it among its registers and passes it to the others.  Before,
every such extract stored the whole tile to shared memory between two barriers and read
the block back: paged decode attention (``kernels/workloads.paged_decode``) did so every
trip for its page id, two barriers a trip; with the shuffle its ring's copies can pick the
id again for the iteration they copy (``test_paged_ring.py``)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels._case import KernelCase, arr  # noqa: E402
from kernels.workloads import CASES as WORKLOADS  # noqa: E402

from tileiras import diffcheck, interp  # noqa: E402
from tileiras.pipeline import CompileOptions, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.tile import ops_core as CO  # noqa: E402

ConstInt = ct.Constant[int]


@ct.kernel
def pick_rows(x, picks, out, R: ConstInt, C: ConstInt, N: ConstInt):
    """Row ``picks[k] % R`` of an R x C tile, for each of N picks: an extract at an index
    loaded at run time, in a loop."""
    t = ct.load(x, index=(0, 0), shape=(R, C))
    sel = ct.load(picks, index=(0,), shape=(N,))
    for k in range(N):
        j = ct.extract(sel, index=(k,), shape=(1,)).item()
        row = ct.extract(t, index=(j % R, 0), shape=(1, C))
        ct.store(out, index=(k, 0), tile=row)


def _case(dtype) -> KernelCase:
    return KernelCase("pick_rows", pick_rows, [[arr(dtype, 2), arr(ct.int32), arr(dtype, 2), 4, 8, 8]])


def _module(case: KernelCase, arch: str = "sm_80"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_bytecode(export(case, arch=arch, aligned=True))


@pytest.mark.parametrize("dtype", [ct.float32, ct.float16, ct.int8, ct.bfloat16])
def test_rows_picked_at_run_time_agree_without_shared_memory(dtype):
    module = _module(_case(dtype))
    (tas,) = run_stages(module, CompileOptions(gpu_name="sm_80"), "tileas", only_needed=True).tas.values()
    extracts = [op for op in tas.aa.live_ops() if isinstance(op, CO.ExtractOp)]
    assert len(extracts) == 2 and not any(op in tas.scratch for op in extracts)
    ptx, host = diffcheck.compile_with_host(module, "sm_80")
    assert "shfl.sync.idx" in ptx and "st.shared" not in ptx
    fn = next(f for f in module.functions if f.is_entry)
    rng = np.random.default_rng(4)
    np_type = {ct.float32: np.float32, ct.float16: np.float16, ct.int8: np.int8}.get(dtype)
    if np_type is None:
        import ml_dtypes
        np_type = ml_dtypes.bfloat16
    x = (rng.uniform(-100, 100, (16, 16))).astype(np_type)
    picks = rng.integers(0, 64, 16).astype(np.int32)
    out = np.zeros((16, 16), np_type)
    args = interp.cutile_args(x, picks, out)
    expected = diffcheck.run_interpreter(module, fn.name, (1, 1, 1), args)
    want = x[:4, :8][picks[:8] % 4]
    assert np.array_equal(np.asarray(expected.arrays[2])[:8, :8], want)
    got = diffcheck.run_ptx(ptx, fn.name, (1, 1, 1), args, host_object=host)
    assert diffcheck.compare(expected, got) is None


def test_paged_decode_picks_its_page_id_by_shuffle():
    case = next(c for c in WORKLOADS if c.name == "paged_decode")
    module = _module(case, "sm_80")
    (tas,) = run_stages(module, CompileOptions(gpu_name="sm_80"), "tileas", only_needed=True).tas.values()
    (extract,) = [op for op in tas.aa.live_ops() if isinstance(op, CO.ExtractOp)]
    assert extract not in tas.scratch
    ptx, _ = diffcheck.compile_with_host(module, "sm_80")
    assert "shfl.sync.idx" in ptx
