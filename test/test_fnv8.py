"""fnv8E5M3FNU (NVIDIA's UE5M3 scale format, bytecode 13.4+): where NVIDIA's tileiras 13.5
accepts it, and its conversions compiled as NVIDIA compiles them.

Measured with tileiras 13.5 on kernels written as text and exported by cuTile: any op using
the type (an entry argument no op uses is not checked) is refused with ``Incompatibility with
architecture 'sm_XX': unsupported type 'fnv8E5M3FNU'`` (exit 5) on every ``--gpu-name`` but
sm_107.  On sm_107 constants, loads and stores, bitcast, select, ftof to and from every float
type, itof, ftoi and mmaf_scaled scales (f4 operands only) compile.  Conversions to it take
only ``nearest_even``; from it the usual widening/narrowing rules apply (f16 is narrower).
NVIDIA narrows with ``cvt.rn.satfinite.ue5m3x2.{f32,f16x2,bf16x2}`` (f64 rounded to odd in f32
first) and widens with ``cvt.rn.{bf16x2,f16x2}.ue5m3x2``; so do we.
"""
from __future__ import annotations

import io
import subprocess

import cuda.tile as ct
import ml_dtypes
import numpy as np
import pytest
from kernels._case import KernelCase, arr

from tileiras import diffcheck, driver
from tileiras.codegen.ptxas import PtxasError, invoke_ptxas
from tileiras.emulate.cubin import ptx_from_cubin
from tileiras.ir.version import V13_3, V13_4
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.reader import read_bytecode
from tileiras.text.parser import parse_module
from tileiras.tools import find_ptxas
from tileiras.verify import verify_module
from tileiras.verify.hints import KNOWN_ARCHS
from tileiras.writer import write_bytecode

UE = "fnv8E5M3FNU"


def _view(n: int, e: str) -> str:
    return f"partition_view<tile=({n}), tensor_view<{n}x{e}, strides=[1]>>"


def convert_kernel(src: str, dst: str, mid: str = UE, *, rounding_in: str = "", rounding_out: str = "",
                   n: int = 16) -> str:
    """Load ``src`` elements, ftof them to ``mid`` and on to ``dst``, store them."""
    def io_(name: str, arg: str, e: str) -> str:
        return (f"  %t{name} = make_tensor_view %{arg}, shape = [{n}], strides = [1] : tensor_view<{n}x{e}, "
                f"strides=[1]>\n  %{name} = make_partition_view %t{name} : {_view(n, e)}\n")
    r_in = f"rounding<{rounding_in}> " if rounding_in else ""
    r_out = f"rounding<{rounding_out}> " if rounding_out else ""
    return (f"entry @k(%x: tile<ptr<{src}>>, %z: tile<ptr<{dst}>>) {{\n  %tok = make_token : token\n"
            + io_("px", "x", src) + io_("pz", "z", dst) + "  %c0 = constant <i32: 0> : tile<i32>\n"
            f"  %v, %t1 = load_view_tko weak %px[%c0] token = %tok : {_view(n, src)}, tile<i32> -> tile<{n}x{src}>, "
            "token\n"
            f"  %w = ftof %v {r_in}: tile<{n}x{src}> -> tile<{n}x{mid}>\n"
            f"  %u = ftof %w {r_out}: tile<{n}x{mid}> -> tile<{n}x{dst}>\n"
            f"  %t3 = store_view_tko weak %u, %pz[%c0] token = %tok : tile<{n}x{dst}>, {_view(n, dst)}, tile<i32> "
            "-> token\n  return\n}\n")


def errors(text: str, gpu_name: str | None = None) -> list[str]:
    return [d.message for d in verify_module(parse_module(text, "k.mlir"), gpu_name=gpu_name) if d.is_error]


def unsupported(gpu: str) -> str:
    return f"Incompatibility with architecture '{gpu}': unsupported type '{UE}'"


