"""The ``gpu`` test tier, prepared here and run on a lent GPU machine in one call.

A GPU machine has no cuTile, no NVIDIA tileiras and no time to spare, so everything that needs
them happens here: ``plan`` exports every kernel entry the differential tests run (unaligned and
aligned, for each architecture asked), compiles it with our ``tileiras`` to a cubin, draws the
differential tests' inputs and runs the reference interpreter on them; each case is one pickle
(cubin, entry, parameter kinds, grid, arguments, the interpreter's outcome) listed in
``manifest.json``.  On the GPU machine ``test/test_gpu_tier.py`` reads the folder named by
``TILEIRAS_GPU_PLAN`` instead of exporting, and only launches and compares:

    python bench/gpu_tier.py plan .gpu-plan/tier [--arch sm_80,sm_90] [--jobs N]
    # device call, carry [".gpu-plan"]:
    TILEIRAS_GPU_PLAN=.gpu-plan/tier python3 -m pytest -q -m gpu test/test_gpu_tier.py
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "test"), str(ROOT)]

#: Architectures a lent machine (H100, H200) runs: sm_90 cubins, and sm_80's.
DEFAULT_ARCHS = ("sm_80", "sm_90")


#: Kernels whose outcome depends on the order in which CTAs run (the interpreter and the
#: emulator run them one after another; a GPU does not): planned on one CTA.  ``atomics``:
#: which CTA's ``atomic_xchg`` comes first decides the values its ``atomic_cas`` swaps.
ORDER_DEPENDENT = {"atomics": (1, 1, 1)}
#: Kernels taking lists of arrays (``test/kernels/lists.py``: grouped GEMMs, MoE style), which
#: the differential tests check through ``diffcheck.check_module``: their arguments are
#: synthesized from the bytecode's facts (one ``ArrayList`` a list, its groups' shapes
#: differing) and kept in the pickle as they are, on this grid (x, y tiles, 3 groups).
LIST_CASES = {"grouped_matmul": (2, 2, 3), "grouped_matmul_wide": (2, 2, 3), "grouped_axpy": (2, 3, 1)}
LIST_EXTENT = 100


def case_id(name: str, k: int, arch: str, aligned: bool) -> str:
    return f"{name}[{k}]-{arch}-{'aligned' if aligned else 'unaligned'}"


def _input_specs(params) -> list:
    """cuTile parameter constraints as plain data: ("array", dtype, ndim) or ("scalar", dtype, value)."""
    import numpy as np
    from cuda.tile.compilation import ArrayConstraint

    from differential import make_inputs

    specs = []
    for p, value in zip(params, make_inputs(params, np.random.default_rng(0), 1)):
        name = getattr(p.dtype, "name", None) or str(p.dtype).split(".")[-1]
        specs.append(("array", name, p.ndim) if isinstance(p, ArrayConstraint) else ("scalar", name, value.item()))
    return specs


def make_planned_inputs(specs: list, seed: int, extent: int) -> list:
    """The differential tests' inputs (``differential.make_inputs``) from plain specs: no cuTile."""
    import numpy as np

    from differential import numpy_dtype
    from tileiras.diffcheck import random_array

    rng = np.random.default_rng(seed)
    return [random_array(rng, numpy_dtype(name), (extent,) * rest) if kind == "array"
            else numpy_dtype(name)(rest) for kind, name, rest in specs]


def _bits(a):
    """An array's elements as unsigned integers of their width, in memory order (NaN-safe equality)."""
    import numpy as np

    flat = a.ravel(order="K")
    return flat.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[flat.dtype.itemsize])


def digest(values: list) -> str:
    """A hash of the arrays among ``values`` (scalars are in the specs themselves)."""
    import hashlib

    import numpy as np

    h = hashlib.sha256()
    for a in values:
        if isinstance(a, np.ndarray):
            h.update(_bits(a).tobytes())
    return h.hexdigest()


def _plan_one(job: tuple) -> dict:
    """Export, compile and interpret one (kernel, entry, arch, alignment); write its pickle:
    inputs as specs (redrawn there), the interpreter's outcome as the elements it changed."""
    name, k, arch, aligned, out = job
    import numpy as np

    from differential import ALIGNED_EXTENT, EXTENT, Case, export, make_inputs, run_interpreter
    from kernels import ALL_CASES
    from test_differential import GRID

    from tileiras import gpu
    from tileiras.interp.arraylist import arrays_of

    from tileiras.reader import read_bytecode

    from kernels import lists

    case = next(c for c in (*ALL_CASES, lists.GROUPED_MATMUL, lists.GROUPED_MATMUL_WIDE, lists.GROUPED_AXPY)
                if c.name == name)
    ident = f"{name}[{k}]-{arch}" if name in LIST_CASES else case_id(name, k, arch, aligned)   # facts as written
    try:
        data = export(case, arch=arch, aligned=aligned)
    except Exception as err:  # noqa: BLE001 - cuTile's refusals have no common type
        return {"id": ident, "skip": f"cuTile cannot export {name} for {arch}: {err}".splitlines()[0]}
    module = read_bytecode(data)
    fn = module.functions[k]
    if name in LIST_CASES:
        return _plan_list_case(ident, module, fn, arch, LIST_CASES[name], out)
    extent = ALIGNED_EXTENT if aligned else EXTENT
    specs = _input_specs(case.params[k])
    arrays = make_inputs(case.params[k], np.random.default_rng(1), extent)
    drawn = digest(arrays)
    assert drawn == digest(make_planned_inputs(specs, 1, extent)), ident
    grid = ORDER_DEPENDENT.get(name, GRID)
    c = Case(data, fn.name, arrays, grid)
    expected = run_interpreter(c)
    base = arrays_of(gpu.copy_arguments(c.args(arrays)))
    changes = []
    for before, after in zip(base, expected.arrays):
        idx = np.flatnonzero(_bits(before) != _bits(after))
        changes.append((idx, after.ravel(order="K")[idx]))
    record = {"entry": fn.name, "arch": arch, "kinds": gpu.signature_of(fn), "grid": grid,
              "inputs": specs, "seed": 1, "extent": extent,
              "digest": drawn,
              "failed": expected.failed, "changes": changes, "cubin": gpu.compile_cubin(module, arch)}
    path = Path(out) / f"{ident}.pkl"
    with open(path, "wb") as f:
        pickle.dump(record, f)
    return {"id": ident, "file": path.name, "arch": arch}


