"""Our TMA bulk stores against NVIDIA's over a corpus: which kernels bulk-store, and do ours agree.

    python bench/tma_stores.py [FOLDER] [--arch sm_90] [--run] [--extent 128]

For every ``NAME.<arch>.*.tileir`` in FOLDER (default: ../shared/corpus-aligned beside the
repo), counts the ``cp.async.bulk.tensor`` stores (global <- shared) in NVIDIA's PTX beside it
and in ours, and prints the files where either has some.  ``--run``: the emulator also runs
our PTX with our ``.nv.host`` on synthesized arguments (a 2x2 grid, ``--extent`` elements per
dynamic dim) for the files where we bulk-store, against the reference interpreter.  A
benchmark, not a test.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tileiras.diffcheck import compile_with_host  # noqa: E402
from tileiras.reader import read_bytecode  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from tma_corpus import agreement  # noqa: E402

STORE = re.compile(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared")


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(REPO.parent / "shared" / "corpus-aligned"))
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--extent", type=int, default=128)
    ns = ap.parse_args(argv)
    both = theirs_only = ours_only = agree = ran = 0
    for path in sorted(Path(ns.folder).glob(f"*.{ns.arch}.*.tileir")):
        theirs = len(STORE.findall(path.with_suffix(".ptx").read_text()))
        module = read_bytecode(path.read_bytes())
        try:
            ptx, host = compile_with_host(module, ns.arch)
        except Exception as err:  # noqa: BLE001
            print(f"{path.name:60s} ours failed: {type(err).__name__}")
            continue
        ours = len(STORE.findall(ptx))
        if not theirs and not ours:
            continue
        both += bool(theirs and ours)
        theirs_only += bool(theirs and not ours)
        ours_only += bool(ours and not theirs)
        verdict = ""
        if ns.run and ours:
            verdict = agreement(module, ptx, host, ns.extent)
            ran += 1
            agree += verdict == "agree"
        print(f"{path.name:60s} NVIDIA {theirs} ours {ours} {verdict}", flush=True)
    print(f"NVIDIA bulk-stores in {both + theirs_only} files; we do too in {both}, "
          f"we do where NVIDIA does not in {ours_only}")
    if ns.run:
        print(f"{agree}/{ran} files with our bulk stores agree with the interpreter")
    return 0


if __name__ == "__main__":
    sys.exit(main())
