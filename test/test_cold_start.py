"""What a cold ``tileiras`` compile (no compile server) imports, and what it must not.

Each module kept out here was measured on the cold path (``python -X importtime``):
click with its dependencies (~20 ms; ``cli.parse_plain`` reads cuTile's command lines),
llvmlite's bindings and libLLVM (~30 ms; they load in ``codegen.backend``'s child),
dataclasses with inspect (a few ms, plus ~0.3 ms a class; the package uses ``record``),
fractions/decimal (the float printer; the verifier uses ``text.escape``) and traceback.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

VADD = Path(__file__).resolve().parent.parent / "examples" / "vadd.tileir"
KEPT_OUT = ("click", "llvmlite.binding", "dataclasses", "inspect", "fractions", "decimal", "traceback")


def test_a_compile_keeps_slow_modules_out(tmp_path) -> None:
    out_file = tmp_path / "v.cubin"
    code = ("import sys; from tileiras.driver import main; "
            f"rc = main([{str(VADD)!r}, '--gpu-name', 'sm_90', '-O3', '-o', {str(out_file)!r}]); "
            f"print(rc, *sorted(m for m in {KEPT_OUT!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0"]
    assert out_file.read_bytes()[:4] == b"\x7fELF"
