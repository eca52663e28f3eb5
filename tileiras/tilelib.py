"""Tile libraries of NVIDIA's SIMT preview: ``-l LIB`` and ``--preview-create-tile-lib``.

What NVIDIA's tileiras 13.5 does (measured; the preview is undocumented):

* A tile library is a relocatable host object (ELF, or COFF for ``--host-os=windows``)
  without symbols whose sections hold files verbatim: ``.nvtlifc`` the *interface*
  (Tile IR bytecode) and ``.nvtl.0``, ``.nvtl.1``... the *implementation* files in
  command-line order.  ``tileiras --preview-create-tile-lib --preview-interface=IFC
  --preview-implementation=IMPL... [-o elf.o]`` writes one (``write_container``).  It
  takes an interface of extern function declarations only, and a Tile IR bytecode
  implementation with at most one pre-compiled code file beside it (an
  implementation-provider shared library instead is not supported here).
* ``-l LIB`` (after the input was read and verified and ``--gpu-name`` checked, before
  the architecture checks) needs ``--preview=simt``.  A library without an
  implementation section is an implementation provider: NVIDIA ``dlopen``s it, and so
  does this module to give the loader's own message; providers themselves are not
  supported.  A static library's interface module is read, verified and spliced in
  front of the input module (each ``-l`` in turn); the whole is verified again and
  compiled, so entries and globals of an interface become part of the output.
  Implementation sections are not read: what would read them, calls to extern
  functions, needs preview attributes (``cuda_tile.preview$access`` on every argument
  of an extern declaration) whose bytecode encoding is not public, so no interface
  NVIDIA's own ``--preview-create-tile-lib`` accepts can contain code.
"""
from __future__ import annotations

import os
import struct
from typing import Optional, Sequence

from . import hostio
from .errors import CompileError, OptionError
from .ir.core import Module
from .tile.codes import MAGIC

INTERFACE = ".nvtlifc"
IMPLEMENTATION = ".nvtl."
DEFAULT_OUTPUT = "elf.o"
PROVIDER_SYMBOL = "tileir_create_linkage_provider"

SPLICE_FAILED = "error: failed to read interface and splice it into the module"
NOT_VERIFIED = "error: verification failed for deserialized cuda_tile::ModuleOp"
NOT_EXTERN = ("error: 'cuda_tile.preview$func' op must be extern when serialized to bytecode",
              "error: deserialized module does not conform to bytecode format invariants")
TWO_OPTIONS = ("implementation files must be one of two options: (1) a Tile IR bytecode file describing the "
               "implementation (with extern_impl) plus the pre-compiled code that defines it (LTOIR, cubin, or "
               "fatbin); or (2) an implementation-provider shared library (.so/.dll)")


class _Lines:
    """An error of several lines, printed as they are (mixed into an error class)."""

    def __init__(self, *lines: str):
        super().__init__("\n".join(lines))  # type: ignore[call-arg]
        self.lines = lines

    def __str__(self) -> str:
        return "\n".join(self.lines)


class LibraryError(_Lines, CompileError):
    """A ``-l`` library NVIDIA's tool refuses (exit code 5)."""


class CreateError(_Lines, OptionError):
    """``--preview-create-tile-lib`` refused its inputs (exit code 2)."""


# -- the container -------------------------------------------------------------------------
ELF_MACHINES = {"x86_64": 62, "aarch64": 183}
COFF_MACHINES = {"x86_64": 0x8664, "aarch64": 0xAA64}


def write_container(interface: bytes, implementations: Sequence[bytes], host_arch: str = "x86_64",
                    host_os: str = "linux") -> bytes:
    """The library object, byte for byte as NVIDIA's tool writes it."""
    sections = [(INTERFACE, interface)] + [(f"{IMPLEMENTATION}{i}", data) for i, data in enumerate(implementations)]
    if host_os == "windows":
        return _coff(sections, COFF_MACHINES[host_arch])
    return _elf(sections, ELF_MACHINES[host_arch])


