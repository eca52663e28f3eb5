"""Helpers for comparing our output with NVIDIA's tools."""
from __future__ import annotations

import difflib
import subprocess
from typing import Sequence


def run_tool(argv: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, timeout=timeout)


def text_diff(expected: str, actual: str, context: int = 2, limit: int = 40) -> str:
    """A short unified diff (expected = NVIDIA's output, actual = ours)."""
    lines = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                      "nvidia", "ours", n=context, lineterm=""))
    if len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more diff lines)"]
    return "\n".join(lines)
