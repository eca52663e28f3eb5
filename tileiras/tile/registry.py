"""The declarative op registry.

Each Tile IR op is a class decorated with ``@tile_op``; its body lists the op's
fields in bytecode order::

    @tile_op("addf")
    class AddFOp(Operation):
        result = Result()
        lhs = Operand()
        rhs = Operand()
        rounding_mode = Attr(AttrKind.ENUM, enum=RoundingMode)
        flush_to_zero = Attr(AttrKind.UNIT)
        syntax = "..."

The decorator turns the declarations into an ``OpDef`` (stored as the class's
``definition``) and replaces them with accessors.  The bytecode reader and writer,
the printer, the parser and the verifier are generic walkers over ``OpDef``; the
numbers that must never change (opcodes) live apart in ``opcodes.py``.
"""
from __future__ import annotations

import enum
from typing import Any, Callable, Optional

from ..ir.core import Operation
from ..ir.version import V13_1, Version
from ..record import record
from .opcodes import OPCODES
from .traits import OpTrait


class AttrKind(enum.Enum):
    """How an inline attribute is stored in an op's bytecode."""

    ENUM = "enum"              # varint enum number
    INT = "int"                # varint
    BOOL = "bool"              # one byte
    STRING = "string"          # string-table index
    TYPE = "type"              # type-table index
    TAGGED = "tagged"          # a self-contained attribute
    ARRAY = "array"            # count + self-contained attributes
    DENSE = "dense"            # constant-table index, typed by the op's result
    I32_ARRAY = "i32_array"    # count + int32 each
    BOOL_ARRAY = "bool_array"  # count + one byte each
    HINTS = "hints"            # optimization hints (untagged dictionary of dictionaries)
    UNIT = "unit"              # presence bit in the flags word only


class Multiplicity(enum.Enum):
    SINGLE = "single"
    OPTIONAL = "optional"
    VARIADIC = "variadic"


@record(frozen=True)
class Operand:
    multiplicity: Multiplicity = Multiplicity.SINGLE
    since: Version = V13_1
    name: str = ""


def Optional_(since: Version = V13_1) -> Operand:  # noqa: N802 - reads like a type constructor
    return Operand(Multiplicity.OPTIONAL, since)


def Variadic(since: Version = V13_1) -> Operand:  # noqa: N802
    return Operand(Multiplicity.VARIADIC, since)


@record(frozen=True)
class Attr:
    kind: AttrKind
    enum: Optional[type] = None
    optional: bool = False
    since: Version = V13_1
    #: Value a reader assumes when the file predates the attribute.
    default: Any = None
    #: For BOOL_ARRAY: the operand group whose length the array must have
    #: (absent means all false).
    length_of: str = ""
    #: For INT: the lowest value and its ODS summary (``ConfinedAttr<I64Attr, [IntMinValue<0>]>``).
    minimum: Optional[tuple[int, str]] = None
    #: For HINTS: the optimization hints the op takes.
    hint_keys: tuple[str, ...] = ()
    name: str = ""

    @property
    def in_flags(self) -> bool:
        return self.kind is AttrKind.UNIT or self.optional


#: Lowest values of confined integer attributes, with NVIDIA's ODS summaries (``Attr.minimum``).
I64_MIN_0 = (0, "64-bit signless integer attribute whose minimum value is 0")
I32_NON_NEGATIVE = (0, "32-bit signless integer attribute whose value is non-negative")


@record(frozen=True)
class Result:
    variadic: bool = False
    since: Version = V13_1
    #: Type of the result when reading a file that predates it (the reader adds it).
    default_type: Any = None
    name: str = ""


@record(frozen=True)
class RegionDef:
    name: str = ""


class OperandEncoding(enum.Enum):
    #: Each operand field in turn: a single id, a count-prefixed group, or an
    #: optional id whose presence is a bit of the flags word.
    FIELDS = "fields"
    #: One total count, then every operand id (ops with one variadic group and
    #: no operand-segment attribute).
    COUNTED = "counted"


@record(frozen=True)
class OpDef:
    name: str                      # mnemonic without the dialect prefix
    opcode: int
    cls: type
    since: Version
    operands: tuple[Operand, ...]
    attrs: tuple[Attr, ...]
    results: tuple[Result, ...]
    regions: tuple[RegionDef, ...]
    sized_results: bool            # result types written as count + ids
    operand_encoding: OperandEncoding
    syntax: Optional[str]
    #: What the op is (``traits.py``): effects, terminator, element-wise, latency class...
    traits: tuple[OpTrait, ...] = ()
    #: The fields' type constraints and relations (``constraints.sig``); None: unchecked.
    signature: Any = None

    @property
    def full_name(self) -> str:
        return "cuda_tile." + self.name

    def flag_fields(self, version: Version) -> list[Attr | Operand]:
        """Fields stored as flag bits, in bit order, that exist at ``version``."""
        bits: list[Attr | Operand] = [a for a in self.attrs if a.in_flags]
        if self.operand_encoding is OperandEncoding.FIELDS:
            bits += [o for o in self.operands if o.multiplicity is Multiplicity.OPTIONAL]
        return bits

    def has_flags(self, version: Version) -> bool:
        return any(f.since <= version for f in self.flag_fields(version))

    def default_segments(self, num_operands: int) -> tuple[int, ...]:
        """Segment sizes when only the total is known (at most one non-single field)."""
        flexible = [i for i, o in enumerate(self.operands) if o.multiplicity is not Multiplicity.SINGLE]
        fixed = len(self.operands) - len(flexible)
        if not flexible:
            return (1,) * len(self.operands)
        if len(flexible) > 1:
            raise ValueError(f"{self.full_name}: operand segments must be given explicitly")
        sizes = [1] * len(self.operands)
        sizes[flexible[0]] = num_operands - fixed
        return tuple(sizes)

    def operand_index(self, name: str) -> int:
        for i, o in enumerate(self.operands):
            if o.name == name:
                return i
        raise KeyError(name)


