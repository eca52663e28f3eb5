"""The Tile IR text printer: reproduces NVIDIA ``tileirdisasm [-g]`` output.

One generic function, ``OpPrinter.print_op``, prints every op by walking the
element tree of its ``syntax`` string (``tileiras.text.syntax``).  Irregular
pieces go through named directives (``tileiras.text.directives``), and the ops
whose text cannot be described declaratively (``for``, ``loop``) through hooks
keyed by op class.  Functions and globals, which are not ops in our IR, are
printed by ``print_module``.
"""
from __future__ import annotations

from typing import Optional

from .. import tile  # noqa: F401  (registers every op)
from ..ir.attrs import DenseElementsAttr
from ..ir.core import Function, Global, Module, Operation, Region, Value
from ..tile.ops_core import GlobalOp
from ..tile.registry import Attr, AttrKind, Operand, RegionDef, Result
from . import directives
from .attributes import print_attr, print_attr_value, print_inline_value, print_type
from .locations import LocationTable
from .names import NameTable, detached_op_names
from .syntax import (AttrDict, Custom, Element, FieldRef, Literal, OptionalGroup, SpacingState, TypeOf,
                     Whitespace, parse_format)

__all__ = ["print_module", "print_op", "print_type", "print_attr", "OpPrinter"]

INDENT = "  "


class OpPrinter:
    """Prints ops of one function into a growing list of text pieces."""

    def __init__(self, names: NameTable, locations: Optional[LocationTable] = None):
        self.names = names
        self.locations = locations
        self.out: list[str] = []
        self.depth = 0
        self.line = 0   # 0-based line of the current position
        #: op -> (0-based line, indentation depth) of where it was printed
        self.positions: dict[Operation, tuple[int, int]] = {}

    # -- low-level output -----------------------------------------------
    def write(self, text: str) -> None:
        self.out.append(text)

    def newline(self) -> None:
        self.out.append("\n" + INDENT * self.depth)
        self.line += 1

    def value(self, v: Value) -> str:
        return self.names.ref(v)

    def values(self, vs: list[Value] | tuple[Value, ...]) -> str:
        return ", ".join(self.names.ref(v) for v in vs)

    @staticmethod
    def types(vs: list[Value] | tuple[Value, ...]) -> str:
        return ", ".join(print_type(v.type) for v in vs)

    def text(self) -> str:
        return "".join(self.out)

    # -- ops ------------------------------------------------------------
    def print_op(self, op: Operation) -> None:
        """One op (with nested regions), starting at the current position."""
        self.positions[op] = (self.line, self.depth)
        if op.results:
            self.write(self.names.result_list(op) + " = ")
        self.write(op.definition.name)
        hook = directives.OP_HOOKS.get(type(op))
        if hook is not None:
            hook(self, op)
        else:
            self.print_format(op)
        if self.locations is not None:
            self.write(" " + self.locations.ref(op.loc))

    def print_format(self, op: Operation) -> None:
        syntax = op.definition.syntax
        if syntax is None:
            raise NotImplementedError(f"{op.definition.full_name} has no syntax")
        self._elements(op, parse_format(syntax).elements, SpacingState(), True)

    def _elements(self, op: Operation, elements: tuple[Element, ...], state: SpacingState,
                  emit: bool) -> None:
        for e in elements:
            if isinstance(e, Literal):
                space = state.before_literal(e.text)
                if emit:
                    self.write((" " if space else "") + e.text)
            elif isinstance(e, Whitespace):
                state.whitespace(e.text)
                if emit and e.text == " ":
                    self.write(" ")
                elif emit and e.text == "\n":
                    self.newline()
            elif isinstance(e, AttrDict):
                if emit and e.keyword:
                    self._attr_dict(op, e)
                state.last_was_punct = False
            elif isinstance(e, OptionalGroup):
                present = emit and self.is_present(op, e.anchor)
                self._elements(op, e.elements, state, present)
            elif isinstance(e, FieldRef) and self._is_unit(op, e.name):
                continue  # a unit attribute's presence is its keyword
            else:
                glued = isinstance(e, Custom) and directives.DIRECTIVES[e.name].glued
                space = state.before_element() and not glued
                if emit:
                    if space:
                        self.write(" ")
                    self._element(op, e)

    def _attr_dict(self, op: Operation, e: AttrDict) -> None:
        entries = [f"{f.name} = {print_attr_value(op.attributes[f.name])}"
                   for f in e.fields if self.is_present(op, f)]
        if entries:
            self.write(" attributes {" + ", ".join(entries) + "}")

    def _element(self, op: Operation, e: Element) -> None:
        if isinstance(e, FieldRef):
            if isinstance(self.field(op, e.name), RegionDef):
                self.print_region(self.region(op, e.name))
            else:
                self.write(self.field_text(op, e.name))
        elif isinstance(e, TypeOf):
            self.write(self.types(self.field_values(op, e.name)))
        elif isinstance(e, Custom):
            directives.DIRECTIVES[e.name].print(self, op, e.args)

    # -- fields -----------------------------------------------------------
    @staticmethod
    def field(op: Operation, name: str) -> Operand | Attr | Result | RegionDef:
        d = op.definition
        for group in (d.operands, d.attrs, d.results, d.regions):
            for spec in group:
                if spec.name == name:
                    return spec
        raise KeyError(f"{d.full_name} has no field '{name}'")

    def _is_unit(self, op: Operation, name: str) -> bool:
        spec = self.field(op, name)
        return isinstance(spec, Attr) and spec.kind is AttrKind.UNIT

    def field_values(self, op: Operation, name: str) -> list[Value]:
        d = op.definition
        for i, spec in enumerate(d.operands):
            if spec.name == name:
                return op.operand_group(i)
        start = 0
        extra = len(op.results) - len(d.results) + 1
        for r in d.results:
            size = extra if r.variadic else 1
            if r.name == name:
                return op.results[start:start + size]
            start += size
        raise KeyError(f"{d.full_name} has no operand or result '{name}'")

    def region(self, op: Operation, name: str) -> Region:
        for i, spec in enumerate(op.definition.regions):
            if spec.name == name:
                return op.regions[i]
        raise KeyError(name)

    def is_present(self, op: Operation, anchor: Element) -> bool:
        if isinstance(anchor, Custom):
            present = directives.DIRECTIVES[anchor.name].present
            if present is not None:
                return present(self, op, anchor.args)
            return any(self.is_present(op, a) for a in anchor.args
                       if isinstance(a, (FieldRef, TypeOf)))
        assert isinstance(anchor, (FieldRef, TypeOf))
        spec = self.field(op, anchor.name)
        if isinstance(spec, Attr):
            value = op.attributes.get(spec.name)
            if value is None or value is False or value == ():
                return False
            if spec.kind is AttrKind.BOOL_ARRAY and not any(value):
                return False  # all-false in-bounds flags are the default
            default = anchor.default if isinstance(anchor, FieldRef) else None
            return default is None or getattr(value, "keyword", str(value)) != default
        if isinstance(spec, RegionDef):
            return bool(self.region(op, spec.name).blocks)
        return bool(self.field_values(op, spec.name))

    def field_text(self, op: Operation, name: str) -> str:
        spec = self.field(op, name)
        if isinstance(spec, Attr):
            value = op.attributes.get(spec.name)
            return print_inline_value(value)
        return self.values(self.field_values(op, name))

    # -- regions ----------------------------------------------------------
    def print_region(self, region: Region, *, elide_terminator: Optional[type] = None) -> None:
        """``{`` + the entry block's ops (without its arguments) + ``}``."""
        self.write("{")
        self.depth += 1
        for block in region.blocks:
            ops = block.ops
            if (elide_terminator is not None and ops and type(ops[-1]) is elide_terminator
                    and not ops[-1].operands):
                ops = ops[:-1]
            for op in ops:
                self.newline()
                self.print_op(op)
        self.depth -= 1
        self.newline()
        self.write("}")


