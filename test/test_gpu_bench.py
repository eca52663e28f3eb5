"""bench/gpu.py without a GPU: the plan step's cubins are what each ``tileiras`` writes, and
the run step's dry run (the interpreter in the GPU's place) checks every planned kernel
without importing llvmlite; the output checks catch unwritten and wrong outputs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cuda.tile")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_problems  # noqa: E402

SELECTION = "axpy_2e28,rmsnorm_8192,gemm_bf16_4096,grouped_gemm_f16_8x2048"
#: a variant: axpy compiled again with a knob that does not change it (its cubin must not either)
VARIANT = "nostream:TILEIRAS_TMA_STREAM=0@axpy_2e28"
PLANNED = ["gemm_bf16_4096", "grouped_gemm_f16_8x2048", "rmsnorm_8192", "axpy_2e28", "axpy_2e28@nostream"]


@pytest.fixture(scope="session")
def planned(tmp_path_factory, real_tileiras) -> Path:
    folder = tmp_path_factory.mktemp("plan")
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu.py"), "plan", str(folder), "--only", SELECTION,
                          "--variant", VARIANT],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    return folder


@pytest.mark.xdist_group("gpu-plan")     # one worker plans (the session fixture) for both
def test_plan_writes_what_each_tileiras_writes(planned, real_tileiras, tmp_path):
    from tileiras import driver

    manifest = json.loads((planned / "manifest.json").read_text())
    assert [k["name"] for k in manifest["kernels"]] == PLANNED
    for k in manifest["kernels"]:
        assert k["compile_errors"] == {}
        src = planned / k["bytecode"]
        ours, nv = tmp_path / "ours.cubin", tmp_path / "nv.cubin"
        assert driver.main([str(src), "--gpu-name=sm_90", "-O3", "-o", str(ours)]) == 0
        subprocess.run([real_tileiras, "--gpu-name=sm_90", "-O3", str(src), "-o", str(nv)], check=True)
        assert (planned / k["cubins"]["ours"]).read_bytes() == ours.read_bytes()
        assert (planned / k["cubins"]["nvidia"]).read_bytes() == nv.read_bytes()
    assert manifest["kernels"][3]["signature"] == ["ptr", "i32", "i32", "ptr", "i32", "i32", "ptr", "i32", "i32", "f32"]
    assert manifest["kernels"][1]["signature"] == ["ptr", "i32"] * 3       # each list: its table, its length
    variant = manifest["kernels"][4]
    assert variant["variant"] == {"TILEIRAS_TMA_STREAM": "0"} and variant["bytecode"] == "axpy_2e28.tileir"
    assert variant["cubins"] == {"ours": "axpy_2e28@nostream.ours.cubin", "nvidia": "axpy_2e28.nvidia.cubin"}
    assert sum(f.stat().st_size for f in planned.iterdir()) < 1 << 20


@pytest.mark.xdist_group("gpu-plan")     # one worker plans (the session fixture) for both
def test_dry_run_checks_every_kernel_without_llvmlite(planned, tmp_path):
    """The run step as the GPU machine runs it, with llvmlite made unimportable."""
    script = (f"import sys, runpy; sys.modules['llvmlite'] = None; "
              f"sys.argv = ['gpu.py', 'run', {str(planned)!r}, '--dry-run', '--log-dir', {str(tmp_path)!r}]; "
              f"runpy.run_path({str(ROOT / 'bench' / 'gpu.py')!r}, run_name='__main__')")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.strip().splitlines()
    table = [line.split() for line in lines if line.split()[:1] and line.split()[0] in PLANNED
             and not line.split()[1].endswith(":")]  # the log lines read "<kernel> ours: ..."
    assert [row[0] for row in table] == PLANNED, run.stdout
    assert all(row[-1] == "yes/yes" for row in table), run.stdout
    assert lines[-1].startswith("dry run:")  # the table and its notes come last
    assert (tmp_path / "gpu-bench.log").read_text().count("correct=yes") == 10


def test_checks_catch_unwritten_and_wrong_outputs():
    p = {"dtype": "f16", "rows": 8, "N": 64}
    family = gpu_problems.RMSNORM
    data = family.inputs(p, np.random.default_rng(0))
    data["out"][:] = gpu_problems._rmsnorm(data, data["x"].astype(np.float64)).astype(np.float16)
    assert gpu_problems.check(p, family, data)[0]
    data["out"][3, 5] *= 1.5
    data["out"][4] = 0
    ok, why = gpu_problems.check(p, family, data)
    assert not ok and "relative error" in why
    data["out"].reshape(-1).view(np.uint8)[7 * 64 * 2:] = 0xFF  # the last row left poisoned
    ok, why = gpu_problems.check(p, family, data)
    assert not ok and why.startswith("64 of 512 elements of 'out' unwritten")


def test_list_parameters_pass_a_table_of_their_members():
    """A grouped GEMM's lists reach the kernel as cuTile passes them: per list the device
    address of a table (a row per member: its address, shape, strides in elements), then
    the list's length."""
    import gpu_run

    p = {"dtype": "f16", "G": 3, "M": 32, "N": 16, "K": 48, "BM": 16, "BN": 16}
    family = gpu_problems.GROUPED_GEMM
    data = family.inputs(p, np.random.default_rng(0))
    address = {id(a): 0x1000 * (i + 1) for i, a in enumerate(data.values())}
    tables: list = []

    def table(rows: np.ndarray) -> int:
        tables.append(rows.copy())
        return 0xdead0000 + len(tables)

    values = gpu_run.kernel_values(family.args(p, data), lambda a: address[id(a)], table)
    assert values == [0xdead0001, 3, 0xdead0002, 3, 0xdead0003, 3]
    b_rows = tables[1]
    assert b_rows.tolist() == [[address[id(data[f"b{g}"])], 48, 16, 16, 1] for g in range(3)]
    assert gpu_problems.outputs_of(family, p) == ("c0", "c1", "c2") and family.grid(p) == (2, 1, 3)


def test_a_variant_spec_is_parsed_or_refused_in_one_line():
    import gpu  # noqa: PLC0415

    assert gpu.parse_variant("w8:TILEIRAS_A=1,TILEIRAS_B=x@k1+k2") == ("w8", {"TILEIRAS_A": "1", "TILEIRAS_B": "x"},
                                                                     {"k1", "k2"})
    with pytest.raises(SystemExit, match="expected SUFFIX:VAR=VALUE"):
        gpu.parse_variant("w8:TILEIRAS_A")
