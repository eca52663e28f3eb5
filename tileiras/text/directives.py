"""Named ``custom<...>`` directives and the few op hooks of the text printer.

A directive prints an irregular piece of an op's syntax from the fields given
as its arguments; the text parser registers its inverse under the same name.
``glued`` directives take no automatic leading space (they start with
punctuation of their own, like ``, tile<i32>``).  ``OP_HOOKS`` holds printers
for the ops whose text depends on block arguments (``for``, ``loop``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from ..ir.attrs import DenseElementsAttr
from ..ir.core import Function, Operation
from ..ir.types import DYNAMIC, PointerType, TensorViewType, TileType
from ..record import record
from ..tile import ops_control
from ..tile.enums import SymbolVisibility
from .parser_attrs import mlir_type
from .attributes import dense_typed, print_attr, print_hints, print_predicate, print_type, symbol_ref
from .syntax import Element, FieldRef, TypeOf

if TYPE_CHECKING:  # pragma: no cover
    from .printer import OpPrinter


@record(frozen=True)
class Directive:
    print: Callable[["OpPrinter", Operation, tuple[Element, ...]], None]
    glued: bool = False
    #: Whether the directive, used as an optional-group anchor, has anything to
    #: print; by default, whether any of its field arguments is present.
    present: Optional[Callable[["OpPrinter", Operation, tuple[Element, ...]], bool]] = None


def _name(arg: Element) -> str:
    assert isinstance(arg, (FieldRef, TypeOf))
    return arg.name


def _dense_constant(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    value = op.attributes[_name(args[0])]
    assert isinstance(value, DenseElementsAttr)
    result_type = p.field_values(op, _name(args[1]))[0].type if len(args) > 1 else value.type
    p.write(dense_typed(value, result_type))


def _assume_predicate(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    p.write(print_predicate(op.attributes[_name(args[0])]))


def _index_types(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    """``, T`` when every index has type T, else ``, T1, T2...``."""
    indices = p.field_values(op, _name(args[0]))
    if not indices:
        return
    types = [print_type(v.type) for v in indices]
    if len(set(types)) == 1:
        types = types[:1]
    p.write("".join(", " + t for t in types))


def _mixed_list(static: tuple[int, ...], dynamic: list) -> list:
    it = iter(dynamic)
    return [next(it) if d == DYNAMIC else d for d in static]


def _view_type(op: Operation) -> TensorViewType:
    t = op.results[0].type
    assert isinstance(t, TensorViewType)
    return t


def _mixed_shape(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    items = _mixed_list(_view_type(op).shape, p.field_values(op, _name(args[0])))
    p.write(", ".join(x if isinstance(x, str) else (str(x) if isinstance(x, int) else p.value(x))
                      for x in items))


def _mixed_strides(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    items = _mixed_list(_view_type(op).strides, p.field_values(op, _name(args[0])))
    p.write(", ".join(str(x) if isinstance(x, int) else p.value(x) for x in items))


def _view_operand_types(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> list[str]:
    """make_tensor_view's operand types: the base's when its pointer carries a
    classification, then the (single) type of the dynamic sizes and strides."""
    types = []
    base = p.field_values(op, _name(args[0]))[0].type
    pointer = base.element if isinstance(base, TileType) else base
    if isinstance(pointer, PointerType) and pointer.ptr_attr is not None:
        types.append(print_type(base))
    for arg in args[1:]:
        values = p.field_values(op, _name(arg))
        if values:
            types.append(print_type(values[0].type))
            break
    return types


def _print_view_operand_types(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    p.write(", ".join(_view_operand_types(p, op, args)))


def _if_region(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    p.print_region(p.region(op, _name(args[0])), elide_terminator=ops_control.YieldOp)


def _argument_region(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    region = p.region(op, _name(args[0]))
    p.newline()
    block_args = region.blocks[0].args if region.blocks else []
    p.write("(" + ", ".join(f"{p.value(a)}: {print_type(a.type)}" for a in block_args) + ") ")
    p.print_region(region)


def _symbol_ref(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    p.write(symbol_ref(op.attributes[_name(args[0])]))


def _symbol_visibility(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    vis = op.attributes.get(_name(args[0]))
    if vis is not None and vis != SymbolVisibility.PUBLIC:
        p.write(vis.keyword + " ")


def _inbounds(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    """``inbounds = [...]`` unless every flag is false (then nothing, but the
    space before the directive stays, as in NVIDIA's printer)."""
    flags = op.attributes.get(_name(args[0]))
    if flags and any(flags):
        p.write("inbounds = [" + ", ".join("true" if f else "false" for f in flags) + "]")


def _callee(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    """``@name``; constant arguments (none in any file seen) in angle brackets after it."""
    p.write(symbol_ref(op.attributes[_name(args[0])]))
    const_args = op.attributes.get(_name(args[1])) or ()
    if const_args:
        p.write("<" + ", ".join(print_attr(a) for a in const_args) + ">")


def _call_type(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    """MLIR's functional type: ``(!cuda_tile.tile<4xf32>) -> !cuda_tile.tile<4xf32>``."""
    ins = [mlir_type(v.type) for v in p.field_values(op, _name(args[0]))]
    outs = [mlir_type(v.type) for v in p.field_values(op, _name(args[1]))]
    p.write(f"({', '.join(ins)}) -> " + (outs[0] if len(outs) == 1 else f"({', '.join(outs)})"))


def _first_type(p: "OpPrinter", op: Operation, args: tuple[Element, ...]) -> None:
    values = p.field_values(op, _name(args[0]))
    if values:
        p.write(print_type(values[0].type))


DIRECTIVES: dict[str, Directive] = {
    "FirstType": Directive(_first_type),
    "Inbounds": Directive(_inbounds),
    "DenseConstant": Directive(_dense_constant),
    "AssumePredicate": Directive(_assume_predicate),
    "IndexTypes": Directive(_index_types, glued=True),
    "MixedShape": Directive(_mixed_shape),
    "MixedStrides": Directive(_mixed_strides),
    "TensorViewOperandTypes": Directive(_print_view_operand_types,
                                        present=lambda p, op, args: bool(_view_operand_types(p, op, args))),
    "IfRegion": Directive(_if_region),
    "ArgumentRegion": Directive(_argument_region),
    "SymbolRef": Directive(_symbol_ref),
    "SymbolVisibility": Directive(_symbol_visibility),
    "Callee": Directive(_callee),
    "CallType": Directive(_call_type),
}


# ---------------------------------------------------------------------------
# op hooks


def _print_iter_values(p: "OpPrinter", inner: list, outer: list) -> None:
    p.write("iter_values(" + ", ".join(f"{p.value(i)} = {p.value(o)}" for i, o in zip(inner, outer)) + ")")


def _print_for(p: "OpPrinter", op: Operation) -> None:
    body = op.regions[0]
    args = body.blocks[0].args
    if op.attributes.get("unsignedCmp"):
        p.write(" unsigned")
    lb, ub, step = op.operands[:3]
    p.write(f" {p.value(args[0])} in ({p.value(lb)} to {p.value(ub)}, step {p.value(step)}) : "
            f"{print_type(args[0].type)} ")
    inits = op.operands[3:]
    if inits:
        _print_iter_values(p, args[1:], inits)
        p.write(" -> (" + p.types(inits) + ") ")
    p.print_region(body, elide_terminator=ops_control.ContinueOp)


def _print_loop(p: "OpPrinter", op: Operation) -> None:
    body = op.regions[0]
    args = body.blocks[0].args
    inits = op.operands
    p.write(" ")
    if inits:
        _print_iter_values(p, args, inits)
        p.write(" ")
    if inits or op.results:
        p.write(": ")
    if inits:
        p.write(p.types(inits) + " ")
        if op.results:
            p.write("-> ")
    if op.results:
        p.write(p.types(op.results) + " ")
    p.print_region(body, elide_terminator=ops_control.ContinueOp)


OP_HOOKS: dict[type, Callable[["OpPrinter", Operation], None]] = {
    ops_control.ForOp: _print_for,
    ops_control.LoopOp: _print_loop,
}


def print_function_header(p: "OpPrinter", f: Function) -> None:
    """``entry @name(%arg0: T, ...) optimization_hints=<...>`` (no body)."""
    keyword = "entry" if f.is_entry else "func"
    if f.is_private and not f.is_entry:
        keyword += " private"
    args = f.entry_block.args
    p.write(f"{keyword} {symbol_ref(f.name)}(")
    p.write(", ".join(f"{p.value(a)}: {print_type(a.type)}" for a in args) + ")")
    results = f.type.results
    if results:
        p.write(" -> ")
        if len(results) == 1:
            p.write(print_type(results[0]))
        else:
            p.write("(" + ", ".join(print_type(t) for t in results) + ")")
    if f.hints is not None and f.hints.entries:
        p.write(" optimization_hints=" + print_hints(f.hints))
