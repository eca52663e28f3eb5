"""Accuracy of the elementary functions (tileiras.codegen.libm).

Two harnesses measure the same LLVM IR:

- end to end: a one-op Tile IR kernel (text form) compiled to PTX and run in the PTX
  emulator, f64 and f32 (and f16), on random inputs, special values and hard cases;
- host JIT: the f64 functions compiled for the host CPU by llvmlite, on 10^5 inputs each.

Errors are in ulps of the result type against references evaluated in extended precision
(numpy longdouble, i.e. the C library's 64-bit-mantissa functions; f32 against float64);
special values (NaN, +-inf, +-0, overflow, underflow) must match C99 bit for bit.

Documented bounds (max ulp error measured; asserted with a little headroom in ``ULP``):
f64: exp 0.75 (0.61 for normal results), exp2 0.73, log 0.51, log2 0.51, sin/cos 0.75,
tan 0.90, sinh 0.76, cosh 0.61, tanh 0.73, pow 0.95, powi 0.95, atan2 1.07, rsqrt 1.0;
f32 (native f32 arithmetic, no f64 but powi's; 32-bit Payne-Hanek for sin/cos/tan of
|x| >= 105615): exp 0.95, exp2 0.81, log 0.73, log2 0.71, sin 1.44, cos 1.44, tan 1.74,
sinh 1.04, cosh 0.97, tanh 1.29, pow 0.79, powi 0.50 (binary powering in f64, also for
pow(x, float(n))), atan2 0.87, rsqrt 1.0.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import binding as llvm
from llvmlite import ir

from tileiras.codegen import libm
from tileiras.emulate import launch
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.text.parser import parse_module

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")

LD = np.longdouble
HAVE_LONGDOUBLE = np.finfo(LD).nmant >= 63
needs_longdouble = pytest.mark.skipif(not HAVE_LONGDOUBLE, reason="needs an 80-bit long double reference")

#: asserted max ulp errors: f64 (host JIT and emulator) and f32 (emulator)
ULP = {
    "exp": (0.8, 1.0), "exp2": (0.8, 0.9), "log": (0.52, 0.8), "log2": (0.52, 0.8),
    "sin": (0.8, 1.55), "cos": (0.8, 1.55), "tan": (0.95, 1.85), "sinh": (0.8, 1.15),
    "cosh": (0.7, 1.1), "tanh": (0.8, 1.4), "pow": (1.0, 0.9), "fpowi": (1.0, 0.51),
    "atan2": (1.1, 1.0), "rsqrt": (1.0, 1.0),
}
REF = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "pow": np.power,
    "fpowi": np.power, "atan2": np.arctan2, "rsqrt": lambda x: 1 / np.sqrt(x),
}
OP = {"pow": "fpowf"}


def ulp_error(got: np.ndarray, ref: np.ndarray, dtype) -> np.ndarray:
    """|got - ref| in ulps of ``dtype`` at ref; equal values (NaNs, infinities) count 0."""
    fi = np.finfo(dtype)
    ref = np.asarray(ref, LD)
    g = np.asarray(got).astype(LD)
    with np.errstate(all="ignore"):
        e = np.floor(np.log2(np.abs(ref).clip(LD(fi.tiny))))
        err = np.abs(g - ref) / np.exp2(e - fi.nmant)
    ok = (g == ref) | (np.isnan(g) & np.isnan(ref))
    # a reference beyond the format's range must round to the infinity of its sign
    over = (np.abs(ref) > LD(fi.max)) & (np.abs(ref) >= LD(fi.max) * (1 + LD(2.0) ** -(fi.nmant + 1)))
    ok |= over & np.isinf(g) & (np.sign(g) == np.sign(ref))
    return np.where(ok, 0.0, np.nan_to_num(err.astype(np.float64), nan=1e30, posinf=1e30))


def reference(name: str, xs: list[np.ndarray], dtype) -> np.ndarray:
    wide = [np.asarray(x).astype(LD if dtype == np.float64 else np.float64) for x in xs]
    with np.errstate(all="ignore"):
        return REF[name](*wide)


def worst(name: str, xs, got, ref, err) -> str:
    i = int(np.argmax(err))
    return f"{name}: {err[i]:.3f} ulp at {[x[i] for x in xs]}: got {got[i]!r}, expected {ref[i]!r}"


# -- the end-to-end harness -------------------------------------------------------------------------
TYPES = {np.float32: "f32", np.float64: "f64", np.float16: "f16"}


def kernel_text(op: str, ty: str, arity: int, attrs: str = "", ity: str | None = None, tile: int = 256) -> str:
    names = ["a", "b"][:arity]
    lines, params = ["%tok = make_token : token"], []
    for nm in names + ["c"]:
        et = ity if nm == "b" and ity else ty
        view = f"tensor_view<?x{et}, strides=[1]>"
        params.append(f"%{nm}: tile<ptr<{et}>>")
        lines.append(f"%t{nm} = make_tensor_view %{nm}, shape = [%n], strides = [1] : tile<i32> -> {view}")
        lines.append(f"%p{nm} = make_partition_view %t{nm} : partition_view<tile=({tile}), {view}>")
    lines.append("%bx, %by, %bz = get_tile_block_id : tile<i32>")
    for nm in names:
        et = ity if nm == "b" and ity else ty
        pv = f"partition_view<tile=({tile}), tensor_view<?x{et}, strides=[1]>>"
        lines.append(f"%x{nm}, %k{nm} = load_view_tko weak %p{nm}[%bx] token = %tok : {pv}, tile<i32> "
                     f"-> tile<{tile}x{et}>, token")
    types = f"tile<{tile}x{ty}>" + (f", tile<{tile}x{ity}>" if ity else "")
    lines.append(f"%r = {op} {', '.join('%x' + nm for nm in names)}{attrs} : {types}")
    pv = f"partition_view<tile=({tile}), tensor_view<?x{ty}, strides=[1]>>"
    lines.append(f"%d = store_view_tko weak %r, %pc[%bx] token = %tok : tile<{tile}x{ty}>, {pv}, tile<i32> -> token")
    lines.append("return")
    return "entry @k(" + ", ".join(params) + ", %n: tile<i32>) {\n  " + "\n  ".join(lines) + "\n}\n"


def compile_op(name: str, dtype, arity: int, attrs: str = "", ity: str | None = None) -> str:
    text = kernel_text(OP.get(name, name), TYPES[dtype], arity, attrs, ity)
    return compile_module(parse_module(text), CompileOptions(gpu_name="sm_90"), "ptx")


def run_op(name: str, dtype, *xs: np.ndarray, attrs: str = "", tile: int = 256) -> np.ndarray:
    ity = None
    if name == "fpowi":
        ity = "i32"
        xs = (np.asarray(xs[0], dtype), np.asarray(xs[1], np.int32))
    else:
        xs = tuple(np.asarray(x, dtype) for x in xs)
    ptx = compile_op(name, dtype, len(xs), attrs, ity)
    n = len(xs[0])
    pad = (-n) % tile
    arrays = [np.concatenate([x, np.zeros(pad, x.dtype)]) for x in xs]
    out = np.zeros(n + pad, dtype)
    launch(ptx, "k", ((n + pad) // tile, 1, 1), [*arrays, out, np.int32(n + pad)])
    return out[:n]


# -- inputs -----------------------------------------------------------------------------------------
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, 1e-310, -1e-310, 5e-324, 1e308, -1e308]


def log_uniform(rng, lo: float, hi: float, n: int, signed: bool = True) -> np.ndarray:
    x = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    return x * rng.choice([-1.0, 1.0], n) if signed else x


def near_pio2_multiples(rng, n: int) -> np.ndarray:
    k = np.concatenate([np.arange(1, 64), rng.integers(1, 2**21, n)])
    x = (k.astype(LD) * LD("1.5707963267948966192313216916397514")).astype(np.float64)
    return np.concatenate([x, np.nextafter(x, 0), np.nextafter(x, np.inf)])


HUGE = np.array([6381956970095103.0 * 2.0**797, 1e22, 2.0**1023 * 1.9999999999999998, 1e300, 3.0e9, 2.0**19,
                 np.nextafter(2.0**19, 0), 1e6, 123456789.0, 2.0**60, 2.0**100])


def unary_inputs(name: str, dtype, rng, n: int) -> np.ndarray:
    f64 = dtype == np.float64
    big = {"exp": 745.2 if f64 else 104.0, "exp2": 1075.0 if f64 else 150.0,
           "sinh": 711.0 if f64 else 89.5, "cosh": 711.0 if f64 else 89.5, "tanh": 25.0}
    special = np.array(SPECIAL)
    if name in big:
        b = big[name]
        parts = [rng.uniform(-b, b, n), rng.uniform(-2, 2, n), log_uniform(rng, 1e-30, b, n),
                 np.linspace(b - 40, b, 200), -np.linspace(b - 40, b, 200)]
        if name == "exp":
            parts.append(np.array([709.782712893384, 709.7827128933841, -745.1332191019411, -745.1332191019412,
                                   88.72283, 88.72284, -103.97208, -103.972084, -87.33654]))
    elif name in ("log", "log2", "rsqrt"):
        parts = [log_uniform(rng, 5e-324 if f64 else 1e-45, 1.7e308 if f64 else 3e38, n, signed=False),
                 rng.uniform(0.5, 2.0, n), 1.0 + rng.integers(-50, 50, 200) * np.finfo(dtype).eps,
                 2.0 ** rng.integers(-1074 if f64 else -149, 1023 if f64 else 127, 200).astype(np.float64),
                 -rng.uniform(0, 5, 50)]
    else:  # sin, cos, tan
        parts = [rng.uniform(-10, 10, n), log_uniform(rng, 1e-30, 1e6, n), log_uniform(rng, 1e6, 1e308 if f64 else 3e38, n),
                 near_pio2_multiples(rng, 400) if f64 else near_pio2_multiples(rng, 400).astype(np.float32), HUGE]
    x = np.concatenate(parts + [special])
    return x.astype(dtype) if not f64 else x


def binary_inputs(name: str, dtype, rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    f64 = dtype == np.float64
    top = 1e300 if f64 else 1e38
    if name == "atan2":
        a = np.concatenate([log_uniform(rng, 1 / top, top, n), rng.uniform(-2, 2, n)])
        b = np.concatenate([log_uniform(rng, 1 / top, top, n), rng.uniform(-2, 2, n)])
    elif name == "pow":
        lim = 700 if f64 else 88
        x = np.concatenate([log_uniform(rng, 1 / top, top, n, signed=False), log_uniform(rng, 0.1, 10, n, False),
                            rng.uniform(0.5, 2, n), -rng.integers(1, 20, 300).astype(float), -rng.uniform(0.1, 3, 100)])
        y = np.concatenate([rng.uniform(-1, 1, n), rng.uniform(-lim / 2.3, lim / 2.3, n), rng.uniform(-1000, 1000, n),
                            rng.integers(-40, 40, 300).astype(float), rng.uniform(-3, 3, 100)])
        a, b = x, y
    else:  # fpowi
        x = np.concatenate([rng.uniform(-4, 4, n), log_uniform(rng, 1e-3, 1e3, n), np.full(50, -2.0), np.full(50, 0.5)])
        k = np.concatenate([rng.integers(-60, 60, n), rng.integers(-8, 8, n), np.arange(-25, 25), np.arange(-25, 25)])
        return x.astype(dtype), k.astype(np.int32)
    s = np.array(SPECIAL)
    grid_a, grid_b = np.repeat(s, len(s)), np.tile(s, len(s))
    extra_a = np.array([-8.0, -8.0, -2.0, -0.0, -0.0, 0.0, -np.inf, -np.inf, -1.0, -1.0, 1.0, np.nan])
    extra_b = np.array([1 / 3, 3.0, -3.0, -3.0, -2.0, -1.0, 3.0, -3.0, np.inf, np.nan, np.nan, 0.0])
    a = np.concatenate([a, grid_a, extra_a])
    b = np.concatenate([b, grid_b, extra_b])
    return a.astype(dtype), b.astype(dtype)


# -- end-to-end tests -------------------------------------------------------------------------------
UNARY = ["exp", "exp2", "log", "log2", "sin", "cos", "tan", "sinh", "cosh", "tanh", "rsqrt"]


@needs_longdouble
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_accuracy_emulated(name, dtype):
    x = unary_inputs(name, dtype, np.random.default_rng(7), 3000)
    got = run_op(name, dtype, x)
    ref = reference(name, [x], dtype)
    err = ulp_error(got, ref, dtype)
    bound = ULP[name][0 if dtype == np.float64 else 1]
    assert err.max() <= bound, worst(name, [x], got, ref, err)


@needs_longdouble
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", ["pow", "atan2", "fpowi"])
def test_binary_accuracy_emulated(name, dtype):
    a, b = binary_inputs(name, dtype, np.random.default_rng(11), 3000)
    got = run_op(name, dtype, a, b)
    ref = reference(name, [a, b], dtype)
    err = ulp_error(got, ref, dtype)
    bound = ULP[name][0 if dtype == np.float64 else 1]
    assert err.max() <= bound, worst(name, [a, b], got, ref, err)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_special_values_exact(name, dtype):
    x = np.array(SPECIAL, dtype)
    got = run_op(name, dtype, x)
    with np.errstate(all="ignore"):
        ref = REF[name](x.astype(np.float64)).astype(dtype)
    for g, r, v in zip(got, ref, x):
        if np.isnan(r) or np.isinf(r) or r == 0:
            assert (np.isnan(g) and np.isnan(r)) or (g == r and np.signbit(g) == np.signbit(r)), (name, v, g, r)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", ["pow", "atan2"])
def test_binary_special_values_exact(name, dtype):
    s = np.array(SPECIAL + [-8.0, 3.0, -3.0, 1 / 3], dtype)
    a, b = np.repeat(s, len(s)), np.tile(s, len(s))
    got = run_op(name, dtype, a, b)
    with np.errstate(all="ignore"):
        ref = REF[name](a.astype(np.float64), b.astype(np.float64)).astype(dtype)
    for g, r, x, y in zip(got, ref, a, b):
        if np.isnan(r) or np.isinf(r) or r == 0 or r == 1:
            assert (np.isnan(g) and np.isnan(r)) or (g == r and np.signbit(g) == np.signbit(r)), (name, x, y, g, r)
        else:
            assert ulp_error(np.array([g]), np.array([r], np.float64), dtype)[0] <= 1.0, (name, x, y, g, r)


@needs_longdouble
def test_f32_pow_hard_cases():
    """pow/powi near |x| = 1 with huge exponents (the double-float log and the exact low part
    of an integer exponent above 2^24 matter there)."""
    rng = np.random.default_rng(2)
    x = (1 + rng.uniform(-1e-3, 1e-3, 3000)).astype(np.float32)
    y = rng.uniform(-1e5, 1e5, 3000).astype(np.float32)
    xi = (1 + rng.uniform(-1e-5, 1e-5, 3000)).astype(np.float32)
    n = rng.integers(-2**27, 2**27, 3000).astype(np.int32)
    for name, a, b in (("pow", x, y), ("fpowi", xi, n)):
        got = run_op(name, np.float32, a, b)
        ref = reference(name, [a, b], np.float32)
        err = ulp_error(got, ref, np.float32)
        assert err.max() <= ULP[name][1], worst(name, [a, b], got, ref, err)


def test_f16_through_f32():
    x = np.linspace(-8, 8, 1001).astype(np.float16)
    got = run_op("exp", np.float16, x)
    assert np.array_equal(got, np.exp(x.astype(np.float64)).astype(np.float16))
    got = run_op("sin", np.float16, x)
    assert np.array_equal(got, np.sin(x.astype(np.float64)).astype(np.float16))


def test_flush_to_zero():
    x = np.array([1e-40, -1e-40, -130.0, -126.5, 0.0, 3.0, 1e-45], np.float32)
    got = run_op("exp2", np.float32, x, attrs=" flush_to_zero")
    assert list(got) == [1.0, 1.0, 0.0, 0.0, 1.0, 8.0, 1.0]
    got = run_op("rsqrt", np.float32, np.array([1e-40, -1e-40, 4.0], np.float32), attrs=" flush_to_zero")
    assert list(got) == [np.inf, -np.inf, 0.5]


def test_approx_modes_keep_the_fast_instructions():
    assert "ex2.approx" in compile_op("exp", np.float32, 1, " rounding<approx>")
    assert "tanh.approx.f32" in compile_op("tanh", np.float32, 1, " rounding<approx>")
    for name in ("exp", "tanh", "sin", "log2", "exp2", "rsqrt"):
        ptx = compile_op(name, np.float32, 1)
        assert ".approx" not in ptx, name


def test_f32_trig_reduction_is_inline_32_bit():
    """Huge f32 sin/cos/tan arguments reduce with 32x32-bit products, inline: no f64, no
    64-bit products and no call (an ABI call made ptxas keep many registers live across it)."""
    for name in ("sin", "cos", "tan"):
        ptx = compile_op(name, np.float32, 1)
        assert "mul.wide.u32" in ptx and "two_over_pi32" in ptx, name
        for banned in (".f64", "mul.lo.s64", "mul.hi.u64", "call"):
            assert banned not in ptx, (name, banned)


def test_f32_reciprocal_without_division():
    """Ops.recip (f32): FMA-only Newton reciprocals, general (any normal d) and on a known
    range, within about half an ulp; no div/rcp instruction in the IR."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    m = ir.Module(name="recip_host")
    for name, kw in (("general", {}), ("ranged", {"lo": 0.7, "hi": 1.42})):
        f = ir.Function(m, ir.FunctionType(libm.F32, [libm.F32]), name=name)
        b = ir.IRBuilder(f.append_basic_block("entry"))
        b.ret(libm.Ops(b, libm.F32).recip(f.args[0], **kw))
    assert "fdiv" not in str(m)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(m)),
                                        llvm.Target.from_default_triple().create_target_machine())
    engine.finalize_object()
    rng = np.random.default_rng(4)
    general = (np.exp(rng.uniform(-85, 85, 20000)) * rng.choice([-1.0, 1.0], 20000)).astype(np.float32)
    for name, xs in (("general", general), ("ranged", rng.uniform(0.7, 1.42, 20000).astype(np.float32))):
        fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float)(engine.get_function_address(name))
        got = np.array([fn(float(x)) for x in xs], np.float32)
        err = ulp_error(got, 1.0 / xs.astype(np.float64), np.float32)
        assert err.max() <= 0.51, (name, err.max())


