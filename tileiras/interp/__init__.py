"""A reference interpreter of Tile IR semantics on numpy.

``run(module_or_path, entry, grid, args)`` executes an entry function once per tile block of
``grid`` (blocks run one after another, x fastest, then y, then z; all see the same global
memory) and returns ``args`` with every array argument updated in place::

    out = np.zeros(1024, np.float32)
    run("vadd.tileir", "vadd", 1024 // 16, [x, 1024, 1, y, 1024, 1, out, 1024, 1])

Arguments follow the entry's parameters: a numpy array for each pointer parameter (the
array *is* the memory the pointer points at), an ``ArrayList`` for the table pointer of a
list parameter (``arraylist.py``), a Python/numpy scalar otherwise.
``cutile_args`` expands arrays into cuTile's (pointer, shape..., strides...) parameters.

Output of ``print_tko`` goes to ``printed`` (a list) when given, else to stdout; failed
``assert``s raise ``TileAssertionError`` after the launch.  Semantic choices where the spec
leaves freedom are documented in each op-family module (floats.py, intarith.py, memory.py,
views.py, reduce.py, linalg.py, printf.py).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np

from ..ir import types as T
from ..ir.core import Function, Module
from . import (control, conversions, floatarith, intarith, linalg, math, memory, reduce,  # noqa: F401
               shape, views)
from .arraylist import ArrayList
from .core import IMPLS, Machine, run_function
from .errors import InterpError, TileAssertionError
from .memory import Memory
from .values import dtype_of, is_nibble_dtype, make_int, pack_nibbles, scalar_of, unpack_nibbles

__all__ = ["run", "launch", "Launch", "cutile_args", "ArrayList", "InterpError", "TileAssertionError",
           "load_module", "IMPLS"]

Grid = Union[int, Sequence[int]]


@dataclass
class Launch:
    args: list[Any]
    printed: list[str] = field(default_factory=list)
    failures: list = field(default_factory=list)


def load_module(module_or_path: Union[Module, str, Path, bytes]) -> Module:
    if isinstance(module_or_path, Module):
        return module_or_path
    from ..reader import read_bytecode
    if isinstance(module_or_path, (bytes, bytearray)):
        return read_bytecode(bytes(module_or_path), "<bytes>")
    path = Path(module_or_path)
    return read_bytecode(path.read_bytes(), str(path))


def find_entry(module: Module, entry: Optional[str]) -> Function:
    entries = [f for f in module.functions if f.is_entry] or list(module.functions)
    if entry is None:
        if len(entries) != 1:
            raise InterpError("the module has several entries; pick one with entry=: "
                              + ", ".join(f.name for f in entries))
        return entries[0]
    exact = [f for f in module.functions if f.name == entry]
    if exact:
        return exact[0]
    prefixed = [f for f in entries if f.name.startswith(entry + "_")]
    if len(prefixed) == 1:
        return prefixed[0]
    raise InterpError(f"no entry named {entry!r} (entries: {', '.join(f.name for f in entries)})")


def normalize_grid(grid: Grid) -> tuple[int, int, int]:
    dims = (grid,) if isinstance(grid, (int, np.integer)) else tuple(grid)
    if not 1 <= len(dims) <= 3 or any(int(d) < 0 for d in dims):
        raise InterpError(f"grid must be 1 to 3 non-negative extents, got {grid!r}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))  # type: ignore[return-value]


def _map_array(machine: Machine, arr: np.ndarray, name: str, mapped: dict[int, int], copies: list) -> int:
    """The address of ``arr`` in the machine's memory, mapped on first use: its own buffer
    when contiguous (C or F order: the strides passed with it describe that buffer, as on
    the GPU), else a C-order copy written back after the launch (``copies``)."""
    if id(arr) not in mapped:
        buffer = arr.T if arr.flags.f_contiguous and not arr.flags.c_contiguous else arr
        usable = buffer.flags.c_contiguous and buffer.flags.writeable and not is_nibble_dtype(arr.dtype)
        target = buffer if usable else np.array(arr, copy=True, order="C")
        if is_nibble_dtype(arr.dtype):  # 4-bit elements: two a byte in memory
            target = pack_nibbles(target)
        if target is not buffer:
            copies.append((arr, target))
        mapped[id(arr)] = machine.memory.add(target, name)
    return mapped[id(arr)]


def _bind_argument(machine: Machine, t: T.Type, arg: Any, index: int,
                   mapped: dict[int, int], copies: list) -> Any:
    elem = scalar_of(t)
    if isinstance(elem, T.PointerType):
        if isinstance(arg, np.ndarray):
            return np.array(_map_array(machine, arg, f"arg{index}", mapped, copies), dtype=np.uint64)
        if isinstance(arg, ArrayList):  # members first, then the table of their addresses
            addresses = [_map_array(machine, a, f"arg{index}[{k}]", mapped, copies) for k, a in enumerate(arg.arrays)]
            return np.array(machine.memory.add(arg.table(addresses), f"arg{index} table"), dtype=np.uint64)
        return np.array(int(arg), dtype=np.uint64)  # a raw address
    if isinstance(arg, np.ndarray) and arg.ndim and isinstance(t, T.TileType) and t.shape:
        return np.asarray(arg).astype(dtype_of(t)).reshape(t.shape)
    if isinstance(elem, T.ScalarType) and elem.is_int:
        return make_int(int(arg), elem.bitwidth)
    return np.asarray(np.float64(arg) if not isinstance(arg, np.generic) else arg).astype(dtype_of(t))


def launch(module_or_path: Union[Module, str, Path, bytes], entry: Optional[str] = None,
           grid: Grid = 1, args: Sequence[Any] = (), *, printed: Optional[list] = None,
           strict: bool = False) -> Launch:
    """Run ``entry`` over ``grid``; returns the arguments, printed lines and assert failures.
    ``strict`` makes integer ops whose overflow flags are violated raise ``InterpError``."""
    module = load_module(module_or_path)
    fn = find_entry(module, entry)
    params = fn.type.inputs
    if len(args) != len(params):
        raise InterpError(f"@{fn.name} takes {len(params)} arguments "
                          f"({', '.join(str(p) for p in params)}), got {len(args)}")
    machine = Machine(module, normalize_grid(grid), Memory(), strict=strict)
    for g in module.globals:
        data = np.frombuffer(bytes(g.data), dtype=np.uint8).copy()
        machine.globals[g.name] = machine.memory.add(data, f"@{g.name}", max(int(g.alignment or 0), 1))
    mapped: dict[int, int] = {}
    copies: list = []
    bound = [_bind_argument(machine, t, a, i, mapped, copies) for i, (t, a) in enumerate(zip(params, args))]
    gx, gy, gz = machine.grid
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                run_function(machine, fn, (x, y, z), bound)
    for original, target in copies:
        if is_nibble_dtype(original.dtype):
            target = unpack_nibbles(target, original.dtype, original.shape)
        np.copyto(original, target)
    result = Launch(list(args), list(machine.output), list(machine.failures))
    if printed is not None:
        printed.extend(machine.output)
    return result


def run(module_or_path: Union[Module, str, Path, bytes], entry: Optional[str] = None,
        grid: Grid = 1, args: Sequence[Any] = (), *, printed: Optional[list] = None,
        strict: bool = False) -> list[Any]:
    """Run ``entry`` over ``grid`` and return ``args`` (arrays updated in place).
    Printed text goes to ``printed`` if given, else to stdout; assert failures raise
    ``TileAssertionError``."""
    result = launch(module_or_path, entry, grid, args, printed=printed, strict=strict)
    if printed is None and result.printed:
        sys.stdout.write("".join(result.printed))
    if result.failures:
        raise TileAssertionError(result.failures)
    return result.args


def cutile_args(*items: Any) -> list[Any]:
    """cuTile (calling convention v1) parameters for Python-level kernel arguments: each
    array becomes (array, shape..., strides in elements...); scalars pass through."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, np.ndarray):
            out.append(item)
            out.extend(int(d) for d in item.shape)
            out.extend(int(s) // item.itemsize for s in item.strides)
        else:
            out.append(item)
    return out
