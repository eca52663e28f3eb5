"""The in-memory IR: values, operations, blocks, regions, functions, globals, modules.

Operations are instances of the op classes registered in ``tileiras.tile``; an op's
fields (operands, attributes, results, regions) are declared once there and exposed
here as plain attributes (``op.lhs``, ``op.rounding_mode``...).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Optional, Sequence

from ..record import field, record
from .attrs import ArrayAttr, DictAttr, OptimizationHintsAttr
from .types import FunctionType, Type
from .version import Version

if TYPE_CHECKING:  # pragma: no cover
    from ..tile.registry import OpDef
    from .debug import DebugAttr


class Value:
    """An SSA value: an operation result or a block argument."""

    __slots__ = ("type", "owner", "index")

    def __init__(self, type: Type, owner: "Operation | Block", index: int):
        self.type = type
        self.owner = owner
        self.index = index

    @property
    def is_block_argument(self) -> bool:
        return isinstance(self.owner, Block)

    def __repr__(self) -> str:
        kind = "arg" if self.is_block_argument else type(self.owner).__name__
        return f"<Value {kind}#{self.index}: {self.type}>"


class Operation:
    """Base class of every op.  ``definition`` is filled in by ``@tile_op``."""

    definition: ClassVar["OpDef"]
    __slots__ = ("operands", "segments", "attributes", "results", "regions", "loc", "parent")

    def __init__(self, operands: Sequence[Value] = (), attributes: Optional[dict[str, Any]] = None,
                 result_types: Sequence[Type] = (), regions: Sequence["Region"] = (),
                 segments: Optional[Sequence[int]] = None, loc: Optional["DebugAttr"] = None):
        self.operands: list[Value] = list(operands)
        self.segments: tuple[int, ...] = (tuple(segments) if segments is not None
                                          else self.definition.default_segments(len(self.operands)))
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.results: list[Value] = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.regions: list[Region] = list(regions)
        for r in self.regions:
            r.parent = self
        self.loc = loc
        self.parent: Optional[Block] = None

    @property
    def name(self) -> str:
        return self.definition.name

    def operand_group(self, index: int) -> list[Value]:
        """Operands of the ``index``-th declared operand field."""
        start = sum(self.segments[:index])
        return self.operands[start:start + self.segments[index]]

    def walk(self) -> Iterator["Operation"]:
        yield self
        for region in self.regions:
            for block in region.blocks:
                for op in block.ops:
                    yield from op.walk()

    def __repr__(self) -> str:
        return f"<{self.name} {len(self.operands)} operands, {len(self.results)} results>"


class Block:
    __slots__ = ("args", "ops", "parent")

    def __init__(self, arg_types: Sequence[Type] = ()):
        self.args: list[Value] = [Value(t, self, i) for i, t in enumerate(arg_types)]
        self.ops: list[Operation] = []
        self.parent: Optional[Region] = None

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.ops.append(op)
        return op


class Region:
    __slots__ = ("blocks", "parent")

    def __init__(self, blocks: Sequence[Block] = ()):
        self.blocks: list[Block] = list(blocks)
        for b in self.blocks:
            b.parent = self
        self.parent: Optional[Operation] = None


@record
class Function:
    name: str
    type: FunctionType
    body: Region
    is_entry: bool = False
    is_private: bool = False
    hints: Optional[OptimizationHintsAttr] = None
    arg_attrs: Optional[tuple[DictAttr, ...]] = None  # 13.5+: per-argument attribute dicts
    loc: Optional["DebugAttr"] = None
    #: 13.5+ (SIMT preview): the constant parameters of a bodiless extern declaration
    #: (``cuda_tile.preview$func``); None for a function with a body.
    const_params: Optional[ArrayAttr] = None

    @property
    def is_extern(self) -> bool:
        return self.const_params is not None

    @property
    def entry_block(self) -> Block:
        return self.body.blocks[0]

    def walk(self) -> Iterator[Operation]:
        for block in self.body.blocks:
            for op in block.ops:
                yield from op.walk()


@record
class Global:
    name: str
    type: Type
    data: bytes
    alignment: int = 0
    constant: bool = False  # 13.3+
    is_private: bool = False  # 13.3+
    #: Where the text parser found it, for diagnostics; the bytecode has no global locations.
    loc: Optional["DebugAttr"] = None


@record
class Module:
    version: Version
    functions: list[Function] = field(default_factory=list)
    globals: list[Global] = field(default_factory=list)
    tag: int = 0  # the header's u16 version tag
    #: Table orders seen when this module was read; the writer reuses them so
    #: that reading then writing a file reproduces it byte for byte.
    layout: Optional[Any] = None

    def function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(name)

    def walk(self) -> Iterator[Operation]:
        for f in self.functions:
            yield from f.walk()


