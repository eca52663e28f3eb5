"""Run NVIDIA's ptxas exactly as the real tileiras does, and read what it reports.

The real tool writes the PTX and the host object to temporary files and runs

    ptxas -arch <sm_XXa|sm_8x> <k.ptx> -o <k.bin> --opt-level N --enable-extended-smem=true
          --nv-host=<host.o> -uumn [-sanitize=memcheck -g-tmem-access-check]

then copies ``k.bin`` to the output unchanged (``--nv-host`` is left out for a module
without functions).  ``invoke_ptxas`` does the same in a temporary directory and returns the
cubin with per-kernel statistics read from it; ``-v`` is only added on request because
ptxas records it in the cubin's ``.note.nv.tkinfo``.  ``build_cubin`` is the whole back end:
LLVM's PTX and the kernels' ``KernelInfo`` in, the real tool's cubin out.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from ..errors import CompileError
from ..knobs import knobs
from ..record import field, record
from ..tools import find_ptxas
from .abi import KernelInfo, ptx_target
from .host import HostTarget, build_host_object
from .ptx import finalize_ptx

COMPILE_FAILED = "failed to compile Tile IR program"
SANITIZE_FLAGS = {"memcheck": ("-sanitize=memcheck", "-g-tmem-access-check")}


class PtxasError(CompileError):
    """ptxas failed (or is missing).  Prints as the real tool's last line; ``log`` holds what
    ptxas said and ``repro_cmd`` the command to run it again by hand.  With TILEIRAS_DEBUG=1
    both are printed as well."""

    def __init__(self, log: str, repro_cmd: str, returncode: Optional[int] = None):
        super().__init__(COMPILE_FAILED)
        self.log = log
        self.repro_cmd = repro_cmd
        self.returncode = returncode

    def __str__(self) -> str:
        final = f"error: {COMPILE_FAILED}"
        if not knobs.debug:
            return final
        return f"{self.log.rstrip()}\nptxas command: {self.repro_cmd}\n{final}"


@record(frozen=True)
class KernelStats:
    """What ptxas reports for one kernel (``spill_*`` and ``barriers`` only with ``-v``)."""

    registers: int = 0
    shared_memory: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    barriers: int = 0


@record(frozen=True)
class PtxasResult:
    cubin: bytes
    log: str
    command: tuple[str, ...]
    stats: dict[str, KernelStats] = field(default_factory=dict)


def ptxas_command(ptxas: str, ptx_path: str, out_path: str, gpu_name: str, opt_level: int,
                  host_object_path: Optional[str] = None, sanitize: Optional[str] = None,
                  verbose: bool = False) -> list[str]:
    """The argv of the real tool's ptxas run (plus ``-v`` when ``verbose``)."""
    argv = [ptxas, "-arch", ptx_target(gpu_name), ptx_path, "-o", out_path,
            "--opt-level", str(opt_level), "--enable-extended-smem=true"]
    if host_object_path is not None:
        argv.append(f"--nv-host={host_object_path}")
    argv.append("-uumn")
    if sanitize is not None:
        argv += SANITIZE_FLAGS[sanitize]
    if verbose:
        argv.append("-v")
    return argv


def invoke_ptxas(ptx: str, gpu_name: str, opt_level: int = 3, host_object: Optional[bytes] = None,
                 *, sanitize: Optional[str] = None, verbose: bool = False,
                 ptxas: Optional[str] = None) -> PtxasResult:
    """Assemble ``ptx`` for ``gpu_name`` into a cubin; ``host_object`` becomes ``.nv.host``."""
    ptxas = ptxas or find_ptxas()
    if ptxas is None:
        raise PtxasError("ptxas not found: install nvidia-cuda-nvcc, put ptxas on PATH or set "
                         "CUDA_HOME", "ptxas")
    tmp = _make_temporary_folder()
    ok = False
    try:
        ptx_path, out_path, host_path = tmp / "kernels.ptx", tmp / "kernels.bin", tmp / "host.o"
        argv = ptxas_command(ptxas, str(ptx_path), str(out_path), gpu_name, opt_level,
                             str(host_path) if host_object is not None else None, sanitize, verbose)
        try:
            ptx_path.write_text(ptx)
            if host_object is not None:
                host_path.write_bytes(host_object)
        except OSError as err:
            raise CompileError(f"cannot write ptxas's input files in '{tmp.parent}': "
                               f"{err.strerror or err}") from None
        returncode, log = _run_ptxas(argv)
        if returncode != 0 or not out_path.is_file():
            raise PtxasError(log, shlex.join(argv), returncode)
        cubin = out_path.read_bytes()
        ok = True
    finally:
        if ok or not knobs.debug:  # keep the files of a failed run for the repro command
            shutil.rmtree(tmp, ignore_errors=True)
    stats = stats_from_cubin(cubin)
    if verbose:
        stats = merge_verbose_stats(stats, parse_verbose_log(log))
    return PtxasResult(cubin, log, tuple(argv), stats)


