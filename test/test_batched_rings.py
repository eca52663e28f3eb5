"""A batched GEMM as cuTile's samples write it (``kernels/workloads.batched_matmul``: 3-D
tiles of one batch item, each reshaped to a matrix for the multiply) is pipelined like a
2-D one: the ``reshape`` that drops the unit batch dim (``software_pipeline.unit_reshape``)
no longer hides the two loads.  A ``cp.async`` ring on sm_80; TMA rings of 3-D boxes
(``tma_ring.matrix_box``: box ``(inner, rows, 1)``, the batch index the outermost
coordinate) feeding ``wgmma`` on sm_90, ``tcgen05`` with the accumulator in tensor memory on
sm_100 and ``mma.sync`` on sm_120.

Before, no arch pipelined it: each trip loaded both tiles (TMA boxes on sm_90 and later,
one at a time with its wait) and multiplied.  f16 128x128x64, aligned, against NVIDIA's
tileiras on the same inputs (``bench/coalescing.py``, executed instructions): sm_80 1.45x
-> 1.36x NVIDIA's, sm_90 1.46x -> 1.02x, sm_100 2.30x -> 0.73x, sm_120 1.29x -> 1.22x;
``ptxas -v`` registers on sm_90 250 -> 154 (NVIDIA 255), sm_100 150 -> 72 (NVIDIA 255)."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels._case import KernelCase, arr  # noqa: E402
from kernels.workloads import batched_matmul  # noqa: E402

from tileiras import diffcheck, interp  # noqa: E402
from tileiras.lower.software_pipeline import PipelinePlan  # noqa: E402
from tileiras.lower.tileas_format import format_tileas  # noqa: E402
from tileiras.lower.tileas_parse import parse_tileas  # noqa: E402
from tileiras.lower.tma_ring import RingPlan  # noqa: E402
from tileiras.pipeline import CompileOptions, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.tile import ops_core as CO  # noqa: E402

F16 = ct.float16
CASE = KernelCase("batched_matmul_64", batched_matmul, [[arr(F16, 3), arr(F16, 3), arr(F16, 3), 64, 64, 32]])


def _module(arch: str, aligned: bool = True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_bytecode(export(CASE, arch=arch, aligned=aligned))


@pytest.mark.parametrize("arch,kind,form", [("sm_80", PipelinePlan, "cp.async"), ("sm_90", RingPlan, "wgmma"),
                                            ("sm_100", RingPlan, "tcgen05"), ("sm_120", RingPlan, "mma.sync")])
def test_the_k_loop_is_pipelined(arch: str, kind: type, form: str):
    c = run_stages(_module(arch), CompileOptions(gpu_name=arch), "tileas", only_needed=True)
    (name, tas), = c.tas.items()
    (plan,) = [p for p in tas.pipelines.values() if not isinstance(p, str)]
    assert type(plan) is kind
    assert [ld.results[0].type.shape for ld in plan.loads] == [(1, 64, 32), (1, 32, 64)]
    reshapes = [op for op in tas.aa.live_ops() if isinstance(op, CO.ReshapeOp) and op in tas.pipelined]
    assert len(reshapes) == 2 and {op.result for op in reshapes} == set(plan.mma.operands[:2])
    assert (form == "tcgen05") == bool(getattr(plan, "tcgen05", False))
    assert (form == "wgmma") == tas.tensor_cores[plan.mma].warpgroup
    if kind is RingPlan:        # 3-D maps, a box of one batch item
        assert all(len(spec.dims) == 3 and spec.box[2:] == (1,) for spec in plan.specs)
    text = format_tileas(tas)
    back = parse_tileas(text, c.aa[name])
    assert back.pipelines == tas.pipelines and format_tileas(back) == text


def test_sm90_copies_3d_boxes_in_its_ring():
    ptx, _ = diffcheck.compile_with_host(_module("sm_90"), "sm_90")
    loads = re.findall(r"cp\.async\.bulk\.tensor\.(\d)d\.shared::cta\.global\S* \[[^\]]*\], \[[^,]+, \{([^}]*)\}\]", ptx)
    assert loads and all(dims == "3" and len(coords.split(",")) == 3 for dims, coords in loads)
    assert "wgmma.wait_group.sync.aligned 1" in ptx        # a group left in flight across trips


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_the_interpreter_agrees(arch: str):
    """Two batch items, K of five trips (the last partial where unaligned), 2 x 2 tiles."""
    module = _module(arch)
    fn = next(f for f in module.functions if f.is_entry)
    rng = np.random.default_rng(7)
    a = rng.uniform(-2, 2, (2, 128, 160)).astype(np.float16)
    b = rng.uniform(-2, 2, (2, 160, 128)).astype(np.float16)
    c = np.zeros((2, 128, 128), np.float16)
    args = interp.cutile_args(a, b, c)
    grid = (2, 2, 2)
    expected = diffcheck.run_interpreter(module, fn.name, grid, args)
    want = np.matmul(a.astype(np.float32), b.astype(np.float32))
    assert np.allclose(np.asarray(expected.arrays[2], np.float32), want, rtol=1e-2, atol=0.25)
    ptx, host = diffcheck.compile_with_host(module, arch)
    got = diffcheck.run_ptx(ptx, fn.name, grid, args, host_object=host)
    assert diffcheck.compare(expected, got) is None