# -- host JIT of the f64 IR: many more inputs --------------------------------------------------------
@pytest.fixture(scope="module")
def host():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    m = ir.Module(name="libm_host")
    i64 = ir.IntType(64)
    for name in libm.UNARY + libm.BINARY:
        arity = 2 if name in libm.BINARY else 1
        f = ir.Function(m, ir.FunctionType(ir.VoidType(), [ir.PointerType()] * (arity + 1) + [i64]), name=f"v_{name}")
        b = ir.IRBuilder(f.append_basic_block("entry"))
        loop, done = f.append_basic_block("loop"), f.append_basic_block("done")
        b.branch(loop)
        b.position_at_end(loop)
        i = b.phi(i64)
        i.add_incoming(ir.Constant(i64, 0), f.entry_basic_block)
        xs = [b.load(b.gep(f.args[k], [i], source_etype=libm.F64), typ=libm.F64) for k in range(arity)]
        r = b.call(libm.define(m, name, addrspace=0), xs)
        b.store(r, b.gep(f.args[arity], [i], source_etype=libm.F64))
        nxt = b.add(i, ir.Constant(i64, 1))
        i.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_unsigned("<", nxt, f.args[arity + 1]), loop, done)
        b.position_at_end(done)
        b.ret_void()
    mod = llvm.parse_assembly(str(m))
    mod.verify()
    tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    fns = {}
    for name in libm.UNARY + libm.BINARY:
        arity = 2 if name in libm.BINARY else 1
        proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (arity + 1)), ctypes.c_int64)
        fns[name] = proto(engine.get_function_address(f"v_{name}"))

    def run(name: str, *xs: np.ndarray) -> np.ndarray:
        xs = [np.ascontiguousarray(x, np.float64) for x in xs]
        out = np.empty_like(xs[0])
        fns[name](*[x.ctypes.data for x in xs], out.ctypes.data, len(out))
        return out
    run.engine = engine
    return run


