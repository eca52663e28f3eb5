"""Architecture gates, checked only when a target (``gpu_name``) is given.

NVIDIA's message: ``Incompatibility with architecture 'sm_80': unsupported type
'f8E4M3FN'``, located at the first op using the type; reported once per type.
Measured with tileiras 13.5: f8E4M3FN/f8E5M2 need sm_89+, f8E8M0FNU needs sm_100+.
"""
from __future__ import annotations

import re
from typing import Optional

from ..ir.core import Operation
from .context import Context, verifies
from .versions import scalars_in

#: Element type -> lowest compute capability (major*10+minor) that supports it.
MIN_ARCH: dict[str, int] = {"f8E4M3FN": 89, "f8E5M2": 89, "f8E8M0FNU": 100, "f4E2M1FN": 100}


def compute_capability(gpu_name: str) -> Optional[int]:
    m = re.fullmatch(r"sm_(\d+)[af]?", gpu_name)
    return int(m.group(1)) if m else None


@verifies(Operation)
def check_arch_types(ctx: Context, op: Operation) -> None:
    if ctx.gpu_name is None:
        return
    cc = compute_capability(ctx.gpu_name)
    if cc is None:
        return
    reported = {d.message for d in ctx.diagnostics}
    for value in op.results + op.operands:
        for s in scalars_in(value.type):
            need = MIN_ARCH.get(s.name)
            if need is not None and cc < need:
                message = f"Incompatibility with architecture '{ctx.gpu_name}': unsupported type '{s.name}'"
                if message not in reported:
                    ctx.error(op, message)
                    reported.add(message)
