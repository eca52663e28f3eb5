"""``--emit=tileas`` text read back (``lower/tileas_parse``): print(parse(print(tas))) is
print(tas), and the parsed decision tables equal the compiler's, on every kernel the
golden-PTX tests pin (plain and aligned exports) and a few more tensor-core kernels
(batched, integer, fp8, tf32 and block-scaled multiplies, a cp.async ring on sm_80, a
TMA ring feeding wgmma on sm_90), on sm_80, sm_90 and sm_100; malformed text or text
that does not fit its function fails with one line located at its line and column."""
from __future__ import annotations

import pytest

from conftest import VERSIONS, TileIRStore
from test_golden_ptx import ALIGNED_GOLDEN_KERNELS, GOLDEN_KERNELS
from tileiras.lower.software_pipeline import PipelinePlan
from tileiras.lower.tma_ring import RING_BARRIER_BYTES, RingPlan
from tileiras.lower.tileas_format import format_tileas
from tileiras.lower.tileas_parse import TileASParseError, parse_tileas, parse_tileas_module
from tileiras.pipeline import CompileOptions, run_stages
from tileiras.reader import read_bytecode
from tileiras.text.parser import parse_module

ARCHS = ("sm_80", "sm_90", "sm_100")
#: tensor-core kernels beyond the golden ones: every mma form, rings, picks, byte pairs
MORE_KERNELS = ("batched_gemm", "int8_gemm", "fp8_gemm", "tf32_gemm", "gemm_epilogue", "mx_f4_gemm",
                "cat_extract", "f4_tiles_2d", "worker_warps", "loop_accumulate", "load_store_options",
                "broadcast_expand", "layernorm")
KERNELS = (*GOLDEN_KERNELS, *(f"{k}.aligned" for k in (*ALIGNED_GOLDEN_KERNELS, "batched_gemm", "tf32_gemm")),
           *MORE_KERNELS)
#: every table of a TileAS (all but the analysis it decorates and its caches)
TABLES = ("num_warps", "extra_warps", "layouts", "converts", "scratch", "chunked", "pairs", "picks",
          "pick_sources", "recomputed", "recompute_converts", "mma_shapes", "tensor_cores", "mma_layouts",
          "wgmma_staging", "access_allowed", "shape_access", "vectors", "tma", "tensor_maps", "tma_end",
          "pipelines", "pipelined", "index_slices", "smem_bytes", "smem_align")


def compiled(store: TileIRStore, kernel: str, arch: str):
    file = store.get(f"{kernel}.{arch}.{VERSIONS[-1]}")
    if file is None:
        return None
    return run_stages(read_bytecode(file.read_bytes()), CompileOptions(gpu_name=arch), "tileas", only_needed=True)


@pytest.fixture(scope="module")
def gemm_sm90(tileir_store: TileIRStore):
    """The aligned gemm on sm_90: a TMA ring feeding wgmma, a TMA store."""
    return compiled(tileir_store, "gemm.aligned", "sm_90")


@pytest.mark.parametrize("kernel", KERNELS)
def test_round_trip(kernel: str, tileir_store: TileIRStore):
    seen = 0
    for arch in ARCHS:
        c = compiled(tileir_store, kernel, arch)
        if c is None:      # cuTile refuses the combination (fp8 before sm_89...)
            continue
        for name, tas in c.tas.items():
            text = format_tileas(tas)
            back = parse_tileas(text, c.aa[name])
            assert [t for t in TABLES if getattr(back, t) != getattr(tas, t)] == [], (arch, name)
            assert format_tileas(back) == text
            seen += 1
    assert seen >= 1


def test_rings_and_tma_are_in_the_text(gemm_sm90):
    """The decisions the issue names, on the wgmma ring kernel: the ring's stages and
    barriers, its swizzled stagings, the TMA store's buffer and map, the wgmma form."""
    tas = next(t for t in gemm_sm90.tas.values() if any(isinstance(p, RingPlan) for p in t.pipelines.values()))
    text = format_tileas(tas)
    ring = next(p for p in tas.pipelines.values() if isinstance(p, RingPlan))
    assert f"ring offset=0 bytes={tas.scratch[ring.mma]} align=1024 stages={ring.stages}" in text
    assert f"barrier offset={ring.barriers} bytes={RING_BARRIER_BYTES * ring.stages} align=8" in text
    assert "staging offset=0 bytes=4096 align=1024" in text and "swizzle=128 layout=#L" in text
    assert "warpgroup = true" in text and "pipeline = #tileas.ring<" in text and "pipelined = @" in text
    assert "tma = #tileas.tma<map_index = 0, box = [64, 64]" in text and "#map0 = #tileas.tensor_map<" in text
    assert "tileas.buffer @t" in text and "tma offset=" in text


