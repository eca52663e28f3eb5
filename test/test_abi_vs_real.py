"""ABI equality with NVIDIA's tileiras on every test kernel (sm_80, sm_90, sm_100, sm_120).

For each kernel (exported by cuTile at the newest bytecode version), NVIDIA's tileiras builds
a cubin with ``--lineinfo`` (so ptxas keeps the PTX in ``.nv_debug_ptx_txt``) and our pipeline
emits PTX (``--emit=ptx``).  What a launcher or the driver sees must be identical:

* ``.version``, ``.target`` and the ``___NV_TILE_LAUNCH_META_DATA___`` declaration;
* per ``.entry``: the name, the ``.param`` list (types, state space, alignment, names) and
  the entry directives (``.reqntid``, ``.maxnreg``, ``.minnctapersm``, ``.reqnctapercluster``,
  ``.blocksareclusters``, ``.language``) in order;
* the block-id special registers read (``%clusterid``/``%nclusterid``/``%cluster_ctaid`` on
  sm_90+, ``%ctaid``/``%nctaid`` on sm_8x).

NVIDIA's PTX is cached under pytest's cache folder, keyed by bytecode, architecture and the
tool's identity, and produced in parallel on first use.  Skipped when the real tool is absent.
Known differences are listed in KNOWN_MISMATCHES and marked xfail with the reason.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from conftest import ARCHS, CASES, VERSIONS, TileIRStore
from tileiras.emulate.cubin import ptx_from_cubin
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.reader import read_bytecode

#: one worker runs them all: NVIDIA's PTX of every case (``real_ptx_cache``) is compiled once
pytestmark = [pytest.mark.skipif(not CASES, reason="cuda-tile is not installed"),
              pytest.mark.xdist_group("abi-vs-real")]

ARCHS_8X = ("sm_80",)
ARCHS_90UP = ("sm_90", "sm_100", "sm_120")

#: (aspect, kernel) -> (architectures, reason).  Aspects: "header", "entries", "block_ids".
KNOWN_MISMATCHES: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {}


# --------------------------------------------------------------------------- PTX reading

_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\((.*?)\)(.*?)\{", re.S)
_VERSION = re.compile(r"^\.version\s+(\S+)", re.M)
_TARGET = re.compile(r"^\.target\s+(.+?)\s*$", re.M)
_BLOCK_ID = re.compile(r"%(?:n?ctaid|n?clusterid|cluster_n?ctaid|cluster_n?ctarank)(?:\.[xyz])?\b")
META = "___NV_TILE_LAUNCH_META_DATA___"


def code_lines(ptx: str) -> str:
    """The PTX without comments and blank lines, each line's whitespace collapsed."""
    lines = (" ".join(line.split("//", 1)[0].split()) for line in ptx.splitlines())
    return "\n".join(line for line in lines if line)


@dataclass(frozen=True)
class EntryAbi:
    name: str
    params: tuple[str, ...]
    directives: tuple[str, ...]


@dataclass(frozen=True)
class PtxAbi:
    version: Optional[str]
    target: Optional[str]
    meta: tuple[str, ...]
    entries: tuple[EntryAbi, ...]
    block_ids: tuple[str, ...]

    @classmethod
    def parse(cls, ptx: str) -> "PtxAbi":
        text = code_lines(ptx)
        version, target = _VERSION.search(text), _TARGET.search(text)
        entries = tuple(
            EntryAbi(m.group(1),
                     tuple(p.strip() for p in m.group(2).split(",") if p.strip()),
                     tuple(d.strip() for d in m.group(3).splitlines() if d.strip()))
            for m in _ENTRY.finditer(text))
        return cls(version.group(1) if version else None, target.group(1) if target else None,
                   tuple(line for line in text.splitlines() if META in line and "[" in line),
                   entries, tuple(sorted(set(_BLOCK_ID.findall(text)))))