# -- where NVIDIA accepts it -------------------------------------------------------------------
@pytest.mark.parametrize("gpu", KNOWN_ARCHS)
def test_only_sm_107_has_the_type(gpu):
    found = errors(convert_kernel("f32", "f32"), gpu)
    assert found == ([] if gpu == "sm_107" else [unsupported(gpu)])


def test_an_argument_no_op_uses_is_not_checked():
    assert errors(f"entry @k(%x: tile<ptr<{UE}>>) {{\n  return\n}}\n", "sm_100") == []
    view = (f"entry @k(%x: tile<ptr<{UE}>>) {{\n  %t = make_tensor_view %x, shape = [16], strides = [1] : "
            f"tensor_view<16x{UE}, strides=[1]>\n  return\n}}\n")
    assert errors(view, "sm_100") == [unsupported("sm_100")]


LOW = "invalid rounding mode specified for conversion to low-precision type. Only 'nearest_even' is supported"
NARROW = ("invalid rounding mode specified. Only 'nearest_even' and 'zero' are supported for narrowing "
          "conversions to standard types")
WIDEN = ("invalid rounding mode specified for widening conversion. Only IEEE float rounding modes are "
         "supported: 'nearest_even', 'zero', 'negative_inf', 'positive_inf', 'nearest_away'")
#: (source, result, rounding of the conversion to UE5M3, rounding of the one from it, message)
ROUNDING = [
    ("f32", "f32", "zero", "", LOW), ("f16", "f32", "positive_inf", "", LOW), ("f64", "f32", "approx", "", LOW),
    ("f32", "f32", "", "zero", ""), ("f32", "f64", "", "nearest_away", ""), ("f32", "bf16", "", "positive_inf", ""),
    ("f32", "f32", "", "approx", WIDEN), ("f32", "f16", "", "zero", ""), ("f32", "f16", "", "positive_inf", NARROW),
    ("f32", "f8E4M3FN", "", "zero", LOW),
]


@pytest.mark.parametrize("src, dst, r_in, r_out, message", ROUNDING)
def test_rounding_modes(src, dst, r_in, r_out, message):
    found = errors(convert_kernel(src, dst, rounding_in=r_in, rounding_out=r_out), "sm_107")
    assert found == ([f"'cuda_tile.ftof' op {message}"] if message else [])


def scaled(element: str, k: int, blocks: int) -> str:
    t = (f"tile<128x{k}x{element}>, tile<{k}x128x{element}>, tile<128x128xf32>, tile<128x{blocks}x{UE}>, "
         f"tile<{blocks}x128x{UE}>")
    args = ", ".join(f"%{n}: {x}" for n, x in zip("abcde", t.split(", ")))
    return f"testing$func @f({args}) {{\n  %0 = mmaf_scaled %a, %b, %c, %d, %e : {t}\n}}\n"


@pytest.mark.parametrize("element, k, blocks, message", [
    ("f4E2M1FN", 128, 4, ""), ("f4E2M1FN", 128, 8, ""),
    ("f4E2M1FN", 128, 16, "shape error: f4E2M1FN element type with fnv8E5M3FNU scales requires block scale factor "
                          "of lhs_scale and rhs_scale to be 16 or 32, but got 8"),
    ("f8E4M3FN", 128, 4, "unsupported combination of element types. Scale type 'fnv8E5M3FNU' expects lhs and rhs "
                         "element types to be 'f4E2M1FN', but got 'f8E4M3FN'"),
])
def test_mmaf_scaled_scales(element, k, blocks, message):
    found = errors(scaled(element, k, blocks))
    assert found == ([f"'cuda_tile.mmaf_scaled' op {message}"] if message else [])


