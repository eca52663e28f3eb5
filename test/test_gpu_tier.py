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


sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import gpu_tier  # noqa: E402


def check_planned(device: gpu.Device, folder: str, entry: dict) -> None:
    """One prepared case (``bench/gpu_tier.py``) on the GPU against the interpreter's outcome."""
    if "skip" in entry:
        pytest.skip(entry["skip"])
    if entry["arch"] not in gpu.runnable_archs(device.capability, [entry["arch"]]):
        pytest.skip(f"a {device.arch} device cannot run {entry['arch']} cubins")
    r = gpu_tier.load_case(folder, entry)
    if r["failed"]:  # a device-side assert is sticky: it would end this process's use of the GPU
        problem = gpu_tier.check_in_child(folder, entry)
    else:
        problem = compare(r["expected"], gpu.run_cubin(device, r["cubin"], r["entry"], r["kinds"], r["grid"],
                                                       r["args"]))
    assert problem is None, problem


if PLAN:
    @pytest.mark.parametrize("planned", gpu_tier.load_manifest(PLAN), ids=lambda e: e["id"])
    def test_planned_case_matches_interpreter(planned, device):
        check_planned(device, PLAN, planned)

else:
    pytest.importorskip("cuda.tile")

    from conftest import ARCHS  # noqa: E402
    from test_differential import _entries  # noqa: E402

    @pytest.mark.parametrize("aligned", [False, True], ids=["unaligned", "aligned"])
    @pytest.mark.parametrize("arch", ARCHS)
    @pytest.mark.parametrize("case, k", list(_entries()))
    def test_gpu_matches_interpreter(case, k, arch, aligned, device, tmp_path):
        """Planned here and now (cuTile, our compiler, the interpreter), then run as a plan is."""
        if arch not in gpu.runnable_archs(device.capability, [arch]):
            pytest.skip(f"a {device.arch} device cannot run {arch} cubins")
        check_planned(device, str(tmp_path), gpu_tier._plan_one((case.name, k, arch, aligned, str(tmp_path))))
