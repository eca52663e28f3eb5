"""MLIR's string escaping.

Apart from the attribute printer (``text.attributes``) because the verifier quotes names
in its messages, and a compile should not import the printer's float formatting
(``fractions``, ``decimal``: 2 ms of a cold start) for that.
"""
from __future__ import annotations


def escape_string(text: str | bytes) -> str:
    """MLIR's printEscapedString, quotes included."""
    data = text.encode() if isinstance(text, str) else text
    out = ['"']
    for b in data:
        ch = chr(b)
        if ch == "\\":
            out.append("\\\\")
        elif 0x20 <= b < 0x7F and ch != '"':
            out.append(ch)
        else:
            out.append("\\" + format(b, "02X"))
    out.append('"')
    return "".join(out)
