"""tileiras-diffcheck over a corpus: how many files agree, ours and NVIDIA's.

    python bench/diffcheck_corpus.py [FOLDER] [--arch sm_80 --arch sm_90] [--version 13.4] [--only NAME]

For every ``NAME.<arch>.<version>.tileir`` in FOLDER (default: ../shared/corpus-aligned
beside the repo), NVIDIA's tileiras compiles the bytecode with ``--lineinfo`` (its cubin
carries the PTX and the ``.nv.host`` object that fills hidden tensor maps and the tensor-map
workspace), then ``diffcheck.check_module`` runs the interpreter, our PTX and NVIDIA's PTX
on the same synthesized arguments.  One line per file that does not agree, then the counts:
files where ours agrees, where NVIDIA's agrees, where both do.  A benchmark of the checking
tools' coverage, not a test.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tileiras.diffcheck import ThirdOpinion, check_module  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402
from tileiras.tools import find_tileiras  # noqa: E402

NVIDIA = "NVIDIA's PTX vs interpreter: "


def check_file(path: Path, arch: str, tileiras: str, scratch: Path) -> tuple[Optional[str], Optional[str]]:
    """(our problem, NVIDIA's problem) for one file; None where that side agrees."""
    cubin = scratch / (path.stem + ".cubin")
    subprocess.run([tileiras, "--gpu-name", arch, "--lineinfo", "-o", str(cubin), str(path)], check=True,
                   capture_output=True)
    reports = check_module(read_bytecode(path.read_bytes(), str(path)), arch, nvidia=ThirdOpinion.read(str(cubin)))
    ours = [p for r in reports if r.problem for p in r.problem.split("; ") if not p.startswith(NVIDIA)]
    theirs = [p for r in reports if r.problem for p in r.problem.split("; ") if p.startswith(NVIDIA)]
    return (ours[0] if ours else None), (theirs[0] if theirs else None)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(REPO.parent / "shared" / "corpus-aligned"))
    ap.add_argument("--arch", action="append", default=None)
    ap.add_argument("--version", default="13.4")
    ap.add_argument("--only", default=None, help="files whose name contains this")
    ns = ap.parse_args(argv)
    tileiras = find_tileiras()
    if tileiras is None:
        print("NVIDIA's tileiras is not installed")
        return 1
    counts = {"files": 0, "ours": 0, "nvidia": 0, "both": 0}
    with tempfile.TemporaryDirectory() as scratch:
        for arch in ns.arch or ["sm_80", "sm_90"]:
            for path in sorted(Path(ns.folder).glob(f"*.{arch}.{ns.version}.tileir")):
                if ns.only and ns.only not in path.name:
                    continue
                ours, theirs = check_file(path, arch, tileiras, Path(scratch))
                counts["files"] += 1
                counts["ours"] += ours is None
                counts["nvidia"] += theirs is None
                counts["both"] += ours is None and theirs is None
                for who, problem in (("ours", ours), ("NVIDIA's", theirs)):
                    if problem is not None:
                        print(f"{path.name}: {who}: {problem[:200]}", flush=True)
    print(f"{counts['files']} files: ours agree on {counts['ours']}, NVIDIA's on {counts['nvidia']}, "
          f"both on {counts['both']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
