"""The TileAS verifier (``lower/tileas_verify``): each invariant, broken on purpose in a
real kernel's tables, is reported with the function, the op (its ``--emit=tileas`` walk
index) and what is wrong; the untouched tables pass; ``run_stages`` runs it after every
pass when ``CompileOptions.verify_each`` asks (conftest sets TILEIRAS_VERIFY_EACH=1, so
every compilation in the tests is verified)."""
from __future__ import annotations

import re

import pytest

from conftest import VERSIONS, TileIRStore
from tileiras.layout.core import WARP
from tileiras.lower import tileas as tileas_module
from tileiras.lower.tma_ring import RingPlan
from tileiras.lower.tileas_format import format_tileas
from tileiras.lower.tileas_verify import LAYOUTS, MEMORY, TileASVerifyError, verify_tileas
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.reader import read_bytecode
from tileiras.tile import ops_memory as MEM


def compiled(store: TileIRStore, kernel: str, arch: str = "sm_90"):
    """The kernel's compilation up to TileAS, and its first function's TileAS (and the
    second's, where it has one)."""
    file = store.get(f"{kernel}.{arch}.{VERSIONS[-1]}")
    c = run_stages(read_bytecode(file.read_bytes()), CompileOptions(gpu_name=arch), "tileas", only_needed=True)
    return c, list(c.tas.values())


def _with(rec, **changes):
    """A copy of the frozen record ``rec`` with ``changes``."""
    fields = {f.name: getattr(rec, f.name) for f in type(rec).__record_fields__}
    return type(rec)(**{**fields, **changes})


def fails(tas, arch: int, pattern: str, done=frozenset({LAYOUTS, MEMORY})) -> str:
    with pytest.raises(TileASVerifyError) as info:
        verify_tileas(tas, arch, done)
    message = str(info.value)
    assert re.search(pattern, message), message
    assert message.startswith(f"error: tileas @{tas.aa.function.name}: ") and "\n" not in message
    return message


def index(tas, op) -> int:
    return list(tas.aa.function.walk()).index(op)


def first(tas, cls):
    return next(op for op in tas.aa.live_ops() if isinstance(op, cls))


@pytest.fixture
def ring(tileir_store: TileIRStore):
    """On sm_90: the aligned gemm's TMA ring feeding wgmma (f16), and the aligned
    gemm_epilogue's TMA loads (its bf16 K loop is a cp.async ring: no TMA loads)."""
    return compiled(tileir_store, "gemm.aligned")[1][0], compiled(tileir_store, "gemm_epilogue.aligned")[1][0]


def test_real_kernels_pass(tileir_store: TileIRStore):
    for kernel, arch in (("gemm.aligned", "sm_90"), ("gemm", "sm_80"), ("layernorm.aligned", "sm_100"),
                         ("load_store_options.aligned", "sm_80"), ("batched_gemm.aligned", "sm_90")):
        c, tables = compiled(tileir_store, kernel, arch)
        for tas in tables:
            verify_tileas(tas, c.options.arch)


def test_layout_shape_must_be_the_types(ring):
    tas = ring[0]
    store = first(tas, MEM.StoreViewTkoOp)
    tile = store.tile
    other = next(lay for v, lay in tas.layouts.items() if lay.shape not in ((), tile.type.shape))
    tas.layouts[tile] = other
    fails(tas, 90, rf"@{index(tas, tile.owner)} ftof: value #0 has layout of shape \[\d+, \d+\], its type \[64, 64\]")


def test_layout_threads_must_be_the_ctas(ring):
    tas = ring[0]
    v, layout = next((v, lay) for v, lay in tas.layouts.items() if lay.shape)
    tas.layouts[v] = layout.with_bases(WARP, layout.bases(WARP)[:1])
    fails(tas, 90, r"layout spans 32 lanes and 2 warps, the CTA 32 and 4")


