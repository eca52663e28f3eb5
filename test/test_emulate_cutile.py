"""PTX emulator on real NVIDIA PTX: our own cuTile kernels, exported as Tile IR bytecode,
compiled by NVIDIA's tileiras (``--lineinfo``, so the cubin carries ``.nv_debug_ptx_txt``),
then emulated and compared against numpy.  Skipped when cuda-tile or tileiras is missing."""
from __future__ import annotations

import io
import subprocess
from pathlib import Path

import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")
from cuda.tile.compilation import (ArrayConstraint, CallingConvention, KernelSignature,  # noqa: E402
                                   ScalarConstraint, export_kernel)

from tileiras.emulate import launch  # noqa: E402
from tileiras.emulate.cubin import ptx_from_cubin  # noqa: E402

ConstInt = ct.Constant[int]
ARCHS = ("sm_90", "sm_80")


def arr(dtype, ndim: int = 1) -> ArrayConstraint:
    return ArrayConstraint(dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0,
                           alias_groups=(), may_alias_internally=False,
                           stride_constant=[None] * (ndim - 1) + [1])


@pytest.fixture(scope="session")
def compile_real(real_tileiras: str, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("emulate_cutile")
    cache: dict = {}

    def compile_kernel(kernel, params, arch: str = "sm_90") -> str:
        name = kernel._annotated_function.pyfunc.__name__
        key = (name, arch, repr(params))
        if key not in cache:
            sig = KernelSignature(list(params), CallingConvention.cutile_python_v1())
            buf = io.BytesIO()
            export_kernel(kernel, [sig.with_mangled_symbol(name)], buf, gpu_code=arch,
                          output_format="tileir_bytecode", bytecode_version="13.4")
            src = Path(root, f"{name}.{arch}.{len(cache)}.tileir")
            src.write_bytes(buf.getvalue())
            cubin = src.with_suffix(".cubin")
            subprocess.run([real_tileiras, f"--gpu-name={arch}", "--lineinfo", str(src), "-o", str(cubin)],
                           check=True, capture_output=True)
            ptx = ptx_from_cubin(cubin.read_bytes())
            assert ptx is not None and ".entry" in ptx
            cache[key] = ptx
        return cache[key]
    return compile_kernel


def expand(*args) -> list:
    """cuTile's v1 calling convention: an array becomes (pointer, shape..., strides...)."""
    out: list = []
    for a in args:
        if isinstance(a, np.ndarray):
            out += [a, *a.shape, *[s // a.itemsize for s in a.strides]]
        else:
            out.append(a)
    return out


@ct.kernel
def vadd(x, y, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(128,))
    b = ct.load(y, index=(i,), shape=(128,))
    ct.store(out, index=(i,), tile=a + b)


@pytest.mark.parametrize("arch", ARCHS)
def test_vector_add(compile_real, arch):
    ptx = compile_real(vadd, [arr(ct.float32)] * 3, arch)
    rng = np.random.default_rng(0)
    n = 1000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    result = launch(ptx, None, ((n + 127) // 128,), expand(x, y, out)).check()
    np.testing.assert_array_equal(out, x + y)
    assert result.block == (128, 1, 1)


@ct.kernel
def elementwise_math(x, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(128,))
    p = abs(a) + 1.0
    r = ct.exp(a) + ct.log(p) + ct.sqrt(p) + ct.tanh(a) + ct.sin(a) * ct.cos(a) + ct.rsqrt(p)
    r = r + ct.floor(a * 3.0) + ct.maximum(a, 0.25) / p
    ct.store(out, index=(i,), tile=r)


def test_elementwise_math(compile_real):
    ptx = compile_real(elementwise_math, [arr(ct.float32)] * 2)
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(512) * 2).astype(np.float32)
    out = np.zeros_like(x)
    launch(ptx, None, (4,), expand(x, out)).check()
    a = x.astype(np.float64)
    p = np.abs(a) + 1
    want = (np.exp(a) + np.log(p) + np.sqrt(p) + np.tanh(a) + np.sin(a) * np.cos(a) + 1 / np.sqrt(p)
            + np.floor(x * np.float32(3)) + np.maximum(a, 0.25) / p)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@ct.kernel
def math_f64(x, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(32,))
    ct.store(out, index=(i,), tile=ct.exp(a) + ct.sin(a) + ct.log(abs(a) + 2.0))


def test_f64_math_uses_library_calls(compile_real):
    ptx = compile_real(math_f64, [arr(ct.float64)] * 2)
    x = np.r_[np.linspace(-5, 5, 60), 1e9, -3e12, 12345.678, 0.0].astype(np.float64)
    out = np.zeros_like(x)
    launch(ptx, None, (2,), expand(x, out)).check()
    np.testing.assert_allclose(out, np.exp(x) + np.sin(x) + np.log(np.abs(x) + 2), rtol=1e-13, atol=1e-13)


@ct.kernel
def softmax_rows(x, out, N: ConstInt):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(1, N))
    m = ct.max(t, axis=1, keepdims=True)
    e = ct.exp(t - m)
    ct.store(out, index=(i, 0), tile=e / ct.sum(e, axis=1, keepdims=True))


@pytest.mark.parametrize("arch", ARCHS)
def test_softmax(compile_real, arch):
    ptx = compile_real(softmax_rows, [arr(ct.float32, 2), arr(ct.float32, 2), 256], arch)
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((8, 256)) * 4).astype(np.float32)
    out = np.zeros_like(x)
    launch(ptx, None, (8,), expand(x, out)).check()
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-8)


@ct.kernel
def reductions(x, osum, omax, oarg):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(16, 64))
    ct.store(osum, index=(i,), tile=ct.sum(t, axis=1))
    ct.store(omax, index=(i,), tile=ct.max(t, axis=1))
    ct.store(oarg, index=(i,), tile=ct.argmax(t, axis=1))


