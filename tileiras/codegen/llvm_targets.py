"""LLVM's target registry, initialized once per process (NVPTX for kernels, x86-64 for
the .nv.host object), and the NVPTX back end itself.

Only the back-end process (``codegen.backend``) calls into LLVM: this module imports
llvmlite's bindings (libLLVM) when first called, never on import.
"""
from __future__ import annotations

import functools

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
NVPTX_DATA_LAYOUT = "e-p:64:64:64-p3:32:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"
# Shared-memory addresses in 32-bit registers (``p3:32`` above), as NVIDIA's PTX has them:
# without it the back end widens every shared address to 64 bits (``mul.wide``, ``add.s64``),
# which costs ptxas registers (cat_extract on sm_80: 30 with 64-bit addresses, 26 without).
NVPTX_OPTIONS = ("-nvptx-short-ptr",)


@functools.cache
def init_llvm() -> None:
    from llvmlite import binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    for option in NVPTX_OPTIONS:
        llvm.set_option("tileiras", option)


def arch_of(cpu: str) -> int:
    """90 for ``sm_90a``: the architecture libdevice's ``__CUDA_ARCH`` reflects."""
    return int(cpu.removeprefix("sm_").rstrip("af"))


def nvptx_assembly(llvm_ir: str, cpu: str, opt_level: int = 3) -> str:
    """PTX for NVPTX LLVM IR text: the libdevice functions it declares linked in
    (``codegen.libdevice``), LLVM's optimization pipeline at ``opt_level``, then the NVPTX back
    end for processor ``cpu`` (``sm_90a``...)."""
    from llvmlite import binding as llvm

    from . import libdevice

    init_llvm()
    tm = llvm.Target.from_triple(NVPTX_TRIPLE).create_target_machine(cpu=cpu, opt=min(opt_level, 3))
    parsed = llvm.parse_assembly(llvm_ir)
    libdevice.link_into(parsed, llvm_ir, arch_of(cpu))
    parsed.verify()
    if opt_level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=min(opt_level, 3))
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(parsed, pb)
    return tm.emit_assembly(parsed)