def _plan_list_case(ident: str, module, fn, arch: str, grid: tuple, out: str) -> dict:
    """A list-parameter case: its synthesized arguments (arrays and ``ArrayList`` tables, as
    ``diffcheck.check_module`` draws them) kept whole, with the interpreter's outcome."""
    import numpy as np

    from tileiras import diffcheck, gpu

    args = diffcheck.synthesize_args(fn, np.random.default_rng(1), LIST_EXTENT)
    expected = diffcheck.run_interpreter(module, fn.name, grid, args)
    record = {"entry": fn.name, "arch": arch, "kinds": gpu.signature_of(fn), "grid": grid, "args": args,
              "expected": expected.arrays, "failed": expected.failed, "cubin": gpu.compile_cubin(module, arch)}
    path = Path(out) / f"{ident}.pkl"
    with open(path, "wb") as f:
        pickle.dump(record, f)
    return {"id": ident, "file": path.name, "arch": arch}


def plan(out: Path, archs: tuple, jobs: int) -> int:
    os.environ.setdefault("TILEIRAS_SERVER", "0")
    from test_differential import CASES

    out.mkdir(parents=True, exist_ok=True)
    work = [(case.name, k, arch, aligned, str(out)) for case in CASES for k in range(len(case.params))
            for arch in archs for aligned in (False, True)]
    work += [(name, 0, arch, False, str(out)) for name in LIST_CASES for arch in archs]   # their facts: aligned
    start = time.monotonic()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        done = list(pool.map(_plan_one, work))
    manifest = {"archs": list(archs), "cases": done}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    skipped = sum("skip" in d for d in done)
    size = sum(p.stat().st_size for p in out.glob("*.pkl"))
    print(f"{len(done) - skipped} cases planned, {skipped} skipped (cuTile refused), "
          f"{size / 1e6:.1f} MB, {time.monotonic() - start:.0f} s -> {out}")
    return 0


def load_manifest(folder: str) -> list[dict]:
    return json.loads((Path(folder) / "manifest.json").read_text())["cases"]


def load_case(folder: str, entry: dict) -> dict:
    """A planned case with its inputs redrawn (checked against the plan's digest: the same numpy
    stream) and ``args``/``expected`` rebuilt: what ``gpu.run_cubin`` and ``compare`` take."""
    from tileiras import gpu, interp
    from tileiras.diffcheck import Outcome
    from tileiras.interp.arraylist import arrays_of

    with open(Path(folder) / entry["file"], "rb") as f:
        r = pickle.load(f)
    if "args" in r:                 # a list-parameter case: arguments and outcome kept whole
        r["expected"] = Outcome(r["expected"], r["failed"])
        return r
    inputs = make_planned_inputs(r["inputs"], r["seed"], r["extent"])
    if digest(inputs) != r["digest"]:
        raise AssertionError(f"{entry['id']}: this numpy draws other inputs than the planning one")
    r["args"] = interp.cutile_args(*inputs)
    expected = arrays_of(gpu.copy_arguments(r["args"]))
    for arr, (idx, values) in zip(expected, r["changes"]):
        flat = arr.reshape(-1, order="A")  # a view of a C- or F-contiguous copy, memory order
        flat[idx] = values
    r["expected"] = Outcome(expected, r["failed"])
    return r


def check_case(folder: str, entry: dict) -> str | None:
    """Run a planned case on this process's GPU; None when it agrees with the interpreter."""
    from tileiras import gpu
    from tileiras.diffcheck import compare

    r = load_case(folder, entry)
    got = gpu.run_cubin(gpu.open_device(), r["cubin"], r["entry"], r["kinds"], r["grid"], r["args"])
    return compare(r["expected"], got)


def check_in_child(folder: str, entry: dict, timeout: float = 120) -> str | None:
    """``check_case`` in a process of its own: for kernels that assert, since the driver keeps a
    device-side assert for the rest of the process (``tileiras.gpu.STICKY_ERRORS``)."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, __file__, "check", folder, json.dumps(entry)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode == 0:
        return None
    if proc.returncode == 1 and proc.stdout.strip():
        return proc.stdout.strip().splitlines()[-1]
    return f"the child exited {proc.returncode}: {proc.stderr.strip()[-800:] or 'no output'}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan", help="export, compile and interpret every case into a folder")
    p.add_argument("out", type=Path)
    p.add_argument("--arch", default=",".join(DEFAULT_ARCHS))
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    c = sub.add_parser("check", help="run one planned case on the GPU (what check_in_child runs)")
    c.add_argument("folder")
    c.add_argument("entry", help="its manifest entry, as JSON")
    args = ap.parse_args(argv)
    if args.cmd == "check":
        from tileiras.errors import TileIRError

        try:
            problem = check_case(args.folder, json.loads(args.entry))
        except TileIRError as err:  # no driver, a refused cubin: one line, as the tools say it
            problem = str(err)
        print(problem or "ok")
        return 0 if problem is None else 1
    return plan(args.out, tuple(args.arch.split(",")), args.jobs)


if __name__ == "__main__":
    sys.exit(main())