# ---------------------------------------------------------------------------
# functions, globals, modules


def _print_function(function: Function, locations: Optional[LocationTable],
                    positions: Optional[dict] = None, first_line: int = 0) -> str:
    names = NameTable(function.body)
    p = OpPrinter(names, locations)
    directives.print_function_header(p, function)
    p.write(" ")
    p.print_region(function.body)
    if locations is not None:
        p.write(" " + locations.ref(function.loc))
    if positions is not None:
        positions.update({op: (first_line + line, depth) for op, (line, depth) in p.positions.items()})
        positions[("function", function.name)] = (first_line, 0)
    return p.text()


def print_module_with_positions(module: Module) -> tuple[str, dict]:
    """The module's text (as ``print_module``) and, for every function and op, the
    0-based line it starts on and its nesting depth (for ``.loc_intermediate``)."""
    positions: dict = {}
    parts = [_print_global(g, None) + "\n" for g in module.globals]
    line = len(parts)
    for f in module.functions:
        text = _print_function(f, None, positions, line) + "\n"
        parts.append(text)
        line += text.count("\n")
    return "".join(parts), positions


def global_as_op(g: Global) -> GlobalOp:
    """A ``cuda_tile.global`` op carrying ``g``'s fields, for the generic printer."""
    from ..tile.enums import SymbolVisibility
    attrs = {"sym_name": g.name, "value": DenseElementsAttr(g.type, g.data),
             "alignment": g.alignment, "constant": g.constant,
             "symbol_visibility": SymbolVisibility.PRIVATE if g.is_private else SymbolVisibility.PUBLIC}
    return GlobalOp(attributes=attrs)


def _print_global(g: Global, locations: Optional[LocationTable]) -> str:
    p = OpPrinter(NameTable(Region()), locations)
    p.print_op(global_as_op(g))
    return p.text()


def print_module(module: Module, *, debug_info: bool = False) -> str:
    """Exactly what ``tileirdisasm [-g] FILE`` writes to stdout."""
    locations = LocationTable(module) if debug_info else None
    parts = [_print_global(g, locations) + "\n" for g in module.globals]
    parts += [_print_function(f, locations) + "\n" for f in module.functions]
    if locations is not None:
        parts.append(locations.definitions())
    return "".join(parts)


def print_op(op: Operation, names: Optional[NameTable] = None) -> str:
    """One op on its own (for debugging): values are named within the op's
    function when ``op`` is attached to one, else numbered locally."""
    if names is None:
        names = NameTable(_root_region(op)) if op.parent is not None else detached_op_names(op)
    p = OpPrinter(names)
    p.print_op(op)
    return p.text()


def _root_region(op: Operation) -> Region:
    block = op.parent
    region = block.parent if block is not None else None
    while region is not None and region.parent is not None and region.parent.parent is not None:
        region = region.parent.parent.parent
    assert region is not None
    return region