def test_element_type_lists_name_it():
    """NVIDIA 13.5's lists of element types end their floats with fnv8E5M3FNU."""
    assert errors(convert_kernel("f32", "f32", mid="i32"))[0] == (
        "'cuda_tile.ftof' op result #0 must be tile of f16 or bf16 or f32 or f64 or tf32 or f8E4M3FN or f8E5M2 or "
        "f8E8M0FNU or f4E2M1FN or fnv8E5M3FNU values, but got '!cuda_tile.tile<16xi32>'")


def test_needs_bytecode_13_4():
    module = parse_module(convert_kernel("f32", "f32"), "k.mlir", version=V13_3)
    assert "type 'FloatNV8E5M3FNU' requires bytecode version 13.4+, targeting 13.3" in [
        d.message for d in verify_module(module)]
    assert write_bytecode(parse_module(convert_kernel("f32", "f32"), "k.mlir", version=V13_4), version=V13_4)


def test_constants_print_and_parse_back():
    text = (f"entry @k() {{\n  %c = constant <{UE}: [1.000000e+00, 1.146880e+05, 7.629395e-06, 0x7F]> : "
            f"tile<4x{UE}>\n  return\n}}\n")
    module = parse_module(text, "k.mlir")
    const = next(op for op in module.functions[0].walk() if op.name == "constant")
    assert list(const.value.data) == [0x78, 0xFE, 0x01, 0x7F]


def test_constants_print_as_tileirdisasm_prints_them(tmp_path, real_tileirdisasm):
    from tileiras.text.printer import print_module

    values = "1.0, 114688.0, 7.62939453125e-06, 0x7F, 0xFF, 0.1, 65536.0, 448.0"
    text = (f"entry @k() {{\n  %c = constant <{UE}: [{values}]> : tile<8x{UE}>\n"
            f"  %n = constant <{UE}: 0xFF> : tile<4x{UE}>\n  return\n}}\n")
    path = tmp_path / "k.tileir"
    path.write_bytes(write_bytecode(parse_module(text, "k.mlir")))
    real = subprocess.run([real_tileirdisasm, str(path)], capture_output=True, text=True, timeout=60, check=True)
    assert print_module(read_bytecode(path.read_bytes())) == real.stdout
    assert "%cst_NaN_fnv8E5M3FNU = constant <fnv8E5M3FNU: 0xFF>" in real.stdout


# -- what NVIDIA's tool says -------------------------------------------------------------------
NVIDIA_CASES = [(convert_kernel("f32", "f32"), "sm_107", 0, None),
                (convert_kernel("f32", "f32"), "sm_100", 5, unsupported("sm_100")),
                (convert_kernel("f16", "bf16"), "sm_120", 5, unsupported("sm_120")),
                (convert_kernel("f32", "f32", rounding_in="zero"), "sm_107", 3, f"'cuda_tile.ftof' op {LOW}")]


@pytest.mark.parametrize("text, gpu, rc, first", NVIDIA_CASES)
def test_same_as_nvidia(tmp_path, capsys, real_tileiras, text, gpu, rc, first):
    path = tmp_path / "k.tileir"
    path.write_bytes(write_bytecode(parse_module(text, "k.mlir")))
    real = subprocess.run([real_tileiras, f"--gpu-name={gpu}", str(path), "-o", str(tmp_path / "nv.cubin")],
                          capture_output=True, text=True, timeout=120)
    ours = driver.main([str(path), f"--gpu-name={gpu}", "-o", str(tmp_path / "ours.cubin")])
    err = capsys.readouterr().err.splitlines()
    assert (ours, real.returncode) == (rc, rc)
    if first is not None:
        assert err[0] == real.stderr.splitlines()[0] == f"error: {first}"


# -- compiled as NVIDIA compiles them, checked against the interpreter ---------------------------
U8, F32, F64, F16, BF16 = ct.uint8, ct.float32, ct.float64, ct.float16, ct.bfloat16
CT_UE = ct.float8_e5m3fnu


