"""LLVM's target registry, initialized once per process (NVPTX for kernels, x86-64 for
the .nv.host object)."""
from __future__ import annotations

import functools


@functools.cache
def init_llvm() -> None:
    from llvmlite import binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
