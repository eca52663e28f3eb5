"""Tile libraries (``-l``, ``--preview-create-tile-lib``) as NVIDIA's tileiras 13.5 makes and
reads them (``tileiras.tilelib`` has what was measured).

Libraries whose interface holds entries and globals are written with ``write_container``
(NVIDIA's own create mode refuses such interfaces, but its ``-l`` splices them); they show
the linking: the interface's kernels and globals become part of the output.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import _build
from tileiras import diffcheck, driver, tilelib
from tileiras.emulate.cubin import ptx_from_cubin
from tileiras.ir.version import V13_1, V13_5
from tileiras.text.parser import parse_module

KERNEL = """cuda_tile.module @m {
  global @g <f32: [9.0, 8.0]> : tile<2xf32>
  entry @k(%x: tile<ptr<f32>>) {
    %p = get_global @g : tile<ptr<f32>>
    %v, %t = load_ptr_tko weak %p : tile<ptr<f32>> -> tile<f32>, token
    %t2 = store_ptr_tko weak %x, %v : tile<ptr<f32>>, tile<f32> -> token
    return
  }
}
"""
#: An interface with a global and two entries that read it.
LIBRARY = """cuda_tile.module @lib {
  global @lg <f32: [5.0, 6.0]> : tile<2xf32>
  entry @useg(%x: tile<ptr<f32>>) {
    %p = get_global @lg : tile<ptr<f32>>
    %v, %t = load_ptr_tko weak %p : tile<ptr<f32>> -> tile<f32>, token
    %t2 = store_ptr_tko weak %x, %v : tile<ptr<f32>>, tile<f32> -> token
    return
  }
  entry @other(%x: tile<ptr<f32>>) {
    %p = get_global @lg : tile<ptr<f32>>
    %v, %t = load_ptr_tko weak %p : tile<ptr<f32>> -> tile<f32>, token
    %c = constant <f32: 2.0> : tile<f32>
    %s = addf %v, %c : tile<f32>
    %t2 = store_ptr_tko weak %x, %s : tile<ptr<f32>>, tile<f32> -> token
    return
  }
}
"""
EMPTY = "cuda_tile.module @m {\n}\n"
HELPER = "cuda_tile.module @lib {\n  func @helper(%a: tile<f32>) -> tile<f32> {\n    return %a : tile<f32>\n  }\n}\n"
BAD_OP = ("cuda_tile.module @lib {\n  entry @bad() {\n    %c = constant <f32: 1.0> : tile<16xf32>\n"
          "    %w = ftof %c : tile<16xf32> -> tile<16xi32>\n    return\n  }\n}\n")


def bytecode(text: str, version=V13_5) -> bytes:
    return _build.bytecode(text, version)


@pytest.fixture
def files(tmp_path: Path):
    """Writes ``name`` -> bytes under tmp_path; returns the path as text."""
    def put(name: str, data: bytes) -> str:
        (tmp_path / name).write_bytes(data)
        return str(tmp_path / name)
    return put


def library(interface: str | bytes, *implementations: bytes, host_os: str = "linux") -> bytes:
    data = interface if isinstance(interface, bytes) else bytecode(interface)
    return tilelib.write_container(data, implementations or (bytecode(EMPTY),), host_os=host_os)


@pytest.fixture
def run(capsys):
    def _run(*args: str) -> tuple[int, list[str]]:
        rc = driver.main([str(a) for a in args])
        return rc, capsys.readouterr().err.splitlines()
    return _run


# -- the container -----------------------------------------------------------------------------
@pytest.mark.parametrize("host_os", ["linux", "windows"])
@pytest.mark.parametrize("host_arch", ["x86_64", "aarch64"])
def test_sections_read_back(host_os, host_arch):
    interface, impl, code = bytecode(EMPTY), bytecode(LIBRARY), b"\x01code"
    data = tilelib.write_container(interface, [impl, code], host_arch, host_os)
    sections = tilelib.object_sections(data)
    assert {k: v for k, v in sections.items() if k.startswith(".nvtl")} == {
        ".nvtlifc": interface, ".nvtl.0": impl, ".nvtl.1": code}
    assert data.startswith(b"\x7fELF" if host_os == "linux" else {"x86_64": b"\x64\x86", "aarch64": b"\x64\xaa"}[
        host_arch])


def test_elf_layout():
    """Relocatable, no symbols, names in LLVM's string-table order, headers 8-aligned."""
    data = tilelib.write_container(b"I" * 3, [b"A", b"BB"])
    assert data[16:20] == b"\x01\x00\x3e\x00"  # ET_REL, x86-64
    assert data[0x41:0x41 + 44] == b"\0.nvtlifc\0.shstrtab\0.strtab\0.nvtl.1\0.nvtl.0\0"
    assert data[0x6D:0x73] == b"IIIABB" and int.from_bytes(data[40:48], "little") == 0x78


