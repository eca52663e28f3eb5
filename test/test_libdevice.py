"""Math through libdevice (tileiras.codegen.libdevice), as NVIDIA's tileiras does it.

* the library: only the functions a module calls are copied, ``__nvvm_reflect`` is settled
  (FTZ per call, the architecture per module), and LLVM inlines them (no ``.func`` left);
* every math op, type and flag: our PTX and NVIDIA's, run in the emulator on the same inputs
  (random values, +-0, +-inf, NaN, subnormals, huge arguments), give the same bits on at
  least 99.9% of the elements and are never more than 1 ulp apart (today: all the same);
* our results are within CUDA's documented ulp bounds of the interpreter's exact math
  (CUDA C Programming Guide, "Mathematical Functions").
"""
from __future__ import annotations

import re
import subprocess

import ml_dtypes
import numpy as np
import pytest
from _build import bytecode

from tileiras import diffcheck
from tileiras.codegen import libdevice
from tileiras.emulate.cubin import ptx_from_cubin
from tileiras.text.parser import parse_module

TILE = 128
N = 2048
DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}
BINARY = {"fpowf", "fpowi", "atan2", "remf"}


def kernel(op: str, t: str, attrs: str = "") -> str:
    """out = op(x[, y]) over tiles of TILE elements; fpowi's exponent is i32."""
    yt = "i32" if op == "fpowi" else t

    def view(e: str) -> tuple[str, str]:
        tv = f"tensor_view<?x{e}, strides=[1]>"
        return tv, f"partition_view<tile=({TILE}), {tv}>"

    lines = []
    for name, e in [("x", t)] + ([("y", yt)] if op in BINARY else []) + [("o", t)]:
        tv, pv = view(e)
        lines += [f"%{name}v = make_tensor_view %{name}p, shape = [%n], strides = [1] : tile<i32> -> {tv}",
                  f"%{name}pv = make_partition_view %{name}v : {pv}"]
        if name != "o":
            lines.append(f"%{name}, %{name}t = load_view_tko weak %{name}pv[%bx] token = %tok : {pv}, "
                         f"tile<i32> -> tile<{TILE}x{e}>, token")
    types = f"tile<{TILE}x{t}>" + (f", tile<{TILE}x{yt}>" if op == "fpowi" else "")
    operands = "%x, %y" if op in BINARY else "%x"
    lines += [f"%r = {op} {operands} {attrs + ' ' if attrs else ''}: {types}",
              f"%s = store_view_tko weak %r, %opv[%bx] token = %tok : tile<{TILE}x{t}>, {view(t)[1]}, "
              "tile<i32> -> token"]
    params = ", ".join([f"%xp: tile<ptr<{t}>>"] + ([f"%yp: tile<ptr<{yt}>>"] if op in BINARY else [])
                       + [f"%op: tile<ptr<{t}>>", "%n: tile<i32>"])
    body = "\n    ".join(lines)
    return f"""cuda_tile.module @kernels {{
  entry @k({params}) {{
    %tok = make_token : token
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    {body}
    return
  }}
}}
"""


#: (op, type, attributes): every math op Tile IR has, on every type, with its flags
OPS = [(op, t, "") for op in ("exp", "exp2", "log", "log2", "sin", "cos", "tan", "sinh", "cosh", "tanh",
                              "fpowf", "fpowi", "atan2", "remf", "rsqrt", "sqrt")
       for t in ("f32", "f64", "f16", "bf16")]
OPS += [("exp2", "f32", "flush_to_zero"), ("rsqrt", "f32", "flush_to_zero"), ("sqrt", "f32", "flush_to_zero"),
        ("exp", "f32", "rounding<approx>"), ("tanh", "f32", "rounding<approx>")]
OP_IDS = [f"{op}-{t}{'-' + a.split('<')[-1].rstrip('>') if a else ''}" for op, t, a in OPS]

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, 1e-40, -1e-40, 1e-310, 6e-8, 1e30, -1e30,
           1e300, np.pi, 1e5, -1e5, 88.7, 89.0, -103.0, 710.0, 1e-7, 65504.0, 1e4, 105414.0, 3.4e38]


