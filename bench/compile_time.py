"""Compile time of our tileiras against NVIDIA's, file by file, in the same run.

    python bench/compile_time.py [PATH ...] [--repeat N] [--limit N] [--every K] [--in-process]
                                 [--match REGEX] [--kernels] [--math]

PATHs are .tileir files or folders of them.  Default: ../shared/corpus beside the repo if it
exists (and no --kernels), else our own test kernels exported with cuTile for sm_80, sm_90,
sm_100 and sm_120 into a temporary folder.  The architecture is read from the file name
(``<name>.sm_XX.<version>.tileir``), else --gpu-name.

Both compilers are timed the way cuTile uses them: one process per file, bytecode in, cubin
out (``tileiras FILE --gpu-name sm_XX -o OUT``), so our time includes Python's start-up and
imports.  Runs alternate between the two tools; each time is the best of --repeat.  Our
process runs without PYTHONDONTWRITEBYTECODE so cached .pyc files are used, as on a user's
machine.  By default our commands are served by tileiras' compile server (started by the
warm-up run, as the first command of a build starts it); --cold adds a column with the
server turned off (TILEIRAS_SERVER=0: start-up and every import paid per file).
--in-process adds our time inside this process (read + compile to cubin), which leaves out
start-up.  --match keeps the files (or test kernels) whose name the regular expression
matches; --math adds the held-out math kernels (``test/kernels/math_ops.py``) to the test
kernels.  Targets: median ratio (ours / NVIDIA's) <= 1.0, max <= 2.0.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tileiras.tools import find_tileiras, is_native_executable  # noqa: E402

ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")
TARGET_MEDIAN, TARGET_MAX = 1.0, 2.0
_ARCH_IN_NAME = re.compile(r"\.(sm_\d+)\.")


@dataclass
class Row:
    name: str
    arch: str
    real: Optional[float]
    ours: Optional[float]
    in_process: Optional[float] = None
    cold: Optional[float] = None
    error: str = ""

    @property
    def ratio(self) -> Optional[float]:
        return None if self.real is None or self.ours is None else self.ours / self.real

    @property
    def cold_ratio(self) -> Optional[float]:
        return None if self.real is None or self.cold is None else self.cold / self.real


def collect(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        files.extend(sorted(p.glob("*.tileir")) if p.is_dir() else [p])
    return files


def export_test_kernels(folder: Path, archs: tuple[str, ...] = ARCHS,
                        versions: tuple[str, ...] = (), match: Optional[re.Pattern] = None,
                        math: bool = False, aligned: bool = False) -> list[Path]:
    """Our test kernels per architecture, at each of ``versions`` (default: the newest
    bytecode version cuTile writes), those whose name ``match`` finds, with the held-out
    math kernels when ``math``; ``aligned``: with the signatures cuTile gives framework
    tensors (``.aligned`` in the file names) instead of unaligned ones; needs cuda-tile, no GPU."""
    import io
    import warnings

    import cuda.tile as ct
    from cuda.tile.compilation import export_kernel

    sys.path.insert(0, str(REPO / "test"))
    from conftest import newest_cutile_version
    from kernels import ALL_CASES, math_ops

    versions = versions or (newest_cutile_version(),)
    out: list[Path] = []
    warnings.simplefilter("ignore")
    cases = ALL_CASES + (math_ops.CASES if math else ())
    for case in cases:
        if match is not None and not match.search(case.name):
            continue
        for arch in archs:
            for version in versions:
                buf = io.BytesIO()
                try:
                    export_kernel(case.kernel, case.signatures(aligned=aligned), buf, gpu_code=arch,
                                  output_format="tileir_bytecode", bytecode_version=version)
                except ct.TileUnsupportedFeatureError:
                    continue
                path = folder / f"{case.name}{'.aligned' if aligned else ''}.{arch}.{version}.tileir"
                path.write_bytes(buf.getvalue())
                out.append(path)
    return out


def our_command() -> list[str]:
    """Our console script beside this interpreter, else the driver through ``python -c``."""
    script = Path(sys.executable).parent / "tileiras"
    if script.is_file() and not is_native_executable(script):
        return [str(script)]
    return [sys.executable, "-c", "import sys; from tileiras.launch import main; sys.exit(main())"]


def user_environment(server: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["TILEIRAS_SERVER"] = "1" if server else "0"
    return env


def timed_run(argv: list[str], env: Optional[dict[str, str]] = None) -> tuple[float, Optional[str]]:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=env, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return elapsed, f"rc={proc.returncode}: {lines[-1] if lines else ''}"
    return elapsed, None


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def time_in_process(data: bytes, arch: str, repeat: int) -> Optional[float]:
    from tileiras.pipeline import CompileOptions, compile_module
    from tileiras.reader import read_bytecode

    try:
        return best_of(repeat, lambda: compile_module(read_bytecode(data), CompileOptions(gpu_name=arch)))
    except Exception:  # noqa: BLE001 - the subprocess run already reported the failure
        return None


def measure(path: Path, arch: str, real_tool: str, ours: list[str], repeat: int, in_process: bool,
            tmp: Path, cold: bool = False) -> Row:
    ours_argv = [*ours, str(path), "--gpu-name", arch, "-o", str(tmp / "ours.cubin")]
    tools = {"nvidia": ([real_tool, str(path), "--gpu-name", arch, "-o", str(tmp / "real.cubin")], None),
             "ours": (ours_argv, user_environment())}
    if cold:
        tools["cold"] = (ours_argv, user_environment(server=False))
    times: dict[str, list[float]] = {label: [] for label in tools}
    errors: list[str] = []
    for _ in range(repeat):  # alternate, so drifts in machine load hit both tools alike
        for label, (argv, env) in tools.items():
            t, err = timed_run(argv, env)
            if err is None:
                times[label].append(t)
            else:
                errors.append(f"{label} {err}")
        if errors:
            break
    real_times, our_times = times["nvidia"], times["ours"]
    row = Row(path.name, arch, min(real_times, default=None), min(our_times, default=None),
              cold=min(times.get("cold", []), default=None), error=errors[0] if errors else "")
    if in_process and row.ours is not None:
        row.in_process = time_in_process(path.read_bytes(), arch, repeat)
    return row


def fmt_ms(t: Optional[float]) -> str:
    return "-" if t is None else f"{t * 1e3:.1f}"


def print_summary(rows: list[Row], wall: float) -> None:
    ratios = sorted((r.ratio, r.name) for r in rows if r.ratio is not None)
    failed = [r for r in rows if r.error]
    print()
    print(f"files: {len(rows)}   compared: {len(ratios)}   failed: {len(failed)}   bench wall time: {wall:.0f} s")
    for r in failed[:20]:
        print(f"  FAILED {r.name}: {r.error}")
    if not ratios:
        return
    values = [v for v, _ in ratios]
    median, worst = statistics.median(values), ratios[-1]
    geo = statistics.geometric_mean(values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    real_total = sum(r.real for r in rows if r.ratio is not None)
    our_total = sum(r.ours for r in rows if r.ratio is not None)
    print(f"{'ratio ours/nvidia':24} {'value':>8}  target")
    print(f"{'median':24} {median:8.2f}  <= {TARGET_MEDIAN:.1f}  {'ok' if median <= TARGET_MEDIAN else 'MISSED'}")
    print(f"{'max':24} {worst[0]:8.2f}  <= {TARGET_MAX:.1f}  {'ok' if worst[0] <= TARGET_MAX else 'MISSED'}"
          f"  ({worst[1]})")
    print(f"{'p90':24} {p90:8.2f}")
    print(f"{'geometric mean':24} {geo:8.2f}")
    print(f"{'total (sum of bests)':24} {our_total / real_total:8.2f}  ours {our_total:.1f} s, nvidia {real_total:.1f} s")
    cold = sorted(r.cold_ratio for r in rows if r.cold_ratio is not None)
    if cold:
        print(f"{'cold median, max':24} {statistics.median(cold):8.2f}  {cold[-1]:.2f}  (TILEIRAS_SERVER=0)")
    ratios_ip = [r.in_process / r.real for r in rows if r.in_process is not None and r.real]
    if ratios_ip:
        print(f"{'median in-process ratio':24} {statistics.median(ratios_ip):8.2f}  (no interpreter start-up)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs per tool (default 3)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N files")
    parser.add_argument("--every", type=int, default=1, help="only every K-th file (a quick sample)")
    parser.add_argument("--gpu-name", default="sm_90", help="when the file name has no sm_XX")
    parser.add_argument("--in-process", action="store_true", help="also time ours inside this process")
    parser.add_argument("--cold", action="store_true", help="also time ours with the compile server off")
    parser.add_argument("--kernels", action="store_true",
                        help="use our exported test kernels even if ../shared/corpus exists")
    parser.add_argument("--math", action="store_true",
                        help="with --kernels: add the held-out math kernels (test/kernels/math_ops.py)")
    parser.add_argument("--match", type=re.compile, default=None,
                        help="only files (test kernels) whose name this regular expression matches")
    args = parser.parse_args()

    real_tool = find_tileiras()
    if real_tool is None:
        print("NVIDIA's tileiras not found (pip install nvidia-cuda-tileiras)", file=sys.stderr)
        return 1
    ours = our_command()
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as tmp_name:
        tmp = Path(tmp_name)
        corpus = REPO.parent / "shared" / "corpus"
        paths = args.paths or ([corpus] if corpus.is_dir() and not args.kernels else [])
        if paths:
            files = [f for f in collect(paths) if args.match is None or args.match.search(f.name)]
        else:
            files = export_test_kernels(tmp, match=args.match, math=args.math)
        files = files[::max(1, args.every)]
        if args.limit:
            files = files[:args.limit]
        if not files:
            print("no .tileir files", file=sys.stderr)
            return 1
        print(f"nvidia: {real_tool}\nours:   {' '.join(ours)}\n{len(files)} files, best of {args.repeat}\n")
        warm = files[0]  # first runs fill the page cache and our .pyc files, and start our server
        for argv in ([real_tool, str(warm)], [*ours, str(warm)], [*ours, str(warm)]):
            timed_run([*argv, "--gpu-name", arch_of(warm, args.gpu_name), "-o", str(tmp / "warm.cubin")],
                      user_environment())
            time.sleep(0.5)  # the server imports everything before it answers
        header = f"{'file':58} {'arch':>6} {'nvidia ms':>9} {'ours ms':>9} {'ratio':>6}"
        header += f" {'cold ms':>9} {'ratio':>6}" if args.cold else ""
        print(header + (f" {'in-proc ms':>10}" if args.in_process else ""))
        rows = []
        start = time.perf_counter()
        for path in files:
            arch = arch_of(path, args.gpu_name)
            row = measure(path, arch, real_tool, ours, args.repeat, args.in_process, tmp, args.cold)
            rows.append(row)
            ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
            line = f"{path.name[:58]:58} {arch:>6} {fmt_ms(row.real):>9} {fmt_ms(row.ours):>9} {ratio:>6}"
            if args.cold:
                cold_ratio = "-" if row.cold_ratio is None else f"{row.cold_ratio:.2f}"
                line += f" {fmt_ms(row.cold):>9} {cold_ratio:>6}"
            if args.in_process:
                line += f" {fmt_ms(row.in_process):>10}"
            print(line + (f"  {row.error}" if row.error else ""), flush=True)
        print_summary(rows, time.perf_counter() - start)
    return 0


def arch_of(path: Path, default: str) -> str:
    m = _ARCH_IN_NAME.search(path.name)
    return m.group(1) if m else default


if __name__ == "__main__":
    sys.exit(main())
