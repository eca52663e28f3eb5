"""What a cubin tells a launcher about its kernels, read from ptxas's ``.nv.info.<kernel>``.

cuTile launches a Tile IR kernel with block (1,1,1), no dynamic shared memory and no cluster
attribute: the driver is expected to take the CTA size (``REQNTID``) and the cluster shape
(``CTA_PER_CLUSTER``) from the cubin.  To launch the other way too (explicit block and cluster
dims, for a driver that does not), and to check the parameter layout a cubin really has
(``KPARAM_INFO``: what ptxas laid out, whoever wrote the PTX), this module reads those
attributes.  Pure Python over the ELF bytes: no driver, no compiler.

Each attribute is ``u8 format, u8 code, u16 value-or-size``, then ``size`` bytes for the
format ``SVAL`` (4); measured on ptxas 13.5 cubins of both tileiras.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Optional

from ..emulate.cubin import elf_sections

EIFMT_SVAL = 0x04
EIATTR_KPARAM_INFO = 0x17
#: The form ptxas writes when a kernel has hidden parameters (NVIDIA's TMA kernels): only the
#: user parameters are listed, the size in the low half of the last word.
EIATTR_KPARAM_INFO_V2 = 0x45
EIATTR_REQNTID = 0x10
EIATTR_CTA_PER_CLUSTER = 0x3D
EIATTR_PARAM_CBANK_SIZE = 0x19
EIATTR_LANGUAGE = 0x66
#: KPARAM_INFO's last word keeps the parameter size in its top 14 bits.
KPARAM_SIZE_SHIFT = 18

_INFO_PREFIX = ".nv.info."


@dataclass(frozen=True)
class KernelFacts:
    """One kernel of a cubin as the driver sees it."""

    name: str
    threads: tuple[int, int, int]            # REQNTID (1,1,1 when absent)
    cluster: tuple[int, int, int]            # CTA_PER_CLUSTER (1,1,1 when absent)
    params: tuple[tuple[int, int], ...]      # (offset, size) of each user parameter, in order
    param_bytes: Optional[int]               # CBANK_PARAM_SIZE: user and hidden parameters
    language: Optional[int]                  # 7 for Tile IR kernels

    @property
    def cta_per_cluster(self) -> int:
        return self.cluster[0] * self.cluster[1] * self.cluster[2]


def attributes(info: bytes) -> list[tuple[int, int, bytes]]:
    """(format, code, payload) of each attribute; the payload of a non-SVAL one is its u16."""
    out, i = [], 0
    while i + 4 <= len(info):
        fmt, code, value = struct.unpack_from("<BBH", info, i)
        i += 4
        if fmt == EIFMT_SVAL:
            out.append((fmt, code, info[i:i + value]))
            i += value
        else:
            out.append((fmt, code, struct.pack("<H", value)))
    return out


def _dim3(payload: bytes) -> tuple[int, int, int]:
    return struct.unpack_from("<III", payload)  # type: ignore[return-value]


def _facts(name: str, info: bytes) -> KernelFacts:
    threads = cluster = (1, 1, 1)
    params: dict[int, tuple[int, int]] = {}
    cbank = language = None
    for _, code, payload in attributes(info):
        if code == EIATTR_REQNTID:
            threads = _dim3(payload)
        elif code == EIATTR_CTA_PER_CLUSTER:
            cluster = _dim3(payload)
        elif code == EIATTR_KPARAM_INFO:
            _, ordinal, offset, flags = struct.unpack_from("<IHHI", payload)
            params[ordinal] = (offset, flags >> KPARAM_SIZE_SHIFT)
        elif code == EIATTR_KPARAM_INFO_V2:
            _, ordinal, offset, size = struct.unpack_from("<IHHH", payload)
            params[ordinal] = (offset, size)
        elif code == EIATTR_PARAM_CBANK_SIZE:
            cbank = struct.unpack("<H", payload)[0]
        elif code == EIATTR_LANGUAGE:
            language = struct.unpack_from("<I", payload)[0]
    return KernelFacts(name, threads, cluster, tuple(params[k] for k in sorted(params)), cbank, language)


def kernel_facts(cubin: bytes) -> dict[str, KernelFacts]:
    """Kernel name -> its facts, for every kernel of ``cubin``."""
    return {name[len(_INFO_PREFIX):]: _facts(name[len(_INFO_PREFIX):], data)
            for name, data in elf_sections(cubin).items() if name.startswith(_INFO_PREFIX)}
