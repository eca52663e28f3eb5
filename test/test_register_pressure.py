"""Register-relevant decisions on a layer norm in the style of public cuTile kernels.

A layer norm row's weight and bias tiles are loaded after its two reductions and used
once, element by element, by the store of the output: emitted whole tile by whole tile,
both rows (64 registers each at 8192 f32 on 128 threads) are live before the first store.
Their loads are weak, at the tile origin and token-ordered before no write, so code
generation loads them without a branch around the tile (emit_memory.tile_in_range) and
order.py moves each element's loads to just before the store that uses them, as NVIDIA's
PTX does.
"""
from __future__ import annotations

import io
import re
import warnings

import pytest

ct = pytest.importorskip("cuda.tile")

from tileiras.codegen.ptxas import invoke_ptxas  # noqa: E402
from tileiras.pipeline import CompileOptions, compile_module  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

from kernels._case import KernelCase, arr  # noqa: E402

ConstInt = ct.Constant[int]
ConstFloat = ct.Constant[float]
PAD = ct.PaddingMode.ZERO


@ct.kernel
def layer_norm(X, W, B, Y, Mean, Rstd, eps: ConstFloat, TILE_N: ConstInt):
    """One row per CTA, the whole row in one tile (cutile-python's LayerNorm sample shape)."""
    bid = ct.bid(0)
    n = X.shape[1]
    x = ct.astype(ct.load(X, index=(bid, 0), shape=(1, TILE_N), padding_mode=PAD), ct.float32)
    mean = ct.sum(x, axis=1, keepdims=True) / n
    xc = x - mean
    r = ct.rsqrt(ct.sum(xc * xc, axis=1, keepdims=True) / n + eps)
    w = ct.reshape(ct.astype(ct.load(W, index=(0,), shape=(TILE_N,), padding_mode=PAD), ct.float32), (1, TILE_N))
    b = ct.reshape(ct.astype(ct.load(B, index=(0,), shape=(TILE_N,), padding_mode=PAD), ct.float32), (1, TILE_N))
    ct.store(Mean, index=(bid,), tile=ct.reshape(mean, (1,)))
    ct.store(Rstd, index=(bid,), tile=ct.reshape(r, (1,)))
    ct.store(Y, index=(bid, 0), tile=ct.astype(xc * r * w + b, Y.dtype))


F32 = ct.float32
N = 4096
CASE = KernelCase("layer_norm", layer_norm,
                  [[arr(F32, 2), arr(F32), arr(F32), arr(F32, 2), arr(F32), arr(F32), 1e-5, N]])


@pytest.fixture(scope="module")
def ptx_sm80() -> str:
    from cuda.tile.compilation import export_kernel

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_kernel(CASE.kernel, CASE.signatures(), buf, gpu_code="sm_80",
                      output_format="tileir_bytecode", bytecode_version="13.4")
    return compile_module(read_bytecode(buf.getvalue()), CompileOptions(gpu_name="sm_80"), "ptx")


def _memory_ops(ptx: str) -> list[str]:
    """'ld' and 'st' for each global access after the row's rsqrt, in PTX order."""
    tail = ptx[ptx.index("rsqrt.approx"):]
    return re.findall(r"\b(ld|st)\.global", tail)


def test_weight_and_bias_loads_interleave_with_the_output_stores(ptx_sm80: str):
    """Every output store but the two scalars' is preceded by its own element's weight
    and bias loads, not by the whole rows'."""
    ops = _memory_ops(ptx_sm80)
    per_thread = N // 128
    assert ops.count("ld") == 2 * per_thread
    stores = [k for k, o in enumerate(ops) if o == "st"]
    assert len(stores) >= per_thread         # the row's, after one or both scalars'
    first_row_store = stores[-per_thread]
    # only the first element's two loads come before the first store of the row
    assert ops[:first_row_store].count("ld") == 2
    assert "".join(o[0] for o in ops[first_row_store:first_row_store + 6]) == "sllsll"


