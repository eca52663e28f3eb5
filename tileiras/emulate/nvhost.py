"""Run the x86-64 host code that NVIDIA's tileiras puts in a cubin's ``.nv.host`` section.

The section is an ELF relocatable object (shared/reference/real-tileiras-abi.md, section 2).
The CUDA driver loads it and calls its callbacks; for kernels with TMA tensor maps the
``ON_ARGUMENTS_CHANGE`` callback is what fills the hidden ``.param .align 64 .b8 [128]``
parameters from the user's arguments, so NVIDIA's TMA PTX cannot run without it.

Here the object is linked into the process by LLVM's MCJIT (``llvmlite``), which applies its
large-code-model relocations (GOT, GOTOFF), and the callbacks are found the way the driver
finds them: ``__CUDA_TILEIR_ON_PRE_LOAD(table, handle, version=2, &callbacks)`` hands back the
``__CUDA_TILEIR_CALLBACKS`` table (slot 5: the per-kernel entries, 64 bytes each; slot 6:
their number), whose entry ``i`` holds the kernel's name at +0x00 and its
``ON_ARGUMENTS_CHANGE`` at +0x28.

The callback's calling convention, as measured (``test_tensormap.py``):
``int ON_ARGUMENTS_CHANGE(void *, void *launch, void *, uint8_t *params)`` (SysV): the first
and third arguments are never read; ``params`` is the kernel's parameter bank from its first
parameter on.  ``launch`` is read only by kernels that build tensor maps on the device
(grouped GEMM on sm_90: the maps of arrays whose addresses the kernel loads from a table):
the 64-bit word at ``launch + 8`` is the address of a global workspace the driver allocated,
which the callback stores in the kernel's hidden ``.u64 .ptr`` parameter; the kernel writes
its maps there, at ``%smid * 8192 + %warpid * 128`` unless ``%perctamemoryoffset`` gives a
per-CTA area.  Its size is slot 2 of the ``__CUDA_TILEIR_CALLBACKS`` table (``ON_PRE_LOAD``
zeroes it in the copy it hands back; the table itself keeps it).  Parameter offsets in it are those of constant bank 0 minus the bank's parameter base
(0x210 on sm_90), with every alignment (the hidden maps' 64 included) taken in bank
addresses: on sm_90 the first map after 0x38 bytes of user parameters sits at 0x70, not 0x40.
The callback reads the user parameters there, writes each 128-byte map into its slot and
returns 0.  Only x86-64 hosts can run it.
"""
from __future__ import annotations

import ctypes
import platform
from functools import lru_cache

import numpy as np

CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_void_p)
PRE_LOAD = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                            ctypes.POINTER(ctypes.c_void_p))
CALLBACKS_VERSION = 2                 # ON_PRE_LOAD's third argument: 2 skips the device query
FUNC_ENTRY_SIZE = 0x40
NAME_AT, ARGUMENTS_CHANGE_AT = 0x00, 0x28
WORKSPACE_SLOT = 2                    # __CUDA_TILEIR_CALLBACKS[2]: bytes of device workspace

# Constant-bank offset of the first kernel parameter, per architecture family (ptxas; the
# reference's section 1).  The callback's buffer starts there, and alignments count from 0.
PARAM_BANK_BASE = {"sm_80": 0x160, "sm_90": 0x210, "sm_100": 0x380, "sm_120": 0x380}


class HostCodeError(RuntimeError):
    """The host object cannot be loaded or run here, or its callback failed."""


def is_runnable_here() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def param_bank_base(arch: str) -> int:
    family = {"sm_10": "sm_100", "sm_11": "sm_100", "sm_12": "sm_120", "sm_9": "sm_90",
              "sm_8": "sm_80"}
    for prefix, key in family.items():
        if arch.startswith(prefix):
            return PARAM_BANK_BASE[key]
    raise HostCodeError(f"no known parameter-bank base for {arch}")


class HostObject:
    """One ``.nv.host`` object, linked into this process."""

    def __init__(self, data: bytes):
        if not is_runnable_here():
            raise HostCodeError(f".nv.host is x86-64 code; this host is {platform.machine()}")
        if data[:4] != b"\x7fELF" or data[18] != 62:              # e_machine 62 = x86-64
            raise HostCodeError(".nv.host is not an x86-64 ELF object")
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        machine = llvm.Target.from_default_triple().create_target_machine(codemodel="large")
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(data)))
        self._engine.finalize_object()
        self.callbacks = self._read_callbacks()
        table = self._engine.get_global_value_address("__CUDA_TILEIR_CALLBACKS")
        self.workspace_bytes = int((ctypes.c_uint64 * 9).from_address(table)[WORKSPACE_SLOT]) if table else 0

    def _read_callbacks(self) -> dict[str, CALLBACK]:
        addr = self._engine.get_function_address("__CUDA_TILEIR_ON_PRE_LOAD")
        if not addr:
            raise HostCodeError(".nv.host has no __CUDA_TILEIR_ON_PRE_LOAD")
        table = ctypes.c_void_p()
        if PRE_LOAD(addr)(None, None, CALLBACKS_VERSION, ctypes.byref(table)) != 0:
            raise HostCodeError("__CUDA_TILEIR_ON_PRE_LOAD failed")
        slots = (ctypes.c_uint64 * 9).from_address(table.value)
        out = {}
        for i in range(slots[6]):
            entry = (ctypes.c_uint64 * 8).from_address(slots[5] + i * FUNC_ENTRY_SIZE)
            name = ctypes.string_at(entry[NAME_AT // 8]).decode()
            if entry[ARGUMENTS_CHANGE_AT // 8]:
                out[name] = CALLBACK(entry[ARGUMENTS_CHANGE_AT // 8])
        return out

    def on_arguments_change(self, kernel: str, params: np.ndarray, workspace: int = 0) -> None:
        """Run ``kernel``'s callback on ``params`` (uint8, the bank from its first parameter;
        updated in place); ``workspace``: the device address of ``workspace_bytes`` of global
        memory for kernels that build tensor maps on the device."""
        if kernel not in self.callbacks:
            raise HostCodeError(f".nv.host has no callback for '{kernel}' "
                                f"(it has {sorted(self.callbacks)})")
        if params.dtype != np.uint8 or not params.flags.c_contiguous:
            raise TypeError("params must be a contiguous uint8 array")
        launch = (ctypes.c_uint64 * 2)(0, workspace)
        rc = self.callbacks[kernel](None, ctypes.addressof(launch), None, params.ctypes.data)
        if rc != 0:
            raise HostCodeError(f"ON_ARGUMENTS_CHANGE of '{kernel}' returned {rc}")


@lru_cache(maxsize=16)
def load_host_object(data: bytes) -> HostObject:
    return HostObject(data)


def bank_offsets(params, arch: str) -> tuple[dict[str, int], int]:
    """Offsets of PTX kernel ``params`` (parser ``Variable``s) in the callback's buffer, and
    its size: laid out as ptxas lays them in constant bank 0, aligned in bank addresses."""
    from .ptxtypes import TYPES

    base = param_bank_base(arch)
    at, out = base, {}
    for var in params:
        natural = max(TYPES[var.type_name].bits // 8, 1)
        align = max(natural, var.align if var.type_name == "b8" else natural)
        at = -(-at // align) * align
        out[var.name] = at - base
        at += var.size
    return out, at - base
