"""``--emit=tileas``: the TileAS decisions of a function as readable text."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import types as T
from ..ir.core import Block
from ..layout.format import format_layout
from ..layout.linear import LinearLayout
from ..text.names import NameTable

if TYPE_CHECKING:
    from .tileas import TileAS


def format_tileas(tas: TileAS) -> str:
    """``--emit=tileas``: every op with the layout of each tile it produces (layouts are
    numbered ``#L0``, ``#L1``... and listed first), the conversions of its operands, its
    shared-memory scratch and the chunked loops.  Values carry tileirdisasm's names."""
    fn = tas.aa.function
    names = NameTable(fn.body)
    aliases: dict[LinearLayout, str] = {}

    def alias(layout: LinearLayout) -> str:
        return aliases.setdefault(layout, f"#L{len(aliases)}")

    body: list[str] = []

    def emit(block: Block, depth: int) -> None:
        pad = "  " * depth
        for op in block.ops:
            results = ", ".join(names.ref(r) for r in op.results)
            args = ", ".join(names.ref(v) for v in op.operands if not isinstance(v.type, T.TokenType))
            line = f"{pad}{results + ' = ' if results else ''}{op.name}({args})"
            tiles = [f"{r.type} {alias(tas.layouts[r])}" for r in op.results if r in tas.layouts]
            if tiles:
                line += " : " + ", ".join(tiles)
            notes = [f"operand {i} -> {alias(lay)}{' recomputed' if (cop, i) in tas.recomputed else ''}"
                     for (cop, i), lay in tas.converts.items() if cop is op]
            if op in tas.scratch:
                notes.append(f"smem {tas.scratch[op]}B")
            group = tas.chunked.get(op)
            if group is not None and op is group.anchor:
                notes.append(f"chunked loop x{group.trips} over {alias(group.chunk_layout)}")
            elif group is not None:
                notes.append("in chunked loop")
            body.append(line + (f"  // {'; '.join(notes)}" if notes else ""))
            for region in op.regions:
                for blk in region.blocks:
                    body.append(f"{pad}  ^({', '.join(names.ref(a) for a in blk.args)}):")
                    emit(blk, depth + 2)

    emit(fn.entry_block, 1)
    header = (f"tileas.func @{fn.name} warps={tas.num_warps}"
              + (f"+{tas.extra_warps}" if tas.extra_warps else "") + f" smem={tas.smem_bytes}B {{")
    layouts = [f"  {name} = {format_layout(layout)}" for layout, name in aliases.items()]
    return "\n".join([header, *layouts, *body, "}"]) + "\n"