@needs_longdouble
@pytest.mark.parametrize("name", UNARY)
def test_f64_accuracy_host(host, name):
    x = unary_inputs(name, np.float64, np.random.default_rng(3), 50000)
    got = host(name, x)
    ref = reference(name, [x], np.float64)
    err = ulp_error(got, ref, np.float64)
    assert err.max() <= ULP[name][0], worst(name, [x], got, ref, err)


@needs_longdouble
@pytest.mark.parametrize("name", ["pow", "atan2"])
def test_f64_binary_accuracy_host(host, name):
    a, b = binary_inputs(name, np.float64, np.random.default_rng(5), 50000)
    got = host(name, a, b)
    ref = reference(name, [a, b], np.float64)
    err = ulp_error(got, ref, np.float64)
    assert err.max() <= ULP[name][0], worst(name, [a, b], got, ref, err)


def test_constants():
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 450
    assert mp.mpf(libm.LN2_HI) + mp.mpf(libm.LN2_LO) - mp.log(2) < mp.mpf(2) ** -95
    assert abs(mp.mpf(libm.LN2_H) + mp.mpf(libm.LN2_L) - mp.log(2)) < mp.mpf(2) ** -106
    pio2 = sum(mp.mpf(p) for p in (libm.PIO2_1, libm.PIO2_2, libm.PIO2_3, libm.PIO2_4))
    assert abs(pio2 - mp.pi / 2) < mp.mpf(2) ** -175
    for table, width in ((libm.TWO_OVER_PI_TABLE, 64), (libm.TWO_OVER_PI_WORDS32, 32)):
        bits = 0
        for w in table[1:]:
            bits = (bits << width) | w
        n = width * (len(table) - 1)
        assert table[0] == 0 and bits == int(mp.floor(2 / mp.pi * mp.mpf(2) ** n))


