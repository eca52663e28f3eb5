"""sm_90 GEMM epilogues through ``stmatrix`` (``tma.plan_matrix_stores``, ``emit_tma``): the
f32 accumulator, rounded to f16/bf16 in the wgmma accumulator layout, goes to the TMA
store's staging with ``stmatrix.sync.aligned.m8n8.x4`` (no scalar ``st.shared``), the
staging swizzled as TMA swizzles (boxes of one swizzle row: 128 bytes, 64 or 32 where the
tile's row is narrower), the tensor map's swizzle field the same; the stores are
conflict-free by the emulator's count and the emulated PTX agrees with the interpreter,
partial edge tiles (clipped by TMA) included.  ``stmatrix_form`` reads the form off the
layout algebra."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tileiras import diffcheck
from tileiras.emulate import launch
from tileiras.layout.core import LANE, REG, WARP, LinearLayout
from tileiras.layout.tensor_core import ldmatrix_layout, mma_c_layout, stmatrix_form, wgmma_accumulator
from tileiras.lower import tma
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.text.parser import parse_module


def epilogue_gemm(m: int, n: int, k: int, elem: str) -> str:
    """C[bx, by] = round(A[bx, :K] @ B[:K, by]) to ``elem``, f32 accumulators; the arrays
    aligned as cuTile exports ordinary tensors (16-byte bases, 16-element shapes and row
    strides), zero-padded partial tiles."""
    def view(name: str, rows: str, cols: str, tile: tuple[int, int]) -> list[str]:
        tv = f"tensor_view<?x?x{elem}, strides=[?,1]>"
        return [f"%{name}a = assume div_by<16>, %{name} : tile<ptr<{elem}>>",
                f"%{name}v = make_tensor_view %{name}a, shape = [{rows}, {cols}], strides = [{cols}, 1] "
                f": tile<i32> -> {tv}",
                f"%{name}p = make_partition_view %{name}v : "
                f"partition_view<tile=({tile[0]}x{tile[1]}), padding_value = zero, {tv}>"]

    def pv(tile: tuple[int, int]) -> str:
        return f"partition_view<tile=({tile[0]}x{tile[1]}), padding_value = zero, tensor_view<?x?x{elem}, strides=[?,1]>>"

    i32 = "tile<i32>"
    body = [f"%{d}d = assume div_by<16>, %{d} : {i32}" for d in "mnk"]
    body += view("a", "%md", "%kd", (m, k)) + view("b", "%kd", "%nd", (k, n)) + view("c", "%md", "%nd", (m, n))
    body += ["%tok = make_token : token", f"%c0 = constant <i32: 0> : {i32}",
             f"%bx, %by, %bz = get_tile_block_id : {i32}",
             f"%la, %t1 = load_view_tko weak %ap[%bx, %c0] token = %tok : {pv((m, k))}, {i32}, {i32} -> "
             f"tile<{m}x{k}x{elem}>, token",
             f"%lb, %t2 = load_view_tko weak %bp[%c0, %by] token = %tok : {pv((k, n))}, {i32}, {i32} -> "
             f"tile<{k}x{n}x{elem}>, token",
             f"%z = constant <f32: 0.0> : tile<{m}x{n}xf32>",
             f"%r = mmaf %la, %lb, %z : tile<{m}x{k}x{elem}>, tile<{k}x{n}x{elem}>, tile<{m}x{n}xf32>",
             f"%h = ftof %r : tile<{m}x{n}xf32> -> tile<{m}x{n}x{elem}>",
             f"%st = store_view_tko weak %h, %cp[%bx, %by] token = %tok : tile<{m}x{n}x{elem}>, {pv((m, n))}, "
             f"{i32}, {i32} -> token",
             "return"]
    args = ", ".join(f"%{x}: tile<ptr<{elem}>>" for x in "abc") + ", " + ", ".join(f"%{d}: {i32}" for d in "mnk")
    return ("cuda_tile.module @kernels {\n"
            f"  entry @k({args}) {{\n" + "".join(f"    {x}\n" for x in body) + "  }\n}\n")


#: (M, N, K, element): the corpus GEMMs' square tiles, and NVIDIA's 128x256 sm_90 tile
CASES = [(64, 64, 32, "f16"), (128, 128, 32, "f16"), (128, 128, 32, "bf16"), (128, 256, 32, "bf16")]
#: and a tile of 64-byte rows (the 64-byte swizzle)
NARROW = (64, 32, 32, "f16")


def compiled(m: int, n: int, k: int, elem: str):
    module = parse_module(epilogue_gemm(m, n, k, elem), "k.mlir")
    return module, run_stages(module, CompileOptions(gpu_name="sm_90"), "ptx")


def epilogue(ptx: str) -> str:
    """The PTX from the last wgmma wait to the end: the epilogue."""
    return ptx[ptx.rindex("wgmma.wait_group"):]


@pytest.mark.parametrize("m, n, k, elem", CASES)
def test_accumulator_goes_to_swizzled_staging_with_stmatrix_x4(m, n, k, elem):
    """One x4 per 4 matrices of a thread (M N / (128 threads... of the warpgroups) 8 x 4
    elements), no scalar shared store in the epilogue, one bulk store per 64-element
    (128-byte) box column, the map's swizzle 128-byte and its box 64 elements wide."""
    _, c = compiled(m, n, k, elem)
    tail = epilogue(c.ptx)
    threads = c.tas["k"].num_threads
    assert tail.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == m * n // (threads * 8)
    assert not re.search(r"\bst\.shared", tail)
    assert tail.index("stmatrix") < tail.index("fence.proxy.async") < tail.index("cp.async.bulk.tensor")
    assert tail.count("cp.async.bulk.tensor.2d.global.shared::cta") == n // 64
    (plan,) = [p for p in c.tas["k"].tma.values() if p.is_store]
    assert plan.swizzle == 128 and plan.box == (m, 64) and plan.matrix is not None
    (store_map,) = [s for s in c.kernels[0].tensor_maps if s.box == (64, m)]
    assert store_map.swizzle == tma.SWIZZLE_CODES[128]


