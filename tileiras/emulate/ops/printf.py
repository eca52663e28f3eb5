"""CUDA device printf: the format string plus the packed argument buffer.

vprintf(fmt, buf): ``buf`` holds the arguments in order, each aligned to its own size;
float arguments are promoted to double, integers are 4 bytes unless the conversion has an
``l``/``ll``/``z``/``j`` length, pointers and strings are 8 bytes.
"""
from __future__ import annotations

import re
import struct

import numpy as np

from ..memory import LOCAL_GENERIC_BASE, SHARED_GENERIC_BASE, WINDOW_SIZE

_SPEC = re.compile(rb"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?(hh|h|ll|l|j|z|t|L)?([diouxXeEfFgGaAcspn%])")


def read_bytes(m, tid: int, address: int, size: int) -> bytes:
    """Bytes at a generic address as seen by thread ``tid``."""
    if SHARED_GENERIC_BASE <= address < SHARED_GENERIC_BASE + WINDOW_SIZE:
        off = address - SHARED_GENERIC_BASE
        base = int(m.cta_of[tid]) * m.smem_size
        return m.shared[base + off: base + off + size].tobytes()
    if LOCAL_GENERIC_BASE <= address < LOCAL_GENERIC_BASE + WINDOW_SIZE:
        off = address - LOCAL_GENERIC_BASE
        base = tid * m.local_size
        return m.local[base + off: base + off + size].tobytes()
    return m.gmem.read(address, size)


def read_c_string(m, tid: int, address: int) -> bytes:
    if address == 0:
        return b"(null)"
    if SHARED_GENERIC_BASE <= address or LOCAL_GENERIC_BASE <= address:
        return read_bytes(m, tid, address, 4096).split(b"\0", 1)[0]
    return m.gmem.read_string(address)


def format_printf(m, tid: int, fmt: bytes, buf: int) -> str:
    out = []
    pos = 0
    offset = 0

    def take(size: int) -> bytes:
        nonlocal offset
        offset = -(-offset // size) * size
        raw = read_bytes(m, tid, buf + offset, size)
        offset += size
        return raw

    for match in _SPEC.finditer(fmt):
        out.append(fmt[pos:match.start()].decode(errors="replace"))
        pos = match.end()
        flags, width, prec, length, conv = match.groups()
        conv = conv.decode()
        if conv == "%":
            out.append("%")
            continue
        if width == b"*":
            width = str(struct.unpack("<i", take(4))[0]).encode()
        if prec == b"*":
            prec = str(struct.unpack("<i", take(4))[0]).encode()
        spec = "%" + flags.decode() + (width or b"").decode() + (("." + prec.decode()) if prec is not None else "")
        if conv in "eEfFgGaA":
            value = struct.unpack("<d", take(8))[0]
            out.append(format_float(spec, conv, value))
        elif conv == "s":
            out.append((spec + "s") % read_c_string(m, tid, struct.unpack("<Q", take(8))[0]).decode(errors="replace"))
        elif conv == "p":
            out.append("0x%x" % struct.unpack("<Q", take(8))[0])
        elif conv == "c":
            out.append((spec + "c") % chr(struct.unpack("<i", take(4))[0] & 0xFF))
        elif conv == "n":
            take(8)
        else:
            size = 8 if length in (b"l", b"ll", b"j", b"z", b"t") else 4
            raw = take(size)
            signed = conv in "di"
            value = int.from_bytes(raw, "little", signed=signed)
            if length == b"h":
                value = np.int16(value & 0xFFFF).item() if signed else value & 0xFFFF
            elif length == b"hh":
                value = np.int8(value & 0xFF).item() if signed else value & 0xFF
            out.append((spec + {"d": "d", "i": "d", "u": "d"}.get(conv, conv)) % value)
    out.append(fmt[pos:].decode(errors="replace"))
    return "".join(out)


def format_float(spec: str, conv: str, value: float) -> str:
    if value != value:
        text = "nan"
    elif value in (float("inf"), float("-inf")):
        text = "inf" if value > 0 else "-inf"
    else:
        if conv in "aA":
            return value.hex()
        return (spec + conv) % value
    if conv.isupper():
        text = text.upper()
    width_spec = spec[1:].split(".")[0].lstrip("-+ #0")
    return text.rjust(int(width_spec)) if width_spec.isdigit() else text
