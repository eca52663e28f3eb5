"""Code shape and register use of the math functions (tileiras.codegen.libm) in kernels.

ptxas schedules a basic block as a whole: math functions inlined into one straight-line block
get interleaved until all their temporaries are live at once.  Each libm function body runs in
a block of its own (behind its NaN test), sin/cos evaluate one polynomial (f64: coefficients
from a table, in 128-bit pairs as CUDA's), and powi is a loop.  The register bounds are
NVIDIA's tileiras on the same kernels + 10% (measured with ptxas 13.5: ew_transcendental f32
28 on sm_80, powi 16 on sm_90)."""
from __future__ import annotations

import pytest

from test_libm import _pow_of_int_kernel, has_backward_branch
from tileiras.codegen.ptxas import invoke_ptxas
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.text.parser import parse_module
from tileiras.tools import find_ptxas

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (nvidia-cuda-nvcc)")


def elementwise_kernel(ty: str, lines: list[str], tile: int = 128, inputs: tuple[str, ...] = ("x",)) -> str:
    """A kernel loading ``inputs`` (tiles of ``ty``; a name starting with "i" is i32), running
    ``lines`` (``{T}``: the tile type) and storing %r."""
    def tt(name: str) -> str:
        return "i32" if name.startswith("i") else ty
    params = [f"%p{nm}: tile<ptr<{tt(nm)}>>" for nm in inputs] + [f"%out: tile<ptr<{ty}>>", "%n: tile<i32>"]
    body = ["%tok = make_token : token", "%bx, %by, %bz = get_tile_block_id : tile<i32>"]
    for nm in inputs + ("out",):
        et = tt(nm) if nm != "out" else ty
        view = f"tensor_view<?x{et}, strides=[1]>"
        body += [f"%t{nm} = make_tensor_view %p{nm if nm != 'out' else 'out'}, shape = [%n], strides = [1] : tile<i32> -> {view}".replace("%pout", "%out"),
                 f"%v{nm} = make_partition_view %t{nm} : partition_view<tile=({tile}), {view}>"]
    for nm in inputs:
        pv = f"partition_view<tile=({tile}), tensor_view<?x{tt(nm)}, strides=[1]>>"
        body.append(f"%{nm}, %k{nm} = load_view_tko weak %v{nm}[%bx] token = %tok : {pv}, tile<i32> -> tile<{tile}x{tt(nm)}>, token")
    body += [line.format(T=f"tile<{tile}x{ty}>", E=ty, N=tile) for line in lines]
    pv = f"partition_view<tile=({tile}), tensor_view<?x{ty}, strides=[1]>>"
    body += [f"%d = store_view_tko weak %r, %vout[%bx] token = %tok : tile<{tile}x{ty}>, {pv}, tile<i32> -> token", "return"]
    return "entry @k(" + ", ".join(params) + ") {\n  " + "\n  ".join(body) + "\n}\n"


#: the math of cuTile's ew_transcendental sample: every unary function on one tile
TRANSCENDENTAL = [
    "%h = constant <{E}: 5.000000e-01> : tile<{N}x{E}>",
    "%c1 = constant <{E}: 1.000000e-01> : tile<{N}x{E}>",
    "%c2 = constant <{E}: 1.000000e-02> : tile<{N}x{E}>",
    "%ax = absf %x : {T}", "%x2 = addf %ax, %h : {T}",
    "%e = exp %x : {T}", "%e2 = exp2 %x : {T}", "%l = log %x2 : {T}", "%l2 = log2 %x2 : {T}",
    "%q = sqrt %x2 : {T}", "%rq = rsqrt %x2 : {T}", "%s = sin %x : {T}", "%c = cos %x : {T}",
    "%th = tanh %x : {T}", "%xt = mulf %x, %c1 : {T}", "%t = tan %xt : {T}",
    "%xh = mulf %x, %c2 : {T}", "%sh = sinh %xh : {T}", "%ch = cosh %xh : {T}",
    "%a1 = addf %e, %e2 : {T}", "%a2 = addf %a1, %l : {T}", "%a3 = addf %a2, %l2 : {T}",
    "%sc = mulf %s, %c : {T}", "%f = fma %q, %rq, %sc : {T}", "%a4 = addf %a3, %f : {T}",
    "%a5 = addf %th, %t : {T}", "%a6 = addf %a5, %sh : {T}", "%a7 = subf %a6, %ch : {T}",
    "%r = addf %a4, %a7 : {T}",
]

POWI = ["%three = constant <i32: 3> : tile<{N}xi32>", "%p = fpowi %x, %in : {T}, tile<{N}xi32>",
        "%p3 = fpowi %x, %three : {T}, tile<{N}xi32>", "%r = addf %p, %p3 : {T}"]


def ptx_of(text: str, arch: str) -> str:
    return compile_module(parse_module(text), CompileOptions(gpu_name=arch), "ptx")


def registers(text: str, arch: str) -> int:
    stats = invoke_ptxas(ptx_of(text, arch), arch, verbose=True).stats
    (k,) = stats.values()
    assert k.spill_stores == 0
    return k.registers


def test_f64_sin_and_cos_load_their_coefficients_in_128_bit_pairs():
    ptx = ptx_of(elementwise_kernel("f64", ["%s = sin %x : {T}", "%c = cos %x : {T}", "%r = mulf %s, %c : {T}"], tile=32), "sm_90")
    assert ptx.count("ld.global.nc.v2.b64") == 6        # 3 pairs each, as NVIDIA's
    assert "__tileiras_libm_sincos_coeffs[96]" in ptx


def test_each_math_function_runs_in_a_block_of_its_own():
    lines = ["%e = exp %x : {T}", "%l = log %y : {T}", "%r = addf %e, %l : {T}"]
    ptx = ptx_of(elementwise_kernel("f32", lines, inputs=("x", "y")), "sm_90")
    assert ptx.count("setp.nan.f32") >= 2


def test_powi_is_a_loop():
    ptx = ptx_of(elementwise_kernel("f32", POWI, inputs=("x", "in")), "sm_90")
    assert has_backward_branch(ptx) and "lg2" not in ptx and "div.rn" not in ptx


@needs_ptxas
def test_transcendental_registers_within_nvidia_plus_10_percent():
    assert registers(elementwise_kernel("f32", TRANSCENDENTAL), "sm_80") <= 30      # NVIDIA: 28


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
def test_powi_registers_within_nvidia_plus_10_percent(arch):
    assert registers(elementwise_kernel("f32", POWI, inputs=("x", "in")), arch) <= 16   # NVIDIA: 15-16


@needs_ptxas
def test_pow_of_an_integer_registers():
    assert registers(_pow_of_int_kernel(128), "sm_90") <= 17      # NVIDIA: 16 (+10%: 17.6)