def test_parse_ptx_abi():
    ptx = """//
.version 9.5
.target sm_90a
.address_size 64
.visible .global .align 8 .b8 ___NV_TILE_LAUNCH_META_DATA___[64];
.visible .entry k(
\t.param .u64 .ptr .global .align 1 k_param_0,   // x
\t.param .u32 k_param_1
)
.reqntid 128
.minnctapersm 1
.language 7
{
\tmov.u32 \t%r1, %clusterid.x;  // %ctaid.y in a comment
\tmov.u32 \t%r2, %nclusterid.x;
\tmov.u32 \t%r3, %cluster_ctaid.x;
}
"""
    abi = PtxAbi.parse(ptx)
    assert (abi.version, abi.target) == ("9.5", "sm_90a")
    assert abi.meta == (".visible .global .align 8 .b8 ___NV_TILE_LAUNCH_META_DATA___[64];",)
    assert abi.entries == (EntryAbi("k", (".param .u64 .ptr .global .align 1 k_param_0", ".param .u32 k_param_1"),
                                    (".reqntid 128", ".minnctapersm 1", ".language 7")),)
    assert abi.block_ids == ("%cluster_ctaid.x", "%clusterid.x", "%nclusterid.x")


# --------------------------------------------------------------------------- NVIDIA's PTX

class RealPtxCache:
    """NVIDIA's PTX for (bytecode, arch), on disk, keyed by content and tool identity."""

    def __init__(self, tool: str, root: Path):
        self.tool = tool
        self.root = root
        st = os.stat(tool)
        self.tool_id = f"{tool}:{st.st_size}:{st.st_mtime_ns}"

    def path(self, data: bytes, arch: str) -> Path:
        key = hashlib.sha256(self.tool_id.encode() + b"\0" + arch.encode() + b"\0" + data).hexdigest()
        return self.root / f"{key[:32]}.ptx"

    def compile(self, data: bytes, arch: str) -> None:
        out = self.path(data, arch)
        if out.is_file():
            return
        with tempfile.TemporaryDirectory(prefix="tileiras-real-") as tmp:
            src, cubin = Path(tmp) / "k.tileir", Path(tmp) / "k.cubin"
            src.write_bytes(data)
            proc = subprocess.run([self.tool, str(src), "--gpu-name", arch, "--lineinfo", "-o", str(cubin)],
                                  capture_output=True, text=True, errors="replace", check=False)
            if proc.returncode != 0:
                text = f"FAILED rc={proc.returncode}\n{proc.stderr}"
            else:
                text = ptx_from_cubin(cubin.read_bytes()) or "FAILED: no .nv_debug_ptx_txt in the cubin\n"
        partial = out.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(text)
        partial.replace(out)

    def compile_all(self, jobs: list[tuple[bytes, str]]) -> None:
        missing = [j for j in jobs if not self.path(*j).is_file()]
        if missing:
            with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
                list(pool.map(lambda j: self.compile(*j), missing))

    def get(self, data: bytes, arch: str) -> str:
        self.compile(data, arch)
        return self.path(data, arch).read_text()


def combos() -> list:
    return [pytest.param(c.name, a, id=f"{c.name}.{a}") for c in CASES for a in ARCHS]