def test_every_tile_has_a_layout_once_assigned(ring):
    tas = ring[0]
    store = first(tas, MEM.StoreViewTkoOp)
    del tas.layouts[store.tile]
    fails(tas, 90, rf"@{index(tas, store.tile.owner)} ftof: result #0 \(tile<64x64xf16>\) has no layout")
    verify_tileas(tas, 90, frozenset())     # before assign-layouts: not yet complete


def test_a_conversion_needs_its_source_and_shape(ring):
    tas = ring[0]
    store = first(tas, MEM.StoreViewTkoOp)
    square = tas.layouts[store.tile]
    tas.converts[store, 0] = next(lay for lay in tas.layouts.values() if lay.shape not in ((), (64, 64)))
    fails(tas, 90, rf"@{index(tas, store)} store_view_tko: operand 0's conversion has layout of shape")
    tas.converts[store, 0] = square
    tas.recomputed[store, 1] = {}
    fails(tas, 90, r"operand 1 is in recomputed but not converted")
    del tas.recomputed[store, 1]
    del tas.layouts[store.tile]
    fails(tas, 90, r"operand 0 is converted but has no layout to convert from", frozenset())


def test_a_recomputed_conversion_ends_in_its_layout(tileir_store: TileIRStore):
    c, (tas, *_) = compiled(tileir_store, "layernorm", "sm_80")
    (op, i), way = next(iter(tas.recomputed.items()))
    way[op.operands[i]] = tas.layouts[op.operands[i]]
    fails(tas, 80, rf"@{index(tas, op)} {op.name}: operand {i} is recomputed into another layout than its "
                   "conversion's")


def test_buffers_are_aligned_for_their_users(ring):
    tas = ring[0]
    store, plan = next(iter(tas.tma.items()))
    tas.tma[store] = _with(plan, buffer=plan.buffer + 128)
    fails(tas, 90, rf"@{index(tas, store)} store_view_tko: buffer @t{index(tas, store)} at offset \d+ "
                   r"is not 1024-byte aligned")


def test_buffers_fit_the_allocation_and_its_alignment(ring):
    tas = ring[0]
    tas.smem_bytes -= 8
    fails(tas, 90, r"buffer @t\d+ ends at \d+, past the \d+ bytes allocated")
    verify_tileas(tas, 90, frozenset({LAYOUTS}))       # before allocate-shared-memory
    tas.smem_bytes += 8
    tas.smem_align = 128
    fails(tas, 90, r"buffer @s\d+ needs 1024-byte alignment, shared memory has 128")


def test_live_buffers_do_not_overlap(ring, tileir_store: TileIRStore):
    """TMA buffers live through the kernel: two cannot share bytes, nor one the ring's;
    scratch buffers live while their op runs, so layernorm's conversions all use offset 0."""
    f16, loads = ring
    (a, pa), (b, pb) = [(op, p) for op, p in loads.tma.items() if isinstance(op, MEM.LoadViewTkoOp)][:2]
    loads.tma[b] = _with(pb, buffer=pa.buffer)
    fails(loads, 90, rf"buffer @t{index(loads, b)} \[\d+, \d+\) overlaps @t{index(loads, a)} .* while both are live")
    store, plan = next(iter(f16.tma.items()))
    f16.tma[store] = _with(plan, buffer=0)
    fails(f16, 90, rf"buffer @t{index(f16, store)} \[0, 8192\) overlaps @s\d+ \[0, \d+\) while both are live")
    c, (norm, *_) = compiled(tileir_store, "layernorm", "sm_80")
    assert len(norm.scratch) >= 2 and "offset=0" in format_tileas(norm)
    verify_tileas(norm, 80)


def test_staging_lies_inside_its_scratch(tileir_store: TileIRStore):
    _, (tas, _) = compiled(tileir_store, "gemm")            # sm_90: wgmma staged in scratch
    mma = next(iter(tas.wgmma_staging))
    tas.scratch[mma] = tas.wgmma_staging[mma].b.base
    fails(tas, 90, rf"@{index(tas, mma)} mmaf: buffer @s{index(tas, mma)}\.b \[\d+, \d+\) is outside "
                   rf"@s{index(tas, mma)} \[0, \d+\)")


