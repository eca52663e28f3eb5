"""Version gates: ops, attributes, operands, results and types newer than the module's
bytecode version (NVIDIA's bytecode writer refuses these with the same messages)."""
from __future__ import annotations

from typing import Iterator

from ..ir import types as T
from ..ir.core import Module, Operation
from ..ir.version import V13_2, V13_3, V13_4, Version
from ..tile.registry import AttrKind
from .context import Context, verifies

#: Element types and the version that introduced them (the rest are 13.1).
TYPE_SINCE: dict[str, Version] = {"f8E8M0FNU": V13_2, "f4E2M1FN": V13_3, "i4": V13_3,
                                  "fnv8E5M3FNU": V13_4}


def scalars_in(t: T.Type) -> Iterator[T.ScalarType]:
    """Every scalar type mentioned by ``t``."""
    if isinstance(t, T.ScalarType):
        yield t
    elif isinstance(t, T.PointerType):
        yield from scalars_in(t.pointee)
    elif isinstance(t, (T.TileType, T.TensorViewType)):
        yield from scalars_in(t.element)
    elif isinstance(t, T.ViewType):
        yield from scalars_in(t.tensor_view)
    elif isinstance(t, T.FunctionType):
        for u in t.inputs + t.results:
            yield from scalars_in(u)


#: How NVIDIA's bytecode writer names the newer element types in its version errors.
TYPE_WRITER_NAMES = {"f8E8M0FNU": "Float8E8M0FNU", "f4E2M1FN": "Float4E2M1FN",
                     "fnv8E5M3FNU": "FloatNV8E5M3FNU"}


def _type_gate(ctx: Context, loc: object, t: T.Type, version: Version) -> None:
    """NVIDIA's writer checks types as it writes its type table, so its message
    has no location (``loc`` is kept for the signature's sake, unused)."""
    del loc
    for s in scalars_in(t):
        since = TYPE_SINCE.get(s.name)
        if since is not None and version < since:
            name = TYPE_WRITER_NAMES.get(s.name, s.name)
            message = f"type '{name}' requires bytecode version {since}+, targeting {version}"
            if message not in {d.message for d in ctx.diagnostics}:
                ctx.emit(None, message)
            return


def check_module(ctx: Context, module: Module) -> None:
    v = module.version
    for g in module.globals:
        if v < V13_3 and g.is_private:
            ctx.emit(g.loc, f"global `{g.name}` uses non-public symbol visibility, which cannot be encoded in "
                           f"bytecode version {v} (requires bytecode 13.3+)")
        if v < V13_3 and g.constant:
            ctx.emit(g.loc, f"constant global `{g.name}` cannot be encoded in bytecode version {v} "
                           f"(the `constant` attribute requires bytecode 13.3+)")
        _type_gate(ctx, g.loc, g.type, v)
    for fn in module.functions:
        _type_gate(ctx, fn.loc, fn.type, v)


@verifies(Operation)
def check_op_version(ctx: Context, op: Operation) -> None:
    v = ctx.module.version
    d = op.definition
    if v < d.since:
        ctx.error(op, f"operation '{d.full_name}' is not available in bytecode version {v}")
        return
    for a in d.attrs:
        value = op.attributes.get(a.name)
        if v < a.since and value is not None and value is not False and value != a.default:
            if a.kind is AttrKind.BOOL_ARRAY and not any(value):
                continue
            ctx.error(op, f"attribute '{a.name}' requires bytecode version {a.since}+, but targeting {v}")
    for i, spec in enumerate(d.operands):
        if v < spec.since and op.operand_group(i):
            ctx.error(op, f"optional operand '{spec.name}' is provided but requires bytecode version "
                          f"{spec.since}, targeting {v}")
    for r in op.results:
        _type_gate(ctx, op.loc, r.type, v)
