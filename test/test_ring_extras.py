"""K loops that do more than load two tiles and multiply them are pipelined when the rest
of their body touches no shared memory (``software_pipeline.extra_reason``).

DeepSeek-V3's fp8 GEMM with block scales (``kernels/workloads.fp8_block_scaled_gemm``)
multiplies each K tile into zeros and adds the product, scaled by its A rows' and its B
block's scales (two small tiles the loop loads), to the accumulator.  Before, no arch
pipelined it ("the loop body does more than load two tiles"); now the two operands go
through the ring (``cp.async`` on sm_80, TMA rings on sm_90 and later) and the scale loads
and the scaling stay in the body as they are: plain loads into registers and arithmetic,
which the ring's barriers and waits do not concern.  Ops that need shared memory (the
ring is the loop's scratch), hold regions, store or multiply again still refuse the ring,
with a sentence saying which op.

A LoRA linear layer (``kernels/workloads.lora_linear``) multiplies each x tile by W's and by
the adapter's A in one K loop: one ``cp.async`` ring copies all three, both multiplies
reading x's fragments from the stage (bf16 128x128x64, rank 16, against NVIDIA's tileiras
on the same inputs, ``bench/coalescing.py``: sm_80 executed instructions 1.55x -> 1.08x,
shared-memory wavefronts 22,656 -> 16,256, NVIDIA 18,048)."""
from __future__ import annotations

import re
import warnings

import ml_dtypes
import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

from _rings import lora_agrees, w8a8_agrees  # noqa: E402
from differential import export  # noqa: E402
from kernels._case import KernelCase, arr  # noqa: E402
from kernels.workloads import PAD, fp8_block_scaled_gemm, lora_linear, w8a8_block_fp8  # noqa: E402

from tileiras import diffcheck, interp  # noqa: E402
from tileiras.lower.k_loop_body import extra_reason  # noqa: E402
from tileiras.lower.software_pipeline import PipelinePlan  # noqa: E402
from tileiras.lower.tileas_format import format_tileas  # noqa: E402
from tileiras.lower.tileas_parse import parse_tileas  # noqa: E402
from tileiras.lower.tma_ring import RingPlan  # noqa: E402
from tileiras.pipeline import CompileOptions, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.tile import ops_memory as MEM  # noqa: E402

F32, BF16, FP8 = ct.float32, ct.bfloat16, ct.float8_e4m3fn
ConstInt = ct.Constant[int]


def _case(dtype) -> KernelCase:
    return KernelCase("block_scaled", fp8_block_scaled_gemm,
                      [[arr(dtype, 2), arr(dtype, 2), arr(F32, 2), arr(F32, 2), arr(BF16, 2), 64, 64, 64]])


