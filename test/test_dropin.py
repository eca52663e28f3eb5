"""Drop-in test: cuTile's own ``export_kernel(..., output_format="cubin")`` finds and
runs *our* ``tileiras`` (first on PATH) and gets a cubin it accepts.

cuTile probes the compiler (``--version``, then empty modules at 13.4..13.1 with
``--gpu-name sm_120``), then compiles with ``<tmp>.bytecode -o <tmp>.cubin
--gpu-name sm_XY -O<n> ...``.  A wrapper logs each invocation so the test knows
ours was the one called.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("cuda.tile")

KERNEL = textwrap.dedent('''
    import sys
    import cuda.tile as ct
    import cuda.tile._compile as cutile_compile
    # as if NVIDIA's pip tileiras were not installed: cuTile falls back to PATH
    cutile_compile._find_pip_tileiras = lambda: None
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature, export_kernel

    @ct.kernel
    def scale_add(a, b, c, tile: ct.Constant[int]):
        block = ct.bid(0)
        x = ct.load(a, index=(block,), shape=(tile,))
        y = ct.load(b, index=(block,), shape=(tile,))
        ct.store(c, index=(block,), tile=x * 2.0 + y)

    array = ArrayConstraint(ct.float32, 1, index_dtype=ct.int32, stride_lower_bound_incl=0,
                            alias_groups=(), may_alias_internally=False, stride_constant=(1,))
    sig = KernelSignature([array, array, array, 128], CallingConvention.cutile_python_v1())
    export_kernel(scale_add, [sig.with_mangled_symbol("scale_add")], sys.argv[1],
                  gpu_code=sys.argv[2], output_format="cubin")
''')


def _our_tileiras() -> str:
    exe = shutil.which("tileiras", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("the tileiras console script is not installed next to this Python")
    return exe


def export_with_our_tileiras(tmp_path: Path, gpu: str, **env_extra: str) -> tuple[bytes, list[str]]:
    """Run cuTile's export in a fresh Python with a logging wrapper of ours first on PATH;
    the cubin and the logged command lines."""
    ours = _our_tileiras()
    wrap_dir = tmp_path / "bin"
    wrap_dir.mkdir(parents=True)
    log = tmp_path / "calls.log"
    wrapper = wrap_dir / "tileiras"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec "{ours}" "$@"\n')
    wrapper.chmod(0o755)
    script = tmp_path / "k.py"
    script.write_text(KERNEL)
    out = tmp_path / "k.cubin"
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")}
    env["PATH"] = f"{wrap_dir}{os.pathsep}{env.get('PATH', '')}"
    env.update(env_extra)
    proc = subprocess.run([sys.executable, str(script), str(out), gpu], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out.read_bytes(), log.read_text().splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("gpu", ["sm_80", "sm_90", "sm_120"])
def test_cutile_export_uses_our_tileiras(tmp_path: Path, gpu: str) -> None:
    cubin, calls = export_with_our_tileiras(tmp_path, gpu)
    assert any(f"--gpu-name {gpu}" in c and "-o" in c for c in calls), calls
    assert cubin[:4] == b"\x7fELF"
    assert b"scale_add" in cubin and b".nv.host" in cubin


@pytest.mark.slow
@pytest.mark.xdist_group("compile-server")     # beside test_server.py's, which share its servers
def test_cutile_export_through_the_compile_server(tmp_path: Path) -> None:
    """With the server on (its default), cuTile's probes start it and its compile is
    served.  (Byte identity with in-process runs is test_server.py's: cuTile's own temp
    file names reach the line tables, so two cuTile exports differ anyway.)"""
    runtime = Path(tempfile.mkdtemp(prefix="tis", dir="/tmp"))
    try:
        served, calls = export_with_our_tileiras(tmp_path, "sm_90", TILEIRAS_SERVER="1",
                                                 XDG_RUNTIME_DIR=str(runtime))
        assert len(calls) >= 2 and any("--gpu-name sm_90" in c for c in calls)
        assert served[:4] == b"\x7fELF" and b"scale_add" in served and b".nv.host" in served
        assert list(runtime.glob("tileiras-*/*.sock"))  # a server did start
    finally:
        subprocess.run([sys.executable, "-m", "tileiras.server", "--stop"], timeout=60,
                       env=dict(os.environ, XDG_RUNTIME_DIR=str(runtime)), capture_output=True)
        shutil.rmtree(runtime, ignore_errors=True)


def test_empty_module_compiles(tmp_path: Path) -> None:
    """cuTile's version probe: a module with no functions must compile (exit 0)."""
    from tileiras.ir.core import Module
    from tileiras.ir.version import V13_4
    from tileiras.writer import write_bytecode
    from tileiras import driver

    src = tmp_path / "empty.tileir"
    src.write_bytes(write_bytecode(Module(V13_4)))
    out = tmp_path / "empty.cubin"
    assert driver.main([str(src), "--gpu-name", "sm_120", "-o", str(out)]) == 0
    cubin = out.read_bytes()
    assert cubin[:4] == b"\x7fELF" and b".nv.host" not in cubin
