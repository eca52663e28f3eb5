"""The ``tileiras`` and ``tileirdisasm`` command lines: messages, exit codes, outputs.

Expected messages are NVIDIA's (shared/reference/real-tileiras-abi.md, section 4).  Most
tests run the CLIs in-process (``main(argv) -> exit code``); a few run them as
subprocesses, and the differential ones also run NVIDIA's tools on the same input.
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from malformed import MUTATIONS, Mutation

from tileiras import cli, disasm, driver

SAMPLE_ID = "float_arith.sm_90.13.1"
VERSION_LINES = [
    "tileiras: NVIDIA (R) Cuda Tile IR optimizing assembler",
    "Copyright (c) 2005-2026 NVIDIA Corporation",
    "Built on Mon_Oct_12_19:27:40_PDT_2026",
    "Cuda compilation tools, release 13.5, V13.5.37",
    "Build local.local.39125733_",
]
LIST_VERSIONS = "13.1\n13.2\n13.3\n13.4\n13.5\n"


@dataclass(frozen=True)
class Result:
    rc: int
    out: str
    err: str


@pytest.fixture
def run(capsys):
    """Run a CLI in-process: ``run(args)`` for tileiras, ``run(args, tool=disasm)``."""
    def _run(args, tool=driver) -> Result:
        rc = tool.main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Result(rc, out, err)
    return _run


@pytest.fixture(scope="module")
def sample(tileir_store) -> Path:
    found = tileir_store.get(SAMPLE_ID)
    if found is None:
        pytest.skip("cuda-tile cannot export the sample kernel")
    return found.path


@pytest.fixture
def mutated(sample, tmp_path):
    def _make(mutation: Mutation) -> tuple[Path, bytes]:
        path = tmp_path / f"{mutation.name}.tileir"
        path.write_bytes(mutation.apply(sample.read_bytes()))
        return path, sample.read_bytes()
    return _make


def argv0() -> str:
    return cli.program_name("tileiras")


def run_module(module: str, *args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True,
                          timeout=120, **kw)


# -- reading the input -----------------------------------------------------------------------

def test_no_input_prints_help_and_fails(run):
    r = run([])
    assert r.rc == 1
    assert r.out.startswith("OVERVIEW: tileiras: NVIDIA (R) Cuda Tile IR optimizing assembler\n")
    assert r.err == "error: no input file provided\n\n"


@pytest.mark.parametrize("path, reason", [("/nonexistent.tileir", "No such file or directory"),
                                          ("-", "No such file or directory")])
def test_unreadable_input(run, path, reason):
    r = run([path, "--gpu-name", "sm_90"])
    assert (r.rc, r.out) == (1, "")
    assert r.err == f"error: unable to read input file '{path}': {reason}\n"


def test_directory_input(run, tmp_path):
    r = run([tmp_path, "--gpu-name", "sm_90"])
    assert r.rc == 1
    assert r.err == f"error: unable to read input file '{tmp_path}': Is a directory\n"


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_malformed_bytecode(run, mutated, mutation):
    path, original = mutated(mutation)
    r = run([path, "--gpu-name", "sm_90"])
    assert r.rc == mutation.exit_code, r.err
    assert r.out == ""
    lines = r.err.splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), r.err
    assert "Traceback" not in r.err
    if mutation.expected is not None:
        assert lines[0] == mutation.expected(original)


def test_newer_version_bytes_on_older_encoding(run, sample, tmp_path):
    """13.5 changed the function-flag encoding: relabelling a 13.1 file must not be accepted."""
    from malformed import with_version

    path = tmp_path / "relabelled.tileir"
    path.write_bytes(with_version(sample.read_bytes(), 13, 5))
    r = run([path, "--gpu-name", "sm_90"])
    assert r.rc == 3 and r.err.startswith("error: "), r.err


# -- option parsing (exit code 1, LLVM wording) ----------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["-O"], "tileiras: for the -O option: requires a value!"),
    (["--opt-level=abc"], "tileiras: for the --opt-level option: 'abc' value invalid for integer argument!"),
    (["--gpu-name", "sm_90a"], "tileiras: for the --gpu-name option: Cannot find option named 'sm_90a'!"),
    (["--gpu-name=sm_91"], "tileiras: for the --gpu-name option: Cannot find option named 'sm_91'!"),
    (["--gpu-name"], "tileiras: for the --gpu-name option: requires a value!"),
    (["-o"], "tileiras: for the -o option: requires a value!"),
    (["--preview=bogus"],
     "tileiras: for the --preview option: unknown preview feature 'bogus'; supported features: simt"),
    (["--host-arch=arm"], "tileiras: for the --host-arch option: Cannot find option named 'arm'!"),
    (["--host-os=macos"], "tileiras: for the --host-os option: Cannot find option named 'macos'!"),
    (["--remarks=bogus"], "tileiras: for the --remarks option: Cannot find option named 'bogus'!"),
])
def test_option_errors(run, sample, args, message):
    r = run([sample, *args])
    assert (r.rc, r.out, r.err) == (1, "", message + "\n")


def test_unknown_option(run, sample):
    r = run([sample, "--bogus"])
    assert r.rc == 1
    assert r.err.splitlines()[0] == f"tileiras: Unknown command line argument '--bogus'.  Try: '{argv0()} --help'"


def test_two_inputs(run, sample):
    r = run([sample, sample])
    assert r.rc == 1
    assert r.err == ("tileiras: Too many positional arguments specified!\n"
                     f"Can specify at most 1 positional arguments: See: {argv0()} --help\n")


def test_option_errors_come_before_reading(run, tmp_path):
    bad = tmp_path / "bad.tileir"
    bad.write_bytes(b"nope")
    assert run([bad, "--gpu-name", "sm_90a"]).rc == 1
    assert run([tmp_path / "missing", "--opt-level=x"]).rc == 1
    assert run([bad]).rc == 3  # the bytecode is checked before --gpu-name


def test_llvm_spellings_accepted(run, sample, tmp_path):
    out = tmp_path / "out.cubin"
    for args in (["--gpu-name=sm_90"], ["--gpu-name", "sm_90"], ["--arch", "sm_90"],
                 ["-gpu-name=sm_90"], ["--arch=sm_80", "--gpu-name", "sm_120"], ["-O0", "-g", "--arch=sm_90"]):
        r = run([sample, *args, "-o", out])
        assert (r.rc, r.err) == (0, ""), (args, r.err)
        assert out.read_bytes()[:4] == b"\x7fELF"
        out.unlink()


# -- checks after the bytecode is read (exit code 2) -----------------------------------------

def test_missing_gpu_name(run, sample):
    r = run([sample])
    assert r.rc == 2
    assert r.err == ("error: GPU architecture sm_0 is not supported by this version of tileiras. You may "
                     "need a newer toolchain that supports this architecture (bytecode in file is "
                     "version 13.1).\n")


@pytest.mark.parametrize("args, level", [(["-O4"], "4"), (["--opt-level=-1"], "-1"), (["-O9"], "9")])
def test_bad_opt_level(run, sample, args, level):
    r = run([sample, "--gpu-name", "sm_90", *args])
    assert (r.rc, r.err) == (2, f"error: invalid optimization level: {level}\n")


def test_debug_needs_O0(run, sample):
    r = run([sample, "--gpu-name", "sm_90", "-g"])
    assert r.rc == 2
    assert r.err == ("error: optimized debugging is currently not supported, change the optimization "
                     "level to 0 or disable full debug info\n")


def test_compiles_to_cubin(run, sample, tmp_path):
    out = tmp_path / "out.cubin"
    r = run([sample, "--gpu-name", "sm_90", "-O3", "--lineinfo", "-o", out])
    assert (r.rc, r.out, r.err) == (0, "", "")
    cubin = out.read_bytes()
    assert cubin[:4] == b"\x7fELF" and b".nv.host" in cubin and b"___NV_TILE_LAUNCH_META_DATA___" in cubin


def test_default_output_is_elf_o(run, sample, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run([sample, "--gpu-name", "sm_80"]).rc == 0
    assert (tmp_path / "elf.o").read_bytes()[:4] == b"\x7fELF"


def test_compile_is_deterministic(run, sample, tmp_path):
    a, b = tmp_path / "a.cubin", tmp_path / "b.cubin"
    assert run([sample, "--gpu-name", "sm_100", "-o", a]).rc == 0
    assert run([sample, "--gpu-name", "sm_100", "-o", b]).rc == 0
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("stage, marker", [("tileaa", "tileaa.func @"), ("tileas", "tileas.func @"),
                                           ("llvm", "define"), ("ptx", ".language 7")])
def test_emit_stages(run, sample, stage, marker):
    r = run([sample, "--gpu-name", "sm_90", f"--emit={stage}"])
    assert r.rc == 0 and marker in r.out, r.err


# -- --version, --list-versions, --help ------------------------------------------------------

def test_version(run):
    r = run(["--version"])
    assert (r.rc, r.out.splitlines(), r.err) == (0, VERSION_LINES, "")


def test_version_wins_over_later_errors(run):
    r = run(["--version", "--bogus"])
    assert (r.rc, r.err) == (0, "")
    assert r.out.splitlines() == VERSION_LINES


def test_list_versions(run, tmp_path):
    out = tmp_path / "never.cubin"
    r = run(["--list-versions", "-o", out])
    assert (r.rc, r.out, r.err) == (0, LIST_VERSIONS, "")
    assert not out.exists()


def test_first_immediate_flag_wins(run):
    assert run(["--list-versions", "--version"]).out == LIST_VERSIONS
    assert run(["--version", "--list-versions"]).out.splitlines() == VERSION_LINES
    assert run(["-list-versions"]).out == LIST_VERSIONS


def test_errors_before_list_versions_are_reported(run):
    r = run(["--bogus", "--list-versions"])
    assert (r.rc, r.out) == (0, LIST_VERSIONS)
    assert r.err.startswith("tileiras: Unknown command line argument '--bogus'.")


def test_help(run):
    r = run(["--help"])
    assert r.rc == 0 and "--gpu-name=<value>" in r.out and "--emit=<value>" in r.out
    lines = r.out.splitlines()
    assert lines[4:9] == ["OPTIONS:", "", "Generic Options:", "",
                          "  --help                           - Display available options (--help-hidden for more)"]
    assert "    =sm_90                         -   SM 90" in lines
    assert "  -h                               - Alias for --help" not in lines  # hidden


def test_help_variants(run):
    """``--help-list`` is one sorted list (without itself); the hidden forms add LLVM's own."""
    flat = run(["--help-list"]).out.splitlines()
    assert "Generic Options:" not in flat and flat[5].startswith("  -O ")
    names = [ln.split()[0] for ln in flat[5:] if ln.startswith("  -")]
    assert names == sorted(names, key=lambda n: n.lstrip("-").split("=")[0])
    assert "--help-list" not in names and "-h" not in names
    hidden = run(["--help-list-hidden"]).out
    assert "  --help-list-hidden               - Display list of all available options" in hidden
    assert run(["-h"]).out == run(["--help"]).out
    assert "  --print-options " in run(["--help-hidden"]).out


