"""Time our disassembler (read_bytecode + print_module) against NVIDIA's tileirdisasm.

    python bench/disasm.py [PATH ...] [-g] [--repeat N] [--limit N]

PATHs are .tileir files or folders of them.  Default: ../shared/corpus beside the repo if
it exists (and no --kernels), else our own test kernels exported with cuTile into a temporary folder.
Ours is timed in-process; NVIDIA's is a subprocess per file (that is how it is used), so
the ratio includes its process start-up.  Each time is the best of --repeat runs.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tileiras.tools import find_tileirdisasm  # noqa: E402


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def collect(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        files.extend(sorted(p.glob("*.tileir")) if p.is_dir() else [p])
    return files


def export_test_kernels(folder: Path) -> list[Path]:
    """Our test kernels, exported for sm_90 at 13.1 and 13.4 (needs cuda-tile, no GPU)."""
    import io
    import warnings

    import cuda.tile as ct
    from cuda.tile.compilation import export_kernel

    sys.path.insert(0, str(REPO / "test"))
    from kernels import ALL_CASES

    out: list[Path] = []
    warnings.simplefilter("ignore")
    for case in ALL_CASES:
        for version in ("13.1", "13.4"):
            buf = io.BytesIO()
            try:
                export_kernel(case.kernel, case.signatures(), buf, gpu_code="sm_90",
                              output_format="tileir_bytecode", bytecode_version=version)
            except ct.TileUnsupportedFeatureError:
                continue
            path = folder / f"{case.name}.sm_90.{version}.tileir"
            path.write_bytes(buf.getvalue())
            out.append(path)
    return out


def time_ours(data: bytes, debug_info: bool, repeat: int) -> Optional[float]:
    from tileiras.errors import TileIRError
    from tileiras.reader import read_bytecode
    from tileiras.text.printer import print_module

    try:
        return best_of(repeat, lambda: print_module(read_bytecode(data), debug_info=debug_info))
    except Exception as e:  # noqa: BLE001 - a file we cannot read yet: report it, keep going
        kind = "" if isinstance(e, TileIRError) else f"{type(e).__name__}: "
        print(f"    ours failed: {kind}{e}", file=sys.stderr)
        return None


def time_real(tool: str, path: Path, debug_info: bool, repeat: int) -> float:
    argv = [tool, *(["-g"] if debug_info else []), str(path)]
    return best_of(repeat, lambda: subprocess.run(argv, capture_output=True, check=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("-g", dest="debug_info", action="store_true", help="print debug info")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--limit", type=int, default=0, help="only the first N files")
    parser.add_argument("--kernels", action="store_true",
                        help="use our exported test kernels even if ../shared/corpus exists")
    args = parser.parse_args()

    tool = find_tileirdisasm()
    if tool is None:
        print("NVIDIA's tileirdisasm not found (pip install nvidia-cuda-tileiras)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        corpus = REPO.parent / "shared" / "corpus"
        paths = args.paths or ([corpus] if corpus.is_dir() and not args.kernels else [])
        files = collect(paths) if paths else export_test_kernels(Path(tmp))
        if args.limit:
            files = files[:args.limit]
        ratios = []
        print(f"{'file':60} {'ours ms':>9} {'nvidia ms':>9} {'ratio':>7}")
        for path in files:
            ours = time_ours(path.read_bytes(), args.debug_info, args.repeat)
            real = time_real(tool, path, args.debug_info, args.repeat)
            ratio = None if ours is None else ours / real
            if ratio is not None:
                ratios.append(ratio)
            shown = "-" if ours is None else f"{ours * 1e3:9.2f}"
            print(f"{path.name[:60]:60} {shown:>9} {real * 1e3:9.2f} "
                  f"{'-' if ratio is None else f'{ratio:7.2f}':>7}")
        if ratios:
            print(f"median ratio (ours / nvidia) over {len(ratios)} of {len(files)} files: "
                  f"{statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
