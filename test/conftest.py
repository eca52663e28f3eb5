"""Shared fixtures: real Tile IR bytecode exported by cuTile from our own kernels.

Every kernel in ``test/kernels`` is exported with ``cuda.tile.compilation.export_kernel``
for each architecture in ARCHS and each bytecode version in VERSIONS (13.1 and the newest
that cuTile writes).  No GPU is needed.  A combination is skipped only when cuTile itself
refuses it (``TileUnsupportedFeatureError``: an op that needs a later version, a dtype the
architecture lacks); any other export failure is a test failure.

Tests take the ``tileir_file`` fixture (a ``TileIRFile``) and are parametrized over every
combination automatically; ids read ``<kernel>.<arch>.<version>``.
"""
from __future__ import annotations

import io
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

# Commands the tests run as subprocesses compile in-process: a test session must not leave
# compile servers behind.  test_server.py turns the server on in a private runtime folder.
os.environ["TILEIRAS_SERVER"] = "0"
# Every compilation in the tests checks the TileAS invariants after each pass
# (``lower/tileas_verify.py``), in-process or in a subprocess.
os.environ["TILEIRAS_VERIFY_EACH"] = "1"

ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")
OLDEST_VERSION = "13.1"


def newest_cutile_version() -> str:
    """The newest bytecode version cuTile writes (13.4 for cuda-tile 1.7)."""
    try:
        from cuda.tile._compile import _SUPPORTED_VERSIONS

        return max(_SUPPORTED_VERSIONS).as_string()
    except Exception:  # noqa: BLE001 - private API; fall back to what 1.7 writes
        return "13.4"


def load_cases() -> tuple:
    try:
        from kernels import ALL_CASES
    except ImportError:  # cuda-tile not installed: the bytecode tests are skipped
        return ()
    return ALL_CASES


CASES = load_cases()
VERSIONS = tuple(dict.fromkeys((OLDEST_VERSION, newest_cutile_version()))) if CASES else ()


@dataclass(frozen=True)
class TileIRFile:
    kernel: str
    arch: str
    version: str
    path: Path

    @property
    def id(self) -> str:
        return f"{self.kernel}.{self.arch}.{self.version}"

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()


@dataclass(frozen=True)
class Combination:
    kernel: str
    arch: str
    version: str
    aligned: bool = False    # arrays as a framework's tensors (``kernels._case.aligned_array``)

    @property
    def id(self) -> str:
        return f"{self.kernel}{'.aligned' if self.aligned else ''}.{self.arch}.{self.version}"


COMBINATIONS = tuple(Combination(c.name, a, v) for c in CASES for a in ARCHS for v in VERSIONS)
#: The same kernels exported aligned, newest version only (exported when first asked for).
ALIGNED_COMBINATIONS = tuple(Combination(c.name, a, VERSIONS[-1], aligned=True) for c in CASES for a in ARCHS)


class TileIRStore:
    """Exports every combination once per session into a temporary folder."""

    def __init__(self, root: Path):
        self.root = root
        self._files: dict[str, TileIRFile] = {}
        self._refused: dict[str, str] = {}
        self._exported = False

    def export_all(self) -> None:
        if self._exported:
            return
        for combo in COMBINATIONS:
            self._export(combo)
        self._exported = True

    def _export(self, combo: Combination) -> None:
        import cuda.tile as ct
        from cuda.tile.compilation import export_kernel

        case = next(c for c in CASES if c.name == combo.kernel)
        buf = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "num_worker_warps is ignored at 13.1"
            try:
                export_kernel(case.kernel, case.signatures(aligned=combo.aligned), buf, gpu_code=combo.arch,
                              output_format="tileir_bytecode", bytecode_version=combo.version)
            except ct.TileUnsupportedFeatureError as e:
                self._refused[combo.id] = str(e).splitlines()[0]
                return
        path = self.root / f"{combo.id}.tileir"
        path.write_bytes(buf.getvalue())
        self._files[combo.id] = TileIRFile(combo.kernel, combo.arch, combo.version, path)

    def get(self, combo_id: str) -> Optional[TileIRFile]:
        """The file, or None if cuTile refused the combination (see ``refusal``)."""
        self.export_all()
        aligned = next((c for c in ALIGNED_COMBINATIONS if c.id == combo_id), None)
        if aligned is not None and combo_id not in self._files and combo_id not in self._refused:
            self._export(aligned)
        return self._files.get(combo_id)

    def refusal(self, combo_id: str) -> str:
        return self._refused.get(combo_id, "not exported")

    def all_files(self) -> list[TileIRFile]:
        self.export_all()
        return [self._files[c.id] for c in COMBINATIONS if c.id in self._files]


@pytest.fixture(scope="session")
def tileir_store(tmp_path_factory: pytest.TempPathFactory) -> TileIRStore:
    return TileIRStore(tmp_path_factory.mktemp("tileir"))


@pytest.fixture(scope="session")
def tileir_files(tileir_store: TileIRStore) -> list[TileIRFile]:
    """Every exported file (for tests that sample from all of them)."""
    files = tileir_store.all_files()
    if not files:
        pytest.skip("cuda-tile is not installed: no bytecode to test with")
    return files


@pytest.fixture
def tileir_file(request: pytest.FixtureRequest, tileir_store: TileIRStore) -> TileIRFile:
    combo_id = request.param
    found = tileir_store.get(combo_id)
    if found is None:
        pytest.skip(f"cuTile refuses {combo_id}: {tileir_store.refusal(combo_id)}")
    return found


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """``--dist loadgroup`` keeps each ``xdist_group``'s tests on one worker (session fixtures
    built once: NVIDIA's PTX of every kernel, the GPU plan) by a ``@group`` suffix on their
    node ids.  pytest-xdist 3.8 writes the suffix to ``Item._nodeid``, which pytest 9 no
    longer reads (its ids are ``Item._id``): without this the groups were spread over the
    workers and each built the fixtures again."""
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:         # pytest before 9: xdist's own suffix works
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite test/golden_ptx/*.ptx from the current compiler instead of "
                          "diffing against them")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "tileir_file" in metafunc.fixturenames:
        ids = [c.id for c in COMBINATIONS]
        metafunc.parametrize("tileir_file", ids, ids=ids, indirect=True)


@pytest.fixture(scope="session")
def real_tileirdisasm() -> str:
    from tileiras.tools import find_tileirdisasm

    path = find_tileirdisasm()
    if path is None:
        pytest.skip("NVIDIA's tileirdisasm is not installed (pip install nvidia-cuda-tileiras)")
    return path


@pytest.fixture(scope="session")
def real_tileiras() -> str:
    from tileiras.tools import find_tileiras

    path = find_tileiras()
    if path is None:
        pytest.skip("NVIDIA's tileiras is not installed (pip install nvidia-cuda-tileiras)")
    return path