@ct.kernel
def ue5m3_narrow(x, d, h, b, q32, q64, q16, qb):
    i = ct.bid(0)
    ct.store(q32, index=(i,), tile=ct.bitcast(ct.astype(ct.load(x, index=(i,), shape=(64,)), CT_UE), U8))
    ct.store(q64, index=(i,), tile=ct.bitcast(ct.astype(ct.load(d, index=(i,), shape=(64,)), CT_UE), U8))
    ct.store(q16, index=(i,), tile=ct.bitcast(ct.astype(ct.load(h, index=(i,), shape=(64,)), CT_UE), U8))
    ct.store(qb, index=(i,), tile=ct.bitcast(ct.astype(ct.load(b, index=(i,), shape=(64,)), CT_UE), U8))


@ct.kernel
def ue5m3_widen(q, o32, o64, o16, ob, oi, oe):
    s = ct.bitcast(ct.load(q, index=(ct.bid(0),), shape=(64,)), CT_UE)
    i = ct.bid(0)
    ct.store(o32, index=(i,), tile=ct.astype(s, F32))
    ct.store(o64, index=(i,), tile=ct.astype(s, F64))
    ct.store(o16, index=(i,), tile=ct.astype(s, F16))
    ct.store(ob, index=(i,), tile=ct.astype(s, BF16))
    ct.store(oi, index=(i,), tile=ct.astype(s, ct.int32))
    ct.store(oe, index=(i,), tile=ct.astype(s, ct.float8_e4m3fn))


@ct.kernel
def ue5m3_from_int(n, q):
    i = ct.bid(0)
    ct.store(q, index=(i,), tile=ct.bitcast(ct.astype(ct.load(n, index=(i,), shape=(64,)), CT_UE), U8))


@ct.kernel
def ue5m3_gemm(a, sa, b, sb, c):
    """f4 operands with UE5M3 scales, 16 elements a block."""
    ta = ct.astype(ct.load(a, index=(0, 0), shape=(32, 64)), ct.float4_e2m1fn)
    tb = ct.astype(ct.load(b, index=(0, 0), shape=(64, 32)), ct.float4_e2m1fn)
    sa_ = ct.bitcast(ct.load(sa, index=(0, 0), shape=(32, 4)), CT_UE)
    sb_ = ct.bitcast(ct.load(sb, index=(0, 0), shape=(4, 32)), CT_UE)
    ct.store(c, index=(0, 0), tile=ct.mma_scaled(ta, sa_, tb, sb_, ct.zeros((32, 32), F32)))


N = 256  # elements of each 1-D argument: four tile blocks of 64


def wide_values(rng: np.random.Generator, dtype) -> np.ndarray:
    """Values that exercise every rule: the known answers, signed zeros, ties and saturation,
    infinities and NaN, then log-uniform magnitudes of both signs from 2^-20 to 2^18."""
    special = [1.0, 1.0625, 1.1875, 0.5, 2.0**-14, 2.0**-17, 2.0**-18, 3 * 2.0**-19, 3 * 2.0**-18, 114688.0,
               118784.0, 122880.0, 65504.0, 65520.0, 448.0, 0.0, -0.0, -3.0, -2.0**-20, np.inf, -np.inf, np.nan]
    mags = np.exp2(rng.uniform(-20, 18, N - len(special))) * rng.choice([-1.0, 1.0], N - len(special))
    return np.concatenate([special, mags]).astype(dtype)


def narrow_inputs(rng: np.random.Generator) -> list[np.ndarray]:
    x = wide_values(rng, np.float32)
    d = wide_values(rng, np.float64)
    # f64 values a hair off a UE5M3 tie: rounding through f32 first would land on the tie
    d[-4:] = [1.0625 + 2.0**-40, 1.0625 - 2.0**-40, 3 * 2.0**-19 - 2.0**-60, 118784.0 - 2.0**-30]
    h = rng.integers(0, 1 << 16, N).astype(np.uint16).view(np.float16)  # every kind of f16
    b = wide_values(rng, ml_dtypes.bfloat16)
    return [x, d, h, b] + [np.zeros(N, np.uint8) for _ in range(4)]


