"""Float conversions: f32 -> tf32 rounds in the op's rounding mode (integer arithmetic),
f32 -> fp8 converts two registers per ``cvt.rn.satfinite.<e4m3|e5m2>x2.f32`` as NVIDIA's
tileiras does.  Results must match the interpreter bit for bit."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tileiras import diffcheck
from tileiras.text.parser import parse_module

MODES = ("", "rounding<zero> ", "rounding<negative_inf> ", "rounding<positive_inf> ")


def _kernel(dst: str, modes: tuple[str, ...]) -> str:
    """x (f32, 256 per tile) converted to ``dst`` once per rounding mode, back to f32 and
    stored to out[k] (k: the mode's index)."""
    outs = ", ".join(f"%o{k}: tile<ptr<f32>>" for k in range(len(modes)))
    view = "tensor_view<?xf32, strides=[1]>"
    part = f"partition_view<tile=(256), {view}>"
    body = []
    for k, mode in enumerate(modes):
        body += [f"%v{k} = make_tensor_view %o{k}, shape = [%n], strides = [1] : tile<i32> -> {view}",
                 f"%p{k} = make_partition_view %v{k} : {part}",
                 f"%c{k} = ftof %t {mode}: tile<256xf32> -> tile<256x{dst}>",
                 f"%w{k} = ftof %c{k} : tile<256x{dst}> -> tile<256xf32>",
                 f"%s{k} = store_view_tko weak %w{k}, %p{k}[%bx] token = %tok : tile<256xf32>, {part}, tile<i32> -> token"]
    lines = "\n    ".join(body)
    return f"""cuda_tile.module @kernels {{
  entry @k(%xp: tile<ptr<f32>>, %n: tile<i32>, {outs}) {{
    %tok = make_token : token
    %xv = make_tensor_view %xp, shape = [%n], strides = [1] : tile<i32> -> {view}
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %xpv = make_partition_view %xv : {part}
    %t, %t1 = load_view_tko weak %xpv[%bx] token = %tok : {part}, tile<i32> -> tile<256xf32>, token
    {lines}
    return
  }}
}}
"""


def _inputs(n: int) -> np.ndarray:
    """Values whose low 13 mantissa bits cover ties, near-ties and carries into the
    exponent, of both signs, with infinities, NaN, subnormals and the largest finite."""
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    bits[:8] = [0x3F801000, 0x3F803000, 0xBF801000, 0x3F800FFF, 0x3FFFF000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00001FFF]
    x = bits.view(np.float32).copy()
    x[8:12] = [np.inf, -np.inf, np.nan, 0.0]
    return x


def _run(dst: str, modes: tuple[str, ...], arch: str):
    module = parse_module(_kernel(dst, modes), "k.mlir")
    n = 512
    x = _inputs(n)
    args = [x, np.int32(n)] + [np.zeros(n, np.float32) for _ in modes]
    ptx = diffcheck.compile_ptx(module, arch)
    expected, got = diffcheck.run_both(module, "k", (2, 1, 1), args, ptx=ptx)
    return ptx, expected, got


def _assert_same_bits(expected, got, count: int) -> None:
    for k in range(count):
        want, have = expected.arrays[1 + k], got.arrays[1 + k]
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(have), nan), k
        bad = np.flatnonzero(want[~nan].view(np.uint32) != have[~nan].view(np.uint32))
        assert bad.size == 0, (k, bad[:5], want[~nan][bad[:5]], have[~nan][bad[:5]])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tf32_rounds_in_every_mode(arch):
    _, expected, got = _run("tf32", MODES, arch)
    _assert_same_bits(expected, got, len(MODES))


@pytest.mark.parametrize("dst", ["f8E4M3FN", "f8E5M2"])
def test_fp8_narrowing_converts_two_registers_at_once(dst):
    ptx, expected, got = _run(dst, MODES[:1], "sm_90")
    _assert_same_bits(expected, got, 1)
    fmt = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}[dst]
    pairs = re.findall(rf"cvt\.rn\.satfinite\.{fmt}x2\.f32\s+%rs\d+, (%r\d+), (%r\d+);", ptx)
    assert len(pairs) == 1 and pairs[0][0] != pairs[0][1]      # 2 registers a thread, one cvt
