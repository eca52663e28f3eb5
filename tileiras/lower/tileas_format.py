"""``--emit=tileas``: the TileAS decisions of a function as text that ``tileas_parse`` reads back.

Every decision a TileAS pass records is in the text, once, where it applies::

    tileas.func @gemm warps=4 smem=41984B align=1024 tma_end=0 {   (tmem=COLUMNS@SLOT: tcgen05's)
      #L1 = #linear<[64x64] reg=[...] lane=[...] warp=[...]>        layouts, numbered
      #map0 = #tileas.tensor_map<...>                               hidden tensor maps, in order
      #dmap0 = #tileas.tensor_map<...>                              maps the kernel builds, in order
      tileas.mma_shape [64, 64] #L1                                 per tile shape: accumulators
      tileas.shape_access [64, 32] #tileas.run<dim=1, elements=8>   and their accesses' runs
      tileas.buffer @s52 scratch offset=0 bytes=32800 align=16 users=[@52]   shared memory
      ^(%arg0 #L0, ...):                                            entry arguments
      %tile, %tok = load_view_tko(...) : tile<64x32xf16> #L2, token {vector = 8, tma = ...}
      %cvt0 = tileas.convert_layout(%tile) : #L2 -> #L4             a change of layout
      @52: %4 = mmaf(%cvt0, ...) : tile<64x64xf32> #L1 {mma = #tileas.mma<...>}

Ops appear in walk order with tileirdisasm's value names; an op a record refers to (a
chunk's anchor, a pipelined loop) is labelled ``@N:`` with its walk index and referred to
as ``@N``.  Records print as ``#tileas.<kind><field = value, ...>`` (fields at their
default left out), tuples as ``[...]``, dicts as ``{key: value}``.  ``tileas.buffer``
lines list ``shared_buffers`` (derived from the tables; the parser checks them).
"""
from __future__ import annotations

import json
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..ir import types as T
from ..ir.core import Block, Operation, Value
from ..layout.format import format_layout
from ..layout.linear import LinearLayout
from ..layout.shared import Padding, Swizzle
from ..layout.tensor_core import StmatrixForm
from ..record import MISSING
from ..text.names import NameTable
from .attention_pipeline import AttentionPlan, RingTile
from .attention_tma import AttentionRingPlan, RingBox, SyncConsumers
from .chunks import ChunkGroup
from .forwarding import Forward
from .mma_forms import LandedOperand, MmaRingStaging, MmaSwizzle, OperandStaging, TensorCoreMma, WgmmaStaging
from .shared_buffers import Buffer, shared_buffers
from .gathered_copy import AddressSlice
from .software_pipeline import PipelinePlan, RingScales, SecondB
from .stream_pipeline import StreamPlan, StreamTile, UnrolledLoop
from .tma_stream import TmaStream
from .tma import MapField, TensorMapSpec, TmaPlan
from .tma_ring import RingPlan, RingSecond
from .vectorize import Run

if TYPE_CHECKING:
    from .tileas import TileAS

#: the records the text holds, by the kind they print as (``#tileas.<kind><...>``)
RECORDS: dict[str, type] = {
    "mma": TensorCoreMma, "wgmma_staging": WgmmaStaging, "operand": OperandStaging, "padding": Padding,
    "mma_swizzle": MmaSwizzle, "tma": TmaPlan, "tensor_map": TensorMapSpec, "map_field": MapField,
    "run": Run, "pipeline": PipelinePlan, "ring": RingPlan, "chunk": ChunkGroup,
    "attention": AttentionPlan, "attention_tile": RingTile, "attention_ring": AttentionRingPlan,
    "attention_box": RingBox, "stmatrix": StmatrixForm, "forward": Forward, "stream": StreamPlan,
    "stream_tile": StreamTile, "tma_stream": TmaStream, "mma_ring_staging": MmaRingStaging, "landed": LandedOperand,
    "attention_sync": SyncConsumers, "ring_scales": RingScales, "second_b": SecondB, "unrolled": UnrolledLoop,
    "address_slice": AddressSlice, "ring_second": RingSecond,
}
KINDS = {cls: kind for kind, cls in RECORDS.items()}
ENUMS: dict[str, type[Enum]] = {"Swizzle": Swizzle}
#: per-op tables, in the order their attributes print: (attribute, table)
OP_TABLES = (("mma", "tensor_cores"), ("wgmma_staging", "wgmma_staging"), ("access", "access_allowed"),
             ("vector", "vectors"), ("tma", "tma"), ("pipeline", "pipelines"), ("picks", "picks"),
             ("pick_source", "pick_sources"), ("forward", "forwarded"), ("forward_refused", "forward_refused"),
             ("tmem", "tmem_columns"), ("emit", "emission"), ("warp_owned", "warp_owned"),
             ("indices", "index_slices"))
