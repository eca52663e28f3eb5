"""The ``gpu`` tier: every kernel entry the differential tests run, compiled by us and run on
the GPU, against the reference interpreter, on every architecture the card can run.

Skipped cleanly where there is no CUDA driver or device (every machine but a lent GPU one).
Two ways to get the cases:

- ``TILEIRAS_GPU_PLAN=<folder>`` (how a lent machine runs it: no cuTile, no NVIDIA tools
  there): the cases ``bench/gpu_tier.py plan <folder>`` prepared elsewhere, cubins, inputs and
  the interpreter's outcomes included; only the launches happen here.
- otherwise this package's test extra exports and compiles each case in-process (cuTile), on
  the differential tests' inputs, unaligned and aligned.

    TILEIRAS_GPU_PLAN=.gpu-plan/tier python -m pytest -q -m gpu test/test_gpu_tier.py
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from tileiras import gpu
from tileiras.diffcheck import compare

pytestmark = pytest.mark.gpu

PLAN = os.environ.get("TILEIRAS_GPU_PLAN")


@pytest.fixture(scope="session")
def device() -> gpu.Device:
    reason = gpu.probe()
    if reason is not None:
        pytest.skip(reason)
    return gpu.open_device()


def check_on_gpu(device: gpu.Device, arch: str, cubin: bytes, entry: str, kinds, grid, args,
                 expected) -> None:
    if arch not in gpu.runnable_archs(device.capability, [arch]):
        pytest.skip(f"a {device.arch} device cannot run {arch} cubins")
    got = gpu.run_cubin(device, cubin, entry, kinds, grid, args)
    problem = compare(expected, got)
    assert problem is None, problem


if PLAN:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from gpu_tier import load_case, load_manifest

    @pytest.mark.parametrize("planned", load_manifest(PLAN), ids=lambda e: e["id"])
    def test_planned_case_matches_interpreter(planned, device):
        if "skip" in planned:
            pytest.skip(planned["skip"])
        r = load_case(PLAN, planned)
        check_on_gpu(device, r["arch"], r["cubin"], r["entry"], r["kinds"], r["grid"], r["args"],
                     r["expected"])

else:
    pytest.importorskip("cuda.tile")

    from conftest import ARCHS  # noqa: E402
    from differential import (  # noqa: E402
        ALIGNED_EXTENT,
        EXTENT,
        Case,
        cached_export,
        make_inputs,
        run_interpreter,
    )
    from test_differential import GRID, _entries, bytecode_cache  # noqa: E402,F401 (a fixture)

    from tileiras.reader import read_bytecode  # noqa: E402

    @pytest.mark.parametrize("aligned", [False, True], ids=["unaligned", "aligned"])
    @pytest.mark.parametrize("arch", ARCHS)
    @pytest.mark.parametrize("case, k", list(_entries()))
    def test_gpu_matches_interpreter(case, k, arch, aligned, device, bytecode_cache):
        if arch not in gpu.runnable_archs(device.capability, [arch]):
            pytest.skip(f"a {device.arch} device cannot run {arch} cubins")
        data = cached_export(bytecode_cache, case, arch, aligned)
        module = read_bytecode(data)
        fn = module.functions[k]
        arrays = make_inputs(case.params[k], np.random.default_rng(1), ALIGNED_EXTENT if aligned else EXTENT)
        c = Case(data, fn.name, arrays, GRID)
        check_on_gpu(device, arch, gpu.compile_cubin(module, arch), fn.name, gpu.signature_of(fn), GRID,
                     c.args(c.arrays), run_interpreter(c))