def inputs(t: str, rng: np.random.Generator, n: int = N) -> np.ndarray:
    """Special values first (+-0, +-inf, NaN, subnormals, huge), then normal-ish, wide and
    exponentially spread random values."""
    q = n // 4
    with np.errstate(all="ignore"):
        spread = np.exp(rng.uniform(-90, 90, q)) * rng.choice([-1.0, 1.0], q)
        values = np.concatenate([SPECIAL, rng.standard_normal(2 * q) * 4, rng.standard_normal(q) * 100,
                                 spread])
        return values[:n].astype(DTYPES[t])


def arguments(op: str, t: str, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    args = [inputs(t, rng)]
    if op == "fpowi":
        args.append(rng.integers(-9, 10, N).astype(np.int32))
    elif op in BINARY:
        args.append(np.roll(inputs(t, rng), 7))
    return args + [np.zeros(N, DTYPES[t]), np.int32(N)]


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place of a's type (0 between +0 and -0; NaN to NaN is 0,
    NaN to a number the largest integer)."""
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[a.itemsize]
    wide = np.int64 if a.itemsize < 8 else object

    def ordered(x: np.ndarray) -> np.ndarray:
        i = x.view(bits).astype(wide)
        return np.where(i < 0, -(i & ~np.iinfo(bits).min), i)
    d = np.abs(ordered(a) - ordered(b))
    na, nb = np.isnan(a.astype(np.float64)), np.isnan(b.astype(np.float64))
    d = np.where(na & nb, 0, np.where(na | nb, np.iinfo(np.int64).max, d))
    return d.astype(np.float64)


def nvidia_ptx(tmp_path, real_tileiras: str, text: str, gpu: str = "sm_90") -> str:
    src = tmp_path / "k.tileir"
    src.write_bytes(bytecode(text))
    subprocess.run([real_tileiras, f"--gpu-name={gpu}", "--lineinfo", str(src), "-o",
                    str(tmp_path / "k.cubin")], check=True, capture_output=True, timeout=300)
    return ptx_from_cubin((tmp_path / "k.cubin").read_bytes())


def run(ptx: str, args: list, who: str = "compiled") -> np.ndarray:
    return diffcheck.run_ptx(ptx, "k", (N // TILE, 1, 1), args, who).arrays[-1]


def ours(text: str, gpu: str = "sm_90") -> str:
    return diffcheck.compile_ptx(parse_module(text, "k.mlir"), gpu)


def float_instructions(ptx: str) -> list[str]:
    """The opcodes of the floating-point instructions (the math; addressing is integer)."""
    lines = [ln.strip() for ln in ptx.splitlines()]
    ops = [ln.split()[0] for ln in lines if ln and not ln.startswith(("//", ".", "$"))]
    return [o for o in ops if re.search(r"\.(f16|bf16|f32|f64)$", o)]


# -- the library -------------------------------------------------------------------------------
def test_only_the_functions_called_are_copied():
    text = libdevice.library_text(libdevice.load(), ["__nv_expf"], 90, "nvptx64-nvidia-cuda", "e")
    assert text.count("\ndefine ") == 1 and "define float @__nv_expf(float %a)" in text
    assert "__nvvm_reflect" not in text and "add i32 0, 0" in text      # __CUDA_FTZ is 0


def test_the_split_library_is_cached_for_the_next_process(tmp_path, monkeypatch):
    """A cold compile must not pay LLVM's 160 ms bitcode parse each time: the second load
    reads the cache (no parse), a corrupt cache is parsed again and rewritten."""
    from llvmlite import binding as llvm

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    libdevice.load.cache_clear()
    try:
        first = libdevice.load()
        (cache,) = (tmp_path / "tileiras").iterdir()
        parse = llvm.parse_bitcode

        def no_parse(data):
            raise AssertionError("libdevice parsed although it was cached")

        monkeypatch.setattr(llvm, "parse_bitcode", no_parse)
        libdevice.load.cache_clear()
        assert libdevice.load() == first
        cache.write_bytes(b"\x00garbage")
        monkeypatch.setattr(llvm, "parse_bitcode", parse)
        libdevice.load.cache_clear()
        assert libdevice.load() == first
        assert cache.stat().st_size > 1_000_000 and [p.name for p in cache.parent.iterdir()] == [cache.name]
    finally:
        libdevice.load.cache_clear()


def test_reflect_is_settled_per_call():
    lib = libdevice.load()
    ftz, _ = libdevice.specialize(lib, "__nv_expf", True, 90)
    assert "@__nv_expf.ftz(" in ftz and "add i32 0, 1" in ftz and "add i32 0, 0" not in ftz
    arch, _ = libdevice.specialize(lib, "__nv_fast_tanhf", False, 80)   # tanh.approx from sm_75 on
    assert "add i32 0, 800" in arch


def test_exp2_is_one_instruction():
    """exp2 is ex2.approx.f32 (libdevice's __nv_exp2f), .ftz under flush_to_zero, as NVIDIA's."""
    assert float_instructions(ours(kernel("exp2", "f32", "flush_to_zero"))) == ["ex2.approx.ftz.f32"]
    assert float_instructions(ours(kernel("exp2", "f32"))) == ["ex2.approx.f32"]
    assert float_instructions(ours(kernel("exp2", "bf16"))) == ["cvt.f32.bf16", "ex2.approx.f32",
                                                                "cvt.rn.bf16.f32"]


def test_functions_are_inlined():
    ptx = ours(kernel("sin", "f32"))
    assert ".func" not in ptx and "call" not in ptx
    assert "st.local.b32" in ptx        # Payne-Hanek for huge arguments, in local memory as NVIDIA's


def test_trig_reduction_multiplies_wide_as_nvidia():
    """The f32 trig functions' Payne-Hanek loop: libdevice's mad.lo.cc/madc.hi asm pair is
    plain IR, a 64-bit product as in NVIDIA's PTX (mad.wide.u32 there, mul.wide.u32 and an add
    here; the bits: test_same_bits_as_nvidia, huge arguments included)."""
    text, _ = libdevice.specialize(libdevice.load(), "__nv_sinf", False, 90)
    assert "mad.lo.cc" not in text and "mul nuw i64" in text
    ptx = ours(kernel("sin", "f32"))
    assert re.search(r"\bm(ul|ad)\.wide\.u32", ptx) and "madc" not in ptx and "mad.lo.cc" not in ptx


# -- the same bits as NVIDIA's ----------------------------------------------------------------
@pytest.mark.parametrize("op, t, attrs", OPS, ids=OP_IDS)
def test_same_bits_as_nvidia(op, t, attrs, real_tileiras, tmp_path):
    text = kernel(op, t, attrs)
    args = arguments(op, t)
    mine = run(ours(text), args)
    theirs = run(nvidia_ptx(tmp_path, real_tileiras, text), args, "NVIDIA's")
    distance = ulps(mine, theirs)
    assert (distance == 0).mean() >= 0.999, f"{(distance != 0).sum()} of {N} differ"
    assert distance.max() <= 1, f"x={args[0][distance.argmax()]!r}: {mine[distance.argmax()]!r} vs " \
                                f"{theirs[distance.argmax()]!r}"
    finite = np.isfinite(mine.astype(np.float64))
    assert finite.sum() > N // 4 and len(np.unique(mine[finite])) > N // 8  # real values, not a constant


# -- CUDA's documented accuracy ---------------------------------------------------------------
#: maximum ulp errors, CUDA C Programming Guide, Mathematical Functions (f32 and f64, no
#: -use_fast_math); 0 for correctly rounded; f16/bf16 results are the f32 function rounded
#: once more: 1 ulp.  ex2.approx (exp2) and rsqrt.approx are CUDA's exp2f and rsqrtf (2 ulp).
CUDA_ULPS = {
    "f32": {"exp": 2, "exp2": 2, "log": 1, "log2": 1, "sin": 2, "cos": 2, "tan": 4, "sinh": 3, "cosh": 2,
            "tanh": 2, "fpowf": 4, "atan2": 3, "remf": 0, "rsqrt": 2, "sqrt": 0},
    "f64": {"exp": 1, "exp2": 1, "log": 1, "log2": 1, "sin": 2, "cos": 2, "tan": 2, "sinh": 2, "cosh": 1,
            "tanh": 1, "fpowf": 2, "atan2": 2, "remf": 0, "rsqrt": 1, "sqrt": 0},
}


def bound(op: str, t: str) -> int:
    return 1 if t in ("f16", "bf16") else CUDA_ULPS[t][op]


ACCURACY = [(op, t, a) for op, t, a in OPS if not a and op != "fpowi"] + [("exp2", "f32", "flush_to_zero")]


@pytest.mark.parametrize("op, t, attrs", ACCURACY,
                         ids=[f"{o}-{t}{'-ftz' if a else ''}" for o, t, a in ACCURACY])
def test_within_cuda_ulp_bounds(op, t, attrs):
    """Our PTX in the emulator against the interpreter's exactly rounded math."""
    module = parse_module(kernel(op, t, attrs), "k.mlir")
    args = arguments(op, t)
    expected = diffcheck.run_interpreter(module, "k", (N // TILE, 1, 1), args).arrays[-1]
    got = run(ours(kernel(op, t, attrs)), args)
    distance = ulps(got, expected)
    if attrs == "flush_to_zero":  # subnormal results are flushed to zero
        distance[np.abs(expected.astype(np.float64)) < np.finfo(np.float32).tiny] = 0
    worst = int(distance.argmax())
    assert distance.max() <= bound(op, t), (f"{distance.max()} ulp at x={args[0][worst]!r}"
                                            f"{f', y={args[1][worst]!r}' if op in BINARY else ''}: "
                                            f"{got[worst]!r}, exact {expected[worst]!r}")


# -- the project's math kernels (cuTile) ----------------------------------------------------
MATH_KERNELS = ["math_funcs", "math_atan2", "math_f64", "activations", "float_arith", "softmax_rows"]


@pytest.mark.parametrize("name", MATH_KERNELS)
def test_math_kernels_same_bits_as_nvidia(name, real_tileiras, tmp_path):
    """test/kernels' math kernels, exported by cuTile: our PTX and NVIDIA's in the emulator, on
    random inputs with the special values written over their first elements."""
    pytest.importorskip("cuda.tile")
    from differential import Case, export, make_inputs, run_compiled, run_real_ptx
    from kernels import ALL_CASES

    from tileiras.reader import read_bytecode

    case = next(c for c in ALL_CASES if c.name == name)
    data = export(case, arch="sm_90")
    arrays = make_inputs(case.params[0], np.random.default_rng(3), 512 if name != "softmax_rows" else 64)
    for a in arrays:
        if isinstance(a, np.ndarray) and (a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16):
            with np.errstate(all="ignore"):
                a.reshape(-1)[:len(SPECIAL)] = np.array(SPECIAL).astype(a.dtype)
    c = Case(data, read_bytecode(data).functions[0].name, arrays, (4, 4, 1))
    mine = run_compiled(c, "sm_90").arrays
    theirs = run_real_ptx(c, real_tileiras, str(tmp_path)).arrays
    for m, t in zip(mine, theirs):
        if m.dtype.kind in "iu":
            assert np.array_equal(m, t)
            continue
        distance = ulps(m.reshape(-1), t.reshape(-1))
        assert (distance == 0).mean() >= 0.999 and distance.max() <= 1, f"{(distance != 0).sum()} differ"
