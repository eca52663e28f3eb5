"""The problems ``bench/gpu.py`` measures: inputs, kernel arguments, grid, float64 reference,
tolerance and work (flops, bytes) of each kernel family.  numpy, ml_dtypes and tileiras's
``ArrayList`` (a list parameter: plain Python) only: this runs on the GPU machine, which has
no cuTile and may have no compiler.

A problem is a dict of sizes; the family reads it.  References are computed in float64 on a
sample (rows of a GEMM, heads and query rows of an attention, rows of a normalization,
elements of an axpy) so that checking an 8192^3 GEMM costs seconds, not minutes; the whole
output is still checked for unwritten (poisoned) elements.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import ml_dtypes
import numpy as np

from tileiras.interp.arraylist import ArrayList

NUMPY = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "e4m3": ml_dtypes.float8_e4m3fn}
#: ‖out − ref‖ / ‖ref‖ allowed, by output type (METHOD: bf16 1e-3..1e-2, f32 far under 1e-3).
TOLERANCE = {"f16": 5e-3, "bf16": 1.5e-2, "f32": 1e-5}
SAMPLE_ROWS = 256


@dataclass(frozen=True)
class Family:
    """How to run and check one kernel family on a problem ``p`` (a dict of sizes)."""

    inputs: Callable[[dict, np.random.Generator], dict]     # name -> array (outputs included, any content)
    outputs: Any                                              # which arrays the kernel writes (or p -> them)
    args: Callable[[dict, dict], list]                        # Python-level kernel args (arrays, scalars)
    grid: Callable[[dict], tuple]
    reference: Callable[[dict, dict], tuple]                  # (sample of the output, float64 expected)
    work: Callable[[dict], tuple[float, float]]               # (flops, bytes moved at least once)


def _random(rng: np.random.Generator, shape: tuple, dtype: str, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(NUMPY[dtype])


def _rows(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.sort(rng.choice(n, size=min(n, SAMPLE_ROWS), replace=False))


def _itemsize(p: dict) -> int:
    return np.dtype(NUMPY[p["dtype"]]).itemsize


# --------------------------------------------------------------------------- GEMM

def _gemm_inputs(p: dict, rng: np.random.Generator) -> dict:
    m, n, k, dt = p["M"], p["N"], p["K"], p["dtype"]
    return {"a": _random(rng, (m, k), dt), "b": _random(rng, (k, n), dt), "c": np.empty((m, n), NUMPY[dt])}


def _gemm_reference(p: dict, d: dict) -> tuple:
    rows = _rows(np.random.default_rng(p["M"]), p["M"])
    expected = d["a"][rows].astype(np.float64) @ d["b"].astype(np.float64)
    return d["c"][rows], expected


GEMM = Family(
    _gemm_inputs, ("c",), lambda p, d: [d["a"], d["b"], d["c"]],
    lambda p: (p["M"] // p["BM"], p["N"] // p["BN"], 1), _gemm_reference,
    lambda p: (2.0 * p["M"] * p["N"] * p["K"], _itemsize(p) * (p["M"] * p["K"] + p["K"] * p["N"] + p["M"] * p["N"])))

def _gemm_fp8_inputs(p: dict, rng: np.random.Generator) -> dict:
    m, n, k = p["M"], p["N"], p["K"]
    return {"a": _random(rng, (m, k), "e4m3"), "b": _random(rng, (n, k), "e4m3"),
            "c": np.empty((m, n), NUMPY[p["dtype"]])}


def _gemm_fp8_reference(p: dict, d: dict) -> tuple:
    rows = _rows(np.random.default_rng(p["M"]), p["M"])
    expected = d["a"][rows].astype(np.float64) @ d["b"].astype(np.float64).T
    return d["c"][rows], expected


#: fp8 (e4m3) A (M x K) and B (N x K, K-major), f16 C
GEMM_FP8 = Family(
    _gemm_fp8_inputs, ("c",), lambda p, d: [d["a"], d["b"], d["c"]], GEMM.grid, _gemm_fp8_reference,
    lambda p: (2.0 * p["M"] * p["N"] * p["K"], p["M"] * p["K"] + p["K"] * p["N"] + _itemsize(p) * p["M"] * p["N"]))

def _lora_inputs(p: dict, rng: np.random.Generator) -> dict:
    m, n, k, r, dt = p["M"], p["N"], p["K"], p["R"], p["dtype"]
    return {"x": _random(rng, (m, k), dt), "w": _random(rng, (k, n), dt), "la": _random(rng, (k, r), dt),
            "lb": _random(rng, (r, n), dt), "out": np.empty((m, n), NUMPY[dt])}


def _lora_reference(p: dict, d: dict) -> tuple:
    rows = _rows(np.random.default_rng(p["M"]), p["M"])
    x = d["x"][rows].astype(np.float64)
    low = (x @ d["la"].astype(np.float64)).astype(NUMPY[p["dtype"]]).astype(np.float64)   # rounded as the kernel does
    return d["out"][rows], x @ d["w"].astype(np.float64) + low @ d["lb"].astype(np.float64)


#: x (M x K), W (K x N), the adapter's A (K x R) and B (R x N), out (M x N)
LORA = Family(
    _lora_inputs, ("out",), lambda p, d: [d["x"], d["w"], d["la"], d["lb"], d["out"]], GEMM.grid, _lora_reference,
    lambda p: (2.0 * p["M"] * (p["N"] + p["R"]) * p["K"] + 2.0 * p["M"] * p["R"] * p["N"],
               _itemsize(p) * (p["M"] * p["K"] + p["K"] * (p["N"] + p["R"]) + p["M"] * p["N"])))


def _block_scaled_inputs(p: dict, rng: np.random.Generator) -> dict:
    m, n, k = p["M"], p["N"], p["K"]
    kb = k // p["BK"]
    return {"a": _random(rng, (m, k), "e4m3"), "b": _random(rng, (k, n), "e4m3"),
            "sa": rng.uniform(0.5, 2.0, (m, kb)).astype(np.float32),
            "sb": rng.uniform(0.5, 2.0, (kb, n // p["BN"])).astype(np.float32), "c": np.empty((m, n), NUMPY[p["dtype"]])}


def _block_scaled_reference(p: dict, d: dict) -> tuple:
    rows = _rows(np.random.default_rng(p["M"]), p["M"])
    a, b, bk, bn = d["a"][rows].astype(np.float64), d["b"].astype(np.float64), p["BK"], p["BN"]
    expected = np.zeros((len(rows), p["N"]))
    for k in range(p["K"] // bk):
        part = a[:, k * bk:(k + 1) * bk] @ b[k * bk:(k + 1) * bk]
        expected += part * d["sa"][rows, k:k + 1] * np.repeat(d["sb"][k].astype(np.float64), bn)[None, :]
    return d["c"][rows], expected


#: fp8 (e4m3) A (M x K) and B (K x N), A's scales per row and K block, B's per K and N block
BLOCK_SCALED = Family(
    _block_scaled_inputs, ("c",), lambda p, d: [d["a"], d["b"], d["sa"], d["sb"], d["c"]], GEMM.grid,
    _block_scaled_reference, GEMM_FP8.work)

def _w8a8_inputs(p: dict, rng: np.random.Generator) -> dict:
    m, n, k = p["M"], p["N"], p["K"]
    kb = k // p["BK"]
    return {"a": _random(rng, (m, k), "e4m3"), "b": _random(rng, (n, k), "e4m3"),
            "sa": rng.uniform(0.5, 2.0, (m, kb)).astype(np.float32),
            "sb": rng.uniform(0.5, 2.0, (n // p["BN"], kb)).astype(np.float32), "c": np.empty((m, n), NUMPY[p["dtype"]])}


def _w8a8_reference(p: dict, d: dict) -> tuple:
    rows = _rows(np.random.default_rng(p["M"]), p["M"])
    a, b, bk, bn = d["a"][rows].astype(np.float64), d["b"].astype(np.float64), p["BK"], p["BN"]
    expected = np.zeros((len(rows), p["N"]))
    for k in range(p["K"] // bk):
        part = a[:, k * bk:(k + 1) * bk] @ b[:, k * bk:(k + 1) * bk].T
        expected += part * d["sa"][rows, k:k + 1] * np.repeat(d["sb"][:, k].astype(np.float64), bn)[None, :]
    return d["c"][rows], expected


#: TileGym's W8A8 form: fp8 A (M x K) and B (N x K), A's scales per row and K block, B's per
#: N and K block
W8A8 = Family(
    _w8a8_inputs, ("c",), lambda p, d: [d["a"], d["b"], d["sa"], d["sb"], d["c"]], GEMM.grid, _w8a8_reference,
    GEMM_FP8.work)

#: the persistent GEMM's grid: at most one CTA per SM of an H100 SXM (132), as TileGym
#: launches it, or the problem's ``ctas``
PERSISTENT_CTAS = 132
PERSISTENT_GEMM = Family(
    _gemm_inputs, ("c",), lambda p, d: [d["a"], d["b"], d["c"]],
    lambda p: (min(p.get("ctas", PERSISTENT_CTAS), (p["M"] // p["BM"]) * (p["N"] // p["BN"])), 1, 1),
    _gemm_reference, GEMM.work)


# --------------------------------------------------------------------------- grouped GEMM

def _grouped_inputs(p: dict, rng: np.random.Generator) -> dict:
    m, n, k, dt = p["M"], p["N"], p["K"], p["dtype"]
    out = {}
    for g in range(p["G"]):
        out[f"a{g}"], out[f"b{g}"] = _random(rng, (m, k), dt), _random(rng, (k, n), dt)
        out[f"c{g}"] = np.empty((m, n), NUMPY[dt])
    return out


def _grouped_args(p: dict, d: dict) -> list:
    """cuTile's list parameters: each a table (``ArrayList``) and its length."""
    groups = range(p["G"])
    return [x for name in "abc" for x in (ArrayList([d[f"{name}{g}"] for g in groups]), p["G"])]


