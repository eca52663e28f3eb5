"""Shared-memory plans that fit each architecture's limit (``smem_limit``).

A tensor-core multiply whose operands, staged whole, would push the CTA over the limit is
staged and multiplied in K slices (``mma_forms.mma_k_slice``, ``TileAS.mma_k_slices``); TMA
buffers that do not fit beside the scratch region go back to direct loads, with a remark
saying why (``TileAS.tma_dropped``).  Kernels in the style of TileGym's gated-delta-rule
inter-chunk kernel (``kernels.smem_fit``) compile for sm_120, fit, and agree with the
interpreter in the emulator; kernels that fit keep their plan.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("cuda.tile")

from differential import Case, compare, export, run_compiled, run_interpreter  # noqa: E402
from kernels.smem_fit import GATED_DELTA, TF32_WIDE  # noqa: E402

from tileiras import remarks  # noqa: E402
from tileiras.codegen.smem_limit import shared_bytes, smem_limit  # noqa: E402
from tileiras.lower.mma_forms import mma_k_slice, mma_staging_bytes, tensor_core_mma  # noqa: E402
from tileiras.pipeline import CompileOptions, compile_module, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.tile import ops_arith as AR  # noqa: E402

#: A tf32 result rounds to 10 bits: the tensor cores' sums, in another order than the
#: interpreter's, round one ulp apart in a few elements (as they do unsliced on sm_80).
TF32_RTOL = 2.0 ** -9


@pytest.fixture(scope="session")
def exported() -> dict:
    return {}


def _module(cache: dict, case, arch: str, aligned: bool):
    key = (case.name, arch, aligned)
    if key not in cache:
        cache[key] = export(case, arch=arch, aligned=aligned)
    return cache[key], read_bytecode(cache[key])


def _tileas(module, arch: str):
    (tas,) = run_stages(module, CompileOptions(gpu_name=arch), "tileas", only_needed=True).tas.values()
    return tas


def _tf32_inputs(rng: np.random.Generator) -> list:
    return [rng.standard_normal((64, 128)).astype(np.float32),
            rng.standard_normal((128, 128)).astype(np.float32), np.zeros((64, 128), np.float32)]


def _unsliced(cache: dict, case, aligned: bool, entry: str, arrays: list):
    """The emulated results of ``case`` compiled for sm_80, whose limit fits its whole staging."""
    return run_compiled(Case(_module(cache, case, "sm_80", aligned)[0], entry, arrays, (1, 1, 1)), "sm_80")


def _mmas(tas) -> list:
    return [op for op in tas.aa.live_ops() if isinstance(op, AR.MmaFOp)]


def test_slice_choice(exported):
    """64x128 @ 128x128 tf32: 103,424 bytes whole; the largest power-of-two multiple of
    K = 8 that divides 128 and fits the budget, none where the whole fits or nothing does."""
    _, module = _module(exported, TF32_WIDE, "sm_120", False)
    (op,) = [o for o in module.functions[0].walk() if isinstance(o, AR.MmaFOp)]
    form = tensor_core_mma(op, 120, 4)
    assert (form.k, mma_staging_bytes(op)) == (8, 103_424)
    assert [mma_staging_bytes(op, k) for k in (8, 16, 32, 64)] == [7424, 13_824, 26_624, 52_224]
    assert mma_k_slice(op, form, 103_424) is None
    assert mma_k_slice(op, form, smem_limit("sm_120")) == 64
    assert mma_k_slice(op, form, 52_224) == 64
    assert mma_k_slice(op, form, 52_223) == 32
    assert mma_k_slice(op, form, 13_824) == 16
    assert mma_k_slice(op, form, 13_823) == 8
    assert mma_k_slice(op, form, 7424) == 8
    assert mma_k_slice(op, form, 7423) is None


def test_plans_that_fit_are_kept(exported):
    """sm_80 and sm_90 have room for the whole staging (sm_90's wgmma one, unpadded):
    no slices, no TMA load given up."""
    for arch, aligned, whole in (("sm_80", False, 103_424), ("sm_90", True, 98_304)):
        tas = _tileas(_module(exported, TF32_WIDE, arch, aligned)[1], arch)
        (op,) = _mmas(tas)
        assert tas.mma_k_slices == {} and tas.tma_dropped == {}
        assert tas.scratch[op] == whole


@pytest.mark.parametrize("aligned", [False, True], ids=["unaligned", "aligned"])
def test_tf32_wide_fits_sm120_and_agrees(aligned, exported):
    """Staged in two K slices of 64 (52,224 bytes); aligned, A's 32 KB TMA buffer fits
    beside that, B's 64 KB one does not and B loads directly, with the remark saying why."""
    data, module = _module(exported, TF32_WIDE, "sm_120", aligned)
    tas = _tileas(module, "sm_120")
    (op,) = _mmas(tas)
    assert tas.mma_k_slices == {op: 64} and tas.scratch[op] == 52_224
    if aligned:
        (dropped, reason), = tas.tma_dropped.items()
        assert dropped.results[0].type.shape == (128, 128)
        assert reason == ("its 65536-byte TMA buffer does not fit in shared memory: with it the kernel needs "
                          "150544 bytes, the limit is 101376")
        assert [p.nbytes for p in tas.tma.values()] == [32_768]
        assert tas.smem_bytes == 52_224 + 32_768 + 8
        text = remarks.to_command_line(remarks.collect(module, "sm_120"))
        assert reason in text
    else:
        assert tas.tma == {} and tas.smem_bytes == 52_224
    ptx = compile_module(module, CompileOptions(gpu_name="sm_120"), "ptx")
    assert list(shared_bytes(ptx).values()) == [tas.smem_bytes]
    rng = np.random.default_rng(1)
    arrays = _tf32_inputs(rng)
    c = Case(data, module.functions[0].name, arrays, (1, 1, 1))
    expected, got = run_interpreter(c), run_compiled(c, "sm_120")
    assert np.abs(got.arrays[2]).max() > 1          # the product, not the zeros it started as
    problem = compare(expected, got, rtol=TF32_RTOL, atol=1e-3)
    assert problem is None, problem
    whole = _unsliced(exported, TF32_WIDE, aligned, c.entry, arrays)
    assert np.array_equal(got.arrays[2], whole.arrays[2])   # the same K steps in the same order


def _gated_delta_inputs(chunks: int = 2) -> list:
    rng = np.random.default_rng(2)
    arrays = [(rng.standard_normal((1, chunks, 64, 128)) * 0.3).astype(ml_dtypes.bfloat16) for _ in range(4)]
    return arrays + [(-rng.random((1, chunks, 64)) * 0.1).astype(np.float32),
                     np.zeros((1, chunks, 64, 128), np.float32), np.int32(chunks)]


@pytest.mark.parametrize("aligned", [False, True], ids=["unaligned", "aligned"])
def test_gated_delta_fits_sm120(aligned, exported):
    """TileGym's inter-chunk structure: its two 64x128 @ 128x128 multiplies staged in K
    slices, the CTA within sm_120's 101,376 bytes (whole: 103,424, aligned 169,256 with
    TMA's buffers: three of its 16 KB loads go direct now), and ptxas accepts it."""
    _, module = _module(exported, GATED_DELTA, "sm_120", aligned)
    tas = _tileas(module, "sm_120")
    sliced = sorted((op.lhs.type.shape, k) for op, k in tas.mma_k_slices.items())
    assert sliced == [((64, 128), 64), ((64, 128), 64)]
    assert tas.scratch_bytes == 70_656
    assert tas.smem_bytes == (87_312 if aligned else 70_656)
    assert len(tas.tma_dropped) == (3 if aligned else 0)
    cubin = compile_module(module, CompileOptions(gpu_name="sm_120"), "cubin")
    assert cubin[:4] == b"\x7fELF"


#: Chained tf32 multiplies (each result rounded to tf32 feeds the next) leave a few
#: elements several tf32 ulps from the interpreter's: the same on sm_80, unsliced.
CHAINED_TF32_RTOL = 2.0 ** -6


@pytest.mark.slow
@pytest.mark.parametrize("aligned", [False, True], ids=["unaligned", "aligned"])
def test_gated_delta_agrees(aligned, exported):
    """Two chunks (the state carried from one to the next) in the emulator: the interpreter's
    results within the tf32 tolerance, and bit for bit those of the unsliced sm_80 code."""
    data, module = _module(exported, GATED_DELTA, "sm_120", aligned)
    arrays = _gated_delta_inputs()
    c = Case(data, module.functions[0].name, arrays, (1, 1, 1))
    expected, got = run_interpreter(c), run_compiled(c, "sm_120")
    assert np.abs(got.arrays[5]).max() > 0.1
    problem = compare(expected, got, rtol=CHAINED_TF32_RTOL, atol=1e-3)
    assert problem is None, problem
    whole = _unsliced(exported, GATED_DELTA, aligned, c.entry, arrays)
    assert np.array_equal(got.arrays[5], whole.arrays[5])


def test_thin_slices_guard_their_stores(exported, monkeypatch):
    """Under an 8 KB limit the tf32 product is staged in 16 slices of K = 8; lanes and warps
    then hold elements of several slices in one register, so each store is guarded by the
    thread's K coordinate (``emit_mma._stage_k_slice``).  Bit for bit the unsliced result."""
    import tileiras.lower.tileas as tileas_pass

    monkeypatch.setattr(tileas_pass, "smem_limit", lambda gpu_name: 8192)
    data, module = _module(exported, TF32_WIDE, "sm_120", False)
    tas = _tileas(module, "sm_120")
    (op,) = _mmas(tas)
    assert tas.mma_k_slices == {op: 8} and tas.smem_bytes == 7424
    ptx = compile_module(module, CompileOptions(gpu_name="sm_120"), "ptx")
    assert ptx.count("bar.sync") >= 2 * 16                   # stage, multiply: each slice
    assert len(re.findall(r"@%p\d+ bra", ptx)) >= 16         # the guarded stores, a branch a slice
    rng = np.random.default_rng(3)
    arrays = _tf32_inputs(rng)
    c = Case(data, module.functions[0].name, arrays, (1, 1, 1))
    got = run_compiled(c, "sm_120")
    problem = compare(run_interpreter(c), got, rtol=TF32_RTOL, atol=1e-3)
    assert problem is None, problem
    whole = _unsliced(exported, TF32_WIDE, False, c.entry, arrays)
    assert np.array_equal(got.arrays[2], whole.arrays[2])
