"""Text form of Tile IR: the assembly-format mini language and the printer."""
from __future__ import annotations