def _grouped_reference(p: dict, d: dict) -> tuple:
    """Sampled rows of the first and the last group's outputs."""
    rows = _rows(np.random.default_rng(p["M"]), p["M"])[:SAMPLE_ROWS // 2]
    got, want = [], []
    for g in (0, p["G"] - 1):
        got.append(d[f"c{g}"][rows])
        want.append(d[f"a{g}"][rows].astype(np.float64) @ d[f"b{g}"].astype(np.float64))
    return np.concatenate(got), np.concatenate(want)


#: ``G`` groups of (M x K) @ (K x N), a grid of (M / BM, N / BN, G) tiles
GROUPED_GEMM = Family(
    _grouped_inputs, lambda p: tuple(f"c{g}" for g in range(p["G"])), _grouped_args, lambda p: (p["M"] // p["BM"], p["N"] // p["BN"], p["G"]),
    _grouped_reference, lambda p: tuple(p["G"] * x for x in GEMM.work(p)))


#: TileGym's persistent form: one CTA an SM (at most one a tile), the groups' tiles in turn
PERSISTENT_GROUPED_GEMM = Family(
    _grouped_inputs, GROUPED_GEMM.outputs, _grouped_args,
    lambda p: (min(p.get("ctas", PERSISTENT_CTAS), p["G"] * (p["M"] // p["BM"]) * (p["N"] // p["BN"])), 1, 1),
    _grouped_reference, GROUPED_GEMM.work)


# --------------------------------------------------------------------------- attention

def _attention_inputs(p: dict, rng: np.random.Generator) -> dict:
    shape = (p["B"] * p["H"], p["S"], p["D"])
    out = {name: _random(rng, shape, p["dtype"]) for name in ("q", "k", "v")}
    out["o"] = np.empty(shape, NUMPY[p["dtype"]])
    return out


def _attention_reference(p: dict, d: dict) -> tuple:
    rng = np.random.default_rng(p["S"])
    heads = np.sort(rng.choice(p["B"] * p["H"], size=min(2, p["B"] * p["H"]), replace=False))
    rows = _rows(rng, p["S"])
    got, want = [], []
    for h in heads:
        q, k, v = (d[x][h].astype(np.float64) for x in ("q", "k", "v"))
        s = q[rows] @ k.T / math.sqrt(p["D"])
        if p["causal"]:
            s = np.where(rows[:, None] >= np.arange(p["S"])[None, :], s, -np.inf)
        e = np.exp(s - s.max(axis=1, keepdims=True))
        want.append(e @ v / e.sum(axis=1, keepdims=True))
        got.append(d["o"][h][rows])
    return np.stack(got), np.stack(want)


def _attention_work(p: dict) -> tuple[float, float]:
    pairs = p["S"] * p["S"] / (2 if p["causal"] else 1)
    return 4.0 * p["B"] * p["H"] * pairs * p["D"], 4.0 * _itemsize(p) * p["B"] * p["H"] * p["S"] * p["D"]


ATTENTION = Family(
    _attention_inputs, ("o",),
    lambda p, d: [d["q"], d["k"], d["v"], d["o"], np.float32(1 / math.sqrt(p["D"]))],
    lambda p: (p["S"] // p["BM"], p["B"] * p["H"], 1), _attention_reference, _attention_work)


# --------------------------------------------------------------------------- row-wise kernels

def _rows_inputs(names: tuple[str, ...], vectors: tuple[str, ...]) -> Callable:
    def make(p: dict, rng: np.random.Generator) -> dict:
        out = {name: _random(rng, (p["rows"], p["N"]), p["dtype"], 2.0) for name in names}
        out.update({name: _random(rng, (p["N"],), p["dtype"]) for name in vectors})
        out["out"] = np.empty((p["rows"], p["N"]), NUMPY[p["dtype"]])
        return out
    return make


def _row_reference(fn: Callable[[dict, np.ndarray], np.ndarray]) -> Callable:
    def reference(p: dict, d: dict) -> tuple:
        rows = _rows(np.random.default_rng(p["rows"]), p["rows"])
        return d["out"][rows], fn(d, d["x"][rows].astype(np.float64))
    return reference


def _softmax(d: dict, x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layernorm(d: dict, x: np.ndarray) -> np.ndarray:
    c = x - x.mean(axis=1, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=1, keepdims=True) + 1e-5) * d["w"].astype(np.float64) + d["b"]


def _rmsnorm(d: dict, x: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * d["w"].astype(np.float64)


def _rows_work(flops_per_element: float) -> Callable:
    return lambda p: (flops_per_element * p["rows"] * p["N"], 2.0 * _itemsize(p) * p["rows"] * p["N"])


def _row_family(vectors: tuple[str, ...], fn: Callable, flops: float) -> Family:
    return Family(_rows_inputs(("x",), vectors), ("out",),
                  lambda p, d: [d["x"], *(d[v] for v in vectors), d["out"]],
                  lambda p: (p["rows"], 1, 1), _row_reference(fn), _rows_work(flops))


SOFTMAX = _row_family((), _softmax, 5.0)
LAYERNORM = _row_family(("w", "b"), _layernorm, 8.0)
RMSNORM = _row_family(("w",), _rmsnorm, 5.0)
#: TileGym's persistent RMS norm: ``TILE_M`` rows a trip, one CTA an SM (``PERSISTENT_CTAS``)
RMSNORM_PERSISTENT = Family(_rows_inputs(("x",), ("w",)), ("out",), lambda p, d: [d["x"], d["w"], d["out"]],
                            lambda p: (min(PERSISTENT_CTAS, -(-p["rows"] // p["TILE_M"])), 1, 1),
                            _row_reference(_rmsnorm), _rows_work(5.0))
#: TileGym's persistent RMS norm for wide rows: a row a trip in column chunks, one CTA an SM
RMSNORM_CHUNKED = Family(_rows_inputs(("x",), ("w",)), ("out",), lambda p, d: [d["x"], d["w"], d["out"]],
                         lambda p: (min(PERSISTENT_CTAS, p["rows"]), 1, 1), _row_reference(_rmsnorm),
                         _rows_work(5.0))


#: A language model's loss: rows of V logits, a label each (``gpu_kernels.cross_entropy``)
def _cross_entropy_inputs(p: dict, rng: np.random.Generator) -> dict:
    return {"logits": _random(rng, (p["rows"], p["V"]), p["dtype"], 4.0),
            "labels": rng.integers(0, p["V"], p["rows"], dtype=np.int32), "loss": np.empty(p["rows"], np.float32)}


def _cross_entropy_reference(p: dict, d: dict) -> tuple:
    rows = _rows(np.random.default_rng(p["rows"]), p["rows"])
    x = d["logits"][rows].astype(np.float64)
    m = x.max(axis=1)
    lse = np.log(np.exp(x - m[:, None]).sum(axis=1)) + m
    return d["loss"][rows], lse - x[np.arange(len(rows)), d["labels"][rows]]


CROSS_ENTROPY = Family(_cross_entropy_inputs, ("loss",), lambda p, d: [d["logits"], d["labels"], d["loss"]],
                       lambda p: (p["rows"], 1, 1), _cross_entropy_reference,
                       lambda p: (4.0 * p["rows"] * p["V"], _itemsize(p) * p["rows"] * p["V"]))


# --------------------------------------------------------------------------- element-wise

AXPY_A = 1.75


def _axpy_inputs(p: dict, rng: np.random.Generator) -> dict:
    n = p["n"]
    return {"x": rng.random(n, dtype=np.float32) - 0.5, "y": rng.random(n, dtype=np.float32) - 0.5,
            "out": np.empty(n, np.float32)}


def _axpy_reference(p: dict, d: dict) -> tuple:
    idx = np.sort(np.random.default_rng(p["n"]).choice(p["n"], size=min(p["n"], 1 << 20), replace=False))
    return d["out"][idx], AXPY_A * d["x"][idx].astype(np.float64) + d["y"][idx]


AXPY = Family(_axpy_inputs, ("out",), lambda p, d: [d["x"], d["y"], d["out"], np.float32(AXPY_A)],
              lambda p: (p["n"] // p["T"], 1, 1), _axpy_reference, lambda p: (2.0 * p["n"], 12.0 * p["n"]))

FAMILIES = {"gemm": GEMM, "gemm_fp8": GEMM_FP8, "grouped_gemm": GROUPED_GEMM, "persistent_grouped_gemm": PERSISTENT_GROUPED_GEMM,
            "persistent_gemm": PERSISTENT_GEMM, "attention": ATTENTION, "softmax": SOFTMAX, "layernorm": LAYERNORM,
            "rmsnorm": RMSNORM, "rmsnorm_persistent": RMSNORM_PERSISTENT,
            "rmsnorm_chunked": RMSNORM_CHUNKED, "cross_entropy": CROSS_ENTROPY, "axpy": AXPY, "lora": LORA,
            "block_scaled": BLOCK_SCALED, "w8a8": W8A8}


def check(p: dict, family: Family, data: dict) -> tuple[bool, str]:
    """(correct, why): every output element written (no poison NaN left), and the sampled
    relative error ‖out − ref‖ / ‖ref‖ within the output type's tolerance."""
    for name in outputs_of(family, p):
        out = data[name]
        if not np.isfinite(out.astype(np.float32)).all():
            bad = int((~np.isfinite(out.astype(np.float32))).sum())
            return False, f"{bad} of {out.size} elements of '{name}' unwritten or not finite"
    got, want = family.reference(p, data)
    err = float(np.linalg.norm(got.astype(np.float64) - want) / max(np.linalg.norm(want), 1e-30))
    tol = TOLERANCE[p.get("dtype", "f32")]
    return err <= tol, f"relative error {err:.2e} (tolerance {tol:.1e})"


def outputs_of(family: Family, p: dict) -> tuple[str, ...]:
    """The names of the arrays the kernel writes on problem ``p``."""
    return family.outputs(p) if callable(family.outputs) else family.outputs


def describe_rate(p: dict, family: Family, ms: Any) -> str:
    """TFLOP/s for matrix work, GB/s for memory-bound kernels."""
    if ms is None:
        return "-"
    flops, nbytes = family.work(p)
    if family in (GEMM, GEMM_FP8, GROUPED_GEMM, PERSISTENT_GEMM, PERSISTENT_GROUPED_GEMM, ATTENTION):
        return f"{flops / ms / 1e9:.1f} TFLOP/s"
    return f"{nbytes / ms / 1e6:.0f} GB/s"
