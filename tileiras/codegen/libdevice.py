"""CUDA's math library, libdevice, as NVIDIA's tileiras uses it: called by name, linked, inlined.

NVIDIA's tool lowers ``exp``, ``log``, ``sin``, ``pow`` ... to the libdevice functions nvcc
calls (``__nv_expf``, ``__nv_logf`` ...) and inlines them; f16 and bf16 go through the f32
function.  libdevice branches on ``__nvvm_reflect("__CUDA_FTZ")`` (flush subnormals) and
``__nvvm_reflect("__CUDA_ARCH")``; both are settled here, per call for FTZ: the emitter asks for
``__nv_expf`` or ``__nv_expf.ftz`` and the library supplies the matching copy.

Two halves, in two processes:

* ``call`` (the compiler, plain ``llvmlite.ir``) declares the function and calls it;
* ``link_into`` (the LLVM back end, ``codegen.backend``) reads ``libdevice.10.bc`` from the
  ``nvidia-cuda-nvcc`` wheel once per process (``load``; the compile server does it before it
  forks), copies the definitions the module declares, with every function they call, the
  globals and metadata they use, as internal ``alwaysinline`` functions whose reflect calls are
  constants, and links them in.  LLVM's pipeline inlines them and drops the rest.
"""
from __future__ import annotations

import functools
import re
from typing import Iterable, Sequence

from llvmlite import ir

from ..record import record

PREFIX = "__nv_"
FTZ_SUFFIX = ".ftz"


def call(b: ir.IRBuilder, name: str, args: Sequence[ir.Value], ftz: bool = False) -> ir.Value:
    """``name(args)`` (``__nv_expf``...), with subnormals flushed to zero inside when ``ftz``."""
    assert name.startswith(PREFIX), name
    full = name + FTZ_SUFFIX if ftz else name
    module = b.module
    fn = module.globals.get(full)
    if fn is None:
        ret = args[0].type
        fn = ir.Function(module, ir.FunctionType(ret, [a.type for a in args]), name=full)
        fn.attributes.add("nounwind")
    return b.call(fn, list(args))


def f32_or_f64(base: str, t: ir.Type) -> str:
    """libdevice's name of ``base`` for ``t``: ``__nv_expf`` for float, ``__nv_exp`` for double."""
    return f"{PREFIX}{base}{'f' if isinstance(t, ir.FloatType) else ''}"


# -- the back end's half ---------------------------------------------------------------------
_DEFINE = re.compile(r"^define (?:(?:internal|linkonce_odr|weak_odr|private) )?(.*?) #(\d+) \{$",
                     re.MULTILINE)
_REFLECT = re.compile(r"call i32 @__nvvm_reflect\(ptr @([-\w$.]+)\)(?: #\d+)?")
_GLOBAL_REF = re.compile(r"@([-\w$.]+)")
_ATTR_REF = re.compile(r"#(\d+)\b")
_MD_REF = re.compile(r"!(\d+)\b")
_STRING = re.compile(r'c"([^"]*)\\00"')


@record(frozen=True)
class Library:
    """libdevice's text split into its top-level entities, by name."""

    header: str                   # named struct types
    functions: dict[str, str]     # name -> ``define ... { ... }``
    declarations: dict[str, str]  # name -> ``declare ...`` (intrinsics)
    globals: dict[str, str]       # name -> ``@name = ...``
    attributes: dict[str, str]    # number -> ``attributes #N = {...}``
    metadata: dict[str, str]      # number -> ``!N = ...``
    reflect: dict[str, str]       # string global -> the name it reflects (``__CUDA_FTZ``)


def split_library(text: str) -> Library:
    functions, declarations, globals_, attributes, metadata = {}, {}, {}, {}, {}
    header = []
    for block in re.split(r"\n(?=define |declare |@|attributes |!\d|%struct)", text):
        block = block.strip()
        if block.startswith("define "):
            body = block[:block.rindex("}") + 1]
            functions[_GLOBAL_REF.search(body.split("(", 1)[0]).group(1)] = body
        elif block.startswith("declare "):
            line = block.splitlines()[0]
            declarations[_GLOBAL_REF.search(line.split("(", 1)[0]).group(1)] = line
        elif block.startswith("@"):
            line = block.splitlines()[0]
            globals_[line[1:line.index(" ")]] = line
        elif block.startswith("attributes #"):
            line = block.splitlines()[0]
            attributes[line.split()[1][1:]] = line
        elif block.startswith("!") and block[1].isdigit():
            for line in block.splitlines():
                if line.startswith("!"):
                    metadata[line[1:line.index(" ")]] = line
        elif block.startswith("%struct"):
            header.append(block.splitlines()[0])
    reflect = {}
    for name, line in globals_.items():
        m = _STRING.search(line)
        if m and m.group(1).startswith("__CUDA"):
            reflect[name] = m.group(1)
    return Library("\n".join(header), functions, declarations, globals_, attributes, metadata, reflect)