def _without_our_options(text: str) -> str:
    """``text`` less the category of options NVIDIA's tool lacks (--emit, --bytecode-version)."""
    head, sep, tail = text.partition("\n\nPipeline Options (this tileiras only):\n")
    if sep:
        text = head + "\n"
    lines, skip = [], False
    for line in text.splitlines():
        if line.startswith(("  --emit=", "  --bytecode-version=")):
            skip = True
            continue
        if not (skip and line.startswith("    =")):
            skip = False
            lines.append(line)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("flag", ["-h", "--help", "--help-hidden", "--help-list", "--help-list-hidden"])
def test_help_is_nvidias(run, flag, real_tileiras, real_tileirdisasm):
    """Every help text equals NVIDIA's byte for byte, apart from our extra options."""
    for tool, real in ((driver, real_tileiras), (disasm, real_tileirdisasm)):
        expected = subprocess.run([real, flag], capture_output=True, text=True).stdout
        assert _without_our_options(run([flag], tool=tool).out) == expected


def test_print_options_accepted(run):
    r = run(["--print-options", "--print-all-options", "--version"])
    assert (r.rc, r.err) == (0, "")


# -- outputs ---------------------------------------------------------------------------------

def test_failed_run_leaves_no_output(run, tmp_path):
    bad = tmp_path / "bad.tileir"
    bad.write_bytes(b"\x7fTileIR\x00\x0d\x01")
    out = tmp_path / "out.o"
    assert run([bad, "--gpu-name", "sm_90", "-o", out]).rc == 3
    assert run([bad, "--emit=mlir", "-o", out]).rc == 3
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tileir"]


