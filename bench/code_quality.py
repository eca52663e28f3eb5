"""Static code quality of our cubins against NVIDIA's, kernel by kernel.

    python bench/code_quality.py [PATH ...] [--limit N] [--every K] [--jobs N] [--all]

PATHs are .tileir files or folders of them (default: ../shared/corpus beside the repo if it
exists, else our test kernels exported with cuTile for sm_80/90/100/120); the architecture is
read from the file name.  For each file:

* NVIDIA's tileiras builds the cubin with ``--lineinfo``; registers and static shared memory
  come from the cubin (``stats_from_cubin``), its PTX from ``.nv_debug_ptx_txt``, and spills
  from ``ptxas -v`` on that PTX (the real tool's ptxas flags);
* ours compiles to PTX, which ptxas assembles with the same flags plus ``-v``;
* in both PTXs, global loads and stores are counted by vector width (``.v4``, ``.v2``,
  scalar) and by access size (128-bit accesses), plus asynchronous copies (cp.async, TMA
  loads, stores and reductions).

A kernel is flagged REGS when ours uses more than NVIDIA's registers + 10%, SPILL when ours
spills, NO128 when NVIDIA's PTX has 128-bit global accesses and ours has none.  The table
lists flagged kernels (every kernel with --all), then a summary.  A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from compile_time import arch_of, collect, export_test_kernels  # noqa: E402

from tileiras.codegen.ptxas import KernelStats, PtxasError, invoke_ptxas, stats_from_cubin  # noqa: E402
from tileiras.emulate.cubin import ptx_from_cubin  # noqa: E402
from tileiras.tools import find_tileiras  # noqa: E402

REG_SLACK = 1.10
_GLOBAL_ACCESS = re.compile(r"^(?:@!?%\w+\s+)?(ld|st)\.global((?:\.[\w:]+)*)\s")
_ASYNC_COPY = re.compile(r"^(?:@!?%\w+\s+)?cp\.(?:reduce\.)?async(\.bulk)?\b")
_TYPE_BITS = re.compile(r"^[bsuf](8|16|32|64|128)$")
_ENTRY_NAME = re.compile(r"\.entry\s+([\w$.]+)")
_TRAILER = re.compile(r"^\.(?:section|nv_intermediate_source_section)\b", re.M)


@dataclass
class Accesses:
    """Static counts of global memory instructions in a PTX module."""

    counts: Counter = field(default_factory=Counter)  # ("ld"|"st", "v4"|"v2"|"s") -> n
    bits128: int = 0
    async_copies: int = 0

    def text(self, op: str) -> str:
        c = self.counts
        return f"{c[op, 'v4']}/{c[op, 'v2']}/{c[op, 's']}"


def count_accesses(ptx: str) -> Accesses:
    acc = Accesses()
    for line in _statements(ptx):
        if _ASYNC_COPY.match(line):
            acc.async_copies += 1
            continue
        m = _GLOBAL_ACCESS.match(line)
        if not m:
            continue
        mods = m.group(2).split(".")[1:]
        lanes = next((int(x[1:]) for x in mods if x in ("v2", "v4", "v8")), 1)
        bits = next((int(t.group(1)) for x in mods if (t := _TYPE_BITS.match(x))), 32)
        acc.counts[m.group(1), {4: "v4", 8: "v4", 2: "v2"}.get(lanes, "s")] += 1
        if lanes * bits >= 128:
            acc.bits128 += 1
    return acc


def _statements(ptx: str):
    """Each PTX statement on its own (inline asm puts several on one line)."""
    for raw in ptx.splitlines():
        for part in raw.split("//", 1)[0].split(";"):
            stmt = part.strip().strip("{}").strip()
            if stmt:
                yield stmt


def assemblable(ptx: str) -> str:
    """NVIDIA's PTX from ``.nv_debug_ptx_txt`` without the debug trailer ptxas cannot re-read
    (the Tile IR source section and the emptied ``.section .debug_*`` blocks)."""
    m = _TRAILER.search(ptx)
    return ptx[:m.start()] if m else ptx


@dataclass
class Side:
    stats: dict[str, KernelStats] = field(default_factory=dict)
    accesses: Accesses = field(default_factory=Accesses)
    error: str = ""


@dataclass
class FileResult:
    path: Path
    arch: str
    real: Side
    ours: Side


def run_real(tool: str, path: Path, arch: str) -> tuple[Side, str]:
    """NVIDIA's cubin statistics and its PTX (assembled again with -v for spills)."""
    with tempfile.TemporaryDirectory(prefix="bench-quality-") as tmp:
        cubin_path = Path(tmp) / "k.cubin"
        proc = subprocess.run([tool, str(path), "--gpu-name", arch, "--lineinfo", "-o", str(cubin_path)],
                              capture_output=True, text=True, errors="replace", check=False)
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            return Side(error=f"nvidia rc={proc.returncode}: {lines[-1] if lines else ''}"), ""
        cubin = cubin_path.read_bytes()
    ptx = ptx_from_cubin(cubin) or ""
    side = Side(stats=stats_from_cubin(cubin), accesses=count_accesses(ptx))
    try:
        verbose = invoke_ptxas(assemblable(ptx), arch, 3, verbose=True).stats
        side.stats = {k: KernelStats(registers=s.registers, shared_memory=s.shared_memory,
                                     stack_frame=verbose[k].stack_frame, spill_stores=verbose[k].spill_stores,
                                     spill_loads=verbose[k].spill_loads) if k in verbose else s
                      for k, s in side.stats.items()}
    except PtxasError as err:
        side.error = f"nvidia PTX does not re-assemble (no spill counts): {err.log.strip()[:120]}"
    return side, ptx


