"""How wgmma operands wait in shared memory (``mma_forms.wgmma_staging``): swizzled layouts
of the layout algebra instead of padding, K-major or MN-major whichever makes the
register->shared stores contiguous and conflict-free, the descriptors read off the layout.
The emulator counts the stores' wavefronts and runs the descriptors."""
from __future__ import annotations

import re

import numpy as np
import pytest
from test_tensor_core import gemm_kernel, with_warps

from tileiras import diffcheck
from tileiras.emulate import launch
from tileiras.layout.shared import Swizzle
from tileiras.lower import mma_forms
from tileiras.text.parser import parse_module

#: (M, N, K, operand type, warps): square f16 tiles as the corpus GEMMs, a K below 128
#: bytes (a 64-byte swizzle), bf16 on 8 warps (two warpgroups), tf32 (K-major only)
CASES = [(64, 64, 32, "f16", None), (128, 128, 64, "f16", None), (128, 64, 64, "bf16", 8), (64, 32, 32, "tf32", None)]
#: the swizzles of A and B in each case: the widest the contiguous extent fills (K's bytes
#: K-major, each warpgroup's N's MN-major), except tf32's A, whose lanes (4 rows apart, 8
#: bytes of K each) the 32-byte swizzle spreads over the banks and the wider ones do not
SWIZZLES = [(Swizzle.B64, Swizzle.B128), (Swizzle.B128, Swizzle.B128), (Swizzle.B128, Swizzle.B128),
            (Swizzle.B32, Swizzle.B128)]


def staged(text: str) -> tuple[str, list[mma_forms.WgmmaStaging]]:
    """The sm_90 PTX of ``text`` and the staging TileAS recorded for its matrix multiplies."""
    seen: list[mma_forms.WgmmaStaging] = []
    real = mma_forms.wgmma_staging

    def spy(*args):
        seen.append(real(*args))
        return seen[-1]

    import tileiras.lower.layout_rules as rules
    rules.wgmma_staging = spy
    try:
        ptx = diffcheck.compile_ptx(parse_module(text, "k.mlir"), "sm_90")
    finally:
        rules.wgmma_staging = real
    return ptx, seen


@pytest.mark.parametrize("case, swizzles", list(zip(CASES, SWIZZLES)))
def test_row_major_operands_stage_k_major_a_and_mn_major_b(case, swizzles):
    """A (M x K, K contiguous in registers) K-major, B (K x N, N contiguous) MN-major for
    16-bit types (tf32 has no MN-major form: both K-major), each in the swizzle whose
    stores take the fewest wavefronts, the widest on ties; no padding, so shared memory holds exactly the operands (B
    from a 1024-byte boundary), aligned to the swizzle's repeat; the wgmma's transpose
    immediates say so."""
    m, n, k, ab, warps = case
    text = gemm_kernel(m, n, k, ab)
    ptx, (staging,) = staged(with_warps(text, warps) if warps else text)
    esize = 4 if ab == "tf32" else 2
    assert (staging.a.swizzle, staging.b.swizzle) == swizzles
    assert staging.a.k_major and staging.b.k_major == (ab == "tf32")
    assert staging.a.padding is None and staging.b.padding is None
    assert staging.nbytes == -(-m * k * esize // 1024) * 1024 + n * k * esize
    align, size = map(int, re.search(r"\.shared \.align (\d+) \.b8 \w+\[(\d+)\]", ptx).groups())
    assert align == 8 * max(staging.a.swizzle.value, staging.b.swizzle.value) and size == staging.nbytes
    if ab != "tf32":
        assert re.search(r"wgmma\.mma_async\.[^;]*, p, 1, 1, 0, 1;", ptx)


@pytest.mark.parametrize("m, n, k, ab, warps", CASES)
def test_staging_stores_are_conflict_free(m, n, k, ab, warps):
    """The emulator's count of the operands' shared stores: each takes the fewest
    wavefronts its bytes need (the padded staging took 1.5x to 3x on these)."""
    text = gemm_kernel(m, n, k, ab)
    module = parse_module(with_warps(text, warps) if warps else text, "k.mlir")
    fn = module.functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), 128)
    ptx = diffcheck.compile_ptx(module, "sm_90")
    stores = launch(ptx, fn.name, (1, 1, 1), args, traffic=True).check().traffic.shared_stores
    assert stores.requests > 0 and stores.wavefronts == stores.ideal_wavefronts


