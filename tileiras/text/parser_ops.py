"""Parsing one op: the inverse of ``OpPrinter.print_format``.

``OpSyntax.walk`` reads the text of an op by walking the element tree of its
``syntax`` string, collecting operand references, types, attributes and
regions by field name.  ``custom<...>`` directives are parsed by the functions
in ``PARSE_DIRECTIVES`` (same names as the printer's), and the ops the printer
prints with hooks (``for``, ``loop``) are parsed by ``OP_PARSE_HOOKS``.

Operand and result types the text leaves out are inferred afterwards
(``tileiras.text.parser_infer``), then every operand is resolved against its
expected type as MLIR does (``use of value '%x' expects different type...``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from ..ir import attrs as A
from ..ir import types as T
from ..ir.core import Operation, Region
from ..record import field, record
from ..tile import ops_arith, ops_control, ops_core, ops_memory
from ..tile.enums import ComparisonOrdering, MemoryOrderingSemantics, Signedness, SymbolVisibility
from ..tile.registry import Attr, AttrKind, Multiplicity, OpDef, Operand, RegionDef, Result
from . import parser_attrs as PA
from .syntax import AttrDict, Custom, Element, FieldRef, Literal, OptionalGroup, TypeOf, Whitespace, parse_format

if TYPE_CHECKING:  # pragma: no cover
    from .parser_body import BodyParser


_IEEE = ("nearest_even", "zero", "negative_inf", "positive_inf")


@record
class Ref:
    """A use of an SSA value in the text: ``%name`` or ``%name#index``."""

    name: str
    index: int
    pos: int


