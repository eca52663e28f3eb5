"""Differential testing: the reference interpreter vs our PTX in the emulator.

For a cuTile kernel case (``test/kernels``): export its bytecode, build random inputs
from its parameter constraints, run the Tile IR interpreter (the semantics) and the
PTX our compiler emits in the PTX emulator (the code), and compare every array.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import ml_dtypes
import numpy as np

from tileiras import interp
from tileiras.emulate import launch
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.reader import read_bytecode

_NUMPY = {
    "float16": np.float16, "float32": np.float32, "float64": np.float64, "bfloat16": ml_dtypes.bfloat16,
    "tfloat32": np.float32, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "bool_": np.bool_,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2,
}


def numpy_dtype(ct_dtype: Any) -> Any:
    name = getattr(ct_dtype, "name", None) or str(ct_dtype).split(".")[-1]
    return _NUMPY[name]


def random_array(rng: np.random.Generator, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f" or dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2):
        return rng.uniform(-4, 4, shape).astype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    # distinct values (gather/scatter indices must not repeat), a quarter of them negative
    n = int(np.prod(shape))
    values = rng.permutation(n) - n // 4
    if dt.kind == "u" or np.iinfo(dt).max < n:
        values = values % min(np.iinfo(dt).max, 100)
    return values.reshape(shape).astype(dtype)


@dataclass
class Case:
    """One exported entry with concrete inputs."""

    bytecode: bytes
    entry: str
    arrays: list[np.ndarray]        # the Python-level arguments, arrays and scalars
    grid: tuple[int, int, int]

    def args(self, arrays: Sequence[Any]) -> list[Any]:
        return interp.cutile_args(*arrays)


def export(case: Any, arch: str = "sm_90", version: str = "13.4") -> bytes:
    from cuda.tile.compilation import export_kernel

    buf = io.BytesIO()
    export_kernel(case.kernel, case.signatures(), buf, gpu_code=arch, output_format="tileir_bytecode",
                  bytecode_version=version)
    return buf.getvalue()


def make_inputs(params: Sequence[Any], rng: np.random.Generator, extent: int) -> list[Any]:
    from cuda.tile.compilation import ArrayConstraint, ScalarConstraint

    values: list[Any] = []
    for p in params:
        if isinstance(p, ArrayConstraint):
            values.append(random_array(rng, numpy_dtype(p.dtype), (extent,) * p.ndim))
        elif isinstance(p, ScalarConstraint):
            dt = numpy_dtype(p.dtype)
            values.append(dt(3) if np.dtype(dt).kind in "iu" else dt(1.5))
    return values


@dataclass
class Outcome:
    arrays: list[np.ndarray]
    failed: bool      # an assert fired / a trap happened
    printed: str


def run_interpreter(c: Case) -> Outcome:
    arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in c.arrays]
    printed: list[str] = []
    result = interp.launch(c.bytecode, c.entry, c.grid, c.args(arrays), printed=printed)
    return Outcome([a for a in arrays if isinstance(a, np.ndarray)], bool(result.failures), "".join(printed))


def run_compiled(c: Case, gpu_name: str = "sm_90") -> Outcome:
    module = read_bytecode(c.bytecode)
    ptx = compile_module(module, CompileOptions(gpu_name=gpu_name), "ptx")
    name = c.entry
    arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in c.arrays]
    result = launch(ptx, name, c.grid, c.args(arrays))
    failed = result.trap is not None
    if result.trap is not None and result.trap.kind not in ("trap", "assert"):
        raise AssertionError(f"emulated PTX faulted: {result.trap}")
    return Outcome([a for a in arrays if isinstance(a, np.ndarray)], failed, result.output)


def run_real_ptx(c: Case, real_tileiras: str, workdir: str, gpu_name: str = "sm_90") -> Outcome:
    """NVIDIA's tileiras compiles the case (its PTX from the cubin's ``.nv_debug_ptx_txt``);
    the emulator runs that PTX: a third opinion next to the interpreter and our code."""
    import os
    import subprocess

    from tileiras.emulate.cubin import ptx_from_cubin

    src = os.path.join(workdir, "case.tileir")
    out = os.path.join(workdir, "case.cubin")
    with open(src, "wb") as f:
        f.write(c.bytecode)
    subprocess.run([real_tileiras, f"--gpu-name={gpu_name}", "--lineinfo", src, "-o", out], check=True,
                   capture_output=True)
    with open(out, "rb") as f:
        ptx = ptx_from_cubin(f.read())
    arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in c.arrays]
    result = launch(ptx, c.entry, c.grid, c.args(arrays))
    if result.trap is not None and result.trap.kind not in ("trap", "assert"):
        raise AssertionError(f"NVIDIA's PTX faulted in the emulator: {result.trap}")
    return Outcome([a for a in arrays if isinstance(a, np.ndarray)], result.trap is not None, result.output)


def compare(expected: Outcome, got: Outcome, *, rtol: float = 1e-4, atol: float = 1e-5) -> Optional[str]:
    """None when equal within tolerance (integers exactly), else a description."""
    if expected.failed != got.failed:
        return f"assert outcome differs: interpreter {expected.failed}, compiled {got.failed}"
    if expected.failed:  # memory after a failed assert is unspecified
        return None
    for i, (e, g) in enumerate(zip(expected.arrays, got.arrays)):
        kind = np.dtype(e.dtype).kind
        if kind in "iub":
            bad = np.flatnonzero(e.ravel() != g.ravel())
        else:
            ef, gf = e.astype(np.float64).ravel(), g.astype(np.float64).ravel()
            tol = atol + rtol * np.abs(ef)
            if e.dtype in (np.float16, ml_dtypes.bfloat16):
                tol = 1e-2 + 1e-2 * np.abs(ef)
            same_nan = np.isnan(ef) & np.isnan(gf)
            bad = np.flatnonzero(~same_nan & ~(np.abs(ef - gf) <= tol))
        if bad.size:
            k = bad[0]
            return (f"array {i} differs at {bad.size} of {e.size} elements; first at flat index {k}: "
                    f"interpreter {e.ravel()[k]!r}, compiled {g.ravel()[k]!r}")
    return None