def test_failed_run_keeps_existing_output(run, tmp_path):
    bad = tmp_path / "bad.tileir"
    bad.write_bytes(b"junk")
    out = tmp_path / "out.mlir"
    out.write_text("previous")
    assert run([bad, "--emit=mlir", "-o", out]).rc == 3
    assert out.read_text() == "previous"


def test_unwritable_output(run, sample, tmp_path):
    target = tmp_path / "no" / "such" / "dir" / "out.tileir"
    r = run([sample, "--emit=bytecode", "-o", target])
    assert r.rc == 2 and r.err.startswith("error: "), r.err
    assert not target.parent.exists()


def test_emit_mlir(run, sample, tmp_path):
    out = tmp_path / "out.mlir"
    r = run([sample, "--emit=mlir", "-o", out])
    assert (r.rc, r.out, r.err) == (0, "", "")
    stdout_run = run([sample, "--emit=mlir"])
    assert stdout_run.rc == 0
    assert out.read_text() == stdout_run.out
    assert "entry @" in stdout_run.out


def test_emit_mlir_with_debug_info(run, sample):
    plain = run([sample, "--emit=mlir"])
    debug = run([sample, "--emit=mlir", "-g"])
    assert plain.rc == debug.rc == 0
    assert "loc(" in debug.out and "loc(" not in plain.out


