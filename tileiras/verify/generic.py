"""Registry-driven checks every op gets: field counts, enum attributes, type
constraints and type relations (the ODS invariants).

``check_invariants`` returns False when the op is malformed enough that its
op-specific rules must not run (they assume well-typed fields), as MLIR skips
``verify()`` when ``verifyInvariants`` fails.
"""
from __future__ import annotations

import enum
from typing import Iterator

from ..ir import types as T
from ..ir.core import Operation, Value
from ..tile.registry import Attr, AttrKind, Multiplicity, OpDef
from ..tile.constraints import Match, Signature
from .context import Context
from .diagnostic import quoted


def check_invariants(ctx: Context, op: Operation) -> bool:
    return (_check_counts(ctx, op) and _check_attrs(ctx, op)
            and _check_types(ctx, op) and _check_matches(ctx, op))


# -- counts -----------------------------------------------------------------------------
def _check_counts(ctx: Context, op: Operation) -> bool:
    d: OpDef = op.definition
    if len(op.segments) != len(d.operands) or sum(op.segments) != len(op.operands):
        ctx.op_error(op, f"operand count ({len(op.operands)}) does not match with the total size "
                         f"({sum(op.segments)}) specified in attribute 'operandSegmentSizes'")
        return False
    ok = True
    start = 0
    for spec, size in zip(d.operands, op.segments):
        if spec.multiplicity is Multiplicity.SINGLE and size != 1:
            ctx.op_error(op, f"operand group starting at #{start} requires 1 element, but found {size}")
            ok = False
        elif spec.multiplicity is Multiplicity.OPTIONAL and size > 1:
            ctx.op_error(op, f"operand group starting at #{start} requires 0 or 1 element, but found {size}")
            ok = False
        start += size
    fixed = [r for r in d.results if not r.variadic]
    if len(fixed) == len(d.results) and len(op.results) != len(fixed):
        ctx.op_error(op, _expected_count(len(fixed), len(op.results), "result"))
        ok = False
    elif len(op.results) < len(fixed):
        ctx.op_error(op, f"expected {len(fixed)} or more results, but found {len(op.results)}")
        ok = False
    if len(op.regions) != len(d.regions):
        ctx.op_error(op, _expected_count(len(d.regions), len(op.regions), "region"))
        ok = False
    return ok


def _expected_count(expected: int, found: int, what: str) -> str:
    if expected == 0:
        return f"requires zero {what}s"
    if expected == 1:
        return f"requires one {what}" if what != "operand" else "requires a single operand"
    return f"expected {expected} {what}s, but found {found}"


# -- attributes -------------------------------------------------------------------------
def _check_attrs(ctx: Context, op: Operation) -> bool:
    ok = True
    for a in op.definition.attrs:
        value = op.attributes.get(a.name)
        if value is None:
            continue
        problem = _attr_problem(a, value)
        if not problem and a.minimum is not None and isinstance(value, int) and value < a.minimum[0]:
            problem = a.minimum[1]
        if problem:
            ctx.op_error(op, f"attribute '{a.name}' failed to satisfy constraint: {problem}")
            ok = False
    known = {a.name for a in op.definition.attrs}
    for name in op.attributes:
        if name not in known:
            ctx.op_error(op, f"unknown attribute '{name}'")
            ok = False
    return ok


def _attr_problem(a: Attr, value: object) -> str:
    if a.kind is AttrKind.ENUM and a.enum is not None:
        if isinstance(value, a.enum):
            return ""
        if isinstance(value, int) and not isinstance(value, enum.Enum):
            if value in {m.value for m in a.enum}:
                return ""
        names = ", ".join(m.name.lower() for m in a.enum)
        return f"{a.enum.__name__} is one of [{names}], got {value!r}"
    if a.kind is AttrKind.INT and not isinstance(value, int):
        return "integer attribute"
    if a.kind in (AttrKind.UNIT, AttrKind.BOOL) and not isinstance(value, bool):
        return "bool attribute"
    if a.kind is AttrKind.STRING and not isinstance(value, str):
        return "string attribute"
    return ""


# -- operand/result types ---------------------------------------------------------------
def _fields(op: Operation) -> Iterator[tuple[str, str, int, list[Value], bool]]:
    """(kind, field name, flat index of its first value, values, variadic) per field."""
    d = op.definition
    start = 0
    for i, spec in enumerate(d.operands):
        values = op.operand_group(i)
        yield "operand", spec.name, start, values, spec.multiplicity is Multiplicity.VARIADIC
        start += len(values)
    variadic = [r for r in d.results if r.variadic]
    extra = len(op.results) - (len(d.results) - len(variadic))
    pos = 0
    for spec in d.results:
        n = extra if spec.variadic else 1
        yield "result", spec.name, pos, op.results[pos:pos + n], spec.variadic
        pos += n


def _check_types(ctx: Context, op: Operation) -> bool:
    signature: Signature | None = op.definition.signature
    if signature is None:
        return True
    ok = True
    for kind, name, start, values, variadic in _fields(op):
        constraint = signature.fields.get(name)
        if constraint is None:
            continue
        summary = f"variadic of {constraint.summary}" if variadic else constraint.summary
        for k, v in enumerate(values):
            if not constraint.accepts(v.type):
                ctx.op_error(op, f"{kind} #{start + k} must be {summary}, but got {quoted(v.type)}")
                ok = False
    return ok


def _field_types(op: Operation, name: str) -> list[T.Type]:
    for _, field, _, values, _ in _fields(op):
        if field == name:
            return [v.type for v in values]
    raise KeyError(f"{op.name} has no field {name}")


def _check_matches(ctx: Context, op: Operation) -> bool:
    signature = op.definition.signature
    if signature is None:
        return True
    ok = True
    for m in signature.matches:
        message = _match_problem(op, m)
        if message:
            ctx.op_error(op, message)
            ok = False
    return ok


_RELATIONS = {
    "type": ("same type", lambda t: t),
    "shape": ("same shape", lambda t: getattr(t, "shape", None)),
    "rank": ("same rank", lambda t: len(getattr(t, "shape", ()))),
    "element": ("the same element type", T.element_type),
}


def _match_problem(op: Operation, m: Match) -> str:
    if m.kind == "same_element":
        types = [v.type for v in op.operands + op.results]
        if len({T.element_type(t) for t in types}) > 1:
            return "requires the same element type for all operands and results"
        return ""
    if m.kind in ("same_shape_all", "same_operand_shape"):
        values = op.operands + (op.results if m.kind == "same_shape_all" else [])
        if len({getattr(v.type, "shape", None) for v in values}) > 1:
            return ("requires the same shape for all operands and results" if m.kind == "same_shape_all"
                    else "requires the same shape for all operands")
        return ""
    names = [f.split("=")[0] for f in m.fields]
    labels = [f.split("=")[-1] for f in m.fields]
    groups = [_field_types(op, n) for n in names]
    if any(not g for g in groups):
        return ""  # an absent optional operand takes no part
    types = [g[0] for g in groups]
    if m.kind == "custom":
        return "" if m.check(types) else f"failed to verify that {m.message}"
    what, key = _RELATIONS[m.kind]
    if len({key(t) for t in types}) > 1:
        return f"failed to verify that all of {{{', '.join(labels)}}} have {what}"
    return ""