def our_ptx(path: Path, arch: str) -> tuple[Optional[str], str]:
    from tileiras.pipeline import CompileOptions, compile_module
    from tileiras.reader import read_bytecode

    try:
        return compile_module(read_bytecode(path.read_bytes()), CompileOptions(gpu_name=arch), "ptx"), ""
    except Exception as err:  # noqa: BLE001 - report and keep going
        return None, f"ours: {type(err).__name__}: {str(err).strip().splitlines()[0][:120] if str(err) else ''}"


def assemble_ours(ptx: Optional[str], arch: str, error: str) -> Side:
    if ptx is None:
        return Side(error=error)
    try:
        return Side(stats=invoke_ptxas(ptx, arch, 3, verbose=True).stats, accesses=count_accesses(ptx))
    except PtxasError as err:
        return Side(error=f"ours: ptxas failed: {err.log.strip().splitlines()[0][:120] if err.log else ''}")


# --------------------------------------------------------------------------- report

@dataclass
class KernelRow:
    file: str
    arch: str
    kernel: str
    real: KernelStats
    ours: KernelStats
    real_acc: Accesses
    our_acc: Accesses

    @property
    def reg_ratio(self) -> Optional[float]:
        return self.ours.registers / self.real.registers if self.real.registers else None

    @property
    def flags(self) -> list[str]:
        out = []
        if self.ours.registers > self.real.registers * REG_SLACK:
            out.append("REGS")
        if self.ours.spill_stores or self.ours.spill_loads:
            out.append("SPILL")
        if self.real_acc.bits128 and not self.our_acc.bits128:
            out.append("NO128")
        return out


def kernel_rows(results: list[FileResult]) -> list[KernelRow]:
    rows = []
    for r in results:
        if r.real.error and not r.real.stats or r.ours.error:
            continue
        for name, real in r.real.stats.items():
            ours = r.ours.stats.get(name)
            if ours is not None:
                rows.append(KernelRow(r.path.name, r.arch, name, real, ours, r.real.accesses, r.ours.accesses))
    return rows


def print_table(rows: list[KernelRow], show_all: bool) -> None:
    shown = [r for r in rows if show_all or r.flags]
    print(f"{'file':46} {'arch':>6} {'regs nv/ours':>12} {'ratio':>5} {'spill nv/ours':>13} "
          f"{'smem nv/ours':>13} {'ld v4/v2/s nv':>13} {'ours':>9} {'st v4/v2/s nv':>13} {'ours':>9} "
          f"{'128b nv/ours':>12} {'async':>7}  flags")
    for r in shown:
        ratio = "-" if r.reg_ratio is None else f"{r.reg_ratio:.2f}"
        spills = f"{r.real.spill_stores + r.real.spill_loads}/{r.ours.spill_stores + r.ours.spill_loads}"
        print(f"{r.file[:46]:46} {r.arch:>6} {f'{r.real.registers}/{r.ours.registers}':>12} {ratio:>5} "
              f"{spills:>13} {f'{r.real.shared_memory}/{r.ours.shared_memory}':>13} "
              f"{r.real_acc.text('ld'):>13} {r.our_acc.text('ld'):>9} {r.real_acc.text('st'):>13} "
              f"{r.our_acc.text('st'):>9} {f'{r.real_acc.bits128}/{r.our_acc.bits128}':>12} "
              f"{f'{r.real_acc.async_copies}/{r.our_acc.async_copies}':>7}  {' '.join(r.flags)}")


