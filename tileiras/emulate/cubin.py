"""Read the PTX that NVIDIA's tileiras embeds in a cubin (``.nv_debug_ptx_txt``, written
by ptxas with ``--lineinfo``): the PTX lines, NUL-terminated."""
from __future__ import annotations

import struct
from typing import Optional


def elf_sections(data: bytes) -> dict[str, bytes]:
    """Section name -> contents of a little-endian ELF64 file."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not an ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = []
    for i in range(shnum):
        off = shoff + i * shentsize
        name, stype, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, off)
        headers.append((name, stype, offset, size))
    _, _, str_off, str_size = headers[shstrndx]
    names = data[str_off:str_off + str_size]
    out = {}
    for name, stype, offset, size in headers:
        label = names[name:names.index(b"\0", name)].decode()
        out[label] = b"" if stype == 8 else data[offset:offset + size]   # 8 = SHT_NOBITS
    return out


def ptx_from_cubin(data: bytes) -> Optional[str]:
    """The embedded PTX text, or None when the cubin was built without line info."""
    section = elf_sections(data).get(".nv_debug_ptx_txt")
    if section is None:
        return None
    return section.replace(b"\0", b"\n").decode(errors="replace")