def test_cp_async_ring_on_sm80(tileir_store: TileIRStore):
    c = compiled(tileir_store, "gemm.aligned", "sm_80")
    texts = {name: format_tileas(t) for name, t in c.tas.items()}
    plans = [(n, p) for n, t in c.tas.items() for p in t.pipelines.values() if isinstance(p, PipelinePlan)]
    assert plans
    name, plan = plans[0]
    assert f"pipeline = #tileas.pipeline<loop = @" in texts[name]
    assert f"ring offset=0 bytes={c.tas[name].scratch[plan.mma]} align=16 stages={plan.stages}" in texts[name]


def test_a_module_reads_back_by_function(gemm_sm90):
    text = "".join(format_tileas(t) for t in gemm_sm90.tas.values())
    back = parse_tileas_module(text, gemm_sm90.aa)
    assert set(back) == set(gemm_sm90.tas)
    assert all(format_tileas(back[n]) == format_tileas(t) for n, t in gemm_sm90.tas.items())


def _broken(c, edit) -> str:
    """The error of reading the first function's text after ``edit`` (one line)."""
    name, tas = next(iter(c.tas.items()))
    with pytest.raises(TileASParseError) as info:
        parse_tileas(edit(format_tileas(tas)), c.aa[name])
    message = str(info.value)
    assert "\n" not in message
    return message


def _replace_line(text: str, needle: str, old: str, new: str) -> str:
    lines = text.split("\n")
    k = next(i for i, line in enumerate(lines) if needle in line)
    lines[k] = lines[k].replace(old, new, 1)
    return "\n".join(lines)


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.split("\n"), 1) if needle in line)


def test_errors_are_located(gemm_sm90):
    name, tas = next(iter(gemm_sm90.tas.items()))
    text = format_tileas(tas)
    store = _line_of(text, "store_view_tko(")
    # an unknown layout alias on a result
    msg = _broken(gemm_sm90, lambda t: _replace_line(t, "= ftof(", "#L1", "#L99"))
    assert msg.startswith(f"error: tileas:{_line_of(text, '= ftof(')}:") and "undefined layout #L99" in msg
    # the wrong op: lines follow the function's ops
    msg = _broken(gemm_sm90, lambda t: _replace_line(t, "= ftof(", "ftof(", "itof("))
    assert "expected op 'ftof' here" in msg
    # a record with a field it lacks
    msg = _broken(gemm_sm90, lambda t: _replace_line(t, "store_view_tko(", "box = [64, 64]", "boxx = [64, 64]"))
    assert msg.startswith(f"error: tileas:{store}:") and "'tma' has no field 'boxx'" in msg
    # a buffer line the tables do not place
    msg = _broken(gemm_sm90, lambda t: _replace_line(t, "tileas.buffer @t", "align=1024", "align=128"))
    assert "is not what the tables place" in msg
    # a missing closing brace, an unknown attribute, a header for another function
    assert "unexpected end of text" in _broken(gemm_sm90, lambda t: t.rstrip().rsplit("\n", 1)[0])
    msg = _broken(gemm_sm90, lambda t: _replace_line(t, "store_view_tko(", "vector = ", "width = "))
    assert "unknown attribute 'width' on store_view_tko" in msg
    assert "is not @" in _broken(gemm_sm90, lambda t: t.replace(f"@{name} ", "@other ", 1))


def test_a_conversion_must_convert_its_operand(tileir_store: TileIRStore):
    """A ``tileas.convert_layout`` line whose source layout is not its operand's."""
    for kernel, arch in (("layernorm", "sm_80"), ("row_reductions", "sm_80"), ("broadcast_expand", "sm_80")):
        c = compiled(tileir_store, kernel, arch)
        name, tas = next(((n, t) for n, t in c.tas.items() if t.converts), (None, None))
        if tas is not None:
            break
    assert tas is not None
    text = format_tileas(tas)
    line = next(k for k in text.split("\n") if "tileas.convert_layout(" in k)
    source = line.split(" : ")[1].split(" -> ")[0]
    other = next(a.split(" = ")[0].strip() for a in text.split("\n") if a.strip().startswith("#L")
                 and a.split(" = ")[0].strip() != source)
    bad = text.replace(line, line.replace(f" : {source} -> ", f" : {other} -> "), 1)
    with pytest.raises(TileASParseError, match=r"tileas:\d+:\d+: %cvt0's source layout is not %\S+'s"):
        parse_tileas(bad, c.aa[name])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_120"])
def test_attention_loops_read_back(arch):
    """Flash attention's loop: its K/V ring (cp.async on sm_80; TMA on sm_90, read by
    wgmma, and on sm_120, read by ldmatrix) prints as an attention record and reads back
    to the same tables."""
    from kernels.attention import flash_attention

    module = parse_module(flash_attention(), "k.mlir")
    tas = next(iter(run_stages(module, CompileOptions(gpu_name=arch), "tileas", only_needed=True).tas.values()))
    text = format_tileas(tas)
    kind = "attention" if arch == "sm_80" else "attention_ring"
    assert f"pipeline = #tileas.{kind}<" in text
    assert ("#tileas.attention_sync<" in text) == (arch == "sm_120")
    assert format_tileas(parse_tileas(text, tas.aa)) == text