@record
class OpSyntax:
    """What the text of one op says, by field name."""

    body: "BodyParser"
    definition: OpDef
    bound: int  # number of result names bound before ``=``
    start: int
    operands: dict[str, list[Ref]] = field(default_factory=dict)
    types: dict[str, list[T.Type]] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)
    regions: dict[str, Region] = field(default_factory=dict)
    #: Mixed integer/value lists (make_tensor_view): field -> (list position, [(value, position)]).
    mixed: dict[str, tuple[int, list]] = field(default_factory=dict)
    #: Where each field's type was written (for errors about it).
    type_pos: dict[str, int] = field(default_factory=dict)

    @property
    def sc(self):  # noqa: ANN201 - the body's scanner
        return self.body.sc

    # -- fields ---------------------------------------------------------------------------
    def spec(self, name: str) -> Operand | Attr | Result | RegionDef:
        d = self.definition
        for group in (d.operands, d.attrs, d.results, d.regions):
            for s in group:
                if s.name == name:
                    return s
        raise KeyError(f"{d.full_name} has no field '{name}'")

    # -- the walk -------------------------------------------------------------------------
    def walk(self, elements: tuple[Element, ...]) -> None:
        for e in elements:
            if isinstance(e, Whitespace):
                continue
            if isinstance(e, Literal):
                self.sc.expect(e.text)
            elif isinstance(e, AttrDict):
                self.attr_dict(e)
            elif isinstance(e, OptionalGroup):
                self.optional(e)
            elif isinstance(e, FieldRef):
                self.field(e.name)
            elif isinstance(e, TypeOf):
                self.type_of(e.name)
            elif isinstance(e, Custom):
                PARSE_DIRECTIVES[e.name](self, e.args)

    def field(self, name: str) -> None:
        spec = self.spec(name)
        if isinstance(spec, Operand):
            if spec.multiplicity is Multiplicity.VARIADIC:
                self.operands[name] = self.body.value_list()
            else:
                self.operands[name] = [self.body.value_ref()]
        elif isinstance(spec, Attr):
            self.attrs[name] = True if spec.kind is AttrKind.UNIT else inline_attr(self.sc, spec, self.definition.cls)
        elif isinstance(spec, RegionDef):
            self.regions[name] = self.body.parse_region([])

    def type_of(self, name: str) -> None:
        self.type_pos[name] = self.sc.here()
        spec = self.spec(name)
        if isinstance(spec, Operand) and name in self.operands:
            n = len(self.operands[name])
            if not n and spec.multiplicity is Multiplicity.VARIADIC and PA.is_type_start(self.sc):
                written = variadic_types(self.sc)  # types for operands the text left out
                raise self.sc.error(f"number of operands and types do not match: got 0 operands and "
                                    f"{len(written)} types", self.start)
            types = [PA.parse_type(self.sc)] if n else []
            for _ in range(n - 1):
                self.sc.expect(",")
                types.append(PA.parse_type(self.sc))
        elif isinstance(spec, Result) and not spec.variadic:
            types = [PA.parse_type(self.sc)]
        else:
            types = variadic_types(self.sc)
        self.types[name] = types

    def optional(self, group: OptionalGroup) -> None:
        if self.is_present(group):
            self.walk(group.elements)
            return
        first = next(e for e in group.elements if not isinstance(e, Whitespace))
        if isinstance(first, FieldRef) and self.sc.peek_ident():
            spec = self.spec(first.name)
            # a keyword, but not one of these: NVIDIA's parsers name the attribute, except for the
            # optional scope of pointer loads/stores, which its assembly format skips
            skipped = spec.name == "memory_scope" and self.definition.cls not in _MEMORY_SPEC_OPS
            if isinstance(spec, Attr) and spec.kind is AttrKind.ENUM and not skipped:
                enum_value(self.sc, spec, self.definition.cls)
        self.default_attrs(tuple(e for e in group.elements if isinstance(e, FieldRef)))

    def is_present(self, group: OptionalGroup) -> bool:
        first = next(e for e in group.elements if not isinstance(e, Whitespace))
        sc = self.sc
        if isinstance(first, Literal):
            if first.text[0].isalpha():
                return sc.peek_ident() == first.text
            return sc.peek(first.text) and not (first.text == "-" and sc.peek("->"))
        if isinstance(first, FieldRef):
            spec = self.spec(first.name)
            if isinstance(spec, Operand):
                return sc.peek("%")
            if isinstance(spec, Attr) and spec.kind is AttrKind.ENUM:
                return sc.peek_ident() in {m.keyword for m in spec.enum}  # type: ignore[union-attr]
        return self.try_walk(group.elements)

    def try_walk(self, elements: tuple[Element, ...]) -> bool:
        """Parse ``elements`` if they are there; leave everything as it was if not."""
        from .parser_scan import ParseError

        saved = (self.sc.pos, dict(self.operands), dict(self.types), dict(self.attrs), dict(self.regions))
        try:
            self.walk(elements)
        except ParseError:
            self.sc.pos, self.operands, self.types, self.attrs, self.regions = saved
            return False
        self.sc.pos, self.operands, self.types, self.attrs, self.regions = saved
        return True

    def attr_dict(self, e: AttrDict) -> None:
        sc = self.sc
        self.default_attrs(e.fields)
        if e.keyword:
            if not sc.accept_keyword("attributes"):
                return
        elif not sc.peek("{"):
            return
        self.attributes_from_dict(sc)

    def default_attrs(self, fields: tuple[FieldRef, ...]) -> None:
        """Attributes with a default (``$reduction^=add``) that the text leaves out
        take that default, as MLIR's DefaultValuedAttr does; a dictionary entry
        parsed afterwards overrides it."""
        for e in fields:
            if e.default is not None and e.name not in self.attrs:
                spec = self.spec(e.name)
                assert isinstance(spec, Attr)
                self.attrs[e.name] = (spec.enum.from_keyword(e.default) if spec.enum is not None
                                      else int(e.default))

    def attributes_from_dict(self, sc: Any) -> None:
        """``{name = value, ...}``: inherent attributes given in dictionary form."""
        sc.expect("{")
        if not sc.peek("}"):
            while True:
                key = sc.string() if sc.peek_string() else sc.ident("attribute name")
                spec = next((a for a in self.definition.attrs if a.name == key), None)
                if not sc.accept("="):
                    self.attrs[key] = True
                elif spec is not None:
                    self.attrs[key] = dict_attr(sc, spec)
                elif key == "operandSegmentSizes":
                    self.attrs[key] = dense_i32_array(sc)
                else:
                    self.attrs[key] = PA.parse_attribute(sc)
                if not sc.accept(","):
                    break
        sc.expect("}")


