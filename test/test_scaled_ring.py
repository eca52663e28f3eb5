"""A block-scaled (MX fp8) GEMM's K loop on sm_120, software-pipelined as a ``cp.async`` ring.

``mmaf_scaled`` reads two more tiles each iteration, A's and B's block scales.  The ring
copies A, B and B's scales (rows of 64 bytes) into each stage; A's scales (rows of 2
bytes, too narrow and too little aligned for ``cp.async``) are loaded by each thread when
it issues the stage's copies and stored to the stage after the iteration's multiply
(``emit_async.scale_rows``), as NVIDIA's tool loads them with ``ld.global.b8``.  The
emulator's asynchrony model and race detector check the ring against the interpreter."""
from __future__ import annotations

import re
from collections import Counter

import pytest

pytest.importorskip("cuda.tile")

from differential import export  # noqa: E402
from kernels.clusters import MX_F8_GEMM  # noqa: E402

from tileiras import diffcheck  # noqa: E402
from tileiras.codegen import emit_async  # noqa: E402
from tileiras.lower.software_pipeline import PipelinePlan  # noqa: E402
from tileiras.pipeline import CompileOptions, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.tile import ops_memory as MEM  # noqa: E402

_data: list = []


def module():
    if not _data:
        _data.append(export(MX_F8_GEMM, "sm_120", aligned=True))
    return read_bytecode(_data[0])


def plan() -> PipelinePlan:
    (tas,) = run_stages(module(), CompileOptions(gpu_name="sm_120"), "tileas").tas.values()
    (decision,) = tas.pipelines.values()
    assert isinstance(decision, PipelinePlan), decision
    return decision


def test_the_loop_is_a_copy_ring_with_the_scales_in_each_stage():
    p = plan()
    sa, sb = p.scales.loads
    assert isinstance(sa, MEM.LoadViewTkoOp) and sa.results[0].type.shape == (64, 2)
    assert sb.results[0].type.shape == (2, 64) and tuple(p.mma.operands[3:5]) == (sa.results[0], sb.results[0])
    assert p.stages >= 2 and p.scales.copy == 16
    # A (64 rows of 64 bytes padded to 80), B (64 rows padded to 80 too: 16-byte rows for
    # ldmatrix.m16n16.b8, conflict-free), then A's scales and B's, 16-byte aligned
    assert (p.a_pitch, p.b_pitch, p.copy_bytes) == (80, 80, (16, 16))
    assert p.scales.at == (2 * 64 * 80, 2 * 64 * 80 + 128)
    assert p.stage_bytes == p.scales.at[1] + 128


def test_the_ptx_copies_b_scales_and_loads_a_scales_byte_by_byte():
    ptx = diffcheck.compile_ptx(module(), "sm_120")
    ops = Counter(re.findall(r"\b(cp\.async\.c[ag]\.shared\.global|ld\.global[.\w]*|cp\.async\.wait_group)", ptx))
    # A's scales: one byte a thread a stage, in each of the prologue's S-1 stages and the loop's
    assert ops["ld.global.b8"] == plan().ahead + 1
    assert ops["cp.async.cg.shared.global"] > 0 and ops["cp.async.ca.shared.global"] == 0   # all 16 bytes
    assert set(k for k in ops if k.startswith("ld.global")) == {"ld.global.b8"}
    assert "kind::mxf8f6f4.block_scale" in ptx
    # B's fragments: one 16 x 16 byte matrix pair a K step and pair of column blocks (8
    # blocks of 8 columns, 2 K steps of 32: 8 a tile), no byte-by-byte reads
    assert ptx.count("ldmatrix.sync.aligned.m16n16.x2.trans.shared.b8") == 8
    # the bytes still read one at a time are the scales' (a factor per row / column block
    # and K step); B byte by byte would be 64 more a K step
    assert len(re.findall(r"ld\.shared\.[ub]8", ptx)) <= 32


@pytest.mark.parametrize("extent", [64, 200, 512])
def test_agrees_with_the_interpreter(extent):
    """K of 1, 4 (tails) and 8 tiles: fewer trips than stages, and more."""
    reports = diffcheck.check_module(module(), "sm_120", grid=(2, 2, 1), extent=extent)
    assert reports and all(r.problem is None for r in reports), [r.problem for r in reports]


def test_a_scales_never_stored_are_caught(monkeypatch):
    """Dropping the stores of A's scales leaves the stages' scales stale: the products
    come out wrong."""
    real = emit_async.scale_rows
    monkeypatch.setattr(emit_async, "scale_rows", lambda *args: (real(*args), lambda: None)[1])
    (report,) = diffcheck.check_module(module(), "sm_120", grid=(2, 2, 1), extent=200)
    assert report.problem is not None


def test_a_scales_stored_into_the_stage_being_read_are_caught(monkeypatch):
    """A's scales of iteration i + S-1 stored into stage i % S, which the iteration's
    multiply reads: with S > 1 a later stage's scales overwrite ones still to be read."""
    real = emit_async.scale_rows

    def scale_rows(em, p, iv, stage_base, runs):
        b = em.b
        wrong = b.sub(stage_base, emit_async.ir.Constant(emit_async.I32, (p.stages - 1) * p.stage_bytes))
        wrapped = b.select(b.icmp_signed("<", wrong, emit_async.ir.Constant(emit_async.I32, 0)),
                           b.add(wrong, emit_async.ir.Constant(emit_async.I32, p.stages * p.stage_bytes)), wrong)
        return real(em, p, iv, wrapped, runs)
    monkeypatch.setattr(emit_async, "scale_rows", scale_rows)
    (report,) = diffcheck.check_module(module(), "sm_120", grid=(2, 2, 1), extent=512)
    assert report.problem is not None


def test_b_is_read_by_bytes_where_a_warp_s_columns_are_not_16_aligned():
    """``mma_forms.fitted_to``: the 16 x 16 byte matrices need each warp's column blocks to
    start 16 bytes aligned; a fragment layout whose warps split N 8 columns apart keeps the
    byte reads (and B's rows padded by 8)."""
    from tileiras.layout.linear import mma_fragment
    from tileiras.lower.mma_forms import TensorCoreMma, fitted_to, tensor_core_mma

    (tas,) = run_stages(module(), CompileOptions(gpu_name="sm_120"), "tileas").tas.values()
    (mma,) = tas.tensor_cores
    form = tas.tensor_cores[mma]
    assert form.b_matrix8 and fitted_to(form, mma_fragment((64, 64), 4)) is form
    split = mma_fragment((16, 32), 4)       # 4 warps over 32 columns: 8 apart
    assert any(base[-1] % 16 for base in split.bases("warp"))
    assert fitted_to(form, split) == TensorCoreMma(*[getattr(form, f) for f in
                                                     ("types", "k", "bits", "integer", "warpgroup", "m", "kind")])
    assert tensor_core_mma(mma, 89) is None
