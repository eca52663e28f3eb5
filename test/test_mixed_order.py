"""Tiles whose views are of different orders (a Fortran-order view and a row-major one on
tiles of one shape): every access moves 16 bytes a thread along its own contiguous dim.
The shape's layouts keep the first access's runs (``vectorize.shape_vectors``); an access
along the other dim takes a layout of its own (``vectorize.access_layout``), and the tile
changes layout through shared memory, without bank conflicts (``exchange_layout``)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from _build import bytecode

from tileiras import diffcheck
from tileiras.emulate import launch
from tileiras.reader import read_bytecode

I32, PTR = "tile<i32>", "tile<ptr<f32>>"
VIEWS = {"C": ("tensor_view<?x?xf32, strides=[?,1]>", "[%nd, 1]"),
         "F": ("tensor_view<?x?xf32, strides=[1,?]>", "[1, %md]")}


def mixed_kernel(loads: str, store: str, tile: str = "32x64") -> str:
    """``y = 1 + sum of x_k`` over M x N tensors, x_k in the orders ``loads`` ("F": Fortran,
    "C": row-major), y in ``store``'s, by tiles of ``tile``."""
    names = [f"x{k}" for k in range(len(loads))]
    lines = ["    %t0 = make_token : token"]
    for name, order in list(zip(names, loads)) + [("y", store)]:
        view, strides = VIEWS[order]
        part = f"partition_view<tile=({tile}), {view}>"
        lines += [f"    %{name}b = assume div_by<16>, %{name} : {PTR}",
                  f"    %{name}v = make_tensor_view %{name}b, shape = [%md, %nd], strides = {strides} "
                  f": {I32}, {I32} -> {view}",
                  f"    %{name}p = make_partition_view %{name}v : {part}"]
    lines[1:1] = [f"    %md = assume div_by<16>, %m : {I32}", f"    %nd = assume div_by<16>, %n : {I32}",
                  f"    %bx, %by, %bz = get_tile_block_id : {I32}"]
    acc = "%one"
    lines.append(f"    %one = constant <f32: 1.0> : tile<{tile}xf32>")
    for name, order in zip(names, loads):
        part = f"partition_view<tile=({tile}), {VIEWS[order][0]}>"
        lines += [f"    %{name}t, %{name}k = load_view_tko weak %{name}p[%bx, %by] token = %t0 : {part}, {I32} "
                  f"-> tile<{tile}xf32>, token",
                  f"    %{name}s = addf %{name}t, {acc} : tile<{tile}xf32>"]
        acc = f"%{name}s"
    part = f"partition_view<tile=({tile}), {VIEWS[store][0]}>"
    lines.append(f"    %w = store_view_tko weak {acc}, %yp[%bx, %by] token = %t0 : tile<{tile}xf32>, {part}, {I32} "
                 "-> token")
    params = ", ".join([f"%{n}: {PTR}" for n in names + ["y"]] + [f"%m: {I32}", f"%n: {I32}"])
    return "cuda_tile.module @kernels {\n  entry @k(" + params + ") {\n" + "\n".join(lines) + "\n    return\n  }\n}\n"


def buffer(a: np.ndarray, order: str) -> np.ndarray:
    """The memory of ``a`` in ``order``, as the flat row-major array the kernel receives."""
    return np.ascontiguousarray(a.T if order == "F" else a)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("loads, store", [("F", "C"), ("C", "F"), ("FC", "C"), ("CF", "F")])
def test_mixed_orders_move_16_bytes_a_thread(loads, store, arch):
    """Every global access is 16 bytes a thread (sm_90 may load through TMA), a warp's
    request 16 whole sectors; the exchange meets no bank conflict; y is the interpreter's
    and numpy's (2x2 tiles of 32x64 over 64x128)."""
    data = bytecode(mixed_kernel(loads, store))
    ptx, host = diffcheck.compile_with_host(read_bytecode(data), arch)
    accesses = re.findall(r"\b(ld|st)\.global(\.v\d)?\.(b\d+)", ptx)
    assert accesses and all(v == ".v4" for _, v, _ in accesses), accesses
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal((64, 128)).astype(np.float32) for _ in loads]
    args = [buffer(x, o) for x, o in zip(xs, loads)] + [buffer(np.zeros((64, 128), np.float32), store), 64, 128]
    grid = (2, 2, 1)
    expected = diffcheck.run_interpreter(data, "k", grid, list(args))
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    t = launch(ptx, "k", grid, copies, traffic=True, host_object=host).check().traffic
    assert diffcheck.compare(expected, diffcheck.Outcome(diffcheck.arrays_of(copies), False, "")) is None
    y = copies[len(loads)]
    want = np.ones((64, 128), np.float32)
    for x in xs:                # the kernel's order of additions
        want = x + want
    np.testing.assert_array_equal(y.T if store == "F" else y, want)
    if t.loads.requests:
        assert t.loads.sectors_per_request == 16.0
    assert t.stores.sectors_per_request == 16.0
    assert t.shared_stores.requests > 0
    assert t.shared_stores.conflicts == t.shared_loads.conflicts == 0
