"""Our cubins against NVIDIA's on a real GPU: one prepared run, in two steps.

1. plan (here, on a CPU machine with this package's test extra: cuTile and NVIDIA's tileiras)
   exports each kernel of ``bench/gpu_kernels.py`` with cuTile, compiles it with our
   ``tileiras`` and with NVIDIA's, and writes the cubins, the bytecode and a manifest into a
   folder inside the repository (ignored by git, it travels with the device call as ``carry``):

       python bench/gpu.py plan .gpu-plan [--arch sm_90] [--only gemm_f16_4096,axpy_2e28]
           [--variant nostream:TILEIRAS_TMA_STREAM=0@rmsnorm_persistent_8192+rmsnorm_chunked_32768]

   A ``--variant`` compiles those kernels with our tileiras again under those variables
   (a knob turned off, say): their rows (``KERNEL@SUFFIX``) time that cubin against the same
   NVIDIA cubin in the same run, so a knob's A/B costs no extra device call.

2. run (on the GPU machine: numpy, ml_dtypes and cuda-bindings, all in its image; no cuTile,
   no compiler, no network) loads both cubins of each kernel, checks each against a float64
   reference (fresh random inputs, poisoned outputs), times each with CUDA events (warm-up,
   median of many, rotating buffer sets) and prints one table last; the full log goes to
   ``--log-dir`` (default ``$OUT`` when set, else the plan folder):

       PYTHONUNBUFFERED=1 python3 bench/gpu.py run .gpu-plan

   With the device tool: ``carry`` = [".gpu-plan"] (.gitignore'd), command
   ``bash bench/gpu_session.sh .gpu-plan`` (this run, then the ``gpu`` test tier that ``plan``
   prepared in ``.gpu-plan/tier``; both summaries last), timeout_s 480.  The run alone:
   ``PYTHONUNBUFFERED=1 python3 bench/gpu.py run .gpu-plan``.  cuda-bindings is
   in the GPU image; where it is not, carry it as a wheel (``pip download --no-deps --only-binary=:all: --python-version 3.12
   --platform manylinux_2_28_x86_64 -d .whl cuda-bindings cuda-pathfinder``) and install it
   first with ``pip install --no-index --no-deps --target /tmp/site .whl/*.whl`` and
   ``PYTHONPATH=/tmp/site``.  The run imports only numpy, ml_dtypes, cuda-bindings and
   ``tileiras.gpu`` (no llvmlite, no ptxas); it sizes repeats to finish in a few minutes and
   skips what is left after ``--budget-s`` seconds.

   ``run --dry-run`` does everything but the driver calls, on the plan's tiny sizes: the
   reference interpreter stands in for the GPU, parameters are packed and checked against
   each cubin's KPARAM_INFO, and outputs go through the same checks.  ``run --tiny`` runs the
   tiny sizes on the GPU (a smoke test).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # gpu_kernels, gpu_problems, gpu_run; tileiras uninstalled

#: (name, family, kernel, bytecode constants and array types, full problem, tiny problem)
GEMM_TILE = {"BM": 128, "BN": 128, "BK": 32}
ATTN_TILE = {"BM": 64, "BN": 64}


def _gemm(dt: str, size: int) -> tuple:
    return (f"gemm_{dt}_{size}", "gemm", "gemm", ([(dt, 2)] * 3, [128, 128, 32]),
            {"dtype": dt, "M": size, "N": size, "K": size, **GEMM_TILE},
            {"dtype": dt, "M": 256, "N": 256, "K": 256, **GEMM_TILE})


def _cluster_gemm(dt: str, size: int) -> tuple:
    """``num_ctas=2``, 128x128x64 tiles: each CTA of a cluster computes 64 rows (wgmma's m64
    on sm_90), B multicast to both."""
    tile = {"BM": 128, "BN": 128, "BK": 64}
    return (f"gemm_cluster2_{dt}_{size}", "gemm", "gemm_cluster", ([(dt, 2)] * 3, [128, 128, 64]),
            {"dtype": dt, "M": size, "N": size, "K": size, **tile},
            {"dtype": dt, "M": 256, "N": 256, "K": 256, **tile})


def _persistent_gemm(dt: str, size: int) -> tuple:
    """TileGym's persistent GEMM with NVIDIA-like 128x128x64 tiles (sm_90: a persistent TMA ring)."""
    tile = {"BM": 128, "BN": 128, "BK": 64}
    return (f"persistent_gemm_{dt}_{size}", "persistent_gemm", "persistent_gemm", ([(dt, 2)] * 3, [128, 128, 64]),
            {"dtype": dt, "M": size, "N": size, "K": size, **tile},
            {"dtype": dt, "M": 384, "N": 256, "K": 320, "ctas": 2, **tile})       # 3 tiles a CTA


