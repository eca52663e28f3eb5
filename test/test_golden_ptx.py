"""Golden PTX: what ``tileiras --emit=ptx`` writes for a representative set of test kernels.

``test/golden_ptx/<kernel>.<arch>.ptx`` holds our PTX for each kernel in GOLDEN_KERNELS on
every architecture in ARCHS (bytecode version: the newest cuTile writes); kernels cuTile cannot
write (multimem, ``kernels.multimem_text``) are parsed from Tile IR text and pinned on sm_100.  The test exports
the kernel with cuTile (conftest's ``tileir_store``), compiles it to PTX and diffs it against
the golden file; a difference fails with a unified diff.  After an intended codegen change,
refresh the files and review the diff in git:

    pytest test/test_golden_ptx.py --update-goldens

Determinism: cuTile's export is byte-identical across runs, but its debug info records the
absolute path of the kernel's source file, which differs between checkouts.  The locations
are therefore dropped from the module before compiling (``strip_locations``), so nothing
derived from them (line info, assert messages with ``file:line``) can reach a golden file.

Kernels in ALIGNED_GOLDEN_KERNELS are pinned a second time as exported with aligned
signatures (``<kernel>.aligned.<arch>.ptx``).

Every golden file must also assemble with ptxas for its architecture.
"""
from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from conftest import ARCHS, CASES, VERSIONS, TileIRStore
from kernels.multimem_text import GOLDEN_MULTIMEM, multimem_kernel
from tileiras.codegen.ptxas import PtxasError, invoke_ptxas
from tileiras.ir.core import Module
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.reader import read_bytecode
from tileiras.text.parser import parse_module
from tileiras.tools import find_ptxas

GOLDEN_DIR = Path(__file__).parent / "golden_ptx"

#: Kernels covering the op families: arithmetic, math, conversions, reductions, scans,
#: control flow, persistent loops, gathers, atomics, shape ops, asserts, hints (clusters,
#: occupancy), tuple parameters, PDL, and a K-looped gemm on tensor cores (mma.sync).
GOLDEN_KERNELS = (
    "float_arith", "half_arith", "int_arith_i64", "math_funcs", "conversions", "fp8_convert",
    "col_reductions", "scans", "softmax_rows", "while_break_continue", "persistent_tiles",
    "gather_scatter", "atomics", "reshape_permute", "debug_assert", "kernel_hints",
    "tuple_params_v2", "pdl_chain", "gemm",
)
#: Kernels also pinned as cuTile exports them for ordinary framework tensors (16-byte
#: aligned bases, strides and shapes divisible by 16: ``<kernel>.aligned.<arch>.ptx``),
#: the common case: 16-byte vector accesses, TMA on sm_90+, Fortran-order loads.
ALIGNED_GOLDEN_KERNELS = (
    "float_arith", "half_arith", "conversions", "col_reductions", "scans", "softmax_rows", "layernorm",
    "persistent_tiles", "gather_scatter", "reshape_permute", "load_store_options", "gemm",
)
MAX_DIFF_LINES = 200
#: Text kernels (name -> Tile IR text), compiled for TEXT_ARCH only.
TEXT_GOLDENS = {name: multimem_kernel(**kwargs) for name, kwargs in GOLDEN_MULTIMEM.items()}
TEXT_ARCH = "sm_100"

_KNOWN = {c.name for c in CASES}
pytestmark = pytest.mark.skipif(not CASES, reason="cuda-tile is not installed")


def golden_path(kernel: str, arch: str) -> Path:
    return GOLDEN_DIR / f"{kernel}.{arch}.ptx"


def strip_locations(module: Module) -> Module:
    """Drop every debug location (in place): they carry the checkout's absolute paths."""
    for fn in module.functions:
        fn.loc = None
        for op in fn.walk():
            op.loc = None
    return module


def compile_to_ptx(data: bytes, arch: str) -> str:
    return compile_module(strip_locations(read_bytecode(data)), CompileOptions(gpu_name=arch), "ptx")


def unified_diff(expected: str, actual: str, name: str) -> str:
    lines = list(difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                                      f"{name} (golden)", f"{name} (now)"))
    if len(lines) > MAX_DIFF_LINES:
        lines = lines[:MAX_DIFF_LINES] + [f"... {len(lines) - MAX_DIFF_LINES} more diff lines\n"]
    return "".join(lines)


