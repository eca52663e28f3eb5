"""Each architecture's shared-memory limit per CTA, checked before ptxas sees the PTX.

ptxas rejects a kernel whose shared memory is over the limit with a message the driver can
only reduce to "failed to compile Tile IR program"; this check names the kernel, its need
and the arch's limit in one line, with the same exit code (5).
"""
from __future__ import annotations

import re

from ..errors import CompileError
from ..target import smem_limit

_WIDTH = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "b32": 4, "u32": 4,
          "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8}
_SHARED = re.compile(r"\.shared\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+([\w$]+)(?:\[(\d+)\])?\s*;")
_ENTRY = re.compile(r"\.entry\s+([\w$]+)\s*\(")


def shared_bytes(ptx: str) -> dict[str, int]:
    """Static shared memory of each entry of ``ptx``: its ``global_smem_<entry>`` variables."""
    decls = [(m.group(2), _WIDTH.get(m.group(1), 1) * int(m.group(3) or 1)) for m in _SHARED.finditer(ptx)]
    return {e: sum(size for name, size in decls if name.startswith(f"global_smem_{e}"))
            for e in _ENTRY.findall(ptx)}


def check_shared_memory(ptx: str, gpu_name: str) -> None:
    """Raise ``CompileError`` for the first entry that needs more than ``gpu_name`` allows."""
    limit = smem_limit(gpu_name)
    for entry, need in shared_bytes(ptx).items():
        if need > limit:
            raise CompileError(f"kernel '{entry}' needs {need} bytes of shared memory; "
                               f"{gpu_name} allows at most {limit}")