def variadic_types(sc: Any) -> list[T.Type]:
    """A comma-separated type list of unknown length (possibly empty)."""
    if not PA.is_type_start(sc):
        return []
    types = [PA.parse_type(sc)]
    while True:
        save = sc.pos
        if not sc.accept(","):
            break
        if not PA.is_type_start(sc):
            sc.pos = save
            break
        types.append(PA.parse_type(sc))
    return types


# ---------------------------------------------------------------------------
# inline attribute values


#: Keyword order in NVIDIA's "one of" messages where it differs from the enum's numbering.
_KEYWORD_ORDER = {Signedness: ("signed", "unsigned"), ComparisonOrdering: ("ordered", "unordered")}
#: Rounding modes each op's custom parser accepts (others: any).
_ROUNDING_CHOICES: dict[type, tuple[str, ...]] = {
    **{cls: _IEEE for cls in (ops_arith.AddFOp, ops_arith.SubFOp, ops_arith.MulFOp, ops_arith.FmaOp, ops_core.IToFOp)},
    ops_arith.DivFOp: _IEEE + ("approx", "full"),
    ops_arith.SqrtOp: _IEEE + ("approx",),
    ops_core.FToIOp: ("nearest_int_to_zero",),
}
#: Ops whose memory attributes have a custom parser with its own wording.
_MEMORY_SPEC_OPS = (ops_memory.LoadViewTkoOp, ops_memory.StoreViewTkoOp)


def _keywords(spec: Attr) -> tuple[str, ...]:
    return _KEYWORD_ORDER.get(spec.enum, tuple(m.keyword for m in spec.enum))  # type: ignore[arg-type,union-attr]


def _enum_error(sc: Any, spec: Attr, op: Optional[type], word: Optional[str], start: int) -> Exception:
    """The message NVIDIA's parser gives for a missing or unknown keyword."""
    names = _keywords(spec)
    if spec.name in ("rounding_mode", "rounding"):
        allowed = _ROUNDING_CHOICES.get(op, names)  # type: ignore[arg-type]
        got = f", got: '{word}'" if word else ""
        return sc.error("expected rounding mode to be one of: " + ", ".join(f"'{n}'" for n in allowed) + got, start)
    if spec.name in ("memory_ordering_semantics", "memory_scope", "mode"):
        if op in _MEMORY_SPEC_OPS and word:
            return sc.error(f'invalid {spec.name} attribute specification. Got "{word}" but expect one of: '
                            + ", ".join(names), start)
        return sc.error("expected string or keyword containing one of the following enum values for attribute "
                        f"'{spec.name}' [{', '.join(names)}]", start)
    label = spec.name if spec.name == "signedness" else f"'{spec.name}'"
    choices = f"expected {label} to be one of: {{" + ", ".join(f"'{n}'" for n in names) + "}"
    if word is None:
        return sc.error("expected valid keyword", start, also=(choices,))
    return sc.error(choices, start)


def enum_value(sc: Any, spec: Attr, op: Optional[type] = None) -> Any:
    start = sc.here()
    word = sc.ident() if sc.peek_ident() else None
    for member in spec.enum:  # type: ignore[union-attr]
        if member.keyword == word:
            allowed = _ROUNDING_CHOICES.get(op) if spec.name in ("rounding_mode", "rounding") else None  # type: ignore[arg-type]
            if allowed is not None and word not in allowed:
                break
            return member
    raise _enum_error(sc, spec, op, word, start)