def _elf(sections: list[tuple[str, bytes]], machine: int) -> bytes:
    """ELF64 relocatable: the empty .strtab, .shstrtab, then the sections' data, all
    unaligned; the section headers at the next multiple of 8.  The section names are in
    LLVM's string table order (by their reversed spelling, descending)."""
    names = sorted([".shstrtab", ".strtab"] + [name for name, _ in sections], key=lambda n: n[::-1], reverse=True)
    shstrtab = b"\0" + b"".join(n.encode() + b"\0" for n in names)

    def name_at(name: str) -> int:
        return shstrtab.index(b"\0" + name.encode() + b"\0") + 1

    body = bytearray(b"\0") + shstrtab
    headers = [bytes(64), _elf_section(name_at(".strtab"), 3, 64, 1), _elf_section(name_at(".shstrtab"), 3, 65,
                                                                                   len(shstrtab))]
    for name, data in sections:
        headers.append(_elf_section(name_at(name), 1, 64 + len(body), len(data)))
        body += data
    shoff = 64 + len(body) + (-(64 + len(body)) % 8)
    header = (b"\x7fELF\x02\x01\x01" + bytes(9)
              + struct.pack("<HHIQQQIHHHHHH", 1, machine, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(headers), 2))
    return header + bytes(body) + bytes(shoff - 64 - len(body)) + b"".join(headers)


def _elf_section(name: int, kind: int, offset: int, size: int) -> bytes:
    return struct.pack("<IIQQQQIIQQ", name, kind, 0, 0, offset, size, 0, 0, 1, 0)


def _coff(sections: list[tuple[str, bytes]], machine: int) -> bytes:
    """COFF object: section headers (readable data), the data, an empty symbol table."""
    start = 20 + 40 * len(sections)
    headers, offset, address = b"", start, 0
    for name, data in sections:
        headers += struct.pack("<8sIIIIIIHHI", name.encode(), len(data), address, len(data), offset, 0, 0, 0, 0,
                               0x40000000)
        offset += len(data)
        address += len(data)
    header = struct.pack("<HHIIIHH", machine, len(sections), 0, offset, 0, 0, 0)
    return header + headers + b"".join(data for _, data in sections) + struct.pack("<I", 4)


def object_sections(data: bytes) -> Optional[dict[str, bytes]]:
    """Section name -> contents of an ELF64 or COFF object; None when ``data`` is neither."""
    if data[:4] == b"\x7fELF" and len(data) >= 64 and data[4] == 2:
        return _elf_sections(data)
    if len(data) >= 20 and struct.unpack_from("<H", data)[0] in COFF_MACHINES.values():
        return _coff_sections(data)
    return None


def _elf_sections(data: bytes) -> Optional[dict[str, bytes]]:
    shoff, = struct.unpack_from("<Q", data, 40)
    entsize, count, names_index = struct.unpack_from("<HHH", data, 58)
    try:
        headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize) for i in range(count)]
        names = headers[names_index]
    except (struct.error, IndexError):
        return None
    strtab = data[names[4]:names[4] + names[5]]
    out = {}
    for h in headers[1:]:
        name = strtab[h[0]:strtab.find(b"\0", h[0])].decode("latin-1")
        out[name] = data[h[4]:h[4] + h[5]] if h[1] != 8 else b""  # SHT_NOBITS holds no data
    return out


def _coff_sections(data: bytes) -> Optional[dict[str, bytes]]:
    _, count, _, _, _, optional, _ = struct.unpack_from("<HHIIIHH", data)
    out = {}
    try:
        for i in range(count):
            name, _, _, size, offset, *_ = struct.unpack_from("<8sIIIIIIHHI", data, 20 + optional + 40 * i)
            out[name.rstrip(b"\0").decode("latin-1")] = data[offset:offset + size]
    except struct.error:
        return None
    return out


def is_shared_library(data: bytes) -> bool:
    """An ELF shared object (``ET_DYN``), what NVIDIA takes for an implementation provider."""
    return data[:4] == b"\x7fELF" and len(data) >= 18 and struct.unpack_from("<H", data, 16)[0] == 3


# -- creating ------------------------------------------------------------------------------
def _read(path: str, what: str) -> bytes:
    try:
        return hostio.read_file(path)
    except OSError as e:
        raise CreateError(f"error: unable to read {what} file '{path}': {os.strerror(e.errno or 0)}") from None


