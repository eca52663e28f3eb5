"""The GPU tier's prepared cases (``bench/gpu_tier.py``): what a lent machine runs must be
exactly what the differential tests check here, inputs and the interpreter's outcome."""
from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cuda.tile")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import gpu_tier  # noqa: E402
from differential import ALIGNED_EXTENT, EXTENT, Case, export, make_inputs, run_interpreter  # noqa: E402
from kernels import ALL_CASES  # noqa: E402
from test_differential import GRID  # noqa: E402

from kernels.lists import GROUPED_MATMUL_WIDE  # noqa: E402

from tileiras.gpu.cubin import kernel_facts  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402


@pytest.mark.parametrize("name, k, arch, aligned", [
    ("float_arith", 0, "sm_80", False),       # scalars and 1-D arrays
    ("softmax_rows", 0, "sm_90", True),       # aligned 2-D: TMA tensor maps on sm_90
    ("batched_gemm", 0, "sm_80", False),      # 3-D arrays: outcome kept as the elements changed
])
def test_a_planned_case_is_the_differential_case(tmp_path, name, k, arch, aligned):
    entry = gpu_tier._plan_one((name, k, arch, aligned, str(tmp_path)))
    assert entry["file"] == f"{gpu_tier.case_id(name, k, arch, aligned)}.pkl"
    planned = gpu_tier.load_case(str(tmp_path), entry)

    case = next(c for c in ALL_CASES if c.name == name)
    arrays = make_inputs(case.params[k], np.random.default_rng(1), ALIGNED_EXTENT if aligned else EXTENT)
    c = Case(export(case, arch=arch, aligned=aligned), planned["entry"], arrays, GRID)
    expected = run_interpreter(c)
    assert planned["expected"].failed == expected.failed
    assert len(planned["expected"].arrays) == len(expected.arrays) >= 2
    for got, want in zip(planned["expected"].arrays, expected.arrays):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(gpu_tier._bits(got), gpu_tier._bits(want))
    for got, want in zip(planned["args"], c.args(arrays)):
        if isinstance(want, np.ndarray):
            assert np.array_equal(got, want)
        else:
            assert got == want
    assert planned["entry"] in kernel_facts(planned["cubin"])


def test_a_changed_numpy_stream_is_refused(tmp_path):
    entry = gpu_tier._plan_one(("float_arith", 0, "sm_80", False, str(tmp_path)))
    path = tmp_path / entry["file"]
    record = pickle.loads(path.read_bytes())
    record["seed"] = 2
    path.write_bytes(pickle.dumps(record))
    with pytest.raises(AssertionError, match="other inputs"):
        gpu_tier.load_case(str(tmp_path), entry)


def test_a_child_checks_a_planned_case_in_its_own_process(tmp_path):
    """Kernels that assert run in a child (the driver keeps an assert for the rest of the
    process); without a GPU the child's one-line reason comes back as the problem."""
    from tileiras import gpu

    entry = gpu_tier._plan_one(("debug_assert", 0, "sm_90", False, str(tmp_path)))
    assert gpu_tier.load_case(str(tmp_path), entry)["failed"]  # the interpreter's assert fires
    problem = gpu_tier.check_in_child(str(tmp_path), entry)
    if gpu.probe() is None:
        assert problem is None, problem
    else:
        assert problem.startswith("error: no CUDA driver"), problem


def test_a_list_case_keeps_its_arguments_and_the_interpreters_outcome(tmp_path):
    """A grouped GEMM (lists of arrays: sm_90's wgmma copy ring) is planned with the
    arguments ``diffcheck.check_module`` would draw, kept whole, and the interpreter's
    outcome on them; our emulated PTX agrees with that outcome."""
    from tileiras import diffcheck
    from tileiras.interp.arraylist import ArrayList

    entry = gpu_tier._plan_one(("grouped_matmul_wide", 0, "sm_90", False, str(tmp_path)))
    planned = gpu_tier.load_case(str(tmp_path), entry)
    assert planned["grid"] == (2, 2, 3) and planned["kinds"] == ("ptr", "i32") * 3
    lists = [a for a in planned["args"] if isinstance(a, ArrayList)]
    assert len(lists) == 3 and all(len(lst.arrays) == 3 for lst in lists)
    outputs = lists[2].arrays
    assert len(planned["expected"].arrays) == 9 and not planned["expected"].failed
    # the interpreter wrote C's groups (the table order: A's, B's, then C's members)
    assert all(not np.array_equal(want, got) for want, got in zip(planned["expected"].arrays[6:], outputs))
    ptx, host = diffcheck.compile_with_host(read_bytecode(export(GROUPED_MATMUL_WIDE, "sm_90")), "sm_90")
    got = diffcheck.run_ptx(ptx, planned["entry"], planned["grid"], planned["args"], host_object=host)
    assert diffcheck.compare(planned["expected"], got) is None
    assert planned["entry"] in kernel_facts(planned["cubin"])
