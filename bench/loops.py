"""Which loops we software-pipeline, and why not, over a corpus of bytecode files.

    python bench/loops.py [PATH ...] [--kernels]

PATHs are .tileir files or folders of them (default: ../shared/corpus-aligned and
../shared/corpus beside the repo, else our test kernels exported with cuTile for
sm_80/90/100/120, unaligned and aligned; ``--kernels`` forces the latter).  The architecture is read from the file
name.  Each file is lowered to TileAS (no LLVM, no ptxas): every loop the pipelining passes
decided (tensor-core K loops, attention K/V loops, SIMT streaming loops) has a plan or the
reason it has none (``TileAS.pipelines``).  Prints, per kind of plan and per reason, how many
loops and which files; a file whose NVIDIA PTX sits beside it (``NAME.ptx``, as in the
corpora) and has asynchronous copies (``cp.async``, TMA loads) while ours keeps a loop
synchronous is marked ``NV async``.  A benchmark of coverage, not a test.
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from compile_time import arch_of, collect, export_test_kernels  # noqa: E402

from tileiras.pipeline import CompileOptions, run_stages  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

_ASYNC_LOAD = re.compile(r"cp\.async\.(?:ca|cg)\.|cp\.async\.bulk\.tensor\.\dd\.shared")
SHOWN = 8


def decisions(path: Path, default_arch: str) -> list[str]:
    """The plan kind (class name) or the reason, of each decided loop in the file."""
    arch = arch_of(path, default_arch)
    compiled = run_stages(read_bytecode(path.read_bytes()), CompileOptions(gpu_name=arch), "tileas",
                          only_needed=True)
    return [d if isinstance(d, str) else type(d).__name__
            for tas in compiled.tas.values() for d in tas.pipelines.values()]


def nvidia_async(path: Path) -> bool:
    ptx = path.with_suffix(".ptx")
    return ptx.exists() and bool(_ASYNC_LOAD.search(ptx.read_text(errors="replace")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--kernels", action="store_true", help="our test kernels, exported with cuTile")
    parser.add_argument("--gpu-name", default="sm_90", help="architecture of files whose name has none")
    args = parser.parse_args(argv)
    paths = args.paths
    if not paths and not args.kernels:
        paths = [p for p in (REPO.parent / "shared" / "corpus-aligned", REPO.parent / "shared" / "corpus")
                 if p.exists()]
    if args.kernels or not paths:
        paths = [Path(tempfile.mkdtemp(prefix="loops-"))]
        for aligned in (False, True):
            export_test_kernels(paths[0], aligned=aligned)
    found: dict[str, list[str]] = defaultdict(list)
    failed = 0
    files = collect(paths)
    for path in files:
        try:
            kinds = decisions(path, args.gpu_name)
        except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
            failed += 1
            print(f"{path.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        mark = " (NV async)" if any(not k[:1].isupper() for k in kinds) and nvidia_async(path) else ""
        for kind in kinds:
            found[kind].append(f"{path.parent.name}/{path.name}{mark if not kind[:1].isupper() else ''}")
    planned = sum(len(v) for k, v in found.items() if k[:1].isupper())
    total = sum(len(v) for v in found.values())
    for kind, names in sorted(found.items(), key=lambda kv: (not kv[0][:1].isupper(), -len(kv[1]))):
        print(f"{len(names):5d}  {kind}")
        for name in names[:SHOWN]:
            print(f"         {name}")
        if len(names) > SHOWN:
            print(f"         ... {len(names) - SHOWN} more")
    print(f"\nfiles: {len(files)}   failed: {failed}   loops decided: {total}   pipelined: {planned}   "
          f"not: {total - planned} ({sum('(NV async)' in n for k, v in found.items() for n in v)} "
          "where NVIDIA's PTX has asynchronous copies)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
