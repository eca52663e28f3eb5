"""--remarks: which memory/tensor-core decisions are reported, in YAML or on the command line."""
from __future__ import annotations

import re
from pathlib import Path

from tileiras import driver
from tileiras.remarks import Category, Kind, enabled_from_options

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vadd.tileir"


def test_yaml_remarks_file(tmp_path):
    out, yaml = tmp_path / "o.cubin", tmp_path / "r.yaml"
    assert driver.main([str(EXAMPLE), "--gpu-name=sm_90", "-o", str(out), "--remark-format=yaml",
                        "--remarks=all", f"--remarks-output-file={yaml}"]) == 0
    text = yaml.read_text()
    docs = text.split("--- !")[1:]
    assert len(docs) >= 3 and all(d.rstrip().endswith("...") for d in docs)
    names = re.findall(r"^Name:\s+(\w+)$", text, re.M)
    assert "RemarkMemoryLoadInstructionSelected" in names and "RemarkMemoryStoreInstructionSelected" in names
    assert re.search(r"DebugLoc:\s+\{ File: '.*vadd\.py', Line: 2\d, Column: \d+ \}", text)
    ids = [int(x) for x in re.findall(r"RemarkId:\s+(\d+)", text)]
    assert ids == list(range(1, len(ids) + 1))


def test_command_line_remarks_filtered_by_kind(capsys, tmp_path):
    args = [str(EXAMPLE), "--gpu-name=sm_90", "-o", str(tmp_path / "o.cubin")]
    assert driver.main(args + ["--remarks-passed=memory"]) == 0
    out = capsys.readouterr().out
    assert "remark[passed]: Load instruction selected" in out and "remark[failed]" not in out
    assert driver.main(args) == 0
    assert capsys.readouterr().out == ""  # no remarks unless asked for


def test_option_semantics():
    e = enabled_from_options([("remarks", "memory"), ("remarks_missed", "none")])
    assert e[Kind.PASSED] == {Category.MEMORY} and e[Kind.MISSED] == set()
    assert enabled_from_options([("remarks_failed", "all")])[Kind.FAILED] == set(Category)