CONVERT = "tileas.convert_layout"


class Printer:
    """Names values, layouts and ops while one TileAS is printed."""

    def __init__(self, tas: TileAS):
        self.tas = tas
        self.names = NameTable(tas.aa.function.body)
        self.index = {op: i for i, op in enumerate(tas.aa.function.walk())}
        self.aliases: dict[LinearLayout, str] = {}
        self.labelled: set[Operation] = set()

    def layout(self, layout: LinearLayout) -> str:
        return self.aliases.setdefault(layout, f"#L{len(self.aliases)}")

    def op_ref(self, op: Operation) -> str:
        self.labelled.add(op)
        return f"@{self.index[op]}"

    def value(self, x: Any) -> str:
        """One attribute value (see the module docstring for the forms)."""
        if isinstance(x, bool):
            return "true" if x else "false"
        if x is None:
            return "none"
        if isinstance(x, int):
            return str(x)
        if isinstance(x, str):
            return json.dumps(x)
        if isinstance(x, LinearLayout):
            return self.layout(x)
        if isinstance(x, Enum):
            return f"{type(x).__name__}.{x.name}"
        if isinstance(x, Operation):
            return self.op_ref(x)
        if isinstance(x, Value):
            return self.names.ref(x)
        if isinstance(x, (tuple, list)):
            return "[" + ", ".join(self.value(v) for v in x) + "]"
        if isinstance(x, dict):
            return "{" + ", ".join(f"{self.value(k)}: {self.value(v)}" for k, v in x.items()) + "}"
        return self.record(x)

    def record(self, x: Any) -> str:
        fields = []
        for f in type(x).__record_fields__:
            v = getattr(x, f.name)
            default = f.default_factory() if f.default_factory is not MISSING else f.default
            if default is MISSING or v != default:
                fields.append(f"{f.name} = {self.value(v)}")
        return f"#tileas.{KINDS[type(x)]}<{', '.join(fields)}>"


def format_tileas(tas: TileAS) -> str:
    """``--emit=tileas``: the function's ops with every TileAS decision (module docstring)."""
    p = Printer(tas)
    fn = tas.aa.function
    body: list[tuple[Operation | None, str]] = []
    counter = [0]

    def emit(block: Block, depth: int) -> None:
        pad = "  " * depth
        body.append((None, f"{pad}^({block_args(p, block)}):"))
        for op in block.ops:
            args = []
            for i, v in enumerate(op.operands):
                if isinstance(v.type, T.TokenType):
                    continue
                if (op, i) in tas.converts:
                    name = f"%cvt{counter[0]}"
                    counter[0] += 1
                    body.append((None, pad + convert_line(p, op, i, name)))
                    args.append(name)
                else:
                    args.append(p.names.ref(v))
            body.append((op, pad + op_line(p, op, args)))
            for region in op.regions:
                for blk in region.blocks:
                    emit(blk, depth + 1)

    emit(fn.entry_block, 1)
    head = [f"  #map{i} = {p.value(spec)}" for i, spec in enumerate(tas.tensor_maps)]
    head += [f"  #dmap{i} = {p.value(spec)}" for i, spec in enumerate(tas.device_maps)]
    head += [f"  tileas.mma_shape {p.value(shape)} {p.value(tas.mma_layouts.get(shape))}"
             for shape in sorted(tas.mma_shapes)]
    head += [f"  tileas.shape_access {p.value(shape)} {p.value(run)}" for shape, run in tas.shape_access.items()]
    head += [f"  {buffer_line(p, b)}" for b in shared_buffers(tas)]
    lines = [(f"{text[:len(text) - len(text.lstrip())]}@{p.index[op]}: {text.lstrip()}"
              if op in p.labelled else text) for op, text in body]
    header = (f"tileas.func @{fn.name} warps={tas.num_warps}" + (f"+{tas.extra_warps}" if tas.extra_warps else "")
              + (f" cluster_split={tas.cluster_split}" if tas.cluster_split else "")
              + f" smem={tas.smem_bytes}B align={tas.smem_align} tma_end={tas.tma_end}"
              + (f" tmem={tas.tmem_alloc}@{tas.tmem_slot}" if tas.tmem_alloc else "") + " {")
    layouts = [f"  {name} = {format_layout(layout)}" for layout, name in p.aliases.items()]
    return "\n".join([header, *layouts, *head, *lines, "}"]) + "\n"


