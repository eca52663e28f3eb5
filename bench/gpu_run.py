"""The run step of ``bench/gpu.py``: check and time each planned cubin on the GPU (or, with
``--dry-run``, check each kernel in the reference interpreter instead, with no driver).

Imports numpy, ml_dtypes, cuda-bindings (through ``tileiras.gpu``) and the reader and
interpreter of this package for a dry run: nothing that needs llvmlite or ptxas.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
from gpu_problems import FAMILIES, Family, check, describe_rate, outputs_of

from tileiras import gpu
from tileiras.gpu.cubin import kernel_facts
from tileiras.interp import ArrayList, cutile_args

POISON = 0xFF            # every float type reads all-ones bytes as NaN
TIMED_MS = 1500.0        # aim for this much timed work per cubin
SET_BYTES = 400 << 20    # rotate buffer sets until this many bytes are in flight (L2 is 50-60 MB)


def kernel_values(args: list, address: Callable[[np.ndarray], int],
                  table: Optional[Callable[[np.ndarray], int]] = None) -> list:
    """cuTile's parameters (pointer, shapes, strides per array; a list's table, then its
    length) with device addresses: ``table`` uploads a list's table of its members' addresses."""
    values = []
    for a in cutile_args(*args):
        if isinstance(a, np.ndarray):
            values.append(address(a))
        elif isinstance(a, ArrayList):
            values.append(table(a.table([address(m) for m in a.arrays])))
        else:
            values.append(a)
    return values


def param_problem(kinds: list, cubin: bytes, entry: str) -> Optional[str]:
    """None when the packer lays the parameters out where the cubin's KPARAM_INFO says."""
    facts = kernel_facts(cubin).get(entry)
    if facts is None:
        return f"no kernel {entry} in the cubin"
    packed = gpu.pack_params(kinds, [0] * len(kinds))
    slots = tuple(zip(packed.offsets, packed.sizes))
    return None if facts.params == slots else f"parameters at {slots}, cubin says {facts.params}"


