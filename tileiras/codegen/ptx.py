"""Patch the PTX that LLVM's NVPTX back end prints into the form NVIDIA's tileiras hands ptxas.

One named function per concern, each a pure ``str -> str`` rewrite:

* ``set_ptx_version``      ``.version 9.5`` (``.language`` needs 9.2+; LLVM prints older ones);
* ``set_target``           ``.target sm_XXa`` on sm_90+, ``sm_8x`` below;
* ``require_launch_metadata``  the 64-byte ``___NV_TILE_LAUNCH_META_DATA___`` global is there;
* ``set_entry_params``     parameter declarations exactly as the real tool spells them;
* ``set_entry_directives`` ``.reqntid``, ``.minnctapersm 1``, ``.maxnreg``, cluster, ``.language 7``.

``finalize_ptx`` applies them all.  The rewrites are idempotent: finalizing twice changes nothing.
"""
from __future__ import annotations


import re
from typing import Any, Sequence

from ..errors import CompileError
from .abi import (LAUNCH_METADATA_NAME, PTX_VERSION, KernelInfo,
                  entry_directives, param_decl, ptx_target, tensor_map_decl, workspace_decl)

_VERSION = re.compile(r"^([ \t]*\.version[ \t]+)\d+\.\d+", re.MULTILINE)
_TARGET = re.compile(r"^([ \t]*\.target[ \t]+)sm_\w+", re.MULTILINE)


def set_ptx_version(ptx: str, version: str = PTX_VERSION) -> str:
    """Replace the ``.version`` directive (LLVM writes the version of its ``+ptxNN`` feature)."""
    out, n = _VERSION.subn(lambda m: m.group(1) + version, ptx, count=1)
    if n == 0:
        raise CompileError("malformed PTX: no .version directive")
    return out


def set_target(ptx: str, gpu_name: str) -> str:
    """Point ``.target`` at the architecture ptxas is run for, keeping ``, debug`` if present."""
    out, n = _TARGET.subn(lambda m: m.group(1) + ptx_target(gpu_name), ptx, count=1)
    if n == 0:
        raise CompileError("malformed PTX: no .target directive")
    return out


def require_launch_metadata(ptx: str) -> str:
    """Check that the PTX defines ``___NV_TILE_LAUNCH_META_DATA___``.

    The LLVM module defines it (``nvvm.define_launch_metadata``), so LLVM prints it where
    NVIDIA's PTX has it; there is no second, textual way to put it in."""
    if not re.search(rf"^[^/\n]*\b{LAUNCH_METADATA_NAME}\b", ptx, re.MULTILINE):
        raise CompileError(f"malformed PTX: no {LAUNCH_METADATA_NAME} global "
                           "(codegen.nvvm.define_launch_metadata defines it)")
    return ptx


def _entry_match(ptx: str, name: str) -> re.Match:
    pattern = re.compile(rf"(\.entry[ \t]+{re.escape(name)}[ \t]*\()([^)]*)(\))([^{{]*)(\{{)")
    m = pattern.search(ptx)
    if m is None:
        raise CompileError(f"malformed PTX: no .entry named '{name}'")
    return m