def _skinny_gemm(dt: str, m: int, n: int, k: int) -> tuple:
    """A decode-style GEMM (few rows, large N and K) with 32-row tiles: on sm_90 too few rows
    for wgmma, so ``mma.sync`` fed by a TMA ring, as NVIDIA's tileiras builds it."""
    tile = {"BM": 32, "BN": 128, "BK": 64}
    return (f"gemm_{dt}_{m}x{n}x{k}", "gemm", "gemm", ([(dt, 2)] * 3, [32, 128, 64]),
            {"dtype": dt, "M": m, "N": n, "K": k, **tile}, {"dtype": dt, "M": 64, "N": 256, "K": 256, **tile})


def _gemm_fp8(size: int) -> tuple:
    """An fp8 (e4m3) GEMM, B K-major (N x K, read through its axes swapped) as fp8 weights
    are kept, f16 out, 128x128x128 tiles (128-byte rows of K)."""
    tile = {"BM": 128, "BN": 128, "BK": 128}
    return (f"gemm_fp8_{size}", "gemm_fp8", "gemm_fp8", ([("e4m3", 2), ("e4m3", 2), ("f16", 2)], [128, 128, 128]),
            {"dtype": "f16", "M": size, "N": size, "K": size, **tile},
            {"dtype": "f16", "M": 256, "N": 256, "K": 512, **tile})


def _lora(dt: str, size: int, rank: int) -> tuple:
    """A linear layer with a rank-``rank`` LoRA adapter, 128x128x64 tiles: one ring copies x's,
    W's and the adapter's tiles, both multiplies reading x's from it."""
    tile = {"BM": 128, "BN": 128, "BK": 64, "R": rank}
    return (f"lora_{dt}_{size}_r{rank}", "lora", "lora_linear", ([(dt, 2)] * 5, [128, 128, 64, rank]),
            {"dtype": dt, "M": size, "N": size, "K": size, **tile}, {"dtype": dt, "M": 256, "N": 256, "K": 192, **tile})


def _block_scaled(size: int, form: str = "deepseek") -> tuple:
    """An fp8 GEMM with block scales, 128x128x128 tiles, bf16 out: DeepSeek-V3's (B K x N,
    each K tile's product scaled before it is added), or TileGym's W8A8 form (``w8a8``: B
    N x K, the scales gathered)."""
    tile = {"BM": 128, "BN": 128, "BK": 128}
    arrays = [("e4m3", 2), ("e4m3", 2), ("f32", 2), ("f32", 2), ("bf16", 2)]
    name, family, kernel = (("w8a8_fp8", "w8a8", "w8a8_gemm") if form == "w8a8" else
                            ("block_scaled_fp8", "block_scaled", "fp8_block_scaled_gemm"))
    return (f"{name}_{size}", family, kernel, (arrays, [128, 128, 128]),
            {"dtype": "bf16", "M": size, "N": size, "K": size, **tile},
            {"dtype": "bf16", "M": 256, "N": 256, "K": 384, **tile})


def _grouped_gemm(dt: str, groups: int, size: int) -> tuple:
    """A mixture-of-experts style grouped GEMM: ``groups`` GEMMs of ``size``^3 in one launch,
    the operands passed as lists of tensors (no tensor map exists at launch: our K loop is a
    cp.async ring into wgmma's layouts, NVIDIA's builds tensor maps on the device)."""
    return (f"grouped_gemm_{dt}_{groups}x{size}", "grouped_gemm", "grouped_gemm",
            ([("list", dt, 2)] * 3, [128, 128, 32]),
            {"dtype": dt, "G": groups, "M": size, "N": size, "K": size, **GEMM_TILE},
            {"dtype": dt, "G": 2, "M": 256, "N": 128, "K": 96, **GEMM_TILE})