def print_summary(results: list[FileResult], rows: list[KernelRow], wall: float) -> None:
    failed = [(r.path.name, r.ours.error or r.real.error) for r in results
              if r.ours.error or (r.real.error and not r.real.stats)]
    warned = [(r.path.name, r.real.error) for r in results if r.real.error and r.real.stats]
    print()
    print(f"files: {len(results)}   kernels compared: {len(rows)}   files failed: {len(failed)}   "
          f"wall time: {wall:.0f} s")
    for name, err in failed[:25]:
        print(f"  FAILED {name}: {err}")
    if len(failed) > 25:
        print(f"  ... {len(failed) - 25} more")
    for name, err in warned[:5]:
        print(f"  note {name}: {err}")
    if not rows:
        return
    ratios = [r.reg_ratio for r in rows if r.reg_ratio is not None]
    worst = max(rows, key=lambda r: r.reg_ratio or 0)
    flags = Counter(f for r in rows for f in r.flags)
    print(f"registers ours/nvidia: median {statistics.median(ratios):.2f}, "
          f"geometric mean {statistics.geometric_mean(ratios):.2f}, max {max(ratios):.2f} "
          f"({worst.file} {worst.kernel[:40]}), min {min(ratios):.2f}")
    print(f"kernels over nvidia+10% registers (REGS): {flags['REGS']} of {len(rows)}")
    print(f"kernels that spill (SPILL): ours {flags['SPILL']}, nvidia "
          f"{sum(1 for r in rows if r.real.spill_stores or r.real.spill_loads)}")
    print(f"kernels without the 128-bit global accesses nvidia has (NO128): {flags['NO128']} "
          f"(nvidia has some in {sum(1 for r in rows if r.real_acc.bits128)})")
    smem = [(r.ours.shared_memory, r.real.shared_memory) for r in rows]
    print(f"static shared memory: ours more in {sum(o > n for o, n in smem)}, less in "
          f"{sum(o < n for o, n in smem)}, equal in {sum(o == n for o, n in smem)}")
    for op in ("ld", "st"):
        nv = Counter({k: sum(r.real_acc.counts[op, k] for r in _per_file(rows)) for k in ("v4", "v2", "s")})
        ou = Counter({k: sum(r.our_acc.counts[op, k] for r in _per_file(rows)) for k in ("v4", "v2", "s")})
        print(f"global {op} instructions v4/v2/scalar: nvidia {nv['v4']}/{nv['v2']}/{nv['s']}, "
              f"ours {ou['v4']}/{ou['v2']}/{ou['s']}")
    by_arch: dict[str, list[float]] = {}
    for r in rows:
        if r.reg_ratio is not None:
            by_arch.setdefault(r.arch, []).append(r.reg_ratio)
    print("median register ratio by arch: " + ", ".join(
        f"{a} {statistics.median(v):.2f}" for a, v in sorted(by_arch.items())))


def _per_file(rows: list[KernelRow]) -> list[KernelRow]:
    """One row per file (access counts are per PTX module, not per kernel)."""
    seen, out = set(), []
    for r in rows:
        if (r.file, r.arch) not in seen:
            seen.add((r.file, r.arch))
            out.append(r)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--limit", type=int, default=0, help="only the first N files")
    parser.add_argument("--every", type=int, default=1, help="only every K-th file (a quick sample)")
    parser.add_argument("--gpu-name", default="sm_90", help="when the file name has no sm_XX")
    parser.add_argument("--jobs", type=int, default=4, help="parallel NVIDIA/ptxas runs")
    parser.add_argument("--all", action="store_true", help="list every kernel, not only flagged ones")
    parser.add_argument("--kernels", action="store_true",
                        help="use our exported test kernels even if ../shared/corpus exists")
    args = parser.parse_args()

    tool = find_tileiras()
    if tool is None:
        print("NVIDIA's tileiras not found (pip install nvidia-cuda-tileiras)", file=sys.stderr)
        return 1
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-quality-") as tmp:
        corpus = REPO.parent / "shared" / "corpus"
        paths = args.paths or ([corpus] if corpus.is_dir() and not args.kernels else [])
        files = collect(paths) if paths else export_test_kernels(Path(tmp))
        files = files[::max(1, args.every)]
        if args.limit:
            files = files[:args.limit]
        archs = [arch_of(p, args.gpu_name) for p in files]
        print(f"{len(files)} files; NVIDIA's tileiras: {tool}", flush=True)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            real = list(pool.map(lambda pa: run_real(tool, *pa), zip(files, archs)))
            ours_ptx = [our_ptx(p, a) for p, a in zip(files, archs)]  # in-process, one at a time
            ours = list(pool.map(lambda x: assemble_ours(x[0][0], x[1], x[0][1]), zip(ours_ptx, archs)))
    results = [FileResult(p, a, r[0], o) for p, a, r, o in zip(files, archs, real, ours)]
    rows = kernel_rows(results)
    print_table(rows, args.all)
    print_summary(results, rows, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
