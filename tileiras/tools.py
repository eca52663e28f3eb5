"""Locate NVIDIA's real tools (tileirdisasm, tileiras, ptxas).

Search order: the pip wheels (``nvidia-cuda-tileiras`` / ``nvidia-cuda-nvcc`` install into
``site-packages/nvidia/cu<N>/bin``), then ``PATH``, then ``$CUDA_HOME/bin`` (or
``$CUDA_PATH/bin``); ``TILEIRAS_PTXAS`` names a ptxas to use instead.  A native
executable counts; our own ``tileiras`` console script (a Python launcher on ``PATH``) is never
mistaken for NVIDIA's.  A ptxas that is a script (a build system's wrapper, a cache such as
ccache's) counts when it reports a ptxas version.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional

from .knobs import knobs

KNOWN_TOOLS = ("tileirdisasm", "tileiras", "ptxas")

_ELF_MAGIC = b"\x7fELF"
_PTXAS_BANNER = "Ptx optimizing assembler"


def is_native_executable(path: Path) -> bool:
    """True for an executable ELF file (not a script, not a directory)."""
    try:
        if not path.is_file() or not os.access(path, os.X_OK):
            return False
        with path.open("rb") as f:
            return f.read(4) == _ELF_MAGIC
    except OSError:
        return False


def iter_wheel_bin_dirs() -> Iterator[Path]:
    """``nvidia/cu*/bin`` folders of installed NVIDIA wheels, newest CUDA major first."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return
    if spec is None or spec.submodule_search_locations is None:
        return
    for root in spec.submodule_search_locations:
        for cu_dir in sorted(Path(root).glob("cu*"), reverse=True):
            bin_dir = cu_dir / "bin"
            if bin_dir.is_dir():
                yield bin_dir


def iter_path_dirs() -> Iterator[Path]:
    for entry in (knobs.path or "").split(os.pathsep):
        if entry:
            yield Path(entry)


def iter_cuda_home_dirs() -> Iterator[Path]:
    for root in (knobs.cuda_home, knobs.cuda_path):
        if root:
            yield Path(root) / "bin"


def iter_candidates(name: str) -> Iterator[Path]:
    for group in (iter_wheel_bin_dirs(), iter_path_dirs(), iter_cuda_home_dirs()):
        for directory in group:
            yield directory / name


def reports_ptxas_version(path: Path) -> bool:
    """A ptxas: a native executable, or any other executable (a wrapper script) whose
    ``--version`` is ptxas's."""
    if is_native_executable(path):
        return True
    if not path.is_file() or not os.access(path, os.X_OK):
        return False
    try:
        proc = subprocess.run([str(path), "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0 and _PTXAS_BANNER in proc.stdout.decode("utf-8", "replace")


def find_tool(name: str) -> Optional[str]:
    """Absolute path of NVIDIA's ``name`` tool, or None if it is not installed."""
    accept = reports_ptxas_version if name == "ptxas" else is_native_executable
    if name == "ptxas" and knobs.ptxas:
        chosen = Path(knobs.ptxas)
        return str(chosen.resolve()) if accept(chosen) else None
    for candidate in iter_candidates(name):
        if accept(candidate):
            return str(candidate.resolve())
    return None


@lru_cache(maxsize=None)
def find_tool_cached(name: str) -> Optional[str]:
    """``find_tool`` memoised for the life of the process (tests, benchmarks)."""
    return find_tool(name)


def find_tileirdisasm() -> Optional[str]:
    return find_tool_cached("tileirdisasm")


def find_tileiras() -> Optional[str]:
    return find_tool_cached("tileiras")


def find_ptxas() -> Optional[str]:
    return find_tool_cached("ptxas")


LIBDEVICE = Path("nvvm") / "libdevice" / "libdevice.10.bc"


def find_libdevice() -> Optional[str]:
    """``libdevice.10.bc``, CUDA's math library: the ``nvidia-cuda-nvcc`` wheel's (beside its
    ``bin``), else the toolkit's under ``$CUDA_HOME``; None if neither is installed."""
    for bin_dir in (*iter_wheel_bin_dirs(), *iter_cuda_home_dirs()):
        candidate = bin_dir.parent / LIBDEVICE
        if candidate.is_file():
            return str(candidate.resolve())
    return None