def inline_attr(sc: Any, spec: Attr, op: Optional[type] = None) -> Any:
    """An op attribute in custom syntax, by its storage kind."""
    kind = spec.kind
    if kind is AttrKind.ENUM:
        if sc.peek("#"):
            return dict_attr(sc, spec)
        return enum_value(sc, spec, op)
    if kind is AttrKind.INT:
        return sc.integer()
    if kind is AttrKind.BOOL:
        if sc.accept_keyword("true"):
            return True
        if sc.accept_keyword("false"):
            return False
        raise sc.error("expected 'true' or 'false'")
    if kind is AttrKind.STRING:
        return sc.string("attribute value")
    if kind is AttrKind.TYPE:
        return PA.parse_type(sc)
    if kind in (AttrKind.I32_ARRAY, AttrKind.BOOL_ARRAY):
        if sc.accept_keyword("array"):
            return dense_array_body(sc, kind)
        sc.expect("[")
        items: list = []
        if not sc.peek("]"):
            while True:
                items.append(_array_item(sc, kind))
                if not sc.accept(","):
                    break
        sc.expect("]")
        return tuple(items)
    if kind is AttrKind.ARRAY:
        attr = PA.parse_attribute(sc)
        if not isinstance(attr, A.ArrayAttr):
            raise sc.error("expected array attribute")
        return attr.elements
    if kind is AttrKind.HINTS:
        return PA.parse_hints(sc) if sc.peek("<") else PA.parse_tile_attr(sc)
    if kind is AttrKind.TAGGED:
        if sc.peek("#"):
            return PA.parse_tile_attr(sc)
        return PA.parse_attribute(sc)
    raise sc.error(f"cannot parse attribute '{spec.name}'")


def _array_item(sc: Any, kind: AttrKind) -> Any:
    if kind is AttrKind.BOOL_ARRAY:
        if sc.accept_keyword("true"):
            return True
        if sc.accept_keyword("false"):
            return False
        raise sc.error("expected 'true' or 'false'")
    return sc.integer()


def dense_array_body(sc: Any, kind: AttrKind) -> tuple:
    """``array<i32: 1, 2>`` after the ``array`` keyword."""
    sc.expect("<")
    PA.parse_type(sc)
    items: list = []
    if sc.accept(":"):
        while True:
            items.append(_array_item(sc, kind))
            if not sc.accept(","):
                break
    sc.expect(">")
    return tuple(items)


def dense_i32_array(sc: Any) -> tuple:
    sc.expect("array")
    return dense_array_body(sc, AttrKind.I32_ARRAY)


def dict_attr(sc: Any, spec: Attr) -> Any:
    """An inherent attribute written as a full MLIR attribute (generic form or
    ``attributes {...}``): enums as ``#cuda_tile.<enum><keyword>`` or ``N : i32``."""
    if spec.kind is AttrKind.ENUM:
        if sc.accept("#"):
            sc.ident("enum attribute name")
            sc.expect("<")
            value = enum_value(sc, spec)
            sc.expect(">")
            return value
        start = sc.here()
        n = sc.integer()
        if sc.accept(":"):
            PA.parse_type(sc)
        try:
            return spec.enum(n)  # type: ignore[misc]
        except ValueError:
            raise sc.error(f"invalid value {n} for {spec.name}", start) from None
    if spec.kind is AttrKind.INT:
        n = sc.integer()
        if sc.accept(":"):
            PA.parse_type(sc)
        return n
    if spec.kind is AttrKind.STRING:
        return sc.string()
    if spec.kind is AttrKind.BOOL:
        return bool(getattr(PA.parse_attribute(sc), "value", False))
    if spec.kind is AttrKind.UNIT:
        sc.expect("unit")
        return True
    if spec.kind is AttrKind.DENSE:
        return PA.parse_attribute(sc)
    return inline_attr(sc, spec)


# ---------------------------------------------------------------------------
# custom<...> directives (the printer's ``DIRECTIVES``, in reverse)


def _name(arg: Element) -> str:
    assert isinstance(arg, (FieldRef, TypeOf))
    return arg.name