def widen_inputs(rng: np.random.Generator) -> list[np.ndarray]:
    """Every code, NaN (0xFF) last."""
    del rng
    return [np.arange(N, dtype=np.uint8), np.zeros(N, np.float32), np.zeros(N, np.float64), np.zeros(N, np.float16),
            np.zeros(N, ml_dtypes.bfloat16), np.zeros(N, np.int32), np.zeros(N, ml_dtypes.float8_e4m3fn)]


def int_inputs(rng: np.random.Generator) -> list[np.ndarray]:
    n = np.concatenate([[0, 1, 7, 9, 17, 114688, 114689, 118784, 122880, 2**31 - 1, -(2**31), -5],
                        rng.integers(-200_000, 200_000, N - 12)]).astype(np.int32)
    return [n, np.zeros(N, np.uint8)]


def gemm_inputs(rng: np.random.Generator) -> list[np.ndarray]:
    a = rng.choice([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, -4.0, -6.0], (32, 64)).astype(np.float32)
    b = rng.choice([0.0, 0.5, -1.0, 1.5, 2.0, -3.0, 4.0, 6.0], (64, 32)).astype(np.float32)
    sa = rng.integers(0x50, 0x90, (32, 4)).astype(np.uint8)  # scales 2^-5 .. 2^3
    sb = rng.integers(0x50, 0x90, (4, 32)).astype(np.uint8)
    return [a, sa, b, sb, np.zeros((32, 32), np.float32)]


CASES = {
    "narrow": (ue5m3_narrow, [F32, F64, F16, BF16, U8, U8, U8, U8], narrow_inputs, (4, 1, 1)),
    "widen": (ue5m3_widen, [U8, F32, F64, F16, BF16, ct.int32, ct.float8_e4m3fn], widen_inputs, (4, 1, 1)),
    "from_int": (ue5m3_from_int, [ct.int32, U8], int_inputs, (4, 1, 1)),
    "gemm": (ue5m3_gemm, None, gemm_inputs, (1, 1, 1)),
}


@pytest.fixture(scope="session")
def exported() -> dict[str, bytes]:
    from cuda.tile.compilation import export_kernel

    out = {}
    for name, (kernel, dtypes, _, _) in CASES.items():
        params = [arr(t) for t in dtypes] if dtypes else [arr(F32, 2), arr(U8, 2), arr(F32, 2), arr(U8, 2),
                                                              arr(F32, 2)]
        buf = io.BytesIO()
        export_kernel(kernel, KernelCase(name, kernel, [params]).signatures(), buf, gpu_code="sm_107",
                      output_format="tileir_bytecode", bytecode_version="13.4")
        out[name] = buf.getvalue()
    return out


