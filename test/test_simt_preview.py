"""Non-entry functions and calls (NVIDIA's SIMT preview) in bytecode, as NVIDIA's 13.5 tools
read and refuse them.

Measured with tileiras and tileirdisasm 13.5 on bytecode 13.1 to 13.5: a function that is not
an ``entry`` reads back as ``cuda_tile.preview$func``, which needs ``--preview=simt`` and even
then must be a bodiless extern declaration (its code comes from a ``-l`` library).  So a
non-entry function with a body is never compiled: without the preview it is refused before
the module is verified, with it after (exit code 3 both ways, first such function only).
A 13.5 extern declaration (body length 0, then an array of constant parameters) must be
private, take an input and have a ``cuda_tile.preview$access`` attribute on each argument,
which no known encoding gives, so the verifier refuses every one.  ``preview$call`` (opcode
16386) needs the header's preview bit and ``--preview=simt``; a call of an undeclared function
reads and prints, and NVIDIA's tileiras then fails with nothing but "failed to compile Tile IR
program" (exit 5).
"""
from __future__ import annotations

import subprocess

import pytest

from _build import bytecode_file
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
    return bytecode_file(tmp_path, "cuda_tile.module @m {\n" + body + "}\n", version, name)


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


# -- extern declarations and preview$call ------------------------------------------------------
CALLER = """\
  entry @k(%x: tile<ptr<f32>>) {
    %c = constant <f32: 1.0> : tile<128xf32>
    %r = preview$call @ext(%c) : (!cuda_tile.tile<128xf32>) -> !cuda_tile.tile<128xf32>
    return
  }
"""
EXT = "  func @ext(%a: tile<128xf32>) -> tile<128xf32> {\n    return %a : tile<128xf32>\n  }\n"
PREVIEW_NOT_ENABLED = "error: error at offset 12: public-preview bytecode requires at least one enabled preview feature"
DECL = "error: 'cuda_tile.preview$func' op "


def declared(tmp_path, body: str, *, private: bool = True, const_params=None, name: str = "k.tileir"):
    """``body`` with its non-entry functions made bodiless extern declarations."""
    from tileiras.ir import attrs as A

    module = parse_module("cuda_tile.module @m {\n" + body + "}\n", "k.mlir")
    for fn in module.functions:
        if not fn.is_entry:
            fn.entry_block.ops.clear()
            fn.is_private = private
            fn.const_params = A.ArrayAttr(()) if const_params is None else const_params
    path = tmp_path / name
    path.write_bytes(write_bytecode(module))
    return path


NO_INPUTS = "  func @ext() -> tile<128xf32> {\n    %c = constant <f32: 1.0> : tile<128xf32>\n    return %c : tile<128xf32>\n  }\n"
#: (module body, private, first line without --preview=simt, first line with it), NVIDIA's 13.5 tools.
EXTERN_CASES = {
    "public": (ENTRY + EXT, False, NOT_ENABLED, DECL + "symbol declaration cannot have public visibility"),
    "no_access_attr": (ENTRY + EXT, True, NOT_ENABLED,
                       DECL + "extern function argument 0 must have a 'cuda_tile.preview$access' arg attr"),
    "no_inputs": (ENTRY + NO_INPUTS, True, NOT_ENABLED, DECL + "extern functions must declare at least one input"),
    "called": (CALLER + EXT, True, PREVIEW_NOT_ENABLED,
               DECL + "extern function argument 0 must have a 'cuda_tile.preview$access' arg attr"),
}


@pytest.mark.parametrize("name", sorted(EXTERN_CASES))
def test_extern_declarations_are_refused(run, tmp_path, name):
    body, private, plain, simt = EXTERN_CASES[name]
    path = declared(tmp_path, body, private=private)
    for tool, extra in ((driver, ["--gpu-name=sm_90", "-o", tmp_path / "k.cubin"]), (disasm, [])):
        assert run(tool, [path, *extra]) == (3, plain)
        assert run(tool, [path, *extra, "--preview=simt"]) == (3, simt)


