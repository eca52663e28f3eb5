"""The ``gpu`` tier: every kernel the differential tests run, compiled by us and run on the
GPU, against the reference interpreter, on every architecture the card can run.

Skipped cleanly where there is no CUDA driver or device (every machine but a lent GPU one).
On a GPU machine it needs this package's test extra (cuTile exports the kernels) and the
``gpu`` extra (cuda-bindings); ``python -m pytest -q -m gpu test/test_gpu_tier.py`` runs it.
"""
from __future__ import annotations

import numpy as np
import pytest

from tileiras import gpu

pytestmark = pytest.mark.gpu

pytest.importorskip("cuda.tile")

from conftest import ARCHS  # noqa: E402
from differential import Case, cached_export, compare, make_inputs, run_interpreter  # noqa: E402
from test_differential import GRID, _entries, bytecode_cache  # noqa: E402,F401 (a fixture)

from tileiras.reader import read_bytecode  # noqa: E402


@pytest.fixture(scope="session")
def device() -> gpu.Device:
    reason = gpu.probe()
    if reason is not None:
        pytest.skip(reason)
    return gpu.open_device()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case, k", list(_entries()))
def test_gpu_matches_interpreter(case, k, arch, device, bytecode_cache):
    if arch not in gpu.runnable_archs(device.capability, [arch]):
        pytest.skip(f"a {device.arch} device cannot run {arch} cubins")
    data = cached_export(bytecode_cache, case, arch)
    module = read_bytecode(data)
    fn = module.functions[k]
    c = Case(data, fn.name, make_inputs(case.params[k], np.random.default_rng(1), 100), GRID)
    cubin = gpu.compile_cubin(module, arch)
    got = gpu.run_cubin(device, cubin, fn.name, gpu.signature_of(fn), GRID, c.args(c.arrays))
    problem = compare(run_interpreter(c), got)
    assert problem is None, problem