@functools.cache
def load() -> Library:
    """libdevice.10.bc, parsed once per process (LLVM's bindings are loaded here).

    Parsing the bitcode takes LLVM about 160 ms, more than a cold compile's whole front end,
    so the split text is kept in the user's cache folder (``_cached``) and read back in a
    few milliseconds by later processes; the cache is keyed by the file's path, size and
    time, and by this module's format."""
    from ..errors import CompileError
    from ..tools import find_libdevice

    path = find_libdevice()
    if path is None:
        raise CompileError("libdevice.10.bc not found: install the nvidia-cuda-nvcc wheel "
                           "(or set CUDA_HOME to a CUDA toolkit)")
    cache = _cache_file(path)
    lib = _cached(cache) if cache else None
    if lib is None:
        from llvmlite import binding as llvm

        with open(path, "rb") as f:  # a context of its own: its type names never get suffixes
            lib = split_library(str(llvm.parse_bitcode(f.read(), llvm.create_context())))
        if cache:
            _store(cache, lib)
    return lib


_CACHE_FORMAT = 1


def _cache_file(path: str) -> str | None:
    import os
    import zlib

    from ..knobs import knobs

    base = knobs.cache_home or (os.path.join(knobs.home, ".cache") if knobs.home else None)
    try:
        st = os.stat(path)
    except OSError:
        return None
    if base is None:
        return None
    key = zlib.crc32(f"{_CACHE_FORMAT}:{path}:{st.st_size}:{st.st_mtime_ns}".encode())
    return os.path.join(base, "tileiras", f"libdevice-{key:08x}.marshal")


def _cached(cache: str) -> Library | None:
    import marshal

    try:
        with open(cache, "rb") as f:
            parts = marshal.loads(f.read())
        return Library(*parts) if isinstance(parts, tuple) and len(parts) == 7 else None
    except (OSError, EOFError, ValueError, TypeError):
        return None


def _store(cache: str, lib: Library) -> None:
    """Write the cache whole or not at all; a cache that cannot be written is no error."""
    import marshal
    import os

    parts = (lib.header, lib.functions, lib.declarations, lib.globals, lib.attributes, lib.metadata, lib.reflect)
    tmp = f"{cache}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(cache), mode=0o700, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(marshal.dumps(parts))
        os.replace(tmp, cache)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def reflect_value(what: str, ftz: bool, arch: int) -> int:
    """What ``__nvvm_reflect(what)`` answers: NVIDIA's tileiras compiles for ``sm_<arch>``
    with precise square roots and FTZ as the op asks."""
    return {"__CUDA_FTZ": int(ftz), "__CUDA_ARCH": arch * 10, "__CUDA_PREC_SQRT": 1}.get(what, 0)


def specialize(lib: Library, name: str, ftz: bool, arch: int) -> tuple[str, set[str]]:
    """``name``'s definition (external, so that linking resolves the module's declaration)
    for the FTZ variant asked for, its reflect calls folded and the libdevice functions it
    calls renamed alike; returns the text and the names it refers to."""
    text = lib.functions[name]
    text = _REFLECT.sub(lambda m: f"add i32 0, {reflect_value(lib.reflect[m.group(1)], ftz, arch)}", text)
    text = _WIDE_MAD.sub(_wide_mad, text)
    refs = set(_GLOBAL_REF.findall(text))
    if ftz:
        text = _GLOBAL_REF.sub(lambda m: f"@{m.group(1)}{FTZ_SUFFIX}" if m.group(1) in lib.functions
                               else m.group(0), text)
    text = _DEFINE.sub(lambda m: f"define {m.group(1)} #{m.group(2)} {{", text, count=1)
    return text, refs


#: libdevice's 32x32+32 -> 64-bit multiply-add as a carry chain in inline asm (the f32 trig
#: functions' Payne-Hanek reduction loop): ``lo, hi = a * b + c``
_WIDE_MAD = re.compile(
    r"^(\s*)%([-\w$.]+) = call \{ i32, i32 \} asm \"\{\\0A\\09mad\.lo\.cc\.u32 +\$0, \$2, \$3, \$4;"
    r"\\0A\\09madc\.hi\.u32 +\$1, \$2, \$3, +0;\\0A\\09\}\", \"=r,=r,r,r,r\""
    r"\(i32 ([^,]+), i32 ([^,]+), i32 ([^)]+)\)[^\n]*$", re.MULTILINE)


