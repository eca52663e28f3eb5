"""Load forwarding between constant-trip loops (lower/forwarding.py) on a two-pass layer norm.

The first loop sums x and x*x over a row's column tiles, the second loads x again at the
same tiles to normalize it.  NVIDIA's tool loads x once (aligned f32 n768 sm_80: 9 static
loads, 3 of x); forwarding keeps the first loop's tiles in registers and the second loop
loads only the weight and bias.  A store through x's view between the loops must make the
second loop load again; a loop whose kept tiles would pass the register budget is refused.
"""
from __future__ import annotations

import io
import re
import warnings

import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

from tileiras import diffcheck  # noqa: E402
from tileiras.codegen.ptxas import invoke_ptxas  # noqa: E402
from tileiras.emulate import launch  # noqa: E402
from tileiras.ir.core import Operation  # noqa: E402
from tileiras.lower.forwarding import KEEP_REGS, kept_loads  # noqa: E402
from tileiras.pipeline import CompileOptions, compile_module, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.remarks import Kind, collect  # noqa: E402
from tileiras.tile import ops_memory as MEM  # noqa: E402

from kernels._case import KernelCase, arr  # noqa: E402

ConstInt = ct.Constant[int]
ConstFloat = ct.Constant[float]
PAD = ct.PaddingMode.ZERO
F32 = ct.float32
TILE = 256


