"""Multiplies of one result shape take one accumulator layout (``tileas.choose_tensor_cores``).

A LoRA linear layer (``kernels/workloads.lora_linear``) accumulates x @ W in a K loop that
no tcgen05 ring takes (two multiplies a trip), then adds (x @ A) @ B into the loop's
result after it.  On sm_100 the multiply after the loop took tcgen05, whose accumulator
layout (a row a thread, tensor memory's) then stood for the whole 128x128 shape: the
loop's ``mma.sync`` was kept, multiplying into registers it does not hold its fragments
in, and every element of the output was wrong.  Where some multiplies of a shape cannot
run on tcgen05, none does now."""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels.workloads import CASES  # noqa: E402

from tileiras import diffcheck  # noqa: E402
from tileiras.pipeline import CompileOptions, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.tile import ops_arith as AR  # noqa: E402

LORA = next(c for c in CASES if c.name == "lora_linear")
CASE = dataclasses.replace(LORA, params=[[*LORA.params[0][:5], 128, 128, 64, 16]])


@pytest.mark.parametrize("aligned", [False, True], ids=["unaligned", "aligned"])
def test_a_shape_keeps_one_form_and_the_interpreter_agrees(aligned: bool):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = read_bytecode(export(CASE, arch="sm_100", aligned=aligned))
    (tas,) = run_stages(module, CompileOptions(gpu_name="sm_100"), "tileas", only_needed=True).tas.values()
    mmas = [op for op in tas.aa.live_ops() if isinstance(op, AR.MmaFOp) and op.result.type.shape == (128, 128)]
    assert len(mmas) == 2
    forms = {tas.tensor_cores[op].tcgen05 for op in mmas}
    assert len(forms) == 1
    assert all(tas.layouts[op.result] == tas.mma_layouts[(128, 128)] for op in mmas)
    fn = next(f for f in module.functions if f.is_entry)
    args = diffcheck.synthesize_args(fn, np.random.default_rng(5), 256)
    grid = (2, 2, 1)
    expected = diffcheck.run_interpreter(module, fn.name, grid, args)
    ptx, host = diffcheck.compile_with_host(module, "sm_100")
    assert diffcheck.compare(expected, diffcheck.run_ptx(ptx, fn.name, grid, args, host_object=host)) is None
