"""The GPU launcher's parameter packing against the kernel ABI, without a GPU.

Three independent witnesses of where each parameter lives: the ``.param`` declarations of
the PTX we emit (offsets derived here with PTX's natural-alignment rule), the ``KPARAM_INFO``
attributes ptxas writes into the cubin (ours and NVIDIA's), and the packer
(``tileiras.gpu.params``).  They must agree for every signature, in every order.
"""
from __future__ import annotations

import re
import subprocess

import ml_dtypes
import numpy as np
import pytest
from _build import bytecode, bytecode_file

from tileiras.codegen import abi
from tileiras.gpu import cubin as gpu_cubin
from tileiras.gpu import params as P
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.reader import read_bytecode

#: every kind, in an order that needs padding after each narrow one
SIGNATURES = {
    "mixed": "%a: tile<i8>, %b: tile<ptr<f32>>, %c: tile<i16>, %d: tile<f16>, %e: tile<i64>, %f: tile<i1>, "
             "%g: tile<bf16>, %h: tile<f64>, %i: tile<i32>, %j: tile<f32>, %k: tile<ptr<i8>>",
    "narrow_first": "%a: tile<i1>, %b: tile<i1>, %c: tile<bf16>, %d: tile<i8>, %e: tile<f32>, %f: tile<i16>, "
                    "%g: tile<f64>",
    "cutile_array": "%p: tile<ptr<f16>>, %s0: tile<i32>, %s1: tile<i32>, %t0: tile<i32>, %t1: tile<i32>, "
                    "%x: tile<f32>, %q: tile<ptr<f16>>, %n: tile<i64>",
    "empty": "",
}

_PTX_SIZES = {".u8": 1, ".u16": 2, ".u32": 4, ".f32": 4, ".u64": 8, ".f64": 8}
_PARAM = re.compile(r"\.param\s+(?:\.align\s+(\d+)\s+\.b8\s+\w+\[(\d+)\]|(\.\w+)\s+(?:\.ptr\s+\.global\s+\.align\s+\d+\s+)?\w+)")


def module_text(params: str) -> str:
    return f"cuda_tile.module @m {{\n  entry @k({params}) {{\n    return\n  }}\n}}\n"


