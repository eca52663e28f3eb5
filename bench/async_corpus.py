"""NVIDIA's PTX for the kernels of a corpus that use asynchronous operations (cp.async,
bulk copies, wgmma, tcgen05, mbarriers), run in the emulator with its asynchrony model and
race detector on: how many run clean, and what the others hit.

    python bench/async_corpus.py [FOLDER ...] [--every K] [--extent N] [--match REGEX]

FOLDERs hold ``NAME.tileir`` with NVIDIA's ``NAME.ptx`` beside it (default: ../shared/corpus
and ../shared/corpus-aligned beside the repo); where that PTX takes tensor maps, the kernel
runs from the cubin NVIDIA's tileiras builds again, whose ``.nv.host`` fills them
(``coalescing.nvidia_ptx``).  Each entry runs on a 2x2 grid with the
arguments ``diffcheck.synthesize_args`` makes.  Outcomes: ``clean``; ``async`` and ``race``
(the model's findings: emulator bugs or real ones, each listed with its message);
``unsupported`` (an instruction the emulator lacks, such as ``cp.async.bulk.tensor``);
others (deadlock, memory, ...).  Also ``--races-off`` to time the detector's cost, and
``--interleave SEED``: the CTAs interleaved in bursts in that seed's order, each on its own
weakly ordered copy of global memory (``emulate/weak.py``), the adversarial schedule.
"""
from __future__ import annotations

import argparse
import collections
import re
import sys
import time
from pathlib import Path
from typing import Optional

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tileiras.diffcheck import synthesize_args  # noqa: E402
from tileiras.emulate import UnsupportedInstruction, launch  # noqa: E402

from coalescing import nvidia_ptx  # noqa: E402  (bench/ is on the path: NVIDIA's PTX and .nv.host)
from tileiras.reader import read_bytecode  # noqa: E402

ASYNC = re.compile(r"\b(cp\.async|wgmma\.|tcgen05\.|mbarrier\.)")
GRID = (2, 2, 1)


def outcome(path: Path, extent: int, races: bool, interleave: Optional[int] = None) -> list[tuple[str, str, str]]:
    """(entry, outcome, message) for each entry of one file."""
    module = read_bytecode(path.read_bytes())
    ptx, host = nvidia_ptx(path)            # with its .nv.host where it takes tensor maps
    rows = []
    for fn in module.functions:
        if not fn.is_entry:
            continue
        args = synthesize_args(fn, np.random.default_rng(1), extent)
        try:
            result = launch(ptx, fn.name, GRID, args, races=races, host_object=host, interleave=interleave,
                            burst=interleave is not None)
        except UnsupportedInstruction as e:
            rows.append((fn.name, "unsupported", str(e)))
            continue
        trap = result.trap
        kind = "clean" if trap is None or trap.kind in ("trap", "assert") else trap.kind
        rows.append((fn.name, kind, "" if trap is None else trap.message))
    return rows


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="*", type=Path,
                    default=[REPO.parent / "shared" / "corpus", REPO.parent / "shared" / "corpus-aligned"])
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--match", default="", help="only files whose name this regex searches")
    ap.add_argument("--extent", type=int, default=128)
    ap.add_argument("--races-off", action="store_true")
    ap.add_argument("--interleave", type=int, default=None, help="seed of a bursty CTA interleaving")
    args = ap.parse_args(argv)
    files = [p for folder in args.folders for p in sorted(folder.glob("*.tileir"))
             if p.with_suffix(".ptx").exists() and ASYNC.search(p.with_suffix(".ptx").read_text())
             and re.search(args.match, p.name)]
    files = files[::args.every]
    counts: collections.Counter = collections.Counter()
    start = time.perf_counter()
    for path in files:
        try:
            rows = outcome(path, args.extent, not args.races_off, args.interleave)
        except Exception as e:                  # noqa: BLE001 (a benchmark: report and go on)
            rows = [("-", "error", f"{type(e).__name__}: {e}")]
        for entry, kind, message in rows:
            counts[kind] += 1
            if kind != "clean":
                print(f"{path.parent.name}/{path.name} {entry}: {kind}: {message[:300]}", flush=True)
    total = sum(counts.values())
    print(f"{len(files)} files, {total} entries in {time.perf_counter() - start:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
