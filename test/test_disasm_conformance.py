"""Our MLIR printer against NVIDIA's tileirdisasm, on every exported kernel.

For each file: ``print_module(read_bytecode(b))`` must equal tileirdisasm's stdout exactly,
without and with debug info (``-g``).
"""
from __future__ import annotations

import pytest
from _compare import run_tool, text_diff


def real_disassembly(tool: str, path: str, debug_info: bool) -> str:
    proc = run_tool([tool, *(["-g"] if debug_info else []), path])
    assert proc.returncode == 0, f"tileirdisasm rejected {path}: {proc.stderr.decode()}"
    return proc.stdout.decode("utf-8")


def our_disassembly(data: bytes, debug_info: bool) -> str:
    from tileiras.reader import read_bytecode
    from tileiras.text.printer import print_module

    return print_module(read_bytecode(data), debug_info=debug_info)


@pytest.mark.parametrize("debug_info", [False, True], ids=["plain", "g"])
def test_matches_tileirdisasm(tileir_file, real_tileirdisasm, debug_info):
    expected = real_disassembly(real_tileirdisasm, str(tileir_file.path), debug_info)
    actual = our_disassembly(tileir_file.read_bytes(), debug_info)
    if actual != expected:
        pytest.fail(f"{tileir_file.id}: our text differs from tileirdisasm"
                    f"{' -g' if debug_info else ''}:\n{text_diff(expected, actual)}", pytrace=False)


def test_cli_prints_same_as_api(tileir_files, capsys):
    """Our ``tileirdisasm`` command prints exactly what the API returns."""
    from tileiras import disasm

    for f in tileir_files[:: max(1, len(tileir_files) // 8)]:
        for flags in ([], ["-g"]):
            rc = disasm.main([*flags, str(f.path)])
            out, err = capsys.readouterr()
            assert (rc, err) == (0, ""), f"{f.id}: {err}"
            assert out == our_disassembly(f.read_bytes(), debug_info=bool(flags))