def create(interface_path: Optional[str], implementation_paths: Sequence[str], host_arch: str = "x86_64",
           host_os: str = "linux") -> bytes:
    """``--preview-create-tile-lib``: check the files as NVIDIA's tool does, in its
    order, and return the library."""
    interface = _read(interface_path or "", "interface")
    if not interface.startswith(MAGIC):
        raise CreateError("error: must provide tile IR bytecode for tile lib interface file")
    module = _read_module(interface, "error: could not read tile library interface as Tile IR bytecode")
    for kind in ["cuda_tile.global" for _ in module.globals] + ["cuda_tile.entry" for fn in module.functions
                                                                 if not fn.is_extern]:
        raise CreateError("error: tile library interface may only contain extern cuda_tile.experimental$func "
                          f"declarations, found '{kind}'")
    if not implementation_paths:
        raise CreateError("error: interface-only tile libraries are not allowed; you must provide an implementation "
                          "either as a dynamic library (implementation provider), or as static code files; "
                          "providing only an interface file is not allowed")
    files = [_read(p, "implementation") for p in implementation_paths]
    if any(is_shared_library(f) for f in files):
        if len(files) > 1:
            raise CreateError("error: an implementation-provider shared library must be the only implementation; "
                              "it supplies both the description of the implementation and the code")
        raise CreateError("error: implementation-provider shared libraries are not supported by this tileiras")
    if len(files) > 2:
        raise CreateError(f"error: {TWO_OPTIONS}")
    bytecode = [f for f in files if f.startswith(MAGIC)]
    if len(bytecode) > 1:
        raise CreateError("error: must provide exactly one tile bytecode file")
    if not bytecode:
        raise CreateError("error: must provide either an implementation-provider shared library or a static "
                          "implementation catalog with the static implementation artifacts")
    _read_module(bytecode[0], "error: could not read bytecode buffer", "error: provided tile bytecode could not be read")
    return write_container(interface, files, host_arch, host_os)


def _read_module(data: bytes, *trailer: str) -> Module:
    """Bytecode read and verified as NVIDIA reads a library's modules (the SIMT preview
    on); its messages, then ``trailer``."""
    from .errors import BytecodeError
    from .reader import read_bytecode
    from .verify import VerifyError, check_module

    error = CreateError if trailer[0] != SPLICE_FAILED else LibraryError
    try:
        module = read_bytecode(data, filename=None, preview=("simt",))
    except BytecodeError as err:
        raise error(*([str(err)] if data.startswith(MAGIC) else []), *trailer) from None
    try:
        check_module(module)
    except VerifyError as err:
        raise error(str(err), NOT_VERIFIED, *trailer) from None
    if any(not fn.is_entry and not fn.is_extern for fn in module.functions):
        raise error(*NOT_EXTERN, *trailer)
    return module


# -- loading -------------------------------------------------------------------------------
def link(module: Module, paths: Sequence[str], preview: Sequence[str]) -> None:
    """``-l``: splice every static library's interface in front of ``module``, in turn."""
    if not paths:
        return
    if "simt" not in preview:
        raise LibraryError("error: libraries require the 'simt' preview feature")
    for path in paths:
        sections = _open(path)
        if not any(name.startswith(IMPLEMENTATION) for name in sections):
            _load_provider(path)
        interface = sections.get(INTERFACE)
        if interface is not None:
            _splice(module, _read_module(interface, SPLICE_FAILED))
    from .verify import VerifyError, check_module

    try:
        check_module(module)
    except VerifyError as err:
        raise LibraryError(str(err), NOT_VERIFIED) from None


def _open(path: str) -> dict[str, bytes]:
    try:
        data = hostio.read_file(path)
    except OSError as e:
        raise LibraryError(f"error: failed to open tile library: {os.strerror(e.errno or 0)}") from None
    sections = object_sections(data)
    if sections is None:
        raise LibraryError("error: failed to open tile library: The file was not recognized as a valid object file")
    return sections


def _load_provider(path: str) -> None:
    """NVIDIA ``dlopen``s a library without implementation sections as an implementation
    provider; its first line is the loader's own (dlerror) message."""
    import ctypes

    try:
        provider = ctypes.CDLL(path, mode=os.RTLD_LAZY | os.RTLD_LOCAL)
    except OSError as err:
        first = f"Failed to load provider {path}: {err}"
    else:
        first = (f"Provider {path}: implementation providers are not supported by this tileiras"
                 if hasattr(provider, PROVIDER_SYMBOL) else f"Provider {path} does not export {PROVIDER_SYMBOL}")
    raise LibraryError(first, f"error: failed to load linkage provider: {path}")


def _splice(module: Module, interface: Module) -> None:
    """The interface's globals and functions go in front of the module's (NVIDIA's order:
    the last ``-l`` first)."""
    module.globals[:0] = interface.globals
    module.functions[:0] = interface.functions