def block_args(p: Printer, block: Block) -> str:
    """A block's arguments, each with its layout (and byte-pair dim) where it has them."""
    return ", ".join(p.names.ref(a) + value_notes(p, a) for a in block.args)


def value_notes(p: Printer, v: Value) -> str:
    layout = p.tas.layouts.get(v)
    pair = p.tas.pairs.get(v)
    return (f" {p.layout(layout)}" if layout is not None else "") + (f" pairs={pair}" if pair is not None else "")


def op_line(p: Printer, op: Operation, args: list[str]) -> str:
    """``results = name(args) : type #L, ... {attributes}``."""
    tas = p.tas
    results = ", ".join(p.names.ref(r) for r in op.results)
    line = f"{results + ' = ' if results else ''}{op.name}({', '.join(args)})"
    if op.results:
        line += " : " + ", ".join(f"{r.type}{value_notes(p, r)}" for r in op.results)
    attrs = [f"{name} = {p.value(getattr(tas, table)[op])}" for name, table in OP_TABLES if op in getattr(tas, table)]
    if op in tas.pipelined:
        attrs.append(f"pipelined = {p.op_ref(tas.pipelined[op].loop)}")
    group = tas.chunked.get(op)
    if group is not None:
        attrs.append(f"chunk = {p.value(group) if op is group.anchor else p.op_ref(group.anchor)}")
    return line + (f" {{{', '.join(attrs)}}}" if attrs else "")


def convert_line(p: Printer, op: Operation, i: int, name: str) -> str:
    """Operand ``i`` of ``op`` changing layout before ``op`` reads it: through shared
    memory, or ``recompute``d in the new layout (the layouts on the way, and the
    broadcasts whose sources are converted there)."""
    tas = p.tas
    source = tas.layouts.get(op.operands[i])
    line = (f"{name} = {CONVERT}({p.names.ref(op.operands[i])}) : "
            f"{p.value(source)} -> {p.layout(tas.converts[op, i])}")
    attrs = []
    if (op, i) in tas.recomputed:
        attrs.append(f"recompute = {p.value(tas.recomputed[op, i])}")
    if (op, i) in tas.recompute_converts:
        moved = tas.recompute_converts[op, i]
        attrs.append("recompute_converts = {" + ", ".join(f"[{p.op_ref(c)}, {j}]: {p.layout(lay)}"
                                                          for (c, j), lay in moved.items()) + "}")
    return line + (f" {{{', '.join(attrs)}}}" if attrs else "")


def buffer_line(p: Printer, b: Buffer) -> str:
    """``tileas.buffer @name kind offset=.. bytes=.. align=.. [in=@parent] [stages=..]
    [swizzle=..] [layout=#L] [live=kernel] users=[...]``."""
    parts = [f"tileas.buffer @{b.name} {b.kind} offset={b.offset} bytes={b.nbytes} align={b.align}"]
    if b.parent:
        parts.append(f"in=@{b.parent}")
    if b.stages:
        parts.append(f"stages={b.stages}")
    if b.swizzle:
        parts.append(f"swizzle={b.swizzle}")
    if b.layout is not None:
        parts.append(f"layout={p.layout(b.layout)}")
    if b.whole_kernel:
        parts.append("live=kernel")
    parts.append(f"users={p.value(b.users)}")
    return " ".join(parts)