def test_layer_norm_registers_stay_near_one_row(ptx_sm80: str):
    """The row (32 f32 per thread) and a few elements' weight and bias, within NVIDIA's
    registers + 10%: NVIDIA's tileiras needs 80 for this kernel on sm_80 (ptxas -v); ours
    took 106 before the loads were sunk (both rows live), 82 since."""
    stats = invoke_ptxas(ptx_sm80, "sm_80", 3, verbose=True).stats
    (kernel,) = stats.values()
    assert kernel.spill_stores == 0
    assert kernel.registers <= 88


@ct.kernel(occupancy=1)
def rms_norm_persistent(X, W, Y, Rstd, TILE_M: ConstInt, TILE_N: ConstInt, eps: ConstFloat):
    """A persistent RMS norm (TileGym's static-persistent shape): each CTA walks row blocks
    of TILE_M whole rows; the weight row is loaded once, before the loop."""
    bid = ct.bid(0)
    upper = (X.shape[0] + TILE_M - 1) // TILE_M
    w = ct.reshape(ct.astype(ct.load(W, index=(0,), shape=(TILE_N,), padding_mode=PAD), ct.float32), (1, TILE_N))
    for m in range(bid, upper, ct.num_blocks(0)):
        x = ct.astype(ct.load(X, index=(m, 0), shape=(TILE_M, TILE_N), padding_mode=PAD), ct.float32)
        r = ct.rsqrt(ct.sum(x * x, axis=1, keepdims=True) / X.shape[1] + eps)
        ct.store(Rstd, index=(m,), tile=ct.reshape(r, (TILE_M,)))
        ct.store(Y, index=(m, 0), tile=ct.astype(x * r * w, Y.dtype))


BF16 = ct.bfloat16
RMS_M, RMS_N = 4, 2048
RMS = KernelCase("rms_norm_persistent", rms_norm_persistent,
                 [[arr(BF16, 2), arr(BF16), arr(BF16, 2), arr(F32), RMS_M, RMS_N, 1e-6]])


@pytest.fixture(scope="module")
def rms_module():
    from cuda.tile.compilation import export_kernel

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_kernel(RMS.kernel, RMS.signatures(), buf, gpu_code="sm_80",
                      output_format="tileir_bytecode", bytecode_version="13.4")
    return read_bytecode(buf.getvalue())


def test_broadcast_operands_convert_their_source_not_the_whole_tile(rms_module):
    """The weight row and the per-row scale are broadcast to the 4x2048 tile in the f32
    canonical layout, the bf16 row of x in another: rather than converting the broadcast
    4x2048 tiles through shared memory (32 KiB, 64 registers each, every iteration), the
    broadcasts are redone in x's layout from their sources converted (the 2048-element
    row: 8 KiB; the 4 scales: 16 B).  bf16 4x4096 sm_80: 1364 spilled bytes -> none."""
    out = compile_module(rms_module, CompileOptions(gpu_name="sm_80"), "tileas")
    # the multiplies whose operand 1 is recomputed (their convert line just above) and the
    # bytes of their scratch buffers
    ops = re.findall(r"tileas\.convert_layout\(.*\{recompute = .*\n\s*@(\d+): %\S+ = mulf\(%\S+, %cvt", out)
    notes = [re.search(rf"tileas\.buffer @\S+ scratch offset=0 bytes=(\d+) .*users=\[@{op}\]", out).group(1)
             for op in ops]
    assert sorted(int(n) for n in notes) == [16, RMS_N * 4]
    ptx = compile_module(rms_module, CompileOptions(gpu_name="sm_80"), "ptx")
    (kernel,) = invoke_ptxas(ptx, "sm_80", 3, verbose=True).stats.values()
    assert kernel.spill_stores == 0 and kernel.stack_frame == 0
    assert kernel.registers <= 120     # 102 (NVIDIA: 189)


def test_rms_norm_persistent_agrees_with_the_interpreter(rms_module):
    from tileiras import diffcheck

    reports = diffcheck.check_module(rms_module, "sm_80", grid=(2, 1, 1), extent=300)
    assert [r.problem for r in reports] == [None]
