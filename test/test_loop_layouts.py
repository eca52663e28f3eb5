"""Tiles a ``for`` carries in the layout its body makes them in (layout_rules._for).

A block of rows' running statistics (an online logsumexp: a running max and a rescaled
running sum, 4 x 1 each) is made by reductions along the rows, in their rows' slice layout.
Carried in the canonical 4 x 1 layout, every trip converted them there and back through
shared memory: three exchanges and six barriers a trip.  Carried in the slice layout, none.
A ``continue`` inside an ``if`` of the body hands the loop its values in the same layouts."""
from __future__ import annotations

import warnings

import pytest

ct = pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels._case import KernelCase, arr  # noqa: E402
from kernels.models import CASES  # noqa: E402

from tileiras import diffcheck  # noqa: E402
from tileiras.pipeline import CompileOptions, compile_module  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

ConstInt = ct.Constant[int]


@ct.kernel
def skipping_logsumexp(x, out, BR: ConstInt, CHUNK: ConstInt):
    """The online logsumexp of 4 rows over every chunk but each third one (skipped by a
    ``continue`` inside an ``if``)."""
    i = ct.bid(0)
    run_max = ct.full((BR, 1), -float("inf"), dtype=ct.float32)
    run_sum = ct.zeros((BR, 1), dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=1, shape=(BR, CHUNK))):
        if k % 3 == 2:
            continue
        t = ct.load(x, index=(i, k), shape=(BR, CHUNK), padding_mode=ct.PaddingMode.NEG_INF)
        peak = ct.maximum(run_max, ct.max(t, axis=1, keepdims=True))
        run_sum = run_sum * ct.exp(run_max - peak) + ct.sum(ct.exp(t - peak), axis=1, keepdims=True)
        run_max = peak
    ct.store(out, index=(i,), tile=ct.reshape(ct.log(run_sum) + run_max, (BR,)))


SKIPPING = KernelCase("skipping_logsumexp", skipping_logsumexp, [[arr(ct.float32, 2), arr(ct.float32), 4, 16]])
CROSS_ENTROPY = next(c for c in CASES if c.name == "cross_entropy_chunked")


def _bytecode(case: KernelCase, arch: str, aligned: bool) -> bytes:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export(case, arch=arch, aligned=aligned)


def _loop_text(dump: str) -> str:
    body = dump[dump.index("= for("):]
    return body[:body.index("\n  %", body.index("continue("))]


@pytest.mark.parametrize("case", [CROSS_ENTROPY, SKIPPING], ids=["cross_entropy", "continue_in_if"])
@pytest.mark.parametrize("aligned", [False, True], ids=["unaligned", "aligned"])
def test_row_statistics_are_carried_as_the_reductions_make_them(case, aligned):
    data = _bytecode(case, "sm_80", aligned)
    dump = compile_module(read_bytecode(data), CompileOptions(gpu_name="sm_80"), "tileas")
    assert "convert_layout" not in _loop_text(dump)
    ptx = compile_module(read_bytecode(data), CompileOptions(gpu_name="sm_80"), "ptx")
    assert "bar.sync" not in ptx and "st.shared" not in ptx


@pytest.mark.parametrize("case", [CROSS_ENTROPY, SKIPPING], ids=["cross_entropy", "continue_in_if"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_carried_row_statistics_agree_with_the_interpreter(case, arch):
    for aligned in (False, True):
        reports = diffcheck.check_module(read_bytecode(_bytecode(case, arch, aligned)), arch, grid=(3, 1, 1))
        assert [r.problem for r in reports] == [None], (aligned, [r.problem for r in reports])
