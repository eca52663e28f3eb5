"""A TMA ring whose stages feed two multiplies of one A (``tma_ring.RingSecond``).

A LoRA linear layer (``kernels/workloads.lora_linear``) multiplies each x tile by W's and by
the adapter's A in one K loop.  On sm_90 it ran unpipelined (synchronous TMA boxes, one
``wgmma`` group at a time) and on sm_100 on ``mma.sync`` from a ``cp.async`` ring, where
NVIDIA's tileiras runs both multiplies from one TMA ring on ``wgmma`` and ``tcgen05``.
Now the ring's boxes land x, W and A in every stage (A after the first's operands, from a
1024-byte line), both multiplies read x from the stage, and:

* ``wgmma``: the first multiply's ``wait_group 1`` retires the previous iteration's groups,
  the second's retires the first's, so once the second has waited only its own group
  reads the stage, whose predecessor is then released;
* ``tcgen05``: thread 0 issues both multiplies' MMAs and one commit releases the stage;
  both accumulators stay in tensor memory until the loop ends.

bf16 128x128x64, rank 16, against NVIDIA's tileiras on the same inputs
(``bench/coalescing.py``): executed instructions sm_90 1.13x -> 0.83x, sm_100 5.55x ->
0.77x; shared-memory wavefronts sm_90 12,032 -> 1,280 (NVIDIA 1,024), sm_100 25,088 ->
1,440 (NVIDIA 1,044).
"""
from __future__ import annotations

import re
import warnings

import pytest

ct = pytest.importorskip("cuda.tile")

from _rings import lora_agrees  # noqa: E402
from differential import export  # noqa: E402
from kernels._case import KernelCase, arr  # noqa: E402
from kernels.workloads import lora_linear  # noqa: E402

from tileiras import diffcheck  # noqa: E402
from tileiras.lower.tileas_format import format_tileas  # noqa: E402
from tileiras.lower.tileas_parse import parse_tileas  # noqa: E402
from tileiras.lower.tma_ring import RING_ALIGN, RingPlan  # noqa: E402
from tileiras.pipeline import CompileOptions, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

BF16 = ct.bfloat16
CASE = KernelCase("lora", lora_linear, [[arr(BF16, 2)] * 5 + [64, 64, 64, 16]])


def _module(arch: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_bytecode(export(CASE, arch=arch, aligned=True))


def _plan(arch: str):
    c = run_stages(_module(arch), CompileOptions(gpu_name=arch), "tileas", only_needed=True)
    ((name, tas),) = c.tas.items()
    (plan,) = [p for p in tas.pipelines.values() if not isinstance(p, str)]
    return c, name, tas, plan


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_one_tma_ring_holds_x_w_and_the_adapters_a(arch: str):
    c, name, tas, plan = _plan(arch)
    assert type(plan) is RingPlan and plan.second is not None and not plan.sync
    second = plan.second
    assert plan.tcgen05 is (arch == "sm_100")
    assert second.mma.lhs is plan.mma.lhs and second.load.results[0].type.shape == (64, 16)
    assert second.staging.a == plan.staging.a                  # x where the first reads it
    b = second.staging.b
    assert b.base % RING_ALIGN == 0 and b.base >= plan.staging.nbytes and not b.k_major
    assert plan.stage_bytes == -(-(b.base + b.nbytes) // RING_ALIGN) * RING_ALIGN
    assert plan.tx_bytes == 64 * 64 * 2 * 2 + 64 * 16 * 2       # x's, W's and A's boxes
    assert len(plan.specs) == len(plan.maps) == len(plan.box) == 3 and plan.box[2] == (64, 16)
    assert len(set(plan.maps)) == 3 and len(tas.tensor_maps) >= 3
    assert plan.in_flight == 1 and not plan.serial_reason
    assert all(tas.pipelined.get(op) is plan for op in (second.mma, second.load))
    assert second.mma not in tas.scratch
    if plan.tcgen05:        # both accumulators in tensor memory, side by side
        cols = tas.tmem_columns
        assert second.mma in cols and abs(cols[second.mma] - cols[plan.mma]) >= 16
    text = format_tileas(tas)
    back = parse_tileas(text, c.aa[name])
    assert back.pipelines == tas.pipelines and format_tileas(back) == text


def _ptx(arch: str) -> str:
    return diffcheck.compile_with_host(_module(arch), arch)[0]


def test_wgmma_iteration_waits_once_and_retires_the_first_group_with_the_second():
    """Per iteration: one "full" wait, x @ W's 4 ``wgmma`` (K of 64 in 4 steps) and x @ A's
    4, each multiply its commit and ``wait_group 1``, then the release of the previous
    stage; no thread touches the operands; the drain's ``wait_group 0`` completes both
    accumulators."""
    ptx = _ptx("sm_90")
    loop = ptx[ptx.index("mbarrier.try_wait.parity"):ptx.index("wgmma.wait_group.sync.aligned 0;")]
    assert loop.count("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16") == 4
    assert loop.count("wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16") == 4
    assert loop.count("wgmma.commit_group") == 2 and loop.count("wgmma.wait_group.sync.aligned 1;") == 2
    second = loop.index("m64n16k16")
    assert loop.index("m64n64k16") < second < loop.index("mbarrier.arrive.shared::cta.b64")
    assert "ld.shared" not in loop and "st.shared" not in loop and "cp.async.cg" not in ptx
    expects = re.findall(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 %rd\d+, \[%r\d+\], (\d+);", ptx)
    # a stage's bytes; the epilogue's B of (x @ A) @ B, 16 x 64, a box of its own
    assert set(expects) == {str(64 * 64 * 2 * 2 + 64 * 16 * 2), str(16 * 64 * 2)}


def test_tcgen05_iteration_commits_once_for_both_multiplies():
    """Thread 0 issues x @ W's and x @ A's MMAs (4 K steps each) and commits once, to the
    stage's "empty" mbarrier; the loop's end commits once more to read both accumulators."""
    ptx = _ptx("sm_100")
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16") >= 8
    commits = re.findall(r"tcgen05\.commit\.cta_group::1\.mbarrier::arrive::one\.shared::cluster\.b64", ptx)
    # one per iteration, one after the loop, one for the epilogue's (x @ A) @ B
    assert len(commits) == 3
    assert "mma.sync" not in ptx and "cp.async.cg" not in ptx


@pytest.mark.parametrize("arch,specialize", [("sm_90", "1"), ("sm_100", "1"), ("sm_90", "0")])
def test_the_ring_agrees_with_the_interpreter_over_many_trips(monkeypatch, arch: str, specialize: str):
    """K of 640: ten trips, more than the stages (8 warp-specialized), so every stage is
    refilled (by the producer warp where warp-specialized); 2 x 2 output tiles."""
    monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", specialize)
    ptx = lora_agrees(_module(arch), arch, 640, 7, 0.5)
    assert ("setmaxnreg.dec" in ptx) is (specialize == "1")
    assert "mma.sync" not in ptx and "cp.async.cg" not in ptx