def test_emit_bytecode_roundtrips(run, sample, tmp_path):
    out = tmp_path / "out.tileir"
    r = run([sample, "--emit=bytecode", "-o", out])
    assert (r.rc, r.err) == (0, "")
    assert out.read_bytes() == sample.read_bytes()


def test_emit_bytecode_other_version(run, sample, tmp_path):
    from tileiras.ir.version import V13_4
    from tileiras.reader import read_bytecode

    out = tmp_path / "out.tileir"
    r = run([sample, "--emit=bytecode", "--bytecode-version=13.4", "-o", out])
    assert (r.rc, r.err) == (0, "")
    assert read_bytecode(out.read_bytes()).version == V13_4


@pytest.mark.parametrize("args", [["--bytecode-version=13.4"], ["--emit=bytecode", "--bytecode-version=13.9"],
                                  ["--emit=bytecode", "--bytecode-version=x"], ["--emit=sass"]])
def test_emit_option_errors(run, sample, args):
    r = run([sample, *args])
    assert r.rc == 1 and r.err.startswith("tileiras: for the --"), r.err


def test_output_is_deterministic(run, sample, tmp_path):
    for emit in ("mlir", "bytecode"):
        a, b = tmp_path / f"a.{emit}", tmp_path / f"b.{emit}"
        assert run([sample, f"--emit={emit}", "-o", a]).rc == 0
        assert run([sample, f"--emit={emit}", "-o", b]).rc == 0
        assert a.read_bytes() == b.read_bytes()


# -- internal errors never show a traceback --------------------------------------------------

def _boom(*args, **kwargs):
    raise RuntimeError("boom")


def test_internal_error_is_one_line(run, sample, monkeypatch):
    import tileiras.reader

    monkeypatch.setattr(tileiras.reader, "read_bytecode", _boom)
    monkeypatch.delenv("TILEIRAS_DEBUG", raising=False)
    for tool, extra in ((driver, ["--gpu-name", "sm_90"]), (disasm, [])):
        r = run([sample, *extra], tool=tool)
        assert (r.rc, r.err) == (5, "error: internal error: RuntimeError('boom')\n")


def test_internal_error_traceback_with_debug_knob(run, sample, monkeypatch):
    import tileiras.reader

    monkeypatch.setattr(tileiras.reader, "read_bytecode", _boom)
    monkeypatch.setenv("TILEIRAS_DEBUG", "1")
    r = run([sample, "--gpu-name", "sm_90"])
    assert r.rc == 5
    assert "Traceback" in r.err and r.err.endswith("error: internal error: RuntimeError('boom')\n")


# -- tileirdisasm ----------------------------------------------------------------------------

def test_disasm_no_input(run):
    r = run([], tool=disasm)
    assert r.rc == 2 and r.out.startswith("OVERVIEW: tileirdisasm: NVIDIA (R) Cuda Tile IR disassembler")
    assert r.err == "error: no input file provided\n\n"


def test_disasm_missing_file(run):
    r = run(["/nonexistent.tileir"], tool=disasm)
    assert r.rc == 2
    assert r.err == "error: error: unable to read input file '/nonexistent.tileir': No such file or directory\n\n"


def test_disasm_version(run):
    r = run(["--version"], tool=disasm)
    assert r.rc == 0
    assert r.out.splitlines() == ["tileirdisasm: NVIDIA (R) Cuda Tile IR disassembler", *VERSION_LINES[1:]]