def _persistent_grouped_gemm(dt: str, groups: int, size: int) -> tuple:
    """TileGym's persistent grouped GEMM: ``groups`` GEMMs of ``size``^3, one CTA an SM taking
    their tiles in turn (sm_90: persistent TMA rings through maps built on the device, once
    per group)."""
    tile = {"BM": 128, "BN": 128, "BK": 64}
    return (f"persistent_grouped_gemm_{dt}_{groups}x{size}", "persistent_grouped_gemm", "persistent_grouped_gemm",
            ([("list", dt, 2)] * 3, [128, 128, 64, groups]),
            {"dtype": dt, "G": groups, "M": size, "N": size, "K": size, **tile},
            {"dtype": dt, "G": groups, "M": 128, "N": 256, "K": 192, "ctas": 3, **tile})   # 16 tiles on 3 CTAs


def _attention(d: int, causal: bool) -> tuple:
    name = f"attention_d{d}{'_causal' if causal else ''}"
    shape = {"dtype": "f16", "D": d, "causal": causal, **ATTN_TILE}
    return (name, "attention", "flash_attention", ([("f16", 3)] * 4, [("f32",), d, 64, 64, causal]),
            {"B": 4, "H": 16, "S": 4096, **shape}, {"B": 1, "H": 2, "S": 128, **shape})


def _rows(family: str, vectors: int, eps: list) -> tuple:
    arrays = [("f16", 2)] + [("f16", 1)] * vectors + [("f16", 2)]
    return (f"{family}_8192", family, family, (arrays, [8192, *eps]),
            {"dtype": "f16", "rows": 16384, "N": 8192}, {"dtype": "f16", "rows": 4, "N": 8192})


KERNELS = [
    _gemm("f16", 4096), _gemm("f16", 8192), _gemm("bf16", 4096), _gemm("bf16", 8192), _cluster_gemm("f16", 8192),
    _persistent_gemm("f16", 8192), _persistent_gemm("bf16", 8192), _gemm_fp8(8192), _grouped_gemm("f16", 8, 2048),
    _persistent_grouped_gemm("f16", 8, 2048),
    _skinny_gemm("f16", 64, 16384, 8192), _lora("bf16", 8192, 16), _block_scaled(8192), _block_scaled(8192, "w8a8"),
    _attention(64, False), _attention(64, True), _attention(128, False), _attention(128, True),
    _rows("softmax", 0, []), _rows("layernorm", 2, [1e-5]), _rows("rmsnorm", 1, [1e-6]),
    ("rmsnorm_persistent_8192", "rmsnorm_persistent", "rmsnorm_persistent",
     ([("bf16", 2), ("bf16", 1), ("bf16", 2)], [4, 8192, 1e-6]),
     {"dtype": "bf16", "rows": 16384, "N": 8192, "TILE_M": 4}, {"dtype": "bf16", "rows": 12, "N": 8192, "TILE_M": 4}),
    ("rmsnorm_persistent_4096", "rmsnorm_persistent", "rmsnorm_persistent",
     ([("bf16", 2), ("bf16", 1), ("bf16", 2)], [4, 4096, 1e-6]),
     {"dtype": "bf16", "rows": 32768, "N": 4096, "TILE_M": 4}, {"dtype": "bf16", "rows": 12, "N": 4096, "TILE_M": 4}),
    ("rmsnorm_chunked_32768", "rmsnorm_chunked", "rmsnorm_chunked",
     ([("bf16", 2), ("bf16", 1), ("bf16", 2)], [2048, 1e-6]),
     {"dtype": "bf16", "rows": 4096, "N": 32768}, {"dtype": "bf16", "rows": 3, "N": 4096}),
    ("cross_entropy_32768", "cross_entropy", "cross_entropy", ([("bf16", 2), ("i32", 1), ("f32", 1)], [2048]),
     {"dtype": "bf16", "rows": 4096, "V": 32768}, {"dtype": "bf16", "rows": 3, "V": 4096}),
    ("axpy_2e28", "axpy", "axpy", ([("f32", 1)] * 3, [("f32",), 1024]), {"n": 1 << 28, "T": 1024},
     {"n": 4096, "T": 1024}),
]