_RESERVED = frozenset(Operation.__slots__) | {"name", "definition", "walk", "operand_group"}

#: Every registered op, by mnemonic and by opcode.
OPS_BY_NAME: dict[str, OpDef] = {}
OPS_BY_OPCODE: dict[int, OpDef] = {}


def _named(spec: Any, key: str) -> Any:
    """The spec with its name filled in: the class attribute's name unless the
    spec spells one itself (for names that are Python keywords, e.g. ``global``)."""
    return type(spec)(**{**spec.__dict__, "name": spec.name or key})


def _operand_accessor(index: int, spec: Operand) -> property:
    def get(op: Operation) -> Any:
        group = op.operand_group(index)
        if spec.multiplicity is Multiplicity.SINGLE:
            return group[0]
        if spec.multiplicity is Multiplicity.OPTIONAL:
            return group[0] if group else None
        return tuple(group)
    return property(get)


def _attr_accessor(name: str) -> property:
    return property(lambda op: op.attributes.get(name))


def _result_accessor(index: int, spec: Result, results: tuple[Result, ...]) -> property:
    variadic = [i for i, r in enumerate(results) if r.variadic]

    def get(op: Operation) -> Any:
        if not variadic:
            return op.results[index]
        # at most one variadic result group is allowed; it takes what's left
        extra = len(op.results) - (len(results) - 1)
        if index < variadic[0]:
            return op.results[index]
        if index == variadic[0]:
            return tuple(op.results[index:index + extra])
        return op.results[index + extra - 1]
    return property(get)


def tile_op(name: str, *, sized_results: bool = False,
            operand_encoding: OperandEncoding | None = None,
            traits: tuple[OpTrait, ...] = ()) -> Callable[[type], type]:
    """Register an op class; see the module docstring."""

    def register(cls: type) -> type:
        operands, attrs, results, regions = [], [], [], []
        python_names: dict[str, str] = {}  # field name -> class attribute (``from`` -> ``from_``)
        for key, spec in list(cls.__dict__.items()):
            if isinstance(spec, (Operand, Attr, Result, RegionDef)):
                python_names[spec.name or key] = key
            if isinstance(spec, Operand):
                operands.append(_named(spec, key))
            elif isinstance(spec, Attr):
                attrs.append(_named(spec, key))
            elif isinstance(spec, Result):
                results.append(_named(spec, key))
            elif isinstance(spec, RegionDef):
                regions.append(_named(spec, key))
        encoding = operand_encoding or _default_operand_encoding(operands)
        opcode, since = OPCODES[name]
        definition = OpDef(
            name=name, opcode=opcode, cls=cls, since=since,
            operands=tuple(operands), attrs=tuple(attrs), results=tuple(results),
            regions=tuple(regions), sized_results=sized_results, operand_encoding=encoding,
            syntax=cls.__dict__.get("syntax"), traits=tuple(traits),
            signature=cls.__dict__.get("signature"))
        accessors = [(o.name, _operand_accessor(i, o)) for i, o in enumerate(definition.operands)]
        accessors += [(a.name, _attr_accessor(a.name)) for a in definition.attrs]
        accessors += [(r.name, _result_accessor(i, r, definition.results))
                      for i, r in enumerate(definition.results)]
        accessors += [(g.name, property(lambda op, i=i: op.regions[i])) for i, g in enumerate(definition.regions)]
        for field_name, accessor in accessors:
            # A field named like a generic slot (``operands`` of return/yield, the
            # variadic ``results`` of for/if) is that whole list already.
            key = python_names[field_name]
            if key not in _RESERVED:
                setattr(cls, key, accessor)
            elif key in cls.__dict__:
                delattr(cls, key)  # let the generic slot show through (get_global's ``name``)
        cls.definition = definition
        if name in OPS_BY_NAME or opcode in OPS_BY_OPCODE:
            raise RuntimeError(f"op {name} (opcode {opcode:#x}) registered twice")
        OPS_BY_NAME[name] = definition
        OPS_BY_OPCODE[opcode] = definition
        return cls

    return register


def _default_operand_encoding(operands: list[Operand]) -> OperandEncoding:
    """MLIR's rule: one variadic/optional group is sized by the operand count;
    several need per-group sizes (count prefixes and flag bits)."""
    flexible = sum(o.multiplicity is not Multiplicity.SINGLE for o in operands)
    return OperandEncoding.COUNTED if flexible == 1 else OperandEncoding.FIELDS


def ops_with(kind: type) -> tuple[type, ...]:
    """The registered op classes that declare a trait of type ``kind`` (``traits.py``), in
    mnemonic order."""
    return tuple(d.cls for _, d in sorted(OPS_BY_NAME.items()) if any(isinstance(t, kind) for t in d.traits))


def terminators_of(parent: str) -> tuple[type, ...]:
    """The terminators whose ``Terminator`` trait names ``parent`` (a mnemonic, or
    ``entry`` for a function body); the parent's implicit terminator first."""
    from .traits import FUNCTION_BODY, ImplicitTerminator, Terminator

    implicit = "return" if parent == FUNCTION_BODY else next(
        (t.name for t in OPS_BY_NAME[parent].cls.definition.traits if isinstance(t, ImplicitTerminator)), "")
    found = [d.cls.definition for _, d in sorted(OPS_BY_NAME.items())]
    found = [d for d in found if any(isinstance(t, Terminator) and parent in t.parents for t in d.traits)]
    return tuple(d.cls for d in sorted(found, key=lambda d: d.name != implicit))