def _run_ptxas(argv: Sequence[str]) -> tuple[int, str]:
    """ptxas's exit status and what it printed.  It runs in a process group of its own, so
    that if the compile is interrupted (a signal, a served command's client going away)
    ptxas and anything a wrapper script started are killed together, never left behind."""
    from ..launch import held_interrupts

    proc = None
    try:
        with held_interrupts():         # a signal inside Popen is raised once ``proc`` is known
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
        log, _ = proc.communicate()
    except OSError as err:
        if proc is None:
            raise PtxasError(f"cannot run ptxas: {err}", shlex.join(argv)) from None
        _kill_group(proc)
        raise
    except BaseException:
        if proc is not None:
            _kill_group(proc)
        raise
    finally:
        if proc is not None and proc.stdout:
            proc.stdout.close()
    return proc.returncode, log


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill ptxas and whatever a wrapper of it started (its own process group), and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()


def run_ptxas(ptx: str, gpu_name: str, opt_level: int = 3, host_object: Optional[bytes] = None,
              **kwargs) -> bytes:
    """``invoke_ptxas`` for callers that only want the cubin."""
    return invoke_ptxas(ptx, gpu_name, opt_level, host_object, **kwargs).cubin


def build_cubin(ptx: str, kernels: Sequence[KernelInfo], gpu_name: str, opt_level: int = 3, *,
                host: HostTarget = HostTarget(), sanitize: Optional[str] = None,
                verbose: bool = False) -> PtxasResult:
    """LLVM's PTX for ``kernels`` to the cubin the real tool makes: ``finalize_ptx``, the
    host object (none for a module without kernels), then ptxas."""
    host_object = build_host_object(kernels, host) if kernels else None
    return invoke_ptxas(finalize_ptx(ptx, kernels, gpu_name), gpu_name, opt_level, host_object,
                        sanitize=sanitize, verbose=verbose)


def _make_temporary_folder() -> Path:
    """A new private folder for ptxas's files, in TMPDIR (one line if that is impossible)."""
    try:
        return Path(tempfile.mkdtemp(prefix="tileiras-"))
    except OSError as err:
        where = tempfile.tempdir or knobs.tmpdir or "/tmp"
        raise CompileError(f"cannot create a temporary folder in '{where}': {err.strerror or err}") from None


# --------------------------------------------------------------------------- statistics

def stats_from_cubin(cubin: bytes) -> dict[str, KernelStats]:
    """Registers (``.nv.info`` REGCOUNT) and static shared memory (``.nv.shared.<k>``) per kernel."""
    sections = read_sections(cubin)
    regs = {}
    for attr in nv_info_attributes(cubin, sections):
        if attr.code == EIATTR_REGCOUNT and attr.kernel is not None:
            regs[attr.kernel] = attr.value
    stats = {}
    for s in sections:
        if s.name.startswith(".text."):
            name = s.name[len(".text."):]
            shared = next((t.size for t in sections if t.name == f".nv.shared.{name}"), 0)
            stats[name] = KernelStats(registers=regs.get(name, 0), shared_memory=shared)
    return stats


_COMPILING = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")


def parse_verbose_log(log: str) -> dict[str, KernelStats]:
    """Per-kernel numbers from ptxas ``-v`` output."""
    stats: dict[str, dict[str, int]] = {}
    current: Optional[dict[str, int]] = None
    for line in log.splitlines():
        if m := _COMPILING.search(line):
            current = stats.setdefault(m.group(1), {})
        elif current is not None and (m := _FRAME.search(line)):
            current.update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)),
                           spill_loads=int(m.group(3)))
        elif current is not None and (m := _USED.search(line)):
            current["registers"] = int(m.group(1))
            current["barriers"] = int(m.group(2) or 0)
            if m.group(3):
                current["shared_memory"] = int(m.group(3))
    return {k: KernelStats(**v) for k, v in stats.items()}