def ptx_param_slots(ptx: str, entry: str) -> list[tuple[int, int]]:
    """(offset, size) of each ``.param`` of ``entry``, laid out as PTX lays out the parameter
    space: each at the next multiple of its alignment (its size, or ``.align`` for arrays)."""
    head = re.search(rf"\.entry\s+{re.escape(entry)}\s*\(([^)]*)\)", ptx)
    assert head is not None, f"no .entry {entry} in the PTX"
    slots, offset = [], 0
    for m in _PARAM.finditer(head.group(1)):
        size, align = (int(m.group(2)), int(m.group(1))) if m.group(1) else (_PTX_SIZES[m.group(3)],) * 2
        offset = -(-offset // align) * align
        slots.append((offset, size))
        offset += size
    return slots


@pytest.mark.parametrize("name", SIGNATURES)
def test_packer_matches_the_ptx_params(name):
    module = read_bytecode(bytecode(module_text(SIGNATURES[name])))
    ptx = compile_module(module, CompileOptions(gpu_name="sm_90"), "ptx")
    fn = module.functions[0]
    assert list(P.param_slots(P.signature_of(fn))) == ptx_param_slots(ptx, fn.name)


def test_mixed_signature_offsets():
    """The values themselves, so a change in both the ABI and the PTX is still caught."""
    fn = read_bytecode(bytecode(module_text(SIGNATURES["mixed"]))).functions[0]
    kinds = P.signature_of(fn)
    assert kinds == ("i8", "ptr", "i16", "f16", "i64", "i1", "bf16", "f64", "i32", "f32", "ptr")
    assert P.param_slots(kinds) == ((0, 1), (8, 8), (16, 2), (18, 2), (24, 8), (32, 1), (34, 2), (40, 8),
                                    (48, 4), (52, 4), (56, 8))


@pytest.mark.parametrize("name", ["mixed", "narrow_first", "cutile_array"])
def test_packer_matches_ptxas_kparam_info(name, tmp_path):
    """ptxas's own record of the parameter layout in our cubin."""
    from tileiras import driver

    path = bytecode_file(tmp_path, module_text(SIGNATURES[name]))
    out = tmp_path / "k.cubin"
    assert driver.main([str(path), "--gpu-name=sm_90", "-o", str(out)]) == 0
    facts = gpu_cubin.kernel_facts(out.read_bytes())["k"]
    fn = read_bytecode(path.read_bytes()).functions[0]
    assert facts.params == P.param_slots(P.signature_of(fn))
    assert facts.cluster == (1, 1, 1) and facts.language == 7


@pytest.mark.parametrize("name, threads, cluster", [("kernel_hints", 128, 2), ("worker_warps", 256, 1)])
def test_launch_shape_read_from_cubins(tileir_store, real_tileiras, tmp_path, name, threads, cluster):
    """REQNTID and CTA_PER_CLUSTER, which an explicit launch uses, as both compilers declare them."""
    from tileiras import driver

    found = tileir_store.get(f"{name}.sm_90.13.4")
    if found is None:
        pytest.skip(f"cuTile cannot export {name}")
    ours, nv = tmp_path / "ours.cubin", tmp_path / "nv.cubin"
    assert driver.main([str(found.path), "--gpu-name=sm_90", "-o", str(ours)]) == 0
    subprocess.run([real_tileiras, "--gpu-name=sm_90", str(found.path), "-o", str(nv)], check=True)
    for cubin in (ours, nv):
        (facts,) = gpu_cubin.kernel_facts(cubin.read_bytes()).values()
        assert facts.threads == (threads, 1, 1) and facts.cluster == (cluster, 1, 1), cubin.name


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100"])
def test_packer_matches_nvidias_kparam_info(tmp_path, real_tileiras, arch):
    path = bytecode_file(tmp_path, module_text(SIGNATURES["mixed"]))
    out = tmp_path / "nv.cubin"
    subprocess.run([real_tileiras, f"--gpu-name={arch}", str(path), "-o", str(out)], check=True)
    fn = read_bytecode(path.read_bytes()).functions[0]
    facts = gpu_cubin.kernel_facts(out.read_bytes())["k"]
    assert facts.params == P.param_slots(P.signature_of(fn))
    assert facts.param_bytes == 64  # the user parameters end at 56 + 8


CUTILE_KERNELS = ["gemm", "layernorm", "runtime_if", "scalar_axpy", "advanced_indexing", "kernel_hints"]


@pytest.mark.parametrize("name", CUTILE_KERNELS)
def test_packer_matches_cutile_kernels(tileir_store, name):
    """Real cuTile signatures: arrays as (pointer, shapes, strides), scalars, hints."""
    found = tileir_store.get(f"{name}.sm_90.13.4")
    if found is None:
        pytest.skip(f"cuTile cannot export {name}")
    module = read_bytecode(found.read_bytes())
    ptx = compile_module(module, CompileOptions(gpu_name="sm_90"), "ptx")
    entries = [fn for fn in module.functions if fn.is_entry]
    assert entries
    for fn in entries:
        assert list(P.param_slots(P.signature_of(fn))) == ptx_param_slots(ptx, fn.name), fn.name


def test_pack_params_bytes():
    kinds = ("i8", "ptr", "i16", "bf16", "f16", "i1", "f64", "i32", "f32")
    packed = P.pack_params(kinds, [-1, 0x1122334455667788, 40000, 1.5, -2.0, True, 0.1, -3, 2.5])
    buf = packed.buffer
    assert packed.offsets == (0, 8, 16, 18, 20, 22, 24, 32, 36) and len(buf) == 40
    assert buf[0] == 0xFF and buf[1:8] == bytes(7)  # padding is zero
    assert int.from_bytes(buf[8:16], "little") == 0x1122334455667788
    assert int.from_bytes(buf[16:18], "little") == 40000
    assert buf[18:20] == np.array(1.5, ml_dtypes.bfloat16).tobytes() == b"\xc0\x3f"
    assert buf[20:22] == np.float16(-2.0).tobytes() and buf[22] == 1
    assert np.frombuffer(buf[24:32], "<f8")[0] == 0.1
    assert int.from_bytes(buf[32:36], "little", signed=True) == -3
    assert np.frombuffer(buf[36:40], "<f4")[0] == 2.5


def test_pack_params_rejects_a_wrong_count_and_kind():
    with pytest.raises(ValueError, match="takes 2 parameters, got 1"):
        P.pack_params(("ptr", "i32"), [0])
    with pytest.raises(Exception, match="f8E4M3FN"):
        P.pack_params(("f8E4M3FN",), [1.0])


def test_abi_offsets_by_kind_equal_offsets_by_type():
    fn = read_bytecode(bytecode(module_text(SIGNATURES["narrow_first"]))).functions[0]
    assert abi.param_offsets(tuple(fn.type.inputs)) == abi.kind_offsets(P.signature_of(fn)) == (0, 1, 2, 4, 8, 12, 16)