# --------------------------------------------------------------------------- plan

def export(kernel: str, arrays: list, extra: list, arch: str) -> bytes:
    import io

    import gpu_kernels
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    fn = gpu_kernels.KERNELS[kernel]
    sig = KernelSignature(gpu_kernels.signature(kernel, arrays, extra), CallingConvention.cutile_python_v1())
    buf = io.BytesIO()
    export_kernel(fn, [sig.with_mangled_symbol(kernel)], buf, gpu_code=arch, output_format="tileir_bytecode")
    return buf.getvalue()


def our_tileiras() -> list[str]:
    """Our ``tileiras`` command: the console script beside this Python, else on PATH."""
    beside = Path(sys.executable).parent / "tileiras"
    found = str(beside) if beside.exists() else shutil.which("tileiras")
    if found is None:
        raise SystemExit("error: our tileiras is not installed (pip install -e '.[test]')")
    return [found]


def compile_with(tool: list[str], src: Path, out: Path, arch: str, env: Optional[dict] = None) -> Optional[str]:
    """None on success, else the compiler's message (the manifest keeps it); ``env``:
    variables set for the compile (knobs of a variant)."""
    run = subprocess.run([*tool, f"--gpu-name={arch}", "-O3", str(src), "-o", str(out)],
                         capture_output=True, text=True, check=False,
                         env={**os.environ, "TILEIRAS_SERVER": "0", **env} if env else None)
    return None if run.returncode == 0 else (run.stderr.strip() or f"exit {run.returncode}")[-2000:]


def parse_variant(text: str) -> tuple[str, dict, set]:
    """``SUFFIX:VAR=VALUE[,VAR=VALUE...]@KERNEL[+KERNEL...]`` -> (suffix, env, kernels): our
    compiler run again on those kernels with those variables set (a knob's A/B, measured
    in the same run as the rest)."""
    try:
        head, kernels = text.split("@", 1)
        suffix, assignments = head.split(":", 1)
        env = dict(a.split("=", 1) for a in assignments.split(","))
    except ValueError:
        raise SystemExit(f"error: --variant '{text}': expected SUFFIX:VAR=VALUE[,VAR=VALUE]@KERNEL[+KERNEL]") from None
    return suffix, env, set(kernels.split("+"))


def plan(folder: Path, arch: str, only: Optional[set], variants: tuple = ()) -> dict:
    from tileiras.gpu import signature_of
    from tileiras.reader import read_bytecode
    from tileiras.tools import find_tileiras

    nvidia = find_tileiras()
    if nvidia is None:
        raise SystemExit("error: NVIDIA's tileiras is not installed (pip install nvidia-cuda-tileiras)")
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, family, kernel, (arrays, extra), full, tiny in KERNELS:
        if only and name not in only:
            continue
        src = folder / f"{name}.tileir"
        src.write_bytes(export(kernel, arrays, extra, arch))
        fn = next(f for f in read_bytecode(src.read_bytes()).functions if f.is_entry)
        errors = {who: compile_with(tool, src, folder / f"{name}.{who}.cubin", arch)
                  for who, tool in (("ours", our_tileiras()), ("nvidia", [nvidia]))}
        entries.append({"name": name, "family": family, "entry": fn.name, "signature": list(signature_of(fn)),
                        "problem": full, "tiny": tiny, "bytecode": src.name,
                        "cubins": {who: f"{name}.{who}.cubin" for who, err in errors.items() if err is None},
                        "compile_errors": {who: err for who, err in errors.items() if err is not None}})
        print(f"planned {name}: {', '.join(f'{w} ' + ('ok' if e is None else 'FAILED') for w, e in errors.items())}")
        for suffix, env, kernels in variants:       # the same bytecode and NVIDIA cubin, ours again
            if name not in kernels:
                continue
            error = compile_with(our_tileiras(), src, folder / f"{name}@{suffix}.ours.cubin", arch, env)
            cubins = {"ours": f"{name}@{suffix}.ours.cubin"} if error is None else {}
            if errors["nvidia"] is None:
                cubins["nvidia"] = f"{name}.nvidia.cubin"
            entries.append({**entries[-1], "name": f"{name}@{suffix}", "cubins": cubins, "variant": env,
                            "compile_errors": {"ours": error} if error else {}})
            print(f"planned {name}@{suffix} ({', '.join(f'{k}={v}' for k, v in env.items())}): "
                  + ("ok" if error is None else "FAILED"))
    manifest = {"arch": arch, "kernels": entries}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