@pytest.mark.parametrize("m, n, k, elem", CASES + [NARROW])
def test_epilogue_agrees_with_interpreter_and_stores_conflict_free(m, n, k, elem):
    """Interpreter vs emulated PTX (the race detector on: the fence before the bulk store
    is what orders the stmatrix writes), edge tiles partial (extents 16-divisible, not
    tile-divisible); the shared stores take their ideal wavefronts."""
    module, c = compiled(m, n, k, elem)
    (report,) = diffcheck.check_module(module, "sm_90", grid=(2, 2, 1), extent=m + 48)
    assert report.problem is None, report.problem
    fn = module.functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), m + 48)
    stores = launch(c.ptx, "k", (1, 1, 1), args, traffic=True,
                    host_object=diffcheck.host_object_for(module, "sm_90")).check().traffic.shared_stores
    assert stores.requests > 0 and stores.wavefronts == stores.ideal_wavefronts


def test_narrow_rows_take_the_narrower_swizzle():
    """A 64x32 16-bit tile's rows are 64 bytes: one box, 64-byte swizzle (map code 2),
    still stmatrix (x4: the accumulator's 4 column blocks of 8... two 8x8 blocks a warp
    along M, two along N)."""
    _, c = compiled(*NARROW)
    (plan,) = [p for p in c.tas["k"].tma.values() if p.is_store]
    assert (plan.swizzle, plan.box, plan.boxes) == (64, (64, 32), (1, 1)) and plan.matrix is not None
    assert any(s.box == (32, 64) and s.swizzle == tma.SWIZZLE_CODES[64] for s in c.kernels[0].tensor_maps)
    assert "stmatrix.sync.aligned.m8n8.x4" in epilogue(c.ptx)


def test_stmatrix_form_of_accumulators():
    """The wgmma accumulator: x4 over (8 rows, 8 columns) blocks, each lane addressing
    row l % 8 of matrix l / 8; the mma.sync m16n8 accumulator: x2; the transposed fragment:
    .trans; a batch of one: the 2-D form; a layout whose lanes are not the fragment
    (row-major lanes): none."""
    form = stmatrix_form(wgmma_accumulator(64))
    assert (form.count, form.trans) == (4, False)
    assert form.rows.bases(LANE) == ((1, 0), (2, 0), (4, 0), (8, 0), (0, 8))
    assert form.rows.bases(REG) == ((0, 16), (0, 32)) and form.rows.bases(WARP) == ((16, 0), (32, 0))
    assert (stmatrix_form(mma_c_layout()).count, stmatrix_form(mma_c_layout()).trans) == (2, False)
    trans = stmatrix_form(ldmatrix_layout(4, trans=True))
    assert (trans.count, trans.trans) == (4, True)
    assert trans.rows.bases(LANE) == ((1, 0), (2, 0), (4, 0), (8, 0), (16, 0))
    batched = stmatrix_form(wgmma_accumulator(64).expand_dim(0, 1))   # attention's 1 x 64 x 64 output
    assert batched.count == 4 and batched.rows == form.rows.expand_dim(0, 1)
    row_major = LinearLayout(((REG, ((0, 1),)), (LANE, tuple((0, 2 << i) for i in range(3)) + ((1, 0), (2, 0)))),
                             (4, 16))
    assert stmatrix_form(row_major) is None


def test_race_detector_wants_the_proxy_fence_before_the_bulk_store():
    """The bulk store reads the staging through the async proxy: without the
    ``fence.proxy.async`` after the stmatrix writes the emulator traps (kind ``race``),
    naming the stmatrix; with it the launch is clean.  (The operands' fence before the
    ``wgmma`` stays: without it the ``wgmma`` read traps first.)"""
    module, c = compiled(64, 64, 32, "f16")
    fn = module.functions[0]
    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), 64)
    host = diffcheck.host_object_for(module, "sm_90")
    assert launch(c.ptx, "k", (1, 1, 1), args, host_object=host).trap is None
    before, fence, after = c.ptx.rpartition("fence.proxy.async.shared::cta;")     # the epilogue's
    assert fence and "stmatrix" in before.rpartition("fence.proxy.async")[2]
    unfenced = before + after
    trap = launch(unfenced, "k", (1, 1, 1), args, host_object=host).trap
    assert trap is not None and trap.kind == "race"
    assert "stmatrix" in trap.message and "no fence.proxy.async" in trap.message


def test_the_decision_is_in_the_tileas_text():
    """``--emit=tileas`` shows the store's stmatrix form and reads it back unchanged."""
    from tileiras.lower.tileas_format import format_tileas
    from tileiras.lower.tileas_parse import parse_tileas

    _, c = compiled(128, 128, 32, "f16")
    text = format_tileas(c.tas["k"])
    assert "matrix = #tileas.stmatrix<count = 4, trans = false, rows = #L" in text
    back = parse_tileas(text, c.aa["k"])
    assert back.tma == c.tas["k"].tma and format_tileas(back) == text