CREATE_CASES = {  # name -> (interface, implementations, exit code, NVIDIA's messages)
    "plain": ("empty", ["empty"], 0, []),
    "code_beside": ("empty", ["empty", "code"], 0, []),
    "no_interface": (None, ["empty"], 2, ["error: unable to read interface file '': No such file or directory"]),
    "interface_not_bytecode": ("code", ["empty"], 2, [
        "error: must provide tile IR bytecode for tile lib interface file"]),
    "interface_with_global": ("global", ["empty"], 2, [
        "error: tile library interface may only contain extern cuda_tile.experimental$func declarations, "
        "found 'cuda_tile.global'"]),
    "interface_with_body": ("helper", ["empty"], 2, [*tilelib.NOT_EXTERN,
                                                     "error: could not read tile library interface as Tile IR bytecode"]),
    "interface_bad_op": ("bad_op", ["empty"], 2, [
        "error: 'cuda_tile.ftof' op result #0 must be tile of f16 or bf16 or f32 or f64 or tf32 or f8E4M3FN or "
        "f8E5M2 or f8E8M0FNU or f4E2M1FN or fnv8E5M3FNU values, but got '!cuda_tile.tile<16xi32>'",
        tilelib.NOT_VERIFIED, "error: could not read tile library interface as Tile IR bytecode"]),
    "interface_only": ("empty", [], 2, [
        "error: interface-only tile libraries are not allowed; you must provide an implementation either as a "
        "dynamic library (implementation provider), or as static code files; providing only an interface file is "
        "not allowed"]),
    "missing_implementation": ("empty", ["missing"], 2, [
        "error: unable to read implementation file 'MISSING': No such file or directory"]),
    "code_only": ("empty", ["code"], 2, [
        "error: must provide either an implementation-provider shared library or a static implementation catalog "
        "with the static implementation artifacts"]),
    "two_bytecodes": ("empty", ["empty", "empty"], 2, ["error: must provide exactly one tile bytecode file"]),
    "three_files": ("empty", ["empty", "code", "code"], 2, [f"error: {tilelib.TWO_OPTIONS}"]),
}


def _create_args(files, interface, implementations, output) -> list[str]:
    sources = {"empty": bytecode(EMPTY), "code": b"\x01\x02 not bytecode", "global": bytecode(
        "cuda_tile.module @lib {\n  global @g <f32: [1.0]> : tile<1xf32>\n}\n"), "helper": bytecode(HELPER),
        "bad_op": bytecode(BAD_OP)}
    args = ["--preview-create-tile-lib", "-o", output]
    if interface is not None:
        args.append("--preview-interface=" + files(f"{interface}.ifc", sources[interface]))
    for i, name in enumerate(implementations):
        path = files(f"{name}{i}.impl", sources[name]) if name != "missing" else str(Path(output).parent / "MISSING")
        args.append("--preview-implementation=" + path)
    return args


@pytest.mark.parametrize("name", sorted(CREATE_CASES))
def test_create(name, files, run, tmp_path):
    interface, implementations, rc, messages = CREATE_CASES[name]
    args = _create_args(files, interface, implementations, str(tmp_path / "lib.tl"))
    got_rc, err = run(*args)
    assert (got_rc, err) == (rc, [m.replace("MISSING", str(tmp_path / "MISSING")) for m in messages])
    assert (tmp_path / "lib.tl").exists() == (rc == 0)


@pytest.mark.parametrize("name", sorted(CREATE_CASES))
def test_create_as_nvidia(name, files, run, tmp_path, real_tileiras):
    """The same messages and exit code, and the same bytes when it succeeds."""
    interface, implementations, rc, _ = CREATE_CASES[name]
    args = _create_args(files, interface, implementations, str(tmp_path / "ours.tl"))
    ours_rc, ours_err = run(*args)
    real = subprocess.run([real_tileiras, *[a.replace("ours.tl", "nv.tl") for a in args]], capture_output=True,
                          text=True, timeout=60)
    assert (ours_rc, ours_err) == (real.returncode, real.stderr.splitlines())
    if rc == 0:
        assert (tmp_path / "ours.tl").read_bytes() == (tmp_path / "nv.tl").read_bytes()


