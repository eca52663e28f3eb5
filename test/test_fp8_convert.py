"""8-bit float conversions compiled as NVIDIA's tileiras 13.5 compiles them, bit for bit: the
interpreter against our PTX in the emulator and, where NVIDIA's tool is installed, against
NVIDIA's PTX in the emulator.

f8E8M0FNU (UE8M0 scales: a power of two 2^-127..2^127, NaN 0xFF), measured on kernels written
as text: any op using the type is refused below sm_100 (``Incompatibility with architecture
'sm_90': unsupported type 'f8E8M0FNU'``, exit 5); conversions to it take only
``rounding<zero>`` or ``rounding<positive_inf>`` (exit 3 otherwise).  On sm_100/103/110/120/121
NVIDIA narrows every source as f32 (f64 with ``cvt.{rz,rp}.f32.f64``, fp8/f4/UE5M3 widened
exactly) with ``cvt.{rz,rp}.satfinite.ue8m0x2.f32`` and widens with ``cvt.rn.bf16x2.ue8m0x2``
and then from bf16 on; so do we, two registers an instruction.

f8E4M3FN and f8E5M2: NVIDIA narrows with a bare ``cvt.rn.satfinite.{e4m3x2,e5m2x2}`` from f32
or f16x2 (bf16 through f32, f64 rounded to odd in f32), whose NaN is NaN per the PTX ISA, so
NaN stays NaN in both formats (the spec's table says +MAX_NORM for e4m3; the hardware running
NVIDIA's code wins: see ``tileiras.interp.floats``); infinities and overflow give +-MAX_NORM.
"""
from __future__ import annotations

import math
import re
import subprocess

import ml_dtypes
import numpy as np
import pytest
from _build import bytecode

from tileiras import diffcheck, driver
from tileiras.emulate.cubin import ptx_from_cubin
from tileiras.interp import floats
from tileiras.text.parser import parse_module

E8M0 = "f8E8M0FNU"
TILE = 256
DTYPES = diffcheck._DTYPES


def kernel(src: str, outs: list[tuple[str, str]], op: str = "ftof") -> str:
    """x (``src``, %n elements, a tile of TILE per block) converted once per (type, rounding)
    of ``outs`` and stored to out[k]; ``op`` is ``ftof``, ``ftoi`` or ``itof signed|unsigned``."""
    def view(e: str) -> tuple[str, str]:
        tv = f"tensor_view<?x{e}, strides=[1]>"
        return tv, f"partition_view<tile=({TILE}), {tv}>"
    args = ", ".join(f"%o{k}: tile<ptr<{dst}>>" for k, (dst, _) in enumerate(outs))
    tv, pv = view(src)
    body = [f"%xv = make_tensor_view %xp, shape = [%n], strides = [1] : tile<i32> -> {tv}",
            f"%xpv = make_partition_view %xv : {pv}",
            f"%t, %t1 = load_view_tko weak %xpv[%bx] token = %tok : {pv}, tile<i32> -> tile<{TILE}x{src}>, token"]
    for k, (dst, rounding) in enumerate(outs):
        otv, opv = view(dst)
        mode = f"rounding<{rounding}> " if rounding else ""
        conv = (f"ftoi %t signed : tile<{TILE}x{src}> -> tile<{TILE}x{dst}>" if op == "ftoi" else
                f"itof %t {op.split()[1]} {mode}: tile<{TILE}x{src}> -> tile<{TILE}x{dst}>" if op.startswith("itof") else
                f"ftof %t {mode}: tile<{TILE}x{src}> -> tile<{TILE}x{dst}>")
        body += [f"%v{k} = make_tensor_view %o{k}, shape = [%n], strides = [1] : tile<i32> -> {otv}",
                 f"%p{k} = make_partition_view %v{k} : {opv}",
                 f"%c{k} = {conv}",
                 f"%s{k} = store_view_tko weak %c{k}, %p{k}[%bx] token = %tok : tile<{TILE}x{dst}>, {opv}, "
                 "tile<i32> -> token"]
    lines = "\n    ".join(body)
    return f"""cuda_tile.module @kernels {{
  entry @k(%xp: tile<ptr<{src}>>, %n: tile<i32>, {args}) {{
    %tok = make_token : token
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    {lines}
    return
  }}
}}
"""