def _dense_constant(p: OpSyntax, args: tuple[Element, ...]) -> None:
    sc = p.sc
    start = sc.here()
    sc.expect("<")
    element = _constant_element(p)
    sc.expect(":")
    body_start = sc.here()
    _check_literal(sc, element)  # NVIDIA's parser reads the literal before the type
    sc.pos = body_start
    depth = 1
    while depth:  # the body is parsed once the type (and so the shape) is known
        if sc.pos >= len(sc.text):
            raise sc.error("expected '>'")
        ch = sc.text[sc.pos]
        if ch == '"':
            sc.string()
            continue
        depth += {"<": 1, ">": -1}.get(ch, 0)
        sc.pos += 1
    body_end = sc.pos - 1
    sc.expect(":")
    t = PA.parse_type(sc)
    if not isinstance(t, T.TileType):  # NVIDIA's parser checks the result type before building the op
        raise sc.error("result #0 must be tile of " + " or ".join(_CONSTANT_ELEMENTS)
                       + f" values, but got {PA.quoted(t)}", start)
    if len(args) > 1:
        p.types[_name(args[1])] = [t]
    if isinstance(t, T.TileType) and t.element != element:
        raise sc.error(f"mismatch between the element type: '{element}' and the tile element type "
                       f"'{t.element}'", start)
    shape = t.shape if isinstance(t, T.TileType) else ()
    end = sc.pos
    sc.pos = body_start
    sub_text = sc.text
    try:
        sc.text = sub_text[:body_end]
        data = PA.dense_values(sc, element, shape)
        if not sc.at_end():
            raise sc.error("expected '>'")
    finally:
        sc.text = sub_text
    sc.pos = end
    dense_type = T.TileType(element, shape) if isinstance(t, T.TileType) else t
    p.attrs[_name(args[0])] = A.DenseElementsAttr(dense_type, data)


def _check_literal(sc: Any, element: T.ScalarType) -> None:
    """The literal's structure and elements (errors only; the data is read again
    once the type gives the shape)."""
    if sc.peek("[") or sc.peek_string():
        PA.dense_values(sc, element, None)


_CONSTANT_ELEMENTS = ("i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "tf32", "f8E4M3FN",
                      "f8E5M2", "f8E8M0FNU", "f4E2M1FN", "fnv8E5M3FNU")


def _constant_element(p: OpSyntax) -> T.ScalarType:
    """The element type in ``<f32: ...>``, with NVIDIA's messages for anything else."""
    sc = p.sc
    start = sc.here()
    expect = ("expect element type to be one of " + " or ".join(_CONSTANT_ELEMENTS) + " values, but got ")
    word = sc.peek_ident()
    if word is not None and not PA.is_type_start(sc):
        sc.ident()
        raise sc.error(f"'{p.definition.full_name}' unknown type: {word}", start,
                       also=(expect + "'<<NULL TYPE>>'",))
    element = PA.parse_type(sc)
    if not isinstance(element, T.ScalarType) or element.name not in _CONSTANT_ELEMENTS:
        raise sc.error(expect + PA.quoted(element).replace("!cuda_tile.", "", 1), start)
    return element


def _assume_predicate(p: OpSyntax, args: tuple[Element, ...]) -> None:
    sc = p.sc
    if not (sc.peek("#") or sc.peek_ident() in ("div_by", "bounded", "same_elements")):
        raise sc.error("expected assume predicate attribute")
    p.attrs[_name(args[0])] = PA.parse_predicate(sc)


def _index_types(p: OpSyntax, args: tuple[Element, ...]) -> None:
    """``, T`` (one type for every index) or ``, T1, T2...``."""
    name = _name(args[0])
    n = len(p.operands.get(name, []))
    types: list[T.Type] = []
    sc = p.sc
    while len(types) < max(n, 1):  # a type after no index at all is read and dropped, as NVIDIA does
        save = sc.pos
        if not sc.accept(","):
            break
        if not (sc.peek("tile") or sc.peek("!cuda_tile.tile")):
            sc.pos = save
            break
        types.append(PA.parse_type(sc))
    if len(types) == 1:
        types *= n
    p.types[name] = types[:n]