@ct.kernel
def layernorm_two_pass(X, W, B, Y, eps: ConstFloat, N: ConstInt):
    """The corpus's layernorm_fwd shape: statistics in one loop, normalization in another."""
    bid = ct.bid(0)
    s = ct.zeros((1, TILE), dtype=F32)
    q = ct.zeros((1, TILE), dtype=F32)
    for j in range(N // TILE):
        x = ct.load(X, index=(bid, j), shape=(1, TILE), padding_mode=PAD)
        s = s + x
        q = q + x * x
    mean = ct.sum(s) / N
    rstd = ct.rsqrt(ct.sum(q) / N - mean * mean + eps)
    for j in range(N // TILE):
        x = ct.load(X, index=(bid, j), shape=(1, TILE), padding_mode=PAD)
        w = ct.reshape(ct.load(W, index=(j,), shape=(TILE,)), (1, TILE))
        b = ct.reshape(ct.load(B, index=(j,), shape=(TILE,)), (1, TILE))
        ct.store(Y, index=(bid, j), tile=(x - mean) * rstd * w + b)


@ct.kernel
def layernorm_clobbered(X, W, B, Y, eps: ConstFloat, N: ConstInt):
    """As above, but the row's first tile of x is overwritten between the loops."""
    bid = ct.bid(0)
    s = ct.zeros((1, TILE), dtype=F32)
    for j in range(N // TILE):
        s = s + ct.load(X, index=(bid, j), shape=(1, TILE), padding_mode=PAD)
    mean = ct.sum(s) / N
    ct.store(X, index=(bid, 0), tile=ct.full((1, TILE), 2.0, dtype=F32))
    for j in range(N // TILE):
        x = ct.load(X, index=(bid, j), shape=(1, TILE), padding_mode=PAD)
        w = ct.reshape(ct.load(W, index=(j,), shape=(TILE,)), (1, TILE))
        b = ct.reshape(ct.load(B, index=(j,), shape=(TILE,)), (1, TILE))
        ct.store(Y, index=(bid, j), tile=(x - mean) * w + b + eps)


N = 768            # 3 tiles: 3 trips x 2 registers kept
N_OVER = 9 * TILE   # 9 trips x 2 registers: over the budget


def _aligned(case: KernelCase, arch: str = "sm_80"):
    from cuda.tile.compilation import export_kernel

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_kernel(case.kernel, case.signatures(aligned=True), buf, gpu_code=arch,
                      output_format="tileir_bytecode", bytecode_version="13.4")
    return read_bytecode(buf.getvalue())


def _params(n: int) -> list:
    return [[arr(F32, 2), arr(F32), arr(F32), arr(F32, 2), 1e-5, n]]


@pytest.fixture(scope="module")
def two_pass():
    return _aligned(KernelCase("layernorm_two_pass", layernorm_two_pass, _params(N)))


@pytest.fixture(scope="module")
def clobbered():
    return _aligned(KernelCase("layernorm_clobbered", layernorm_clobbered, _params(N)))


def _loads(ptx: str) -> int:
    """Global reads: loads, and copies to shared memory where a loop is streamed."""
    return len(re.findall(r"\bld\.global\b|\bcp\.async\.c[ag]\.shared\.global\b", ptx))


def _x_loads(module) -> list[Operation]:
    """The loads of x (the 2-d view), in program order."""
    return [op for fn in module.functions for op in fn.walk()
            if isinstance(op, MEM.LoadViewTkoOp) and op.results[0].type.rank == 2]


def _sectors(module, ptx: str) -> int:
    (fn,) = [f for f in module.functions if f.is_entry]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), 512)
    result = launch(ptx, fn.name, (2, 1, 1), args, traffic=True)
    return result.traffic.loads.sectors


def _without_forwarding(module, monkeypatch) -> str:
    """The plain code: not forwarded, nor streamed through cp.async (which a loop that is
    not forwarded would be: test_stream_pipeline.py), so its global loads can be counted."""
    import tileiras.lower.forwarding as forwarding
    import tileiras.lower.stream_pipeline as stream_pipeline

    with monkeypatch.context() as m:
        m.setattr(forwarding, "KEEP_REGS", 0)
        m.setattr(stream_pipeline, "STREAM_ARCHS", frozenset())
        return compile_module(module, CompileOptions(gpu_name="sm_80"), "ptx")


def test_second_loop_reads_x_from_registers(two_pass, monkeypatch):
    """3 loads of x, 3 of w and 3 of b, as NVIDIA's 9, against 12 without forwarding; the
    emulated loads move a fifth fewer sectors (x once instead of twice: 2 rows of 512
    elements, the rest zero padding, = 128 sectors less)."""
    ptx = compile_module(two_pass, CompileOptions(gpu_name="sm_80"), "ptx")
    before = _without_forwarding(two_pass, monkeypatch)
    assert _loads(before) == 12
    assert _loads(ptx) == 9
    assert (_sectors(two_pass, before), _sectors(two_pass, ptx)) == (640, 512)


def test_forwarding_is_recorded_in_tileas(two_pass):
    tas = _tileas(two_pass)
    first, second = _x_loads(two_pass)
    assert tas.forwarded[second].source is first
    assert tas.forwarded[second].trips == N // TILE
    assert kept_loads(tas, tas.forwarded[second].loop) == [first]


def _tileas(module):
    (tas,) = run_stages(module, CompileOptions(gpu_name="sm_80"), "tileas", only_needed=True).tas.values()
    return tas


def test_registers_stay_near_nvidia(two_pass):
    """ptxas -v: 32 registers, no spills (29 without forwarding; NVIDIA: 26)."""
    ptx = compile_module(two_pass, CompileOptions(gpu_name="sm_80"), "ptx")
    (kernel,) = invoke_ptxas(ptx, "sm_80", 3, verbose=True).stats.values()
    assert kernel.spill_stores == 0 and kernel.stack_frame == 0
    assert kernel.registers <= 36


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_forwarded_layer_norm_agrees_with_the_interpreter(arch):
    module = _aligned(KernelCase("layernorm_two_pass", layernorm_two_pass, _params(N)), arch)
    reports = diffcheck.check_module(module, arch, grid=(2, 1, 1), extent=N)
    assert [r.problem for r in reports] == [None]


def test_store_to_the_same_view_between_the_loops_prevents_forwarding(clobbered):
    """cuTile orders the store before the second loop's loads of x (their token): those
    load again, and the result is the interpreter's."""
    tas = _tileas(clobbered)
    first, second = _x_loads(clobbered)
    assert second not in tas.forwarded
    assert tas.forward_refused[second] == "'store_view_tko' is token-ordered between the loads"
    ptx = compile_module(clobbered, CompileOptions(gpu_name="sm_80"), "ptx")
    assert _loads(ptx) == 12
    reports = diffcheck.check_module(clobbered, "sm_80", grid=(2, 1, 1), extent=N)
    assert [r.problem for r in reports] == [None]


def test_the_register_budget_refuses_many_trips_with_a_remark():
    module = _aligned(KernelCase("layernorm_two_pass", layernorm_two_pass, _params(N_OVER)))
    tas = _tileas(module)
    first, second = _x_loads(module)
    assert second not in tas.forwarded and not tas.forwarded
    assert f"18 registers a thread (0 kept already), over the budget of {KEEP_REGS}" in tas.forward_refused[second]
    missed = [r for r in collect(module, "sm_80") if r.kind is Kind.MISSED
              and r.name == "RemarkLoadForwardingFailed"]
    assert len(missed) == 1 and "over the budget" in dict(missed[0].args)["Reason"]


def test_eight_trips_unroll_completely():
    """At the budget (8 trips x 2 registers) both loops are unrolled as the decision says
    (LLVM's own threshold would leave them loops): 8 loads each of x, w and b, no picks
    among the kept tiles left, and 48 registers, no spills (34 without forwarding)."""
    module = _aligned(KernelCase("layernorm_two_pass", layernorm_two_pass, _params(8 * TILE)))
    ptx = compile_module(module, CompileOptions(gpu_name="sm_80"), "ptx")
    assert _loads(ptx) == 24
    assert "selp" not in ptx
    (kernel,) = invoke_ptxas(ptx, "sm_80", 3, verbose=True).stats.values()
    assert kernel.spill_stores == 0 and kernel.registers <= 52


#: A kernel's head: x's 3 tiles (n elements) summed in a loop.
SUM_LOOP = """cuda_tile.module @kernels {
  entry @k(%xp: tile<ptr<f32>>, %n: tile<i32>, %op: tile<ptr<f32>>, %m: tile<i32>) {
    %tok = make_token : token
    %xv = make_tensor_view %xp, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %ov = make_tensor_view %op, shape = [%m], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %zero = constant <f32: 0.0> : tile<256xf32>
    %lb = constant <i32: 0> : tile<i32>
    %ub = constant <i32: 3> : tile<i32>
    %st = constant <i32: 1> : tile<i32>
    %sum = for %j in (%lb to %ub, step %st) : tile<i32> iter_values(%acc = %zero) -> (tile<256xf32>) {
      %xpv = make_partition_view %xv : partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>
      %t, %t1 = load_view_tko weak %xpv[%j] token = %tok : partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<256xf32>, token
      %a = addf %acc, %t : tile<256xf32>
      continue %a : tile<256xf32>
    }
"""
#: x's tiles summed in one loop, then each added to the sum and stored to o in another;
#: between them a store of ones to tile 0 of VIEW, on the kernel's first token (ordered
#: before no load).
#: The 256-element tile views of x and o.
PV = "partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>"


def add_sum_and_store(x_index: str, o_index: str, pad: str) -> str:
    """Tile ``x_index`` of x loaded again, the first loop's sum added, stored to tile
    ``o_index`` of o."""
    return (f"{pad}%xpv = make_partition_view %xv : {PV}\n"
            f"{pad}%t, %t1 = load_view_tko weak %xpv[{x_index}] token = %tok : {PV}, tile<i32> -> tile<256xf32>, token\n"
            f"{pad}%r = addf %t, %sum : tile<256xf32>\n"
            f"{pad}%opv = make_partition_view %ov : {PV}\n"
            f"{pad}%t2 = store_view_tko weak %r, %opv[{o_index}] token = %tok : tile<256xf32>, {PV}, tile<i32> -> token\n")


BETWEEN = SUM_LOOP + f"""    %ones = constant <f32: 1.0> : tile<256xf32>
    %wpv = make_partition_view VIEW : {PV}
    %w = store_view_tko weak %ones, %wpv[%lb] token = %tok : tile<256xf32>, {PV}, tile<i32> -> token
    for %j in (%lb to %ub, step %st) : tile<i32> {{
{add_sum_and_store("%j", "%j", "      ")}    }}
    return
  }}
}}
"""


@pytest.mark.parametrize("view, forwarded", [("%xv", False), ("%ov", True)])
def test_unordered_store_between_the_loops(view, forwarded):
    """A store through x's own view between the loops, even on a token that orders it
    before no load, keeps the second loop loading x (the interpreter reads in program
    order); a store to another tensor on such a token does not."""
    from tileiras.text.parser import parse_module

    module = parse_module(BETWEEN.replace("VIEW", view), "k.mlir")
    tas = _tileas(module)
    first, second = _x_loads_1d(module)
    assert (second in tas.forwarded) is forwarded
    if not forwarded:
        assert tas.forward_refused[second] == "'store_view_tko' stores through the same tensor view between the loads"
    ptx = compile_module(module, CompileOptions(gpu_name="sm_80"), "ptx")
    # 2 scalar loads a tile (no alignment facts); not forwarded, the second loop loads its 3
    # tiles again (unrolled, few known trips: stream_pipeline.UnrolledLoop)
    assert _loads(ptx) == (6 if forwarded else 12)
    reports = diffcheck.check_module(module, "sm_80", grid=(1, 1, 1), extent=768)
    assert [r.problem for r in reports] == [None]


def _x_loads_1d(module) -> list[Operation]:
    return [op for fn in module.functions for op in fn.walk() if isinstance(op, MEM.LoadViewTkoOp)]


def test_the_decisions_read_back_from_the_tileas_text(two_pass):
    """``--emit=tileas`` holds the forwarding on the second loop's load of x (and a
    refusal's reason on the clobbered kernel's): the text reads back to the same tables."""
    from tileiras.lower.tileas_format import format_tileas
    from tileiras.lower.tileas_parse import parse_tileas

    c = run_stages(two_pass, CompileOptions(gpu_name="sm_80"), "tileas", only_needed=True)
    ((name, tas),) = c.tas.items()
    text = format_tileas(tas)
    first, second = _x_loads(two_pass)
    assert text.count("forward = #tileas.forward<") == 1
    back = parse_tileas(text, c.aa[name])
    assert back.forwarded == tas.forwarded and format_tileas(back) == text
    clobbered = _aligned(KernelCase("layernorm_clobbered", layernorm_clobbered, _params(N)))
    c = run_stages(clobbered, CompileOptions(gpu_name="sm_80"), "tileas", only_needed=True)
    ((name, tas),) = c.tas.items()
    text = format_tileas(tas)
    assert 'forward_refused = "\'store_view_tko\' is token-ordered between the loads"' in text
    assert parse_tileas(text, c.aa[name]).forward_refused == tas.forward_refused


#: x's 3 tiles summed in a loop, then tile INDEX of x loaded again after it and stored to
#: o with the sum added.
AFTER = SUM_LOOP + f"""    %k = constant <i32: INDEX> : tile<i32>
{add_sum_and_store("%k", "%lb", "    ")}    return
  }}
}}
"""


@pytest.mark.parametrize("index, trip", [(2, 2), (0, 0), (3, None)])
def test_a_load_after_the_loop_reads_its_trip_from_registers(index, trip):
    """After the loop, tile 2 (or 0) of x is the loop's trip 2 (0): read from the registers
    it was loaded into (3 tiles x 2 scalar loads, none more); tile 3 was loaded by no trip."""
    from tileiras.text.parser import parse_module

    module = parse_module(AFTER.replace("INDEX", str(index)), "k.mlir")
    tas = _tileas(module)
    first, after = _x_loads_1d(module)
    plan = tas.forwarded.get(after)
    if trip is None:
        assert plan is None
    else:
        assert (plan.source, plan.trip, plan.consumer_loop) == (first, trip, None)
    ptx = compile_module(module, CompileOptions(gpu_name="sm_80"), "ptx")
    # kept in registers: 3 tiles of 2 loads; else the load after the loop adds its own 2
    assert _loads(ptx) == (6 if trip is not None else 8)
    reports = diffcheck.check_module(module, "sm_80", grid=(1, 1, 1), extent=1024)
    assert [r.problem for r in reports] == [None]


@ct.kernel
def layernorm_narrow(X, W, Y, N: ConstInt):
    """x, w and y in a narrow type, the statistics in f32."""
    bid = ct.bid(0)
    s = ct.zeros((1, TILE), dtype=F32)
    for j in range(N // TILE):
        s = s + ct.astype(ct.load(X, index=(bid, j), shape=(1, TILE), padding_mode=PAD), F32)
    mean = ct.sum(s) / N
    for j in range(N // TILE):
        x = ct.astype(ct.load(X, index=(bid, j), shape=(1, TILE), padding_mode=PAD), F32)
        w = ct.reshape(ct.astype(ct.load(W, index=(j,), shape=(TILE,)), F32), (1, TILE))
        ct.store(Y, index=(bid, j), tile=ct.astype((x - mean) * w, Y.dtype))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_narrow_and_wide_elements_forward(dtype):
    """f16, bf16 (a register an element) and f64 (two) tiles are kept too: 3 loads of x
    and 3 of w, and the interpreter's result."""
    dt = getattr(ct, dtype)
    module = _aligned(KernelCase("layernorm_narrow", layernorm_narrow, [[arr(dt, 2), arr(dt), arr(dt, 2), N]]))
    tas = _tileas(module)
    assert len(tas.forwarded) == 1
    assert _loads(compile_module(module, CompileOptions(gpu_name="sm_80"), "ptx")) == 6
    reports = diffcheck.check_module(module, "sm_80", grid=(2, 1, 1), extent=N)
    assert [r.problem for r in reports] == [None]
