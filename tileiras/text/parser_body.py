"""Function bodies: SSA names and their scopes, regions, blocks and ops.

``BodyParser`` reads ops one at a time (custom form through the op's syntax
tree, or MLIR's generic form ``"cuda_tile.op"(%a) <{...}> : (...) -> ...``),
resolves every operand against the type the op expects, and binds result
names.  Region scopes follow MLIR: a region sees the names of the regions
around it, and a name may be defined only once among them.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Optional

from ..ir import types as T
from ..ir.core import Block, Operation, Region, Value
from ..ir.version import V13_1
from ..tile.registry import OPS_BY_NAME, OpDef, OperandEncoding
from ..tile.traits import is_terminator
from . import parser_attrs as PA
from .parser_attrs import quoted
from .parser_infer import infer_types
from .parser_ops import OpSyntax, Ref, parse_custom
from .parser_scan import ParseError, Scanner

if TYPE_CHECKING:  # pragma: no cover
    from .parser_locs import Locations

DIALECT = "cuda_tile."

#: Older spellings the text parser still accepts, mapped to the registry's mnemonic.
#: cuda-tile's own tests (13.3 sources) write ``pow`` for what NVIDIA's 13.5 bytecode
#: and tileirdisasm call ``fpowf``; the printer always writes ``fpowf``.
OP_ALIASES = {"pow": "fpowf"}


def lookup_op(short: str) -> Optional[OpDef]:
    """The definition for a mnemonic without the dialect prefix, aliases included."""
    return OPS_BY_NAME.get(OP_ALIASES.get(short, short))


@functools.lru_cache(maxsize=None)
def unregistered_class(name: str) -> type:
    """An op class for an op of another dialect (``"test.op"() : () -> ...``),
    accepted so tests can produce values; the verifier and writer skip or reject it."""
    cls = type("UnregisteredOp", (Operation,), {"__slots__": ()})
    cls.definition = OpDef(name=name, opcode=-1, cls=cls, since=V13_1, operands=(), attrs=(), results=(),
                           regions=(), sized_results=False, operand_encoding=OperandEncoding.COUNTED,
                           syntax=None)
    return cls


def is_unregistered(op: Operation) -> bool:
    return op.definition.opcode < 0


class BodyParser:
    def __init__(self, sc: Scanner, locations: "Locations"):
        self.sc = sc
        self.locations = locations
        self.scopes: list[dict[str, list[Value]]] = [{}]
        #: Terminators the text left out, in order (their locations are set last).
        self.implicit_ops: list[Operation] = []

    # -- SSA names ------------------------------------------------------------------------
    def value_ref(self) -> Ref:
        sc = self.sc
        pos = sc.here()
        name = sc.sigil_name("%")
        if name is None:
            raise sc.error("expected SSA operand")
        index = 0
        if sc.text.startswith("#", sc.pos) and sc.text[sc.pos + 1:sc.pos + 2].isdigit():
            sc.pos += 1
            index = int(sc.ident_prefix("0123456789"))
        return Ref(name, index, pos)

    def value_list(self) -> list[Ref]:
        sc = self.sc
        if not sc.peek("%"):
            return []
        refs = [self.value_ref()]
        while True:
            save = sc.pos
            if not sc.accept(","):
                break
            if not sc.peek("%"):
                sc.pos = save
                break
            refs.append(self.value_ref())
        return refs

    def def_name(self) -> tuple[str, int]:
        pos = self.sc.here()
        name = self.sc.sigil_name("%")
        if name is None:
            raise self.sc.error("expected SSA operand")
        return name, pos

    def define(self, name: str, values: list[Value], pos: int) -> None:
        if any(name in scope for scope in self.scopes):
            raise self.sc.error(f"redefinition of SSA value '%{name}'", pos)
        self.scopes[-1][name] = values

    def lookup(self, ref: Ref) -> Value:
        for scope in reversed(self.scopes):
            if ref.name in scope:
                values = scope[ref.name]
                if ref.index >= len(values):
                    raise self.sc.error(f"reference to invalid result number", ref.pos)
                return values[ref.index]
        raise self.sc.error(f"use of undeclared SSA value name", ref.pos)

    def resolve(self, ref: Ref, expected: T.Type) -> Value:
        value = self.lookup(ref)
        if value.type != expected:
            raise self.sc.error(f"use of value '%{ref.name}' expects different type than prior uses: "
                                f"{quoted(expected)} vs {quoted(value.type)}", ref.pos)
        return value

    def argument_list(self) -> list[tuple[str, T.Type, int]]:
        """``(%a: T, %b: U)``."""
        sc = self.sc
        sc.expect("(")
        args = []
        if not sc.peek(")"):
            while True:
                name, pos = self.def_name()
                sc.expect(":")
                args.append((name, PA.parse_type(sc), pos))
                if sc.peek("{"):  # argument attributes: parsed and dropped here
                    PA.parse_dict(sc)
                if not sc.accept(","):
                    break
        sc.expect(")")
        return args

    def symbol_name(self) -> str:
        sc = self.sc
        sc.skip()
        if not sc.accept("@"):
            raise sc.error("expected valid '@'-identifier for symbol name")
        if sc.peek_string():
            return sc.string()
        return sc.ident("symbol name")

    # -- regions ----------------------------------------------------------------------------
    def parse_region(self, args: list[tuple[str, T.Type, int]], implicit: Optional[type] = None) -> Region:
        sc = self.sc
        sc.expect("{")
        self.scopes.append({})
        try:
            blocks: list[Block] = []
            block = Block([t for _, t, _ in args])
            for (name, _, pos), value in zip(args, block.args):
                self.define(name, [value], pos)
            label = sc.peek("^")
            if label:
                block = self._block_header(bool(args))
            blocks.append(block)
            while not sc.accept("}"):
                if sc.at_end():
                    raise sc.error("expected '}' to end the region")
                if sc.peek("^"):
                    block = self._block_header(False)
                    blocks.append(block)
                    continue
                block.append(self.parse_op())
            if implicit is not None and (not blocks[-1].ops or not is_terminator(blocks[-1].ops[-1])):
                self.implicit_ops.append(blocks[-1].append(implicit()))
            if implicit is None and not args and not label and not blocks[0].ops:
                return Region()  # MLIR: `{ }` is a region without blocks
            return Region(blocks)
        finally:
            self.scopes.pop()

    def _block_header(self, has_args: bool) -> Block:
        sc = self.sc
        pos = sc.here()
        sc.expect("^")
        sc.ident_prefix("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$.")
        if has_args:
            raise sc.error("invalid block name in region with named arguments", pos)
        args = self.argument_list() if sc.peek("(") else []
        sc.expect(":")
        block = Block([t for _, t, _ in args])
        for (name, _, p), value in zip(args, block.args):
            self.define(name, [value], p)
        return block

    # -- ops --------------------------------------------------------------------------------
    def parse_op(self) -> Operation:
        sc = self.sc
        start = sc.here()
        bindings: list[tuple[str, int, int]] = []
        if sc.peek("%"):
            while True:
                name, pos = self.def_name()
                count = 1
                if sc.text.startswith(":", sc.pos):
                    sc.pos += 1
                    count = sc.integer("result count")
                bindings.append((name, count, pos))
                if not sc.accept(","):
                    break
            sc.expect("=")
        bound = sum(c for _, c, _ in bindings)
        op_start = sc.here()
        if sc.peek_string():
            op = self.parse_generic(op_start)
        else:
            name = sc.ident("operation name")
            short = name[len(DIALECT):] if name.startswith(DIALECT) else name
            definition = lookup_op(short)
            if definition is None or short in ("module", "global"):
                raise sc.error(f"custom op '{name}' is unknown", op_start)
            p = OpSyntax(self, definition, bound, op_start)
            try:
                parse_custom(p)
            except ParseError as e:  # MLIR names the op being parsed, in every message
                prefix = f"custom op '{definition.full_name}' "
                if not e.message.startswith("custom op '"):
                    e.message = prefix + e.message
                e.also = tuple(m if m.startswith("custom op '") else prefix + m for m in e.also)
                raise
            op = self.build(p)
        self.locations.attach(sc, op, start)
        if bindings:
            if not op.results:
                raise sc.error("cannot name an operation with no results", start)
            if bound != len(op.results):
                raise sc.error(f"operation defines {len(op.results)} results but was provided {bound} to bind",
                               start)
            i = 0
            for name, count, pos in bindings:
                self.define(name, op.results[i:i + count], pos)
                i += count
        return op

    def build(self, p: OpSyntax) -> Operation:
        infer_types(p)
        d = p.definition
        operands: list[Value] = []
        segments: list[int] = []
        for o in d.operands:
            refs = p.operands.get(o.name, [])
            types = p.types.get(o.name, [])
            if len(types) != len(refs):
                raise self.sc.error(f"{len(refs)} operands present, but expected {len(types)}", p.start)
            operands += [self.resolve(r, t) for r, t in zip(refs, types)]
            segments.append(len(refs))
        result_types = [t for r in d.results for t in p.types.get(r.name, [])]
        regions = [p.regions.get(g.name) or Region() for g in d.regions]
        attrs = {k: v for k, v in p.attrs.items() if v is not None}
        attrs.pop("operandSegmentSizes", None)
        return d.cls(operands, attrs, result_types, regions, segments=segments)

    def parse_generic(self, start: int) -> Operation:
        """``"dialect.op"(%a, %b) <{props}> ({regions}) {attrs} : (T, U) -> R``."""
        sc = self.sc
        full = sc.string()
        short = full[len(DIALECT):] if full.startswith(DIALECT) else None
        definition = lookup_op(short) if short is not None else None
        if definition is None:
            definition = unregistered_class(full).definition
        p = OpSyntax(self, definition, 0, start)
        sc.expect("(")
        refs = self.value_list()
        sc.expect(")")
        if sc.accept("<"):
            p.attributes_from_dict(sc)
            sc.expect(">")
        regions: list[Region] = []
        if sc.accept("("):
            while True:
                regions.append(self.parse_region([]))
                if not sc.accept(","):
                    break
            sc.expect(")")
        if sc.peek("{"):
            p.attributes_from_dict(sc)
        sc.expect(":")
        fn_type = PA.parse_type(sc)
        if not isinstance(fn_type, T.FunctionType):
            raise sc.error("expected function type", start)
        if len(fn_type.inputs) != len(refs):
            raise sc.error(f"expected {len(refs)} operand type{'s' if len(refs) != 1 else ''} but had "
                           f"{len(fn_type.inputs)}", start)
        operands = [self.resolve(r, t) for r, t in zip(refs, fn_type.inputs)]
        attrs = {k: v for k, v in p.attrs.items() if v is not None}
        segments = attrs.pop("operandSegmentSizes", None)
        if segments is None:
            try:
                segments = definition.default_segments(len(operands))
            except ValueError:
                raise sc.error("missing 'operandSegmentSizes' attribute", start) from None
        while len(regions) < len(definition.regions):
            regions.append(Region())
        op = definition.cls(operands, attrs, list(fn_type.results), regions, segments=segments)
        return op
