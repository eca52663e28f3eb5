"""Helpers for the TMA tests: NVIDIA's tileiras builds a kernel case for sm_90; its PTX and
its ``.nv.host`` object come back, and the callback runs on a kernel's argument buffer."""
from __future__ import annotations

import os
import subprocess
import tempfile
from typing import Any

import numpy as np

from tileiras.emulate.cubin import elf_sections, ptx_from_cubin
from tileiras.emulate.nvhost import bank_offsets, load_host_object
from tileiras.emulate.parser import parse_ptx

import differential


def build_with_nvidia(case: Any, tileiras: str, arch: str = "sm_90") -> tuple[bytes, str, bytes]:
    """(bytecode, NVIDIA's PTX, NVIDIA's .nv.host object) for a ``KernelCase``."""
    bytecode = differential.export(case, arch=arch)
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "k.tileir"), os.path.join(tmp, "k.cubin")
        with open(src, "wb") as f:
            f.write(bytecode)
        subprocess.run([tileiras, f"--gpu-name={arch}", "--lineinfo", src, "-o", out], check=True,
                       capture_output=True)
        with open(out, "rb") as f:
            cubin = f.read()
    return bytecode, ptx_from_cubin(cubin), elf_sections(cubin)[".nv.host"]


def run_callback(ptx: str, host: bytes, values: list[int], arch: str = "sm_90") -> list[bytes]:
    """The tensor maps NVIDIA's callback writes for user parameters ``values`` (integers, in
    ``.param`` order), in hidden-parameter order."""
    fn = parse_ptx(ptx).entry(None)
    offsets, size = bank_offsets(fn.params, arch)
    buf = np.zeros(size, np.uint8)
    user = [v for v in fn.params if not v.hidden]
    assert len(user) == len(values), (len(user), len(values))
    for var, value in zip(user, values):
        buf[offsets[var.name]:offsets[var.name] + var.size] = np.frombuffer(
            (int(value) % (1 << 8 * var.size)).to_bytes(var.size, "little"), np.uint8)
    load_host_object(host).on_arguments_change(fn.name, buf)
    return [buf[offsets[v.name]:offsets[v.name] + 128].tobytes() for v in fn.params if v.hidden]


def array_values(address: int, shape: tuple, strides: tuple) -> list[int]:
    """An array argument in cuTile's calling convention: pointer, shape, strides (elements)."""
    return [address, *shape, *strides]


def numpy_dtype_name(name: str) -> str:
    """numpy's name for a cuTile dtype name (bfloat16 has no numpy name: same width as f16)."""
    return {"bfloat16": "float16"}.get(name, name)


def random_arrays(case: Any, rng: np.random.Generator, most: dict) -> list[tuple[int, tuple, tuple, str]]:
    """(address, shape, element strides, dtype name) per array parameter of ``case``:
    16-divisible shapes (under ``16 * most[ndim]`` per dim, ``16 * 12`` above the ranks in
    ``most``) and strides with some padding (what the signatures promise), addresses
    16-byte aligned; some span more than 128 KiB."""
    out = []
    for k, p in enumerate(case.params[0]):
        if not hasattr(p, "ndim"):
            continue
        shape = tuple(int(16 * rng.integers(1, most.get(p.ndim, 12))) for _ in range(p.ndim))
        strides, step = [], 1
        for d in reversed(range(p.ndim)):
            strides.insert(0, step)
            step *= shape[d] + 16 * int(rng.integers(0, 3))
        address = 0x7F00_0000_0000 + (k << 36) + 16 * int(rng.integers(0, 1 << 30))
        out.append((address, shape, tuple(strides), p.dtype.name))
    return out
