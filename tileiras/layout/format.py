"""Compact text of a linear layout, for dumps and golden files."""
from __future__ import annotations

from .linear import LinearLayout


def format_layout(layout: LinearLayout) -> str:
    """``#linear<[32x64] reg=[(0,1),(2,0)] lane=[...] warp=[...]>``."""
    shape = "x".join(str(s) for s in layout.shape) or "scalar"
    parts = []
    for name, bases in layout.ins:
        parts.append(f"{name}=[" + ",".join("(" + ",".join(str(c) for c in b) + ")" for b in bases) + "]")
    return f"#linear<[{shape}] {' '.join(parts)}>"
