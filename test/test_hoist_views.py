"""Pass ``hoist-views`` (``lower/hoist.py``): cuTile's bytecode 13.1 makes a K loop's
partition views inside the loop, 13.4 before it.  Hoisted, a 13.1 GEMM gets the same
pipelined K loop as its 13.4 export (sm_90: the TMA ring into wgmma; sm_80: the cp.async
ring), where before it loaded and waited synchronously every trip; and it still agrees
with the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from differential import Case, compare, export, random_array, run_compiled, run_interpreter
from kernels import tma as tma_kernels

from tileiras.lower.hoist import hoist_views
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.reader import read_bytecode
from tileiras.tile import ops_control as CF
from tileiras.tile import ops_memory as MEM

CASE = next(c for c in tma_kernels.CASES if c.name == "tma_matmul_f16")


def views_in_loops(fn) -> int:
    return sum(isinstance(op, MEM.MakePartitionViewOp) for loop in fn.walk() if isinstance(loop, CF.ForOp)
               for op in loop.regions[0].blocks[0].ops)


def test_views_made_in_the_loop_move_before_it():
    (fn,) = read_bytecode(export(CASE, arch="sm_90", version="13.1")).functions
    assert views_in_loops(fn) == 2
    assert hoist_views(fn) == 2 and views_in_loops(fn) == 0
    (fn,) = read_bytecode(export(CASE, arch="sm_90", version="13.4")).functions
    assert views_in_loops(fn) == 0 and hoist_views(fn) == 0


@pytest.mark.parametrize("arch, copy", [("sm_90", "cp.async.bulk.tensor"), ("sm_80", "cp.async.cg")])
def test_a_13_1_gemm_is_pipelined_as_its_13_4_export(arch, copy):
    ptx = {v: compile_module(read_bytecode(export(CASE, arch=arch, version=v)), CompileOptions(gpu_name=arch), "ptx")
           for v in ("13.1", "13.4")}
    assert ptx["13.1"].count(copy) == ptx["13.4"].count(copy) > 2
    assert ptx["13.1"] == ptx["13.4"]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_hoisted_13_1_gemm_agrees_with_the_interpreter(arch):
    data = export(CASE, arch=arch, version="13.1")
    rng = np.random.default_rng(4)
    arrays = [random_array(rng, np.float16, (96, 160)), random_array(rng, np.float16, (160, 112)),
              np.zeros((96, 112), np.float32)]
    case = Case(data, read_bytecode(data).functions[0].name, arrays, (2, 2, 1))
    assert compare(run_interpreter(case), run_compiled(case, arch)) is None


def test_a_module_compiled_twice_gives_the_same_ptx():
    """Compiling works in place (run_stages): the first compile hoists the 13.1 GEMM's
    views, the second finds them hoisted and writes the same PTX."""
    module = read_bytecode(export(CASE, arch="sm_90", version="13.1"))
    first = compile_module(module, CompileOptions(gpu_name="sm_90"), "ptx")
    assert views_in_loops(module.functions[0]) == 0          # moved in the caller's module
    assert compile_module(module, CompileOptions(gpu_name="sm_90"), "ptx") == first
