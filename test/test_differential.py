"""Interpreter vs compiled PTX in the emulator, on every test kernel.

Each cuTile kernel case is exported, given random inputs (arrays of 100 elements per
dim, so most tiles are partial), run by the Tile IR reference interpreter and, compiled
by our pipeline to PTX, by the PTX emulator.  Integer results must match exactly, float
results within the documented tolerance (approximate PTX math instructions vs exactly
rounded reference), asserts must fire in both or neither.  Every kernel runs twice: exported
unaligned and aligned as cuTile exports a framework's tensors (``kernels._case.aligned_array``:
16-byte vector accesses, TMA on sm_90), the common case, on inputs of 112 elements per dim.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cuda.tile")

from differential import (ALIGNED_EXTENT, EXTENT, Case, cached_export, compare, export, extent_of,  # noqa: E402
                          make_inputs, run_compiled, run_interpreter)
from kernels import ALL_CASES  # noqa: E402

from tileiras.reader import read_bytecode  # noqa: E402

GRID = (2, 2, 1)
CASES = [c for c in ALL_CASES if c.calling_convention == "v1"]


def _entries():
    for case in CASES:
        for k in range(len(case.params)):
            yield pytest.param(case, k, id=f"{case.name}[{k}]")


@pytest.fixture(scope="session")
def bytecode_cache() -> dict:
    return {}


@pytest.mark.parametrize("aligned", [False, True], ids=["unaligned", "aligned"])
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
@pytest.mark.parametrize("case, k", list(_entries()))
def test_interpreter_matches_compiled(case, k, arch, aligned, bytecode_cache):
    """Aligned: exported as cuTile exports a framework's tensors (16-byte vectors, TMA on
    sm_90), on inputs that keep those promises (extents of ``ALIGNED_EXTENT``)."""
    data = cached_export(bytecode_cache, case, arch, aligned)
    entry = read_bytecode(data).functions[k].name
    arrays = make_inputs(case.params[k], np.random.default_rng(1), extent_of(case, aligned), case.indexes)
    c = Case(data, entry, arrays, GRID)
    expected = run_interpreter(c)
    got = run_compiled(c, arch)
    problem = compare(expected, got)
    assert problem is None, problem


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100", "sm_120"])
@pytest.mark.parametrize("case, k", list(_entries()))
def test_async_code_agrees_with_ctas_drifting_apart(case, k, arch, bytecode_cache):
    """Every aligned kernel whose PTX is asynchronous (cp.async, TMA, mbarriers) run with its
    CTAs interleaved in bursts (one runs far ahead of another, ``emulate/weak.py``), each
    with its own weakly ordered view of global memory: no hazard, the interpreter's result.
    Lockstep hides a missing cross-CTA ordering; this is what catches one."""
    from tileiras import diffcheck

    data = cached_export(bytecode_cache, case, arch, True)
    module = read_bytecode(data)
    ptx, host = diffcheck.compile_with_host(module, arch)
    if "mbarrier" not in ptx and "cp.async" not in ptx:
        pytest.skip("no asynchronous code")
    c = Case(data, module.functions[k].name,
             make_inputs(case.params[k], np.random.default_rng(1), extent_of(case, True), case.indexes), GRID)
    got = diffcheck.run_ptx(ptx, c.entry, c.grid, c.args(c.arrays), host_object=host, interleave=1, burst=True)
    problem = compare(run_interpreter(c), got)
    assert problem is None, problem


#: unchecked_bounds promises in-bounds accesses (inbounds=true), which random 100-element
#: inputs break, so NVIDIA's unmasked loads leave the arrays.
REAL_PTX_UNSUPPORTED = {"unchecked_bounds"}


@pytest.mark.slow
@pytest.mark.parametrize("case, k", [p for p in _entries() if p.values[0].name not in REAL_PTX_UNSUPPORTED])
def test_interpreter_matches_real_ptx(case, k, real_tileiras, tmp_path, bytecode_cache):
    """Third opinion: NVIDIA's PTX for the same bytecode, emulated, agrees with the interpreter."""
    from differential import run_real_ptx

    data = cached_export(bytecode_cache, case, "sm_90")
    entry = read_bytecode(data).functions[k].name
    c = Case(data, entry, make_inputs(case.params[k], np.random.default_rng(1), extent_of(case, False), case.indexes),
             GRID)
    problem = compare(run_interpreter(c), run_real_ptx(c, real_tileiras, str(tmp_path)))
    assert problem is None, problem


