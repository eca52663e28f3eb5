"""Architecture gates, checked only when a target (``gpu_name``) is given.

Every rule that reads ``ctx.gpu_name`` lives here and is listed in ``TARGET_RULES``: the
driver verifies a module once without a target when reading it, then runs only these
with the target (``verify.recheck_for_target``).

NVIDIA's message: ``Incompatibility with architecture 'sm_80': unsupported type
'f8E4M3FN'``, located at the first op using the type; reported once per type.
Measured with tileiras 13.5: f8E4M3FN/f8E5M2 need sm_89+, f8E8M0FNU needs sm_100+, and
fnv8E5M3FNU (UE5M3) is sm_107 only (refused on every other ``--gpu-name``, sm_110/120/121
included).  Exit code 5.  An entry argument no op uses is not checked.
"""
from __future__ import annotations

import re
from typing import Iterator, Optional

from ..ir import types as T
from ..ir.core import Operation
from .context import Context, verifies
from .versions import scalars_in

#: Element type -> lowest compute capability (major*10+minor) that supports it.
MIN_ARCH: dict[str, int] = {"f8E4M3FN": 89, "f8E5M2": 89, "f8E8M0FNU": 100, "f4E2M1FN": 100}
#: Element types only some compute capabilities support, whatever their number.
ONLY_ARCHS: dict[str, tuple[int, ...]] = {"fnv8E5M3FNU": (107,)}


def supports_type(cc: int, name: str) -> bool:
    """Whether compute capability ``cc`` has element type ``name``."""
    if name in ONLY_ARCHS:
        return cc in ONLY_ARCHS[name]
    return cc >= MIN_ARCH.get(name, 0)


def compute_capability(gpu_name: str) -> Optional[int]:
    m = re.fullmatch(r"sm_(\d+)[af]?", gpu_name)
    return int(m.group(1)) if m else None


#: Compute capabilities whose memory has classified (unicast/multicast) pointers; any op
#: using a ``ptr<..., <unicast|multicast>>`` elsewhere fails (tileiras 13.5; an entry
#: argument no op uses passes).
PTR_ATTR_ARCHS = (100, 103, 107)


def ptr_attrs_in(t: T.Type) -> Iterator[T.PtrAttr]:
    """Every pointer classification mentioned by ``t``."""
    if isinstance(t, T.PointerType):
        if t.ptr_attr is not None:
            yield t.ptr_attr
        yield from ptr_attrs_in(t.pointee)
    elif isinstance(t, T.TileType):
        yield from ptr_attrs_in(t.element)
    elif isinstance(t, T.TensorViewType):
        if t.ptr_attr is not None:
            yield t.ptr_attr
    elif isinstance(t, T.ViewType):
        yield from ptr_attrs_in(t.tensor_view)


@verifies(Operation)
def check_arch_types(ctx: Context, op: Operation) -> None:
    if ctx.gpu_name is None:
        return
    cc = compute_capability(ctx.gpu_name)
    if cc is None:
        return
    reported = {d.message for d in ctx.diagnostics}
    prefix = f"Incompatibility with architecture '{ctx.gpu_name}': "
    for value in op.results + op.operands:
        problems = [f"unsupported type '{s.name}'" for s in scalars_in(value.type) if not supports_type(cc, s.name)]
        if cc not in PTR_ATTR_ARCHS:
            required = " or ".join(f"sm_{a}" for a in PTR_ATTR_ARCHS)
            problems += [f"{p.keyword} pointers require {required}" for p in ptr_attrs_in(value.type)
                         if p is not T.PtrAttr.NONE]
        for problem in problems:
            if prefix + problem not in reported:
                ctx.error(op, prefix + problem)
                reported.add(prefix + problem)


#: The rules that depend on the target (see the module docstring).
TARGET_RULES = (check_arch_types,)
