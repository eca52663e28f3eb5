"""Locating NVIDIA's tools, and the environment knobs."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from tileiras import tools
from tileiras.knobs import knobs


def test_absent_tool_is_none():
    assert tools.find_tool("surely-not-an-nvidia-tool") is None


def only_path(monkeypatch, folder) -> None:
    monkeypatch.setattr(tools, "iter_wheel_bin_dirs", lambda: iter(()))
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("TILEIRAS_PTXAS", raising=False)


def test_scripts_on_path_are_not_nvidia_tools(tmp_path, monkeypatch):
    """Our own ``tileirdisasm`` console script (a Python launcher) must never be picked, nor
    a script called ptxas that is not one."""
    for name in ("ptxas", "tileirdisasm"):
        script = tmp_path / name
        script.write_text("#!/bin/sh\necho fake\n")
        script.chmod(0o755)
    only_path(monkeypatch, tmp_path)
    assert tools.find_tool("ptxas") is None
    assert tools.find_tool("tileirdisasm") is None


def test_a_ptxas_wrapper_script_on_path_is_used(tmp_path, monkeypatch):
    """Build systems wrap ptxas in scripts (caches, logging): one that reports a ptxas
    version is a ptxas."""
    script = tmp_path / "ptxas"
    script.write_text('#!/bin/sh\necho "ptxas: NVIDIA (R) Ptx optimizing assembler"\necho "Cuda compilation '
                      'tools, release 13.0"\n')
    script.chmod(0o755)
    only_path(monkeypatch, tmp_path)
    assert tools.find_tool("ptxas") == str(script.resolve())
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("TILEIRAS_PTXAS", str(script))
    assert tools.find_tool("ptxas") == str(script.resolve())
    monkeypatch.setenv("TILEIRAS_PTXAS", str(tmp_path / "missing"))
    assert tools.find_tool("ptxas") is None


def test_cuda_home_bin_is_searched(tmp_path, monkeypatch):
    real = tools.find_tool("tileirdisasm")
    if real is None:
        import pytest
        pytest.skip("NVIDIA's tileirdisasm is not installed")
    (tmp_path / "bin").mkdir()
    shutil.copy(real, tmp_path / "bin" / "tileirdisasm")
    monkeypatch.setattr(tools, "iter_wheel_bin_dirs", lambda: iter(()))
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert tools.find_tool("tileirdisasm") == str((tmp_path / "bin" / "tileirdisasm").resolve())


def test_wheel_tools_found_when_installed():
    found = tools.find_tileirdisasm()
    if found is not None:
        assert tools.is_native_executable(Path(found)) and os.path.isabs(found)


def test_debug_knob(monkeypatch):
    monkeypatch.delenv("TILEIRAS_DEBUG", raising=False)
    assert knobs.debug is False
    for value, expected in (("1", True), ("true", True), ("0", False), ("", False), ("off", False)):
        monkeypatch.setenv("TILEIRAS_DEBUG", value)
        assert knobs.debug is expected