def test_disasm_rejects_compiler_options(run, sample):
    r = run([sample, "-o", "x"], tool=disasm)
    assert r.rc == 1 and r.err.startswith("tileirdisasm: Unknown command line argument '-o'.")


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_disasm_malformed(run, mutated, mutation):
    path, _ = mutated(mutation)
    r = run([path], tool=disasm)
    assert (r.rc, r.out) == (3, "")
    assert r.err.startswith("error: ") and "Traceback" not in r.err


def test_disasm_version_wording(run, mutated):
    by_name = {m.name: m for m in MUTATIONS}
    path, _ = mutated(by_name["version_99_0"])
    r = run([path], tool=disasm)
    assert r.err == ("error: error at offset 12: unsupported Tile version 99.0.0, this reader supports "
                     "versions [13.1 - 13.5]\n")


# -- as subprocesses, and against NVIDIA's tools ---------------------------------------------

@pytest.mark.slow
def test_subprocess_entry_points(sample, tmp_path):
    r = run_module("tileiras.driver", "--version")
    assert r.returncode == 0 and r.stdout.decode().splitlines() == VERSION_LINES
    r = run_module("tileiras.driver", sample, "--emit=bytecode", "-o", "-")
    assert (r.returncode, r.stderr) == (0, b"")
    assert r.stdout == sample.read_bytes()
    r = run_module("tileiras.driver", tmp_path / "missing", "--gpu-name", "sm_90")
    assert r.returncode == 1 and b"Traceback" not in r.stderr
    r = run_module("tileiras.disasm", sample)
    assert (r.returncode, r.stderr) == (0, b"") and r.stdout


@pytest.mark.slow
@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_same_errors_as_nvidia(run, mutated, mutation, real_tileiras, real_tileirdisasm, tmp_path):
    """Exit code and first error line agree with NVIDIA's tools on the same broken input."""
    path, _ = mutated(mutation)
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    real = subprocess.run([real_tileiras, str(path), "--gpu-name", "sm_90", "-o", str(tmp_path / "x")],
                          capture_output=True, timeout=60, env=env)
    ours = run([path, "--gpu-name", "sm_90", "-o", tmp_path / "y"])
    assert ours.rc == real.returncode
    if mutation.name != "magic_only":  # NVIDIA prints uninitialised memory there
        assert ours.err.splitlines()[0] == real.stderr.decode().splitlines()[0]
    real_d = subprocess.run([real_tileirdisasm, str(path)], capture_output=True, timeout=60)
    ours_d = run([path], tool=disasm)
    assert ours_d.rc == real_d.returncode
    assert ours_d.err.splitlines()[0] == real_d.stderr.decode().splitlines()[0]


def test_rejects_what_nvidia_rejects(run, tmp_path, real_tileirdisasm):
    """cuTile can export modules NVIDIA's verifier refuses; so must ours (exit code 3)."""
    pytest.importorskip("cuda.tile")
    from cuda.tile.compilation import export_kernel
    from kernels.rejected import REJECTED

    for case, message in REJECTED:
        path = tmp_path / f"{case.name}.tileir"
        export_kernel(case.kernel, case.signatures(), str(path), gpu_code="sm_90",
                      output_format="tileir_bytecode", bytecode_version="13.1")
        real = subprocess.run([real_tileirdisasm, str(path)], capture_output=True, timeout=60)
        assert real.returncode == 3 and message in real.stderr.decode()
        for tool, extra in ((disasm, []), (driver, ["--gpu-name", "sm_90"]), (driver, ["--emit=mlir"])):
            r = run([path, *extra], tool=tool)
            assert (r.rc, r.out) == (3, ""), r.err
            assert message in r.err, r.err


def test_arch_incompatibility_is_a_compile_error(run, tileir_store):
    """fp8 on sm_80: NVIDIA fails the compile (exit 5), after the option checks."""
    found = tileir_store.get("fp8_convert.sm_90.13.1")
    if found is None:
        pytest.skip("cuTile cannot export the fp8 kernel")
    r = run([found.path, "--gpu-name", "sm_80"])
    assert r.rc == 5
    assert "error: Incompatibility with architecture 'sm_80': unsupported type 'f8E4M3FN'" in r.err
    assert r.err.endswith("\nerror: failed to compile Tile IR program\n")
    assert run([found.path, "--gpu-name", "sm_80", "-O7"]).rc == 2
    assert run([found.path, "--gpu-name", "sm_90", "--emit=llvm"]).rc == 0


