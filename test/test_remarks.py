"""--remarks: which memory/tensor-core decisions are reported, in YAML or on the command line."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

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
    # vadd's arrays are not known 16-byte aligned: global-memory loads, and (sm_90 has TMA)
    # why neither the loads nor the store go through TMA, as NVIDIA's tool says it
    assert sorted(set(names)) == ["RemarkMemoryLoadInstructionSelected", "RemarkMemoryTmaLoadFailed",
                                  "RemarkMemoryTmaStoreFailed", "RemarkTensorViewIndexTypeNarrowing"]
    assert len(re.findall(r"base pointer not 16-byte aligned", text)) == 3
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


def _remark_lines(text: str) -> list[str]:
    """The remark headlines, names, notes and reasons of command-line remarks, sorted (the
    index-narrowing remark's bit count included: 33 for vadd, 64 for a GEMM's 2-D views)."""
    keep = [ln.strip() for ln in text.splitlines() if re.match(r"\s*(remark\[|= (name|note|reason):)", ln)]
    return sorted(keep)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_remarks_are_nvidias_for_vadd(arch, real_tileiras, tmp_path, capsys):
    """The same remarks, notes and reasons as NVIDIA's tool, line for line (sm_80: no TMA
    remarks at all; sm_90: each view access's TMA failure with its source location)."""
    import subprocess

    args = [str(EXAMPLE), f"--gpu-name={arch}", "-o", str(tmp_path / "o.cubin"), "--remarks=all"]
    theirs = subprocess.run([real_tileiras, *args], capture_output=True, text=True, check=True)
    assert driver.main(args) == 0
    ours = capsys.readouterr().out
    assert _remark_lines(ours) == _remark_lines(theirs.stdout + theirs.stderr)


@pytest.mark.parametrize("kernel, arch", [
    ("gemm", "sm_90"),                          # unaligned: each access's TMA failure and why
    ("gemm.aligned", "sm_80"),                  # cp.async ring: LDGSTS loads, mma.sync
    ("persistent_gemm_f16.aligned", "sm_90"),   # a TMA ring's loads, the TMA store, wgmma
])
def test_remarks_are_nvidias_for_test_kernels(kernel, arch, tileir_store, real_tileiras, tmp_path, capsys):
    """Line for line, the index-narrowing remarks' bit counts included, where both
    compilers decide alike (not: NVIDIA's tool gives some loads TMA that a cp.async ring of
    ours copies)."""
    import subprocess

    from conftest import VERSIONS

    src = tileir_store.get(f"{kernel}.{arch}.{VERSIONS[-1]}").path
    args = [str(src), f"--gpu-name={arch}", "-o", str(tmp_path / "o.cubin"), "--remarks=all"]
    theirs = subprocess.run([real_tileiras, *args], capture_output=True, text=True, check=True)
    assert driver.main(args) == 0
    ours = capsys.readouterr().out
    # our own remarks (software pipelining) are additions NVIDIA's tool does not make
    blocks = re.split(r"\n(?=\s*remark\[)", ours)
    ours = "\n".join(b for b in blocks if "software-pipelined" not in (b.strip().splitlines() or [""])[0])
    assert _remark_lines(ours) == _remark_lines(theirs.stdout + theirs.stderr)


def _view_bits(text: str, arch: str) -> list[int]:
    """``remarks.index_bits`` of each tensor view of the kernel, with TileAS's facts and plans."""
    from tileiras.pipeline import CompileOptions, run_stages
    from tileiras.remarks import index_bits, view_accesses
    from tileiras.text.parser import parse_module
    from tileiras.tile import ops_memory as MEM

    module = parse_module(text, "k.mlir")
    fn = module.functions[0]
    tas = run_stages(module, CompileOptions(gpu_name=arch), "tileas", only_needed=True).tas[fn.name]
    accesses = view_accesses(fn)
    return [index_bits(op, accesses.get(op, ()), tas) for op in fn.walk() if isinstance(op, MEM.MakeTensorViewOp)]


def test_the_narrowing_remark_counts_the_bits_of_the_largest_offset():
    """A sign bit plus the largest element offset a view's accesses reach: the sum over its
    dims of (shape - 1 + tile) x stride, i32 shapes and strides at their largest (facts'
    bounds, else 2^31 - 1).  A GEMM's dynamic 2-D views need 64 (their 64x32 tiles reach
    past 2^62); bounded ones fit i32 (no remark, as NVIDIA's tool narrows them); on sm_90 a TMA ring's boxes still
    count (their coordinates step with the K loop, as NVIDIA's tool counts them) while the
    C tile's TMA store outside any loop computes no index."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from kernels.pipelined import gemm_loop

    assert _view_bits(gemm_loop(64, 64, 32), "sm_80") == [64, 64, 64]
    text = gemm_loop(64, 64, 32)
    for v in ("%a_d0", "%a_d1", "%a_s0"):
        text = text.replace(f"assume div_by<16>, {v} :", f"assume bounded<0, 1000>, {v} :")
    # (1000 - 1 + 64) x 1000 + (1000 - 1 + 32) x 1 = 1064031: 21 bits and a sign, i32 enough
    assert _view_bits(text, "sm_80")[0] == 22
    assert _view_bits(gemm_loop(64, 64, 64), "sm_90") == [64, 64, 0]