@pytest.mark.parametrize("name", sorted(EXTERN_CASES))
def test_extern_declarations_as_nvidia(tmp_path, real_tileiras, real_tileirdisasm, name):
    body, private, plain, simt = EXTERN_CASES[name]
    path = declared(tmp_path, body, private=private)
    for cmd in ([real_tileiras, "--gpu-name=sm_90", "-o", str(tmp_path / "x.cubin")], [real_tileirdisasm]):
        for preview, first in (([], plain), (["--preview=simt"], simt)):
            real = subprocess.run([*cmd, *preview, str(path)], capture_output=True, text=True, timeout=60)
            assert (real.returncode, real.stderr.splitlines()[0]) == (3, first), (cmd, preview)


def test_extern_const_params_must_be_an_array(run, tmp_path):
    from tileiras.ir import attrs as A

    path = declared(tmp_path, ENTRY + EXT, const_params=A.DictAttr(()))
    rc, first = run(disasm, [path, "--preview=simt"])
    assert rc == 3 and first.endswith(": extern function const params payload is not an ArrayAttr")


def test_a_call_needs_preview_content_in_the_header(run, tmp_path):
    path = bytecode(tmp_path, CALLER)
    data = bytearray(path.read_bytes())
    assert data[10] == 1  # the writer advertises preview content
    assert run(disasm, [path]) == (3, PREVIEW_NOT_ENABLED)
    data[10] = 0
    path.write_bytes(bytes(data))
    rc, first = run(disasm, [path, "--preview=simt"])
    assert rc == 3 and first.endswith(": malformed bytecode: encountered public-preview opcode 16386 but the header "
                                      "does not advertise preview content")


CALL_TEXT = ("  %0 = preview$call @ext(%cst_1_f32) : (!cuda_tile.tile<128xf32>) -> !cuda_tile.tile<128xf32>\n")


def test_a_call_of_an_undeclared_function_reads_but_does_not_compile(run, tmp_path, capsys):
    """NVIDIA's tools read a call whose callee is nowhere declared (a library may declare it)
    and print it; its tileiras then fails without saying why."""
    path = bytecode(tmp_path, CALLER)
    assert disasm.main([str(path), "--preview=simt"]) == 0
    assert CALL_TEXT in capsys.readouterr().out
    assert run(driver, [path, "--gpu-name=sm_90", "--preview=simt", "-o", tmp_path / "k.cubin"]) == (
        5, "error: failed to compile Tile IR program")
    from tileiras.reader import read_bytecode
    assert write_bytecode(read_bytecode(path.read_bytes(), preview=("simt",))) == path.read_bytes()


def test_a_call_as_nvidia(tmp_path, capsys, real_tileiras, real_tileirdisasm):
    path = bytecode(tmp_path, CALLER)
    real = subprocess.run([real_tileirdisasm, "--preview=simt", str(path)], capture_output=True, text=True, timeout=60)
    assert disasm.main([str(path), "--preview=simt"]) == real.returncode == 0
    assert capsys.readouterr().out == real.stdout
    real = subprocess.run([real_tileiras, "--gpu-name=sm_90", "--preview=simt", str(path), "-o",
                           str(tmp_path / "x.cubin")], capture_output=True, text=True, timeout=60)
    assert (real.returncode, real.stderr) == (5, "error: failed to compile Tile IR program\n")


def test_options_before_the_preview_header(run, tmp_path):
    """NVIDIA's tileiras checks -O and --gpu-name against the header before it asks for a
    preview feature."""
    path = bytecode(tmp_path, CALLER)
    assert run(driver, [path, "--gpu-name=sm_90", "-O7", "-o", tmp_path / "k.cubin"]) == (
        2, "error: invalid optimization level: 7")
    assert run(driver, [path, "--gpu-name=sm_90", "-o", tmp_path / "k.cubin"]) == (3, PREVIEW_NOT_ENABLED)