def _mixed_list(p: OpSyntax, name: str, close: str) -> list:
    """Integers and ``%values`` up to ``close``; the values become operands.  The
    items and their positions are kept for ``_check_mixed_lists``."""
    sc = p.sc
    declared = sc.here()
    items: list = []
    refs: list[Ref] = []
    if not sc.peek(close):
        while True:
            at = sc.here()
            if sc.peek("%"):
                refs.append(p.body.value_ref())
                items.append((T.DYNAMIC, at))
            elif sc.peek_char() and sc.peek_char() in "+-0123456789":
                items.append((sc.integer(), at))
            else:
                raise sc.error("expected either integer or SSA value", at)
            if not sc.accept(","):
                break
    p.operands[name] = refs
    p.mixed[name] = (declared, items)
    return items


def _mixed_shape(p: OpSyntax, args: tuple[Element, ...]) -> None:
    _mixed_list(p, _name(args[0]), "]")


def _check_mixed_lists(p: OpSyntax) -> None:
    """make_tensor_view: the written sizes and strides against the result type
    (NVIDIA's custom parser does this before resolving the dynamic operands)."""
    view = (p.types.get("result") or [None])[0]
    if not isinstance(view, T.TensorViewType):
        raise p.sc.error(f"expected 'tensor_view' type, but got {PA.quoted(view)}")
    for field, what, dims in (("dynamicShape", "shape", view.shape), ("dynamicStrides", "stride", view.strides)):
        declared, items = p.mixed.get(field, (p.start, []))
        if len(items) != len(dims):
            raise p.sc.error(f"expected {what} declaration to contain {len(dims)} elements due to tensor_view type, "
                             f"but {len(items)} were provided", declared)
        for i, ((got, at), want) in enumerate(zip(items, dims)):
            if got != want:
                spell = lambda d: "dynamic" if d == T.DYNAMIC else str(d)  # noqa: E731
                raise p.sc.error(f"input {what} dimension {i} does not match tensor_view type (expected "
                                 f"{spell(want)}, got {spell(got)})", at)


def _view_operand_types(p: OpSyntax, args: tuple[Element, ...]) -> None:
    types = variadic_types(p.sc)
    base = _name(args[0])
    first = types[0] if types else None
    # the base's type is written only when its pointer is classified (then it comes first);
    # a lone type is the dynamic sizes' type, whatever it is
    if (isinstance(first, T.TileType) and isinstance(first.element, T.PointerType)
            and (len(types) > 1 or first.element.ptr_attr is not None)):
        p.types[base] = [types.pop(0)]
    if types:
        for arg in args[1:]:
            n = len(p.operands.get(_name(arg), []))
            p.types[_name(arg)] = [types[0]] * n


def _if_region(p: OpSyntax, args: tuple[Element, ...]) -> None:
    p.regions[_name(args[0])] = p.body.parse_region([], implicit=ops_control.YieldOp)


def _argument_region(p: OpSyntax, args: tuple[Element, ...]) -> None:
    p.regions[_name(args[0])] = p.body.parse_region(p.body.argument_list())


def _symbol_ref(p: OpSyntax, args: tuple[Element, ...]) -> None:
    p.attrs[_name(args[0])] = p.body.symbol_name()


def _symbol_visibility(p: OpSyntax, args: tuple[Element, ...]) -> None:
    sc = p.sc
    value = SymbolVisibility.PUBLIC
    for member in SymbolVisibility:
        if sc.accept_keyword(member.keyword):
            value = member
    p.attrs[_name(args[0])] = value


def _inbounds(p: OpSyntax, args: tuple[Element, ...]) -> None:
    if p.sc.accept_keyword("inbounds"):
        p.sc.expect("=")
        p.attrs[_name(args[0])] = inline_attr(p.sc, p.spec(_name(args[0])))  # type: ignore[arg-type]


def _first_type(p: OpSyntax, args: tuple[Element, ...]) -> None:
    """One type for every result; as many results as the source's rank."""
    t = PA.parse_type(p.sc)
    src = p.types.get("src", [None])[0]
    if isinstance(src, T.TensorViewType):
        count = src.rank
    elif isinstance(src, (T.PartitionViewType, T.StridedViewType)):
        count = len(src.tile_shape)
    else:
        count = max(p.bound, 1)
    p.types[_name(args[0])] = [t] * count


