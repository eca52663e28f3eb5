"""Types the custom syntax leaves out, inferred as MLIR's generated parsers do.

An op's text spells only some of its types (``addi %a, %b : tile<i32>`` gives
the result's); the rest follow from the op's type relations, which the verifier
already declares (``tileiras.verify.constraints``): a field in an
``AllTypesMatch`` group with a known type gives its type to the others, and a
field whose constraint admits exactly one type (``token``, ``tile<i1>``) has
that type.  View ops derive their operand's type from the result's.
"""
from __future__ import annotations

from typing import Callable, Optional

from ..ir import types as T
from ..tile import ops_memory as M
from ..tile.registry import Multiplicity
from ..tile import constraints as C
from .parser_ops import OpSyntax

#: Constraints that admit exactly one type.
FIXED_TYPES: dict[int, T.Type] = {
    id(C.TOKEN): T.TOKEN,
    id(C.SCALAR_I1): T.TileType(T.I1, ()),
    id(C.SCALAR_I32): T.TileType(T.I32, ()),
}


def _tensor_view_of(p: OpSyntax) -> Optional[T.Type]:
    result = p.types.get("result")
    return getattr(result[0], "tensor_view", None) if result else None


def _tensor_view_base(p: OpSyntax) -> Optional[T.Type]:
    result = p.types.get("result")
    if not result or not isinstance(result[0], T.TensorViewType):
        return None
    tv = result[0]
    return T.TileType(T.PointerType(tv.element, tv.ptr_attr), ())


#: Per-op derivations: field -> type from what is known.
DERIVED: dict[type, dict[str, Callable[[OpSyntax], Optional[T.Type]]]] = {
    M.MakePartitionViewOp: {"tensor_view": _tensor_view_of},
    M.MakeStridedViewOp: {"tensor_view": _tensor_view_of},
    M.MakeGatherScatterViewOp: {"tensor_view": _tensor_view_of},
    M.MakeTensorViewOp: {"base": _tensor_view_base,
                         "dynamicShape": lambda p: T.TileType(T.I64, ()),
                         "dynamicStrides": lambda p: T.TileType(T.I64, ())},
}


def field_counts(p: OpSyntax) -> dict[str, int]:
    """How many values each operand and result field has."""
    d = p.definition
    counts = {o.name: len(p.operands.get(o.name, [])) for o in d.operands}
    fixed = sum(not r.variadic for r in d.results)
    for r in d.results:
        if not r.variadic:
            counts[r.name] = 1
        elif r.name in p.types:
            counts[r.name] = len(p.types[r.name])
        else:
            counts[r.name] = max(p.bound - fixed, 0)
    return counts


def infer_types(p: OpSyntax) -> None:
    """Fill ``p.types`` for every operand and result field (one type per value)."""
    counts = field_counts(p)
    known: dict[str, T.Type] = {k: v[0] for k, v in p.types.items() if v}
    signature = p.definition.signature
    missing = [name for name, n in counts.items() if n and name not in known]
    changed = True
    while missing and changed:
        changed = False
        for name in list(missing):
            t = _infer_one(p, name, known, signature)
            if t is not None:
                known[name] = t
                missing.remove(name)
                changed = True
    if missing:
        raise p.sc.error(f"cannot infer the type of '{missing[0]}' of '{p.definition.full_name}'", p.start)
    for name, n in counts.items():
        if n == 0:
            p.types[name] = []
        elif not p.types.get(name):
            p.types[name] = [known[name]] * n


def _infer_one(p: OpSyntax, name: str, known: dict[str, T.Type],
               signature: Optional[C.Signature]) -> Optional[T.Type]:
    if signature is not None:
        for m in signature.matches:
            if m.kind != "type":
                continue
            names = [f.split("=")[0] for f in m.fields]
            if name in names:
                for other in names:
                    if other in known:
                        return known[other]
        constraint = signature.fields.get(name)
        if constraint is not None and id(constraint) in FIXED_TYPES:
            return FIXED_TYPES[id(constraint)]
    derive = DERIVED.get(p.definition.cls, {}).get(name)
    if derive is not None:
        return derive(p)
    return None


def is_variadic_operand(p: OpSyntax, name: str) -> bool:
    return any(o.name == name and o.multiplicity is Multiplicity.VARIADIC for o in p.definition.operands)