def _constant_powi_kernel(ty: str, n: int, tile: int = 256, op: str = "fpowi") -> str:
    """x^n for a constant n: ``fpowi`` with an i32 tile, or ``fpowf`` with n as a float."""
    view = f"tensor_view<?x{ty}, strides=[1]>"
    pv = f"partition_view<tile=({tile}), {view}>"
    return f"""entry @k(%a: tile<ptr<{ty}>>, %c: tile<ptr<{ty}>>, %n: tile<i32>) {{
  %tok = make_token : token
  %ta = make_tensor_view %a, shape = [%n], strides = [1] : tile<i32> -> {view}
  %pa = make_partition_view %ta : {pv}
  %tc = make_tensor_view %c, shape = [%n], strides = [1] : tile<i32> -> {view}
  %pc = make_partition_view %tc : {pv}
  %bx, %by, %bz = get_tile_block_id : tile<i32>
  %x, %k = load_view_tko weak %pa[%bx] token = %tok : {pv}, tile<i32> -> tile<{tile}x{ty}>, token
  {f"%e = constant <i32: {n}> : tile<{tile}xi32>" if op == "fpowi" else f"%e = constant <{ty}: {float(n):e}> : tile<{tile}x{ty}>"}
  %r = {op} %x, %e : tile<{tile}x{ty}>{f", tile<{tile}xi32>" if op == "fpowi" else ""}
  %d = store_view_tko weak %r, %pc[%bx] token = %tok : tile<{tile}x{ty}>, {pv}, tile<i32> -> token
  return
}}
"""