def test_8bit_b_along_n_keeps_padded_core_matrices():
    """An 8-bit B held along N has no MN-major form and no swizzle spreads its byte stores
    (every 4th row lands in the same two chunks): it stays K-major without swizzle, padded
    after each core matrix, the stride offset 16 bytes past the packed 128."""
    _, (staging,) = staged(gemm_kernel(64, 64, 64, "f8E4M3FN"))
    assert staging.a.swizzle is Swizzle.B64 and staging.a.k_major
    assert staging.b.swizzle is Swizzle.NONE and staging.b.padding is not None
    assert staging.b.strides()[1] == 144


def test_interleaved_warpgroups_keep_b_rows_apart():
    """Two warpgroups on a 64-row tile split N 8 columns at a time: each one's B columns
    are 16 apart, which a swizzled MN-major B (columns contiguous inside atoms) cannot
    describe; the staging takes a form whose stride offset steps 16 columns, and the
    emulated kernel agrees with the interpreter."""
    text = with_warps(gemm_kernel(64, 64, 32, "f16"), 8)
    _, (staging,) = staged(text)
    assert staging.spacing == 16
    assert staging.b.k_major or staging.b.swizzle is Swizzle.NONE
    reports = diffcheck.check_module(parse_module(text, "k.mlir"), "sm_90", grid=(2, 2, 1), extent=100)
    assert [r.problem for r in reports] == [None]


def attention_kernel(m: int, warps=None) -> str:
    """S = A @ B (f32), P = S as f16, O = P @ B: flash attention's P @ V, P left in the
    first product's accumulator layout."""
    text = gemm_kernel(m, 64, 64, "f16").replace(
        f"%r = mmaf %la, %lb, %z : tile<{m}x64xf16>, tile<64x64xf16>, tile<{m}x64xf32>",
        f"%s = mmaf %la, %lb, %z : tile<{m}x64xf16>, tile<64x64xf16>, tile<{m}x64xf32>\n"
        f"    %p = ftof %s : tile<{m}x64xf32> -> tile<{m}x64xf16>\n"
        f"    %r = mmaf %p, %lb, %z : tile<{m}x64xf16>, tile<64x64xf16>, tile<{m}x64xf32>")
    assert "%p = ftof" in text
    return with_warps(text, warps) if warps else text


@pytest.mark.parametrize("m, warps", [(64, None), (128, 8)])
def test_p_at_v_takes_a_from_registers(m, warps, monkeypatch):
    """The second product's A is the first's accumulator converted to f16: its registers
    hold wgmma's A fragments (each warpgroup its own rows), so A is not staged and the
    wgmma reads it from registers (``{a regs}, b-desc, p, 1, 1, trans-b``), every K step
    unrolled; only B waits in shared memory.  The emulated result is bit for bit the
    one with A staged (the interpreter's S may round to a different f16 P in a few
    elements: both sum S exactly, but not to the same f32)."""
    text = attention_kernel(m, warps)
    ptx, (first, second) = staged(text)
    assert first.a is not None and second.a is None and second.b.base == 0
    blocks = m // 64 // (warps // 4 if warps else 1)
    assert len(second.a_registers) == blocks and all(len(steps) == 4 for steps in second.a_registers)
    with_a = re.findall(r"wgmma\.mma_async[^;]*\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1, 1;", ptx)
    assert len(with_a) == 4 * blocks
    module = parse_module(text, "k.mlir")
    fn = module.functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), 100)
    grid = diffcheck.distinct_grid(fn, (2, 2, 1))
    ours = diffcheck.run_ptx(ptx, fn.name, grid, args)
    monkeypatch.setattr(mma_forms, "a_register_fragments", lambda *_: None)
    staged_ptx, (_, again) = staged(text)
    assert again.a is not None
    reference = diffcheck.run_ptx(staged_ptx, fn.name, grid, args)
    for got, want in zip(ours.arrays, reference.arrays):
        np.testing.assert_array_equal(got, want)
    expected = diffcheck.run_interpreter(module, fn.name, grid, args)
    assert np.allclose(ours.arrays[2], expected.arrays[2], rtol=1e-2, atol=1.0)