def arguments(x: np.ndarray, outs: list[tuple[str, str]]) -> list:
    return [x, np.int32(x.size)] + [np.zeros(x.size, DTYPES[dst]) for dst, _ in outs]


def run(src: str, outs: list[tuple[str, str]], x: np.ndarray, gpu: str = "sm_100", ptx: str | None = None,
        op: str = "ftof"):
    """(interpreter's outputs, emulator's outputs running ``ptx``, ours when None, our PTX)."""
    assert x.size % TILE == 0
    module = parse_module(kernel(src, outs, op), "k.mlir")
    ours = diffcheck.compile_ptx(module, gpu)
    args = arguments(x, outs)
    expected, got = diffcheck.run_both(module, "k", (x.size // TILE, 1, 1), args, ptx=ptx or ours)
    return expected.arrays[1:], got.arrays[1:], ours


def assert_same_bits(expected: list[np.ndarray], got: list[np.ndarray], x: np.ndarray) -> None:
    """Every element bit for bit; a NaN matches any NaN (the PTX ISA leaves which one open)."""
    assert len(expected) == len(got)
    for k, (e, g) in enumerate(zip(expected, got)):
        same = e.view(f"u{e.itemsize}") == g.view(f"u{g.itemsize}")
        if e.dtype.kind not in "iu":
            with np.errstate(invalid="ignore"):
                same |= np.isnan(e.astype(np.float64)) & np.isnan(g.astype(np.float64))
        assert e.size == x.size
        bad = np.flatnonzero(~same)
        assert bad.size == 0, (f"output {k}: {bad.size} differ, first x={x[bad[0]]!r} "
                               f"({x.view(f'u{x.itemsize}')[bad[0]]:#x}): {e[bad[0]]!r} vs {g[bad[0]]!r}")


def codes(e: np.ndarray) -> np.ndarray:
    return e.view(np.uint8)


# -- inputs ---------------------------------------------------------------------------------------
def f32_sweep() -> np.ndarray:
    """Every f32 exponent (zeros, subnormals, infinities and NaN included) with the mantissas
    that decide a power-of-two rounding (0, 1, half, half +- 1, all ones), both signs, then
    random bit patterns."""
    mantissas = np.array([0, 1, 2, 0x3FFFFF, 0x400000, 0x400001, 0x7FFFFE, 0x7FFFFF], np.uint32)
    exps = np.arange(256, dtype=np.uint32)
    bits = (exps[:, None] << np.uint32(23) | mantissas[None, :]).reshape(-1)
    bits = np.concatenate([bits, bits | np.uint32(0x80000000)])
    rng = np.random.default_rng(8)
    bits = np.concatenate([bits, rng.integers(0, 2**32, 1024, dtype=np.uint64).astype(np.uint32)])
    return bits.view(np.float32)


def f64_sweep() -> np.ndarray:
    """``f32_sweep`` a hair larger in magnitude, so that most values are no f32's."""
    with np.errstate(invalid="ignore"):  # signalling NaNs
        return f32_sweep().astype(np.float64) * (1 + 2.0**-35)


def every(dtype, bits: int = 8) -> np.ndarray:
    """Every code of a narrow format, repeated up to a whole tile."""
    raw = np.arange(1 << bits, dtype=np.uint8 if bits <= 8 else np.uint16)
    return np.resize(raw, max(TILE, raw.size)).view(dtype)


ALL_E8M0 = every(ml_dtypes.float8_e8m0fnu)
ROUNDINGS = [(E8M0, "zero"), (E8M0, "positive_inf")]


# -- narrowing ------------------------------------------------------------------------------------
def test_f32_dense_sweep_bit_exact():
    x = f32_sweep()
    expected, got, ptx = run("f32", ROUNDINGS, x)
    assert_same_bits(expected, got, x)
    assert "cvt.rz.satfinite.ue8m0x2.f32" in ptx and "cvt.rp.satfinite.ue8m0x2.f32" in ptx
    pairs = re.findall(r"cvt\.rz\.satfinite\.ue8m0x2\.f32\s+%rs\d+, (%r\d+), (%r\d+);", ptx)
    assert pairs and all(a != b for a, b in pairs)          # two registers an instruction


def test_known_answers():
    """|x| rounded to a power of two; zero and tiny values give 2^-127 (0x00), huge ones and
    infinities 2^127 (0xFE, saturated), NaN 0xFF."""
    x = np.resize(np.array([1.0, 3.0, -3.0, 0.3, 0.0, -0.0, 2.0**-127, 3 * 2.0**-128, 2.0**-149, 1.5 * 2.0**127,
                            np.inf, -np.inf, np.nan, 2.0**127, 0.75], np.float32), TILE)
    expected, got, _ = run("f32", ROUNDINGS, x)
    assert codes(expected[0])[:15].tolist() == [127, 128, 128, 125, 0, 0, 0, 0, 0, 254, 254, 254, 255, 254, 126]
    assert codes(expected[1])[:15].tolist() == [127, 129, 129, 126, 0, 0, 0, 1, 0, 254, 254, 254, 255, 254, 127]
    assert_same_bits(expected, got, x)


@pytest.mark.parametrize("src, dtype", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_every_half_code_bit_exact(src, dtype):
    x = every(dtype, 16)
    expected, got, _ = run(src, ROUNDINGS, x)
    assert_same_bits(expected, got, x)


@pytest.mark.parametrize("src", ["f8E4M3FN", "f8E5M2", "f4E2M1FN"])
def test_every_narrow_code_bit_exact(src):
    x = every(DTYPES[src], 4 if src == "f4E2M1FN" else 8)
    expected, got, _ = run(src, ROUNDINGS, x)
    assert_same_bits(expected, got, x)


def test_f64_rounds_to_f32_in_the_same_direction_first():
    """As NVIDIA's ``cvt.{rz,rp}.f32.f64``: -(1 + 2^-40) becomes -1 under positive_inf, whose
    power of two is 1 (the exact |x| would take 2)."""
    special = [-(1 + 2.0**-40), 1 + 2.0**-40, 2.0**-127 * (1 + 2.0**-40), -(2.0**-127) * (1 + 2.0**-40),
               1e300, -1e300, 1e-300, 2.0**128, np.inf, np.nan, 0.0, 3.0]
    x = np.resize(np.concatenate([special, f64_sweep()]), 3 * 1024)
    expected, got, ptx = run("f64", ROUNDINGS, x)
    assert codes(expected[1])[:4].tolist() == [127, 128, 1, 0]
    assert_same_bits(expected, got, x)
    assert "cvt.rz.f32.f64" in ptx and "cvt.rp.f32.f64" in ptx


# -- widening -------------------------------------------------------------------------------------
WIDE = [("f32", ""), ("f64", ""), ("bf16", ""), ("f16", ""), ("f16", "zero"), ("tf32", ""), ("f8E4M3FN", ""),
        ("f8E5M2", ""), ("f4E2M1FN", "")]


def test_every_code_widens_bit_exact():
    expected, got, ptx = run(E8M0, WIDE, ALL_E8M0)
    assert_same_bits(expected, got, ALL_E8M0)
    values = np.exp2(np.arange(255) - 127.0)
    np.testing.assert_array_equal(expected[0][:255], values.astype(np.float32))
    np.testing.assert_array_equal(expected[1][:255], values)
    assert np.isnan(expected[0][255]) and np.isnan(expected[1][255])
    assert expected[3][143] == np.inf and expected[4][143] == 65504 and expected[3][102] == 0  # 2^16, 2^-25
    assert "cvt.rn.bf16x2.ue8m0x2" in ptx


def test_ftoi_from_e8m0():
    expected, got, _ = run(E8M0, [("i32", "")], ALL_E8M0, op="ftoi")
    assert expected[0][[0, 127, 130, 157, 158, 254, 255]].tolist() == [0, 1, 8, 2**30, 2**31 - 1, 2**31 - 1, 0]
    assert_same_bits(expected, got, ALL_E8M0)


@pytest.mark.parametrize("src", ["f8E4M3FN", "f8E5M2", "f4E2M1FN"])
def test_ftoi_from_narrow_floats(src):
    """Widened exactly to f16 first, as NVIDIA's (``cvt.rzi.s32.f16``); i16 saturates (e5m2
    reaches 57344), NaN gives 0.  (i8 is left out: out of range it is undefined, and NVIDIA's
    ``cvt.rzi.s16`` then truncation wraps where the interpreter saturates.)"""
    x = every(DTYPES[src], 4 if src == "f4E2M1FN" else 8)
    expected, got, ptx = run(src, [("i32", ""), ("i16", "")], x, op="ftoi")
    assert_same_bits(expected, got, x)
    assert expected[0][[0x00, 0x7F if src == "f8E4M3FN" else 0x0]].tolist() == [0, 0]
    if src == "f8E5M2":
        assert expected[1][0x7B] == 32767 and expected[0][0x7B] == 57344 and expected[0][0xFB] == -57344
    assert "cvt.rzi.s32.f16" in ptx


# -- UE5M3 (sm_107, the only target with both) --------------------------------------------------
def test_ue5m3_both_ways_bit_exact():
    ue = every(DTYPES["fnv8E5M3FNU"])
    expected, got, ptx = run("fnv8E5M3FNU", ROUNDINGS, ue, gpu="sm_107")
    assert_same_bits(expected, got, ue)
    assert codes(expected[0])[[0, 1, 0x78, 0xFE, 0xFF]].tolist() == [0, 110, 127, 143, 255]
    assert codes(expected[1])[[0, 1, 0x79, 0xFE]].tolist() == [0, 110, 128, 144]
    expected, got, ptx = run(E8M0, [("fnv8E5M3FNU", "")], ALL_E8M0, gpu="sm_107")
    assert_same_bits(expected, got, ALL_E8M0)
    assert codes(expected[0])[[0, 110, 127, 143, 144, 254, 255]].tolist() == [0, 1, 0x78, 0xF8, 0xFE, 0xFE, 0xFF]
    assert "cvt.rn.satfinite.ue5m3x2.bf16x2" in ptx


# -- what NVIDIA's tool says and emits -------------------------------------------------------------
def compile_both(tmp_path, real_tileiras, text: str, gpu: str) -> tuple[int, int, str, str]:
    path = tmp_path / "k.tileir"
    path.write_bytes(bytecode(text))
    real = subprocess.run([real_tileiras, f"--gpu-name={gpu}", "--lineinfo", str(path), "-o",
                           str(tmp_path / "nv.cubin")], capture_output=True, text=True, timeout=120)
    ours = driver.main([str(path), f"--gpu-name={gpu}", "-o", str(tmp_path / "ours.cubin")])
    return ours, real.returncode, real.stderr, str(tmp_path / "nv.cubin")


#: NVIDIA's refusals of itof to the narrow formats
ITOF_REFUSALS = [
    (kernel("i32", [("f8E4M3FN", "zero")], "itof signed"), "sm_90", 3,
     "'cuda_tile.itof' op invalid rounding mode specified. Only 'nearest_even' is supported"),
    (kernel("i8", [(E8M0, "")], "itof unsigned"), "sm_100", 3,
     "'cuda_tile.itof' op integer to f8E8M0FNU conversion is not supported, please first convert to another "
     "float type"),
    (kernel("i16", [("f4E2M1FN", "")], "itof signed"), "sm_90", 5,
     "Incompatibility with architecture 'sm_90': unsupported type 'f4E2M1FN'"),
    (kernel("i64", [("fnv8E5M3FNU", "")], "itof signed"), "sm_120", 5,
     "Incompatibility with architecture 'sm_120': unsupported type 'fnv8E5M3FNU'"),
]


@pytest.mark.parametrize("text, gpu, rc, message", ITOF_REFUSALS + [
    (kernel("f32", ROUNDINGS), "sm_90", 5, "Incompatibility with architecture 'sm_90': unsupported type 'f8E8M0FNU'"),
    (kernel("f32", [(E8M0, "")]), "sm_100", 3,
     "'cuda_tile.ftof' op invalid rounding mode specified for conversion to f8E8M0FNU. Only 'zero' and "
     "'positive_inf' are supported"),
    (kernel(E8M0, [("f32", "")]), "sm_120", 0, None),
])
def test_refusals_as_nvidia(tmp_path, capsys, text, gpu, rc, message):
    path = tmp_path / "k.tileir"
    path.write_bytes(bytecode(text))
    assert driver.main([str(path), f"--gpu-name={gpu}", "-o", str(tmp_path / "ours.cubin")]) == rc
    if message:
        assert capsys.readouterr().err.splitlines()[0] == f"error: {message}"


@pytest.mark.parametrize("text, gpu, rc", [(kernel("f32", ROUNDINGS), "sm_90", 5),
                                           (kernel("f32", [(E8M0, "")]), "sm_100", 3)] +
                         [(text, gpu, rc) for text, gpu, rc, _ in ITOF_REFUSALS])
def test_refusals_same_as_nvidia(tmp_path, capsys, real_tileiras, text, gpu, rc):
    ours, theirs, stderr, _ = compile_both(tmp_path, real_tileiras, text, gpu)
    assert (ours, theirs) == (rc, rc)
    assert capsys.readouterr().err.splitlines()[0] == stderr.splitlines()[0]


@pytest.mark.parametrize("src, outs, x", [("f32", ROUNDINGS, f32_sweep()), (E8M0, WIDE, ALL_E8M0),
                                          ("f64", ROUNDINGS, f64_sweep())])
def test_nvidias_ptx_agrees(tmp_path, real_tileiras, src, outs, x):
    """A third opinion: NVIDIA's PTX for the same kernel, in the emulator, bit for bit."""
    _, rc, stderr, cubin = compile_both(tmp_path, real_tileiras, kernel(src, outs), "sm_100")
    assert rc == 0, stderr
    with open(cubin, "rb") as f:
        nvidia = ptx_from_cubin(f.read())
    expected, got, _ = run(src, outs, x, ptx=nvidia)
    assert_same_bits(expected, got, x)


# -- f8E4M3FN and f8E5M2: NaN, infinities, overflow ---------------------------------------------
FP8 = [("f8E4M3FN", ""), ("f8E5M2", "")]
FP8_SOURCES = [("f32", f32_sweep), ("f64", f64_sweep), ("f16", lambda: every(np.float16, 16)),
               ("bf16", lambda: every(ml_dtypes.bfloat16, 16))]


@pytest.mark.parametrize("src, inputs", FP8_SOURCES, ids=[s for s, _ in FP8_SOURCES])
def test_fp8_narrowing_bit_exact(src, inputs):
    x = inputs()
    expected, got, _ = run(src, FP8, x, gpu="sm_90")
    assert_same_bits(expected, got, x)
    with np.errstate(invalid="ignore"):  # signalling NaNs
        wide = x.astype(np.float64)
    for out, top in zip(expected, (448.0, 57344.0)):
        values = out.astype(np.float64)
        assert np.array_equal(np.isnan(values), np.isnan(wide))                  # NaN stays NaN, only NaN
        huge = np.isinf(wide) | (np.abs(wide) > 2 * top)
        assert np.array_equal(values[huge], np.copysign(top, wide[huge]))        # +-MAX_NORM, inf too


@pytest.mark.parametrize("src", ["f8E4M3FN", "f8E5M2"])
def test_fp8_widening_bit_exact(src):
    """Every code, NaN and (e5m2) infinity included, to the wider types and the other fp8."""
    x = every(DTYPES[src])
    other = "f8E5M2" if src == "f8E4M3FN" else "f8E4M3FN"
    expected, got, _ = run(src, [("f32", ""), ("f64", ""), ("f16", ""), ("bf16", ""), (other, "")], x, gpu="sm_90")
    assert_same_bits(expected, got, x)
    exact = x.astype(np.float64)
    np.testing.assert_array_equal(expected[1], exact)                             # NaN and inf kept
    converted = expected[4].astype(np.float64)
    assert np.array_equal(np.isnan(converted), np.isnan(exact))
    if src == "f8E5M2":
        assert converted[0x7C] == 448.0 and converted[0xFC] == -448.0            # inf -> +-MAX_NORM


@pytest.mark.parametrize("src", ["f8E4M3FN", "f8E5M2"])
def test_fp8_widens_two_registers_a_conversion(src):
    """One ``cvt.rn.f16x2.<e4m3|e5m2>x2`` a pair of a thread's registers, as NVIDIA's, not one
    a register with its upper byte unused."""
    x = every(DTYPES[src])
    expected, got, ptx = run(src, [("f16", "")], x, gpu="sm_90")
    assert_same_bits(expected, got, x)
    threads = int(re.search(r"\.reqntid (\d+)", ptx).group(1))
    assert ptx.count("cvt.rn.f16x2.") == TILE // threads // 2


def test_f64_rounds_once():
    """f64 -> fp8/f4 rounds to odd in f32 first, as NVIDIA's: a value a hair off a tie of the
    narrow format must not become the tie in f32 (2^-10 is half e4m3's smallest step, 0.25
    e2m1's)."""
    ties = np.array([2.0**-10, 2.0**-17, 0.25, 0.75, 2.5], np.float64)
    x = np.resize(np.concatenate([ties * (1 + 2.0**-40), ties * (1 - 2.0**-40), ties]), TILE)
    outs = FP8 + [("f4E2M1FN", "")]
    expected, got, _ = run("f64", outs, x)
    assert_same_bits(expected, got, x)
    e4m3, e5m2, e2m1 = (e.astype(np.float64) for e in expected)
    assert e4m3[[0, 5, 10]].tolist() == [2.0**-9, 0.0, 0.0]
    assert e5m2[[1, 6, 11]].tolist() == [2.0**-16, 0.0, 0.0]
    assert e2m1[[2, 3, 4, 7, 8, 9]].tolist() == [0.5, 1.0, 3.0, 0.0, 0.5, 2.0]


@pytest.mark.parametrize("src, outs, x", [("f32", FP8, f32_sweep()), ("f16", FP8, every(np.float16, 16)),
                                          ("f64", FP8 + [("f4E2M1FN", "")], f64_sweep()),
                                          ("f8E4M3FN", [("f8E5M2", ""), ("f32", "")], every(DTYPES["f8E4M3FN"])),
                                          ("f8E5M2", [("f8E4M3FN", ""), ("f16", "")], every(DTYPES["f8E5M2"]))])
def test_nvidias_fp8_ptx_agrees(tmp_path, real_tileiras, src, outs, x):
    """NVIDIA's PTX in the emulator gives the interpreter's codes: NaN stays NaN."""
    gpu = "sm_100" if ("f4E2M1FN", "") in outs else "sm_90"
    _, rc, stderr, cubin = compile_both(tmp_path, real_tileiras, kernel(src, outs), gpu)
    assert rc == 0, stderr
    with open(cubin, "rb") as f:
        nvidia = ptx_from_cubin(f.read())
    expected, got, _ = run(src, outs, x, gpu=gpu, ptx=nvidia)
    assert_same_bits(expected, got, x)


# -- itof to the 8- and 4-bit formats --------------------------------------------------------------
# NVIDIA's tileiras 13.5 (measured on text kernels, i1/i8/i16/i32/i64 signed and unsigned, sm_80..
# sm_120): ``cvt.rn.f16.{s,u}N`` then ``cvt.rn.satfinite.{e4m3x2,e2m1x2}.f16x2`` for e4m3 (sm_89+)
# and e2m1 (sm_100+); ``cvt.rn.f32.{s,u}N`` then ``cvt.rn.satfinite.{e5m2x2,ue5m3x2}.f32`` for e5m2
# and UE5M3 (sm_107 only); i8 goes as s16/u16, i1 as a select of -1.0 or 1.0 and 0.  Any
# rounding but nearest_even is refused (exit 3), f8E8M0FNU with "please first convert to another
# float type" (exit 3); the types elsewhere with the usual exit 5.
NARROW = [("f8E4M3FN", ""), ("f8E5M2", ""), ("f4E2M1FN", ""), ("fnv8E5M3FNU", "")]
SIGNS = ["signed", "unsigned"]


def near_ties(bits: int) -> np.ndarray:
    """Integers of a ``bits``-bit type that decide the 8- and 4-bit roundings: every sum of
    two powers of two (the formats' values and ties) and three (just off a tie: 4609 is
    2^12 + 2^9 + 1, which rounds to 5120 in e5m2 but to 4096 through f16), each +-1 and
    negated, the range's ends and the formats' saturation points, then random values."""
    p = [1 << k for k in range(bits)]
    sums = {a + b for a in p for b in p} | {a + b + c for a in p[:20] for b in p[:14] for c in p[:4]}
    special = {448, 464, 465, 479, 480, 57344, 61439, 61440, 61441, 65504, 65519, 65520, 65536, 114688,
               122879, 122880, 2**24 + 1, 2**53 + 1, 2**63 - 1}
    values = np.array(sorted(v + d for v in sums | special for d in (-1, 0, 1) if 0 <= v + d < 2**bits), np.uint64)
    rng = np.random.default_rng(bits)
    values = np.concatenate([values, rng.integers(0, 2**bits, 2048, dtype=np.uint64, endpoint=False)
                             if bits < 64 else rng.integers(0, 2**63, 2048, dtype=np.uint64) * 2 + 1])
    dtype = np.dtype(f"i{bits // 8}")
    x = values.astype(f"u{bits // 8}").view(dtype)
    x = np.concatenate([x, -x, np.array([np.iinfo(dtype).min, np.iinfo(dtype).max, 0, -1], dtype)])
    return np.resize(x, -(-x.size // TILE) * TILE)


def single_rounding(x: np.ndarray, signed: bool, dst: str) -> np.ndarray:
    """The spec's rounding of each integer, once: through float64 rounded to odd (exact up
    to 2^53), which the second rounding to a narrower format cannot get wrong."""
    v = x if signed else x.view(f"u{x.itemsize}")
    return floats.to_format(np.array([odd_f64(int(i)) for i in v]), dst)


def odd_f64(v: int) -> float:
    """``v`` truncated to 53 significant bits, the last one set when that lost anything."""
    shift = max(abs(v).bit_length() - 53, 0)
    t = abs(v) >> shift
    t |= int(t << shift != abs(v))
    return math.copysign(math.ldexp(t, shift), v)


@pytest.mark.parametrize("sign", SIGNS)
@pytest.mark.parametrize("src", ["i8", "i16", "i32", "i64"])
def test_itof_narrow_bit_exact(src, sign):
    """i8 and i16 every value, i32 and i64 the near-tie sweep, to all four formats at once
    (sm_107 admits them all): the interpreter, our PTX and one rounding agree bit for bit."""
    bits = int(src[1:])
    x = every(np.int8) if bits == 8 else every(np.int16, 16) if bits == 16 else near_ties(bits)
    expected, got, ptx = run(src, NARROW, x, gpu="sm_107", op=f"itof {sign}")
    assert_same_bits(expected, got, x)
    for out, (dst, _) in zip(expected, NARROW):
        np.testing.assert_array_equal(codes(out), codes(single_rounding(x, sign == "signed", dst)))
    k = "s" if sign == "signed" else "u"
    width = max(bits, 16)
    assert f"cvt.rn.f16.{k}{width}" in ptx and f"cvt.rn.f32.{k}{width}" in ptx
    assert ("cvt.rn.satfinite.e4m3x2.f16x2" in ptx and "cvt.rn.satfinite.e2m1x2.f16x2" in ptx
            and "cvt.rn.satfinite.e5m2x2.f32" in ptx and "cvt.rn.satfinite.ue5m3x2.f32" in ptx)


def test_itof_narrow_known_answers():
    """Ties to even, saturation (f16's inf too: 65520 and up), and e5m2's near-tie 4609."""
    x = np.resize(np.array([4608, 4609, -4609, 5, 7, -5, 464, 480, 65519, 65520, -70000, 61439, 61440,
                            2**31 - 1, 3, 0], np.int32), TILE)
    expected, got, _ = run("i32", NARROW, x, gpu="sm_107", op="itof signed")
    assert_same_bits(expected, got, x)
    e4m3, e5m2, e2m1, _ = (e[:16].astype(np.float64).tolist() for e in expected)
    assert e5m2[:3] == [4096.0, 5120.0, -5120.0] and e5m2[10:14] == [-57344.0, 57344.0, 57344.0, 57344.0]
    assert e4m3[6:11] == [448.0, 448.0, 448.0, 448.0, -448.0] and e4m3[14] == 3.0
    assert e2m1[3:6] == [4.0, 6.0, -4.0] and e2m1[13:16] == [6.0, 3.0, 0.0]


def test_itof_fp8_on_sm_90():
    x = every(np.int8)
    expected, got, _ = run("i8", FP8, x, gpu="sm_90", op="itof signed")
    assert_same_bits(expected, got, x)
    assert expected[0].astype(np.float64)[[1, 17, 19, 127, 128]].tolist() == [1.0, 16.0, 20.0, 128.0, -128.0]


@pytest.mark.parametrize("sign", SIGNS)
@pytest.mark.parametrize("src", ["i8", "i32", "i64"])
def test_nvidias_itof_narrow_ptx_agrees(tmp_path, real_tileiras, src, sign):
    """NVIDIA's PTX for the same kernel, in the emulator, gives the interpreter's codes."""
    x = every(np.int8) if src == "i8" else near_ties(int(src[1:]))
    _, rc, stderr, cubin = compile_both(tmp_path, real_tileiras, kernel(src, NARROW, f"itof {sign}"), "sm_107")
    assert rc == 0, stderr
    with open(cubin, "rb") as f:
        nvidia = ptx_from_cubin(f.read())
    expected, got, _ = run(src, NARROW, x, gpu="sm_107", ptx=nvidia, op=f"itof {sign}")
    assert_same_bits(expected, got, x)


@pytest.mark.parametrize("sign, one", [("signed", -1.0), ("unsigned", 1.0)])
def test_itof_narrow_from_i1(sign, one):
    """true is -1 signed, 1 unsigned; UE5M3 has no sign, -1 gives 0."""
    x = np.resize(np.array([True, False]), TILE)
    expected, got, _ = run("i1", NARROW, x, gpu="sm_107", op=f"itof {sign}")
    assert_same_bits(expected, got, x)
    assert [e[:2].astype(np.float64).tolist() for e in expected[:3]] == [[one, 0.0]] * 3
    assert codes(expected[3])[:2].tolist() == ([0x78, 0] if one > 0 else [0, 0])  # 0x78 is 1.0



@pytest.mark.parametrize("gpu", ["sm_80", "sm_90"])
@pytest.mark.parametrize("src", ["i32", "i64"])
def test_itof_bf16_tf32_round_once(src, gpu):
    """To tf32 (and bf16 below sm_90, which has no ``cvt.rn.bf16.s32``) through f32 rounded to
    odd, as NVIDIA's tf32 code: 2049 is 2048 in tf32, and 2^24 + 2^16 + 1, just above a bf16
    tie, goes up (through f32 rounded to nearest it would be the tie and go to 2^24)."""
    x = near_ties(int(src[1:]))
    x[:3] = [2049, 2**24 + 2**16 + 1, -(2**24 + 2**16 + 1)]
    outs = [("bf16", ""), ("tf32", "")]
    expected, got, ptx = run(src, outs, x, gpu=gpu, op="itof signed")
    assert_same_bits(expected, got, x)
    for out, (dst, _) in zip(expected, outs):
        np.testing.assert_array_equal(out.astype(np.float64), single_rounding(x, True, dst))
    assert expected[1][0] == 2048 and expected[0][1:3].astype(np.float64).tolist() == [2**24 + 2**17, -(2**24 + 2**17)]
    assert f"cvt.rz.f32.s{src[1:]}" in ptx
