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
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from compile_time import best_of, collect, export_test_kernels  # noqa: E402
from tileiras.tools import find_tileirdisasm  # noqa: E402


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
        files = collect(paths) if paths else export_test_kernels(Path(tmp), ("sm_90",), ("13.1", "13.4"))
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