class DryRunner:
    """The reference interpreter in the GPU's place: proves the inputs, arguments, packing
    and references without a driver."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.notes = ["dry run: the reference interpreter stood in for the GPU (tiny sizes, no timing)"]

    def measure(self, k: dict, who: str, p: dict, family: Family, rng: np.random.Generator) -> dict:
        from tileiras import interp
        from tileiras.reader import read_bytecode

        problem = param_problem(k["signature"], (self.folder / k["cubins"][who]).read_bytes(), k["entry"])
        if problem is not None:
            return {"correct": "no", "error": problem}
        data = family.inputs(p, rng)
        for name in outputs_of(family, p):
            data[name].view(np.uint8).fill(POISON)
        module = read_bytecode((self.folder / k["bytecode"]).read_bytes())
        interp.launch(module, k["entry"], family.grid(p), cutile_args(*family.args(p, data)))
        ok, why = check(p, family, data)
        return {"correct": "yes" if ok else "no", "check": why, "ms": None, "rate": "-"}


class GpuRunner:
    """The device: load, check once on fresh inputs with poisoned outputs, then time."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.device = gpu.open_device()
        d = self.device
        self.notes = [f"device: {d.name} ({d.arch}), CUDA driver {d.driver_version}"]

    def upload(self, data: dict, outputs: tuple) -> dict:
        """name -> device address; outputs poisoned, inputs copied."""
        out = {}
        for name, arr in data.items():
            out[name] = self.device.alloc(arr.nbytes)
            if name in outputs:
                self.device.fill(out[name], arr.nbytes, POISON)
            else:
                self.device.upload(out[name], arr)
        return out

    def free(self, addresses: dict) -> None:
        for ptr in addresses.values():
            self.device.free(ptr)

    def table(self, tables: dict, rows: np.ndarray) -> int:
        """A list parameter's table on the device (freed with ``tables``)."""
        address = self.device.alloc(rows.nbytes)
        self.device.upload(address, rows)
        tables[f"table{len(tables)}"] = address
        return address

    def launch_once(self, kernel: Any, k: dict, p: dict, family: Family, data: dict, convention: Any) -> None:
        addresses = self.upload(data, outputs_of(family, p))
        by_id = {id(arr): addresses[name] for name, arr in data.items()}
        tables: dict = {}
        try:
            values = kernel_values(family.args(p, data), lambda a: by_id[id(a)], lambda t: self.table(tables, t))
            self.device.launch(kernel, family.grid(p), gpu.pack_params(k["signature"], values), convention)
            self.device.synchronize()
            for name in outputs_of(family, p):
                self.device.download(addresses[name], data[name])
        finally:
            self.free(addresses)
            self.free(tables)

    def measure(self, k: dict, who: str, p: dict, family: Family, rng: np.random.Generator) -> dict:
        cubin = (self.folder / k["cubins"][who]).read_bytes()
        try:
            kernel = self.device.load(cubin, k["entry"])
        except gpu.CudaError as err:
            return {"correct": "no", "error": f"refused by the driver: {err.message}", "refused": True}
        data = family.inputs(p, rng)
        tried = []
        for convention in (gpu.Convention.CUTILE, gpu.Convention.EXPLICIT):
            try:
                self.launch_once(kernel, k, p, family, data, convention)
                break
            except gpu.CudaError as err:
                tried.append(f"{convention.value} launch: {err.message}")
                self.device.recover()
                kernel = self.device.load(cubin, k["entry"])
        else:
            return {"correct": "no", "error": "; ".join(tried)}
        ok, why = check(p, family, data)
        result = {"correct": "yes" if ok else "no", "check": why, "convention": convention.value,
                  "failed_conventions": tried, **self.attributes(kernel)}
        result["times_ms"] = self.time(kernel, k, p, family, data, convention)
        result["ms"] = float(np.median(result["times_ms"]))
        result["rate"] = describe_rate(p, family, result["ms"])
        self.device.unload(kernel)
        return result

    def attributes(self, kernel: Any) -> dict:
        names = {"registers": "CU_FUNC_ATTRIBUTE_NUM_REGS", "static_smem": "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES",
                 "max_threads": "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK"}
        return {key: self.device.function_attribute(kernel, attr) for key, attr in names.items()}

    def time(self, kernel: Any, k: dict, p: dict, family: Family, data: dict, convention: Any) -> list:
        """Median-ready times over rotating buffer sets (the same random inputs in each)."""
        set_bytes = sum(a.nbytes for a in data.values())
        sets = [self.upload(data, ()) for _ in range(int(np.clip(-(-SET_BYTES // set_bytes), 1, 4)))]
        try:
            packed = []
            for addresses in sets:
                by_id = {id(arr): addresses[name] for name, arr in data.items()}
                values = kernel_values(family.args(p, data), lambda a, b=by_id: b[id(a)],
                                       lambda t, tables=addresses: self.table(tables, t))
                packed.append(gpu.pack_params(k["signature"], values))
            grid = family.grid(p)

            def run(i: int) -> None:
                self.device.launch(kernel, grid, packed[i % len(packed)], convention)

            first = float(np.median(self.device.time_ms(run, repeat=3, warmup=2)))
            repeat = 3 if first > 2000 else int(np.clip(TIMED_MS / max(first, 1e-3), 10, 200))
            return self.device.time_ms(run, repeat=repeat, warmup=2)
        finally:
            for addresses in sets:
                self.free(addresses)


def run(folder: Path, manifest: dict, only: Optional[set], log: Callable[[str], None], *, dry: bool, tiny: bool,
        deadline: float) -> tuple[list, list]:
    """Every planned kernel, ours then NVIDIA's: (table rows, notes)."""
    runner = DryRunner(folder) if dry else GpuRunner(folder)
    notes = list(runner.notes)
    rows = []
    for i, k in enumerate(manifest["kernels"]):
        if only and k["name"] not in only:
            continue
        p, family = (k["tiny"] if tiny else k["problem"]), FAMILIES[k["family"]]
        row = {"name": k["name"], "problem": p, "impls": {}}
        for j, who in enumerate(("ours", "nvidia")):
            if who in k["compile_errors"]:
                impl = {"correct": "-", "error": f"did not compile: {k['compile_errors'][who]}"}
            elif time.monotonic() > deadline:
                impl = {"correct": "-", "error": "skipped: the time budget is spent"}
            else:
                impl = runner.measure(k, who, p, family, np.random.default_rng(1000 * i + j))
            row["impls"][who] = impl
            log(f"{k['name']} {who}: " + ", ".join(f"{key}={value}" for key, value in impl.items()
                                                    if key != "times_ms"))
            if "error" in impl:
                notes.append(f"{k['name']} ({who}): {impl['error'].splitlines()[0][:300]}")
        rows.append(row)
    return rows, notes