def test_options_are_checked_after_the_header_before_the_sections(run, sample, tmp_path):
    """NVIDIA's order: bad header (3), then -O/-g/--apply-controls (2), then the body (3)."""
    truncated = tmp_path / "truncated.tileir"
    truncated.write_bytes(sample.read_bytes()[:100])
    r = run([truncated, "--gpu-name", "sm_90", "-O7"])
    assert (r.rc, r.err) == (2, "error: invalid optimization level: 7\n")
    r = run([truncated, "--gpu-name", "sm_90", "--apply-controls=ctl.acf"])
    assert (r.rc, r.err) == (2, "error: --apply-controls is not supported on this platform\n")
    r = run([truncated, "--gpu-name", "sm_90"])
    assert r.rc == 3 and r.err.startswith("error: error at offset ")
    header_only = tmp_path / "header.tileir"
    header_only.write_bytes(sample.read_bytes()[:10])
    assert run([header_only, "--gpu-name", "sm_90", "-O7"]).rc == 3


def test_empty_apply_controls_compiles(run, sample, tmp_path):
    out = tmp_path / "k.cubin"
    r = run([sample, "--gpu-name", "sm_90", "--apply-controls=", "-o", out])
    assert r.rc == 0 and out.read_bytes()[:4] == b"\x7fELF"
    r = run([sample, "--gpu-name", "sm_90", "--apply-controls=ctl.acf", "--apply-controls=", "-o", out])
    assert r.rc == 0  # the last one counts, as in LLVM's parser


def _repad(data: bytes, byte: int) -> tuple[bytes, int]:
    """``data`` with every section's alignment padding set to ``byte``; how many bytes."""
    from tileiras.reader.stream import ByteReader

    out, r, count = bytearray(data), ByteReader(data), 0
    r.pos = 12
    while (head := r.u8("section id")) & 0x7F:
        length = r.varint("section length")
        if head & 0x80:
            alignment = r.varint("section alignment")
            while r.pos % alignment:
                out[r.pos], count = byte, count + 1
                r.pos += 1
        r.pos += length
    return bytes(out), count


def test_any_padding_byte_is_read_as_nvidia_reads_it(run, sample, tmp_path):
    """Writers pad aligned sections with 0xCB, but NVIDIA's reader never looks at them."""
    data, count = _repad(sample.read_bytes(), 0x00)
    assert count > 0 and data != sample.read_bytes()
    path = tmp_path / "zero_padded.tileir"
    path.write_bytes(data)
    assert run([path], tool=disasm).out == run([sample], tool=disasm).out


def _module_bytes(body: str, args: str = "%a: tile<i32>") -> bytes:
    from _build import bytecode

    return bytecode(f"cuda_tile.module @m {{\n  entry @k({args}) {{\n{body}    return\n  }}\n}}\n")


@pytest.mark.parametrize("arg, spelled", [("i32", "'i32'"), ("token", "'!cuda_tile.token'")])
def test_entry_arguments_must_be_rank0_tiles(run, tmp_path, arg, spelled):
    """NVIDIA's reader refuses kernel arguments other than rank-0 tiles (exit 3)."""
    path = tmp_path / "k.tileir"
    path.write_bytes(_module_bytes("", f"%a: tile<i32>, %b: {arg}"))
    for tool, extra in ((disasm, []), (driver, ["--gpu-name", "sm_90"])):
        r = run([path, *extra], tool=tool)
        assert (r.rc, r.err) == (3, f"error: unsupported type in bytecode for entry argument #1: {spelled}; "
                                    "expected a rank-0 !cuda_tile.tile type\n")


@pytest.mark.parametrize("attr, tag", [("div_by<16>", 8), ("bounded<0, 7>", 12)])
def test_unused_optional_parameter_flags_are_refused(run, tmp_path, attr, tag):
    """div_by/bounded say which optional parameters follow in two bits; NVIDIA refuses more."""
    data = _module_bytes(f"    %x = assume {attr}, %a : tile<i32>\n")
    head = bytes([tag, 16]) if tag == 8 else bytes([tag])
    at = data.index(head) + len(head)
    assert data[at] in (0, 3)
    path = tmp_path / "k.tileir"
    path.write_bytes(data[:at] + bytes([data[at] | 4]) + data[at + 1:])
    r = run([path], tool=disasm)
    assert (r.rc, r.err) == (3, f"error: error at offset {at}: unused bits set in optional parameter flags\n")