def merge_verbose_stats(base: dict[str, KernelStats],
                        verbose: dict[str, KernelStats]) -> dict[str, KernelStats]:
    merged = dict(base)
    for name, v in verbose.items():
        b = base.get(name, KernelStats())
        merged[name] = KernelStats(registers=v.registers or b.registers,
                                   shared_memory=v.shared_memory or b.shared_memory,
                                   stack_frame=v.stack_frame, spill_stores=v.spill_stores,
                                   spill_loads=v.spill_loads, barriers=v.barriers)
    return merged


def nv_host_section(cubin: bytes) -> Optional[bytes]:
    """The embedded host object (``.nv.host``), or None."""
    for s in read_sections(cubin):
        if s.name == ".nv.host":
            return cubin[s.offset:s.offset + s.size]
    return None


# --------------------------------------------------------------------------- cubin reading

EIATTR_REGCOUNT = 0x2F
EIATTR_REQNTID = 0x10
EIATTR_LANGUAGE = 0x66
_EIFMT_SVAL = 4  # u16 size + payload; the other formats are 4-byte records


@record(frozen=True)
class ElfSection:
    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int


@record(frozen=True)
class NvInfoAttribute:
    """One ``.nv.info`` record: ``kernel`` is the function it belongs to (or None), ``value``
    the integer payload (the second word of a symbol-indexed record), ``data`` the raw bytes."""

    code: int
    kernel: Optional[str]
    value: int
    data: bytes


def read_sections(elf: bytes) -> list[ElfSection]:
    """Section headers of a little-endian ELF64 file (cubin or host object)."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError("not an ELF64 file")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    raw = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    strtab_off = raw[shstrndx][4]
    sections = []
    for i, (name, typ, flags, _addr, off, size, link, info, align, entsize) in enumerate(raw):
        sections.append(ElfSection(i, _cstr(elf, strtab_off + name), typ, flags, off, size,
                                   link, info, align, entsize))
    return sections


def read_symbols(elf: bytes, sections: Sequence[ElfSection]) -> list[tuple[str, int, int, int, int]]:
    """``(name, value, size, st_info, st_shndx)`` of every ``.symtab`` entry."""
    symtab = next((s for s in sections if s.type == 2), None)
    if symtab is None:
        return []
    strtab = sections[symtab.link]
    out = []
    for off in range(symtab.offset, symtab.offset + symtab.size, 24):
        name, info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", elf, off)
        out.append((_cstr(elf, strtab.offset + name), value, size, info, shndx))
    return out


def _cstr(data: bytes, offset: int) -> str:
    return data[offset:data.index(b"\0", offset)].decode("utf-8", "replace")


def nv_info_attributes(cubin: bytes, sections: Optional[Sequence[ElfSection]] = None) -> list[NvInfoAttribute]:
    """Every record of ``.nv.info`` (kernel from the symbol index) and ``.nv.info.<kernel>``."""
    sections = sections if sections is not None else read_sections(cubin)
    symbols = read_symbols(cubin, sections)
    attrs = []
    for s in sections:
        if s.name != ".nv.info" and not s.name.startswith(".nv.info."):
            continue
        owner = s.name[len(".nv.info."):] if s.name != ".nv.info" else None
        pos, end = s.offset, s.offset + s.size
        while pos + 2 <= end:
            fmt, code = cubin[pos], cubin[pos + 1]
            if fmt == _EIFMT_SVAL:
                size, = struct.unpack_from("<H", cubin, pos + 2)
                data = cubin[pos + 4:pos + 4 + size]
                pos += 4 + size
            else:  # NVAL / BVAL / HVAL: the value sits in the record's second half-word
                data = cubin[pos + 2:pos + 4]
                pos += 4
            kernel, value = owner, int.from_bytes(data[:4], "little") if data else 0
            if owner is None and len(data) == 8:  # (symbol index, value)
                sym, value = struct.unpack("<II", data)
                kernel = symbols[sym][0] if sym < len(symbols) else None
            attrs.append(NvInfoAttribute(code, kernel, value, data))
    return attrs