def _wide_mad(m: re.Match) -> str:
    """The same multiply-add in plain IR, as NVIDIA's tileiras has it: LLVM sees through it
    (the reduction loop unrolls into ``mad.wide.u32``/``shr.u64``, where the asm kept a
    ``mad.lo.cc``/``madc.hi`` pair and values live across each), and it cannot overflow:
    (2^32-1)^2 + 2^32-1 < 2^64."""
    pad, out, a, b, c = m.groups()
    t = f"%.wide.{out}"
    return "\n".join(pad + line for line in (
        f"{t}.a = zext i32 {a} to i64", f"{t}.b = zext i32 {b} to i64", f"{t}.c = zext i32 {c} to i64",
        f"{t}.p = mul nuw i64 {t}.a, {t}.b", f"{t}.s = add nuw i64 {t}.p, {t}.c",
        f"{t}.lo = trunc i64 {t}.s to i32", f"{t}.sh = lshr i64 {t}.s, 32",
        f"{t}.hi = trunc i64 {t}.sh to i32",
        f"{t}.r = insertvalue {{ i32, i32 }} undef, i32 {t}.lo, 0",
        f"%{out} = insertvalue {{ i32, i32 }} {t}.r, i32 {t}.hi, 1"))


def library_text(lib: Library, wanted: Iterable[str], arch: int, triple: str, data_layout: str) -> str:
    """An LLVM module defining the ``wanted`` functions (``__nv_expf``, ``__nv_expf.ftz``) and
    everything they use."""
    todo = [(w.removesuffix(FTZ_SUFFIX), w.endswith(FTZ_SUFFIX)) for w in wanted]
    done: set[tuple[str, bool]] = set()
    bodies, decls, globals_ = [], set(), set()
    while todo:
        name, ftz = todo.pop()
        if (name, ftz) in done:
            continue
        done.add((name, ftz))
        text, refs = specialize(lib, name, ftz, arch)
        bodies.append(text)
        for ref in refs:
            if ref in lib.functions:
                todo.append((ref, ftz))
            elif ref in lib.declarations:
                decls.add(ref)
            elif ref in lib.globals:
                globals_.add(ref)
    body = "\n\n".join(bodies)
    attrs = set(_ATTR_REF.findall(body))
    attrs |= {a for d in decls for a in _ATTR_REF.findall(lib.declarations[d])}
    metadata = _metadata_closure(lib, body)
    pure_asm = set(_PURE_ASM_CALL.findall(body))
    parts = [f'target triple = "{triple}"', f'target datalayout = "{data_layout}"', lib.header,
             *(lib.globals[g] for g in sorted(globals_)), *(lib.declarations[d] for d in sorted(decls)),
             body, *(_returning(lib.attributes[a]) if a in pure_asm else lib.attributes[a] for a in sorted(attrs)),
             *(lib.metadata[m] for m in sorted(metadata))]
    return "\n\n".join(parts) + "\n"


#: an inline-asm call without ``sideeffect`` and the attribute group it carries
_PURE_ASM_CALL = re.compile(r"= call [^@\n]*? asm \"[^\n]*?\)\s*#(\d+)")


def _returning(attributes: str) -> str:
    """libdevice's pure inline asm (``rcp.approx.ftz.f32``, ``sub.rn.f32``, ``mad.lo.cc``...)
    is ``memory(none)`` but not ``willreturn``, so LLVM counts each call as a side effect and
    neither sinks it (nor what feeds it) into the branch that uses it nor drops it when unused:
    ``tanh`` under a store's bounds check kept its ``ex2``/``rcp`` above the branch, live
    across it.  A PTX instruction with no memory effect returns; say so."""
    if "memory(none)" in attributes and "willreturn" not in attributes:
        return attributes.replace("{", "{ willreturn", 1)
    return attributes


def _metadata_closure(lib: Library, text: str) -> set[str]:
    todo = [m for m in _MD_REF.findall(text) if m in lib.metadata]
    seen: set[str] = set()
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += [r for r in _MD_REF.findall(lib.metadata[m].split("=", 1)[1]) if r in lib.metadata]
    return seen


def wanted_by(module_text: str) -> list[str]:
    """The libdevice functions an LLVM module declares (what ``call`` asked for)."""
    found = re.findall(rf'^declare [^@]*@"?({PREFIX}[\w.]+)"?\(', module_text, re.MULTILINE)
    return sorted(set(found))


def link_into(module, module_text: str, arch: int) -> None:
    """Link the libdevice functions ``module`` (a parsed ``llvmlite.binding`` module whose IR
    text is ``module_text``) declares into it."""
    wanted = wanted_by(module_text)
    if not wanted:
        return
    from llvmlite import binding as llvm

    library = llvm.parse_assembly(library_text(load(), wanted, arch, module.triple, module.data_layout))
    defined = [f.name for f in library.functions if not f.is_declaration]
    module.link_in(library)
    for name in defined:  # now only this module calls them: LLVM drops each once inlined
        module.get_function(name).linkage = llvm.Linkage.internal