def _split_params(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def set_entry_params(ptx: str, info: KernelInfo) -> str:
    """Rewrite the declarations of the entry's user parameters from their Tile IR types.

    The names stay LLVM's (``<entry>_param_<i>``, the real tool's convention too), so the body
    is untouched.  Parameters after the user ones (hidden tensor-map slots) are kept as printed.
    """
    m = _entry_match(ptx, info.name)
    printed = _split_params(m.group(2))
    if len(printed) < len(info.param_types):
        raise CompileError(f"malformed PTX: entry '{info.name}' has {len(printed)} parameters, "
                           f"expected {len(info.param_types)}")
    decls = [param_decl(t, n) for t, n in zip(info.param_types, info.param_names)]
    decls += printed[len(decls):]
    decls += [tensor_map_decl(n) for n in info.tensor_map_names]
    if info.workspace_name:
        decls.append(workspace_decl(info.workspace_name))
    body = "".join(f"\n\t{d}{',' if i + 1 < len(decls) else ''}" for i, d in enumerate(decls))
    params = f"{body}\n" if decls else ""
    return f"{ptx[:m.start(2)]}{params}{ptx[m.end(2):]}"


def set_entry_directives(ptx: str, info: KernelInfo) -> str:
    """Replace whatever LLVM printed between ``)`` and ``{`` with the real tool's directives."""
    m = _entry_match(ptx, info.name)
    directives = "".join(f"{d}\n" for d in entry_directives(info))
    return f"{ptx[:m.start(4)]}\n{directives}{ptx[m.end(4):]}"


def _gpu_name(options: Any, kernels: Sequence[KernelInfo]) -> str:
    if isinstance(options, str):
        return options
    for attr in ("gpu_name", "name"):
        value = getattr(options, attr, None)
        if isinstance(value, str) and value.startswith("sm_"):
            return value
    if kernels:
        return kernels[0].arch
    raise CompileError("no target architecture given")


def finalize_ptx(ptx: str, kernels: Sequence[KernelInfo], options: Any) -> str:
    """LLVM's PTX for ``kernels`` in the form the real tileiras passes to ptxas.

    ``options`` names the target: a ``--gpu-name`` string or any object with a ``gpu_name``
    (the driver's options) or ``name`` (``sm_90``) attribute.
    """
    gpu_name = _gpu_name(options, kernels)
    ptx = set_target(set_ptx_version(ptx), gpu_name)
    if kernels:
        ptx = require_launch_metadata(ptx)
    for info in kernels:
        ptx = set_entry_directives(set_entry_params(ptx, info), info)
    return ptx


# --------------------------------------------------------------------------- line info
_LOC = re.compile(r"^(\s*)\.loc\s+(\d+)\s+(\d+)\s+(\d+)(.*)$")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"(.*)$')


_DEBUG_LABEL = re.compile(r"^\$L__(?:func_begin|func_end|tmp)\d+:\n", re.MULTILINE)
_EMPTY_MACINFO = re.compile(r"^\t\.section\t\.debug_macinfo\t\{\t\}\n", re.MULTILINE)


def drop_line_table_labels(ptx: str) -> str:
    """Without ``-g``, the function and scope labels LLVM leaves for DWARF that is never
    emitted, and its empty ``.debug_macinfo`` section: NVIDIA's ``--lineinfo`` PTX has
    only the ``.loc`` lines."""
    return _EMPTY_MACINFO.sub("", _DEBUG_LABEL.sub("", ptx))


def attach_intermediate_source(ptx: str, tile_text: str,
                               sources: dict[tuple[int, int], tuple[str, int, int]]) -> str:
    """Source ``.loc``s plus ``.loc_intermediate``s, and the Tile IR text section.

    LLVM's ``.loc`` lines point into the Tile IR text (file ``tile ir``); each
    becomes ``.loc SRC line col`` for the user's source followed by
    ``.loc_intermediate N line col`` for the Tile IR text, which is appended as
    ``.nv_intermediate_source_section`` (ptxas turns it into
    ``.nv.tileir.debug_txt.*`` and ``.nv.tileir.debug_line``).
    """
    import hashlib

    from .debuginfo import TILE_IR_FILE

    llvm_files = {int(m.group(1)): m.group(2) for m in map(_FILE.match, ptx.splitlines()) if m}
    tile_ids = {k for k, name in llvm_files.items() if name.endswith(TILE_IR_FILE)}
    if not tile_ids:  # only synthesized <unknown> scopes: NVIDIA's PTX has no Tile IR text then
        return ptx
    paths = list(dict.fromkeys(path for path, _, _ in sources.values()))  # first-seen order
    number = {path: i + 1 for i, path in enumerate(paths)}
    tile_number = len(paths) + 1
    digest = hashlib.md5(tile_text.encode()).hexdigest()
    out = []
    for line in ptx.splitlines():
        if _FILE.match(line):
            continue
        m = _LOC.match(line)
        if m and int(m.group(2)) in tile_ids:
            pad, tl, tc = m.group(1), int(m.group(3)), int(m.group(4))
            if tl == 0:  # LLVM's "no location" (parameter loads it sank into a branch): NVIDIA has none
                continue
            src = sources.get((tl, tc))
            if src is not None:
                out.append(f"{pad}.loc\t{number[src[0]]} {src[1]} {src[2]}")
            out.append(f"{pad}.loc_intermediate\t{tile_number} {tl} {tc}")
            continue
        out.append(line)
    text = "\n".join(out).rstrip("\n") + "\n"
    files = "".join(f'\t.file\t{number[p]} "{p}"\n' for p in paths)
    files += f'\t.file\t{tile_number} "./{digest}"\n'
    section = (".nv_intermediate_source_section {\n  .code_block {\n    .ir_name: \"tile ir\"\n"
               f"    .sourceFileName: {tile_number}\n    .source_begin\n{tile_text}.source_end\n  }}\n}}\n")
    return text + files + section