def _callee(p: OpSyntax, args: tuple[Element, ...]) -> None:
    p.attrs[_name(args[0])] = p.body.symbol_name()
    p.attrs[_name(args[1])] = ()


def _call_type(p: OpSyntax, args: tuple[Element, ...]) -> None:
    """``(T, ...) -> R`` or ``(T, ...) -> (R, ...)``: the operand and result types."""
    sc = p.sc

    def type_list() -> list[T.Type]:
        sc.expect("(")
        types: list[T.Type] = []
        while not sc.accept(")"):
            types.append(PA.parse_type(sc))
            sc.accept(",")
        return types

    p.types[_name(args[0])] = type_list()
    sc.expect("->")
    p.types[_name(args[1])] = type_list() if sc.peek("(") else [PA.parse_type(sc)]


PARSE_DIRECTIVES: dict[str, Callable[[OpSyntax, tuple[Element, ...]], None]] = {
    "FirstType": _first_type,
    "Inbounds": _inbounds,
    "DenseConstant": _dense_constant,
    "AssumePredicate": _assume_predicate,
    "IndexTypes": _index_types,
    "MixedShape": _mixed_shape,
    "MixedStrides": _mixed_shape,
    "TensorViewOperandTypes": _view_operand_types,
    "IfRegion": _if_region,
    "ArgumentRegion": _argument_region,
    "SymbolRef": _symbol_ref,
    "SymbolVisibility": _symbol_visibility,
    "Callee": _callee,
    "CallType": _call_type,
}


# ---------------------------------------------------------------------------
# op hooks: for and loop


def _iter_values(p: OpSyntax) -> tuple[list[tuple[str, int]], list[Ref]]:
    sc = p.sc
    inner: list[tuple[str, int]] = []
    outer: list[Ref] = []
    sc.expect("(")
    if not sc.peek(")"):
        while True:
            inner.append(p.body.def_name())
            sc.expect("=")
            outer.append(p.body.value_ref())
            if not sc.accept(","):
                break
    sc.expect(")")
    return inner, outer


def _parse_for(p: OpSyntax) -> None:
    sc = p.sc
    if sc.accept_keyword("unsigned"):
        p.attrs["unsignedCmp"] = True
    iv = p.body.def_name()
    sc.expect("in")
    sc.expect("(")
    p.operands["lowerBound"] = [p.body.value_ref()]
    sc.expect("to")
    p.operands["upperBound"] = [p.body.value_ref()]
    sc.expect(",")
    sc.expect("step")
    p.operands["step"] = [p.body.value_ref()]
    sc.expect(")")
    sc.expect(":")
    iv_type = PA.parse_type(sc)
    p.types["lowerBound"] = p.types["upperBound"] = p.types["step"] = [iv_type]
    inner: list[tuple[str, int]] = []
    p.operands["initValues"] = []
    p.types["initValues"] = []
    if sc.accept_keyword("iter_values"):
        inner, p.operands["initValues"] = _iter_values(p)
        sc.expect("->")
        sc.expect("(")
        p.types["initValues"] = PA.type_list(sc) if not sc.peek(")") else []
        sc.expect(")")
    p.types["results"] = list(p.types["initValues"])
    args = [(iv[0], iv_type, iv[1])] + [(n, t, pos) for (n, pos), t in zip(inner, p.types["initValues"])]
    p.regions["body"] = p.body.parse_region(args, implicit=ops_control.ContinueOp)


def _parse_loop(p: OpSyntax) -> None:
    sc = p.sc
    inner: list[tuple[str, int]] = []
    p.operands["initValues"] = []
    if sc.accept_keyword("iter_values"):
        inner, p.operands["initValues"] = _iter_values(p)
    first: list[T.Type] = []
    second: list[T.Type] = []
    if sc.accept(":"):
        first = PA.type_list(sc)
        if sc.accept("->"):
            second = PA.type_list(sc)
    if inner:
        if len(first) != len(inner):
            raise sc.error("found different number of iter_values and types", p.start)
        init_types, result_types = first, second
    else:
        init_types, result_types = [], first
    p.types["initValues"] = init_types
    p.types["results"] = result_types
    args = [(n, t, pos) for (n, pos), t in zip(inner, init_types)]
    p.regions["body"] = p.body.parse_region(args, implicit=ops_control.ContinueOp)


