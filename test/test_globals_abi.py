"""Module ``global``s in the PTX as NVIDIA's tileiras declares them: public ones are
``.visible`` symbols the host can look up (kept even when unused), private ones internal
(dropped when unused); alignment from the global or else its element size; the launch
metadata before them."""
from __future__ import annotations

import re
import subprocess

from _build import bytecode_file
from tileiras import driver
from tileiras.emulate.cubin import ptx_from_cubin

GLOBALS = """cuda_tile.module @m {
  global @table alignment = 16 <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
  global private @p <f64: [1.0]> : tile<1xf64>
  global constant @c <i16: [1, 2, 3, 4]> : tile<4xi16>
  global private constant @pc <i32: [5]> : tile<1xi32>
  global private @used <f32: [9.0]> : tile<1xf32>
  global @unused alignment = 2 <i64: [7]> : tile<1xi64>
  entry @k(%out: tile<ptr<f32>>) {
    %g = get_global @used : tile<ptr<f32>>
    %v, %t = load_ptr_tko weak %g : tile<ptr<f32>> -> tile<f32>, token
    %t2 = store_ptr_tko weak %out, %v : tile<ptr<f32>>, tile<f32> -> token
    return
  }
}
"""

EXPECTED = [
    ".visible .global .align 8 .b8 ___NV_TILE_LAUNCH_META_DATA___[64];",
    ".visible .global .align 16 .b8 table[16] = {0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64};",
    ".visible .global .align 2 .b8 c[8] = {1, 0, 2, 0, 3, 0, 4};",
    ".global .align 4 .b8 used[4] = {0, 0, 16, 65};",
    ".visible .global .align 2 .b8 unused[8] = {7};",
]


def _global_lines(ptx: str) -> list[str]:
    return [line for line in ptx.splitlines() if re.match(r"^(\.visible )?\.global ", line)]


def test_globals_are_declared_as_nvidias(tmp_path, capsys):
    path = bytecode_file(tmp_path, GLOBALS)
    capsys.readouterr()
    assert driver.main([str(path), "--gpu-name=sm_90", "--emit=ptx"]) == 0
    assert _global_lines(capsys.readouterr().out) == EXPECTED


def test_globals_match_nvidias_ptx(tmp_path, real_tileiras):
    path = bytecode_file(tmp_path, GLOBALS)
    cubin = tmp_path / "nv.cubin"
    subprocess.run([real_tileiras, str(path), "--gpu-name=sm_90", "--lineinfo", "-o", str(cubin)], check=True)
    assert _global_lines(ptx_from_cubin(cubin.read_bytes())) == EXPECTED
