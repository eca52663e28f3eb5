"""Non-entry functions (NVIDIA's SIMT preview) in bytecode: refused as NVIDIA's 13.5 tools do.

Measured with tileiras and tileirdisasm 13.5 on bytecode 13.1 to 13.5: a function that is not
an ``entry`` reads back as ``cuda_tile.preview$func``, which needs ``--preview=simt`` and even
then must be a bodiless extern declaration (its code comes from a ``-l`` library).  So a
non-entry function with a body is never compiled: without the preview it is refused before
the module is verified, with it after (exit code 3 both ways, first such function only).
"""
from __future__ import annotations

import subprocess

import pytest

from tileiras import disasm, driver
from tileiras.ir.version import V13_1, NEWEST
from tileiras.text.parser import parse_module
from tileiras.writer import write_bytecode

NOT_ENABLED = "error: uses preview feature 'simt', which is not enabled"
NOT_EXTERN = "error: 'cuda_tile.preview$func' op must be extern when serialized to bytecode"
BAD_OP = "error: 'cuda_tile.load_ptr_tko' op multicast pointer is not allowed"

HELPER = """\
  func @helper(%a: tile<128xf32>) -> tile<128xf32> {
    %b = addf %a, %a : tile<128xf32>
    return %b : tile<128xf32>
  }
"""
ENTRY = """\
  entry @k(%p: tile<ptr<f32>>) {
    return
  }
"""


def bytecode(tmp_path, body: str, version=NEWEST, name: str = "k.tileir"):
    path = tmp_path / name
    path.write_bytes(write_bytecode(parse_module("cuda_tile.module @m {\n" + body + "}\n", "k.mlir",
                                                 version=version), version=version))
    return path


@pytest.fixture
def run(capsys):
    def _run(tool, args):
        rc = tool.main([str(a) for a in args])
        return rc, capsys.readouterr().err.splitlines()[0]
    return _run


@pytest.mark.parametrize("version", [V13_1, NEWEST], ids=str)
@pytest.mark.parametrize("preview, first", [([], NOT_ENABLED), (["--preview=simt"], NOT_EXTERN)])
def test_non_entry_function_is_refused(run, tmp_path, version, preview, first):
    path = bytecode(tmp_path, ENTRY + HELPER, version)
    assert run(driver, [path, "--gpu-name=sm_90", "-o", tmp_path / "k.cubin", *preview]) == (3, first)
    assert run(driver, [path, "--emit=mlir", *preview]) == (3, first)
    assert run(disasm, [path, *preview]) == (3, first)
    assert not (tmp_path / "k.cubin").exists()


def test_entries_alone_are_read(run, tmp_path, capsys):
    path = bytecode(tmp_path, ENTRY)
    assert disasm.main([str(path), "--preview=simt"]) == 0
    assert capsys.readouterr().out.startswith("entry @k(")


BAD_ENTRY = """\
  entry @k(%p: tile<ptr<f32, <multicast>>>) {
    %r, %t = load_ptr_tko weak %p : tile<ptr<f32, <multicast>>> -> tile<f32>, token
    return
  }
"""
#: (module body, preview flags, first error line): the later function refused first without
#: the preview (before verification), the bad op first with it (verification comes first).
CASES = [(HELPER + ENTRY, [], NOT_ENABLED), (HELPER + ENTRY, ["--preview=simt"], NOT_EXTERN),
         (BAD_ENTRY + HELPER, [], NOT_ENABLED), (BAD_ENTRY + HELPER, ["--preview=simt"], BAD_OP)]


@pytest.mark.parametrize("body, preview, first", CASES)
def test_order_of_problems(run, tmp_path, body, preview, first):
    assert run(driver, [bytecode(tmp_path, body), "--gpu-name=sm_90", *preview]) == (3, first)


@pytest.mark.parametrize("body, preview, first", CASES)
def test_same_as_nvidia(tmp_path, real_tileiras, real_tileirdisasm, body, preview, first):
    path = bytecode(tmp_path, body)
    for cmd in ([real_tileiras, "--gpu-name=sm_90", "-o", str(tmp_path / "x.cubin")], [real_tileirdisasm]):
        real = subprocess.run([*cmd, *preview, str(path)], capture_output=True, text=True, timeout=60)
        assert (real.returncode, real.stderr.splitlines()[0]) == (3, first), cmd