@pytest.mark.parametrize("extra", [["--host-arch=aarch64"], ["--host-os=windows"],
                                   ["--host-os=windows", "--host-arch=aarch64"]])
def test_create_for_other_hosts_as_nvidia(extra, files, run, tmp_path, real_tileiras):
    args = _create_args(files, "empty", ["empty", "code"], str(tmp_path / "ours.tl")) + extra
    assert run(*args) == (0, [])
    subprocess.run([real_tileiras, *[a.replace("ours.tl", "nv.tl") for a in args]], check=True, timeout=60)
    assert (tmp_path / "ours.tl").read_bytes() == (tmp_path / "nv.tl").read_bytes()


def test_create_reads_no_input_and_defaults_to_elf_o(files, run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = _create_args(files, "empty", ["empty"], "x")[:1] + _create_args(files, "empty", ["empty"], "x")[3:]
    assert run(*args) == (0, [])
    assert tilelib.object_sections((tmp_path / "elf.o").read_bytes())[".nvtlifc"] == bytecode(EMPTY)


# -- -l ----------------------------------------------------------------------------------------
def _lib_cases(files, tmp_path):
    return {
        "no_preview": ([files("a.tl", library(EMPTY))], [], ["error: libraries require the 'simt' preview feature"]),
        "missing": ([str(tmp_path / "none.tl")], ["--preview=simt"], [
            "error: failed to open tile library: No such file or directory"]),
        "directory": ([str(tmp_path)], ["--preview=simt"], ["error: failed to open tile library: Is a directory"]),
        "not_an_object": ([files("x.tl", b"garbage" * 8)], ["--preview=simt"], [
            "error: failed to open tile library: The file was not recognized as a valid object file"]),
        "provider_not_loadable": ([files("p.tl", tilelib.write_container(bytecode(EMPTY), []))],
                                  ["--preview=simt"], [
            f"Failed to load provider {tmp_path}/p.tl: {tmp_path}/p.tl: only ET_DYN and ET_EXEC can be loaded",
            f"error: failed to load linkage provider: {tmp_path}/p.tl"]),
        "interface_not_bytecode": ([files("b.tl", library(b"\x01not bytecode"))], ["--preview=simt"],
                                   [tilelib.SPLICE_FAILED]),
        "interface_with_body": ([files("h.tl", library(HELPER))], ["--preview=simt"],
                                [*tilelib.NOT_EXTERN, tilelib.SPLICE_FAILED]),
        "interface_bad_op": ([files("o.tl", library(BAD_OP))], ["--preview=simt"], [
            CREATE_CASES["interface_bad_op"][3][0], tilelib.NOT_VERIFIED, tilelib.SPLICE_FAILED]),
        "redefinition": ([files("l.tl", library(LIBRARY))] * 2, ["--preview=simt"], [
            "error: redefinition of symbol named 'lg'", tilelib.NOT_VERIFIED]),
        "interface_uses_kernel_global": ([files("u.tl", library(LIBRARY.replace("get_global @lg", "get_global @g")))],
                                         ["--preview=simt"], [
            "error: 'cuda_tile.get_global' op 'g' does not reference a valid global", tilelib.NOT_VERIFIED,
            tilelib.SPLICE_FAILED]),
        "unused_library": ([files("e.tl", library(EMPTY))], ["--preview=simt"], []),
        "windows_library": ([files("w.tl", library(LIBRARY, host_os="windows"))], ["--preview=simt"], []),
        "implementation_unread": ([files("i.tl", library(EMPTY, b"\x00garbage"))], ["--preview=simt"], []),
    }


LIB_CASE_NAMES = ["no_preview", "missing", "directory", "not_an_object", "provider_not_loadable",
                  "interface_not_bytecode", "interface_with_body", "interface_bad_op", "interface_uses_kernel_global",
                  "redefinition",
                  "unused_library", "windows_library", "implementation_unread"]


@pytest.mark.parametrize("name", LIB_CASE_NAMES)
def test_libraries(name, files, run, tmp_path):
    libs, flags, messages = _lib_cases(files, tmp_path)[name]
    kernel = files("k.tileir", bytecode(KERNEL))
    args = [kernel, "--gpu-name=sm_90", "-o", str(tmp_path / "k.cubin"), *flags, *[x for p in libs for x in ("-l", p)]]
    assert run(*args) == (5 if messages else 0, messages)
    assert (tmp_path / "k.cubin").exists() == (not messages)


@pytest.mark.parametrize("name", LIB_CASE_NAMES)
def test_libraries_as_nvidia(name, files, run, tmp_path, real_tileiras):
    libs, flags, _ = _lib_cases(files, tmp_path)[name]
    kernel = files("k.tileir", bytecode(KERNEL))
    args = [kernel, "--gpu-name=sm_90", *flags, *[x for p in libs for x in ("-l", p)]]
    real = subprocess.run([real_tileiras, *args, "-o", str(tmp_path / "nv.cubin")], capture_output=True, text=True,
                          timeout=120)
    assert run(*args, "-o", str(tmp_path / "ours.cubin")) == (real.returncode, real.stderr.splitlines())


def test_order_of_checks(files, run, tmp_path):
    """Input, then --gpu-name, then the libraries, then the architecture checks."""
    out = ["-o", str(tmp_path / "k.cubin")]
    garbage = files("g.tileir", b"garbage")
    assert run(garbage, "--gpu-name=sm_90", "-l", "none", *out) == (3, [
        "error: input does not correspond to Tile IR bytecode"])
    kernel = files("k.tileir", bytecode(KERNEL))
    assert run(kernel, "-l", "none", *out)[0] == 2
    fnv8 = files("f.tileir", bytecode(KERNEL.replace("f32", "fnv8E5M3FNU").replace("9.0, 8.0", "1.0, 2.0")))
    assert run(fnv8, "--gpu-name=sm_90", "-l", "none", *out) == (5, [
        "error: libraries require the 'simt' preview feature"])
    assert run(fnv8, "--gpu-name=sm_90", "--preview=simt", "-l", "none", *out)[1] == [
        "error: failed to open tile library: No such file or directory"]


# -- linking -----------------------------------------------------------------------------------
def test_interface_kernels_and_globals_are_linked_in(files, tmp_path):
    """Each library's interface goes in front of the module (the last -l first); its kernels
    are compiled and its globals defined (an interface is verified on its own first, so its
    code cannot use the module's globals)."""
    from tileiras.pipeline import CompileOptions, compile_module

    module = parse_module(KERNEL, "k.mlir")
    other = bytecode(LIBRARY.replace("@useg", "@useg2").replace("@lg", "@lg2").replace("@other", "@other2"),
                     version=V13_1)
    tilelib.link(module, [files("a.tl", library(LIBRARY)), files("b.tl", library(other))], ("simt",))
    assert [f.name for f in module.functions] == ["useg2", "other2", "useg", "other", "k"]
    assert [g.name for g in module.globals] == ["lg2", "lg", "g"]
    ptx = compile_module(module, CompileOptions(gpu_name="sm_90"), "ptx")
    assert re.findall(r"\.entry (\w+)", ptx) == ["useg2", "other2", "useg", "other", "k"]
    for entry, value in (("useg", 5.0), ("other", 7.0), ("k", 9.0)):
        out = np.zeros(1, np.float32)
        expected = diffcheck.run_interpreter(module, entry, (1, 1, 1), [out])
        got = diffcheck.run_ptx(ptx, entry, (1, 1, 1), [out])
        assert expected.arrays[0][0] == got.arrays[0][0] == value, entry


def test_nvidia_links_the_same_kernels(files, run, tmp_path, real_tileiras):
    kernel = files("k.tileir", bytecode(KERNEL))
    lib = files("l.tl", library(LIBRARY))
    args = [kernel, "--gpu-name=sm_90", "--preview=simt", "-l", lib]
    subprocess.run([real_tileiras, *args, "--lineinfo", "-o", str(tmp_path / "nv.cubin")], check=True, timeout=120)
    assert run(*args, "--emit=ptx", "-o", str(tmp_path / "ours.ptx")) == (0, [])
    nvidia = re.findall(r"\.entry (\w+)", ptx_from_cubin((tmp_path / "nv.cubin").read_bytes()))
    assert nvidia == re.findall(r"\.entry (\w+)", (tmp_path / "ours.ptx").read_text()) == ["useg", "other", "k"]