def golden_params() -> list:
    """(kernel, arch); an aligned export's kernel reads ``<kernel>.aligned``, as its golden
    file and conftest's combination id do."""
    names = list(GOLDEN_KERNELS) + [f"{k}.aligned" for k in ALIGNED_GOLDEN_KERNELS]
    return [pytest.param(k, a, id=f"{k}.{a}") for k in names for a in ARCHS]


def test_golden_kernels_exist():
    missing = [k for k in GOLDEN_KERNELS + ALIGNED_GOLDEN_KERNELS if k not in _KNOWN]
    assert not missing, f"GOLDEN_KERNELS names kernels that test/kernels lacks: {missing}"


@pytest.mark.parametrize("kernel, arch", golden_params())
def test_ptx_matches_golden(kernel: str, arch: str, tileir_store: TileIRStore,
                            request: pytest.FixtureRequest):
    combo = f"{kernel}.{arch}.{VERSIONS[-1]}"
    file = tileir_store.get(combo)
    if file is None:
        pytest.skip(f"cuTile refuses {combo}: {tileir_store.refusal(combo)}")
    check_golden(compile_to_ptx(file.read_bytes(), arch), kernel, arch, request)


@pytest.mark.parametrize("kernel", sorted(TEXT_GOLDENS))
def test_text_kernel_ptx_matches_golden(kernel: str, request: pytest.FixtureRequest):
    """Kernels cuTile cannot write (multimem), from Tile IR text; multicast needs sm_100."""
    module = strip_locations(parse_module(TEXT_GOLDENS[kernel], f"{kernel}.mlir"))
    check_golden(compile_module(module, CompileOptions(gpu_name=TEXT_ARCH), "ptx"), kernel, TEXT_ARCH, request)


def check_golden(ptx: str, kernel: str, arch: str, request: pytest.FixtureRequest) -> None:
    path = golden_path(kernel, arch)
    if request.config.getoption("--update-goldens"):
        GOLDEN_DIR.mkdir(exist_ok=True)
        if not path.is_file() or path.read_text() != ptx:
            path.write_text(ptx)
        return
    if not path.is_file():
        pytest.fail(f"no golden file {path.name}: run pytest {Path(__file__).name} --update-goldens")
    expected = path.read_text()
    if ptx != expected:
        pytest.fail(f"PTX for {kernel} on {arch} differs from {path.name} (refresh with "
                    f"--update-goldens if intended):\n{unified_diff(expected, ptx, path.name)}",
                    pytrace=False)


def test_no_stale_goldens():
    wanted = {golden_path(k, a).name for k in GOLDEN_KERNELS for a in ARCHS}
    wanted |= {golden_path(k, TEXT_ARCH).name for k in TEXT_GOLDENS}
    wanted |= {golden_path(f"{k}.aligned", a).name for k in ALIGNED_GOLDEN_KERNELS for a in ARCHS}
    stale = sorted(p.name for p in GOLDEN_DIR.glob("*.ptx") if p.name not in wanted)
    assert not stale, f"golden files for kernels no longer in GOLDEN_KERNELS: {stale}"


def test_compilation_is_deterministic(tileir_store: TileIRStore):
    file = tileir_store.get(f"softmax_rows.sm_90.{VERSIONS[-1]}")
    assert file is not None
    assert compile_to_ptx(file.read_bytes(), "sm_90") == compile_to_ptx(file.read_bytes(), "sm_90")


@pytest.mark.parametrize("path", sorted(GOLDEN_DIR.glob("*.ptx")), ids=lambda p: p.stem)
def test_golden_assembles_with_ptxas(path: Path):
    if find_ptxas() is None:
        pytest.skip("ptxas is not installed (pip install nvidia-cuda-nvcc)")
    arch = path.stem.rsplit(".", 1)[1]
    try:
        result = invoke_ptxas(path.read_text(), arch)
    except PtxasError as err:
        pytest.fail(f"ptxas rejects {path.name}:\n{err.log}\n{err.repro_cmd}", pytrace=False)
    assert result.stats, f"ptxas produced no kernels for {path.name}"