#: the gemm cases with the tensor-core instruction NVIDIA's tileiras gives each (mma.sync on
#: sm_80 and sm_120, wgmma on sm_90 with its operands in swizzled shared memory, tcgen05 on
#: sm_100 with its accumulator in tensor memory)
REAL_TENSOR_CORE = [
    ("gemm", "sm_90", "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"),
    ("gemm_epilogue", "sm_90", "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16"),
    ("fp8_gemm", "sm_90", "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"),
    ("gemm", "sm_100", "tcgen05.mma.cta_group::1.kind::f16"),
    ("gemm_epilogue", "sm_100", "tcgen05.ld.sync.aligned.16x32bx2.x16.pack::16b.b32"),
    ("fp8_gemm", "sm_100", "tcgen05.mma.cta_group::1.kind::f8f6f4"),
    ("gemm", "sm_80", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    ("gemm", "sm_120", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    ("batched_gemm", "sm_80", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    ("gemm_epilogue", "sm_120", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"),
    ("tf32_gemm", "sm_80", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
    ("int8_gemm", "sm_80", "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32"),
    ("fp8_gemm", "sm_120", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"),
    ("mx_f4_gemm", "sm_120",
     "mma.sync.aligned.kind::mxf4.block_scale.scale_vec::2X.m16n8k64.row.col.f32.e2m1.e2m1.f32.ue8m0"),
]


#: aligned exports: NVIDIA's sm_100 GEMMs land B MN-major (tcgen05.mma's transpose bit)
#: by TMA and read the accumulator back with the 16-lane tcgen05.ld shapes
REAL_TENSOR_CORE_ALIGNED = [
    ("gemm", "sm_100", "tcgen05.mma.cta_group::1.kind::f16"),
    ("gemm_epilogue", "sm_100", "tcgen05.ld.sync.aligned.16x128b.x4.pack::16b"),
]


@pytest.mark.parametrize("name, arch, instruction, aligned",
                         [(*t, False) for t in REAL_TENSOR_CORE] + [(*t, True) for t in REAL_TENSOR_CORE_ALIGNED],
                         ids=[f"{n}-{a}" for n, a, _ in REAL_TENSOR_CORE]
                         + [f"{n}-{a}-aligned" for n, a, _ in REAL_TENSOR_CORE_ALIGNED])
def test_real_tensor_core_ptx_matches_interpreter(name, arch, instruction, aligned, real_tileiras, tmp_path):
    """NVIDIA's tensor-core PTX, emulated (mma.sync fragments, block scales, wgmma and
    tcgen05 descriptors and swizzles, tensor memory), agrees with the interpreter: the
    ground truth for our own tensor-core lowering."""
    case = next(c for c in ALL_CASES if c.name == name)
    _real_agrees(case, arch, instruction, aligned, real_tileiras, tmp_path)


def _real_agrees(case, arch: str, instruction: str, aligned: bool, real_tileiras, tmp_path) -> None:
    from differential import run_real_ptx

    data = export(case, arch=arch, aligned=aligned)
    c = Case(data, read_bytecode(data).functions[0].name,
             make_inputs(case.params[0], np.random.default_rng(1), ALIGNED_EXTENT if aligned else EXTENT), GRID)
    expected, got = run_interpreter(c), run_real_ptx(c, real_tileiras, str(tmp_path), arch, expect=instruction)
    if case.name == "gemm_epilogue" and aligned:
        _f16_product_agrees(c.arrays, expected, got)
        return
    problem = compare(expected, got)
    assert problem is None, problem


def _f16_product_agrees(arrays, expected, got) -> None:
    """``relu(A B + bias)`` with A B accumulated in f16 (as its f16 result type lets NVIDIA's
    tcgen05.mma do): within the recursive-summation bound K u sum |a| |b| (u = 2^-11), plus
    the f16 tolerance of ``compare``; the interpreter's product is exact."""
    a, b = (x.astype(np.float64) for x in arrays[:2])
    bound = a.shape[1] * 2.0 ** -11 * (np.abs(a) @ np.abs(b))
    e, g = (x.arrays[3].astype(np.float64) for x in (expected, got))
    close = np.abs(e - g) <= bound + 1e-2 + 1e-2 * np.abs(e)
    assert close.all(), f"{(~close).sum()} elements differ beyond the bound, first {np.argwhere(~close)[0]}"
    # and nearly all within compare's f16 tolerance: a misplaced fragment would be far off
    assert np.abs(e).max() > 1 and (np.abs(e - g) <= 1e-2 + 1e-2 * np.abs(e)).mean() > 0.99


@pytest.mark.parametrize("instruction", ["multicast::cluster", "tcgen05.ld.sync.aligned.16x256b"])
def test_real_cluster_gemm_ptx_matches_interpreter(instruction, real_tileiras, tmp_path):
    """A K-loop GEMM in clusters of two CTAs (``num_ctas=2``), aligned, on sm_100: NVIDIA's
    PTX multicasts each TMA box to both CTAs of a cluster (``ctaMask``, each CTA's
    mbarrier at the same offset) and reads the accumulator with ``16x256b``."""
    from kernels.clusters import CLUSTER_GEMM

    _real_agrees(CLUSTER_GEMM, "sm_100", instruction, True, real_tileiras, tmp_path)


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_real_cluster_gemm_ptx_runs_clean_in_bursts(arch, real_tileiras, tmp_path):
    """NVIDIA's cluster GEMM (multicast TMA boxes, remote "empty" arrivals; on sm_100
    tcgen05 commits to several mbarriers) with the cluster's CTAs drifting apart (bursty
    interleaving): no hazard, the interpreter's result.  On sm_100 this needs an MMA's
    results to land at the first completed phase of any commit that tracks it (a later
    commit tracks every earlier MMA of the thread)."""
    from differential import run_real_ptx
    from kernels.clusters import CLUSTER_GEMM

    data = export(CLUSTER_GEMM, arch=arch, aligned=True)
    c = Case(data, read_bytecode(data).functions[0].name,
             make_inputs(CLUSTER_GEMM.params[0], np.random.default_rng(1), 320), GRID)
    expected = run_interpreter(c)
    for seed in (1, 3):
        problem = compare(expected, run_real_ptx(c, real_tileiras, str(tmp_path), arch, "multicast::cluster", seed))
        assert problem is None, f"seed {seed}: {problem}"


def test_real_mx_fp8_gemm_ptx_matches_interpreter(real_tileiras, tmp_path):
    """An aligned MX fp8 GEMM with a K loop on sm_120: NVIDIA's PTX reads its 8-bit B
    (``.x2``) and B's scales (``.x1``) with ``ldmatrix.m16n16.trans.b8``, 16x16 bytes a
    matrix."""
    from kernels.clusters import MX_F8_GEMM

    _real_agrees(MX_F8_GEMM, "sm_120", "ldmatrix.sync.aligned.m16n16.x2.trans.shared.b8", True, real_tileiras,
                 tmp_path)
