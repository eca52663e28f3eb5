"""--lineinfo: source .loc lines, Tile IR .loc_intermediate lines and the Tile IR text
section, as NVIDIA's tileiras emits them (ptxas turns them into line tables)."""
from __future__ import annotations

import re
from pathlib import Path

from _build import bytecode_file
from tileiras import driver
from tileiras.reader import read_bytecode
from tileiras.text.printer import print_module

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vadd.tileir"


def _ptx(capsys, *flags: str) -> str:
    assert driver.main([str(EXAMPLE), "--gpu-name=sm_90", "--emit=ptx", *flags]) == 0
    return capsys.readouterr().out


def test_lineinfo_ptx(capsys):
    ptx = _ptx(capsys, "--lineinfo")
    files = dict(re.findall(r'\.file\s+(\d+)\s+"([^"]+)"', ptx))
    assert files["1"].endswith("vadd.py") and re.fullmatch(r"\./[0-9a-f]{32}", files["2"])
    src_lines = {int(m) for m in re.findall(r"\.loc\s+1\s+(\d+)\s+\d+", ptx)}
    assert {20, 21, 22, 23} <= src_lines  # the loads, the add and the store of examples/vadd.py
    text = print_module(read_bytecode(EXAMPLE.read_bytes()))
    lines = text.splitlines()
    for line in {int(m) for m in re.findall(r"\.loc_intermediate\s+2\s+(\d+)\s+\d+", ptx)}:
        assert 1 <= line <= len(lines)
    assert any("load_view_tko" in lines[int(m) - 1] for m in re.findall(r"\.loc_intermediate\s+2\s+(\d+)", ptx))
    assert ".nv_intermediate_source_section {" in ptx and text in ptx


def test_no_lineinfo_without_flag(capsys):
    ptx = _ptx(capsys)
    assert ".loc" not in ptx and ".file" not in ptx and "nv_intermediate_source_section" not in ptx


def test_lineinfo_cubin_sections(tmp_path):
    from tileiras.codegen.ptxas import read_sections

    out = tmp_path / "l.cubin"
    assert driver.main([str(EXAMPLE), "--gpu-name=sm_90", "--lineinfo", "-o", str(out)]) == 0
    names = {s.name for s in read_sections(out.read_bytes())}
    assert {".debug_line", ".nv_debug_ptx_txt", ".nv.tileir.debug_line"} <= names
    assert any(n.startswith(".nv.tileir.debug_txt.") for n in names)


def test_device_debug_emits_dwarf(tmp_path, capsys):
    """-g (with -O0) targets ``sm_XX, debug`` and carries DWARF, as NVIDIA's tool does."""
    from tileiras.codegen.ptxas import read_sections

    assert driver.main([str(EXAMPLE), "--gpu-name=sm_90", "-O0", "-g", "--emit=ptx"]) == 0
    ptx = capsys.readouterr().out
    assert ".target sm_90a, debug" in ptx and ".section\t.debug_info" in ptx
    out = tmp_path / "g.cubin"
    assert driver.main([str(EXAMPLE), "--gpu-name=sm_90", "-O0", "-g", "-o", str(out)]) == 0
    names = {s.name for s in read_sections(out.read_bytes())}
    assert {".debug_info", ".debug_abbrev", ".nv_debug_info_reg_sass", ".nv.tileir.debug_line"} <= names
    assert ".debug_pubnames" not in names


NO_DEBUG_INFO = """cuda_tile.module @m {
  entry @k(%out: tile<ptr<f32>>) {
    %c = constant <f32: 2.0> : tile<f32>
    %t = store_ptr_tko weak %out, %c : tile<ptr<f32>>, tile<f32> -> token
    return
  }
}
"""


def test_lineinfo_without_debug_info_synthesizes_unknown_scope(tmp_path, capsys):
    """A module without locations: NVIDIA's scope at ``<unknown>`` line 1, no Tile IR text."""
    path = bytecode_file(tmp_path, NO_DEBUG_INFO)
    assert driver.main([str(path), "--gpu-name=sm_90", "--lineinfo", "--emit=ptx"]) == 0
    ptx = capsys.readouterr().out
    assert re.findall(r"\.file\s+(\d+)\s+\"([^\"]+)\"", ptx) == [("1", "<unknown>")]
    assert set(re.findall(r"\.loc\s+(.*)", ptx)) == {"1 1 0"}
    assert "nv_intermediate_source_section" not in ptx and ".loc_intermediate" not in ptx
    assert "$L__func_begin" not in ptx and ".debug_macinfo" not in ptx  # nothing reads them without -g


def test_lineinfo_without_debug_info_cubin_is_nvidias(tmp_path, real_tileiras):
    """The same cubin sections as NVIDIA's (line tables and the embedded PTX)."""
    import subprocess

    from tileiras.codegen.ptxas import read_sections

    path = bytecode_file(tmp_path, NO_DEBUG_INFO)
    for flags in (["--lineinfo"], ["-g", "-O0"]):
        ours, theirs = tmp_path / "ours.cubin", tmp_path / "theirs.cubin"
        assert driver.main([str(path), "--gpu-name=sm_90", *flags, "-o", str(ours)]) == 0
        subprocess.run([real_tileiras, str(path), "--gpu-name=sm_90", *flags, "-o", str(theirs)], check=True)
        names = sorted(s.name for s in read_sections(ours.read_bytes()))
        assert names == sorted(s.name for s in read_sections(theirs.read_bytes()))
        assert ".nv_debug_ptx_txt" in names