OP_PARSE_HOOKS: dict[type, Callable[[OpSyntax], None]] = {
    ops_control.ForOp: _parse_for,
    ops_control.LoopOp: _parse_loop,
}


def parse_custom(p: OpSyntax) -> None:
    """The op's text after its name, by hook or by walking its syntax tree."""
    hook = OP_PARSE_HOOKS.get(p.definition.cls)
    if hook is not None:
        hook(p)
        return
    syntax = p.definition.syntax
    if syntax is None:
        raise p.sc.error(f"custom op '{p.definition.full_name}' has no custom assembly form")
    p.walk(parse_format(syntax).elements)
    check = POST_PARSE_CHECKS.get(p.definition.cls)
    if check is not None:
        check(p)


def _expect_type_kind(name: str, kinds: tuple[type, ...], message: str) -> Callable[[OpSyntax], None]:
    """A check that field ``name``'s written type is one of ``kinds`` (NVIDIA's
    custom parsers test this before resolving anything)."""

    def check(p: OpSyntax) -> None:
        t = (p.types.get(name) or [None])[0]
        if t is not None and not isinstance(t, kinds):
            raise p.sc.error(f"{message}{PA.quoted(t)}", p.type_pos.get(name))

    return check


def _check_weak_scope(p: OpSyntax) -> None:
    """View loads and stores: a weak access takes no memory scope."""
    scope = p.attrs.get("memory_scope")
    if p.attrs.get("memory_ordering_semantics") is MemoryOrderingSemantics.WEAK and scope is not None:
        raise p.sc.error(f'operation specifies weak memory ordering semantics, but then provides "{scope.keyword}" '
                         f"scope, expected no memory scope.", p.start)


def _mask_or_padding(p: OpSyntax) -> None:
    """``load_ptr_tko %p, %x : ..., T`` prints the same with only a mask or only a
    padding value; the written type tells which (a mask is a tile of i1).  MLIR's own
    parser always takes the mask here and then rejects a padding value."""
    if "mask" in p.operands and "paddingValue" not in p.operands:
        t = (p.types.get("mask") or [None])[0]
        if isinstance(t, T.TileType) and t.element != T.I1:
            p.operands["paddingValue"] = p.operands.pop("mask")
            p.types["paddingValue"] = p.types.pop("mask")
            if "mask" in p.type_pos:
                p.type_pos["paddingValue"] = p.type_pos.pop("mask")


#: Checks an op's custom parser makes once all of its text is read.
POST_PARSE_CHECKS: dict[type, Callable[[OpSyntax], None]] = {
    ops_memory.LoadPtrTkoOp: _mask_or_padding,
    ops_memory.LoadViewTkoOp: _check_weak_scope,
    ops_memory.StoreViewTkoOp: _check_weak_scope,
    ops_memory.MakeTensorViewOp: _check_mixed_lists,
    ops_memory.MakePartitionViewOp: _expect_type_kind("result", (T.PartitionViewType,),
                                                      "expected 'partition_view' type, but got "),
    ops_memory.MakeStridedViewOp: _expect_type_kind("result", (T.StridedViewType,),
                                                    "expected 'strided_view' type, but got "),
    ops_memory.MakeGatherScatterViewOp: _expect_type_kind("result", (T.GatherScatterViewType,),
                                                          "expected 'gather_scatter_view' type, but got "),
    ops_memory.GetTensorShapeOp: _expect_type_kind("src", (T.TensorViewType,), "expected tensor_view, got "),
    ops_memory.GetIndexSpaceShapeOp: _expect_type_kind("src", tuple(T.ViewType), "expected tile view, got "),
}