@needs_longdouble
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16], ids=["f64", "f32", "f16"])
@pytest.mark.parametrize("n", libm.SMALL_POWI)
@pytest.mark.parametrize("op", ["fpowi", "fpowf"])
def test_powi_by_small_constants(n, dtype, op):
    """Constant exponents 0..3 (powi, or pow with 0.0..3.0) are a few products (no log/exp):
    at most 0.51 ulp, and pow's special values (x^0 = 1 for NaN, signed zeros and infinities,
    overflow)."""
    rng = np.random.default_rng(5)
    top = {np.float64: 1e100, np.float32: 1e12, np.float16: 30.0}[dtype]
    x = np.concatenate([rng.uniform(-4, 4, 2000), log_uniform(rng, 1 / top, top, 2000),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0]])
    x = x.astype(dtype)
    ptx = compile_module(parse_module(_constant_powi_kernel(TYPES[dtype], n, op=op)), CompileOptions(gpu_name="sm_90"), "ptx")
    assert "lg2" not in ptx and "ex2" not in ptx and "rcp" not in ptx and "div" not in ptx
    size = -(-len(x) // 256) * 256
    a = np.concatenate([x, np.zeros(size - len(x), dtype)])
    out = np.zeros(size, dtype)
    launch(ptx, "k", (size // 256, 1, 1), [a, out, np.int32(size)])
    got = out[:len(x)]
    ref = reference("fpowi", [x, np.full(len(x), n, np.int32)], dtype)
    err = ulp_error(got, ref, dtype)
    assert err.max() <= 0.51, worst("fpowi", [x], got, ref, err)
    with np.errstate(all="ignore"):
        exact = np.power(x.astype(np.float64), n).astype(dtype)
    special = np.isnan(exact) | np.isinf(exact) | (exact == 0)
    assert np.array_equal(np.signbit(got[special]), np.signbit(exact[special]))
    assert np.array_equal(np.isnan(got), np.isnan(exact))


def has_backward_branch(ptx: str) -> bool:
    """Does the PTX branch back to a label above the branch (a loop)?"""
    seen = set()
    for line in ptx.splitlines():
        line = line.strip()
        if line.endswith(":"):
            seen.add(line[:-1])
        elif "bra" in line and line.rstrip(";").split()[-1] in seen:
            return True
    return False


def _pow_of_int_kernel(tile: int = 256) -> str:
    """pow(x, float(n)) for an i32 tile n (cuTile's ``x ** n`` with a float x)."""
    fv, iv = "tensor_view<?xf32, strides=[1]>", "tensor_view<?xi32, strides=[1]>"
    fp, ip = f"partition_view<tile=({tile}), {fv}>", f"partition_view<tile=({tile}), {iv}>"
    return f"""entry @k(%a: tile<ptr<f32>>, %b: tile<ptr<i32>>, %c: tile<ptr<f32>>, %n: tile<i32>) {{
  %tok = make_token : token
  %ta = make_tensor_view %a, shape = [%n], strides = [1] : tile<i32> -> {fv}
  %pa = make_partition_view %ta : {fp}
  %tb = make_tensor_view %b, shape = [%n], strides = [1] : tile<i32> -> {iv}
  %pb = make_partition_view %tb : {ip}
  %tc = make_tensor_view %c, shape = [%n], strides = [1] : tile<i32> -> {fv}
  %pc = make_partition_view %tc : {fp}
  %bx, %by, %bz = get_tile_block_id : tile<i32>
  %x, %k1 = load_view_tko weak %pa[%bx] token = %tok : {fp}, tile<i32> -> tile<{tile}xf32>, token
  %i, %k2 = load_view_tko weak %pb[%bx] token = %tok : {ip}, tile<i32> -> tile<{tile}xi32>, token
  %y = itof %i signed : tile<{tile}xi32> -> tile<{tile}xf32>
  %r = fpowf %x, %y : tile<{tile}xf32>
  %d = store_view_tko weak %r, %pc[%bx] token = %tok : tile<{tile}xf32>, {fp}, tile<i32> -> token
  return
}}
"""


@needs_longdouble
def test_pow_of_an_integer_is_binary_powering():
    """pow(x, float(n)) powers by float(n)'s integer value in a loop (no logarithm), within
    0.51 ulp, huge |n| (rounded to f32 as pow sees it) and C99's special values included."""
    rng = np.random.default_rng(3)
    m = 3000
    x = np.concatenate([rng.uniform(-4, 4, m), (1 + rng.uniform(-1e-5, 1e-5, m)),
                        np.repeat([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, -2.0, 1e-45], 6)])
    n = np.concatenate([rng.integers(-60, 60, m), rng.integers(-2**31, 2**31 - 1, m),
                        np.tile([0, 1, -1, 3, -2, 2**31 - 1], 9)])
    x, n = x.astype(np.float32), n.astype(np.int32)
    ptx = compile_module(parse_module(_pow_of_int_kernel()), CompileOptions(gpu_name="sm_90"), "ptx")
    assert "mul.rn.f64" in ptx and "div.rn" not in ptx and has_backward_branch(ptx)
    size = -(-len(x) // 256) * 256
    pad = lambda v: np.concatenate([v, np.zeros(size - len(v), v.dtype)])  # noqa: E731
    out = np.zeros(size, np.float32)
    launch(ptx, "k", (size // 256, 1, 1), [pad(x), pad(n), out, np.int32(size)])
    got = out[:len(x)]
    y = n.astype(np.float32)
    ref = reference("pow", [x, y], np.float32)
    err = ulp_error(got, ref, np.float32)
    assert err.max() <= 0.51, worst("pow", [x, y], got, ref, err)
    with np.errstate(all="ignore"):
        exact = np.power(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
    special = np.isnan(exact) | np.isinf(exact) | (exact == 0)
    assert np.array_equal(np.signbit(got[special]), np.signbit(exact[special]))
    assert np.array_equal(np.isnan(got), np.isnan(exact))