def test_row_reductions(compile_real):
    ptx = compile_real(reductions, [arr(ct.int32, 2), arr(ct.int32), arr(ct.int32), arr(ct.int32)])
    rng = np.random.default_rng(3)
    x = rng.integers(-1000, 1000, (48, 64)).astype(np.int32)
    osum, omax, oarg = (np.zeros(48, np.int32) for _ in range(3))
    launch(ptx, None, (3,), expand(x, osum, omax, oarg)).check()
    np.testing.assert_array_equal(osum, x.sum(axis=1))
    np.testing.assert_array_equal(omax, x.max(axis=1))
    np.testing.assert_array_equal(oarg, x.argmax(axis=1))


@ct.kernel
def loop_accumulate(x, out, n):
    i = ct.bid(0)
    acc = ct.zeros((128,), dtype=ct.float32)
    for k in range(n):
        acc = acc * 0.5 + ct.load(x, index=(k, i), shape=(1, 128)).reshape((128,))
    ct.store(out, index=(i,), tile=acc)


def test_dynamic_loop(compile_real):
    ptx = compile_real(loop_accumulate, [arr(ct.float32, 2), arr(ct.float32), ScalarConstraint(ct.int32)])
    rng = np.random.default_rng(4)
    x = rng.standard_normal((7, 256)).astype(np.float32)
    out = np.zeros(256, np.float32)
    launch(ptx, None, (2,), expand(x, out, 7)).check()
    want = np.zeros(256, np.float32)
    for k in range(7):
        want = want * np.float32(0.5) + x[k]
    np.testing.assert_allclose(out, want, rtol=1e-6)


@ct.kernel
def atomics(counter, fsum, imax):
    i = ct.bid(0)
    lanes = ct.arange(32, dtype=ct.int32)
    ct.atomic_add(counter, lanes % 4, ct.full((32,), 1, dtype=ct.int32))
    ct.atomic_add(fsum, lanes % 8, ct.full((32,), 0.5, dtype=ct.float32))
    ct.atomic_max(imax, lanes % 2, lanes + i)


def test_atomics_across_ctas(compile_real):
    ptx = compile_real(atomics, [arr(ct.int32), arr(ct.float32), arr(ct.int32)])
    counter, fsum, imax = np.zeros(4, np.int32), np.zeros(8, np.float32), np.zeros(2, np.int32)
    launch(ptx, None, (5,), expand(counter, fsum, imax)).check()
    assert counter.tolist() == [40] * 4
    assert fsum.tolist() == [10.0] * 8
    assert imax.tolist() == [34, 35]


@ct.kernel
def printing(x):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(4,))
    ct.printf("block %d sum=%f\n", i, ct.sum(t))


def test_printf(compile_real):
    ptx = compile_real(printing, [arr(ct.float32)])
    x = np.arange(12, dtype=np.float32)
    result = launch(ptx, None, (3,), expand(x)).check()
    assert sorted(result.output.splitlines()) == [f"block {b} sum={x[4 * b:4 * b + 4].sum():f}" for b in range(3)]


@ct.kernel
def guarded(x, out):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(32,))
    ct.assert_(t >= 0, "negative input")
    ct.store(out, index=(i,), tile=t * 2)


def test_assert_traps_on_bad_input(compile_real):
    ptx = compile_real(guarded, [arr(ct.int32), arr(ct.int32)])
    x = np.arange(64, dtype=np.int32)
    out = np.zeros_like(x)
    launch(ptx, None, (2,), expand(x, out)).check()
    np.testing.assert_array_equal(out, 2 * x)
    x[40] = -3
    result = launch(ptx, None, (2,), expand(x, np.zeros_like(x)))
    assert result.trap is not None and result.trap.kind == "trap"
    assert "negative input" in result.output