def run_all(bytecode: bytes, name: str, ptx: str | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(interpreter's arrays, emulator's arrays running ``ptx``, ours when None)."""
    from tileiras import interp

    module = read_bytecode(bytecode)
    entry = module.functions[0].name
    _, _, inputs, grid = CASES[name]
    args = interp.cutile_args(*inputs(np.random.default_rng(7)))
    expected = diffcheck.run_interpreter(module, entry, grid, args)
    ptx = ptx or compile_module(module, CompileOptions(gpu_name="sm_107"), "ptx")
    return expected.arrays, diffcheck.run_ptx(ptx, entry, grid, args).arrays


def assert_same_bits(expected: list[np.ndarray], got: list[np.ndarray]) -> None:
    """Every element bit for bit, except that any NaN matches any NaN (payloads are unspecified)."""
    for i, (e, g) in enumerate(zip(expected, got)):
        e, g = e.reshape(-1), g.reshape(-1)
        same = e.view(f"u{e.itemsize}") == g.view(f"u{g.itemsize}")
        if e.dtype.kind not in "iub":
            with np.errstate(invalid="ignore"):
                same |= np.isnan(e.astype(np.float64)) & np.isnan(g.astype(np.float64))
        bad = np.flatnonzero(~same)
        assert bad.size == 0, f"array {i}: {bad.size} elements differ, first {bad[0]}: {e[bad[0]]} vs {g[bad[0]]}"


@pytest.mark.parametrize("name", ["narrow", "widen", "from_int"])
def test_conversions_bit_exact(exported, name):
    """Interpreter and our PTX in the emulator agree bit for bit, NaN and saturation included."""
    assert_same_bits(*run_all(exported[name], name))


def test_gemm_with_ue5m3_scales(exported):
    expected, got = run_all(exported["gemm"], "gemm")
    np.testing.assert_allclose(got[-1], expected[-1], rtol=1e-6)
    assert np.abs(expected[-1]).max() > 1.0  # the scales reached the products


def test_known_answers(exported):
    """The interpreter's codes for the inputs whose answers are known (the emulator agrees, above)."""
    arrays, _ = run_all(exported["narrow"], "narrow")
    q32, q64 = arrays[4], arrays[5]
    assert q32[:12].tolist() == [0x78, 0x78, 0x7A, 0x70, 0x08, 0x01, 0x00, 0x01, 0x02, 0xFE, 0xFE, 0xFE]
    assert q32[15:22].tolist() == [0, 0, 0, 0, 0xFE, 0, 0xFF]  # zeros, negatives, infinities, NaN
    assert q64[-4:].tolist() == [0x79, 0x78, 0x01, 0xFE]  # one correct rounding from f64
    widened = run_all(exported["widen"], "widen")[0]
    assert widened[1][[0x00, 0x01, 0x78, 0xFE]].tolist() == [0.0, 2.0**-17, 1.0, 114688.0]
    assert np.isnan(widened[1][0xFF]) and np.isinf(widened[3][0xF8]) and widened[3][0xF7] == 61440.0


@pytest.mark.parametrize("name", ["narrow", "widen", "from_int"])
def test_nvidias_ptx_agrees(exported, name, real_tileiras, tmp_path):
    """A third opinion: NVIDIA's own PTX for the same bytecode, in the emulator."""
    src, out = tmp_path / "k.tileir", tmp_path / "k.cubin"
    src.write_bytes(exported[name])
    subprocess.run([real_tileiras, "--gpu-name=sm_107", "--lineinfo", str(src), "-o", str(out)], check=True,
                   capture_output=True, timeout=120)
    assert_same_bits(*run_all(exported[name], name, ptx_from_cubin(out.read_bytes())))


def test_same_instructions_as_nvidia(exported):
    ptx = compile_module(read_bytecode(exported["narrow"]), CompileOptions(gpu_name="sm_107"), "ptx")
    for form in ("cvt.rn.satfinite.ue5m3x2.f32", "cvt.rn.satfinite.ue5m3x2.f16x2", "cvt.rn.satfinite.ue5m3x2.bf16x2",
                 "cvt.rz.f32.f64"):
        assert form in ptx, form
    ptx = compile_module(read_bytecode(exported["widen"]), CompileOptions(gpu_name="sm_107"), "ptx")
    assert "cvt.rn.bf16x2.ue5m3x2" in ptx and "cvt.rn.f16x2.ue5m3x2" in ptx


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (nvidia-cuda-nvcc)")
@pytest.mark.parametrize("name", sorted(CASES))
def test_ptxas_accepts(exported, name):
    ptx = compile_module(read_bytecode(exported[name]), CompileOptions(gpu_name="sm_107"), "ptx")
    try:
        invoke_ptxas(ptx, "sm_107")
    except PtxasError as err:
        pytest.fail(f"ptxas rejects {name}:\n{err.log}", pytrace=False)