@pytest.fixture(scope="session")
def real_ptx_cache(real_tileiras: str, tileir_store: TileIRStore, request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> RealPtxCache:
    cache = getattr(request.config, "cache", None)
    root = cache.mkdir("real-tileiras-ptx") if cache is not None else tmp_path_factory.mktemp("real-ptx")
    store = RealPtxCache(real_tileiras, Path(root))
    jobs = []
    for case in CASES:
        for arch in ARCHS:
            file = tileir_store.get(f"{case.name}.{arch}.{VERSIONS[-1]}")
            if file is not None:
                jobs.append((file.read_bytes(), arch))
    store.compile_all(jobs)
    return store


@pytest.fixture(scope="session")
def abi_pairs() -> dict:
    return {}


def abi_pair(kernel: str, arch: str, store: TileIRStore, real: RealPtxCache,
             pairs: dict) -> tuple[PtxAbi, PtxAbi]:
    """(NVIDIA's ABI, ours) for one kernel and architecture."""
    if (kernel, arch) not in pairs:
        combo = f"{kernel}.{arch}.{VERSIONS[-1]}"
        file = store.get(combo)
        if file is None:
            pairs[kernel, arch] = f"cuTile refuses {combo}: {store.refusal(combo)}"
        else:
            data = file.read_bytes()
            theirs = real.get(data, arch)
            if theirs.startswith("FAILED"):
                pairs[kernel, arch] = f"NVIDIA's tileiras cannot compile {combo}: {theirs[:300]}"
            else:
                ours = compile_module(read_bytecode(data), CompileOptions(gpu_name=arch), "ptx")
                pairs[kernel, arch] = (PtxAbi.parse(theirs), PtxAbi.parse(ours))
    found = pairs[kernel, arch]
    if isinstance(found, str):
        pytest.skip(found)
    return found


def mark_known(request: pytest.FixtureRequest, aspect: str, kernel: str, arch: str) -> None:
    known = KNOWN_MISMATCHES.get((aspect, kernel))
    if known is not None and arch in known[0]:
        request.node.add_marker(pytest.mark.xfail(reason=known[1], strict=False))


# --------------------------------------------------------------------------- the checks

@pytest.mark.parametrize("kernel, arch", combos())
def test_header_matches_nvidia(kernel, arch, request, tileir_store, real_ptx_cache, abi_pairs):
    mark_known(request, "header", kernel, arch)
    theirs, ours = abi_pair(kernel, arch, tileir_store, real_ptx_cache, abi_pairs)
    assert (ours.version, ours.target) == (theirs.version, theirs.target)
    assert ours.meta == theirs.meta


@pytest.mark.parametrize("kernel, arch", combos())
def test_entries_match_nvidia(kernel, arch, request, tileir_store, real_ptx_cache, abi_pairs):
    mark_known(request, "entries", kernel, arch)
    theirs, ours = abi_pair(kernel, arch, tileir_store, real_ptx_cache, abi_pairs)
    assert [e.name for e in ours.entries] == [e.name for e in theirs.entries]
    for mine, real in zip(ours.entries, theirs.entries):
        assert mine.params == real.params, f"{real.name}: .param list"
        assert mine.directives == real.directives, f"{real.name}: entry directives"


@pytest.mark.parametrize("kernel, arch", combos())
def test_block_id_registers_match_nvidia(kernel, arch, request, tileir_store, real_ptx_cache, abi_pairs):
    mark_known(request, "block_ids", kernel, arch)
    theirs, ours = abi_pair(kernel, arch, tileir_store, real_ptx_cache, abi_pairs)
    foreign = ("%cluster", "%ncluster") if arch in ARCHS_8X else ("%ctaid",)
    assert not [r for r in ours.block_ids if r.startswith(foreign)], f"block-id registers on {arch}"
    assert ours.block_ids == theirs.block_ids


# --------------------------------------------------------------------------- mmaf CTA sizes

def mmaf_text(m: int, n: int, k: int, operand: str, acc: str) -> str:
    """Load A (m x k), B (k x n) and C, ``mmaf``, store C: one multiply of the given shape."""
    def view(e: str, r: int, c: int) -> str:
        return f"partition_view<tile=({r}x{c}), tensor_view<{r}x{c}x{e}, strides=[{c},1]>>"
    lines = ["entry @k(%a: tile<ptr<{0}>>, %b: tile<ptr<{0}>>, %c: tile<ptr<{1}>>) {{".format(operand, acc),
             "  %tok = make_token : token", "  %c0 = constant <i32: 0> : tile<i32>"]
    for name, e, r, c in (("a", operand, m, k), ("b", operand, k, n), ("c", acc, m, n)):
        lines += [f"  %t{name} = make_tensor_view %{name}, shape = [{r}, {c}], strides = [{c}, 1] : "
                  f"tensor_view<{r}x{c}x{e}, strides=[{c},1]>",
                  f"  %p{name} = make_partition_view %t{name} : {view(e, r, c)}",
                  f"  %x{name}, %l{name} = load_view_tko weak %p{name}[%c0, %c0] token = %tok : {view(e, r, c)}, "
                  f"tile<i32> -> tile<{r}x{c}x{e}>, token"]
    lines += [f"  %r = mmaf %xa, %xb, %xc : tile<{m}x{k}x{operand}>, tile<{k}x{n}x{operand}>, tile<{m}x{n}x{acc}>",
              f"  %s = store_view_tko weak %r, %pc[%c0, %c0] token = %tok : tile<{m}x{n}x{acc}>, {view(acc, m, n)}, "
              "tile<i32> -> token", "  return", "}"]
    return "\n".join(lines) + "\n"


#: (arch, M, N, K, operand, accumulator) -> NVIDIA's ``.reqntid`` (tileiras 13.5): tcgen05 shapes
#: (M >= 64, N >= 8, K >= 256 bits) get a warp group beside the workers; f32 (FMA) and f64
#: multiplies get one when big enough (see lower/cta_size.py mma_extra_warps).
MMAF_CTA_SIZES = {
    ("sm_100", 64, 32, 16, "f16", "f32"): 256, ("sm_100", 64, 16, 16, "f16", "f16"): 256,
    ("sm_100", 64, 8, 16, "bf16", "f32"): 256, ("sm_100", 128, 32, 16, "bf16", "f32"): 256,
    ("sm_100", 32, 64, 16, "f16", "f32"): 128, ("sm_100", 64, 16, 8, "f16", "f32"): 128,
    ("sm_100", 64, 4, 64, "f16", "f32"): 128, ("sm_100", 64, 8, 8, "tf32", "f32"): 256,
    ("sm_100", 64, 32, 4, "tf32", "f32"): 128, ("sm_100", 64, 16, 16, "f8E4M3FN", "f32"): 128,
    ("sm_100", 64, 16, 32, "f8E4M3FN", "f32"): 256, ("sm_100", 128, 8, 32, "f8E5M2", "f16"): 256,
    ("sm_100", 64, 512, 16, "f16", "f32"): 384, ("sm_100", 128, 512, 16, "f16", "f32"): 256,
    ("sm_107", 64, 32, 16, "f16", "f32"): 256, ("sm_120", 64, 32, 16, "f16", "f32"): 128,
    ("sm_100", 64, 64, 16, "f32", "f32"): 128, ("sm_100", 64, 64, 32, "f32", "f32"): 256,
    ("sm_100", 64, 128, 8, "f32", "f32"): 128, ("sm_100", 128, 128, 4, "f32", "f32"): 256,
    ("sm_100", 32, 32, 64, "f32", "f32"): 256, ("sm_100", 16, 32, 128, "f32", "f32"): 256,
    ("sm_90", 64, 128, 16, "f32", "f32"): 256, ("sm_120", 32, 64, 32, "f32", "f32"): 128,
    ("sm_80", 128, 128, 64, "f32", "f32"): 128,
    ("sm_100", 64, 64, 16, "f64", "f64"): 128, ("sm_100", 128, 128, 4, "f64", "f64"): 256,
    ("sm_100", 16, 32, 256, "f64", "f64"): 256, ("sm_100", 64, 128, 16, "f64", "f64"): 128,
}
MMAF_IDS = [f"{a}-{m}x{n}x{k}-{e}-{c}" for a, m, n, k, e, c in MMAF_CTA_SIZES]


@pytest.mark.parametrize("case", MMAF_CTA_SIZES, ids=MMAF_IDS)
def test_mmaf_cta_size(case):
    from tileiras.pipeline import run_stages
    from tileiras.text.parser import parse_module

    arch, *shape = case
    module = parse_module(mmaf_text(*shape), "mmaf.mlir")
    tas = run_stages(module, CompileOptions(gpu_name=arch), "tileas").tas["k"]
    assert tas.num_threads == MMAF_CTA_SIZES[case]


@pytest.mark.parametrize("case", MMAF_CTA_SIZES, ids=MMAF_IDS)
def test_mmaf_cta_size_is_nvidias(case, real_tileiras, tmp_path_factory, request):
    """The table above is what NVIDIA's tileiras says (its PTX cached like the kernels')."""
    from tileiras.text.parser import parse_module
    from tileiras.writer import write_bytecode

    cache = getattr(request.config, "cache", None)
    root = cache.mkdir("real-tileiras-ptx") if cache is not None else tmp_path_factory.mktemp("real-ptx")
    arch, *shape = case
    data = write_bytecode(parse_module(mmaf_text(*shape), "mmaf.mlir"))
    ptx = RealPtxCache(real_tileiras, Path(root)).get(data, arch)
    assert re.search(r"\.reqntid (\d+)", ptx).group(1) == str(MMAF_CTA_SIZES[case])