def _module(case: KernelCase, arch: str, aligned: bool = True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_bytecode(export(case, arch=arch, aligned=aligned))


def _tas(module, arch: str):
    c = run_stages(module, CompileOptions(gpu_name=arch), "tileas", only_needed=True)
    ((name, tas),) = c.tas.items()
    return c, name, tas


#: (arch, operand type, plan kind): fp8 multiplies need sm_89 or later; sm_90's wgmma
#: reads an 8-bit B only K-major, so its consumers transpose B in the stage
#: (``RingPlan.b_landed``), as NVIDIA's tool does; sm_90 runs the bf16 form too
ARCHS = [("sm_80", BF16, PipelinePlan), ("sm_90", BF16, RingPlan), ("sm_90", FP8, RingPlan),
         ("sm_100", FP8, RingPlan), ("sm_120", FP8, RingPlan)]
IDS = [f"{a}-{'fp8' if t is FP8 else 'bf16'}" for a, t, _ in ARCHS]


@pytest.mark.parametrize("arch,dtype,kind", ARCHS, ids=IDS)
def test_the_scaled_k_loop_is_pipelined(arch: str, dtype, kind: type):
    c, name, tas = _tas(_module(_case(dtype), arch), arch)
    (plan,) = [p for p in tas.pipelines.values() if not isinstance(p, str)]
    assert type(plan) is kind
    assert [ld.results[0].type.shape for ld in plan.loads] == [(64, 64), (64, 64)]
    body = plan.loop.regions[0].blocks[0].ops
    scales = [op for op in body if isinstance(op, MEM.LoadViewTkoOp) and op not in plan.loads]
    assert [ld.results[0].type.shape for ld in scales] == [(64, 1), (1, 1)]
    assert not any(ld in tas.pipelined for ld in scales)       # plain loads in the body
    assert plan.mma.acc.is_block_argument is False              # a product of one K tile, scaled after
    if kind is RingPlan:
        assert plan.in_flight == 0 and plan.serial_reason       # the product is read in the trip
    text = format_tileas(tas)
    back = parse_tileas(text, c.aa[name])
    assert back.pipelines == tas.pipelines and format_tileas(back) == text


def _inputs(dtype, rng):
    """A 128 x 192 by 192 x 128 product in three K blocks; scale arrays padded to 16
    columns (the aligned signature's shapes), their first three used."""
    np_type = ml_dtypes.float8_e4m3fn if dtype is FP8 else ml_dtypes.bfloat16
    a = rng.uniform(-2, 2, (128, 192)).astype(np_type)
    b = rng.uniform(-2, 2, (192, 128)).astype(np_type)
    sa = rng.uniform(0.25, 2, (128, 16)).astype(np.float32)
    sb = rng.uniform(0.25, 2, (16, 16)).astype(np.float32)
    return a, b, sa, sb


@pytest.mark.parametrize("arch,dtype,kind", ARCHS, ids=IDS)
def test_the_interpreter_agrees(arch: str, dtype, kind: type):
    module = _module(_case(dtype), arch)
    fn = next(f for f in module.functions if f.is_entry)
    a, b, sa, sb = _inputs(dtype, np.random.default_rng(11))
    c = np.zeros((128, 128), ml_dtypes.bfloat16)
    args = interp.cutile_args(a, b, sa, sb, c)
    grid = (2, 2, 1)
    expected = diffcheck.run_interpreter(module, fn.name, grid, args)
    want = np.zeros((128, 128), np.float32)
    for k in range(3):
        part = a[:, 64 * k:64 * k + 64].astype(np.float32) @ b[64 * k:64 * k + 64].astype(np.float32)
        want += part * sa[:, k:k + 1] * np.repeat(np.repeat(sb[k:k + 1, :2], 64, axis=1), 1, axis=0)
    assert np.allclose(np.asarray(expected.arrays[4], np.float32), want, rtol=2e-2, atol=0.5)
    ptx, host = diffcheck.compile_with_host(module, arch)
    got = diffcheck.run_ptx(ptx, fn.name, grid, args, host_object=host)
    assert diffcheck.compare(expected, got) is None


@ct.kernel
def _reduced_in_loop(a, b, c, r, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """A K loop that also sums each product's rows: a reduction (a region, and shared
    memory across warps) beside the ring."""
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    rows = ct.zeros((BM, 1), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        part = ct.mma(ct.load(a, index=(i, k), shape=(BM, BK), padding_mode=PAD),
                      ct.load(b, index=(k, j), shape=(BK, BN), padding_mode=PAD), ct.zeros((BM, BN), dtype=ct.float32))
        acc = acc + part
        rows = rows + ct.sum(part, axis=1, keepdims=True)
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))
    ct.store(r, index=(i, j), tile=rows)


@ct.kernel
def _stored_in_loop(a, b, c, p, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    """A K loop that also stores each K tile's product."""
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        part = ct.mma(ct.load(a, index=(i, k), shape=(BM, BK), padding_mode=PAD),
                      ct.load(b, index=(k, j), shape=(BK, BN), padding_mode=PAD), ct.zeros((BM, BN), dtype=ct.float32))
        ct.store(p, index=(i, k * ct.num_blocks(1) + j), tile=ct.astype(part, p.dtype))
        acc = acc + part
    ct.store(c, index=(i, j), tile=ct.astype(acc, c.dtype))


@pytest.mark.parametrize("kernel,words", [(_reduced_in_loop, "holds a region"),
                                          (_stored_in_loop, "neither pure nor a weak load")],
                         ids=["reduction", "store"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_120"])
def test_a_body_that_could_disturb_the_ring_is_refused_with_the_op(kernel, words: str, arch: str):
    case = KernelCase("extra", kernel, [[arr(BF16, 2), arr(BF16, 2), arr(BF16, 2), arr(F32, 2), 64, 64, 64]])
    _, _, tas = _tas(_module(case, arch), arch)
    (decision,) = tas.pipelines.values()
    assert isinstance(decision, str) and words in decision, decision


def _lora(dtype=BF16) -> KernelCase:
    return KernelCase("lora", lora_linear, [[arr(dtype, 2)] * 5 + [64, 64, 64, 16]])


@pytest.mark.parametrize("arch", ["sm_80", "sm_120"])
def test_a_lora_loop_rings_both_multiplies_of_its_a(arch: str):
    """x @ W and x @ A in one K loop (``k_loop_body.second_multiply``): one ``cp.async``
    ring whose stages hold x's tile, W's and A's (``SecondB``, after W's on a 128-byte
    line, in its own swizzle); the second multiply reads x's fragments from the stage the
    first waited for, and needs no staging of its own."""
    c, name, tas = _tas(_module(_lora(), arch), arch)
    (plan,) = [p for p in tas.pipelines.values() if not isinstance(p, str)]
    assert type(plan) is PipelinePlan and plan.second is not None
    second = plan.second
    assert second.mma.lhs is plan.mma.lhs and second.load.results[0].type.shape == (64, 16)
    assert second.at % 128 == 0 and second.at >= plan.a_bytes + 64 * plan.b_pitch * 2
    assert plan.stage_bytes >= second.end and second.swizzle is not None
    assert all(tas.pipelined.get(op) is plan for op in (second.mma, second.load))
    assert second.mma not in tas.scratch
    text = format_tileas(tas)
    back = parse_tileas(text, c.aa[name])
    assert back.pipelines == tas.pipelines and format_tileas(back) == text


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_the_lora_ring_agrees_with_the_interpreter(arch: str):
    """K of 192 (three trips through a 2-stage ring), 2 x 2 output tiles: a ``cp.async``
    ring on sm_80 and sm_120, a TMA ring feeding ``wgmma`` on sm_90 and ``tcgen05`` on
    sm_100 (``test_ring_second``)."""
    lora_agrees(_module(_lora(), arch), arch, 192, 13, 0.25)


def test_an_extra_load_through_tma_is_refused():
    """A TMA load waits at CTA barriers, which a warp-specialized ring's producer warps
    never reach: beside a ring only plain loads stand (``extra_reason``)."""
    _, _, tas = _tas(_module(_case(FP8), "sm_120"), "sm_120")
    (plan,) = [p for p in tas.pipelines.values() if not isinstance(p, str)]
    scale = next(op for op in plan.loop.regions[0].blocks[0].ops
                 if isinstance(op, MEM.LoadViewTkoOp) and op not in plan.loads)
    assert extra_reason(tas, scale) is None
    tas.tma[scale] = None       # as if lower.tma had planned it
    assert "through TMA" in extra_reason(tas, scale)


@pytest.mark.parametrize("arch,words", [("sm_80", "does not run as the first's mma.sync"),
                                        ("sm_90", "copied only by mma.sync's cp.async ring")])
def test_a_second_multiply_off_tensor_cores_keeps_the_loop_as_it_is(arch: str, words: str):
    """Rank 4: x @ A has no tensor-core form (N of 4), so no ring may take x's tile away
    from it.  On sm_90 the ``wgmma`` copy ring took the first multiply alone and the
    second found no x tile to read (an internal compile error) until it refused."""
    case = KernelCase("lora4", lora_linear, [[arr(BF16, 2)] * 5 + [128, 128, 64, 4]])
    module = _module(case, arch)
    _, _, tas = _tas(module, arch)
    (decision,) = tas.pipelines.values()
    assert isinstance(decision, str) and words in decision, decision
    assert [r.problem for r in diffcheck.check_module(module, arch, grid=(1, 2, 1), extent=192)] == [None]


def _many_trips(arch: str, k: int = 640):
    """The fp8 GEMM on 2 x 2 output tiles with K of ``k`` (ten trips: more than the ring's
    stages, so stages are refilled); (module, entry, grid, args, the interpreter's outcome)."""
    module = _module(_case(FP8), arch)
    fn = next(f for f in module.functions if f.is_entry)
    rng = np.random.default_rng(5)
    a = rng.uniform(-2, 2, (128, k)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.uniform(-2, 2, (k, 128)).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.uniform(0.25, 2, (128, 16)).astype(np.float32)
    sb = rng.uniform(0.25, 2, (16, 16)).astype(np.float32)
    args = interp.cutile_args(a, b, sa, sb, np.zeros((128, 128), ml_dtypes.bfloat16))
    return module, fn.name, (2, 2, 1), args, diffcheck.run_interpreter(module, fn.name, (2, 2, 1), args)


def test_sm100_multiplies_each_k_tile_on_tcgen05_and_reads_the_product_back():
    """As NVIDIA's tileiras builds it: the fp8 operands by TMA (B K x N, read MN-major,
    ``tcgen05_ring_staging``), each K tile's product on ``tcgen05.mma`` from zeros into
    tensor memory, committed to the stage's "empty" mbarrier and the kernel's, read back
    by every warp and scaled in registers (``RingPlan.readback``), the next K tile's MMAs
    already running into a second buffer (``RingPlan.ahead``).  Before, ``mma.sync``
    read the stages with ``ldmatrix`` (executed instructions 2.02x NVIDIA's, now 1.05x;
    shared wavefronts 10,240, now 1,056, NVIDIA's 1,108)."""
    c, name, tas = _tas(_module(_case(FP8), "sm_100"), "sm_100")
    (plan,) = [p for p in tas.pipelines.values() if not isinstance(p, str)]
    assert isinstance(plan, RingPlan) and plan.tcgen05 and plan.readback and plan.ahead and not plan.sync
    text = format_tileas(tas)
    assert "readback = true" in text and parse_tileas(text, c.aa[name]).pipelines == tas.pipelines
    assert not plan.staging.b.k_major and plan.staging.a.k_major      # B as it lies: N contiguous
    assert tas.tmem_alloc >= 2 * 64                                   # two buffers of the 64 x 64 product
    ptx = diffcheck.compile_with_host(_module(_case(FP8), "sm_100"), "sm_100")[0]
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    mmas = [m.start() for m in re.finditer(r"tcgen05\.mma\.cta_group::1\.kind::f8f6f4", ptx)]
    assert len(mmas) == 4       # K of 64, two steps of 32: the first trip's before the loop, the next ones' in it
    loop = ptx[ptx.rindex("mbarrier.try_wait", 0, ptx.rindex("bar.sync", 0, mmas[2])):
               ptx.index("tcgen05.wait::ld", mmas[2])]
    # the MMAs of trip j waited for, every warp done with the other buffer (trip j - 1's
    # product), trip j + 1's MMAs and their two commits ("empty", the kernel's mbarrier:
    # the one waited for first), then every warp reads trip j's product
    assert loop.index("bar.sync") < loop.index("tcgen05.mma") < loop.index("tcgen05.commit") < loop.index("tcgen05.ld")
    assert loop.count("tcgen05.commit") == 2 and ptx.count("tcgen05.commit") == 4
    waited = re.search(r"try_wait\.parity\.shared::cta\.b64 %p, \[(%r\d+)\]", loop).group(1)
    assert re.findall(r"tcgen05\.commit[^\[]*\[(%r\d+)\]", loop)[1] == waited
    first = re.findall(r"setp\.ne\.b32 p, %r(\d+), 0; tcgen05\.mma", ptx)
    assert first[0] != first[1]                # the first K step from zeros, the second accumulating


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
@pytest.mark.parametrize("specialize", ["0", "1"])
def test_the_read_back_ring_agrees_over_many_trips(monkeypatch, specialize: str, arch: str):
    """sm_100: the product read back from tensor memory; sm_90: B transposed in each stage
    (the consumers' barrier a named one where the producer warps do not take part)."""
    monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", specialize)
    module, name, grid, args, expected = _many_trips(arch)
    ptx, host = diffcheck.compile_with_host(module, arch)
    assert ("setmaxnreg.dec" in ptx) is (specialize == "1")
    got = diffcheck.run_ptx(ptx, name, grid, args, host_object=host)
    assert diffcheck.compare(expected, got) is None


def test_without_the_barrier_before_the_mmas_the_product_is_overwritten_unread(monkeypatch):
    """The barrier before each iteration's MMAs is what keeps them from overwriting the
    previous product while a warp still reads it: planted away, the emulator reports the
    tensor-memory race."""
    from tileiras.codegen import emit_tcgen05

    monkeypatch.setattr(emit_tcgen05, "product_free", lambda em, threads: None)
    module, name, grid, args, _ = _many_trips("sm_100", 256)
    ptx, host = diffcheck.compile_with_host(module, "sm_100")
    with pytest.raises(AssertionError, match="tensor-memory race"):
        diffcheck.run_ptx(ptx, name, grid, args, host_object=host)


def _w8a8() -> KernelCase:
    return KernelCase("w8a8", w8a8_block_fp8, [[arr(FP8, 2), arr(FP8, 2), arr(F32, 2), arr(F32, 2), arr(BF16, 2),
                                                64, 64, 64]])


W8A8_ARCHS = [("sm_90", False, False), ("sm_100", True, False), ("sm_120", False, True)]


@pytest.mark.parametrize("arch,tcgen05,sync", W8A8_ARCHS, ids=[a for a, _, _ in W8A8_ARCHS])
def test_tilegyms_w8a8_loop_with_gathered_scales_is_a_ring(arch: str, tcgen05: bool, sync: bool):
    """TileGym's form of the fp8 GEMM (``kernels/workloads.w8a8_block_fp8``): B N x K
    transposed in the loop, the scales gathered, and ``assume`` ops (the gather indices'
    bounds) in the body.  ``assume`` has no memory effect, so it stands beside the ring as
    a pure op does; before, every arch refused the ring for it.  128x128x128 tiles against
    NVIDIA's tileiras on the same inputs: executed instructions sm_90 1.14x -> 0.93x,
    sm_100 2.31x -> 1.03x, sm_120 1.12x -> 0.82x; shared wavefronts sm_100 78,848 ->
    1,056 (NVIDIA's 1,076), sm_120 74,752 -> 6,144 (7,424)."""
    _, _, tas = _tas(_module(_w8a8(), arch), arch)
    (plan,) = [p for p in tas.pipelines.values() if not isinstance(p, str)]
    assert isinstance(plan, RingPlan) and plan.b_transposed
    assert (plan.tcgen05, plan.readback, plan.sync) == (tcgen05, tcgen05, sync)
    body = plan.loop.regions[0].blocks[0].ops
    assumes = [op for op in body if op.name == "assume"]
    assert assumes and all(extra_reason(tas, op) is None for op in assumes)
    gathers = [op for op in body if isinstance(op, MEM.LoadPtrTkoOp)]
    assert len(gathers) == 2 and not any(op in tas.pipelined for op in gathers)


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_tilegyms_w8a8_ring_agrees_over_many_trips(arch: str):
    """K of 640 (ten trips, stages refilled), 2 x 2 output tiles: the interpreter against a
    numpy reference, our PTX in the emulator against the interpreter."""
    w8a8_agrees(_module(_w8a8(), arch), arch, (128, 128, 640), 64, (2, 2, 1), 17)


def test_sm90_transposes_an_8_bit_b_in_the_stage_for_wgmma():
    """DeepSeek's form on sm_90: the fp8 B lies K x N, which ``wgmma`` cannot read (8-bit
    operands K-major only).  B's boxes land MN-major in the stage (``RingPlan.b_landed``,
    in the 128-byte swizzle of its rows); every consumer reads 16-byte runs of it, lanes
    along K, and writes them byte by byte where ``wgmma`` reads B K-major in the same
    stage, 32 lanes filling 32 consecutive bytes of one K-major row, so no store conflicts;
    a proxy fence and a barrier, then the multiply.  Before, the loop was not pipelined;
    now, 128x128x128 tiles against NVIDIA's tileiras on the same inputs: executed
    instructions 1.07x, shared wavefronts 6,144 (NVIDIA's 6,304)."""
    from tileiras.emulate import launch
    from tileiras.layout.shared import Swizzle

    module = _module(_case(FP8), "sm_90")
    c, name, tas = _tas(module, "sm_90")
    (plan,) = [p for p in tas.pipelines.values() if not isinstance(p, str)]
    text = format_tileas(tas)           # the landing and the transposing layout print and parse back
    assert "b_landed = #tileas.operand" in text and parse_tileas(text, c.aa[name]).pipelines == tas.pipelines
    landed, wanted = plan.b_landed, plan.staging.b
    assert landed is not None and not landed.k_major and wanted.k_major and wanted.elem_bytes == 1
    assert landed.swizzle is Swizzle.B64 and plan.box[1] == (64, 64)      # 64-byte rows of N
    assert landed.base >= wanted.base + wanted.nbytes and plan.stage_bytes >= landed.base + landed.nbytes
    assert plan.tx_bytes == 2 * 64 * 64             # A's and B's boxes; the transposed copy is no box
    fn = next(f for f in module.functions if f.is_entry)
    ptx, host = diffcheck.compile_with_host(module, "sm_90")
    loop = ptx[ptx.index("ld.shared.v4.b32"):ptx.index("wgmma.mma_async")]
    # 64 x 64 bytes over 128 threads: two 16-byte reads and 32 byte stores each
    assert loop.count("ld.shared.v4.b32") == 2 and loop.count("st.shared.b8") == 32
    assert loop.index("fence.proxy.async") < loop.rindex("bar.sync")
    result = launch(ptx, fn.name, (2, 2, 1), diffcheck.synthesize_args(fn, np.random.default_rng(3), 192),
                    traffic=True, host_object=host)
    result.check()
    assert result.traffic.shared_stores.conflicts == 0 and result.traffic.shared_loads.conflicts == 0


@pytest.mark.parametrize("specialize", ["0", "1"])
@pytest.mark.parametrize("form", ["w8a8", "deepseek"])
def test_sm90_products_issued_ahead_agree(monkeypatch, form: str, specialize: str):
    """``TILEIRAS_PRODUCT_AHEAD=1`` (off by default until a GPU measures it): each trip takes
    its product complete, releases its stage and issues the next trip's group, which runs
    while the body scales and adds and completes at the trip's end (``RingPlan.ahead``).
    The prologue's group must be complete before the first trip releases its stage: with
    it in flight the warp-specialized producer refilled the stage under it (the emulator
    caught that while this was written)."""
    monkeypatch.setenv("TILEIRAS_PRODUCT_AHEAD", "1")
    monkeypatch.setenv("TILEIRAS_WARP_SPECIALIZE", specialize)
    if form == "w8a8":
        module = _module(_w8a8(), "sm_90")
        (plan,) = [p for p in _tas(module, "sm_90")[2].pipelines.values() if not isinstance(p, str)]
        assert plan.ahead and not plan.tcgen05
        ptx = w8a8_agrees(module, "sm_90", (128, 128, 640), 64, (2, 2, 1), 19)
    else:
        module, name, grid, args, expected = _many_trips("sm_90")
        ptx, host = diffcheck.compile_with_host(module, "sm_90")
        assert diffcheck.compare(expected, diffcheck.run_ptx(ptx, name, grid, args, host_object=host)) is None
    loop = ptx[ptx.index("wgmma.wait_group.sync.aligned 0;"):]
    assert "wgmma.mma_async" in loop and "wgmma.wait_group.sync.aligned 0;" in loop[1:]