# --------------------------------------------------------------------------- run

class Log:
    """Lines to stdout and to the log file as they come (a run cut short keeps its log)."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("w")

    def __call__(self, text: str) -> None:
        print(text, flush=True)
        self.file.write(text + "\n")
        self.file.flush()


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    p = steps.add_parser("plan", help="export and compile (CPU machine)")
    p.add_argument("folder", type=Path)
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--only", default="", help="comma-separated kernel names: " + ", ".join(k[0] for k in KERNELS))
    p.add_argument("--no-tier", action="store_true", help="skip planning the gpu test tier (folder/tier)")
    p.add_argument("--variant", action="append", default=[], metavar="SUFFIX:VAR=VALUE[,...]@KERNEL[+...]",
                   help="also compile those kernels with our tileiras under those variables (rows KERNEL@SUFFIX)")
    r = steps.add_parser("run", help="check and time on the GPU")
    r.add_argument("folder", type=Path)
    r.add_argument("--dry-run", action="store_true", help="no driver: the interpreter on tiny sizes")
    r.add_argument("--tiny", action="store_true", help="the plan's tiny sizes on the GPU")
    r.add_argument("--only", default="")
    r.add_argument("--budget-s", type=float, default=420.0, help="skip kernels once this much time has passed")
    r.add_argument("--log-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    only = {x for x in args.only.split(",") if x} or None
    if args.step == "plan":
        plan(args.folder, args.arch, only, tuple(parse_variant(v) for v in args.variant))
        if not args.no_tier:  # the gpu test tier's cases, for bench/gpu_session.sh
            import gpu_tier

            gpu_tier.plan(args.folder / "tier", (args.arch,), os.cpu_count() or 1)
        return 0
    from gpu_run import run

    log_dir = args.log_dir or Path(os.environ.get("OUT") or args.folder)
    manifest = json.loads((args.folder / "manifest.json").read_text())
    log = Log(log_dir / "gpu-bench.log")
    start = time.monotonic()
    rows, notes = run(args.folder, manifest, only, log, dry=args.dry_run, tiny=args.tiny or args.dry_run,
                      deadline=start + args.budget_s)
    (log_dir / "gpu-bench.json").write_text(json.dumps({"rows": rows, "notes": notes}, indent=1, default=str))
    print_table(rows, notes, log)
    return 0 if all(r["correct"] in ("yes", "-") for row in rows for r in row["impls"].values()) else 1


def print_table(rows: list, notes: list, log: Log) -> None:
    width = max([22, *(len(row["name"]) for row in rows)])
    header = f"{'kernel':<{width}} {'ours ms':>9} {'NVIDIA ms':>9} {'ours rate':>15} {'NVIDIA rate':>15} " \
             f"{'ours/NV':>7} {'correct':>8}"
    log("")
    log(header)
    log("-" * len(header))
    for row in rows:
        o, n = row["impls"].get("ours", {}), row["impls"].get("nvidia", {})
        om, nm = o.get("ms"), n.get("ms")
        ratio = f"{om / nm:.2f}" if om and nm else "-"
        fmt = lambda ms: f"{ms:.3f}" if ms else "-"  # noqa: E731
        log(f"{row['name']:<{width}} {fmt(om):>9} {fmt(nm):>9} {o.get('rate', '-'):>15} {n.get('rate', '-'):>15} "
            f"{ratio:>7} {o.get('correct', '-') + '/' + n.get('correct', '-'):>8}")
    for note in notes:
        log(note)


if __name__ == "__main__":
    sys.exit(main())