def test_rings_have_stages_and_barriers(ring):
    tas = ring[0]
    loop, plan = next((lp, p) for lp, p in tas.pipelines.items() if isinstance(p, RingPlan))
    tas.pipelines[loop] = _with(plan, stages=0)
    fails(tas, 90, rf"@{index(tas, loop)} for: a ring of 0 stages")
    tas.pipelines[loop] = plan
    tas.scratch[plan.mma] = plan.ring_bytes        # no room for the "full" mbarriers
    fails(tas, 90, rf"@{index(tas, plan.mma)} mmaf: the ring needs {plan.smem_bytes} bytes")


def test_tma_loads_have_an_mbarrier(ring):
    tas = ring[1]
    load, plan = next((op, p) for op, p in tas.tma.items() if isinstance(op, MEM.LoadViewTkoOp))
    tas.tma[load] = _with(plan, barrier=None)
    fails(tas, 90, rf"@{index(tas, load)} load_view_tko: a TMA load without an mbarrier")


def test_vector_widths_divide_the_facts_and_the_run(ring):
    tas = ring[0]
    load = next(op for op, v in tas.vectors.items() if v < tas.access_allowed[op])
    tas.vectors[load] = 3
    fails(tas, 90, rf"@{index(tas, load)} load_view_tko: vector width 3 does not divide the 8 elements")
    tas.vectors[load] = 16
    fails(tas, 90, r"vector width 16 does not divide the 8 elements the facts allow")
    tas.vectors[load] = 8
    fails(tas, 90, r"vector width 8 does not divide the run of 4 elements a thread holds")


def test_mma_forms_exist_on_the_arch(ring):
    tas = ring[0]
    mma, form = next(iter(tas.tensor_cores.items()))
    at = rf"@{index(tas, mma)} mmaf: "
    fails(tas, 80, at + r"\S+: no wgmma form on sm_80")
    tas.tensor_cores[mma] = _with(form, k=8)
    fails(tas, 90, at + r"mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.f16\.f16\.f32: no m16 k8 form of 16-bit")
    tas.tensor_cores[mma] = _with(form, types="f32.e4m3.e4m3.f32", k=32, bits=8, warpgroup=False)
    fails(tas, 80, r"e4m3 operands need sm_89")
    tas.tensor_cores[mma] = _with(form, types="f32.e4m3.e4m3.f32.ue8m0", k=32, bits=8, warpgroup=False,
                                  kind="mxf8f6f4")
    fails(tas, 90, r"block-scaled forms need sm_120")
    tas.tensor_cores[mma] = form
    del tas.wgmma_staging[mma]
    fails(tas, 90, at + r"a wgmma or tcgen05 multiply without a shared-memory staging")
    tas.tensor_cores[mma] = _with(form, warpgroup=False, tcgen05=True)
    fails(tas, 90, at + r"\S+: no tcgen05 form on sm_90")


def test_mma_forms_fit_the_shape(tileir_store: TileIRStore):
    tas = compiled(tileir_store, "gemm.aligned")[1][1]          # bf16 32x32: mma.sync
    mma, form = next(iter(tas.tensor_cores.items()))
    tas.tensor_cores[mma] = _with(form, warpgroup=True)
    fails(tas, 90, r"wgmma needs 64-row blocks over whole warpgroups \(M=32, 4 warps\)")
    tas.tensor_cores[mma] = _with(form, k=32)
    fails(tas, 90, r"no m16 k32 form of 16-bit operands")
    tas.tensor_cores[mma] = _with(form, m=8)
    fails(tas, 90, r"no m8 k16 form of 16-bit operands")


def test_run_stages_verifies_after_each_pass(tileir_store: TileIRStore, monkeypatch: pytest.MonkeyPatch):
    """A pass that breaks an invariant is caught right after it, named."""
    real = tileas_module.vector_widths

    def broken(tas):
        real(tas)
        op = next(iter(tas.vectors))
        tas.vectors[op] = 3

    monkeypatch.setattr(tileas_module, "vector_widths", broken)
    file = tileir_store.get(f"gemm.aligned.sm_80.{VERSIONS[-1]}")
    module = read_bytecode(file.read_bytes())
    with pytest.raises(TileASVerifyError, match=r"vector width 3 does not divide .* \(after pass vector-widths\)"):
        run_stages(module, CompileOptions(gpu_name="sm_80", verify_each=True), "tileas")
    c = run_stages(read_bytecode(file.read_bytes()), CompileOptions(gpu_name="sm_80", verify_each=False), "tileas")
    assert 3 in next(iter(c.tas.values())).vectors.values()    # unverified, it goes through


def test_the_tests_verify_every_compilation():
    assert CompileOptions(gpu_name="sm_90").verify_each


def test_an_op_emitted_before_what_it_reads(tileir_store: TileIRStore):
    """order-ops (``lower/emission_order.py``) places each op after what it reads; moving a
    store ahead of the op that computes its tile is reported."""
    _, (tas, *_) = compiled(tileir_store, "float_arith", "sm_80")
    store = first(tas, MEM.StoreViewTkoOp)
    tile = store.operands[0].owner
    assert tas.emission[tile] < tas.emission[store]
    verify_tileas(tas, 80)
    tas.emission[store] = tas.emission[tile] - 1
    fails(tas, 80, rf"@{index(tas, store)} store_view_tko: is emitted before @{index(tas, tile)} ")


def test_a_deferred_op_nothing_reads_is_not_emitted():
    """A pure op whose value no emitted op reads gets no place: code generation skips it."""
    from tileiras.lower.emission_order import block_order
    from tileiras.lower.tileaa import analyze
    from tileiras.lower.tileas import TileAS
    from tileiras.text.parser import parse_module

    module = parse_module("""
cuda_tile.module @m {
  entry @k(%a: tile<ptr<f32>>) {
    %c = constant <f32: 2.0> : tile<f32>
    %unused = addf %c, %c : tile<f32>
    %v = addf %c, %c : tile<f32>
    %t = make_token : token
    %p = store_ptr_tko weak %a, %v token = %t : tile<ptr<f32>>, tile<f32> -> token
    return
  }
}""")
    fn = module.functions[0]
    tas = TileAS(analyze(fn), num_warps=4)
    names = [op.name.split(".")[-1] for op in block_order(tas, fn.entry_block)]
    assert "store_ptr_tko" in names and names.count("addf") == 1 and names.index("addf") < names.index("store_ptr_tko")


def test_nothing_else_uses_the_scratch_of_a_warp_specialized_persistent_ring(tileir_store: TileIRStore):
    """Its producer fills the next tile's stages while the consumers run the rest of the
    loop over tiles: an op there using the scratch region would race with it."""
    _, (tas,) = compiled(tileir_store, "persistent_gemm_f16.aligned")
    loop, plan = next((lp, p) for lp, p in tas.pipelines.items() if isinstance(p, RingPlan))
    assert plan.outer is not None
    verify_tileas(tas, 90, frozenset({LAYOUTS, MEMORY}))
    store = next(op for op in plan.outer.walk() if isinstance(op, MEM.StoreViewTkoOp))
    tas.scratch[store] = 512
    fails(tas, 90, rf"@{index(tas, store)} store_view_tko: uses the scratch region in the loop over tiles")


def test_a_tensor_core_multiply_holds_its_accumulator_as_fragments(tileir_store: TileIRStore):
    """``layout_rules._mma`` drops the form of a multiply whose accumulator arrives in another
    layout (it runs on CUDA cores), so a form kept beside such an accumulator is a broken
    invariant: codegen would multiply into registers laid out for another form."""
    tas = compiled(tileir_store, "gemm.aligned")[1][1]          # bf16 32x32: mma.sync
    mma, form = next(iter(tas.tensor_cores.items()))
    shape = tuple(mma.result.type.shape)
    tas.mma_layouts[shape] = tas.canonical_type(mma.lhs.type)
    fails(tas, 90, rf"@{index(tas, mma)} mmaf: \S+: the accumulator is not laid out as its fragments")
