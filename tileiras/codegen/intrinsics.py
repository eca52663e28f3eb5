"""Every NVVM intrinsic name and inline-PTX string the code generator uses.

Each helper takes an llvmlite ``IRBuilder`` and returns LLVM values.  Keeping
them here keeps the emitters free of PTX spelling.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

from llvmlite import ir

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F16, BF16, F32, F64 = ir.HalfType(), ir.IntType(16), ir.FloatType(), ir.DoubleType()
GLOBAL, SHARED = 1, 3
GPTR = ir.PointerType(addrspace=GLOBAL) if hasattr(ir, "PointerType") else None
SPTR = ir.PointerType(addrspace=SHARED)


#: PTX that the threads of a warp must execute together, converged: the ``.aligned`` forms
#: (``bar.sync``/``bar.arrive``/``bar.red`` are ``barrier.*.aligned``; ``mma.sync``, ``wgmma``,
#: ``ldmatrix``, ``stmatrix``, ``tcgen05``, ``setmaxnreg``...) and the warp-synchronous ``.sync``
#: ones (``shfl``, ``vote``, ``redux``, ``match``, ``elect``, ``bar.warp``).
_CONVERGENT_PTX = re.compile(r"(?<![\w.])(bar|barrier)\.|\.aligned\b|\b(shfl|vote|redux|match|elect|activemask)\b")


def is_convergent_asm(text: str) -> bool:
    return bool(_CONVERGENT_PTX.search(text))


class KernelBuilder(ir.IRBuilder):
    """The kernel's IR builder: an inline-asm call of convergent PTX (``is_convergent_asm``)
    carries LLVM's ``convergent`` attribute, so that no LLVM pass makes it control-dependent
    on more values than it was (tail duplication once put one ``bar.sync`` in each arm of a
    ``tid == 0`` branch: legal for LLVM without the attribute, a hang on an H100, and a
    ``divergence`` trap in the emulator).

    ``barrier_threads``: where the CTA has split into roles that stay alive side by side
    (a warp-specialized persistent ring's producer and consumers, ``emit_ring``), the
    consumer threads' CTA barriers (``barrier``) count only them: ``bar.sync 1, N``."""

    barrier_threads = 0

    def asm(self, ftype, asm, constraint, args, side_effect, name=""):
        call = super().asm(ftype, asm, constraint, args, side_effect, name)
        if is_convergent_asm(asm):
            call.attributes.add("convergent")
        return call


def _declare(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, list(args)), name=name)
    return fn


def sreg(b: ir.IRBuilder, name: str, below: Optional[int] = None) -> ir.Value:
    """Read a special register, e.g. ``tid.x``, ``ctaid.x``, ``clusterid.x`` (known to be
    under ``below`` when given: ``_below``)."""
    fn = _declare(b.module, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])
    return _below(b, b.call(fn, []), below)


def sreg_here(b: ir.IRBuilder, name: str, below: Optional[int] = None) -> ir.Value:
    """A special register read LLVM keeps where it is (inline asm with a side effect): no
    hoisting into a dominating block, no merging with other reads of it."""
    return _below(b, b.asm(ir.FunctionType(I32, []), f"mov.u32 $0, %{name};", "=r", [], side_effect=True),
                  below)


def _below(b: ir.IRBuilder, call: ir.CallInstr, below: Optional[int]) -> ir.CallInstr:
    """``call`` with LLVM ``!range`` metadata [0, below): %tid.x is under the CTA size
    (``.reqntid``), and LLVM then drops the masks a layout's lane and warp bits leave on
    it (``tid & 127`` in a 128-thread CTA), which ptxas keeps and schedules apart from the
    tile start, one more register live (pdl_chain f32 sm_100 14 -> 12, NVIDIA 12)."""
    if below is not None:
        call.set_metadata("range", b.module.add_metadata([ir.Constant(I32, 0), ir.Constant(I32, below)]))
    return call


def widen_here(b: ir.IRBuilder, value: ir.Value, signed: bool) -> ir.Value:
    """``value`` (i32) sign- or zero-extended to i64 by a ``cvt`` LLVM keeps where it is
    (inline asm with a side effect): what is computed from it is neither merged with the
    same computation elsewhere nor hoisted out of this block, and ptxas still sees a
    ``cvt`` (a 32-bit value) where a copy of a 64-bit register would hide that."""
    kind = "s64.s32" if signed else "u64.u32"
    return b.asm(ir.FunctionType(I64, [I32]), f"cvt.{kind} $0, $1;", "=l,r", [value], side_effect=True)


def barrier(b: ir.IRBuilder, threads: int = 0) -> None:
    """bar.sync 0 (all threads of the CTA; also orders their memory accesses), or where
    ``threads`` or else the builder's ``barrier_threads`` says the CTA's roles have split,
    named barrier 1 for that many threads."""
    threads = threads or getattr(b, "barrier_threads", 0)
    text = f"bar.sync 1, {threads};" if threads else "bar.sync 0;"
    b.asm(ir.FunctionType(ir.VoidType(), []), text, "~{memory}", [], side_effect=True)


def shfl_bfly(b: ir.IRBuilder, value: ir.Value, lane_mask: int) -> ir.Value:
    """shfl.sync.bfly.b32 over the full warp (32-bit payload)."""
    return shfl_sync(b, "bfly", value, ir.Constant(I32, lane_mask))


def shfl_sync(b: ir.IRBuilder, mode: str, value: ir.Value, lane: ir.Value) -> ir.Value:
    """shfl.sync.<mode>.b32 over the full warp (32-bit payload): ``bfly`` (lane xor ``lane``),
    ``up``/``down`` (``lane`` lanes below/above, a lane with none keeps its value), ``idx``."""
    fn = _declare(b.module, f"llvm.nvvm.shfl.sync.{mode}.i32", I32, [I32, I32, I32, I32])
    clamp = 0 if mode == "up" else 0x1F
    return b.call(fn, [ir.Constant(I32, 0xFFFFFFFF), value, lane, ir.Constant(I32, clamp)])


def redux_sync(b: ir.IRBuilder, kind: str, value: ir.Value) -> ir.Value:
    """redux.sync.<kind> of an i32 over the full warp (sm_80+): add, min, max, umin, umax,
    and, or, xor."""
    fn = _declare(b.module, f"llvm.nvvm.redux.sync.{kind}", I32, [I32, I32])
    return b.call(fn, [value, ir.Constant(I32, 0xFFFFFFFF)])


class _PureCall(ir.instructions.CallInstrAttributes):
    """Call-site attributes of an inline-asm instruction that only computes its outputs from
    its inputs (llvmlite knows neither ``willreturn`` nor ``memory(none)``)."""
    _known = frozenset(["nounwind", "willreturn", "memory(none)"])


def asm(b: ir.IRBuilder, ret: ir.Type, text: str, constraints: str, args: Sequence[ir.Value],
        side_effect: bool = False, pure: bool = False) -> ir.Value:
    """``text`` as an inline-asm call.  LLVM counts any asm call as reading and writing memory
    and maybe not returning, unless ``pure``: a register-only computation, which LLVM may then
    sink into the branch that uses it, hoist out of loops, merge with its twin or drop."""
    assert not (pure and side_effect)
    call = b.asm(ir.FunctionType(ret, [a.type for a in args]), text, constraints, list(args), side_effect)
    if pure:
        assert "~{memory}" not in constraints, text
        call.attributes = _PureCall(["nounwind", "willreturn", "memory(none)", *call.attributes])
    return call


# -- register classes for inline asm --------------------------------------------------
def reg_class(t: ir.Type) -> tuple[str, str]:
    """(constraint letter, PTX bit type) of a scalar LLVM type."""
    if isinstance(t, ir.IntType):
        return {1: ("b", "pred"), 8: ("c", "b8"), 16: ("h", "b16"), 32: ("r", "b32"), 64: ("l", "b64")}[t.width]
    if isinstance(t, ir.HalfType):
        return "h", "b16"
    if isinstance(t, ir.FloatType):
        return "f", "b32"
    if isinstance(t, ir.DoubleType):
        return "d", "b64"
    if isinstance(t, ir.PointerType):
        return "l", "b64"
    raise TypeError(f"no register class for {t}")


def _address(operand: int, offset: int) -> str:
    return f"[${operand}+{offset}]" if offset else f"[${operand}]"


def predicated_load(b: ir.IRBuilder, ty: ir.Type, count: int, address: ir.Value, pred: ir.Value,
                    fallback: Optional[Sequence[ir.Value]], qualifiers: str = "global", offset: int = 0,
                    opcode: str = "ld", suffix: str = "") -> list[ir.Value]:
    """``count`` consecutive elements at ``address + offset`` bytes when ``pred``, else
    ``fallback`` (unspecified bits when ``fallback`` is None: no ``mov`` is emitted).

    One ``<opcode>.<qualifiers>[.vN].<suffix or bXX>`` guarded by a predicate: no branch
    per element.  8-bit elements travel in 16-bit registers (PTX has no 8-bit registers)."""
    letter, bits = reg_class(ty)
    wide = ty
    if bits == "b8":
        letter, wide = "h", I16
    outs = ",".join(f"={letter}" for _ in range(count))
    ins = ",".join(letter for _ in range(count))
    dst = ", ".join(f"${i}" for i in range(count))
    movs = "".join(f"mov.{'b16' if bits == 'b8' else bits} ${i}, ${count + 2 + i}; " for i in range(count))
    vec = f".v{count}" if count > 1 else ""
    dst_text = f"{{{dst}}}" if count > 1 else dst
    ret = ir.LiteralStructType([wide] * count) if count > 1 else wide
    if isinstance(pred, ir.Constant) and pred.constant:     # always: no guard, no fallback
        text = f"{opcode}.{qualifiers}{vec}.{suffix or bits} {dst_text}, {_address(count, offset)};"
        res = asm(b, ret, text, f"{outs},l", [address], side_effect=True)
        vals = [b.extract_value(res, i) for i in range(count)] if count > 1 else [res]
        return [b.trunc(v, ty) if wide is not ty else v for v in vals]
    if fallback is None:
        movs, constraints, fb = "", f"{outs},l,b", []
    else:
        constraints = f"{outs},l,b,{ins}"
        fb = [b.zext(v, I16) if wide is not ty else v for v in fallback]
    text = f"{movs}@${count + 1} {opcode}.{qualifiers}{vec}.{suffix or bits} {dst_text}, {_address(count, offset)};"
    res = asm(b, ret, text, constraints, [address, pred, *fb], side_effect=True)
    vals = [b.extract_value(res, i) for i in range(count)] if count > 1 else [res]
    return [b.trunc(v, ty) if wide is not ty else v for v in vals]


def predicated_store(b: ir.IRBuilder, values: Sequence[ir.Value], address: ir.Value, pred: Optional[ir.Value],
                     qualifiers: str = "global", offset: int = 0, opcode: str = "st", suffix: str = "") -> None:
    """``<opcode>.<qualifiers>[.vN].<suffix or bXX> [address + offset], values`` when ``pred``
    (``st``, or an instruction with the same operands such as ``multimem.red``); always
    when ``pred`` is None (a store already inside its own branch)."""
    ty = values[0].type
    letter, bits = reg_class(ty)
    vals = list(values)
    if bits == "b8":
        letter = "h"
        vals = [b.zext(v, I16) for v in vals]
    n = len(vals)
    if isinstance(pred, ir.Constant) and pred.constant:
        pred = None
    preds, guard = ([], "") if pred is None else ([pred], "@$1 ")
    src = ", ".join(f"${i + 1 + len(preds)}" for i in range(n))
    src_text = f"{{{src}}}" if n > 1 else src
    vec = f".v{n}" if n > 1 else ""
    text = f"{guard}{opcode}.{qualifiers}{vec}.{suffix or bits} {_address(0, offset)}, {src_text};"
    ins = ",".join(letter for _ in range(n))
    cons = ",".join(["l", *("b" for _ in preds), ins, "~{memory}"])
    asm(b, ir.VoidType(), text, cons, [address, *preds, *vals], side_effect=True)


def is_memory_asm(inst: ir.Instruction) -> bool:
    """An inline asm with side effects (our loads, stores, atomics, special registers)."""
    return isinstance(inst, ir.CallInstr) and isinstance(inst.callee, ir.InlineAsm) and inst.callee.side_effect


def is_collective(inst: ir.Instruction) -> bool:
    """A barrier or warp-wide exchange (shfl, redux, vote): work of a whole CTA or warp."""
    if not isinstance(inst, ir.CallInstr):
        return False
    callee = inst.callee
    if isinstance(callee, ir.InlineAsm):
        return any(name in callee.asm for name in ("bar.sync", "barrier", "shfl.", "redux.", "vote."))
    return callee.name.startswith(("llvm.nvvm.shfl.", "llvm.nvvm.redux.", "llvm.nvvm.vote.", "llvm.nvvm.barrier"))


#: PTX instructions that ptxas expands into code with branches (a slow path for special
#: operands): IEEE-rounded division, reciprocal and square root.
_SLOW_PATH_PTX = ("div.rn", "div.rz", "div.rm", "div.rp", "div.full", "rcp.rn", "rcp.rz", "rcp.rm", "rcp.rp",
                  "sqrt.rn", "sqrt.rz", "sqrt.rm", "sqrt.rp")
_SLOW_PATH_INTRINSICS = ("llvm.sqrt.", "llvm.nvvm.sqrt.", "llvm.nvvm.div.", "llvm.nvvm.rcp.")


def has_slow_path(inst: ir.Instruction, seen: Optional[set[str]] = None) -> bool:
    """Does ``inst`` become code with branches: an IEEE float division, remainder, square
    root or reciprocal, a 64-bit integer division by a variable, a call of a function with
    branches or such an instruction?"""
    if inst.opname in ("fdiv", "frem"):
        return True
    if inst.opname in ("sdiv", "udiv", "srem", "urem"):
        return inst.type.width > 32 and not isinstance(inst.operands[1], ir.Constant)
    if not isinstance(inst, ir.CallInstr):
        return False
    callee = inst.callee
    if isinstance(callee, ir.InlineAsm):
        return any(name in callee.asm for name in _SLOW_PATH_PTX)
    if callee.name.startswith(_SLOW_PATH_INTRINSICS):
        return True
    seen = set() if seen is None else seen
    if callee.name in seen:
        return False
    seen.add(callee.name)
    return len(callee.blocks) > 1 or any(has_slow_path(i, seen) for block in callee.blocks
                                         for i in block.instructions)


def fence(b: ir.IRBuilder, semantics: str, scope: str, pred: ir.Value | None = None) -> None:
    """``fence.<semantics>.<scope>`` (e.g. ``fence.acquire.gpu``): orders this thread's
    memory accesses before and after it at ``scope``; only where ``pred`` when given."""
    if pred is None:
        b.asm(ir.FunctionType(ir.VoidType(), []), f"fence.{semantics}.{scope};", "~{memory}", [], side_effect=True)
    else:
        asm(b, ir.VoidType(), f"@$0 fence.{semantics}.{scope};", "b,~{memory}", [pred], side_effect=True)


def fp_asm_unary(b: ir.IRBuilder, inst: str, x: ir.Value) -> ir.Value:
    """A one-operand float instruction spelled in PTX, e.g. ``sqrt.rz.f32``."""
    letter, _ = reg_class(x.type)
    return asm(b, x.type, f"{inst} $0, $1;", f"={letter},{letter}", [x], pure=True)


def fp_asm_binary(b: ir.IRBuilder, inst: str, x: ir.Value, y: ir.Value) -> ir.Value:
    letter, _ = reg_class(x.type)
    return asm(b, x.type, f"{inst} $0, $1, $2;", f"={letter},{letter},{letter}", [x, y], pure=True)


def fp_asm_ternary(b: ir.IRBuilder, inst: str, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    letter, _ = reg_class(x.type)
    return asm(b, x.type, f"{inst} $0, $1, $2, $3;", f"={letter},{letter},{letter},{letter}", [x, y, z],
               pure=True)


def approx_f32(b: ir.IRBuilder, name: str, x: ir.Value, ftz: bool = False) -> ir.Value:
    """``<name>.approx[.ftz].f32`` (ex2, lg2, sin, cos, tanh, rsqrt): the fast hardware
    approximation of an f32 value, for ops that ask for ``rounding<approx>`` (accurate
    math is libdevice's, ``codegen.libdevice``)."""
    return fp_asm_unary(b, f"{name}.approx{'.ftz' if ftz else ''}.f32", x)


def cvt_asm(b: ir.IRBuilder, inst: str, x: ir.Value, ret: ir.Type) -> ir.Value:
    """A conversion spelled in PTX, e.g. ``cvt.rz.s32.f32``."""
    if str(x.type) == "bfloat":  # 16-bit floats cross the asm boundary as b16
        x = b.bitcast(x, I16)
    if str(ret) == "bfloat":
        return b.bitcast(cvt_asm(b, inst, x, I16), ret)
    li, _ = reg_class(x.type)
    lo, _ = reg_class(ret)
    if lo == "c":
        lo = "h"
    return asm(b, ret, f"{inst} $0, $1;", f"={lo},{li}", [x], pure=True)


def vprintf(b: ir.IRBuilder, fmt: ir.Value, args: ir.Value) -> None:
    fn = _declare(b.module, "vprintf", I32, [ir.PointerType(), ir.PointerType()])
    b.call(fn, [fmt, args])


def trap(b: ir.IRBuilder) -> None:
    fn = _declare(b.module, "llvm.trap", ir.VoidType(), [])
    b.call(fn, [])


def math_call(b: ir.IRBuilder, name: str, args: Sequence[ir.Value]) -> ir.Value:
    """An LLVM or NVVM math intrinsic, e.g. ``llvm.sqrt.f32``, ``llvm.nvvm.ex2.approx.f``."""
    fn = _declare(b.module, name, args[0].type, [a.type for a in args])
    return b.call(fn, list(args))


# -- 4-bit floats (sm_100+) ------------------------------------------------------------
def cvt_f32x2_to_e2m1x2(b: ir.IRBuilder, hi: ir.Value, lo: ir.Value) -> ir.Value:
    """``cvt.rn.satfinite.e2m1x2.f32``: two f32 values as one byte (``lo`` in bits 3..0),
    returned in an i8.  The destination is a ``.b8`` register, declared in a scope as
    NVIDIA's tileiras does."""
    text = ("{ .reg .b8 %e2m1x2_out; cvt.rn.satfinite.e2m1x2.f32 %e2m1x2_out, $1, $2; "
            "cvt.u16.u8 $0, %e2m1x2_out; }")
    return b.trunc(asm(b, I16, text, "=h,f,f", [hi, lo]), I8)


def cvt_f16_to_narrow(b: ir.IRBuilder, fmt: str, half: ir.Value) -> ir.Value:
    """``cvt.rn.satfinite.{e4m3x2,e5m2x2,e2m1x2}.f16x2``: a half value as a ``fmt`` code
    (i8), the pair's other half zero: the value sits in the low half of the word and its code
    in the low byte (nibble for e2m1, whose ``.b8`` destination is declared in a scope as
    NVIDIA's tileiras does)."""
    pair = b.insert_element(ir.Constant(ir.VectorType(half.type, 2), None), half, ir.Constant(I32, 0))
    word = b.bitcast(pair, I32)  # mov.b32 {x, 0}, as NVIDIA's
    text = (f"cvt.rn.satfinite.{fmt}x2.f16x2 $0, $1;" if fmt != "e2m1" else
            "{ .reg .b8 %e2m1x2_out; cvt.rn.satfinite.e2m1x2.f16x2 %e2m1x2_out, $1; cvt.u16.u8 $0, %e2m1x2_out; }")
    return b.trunc(asm(b, I16, text, "=h,r", [word]), I8)


def cvt_e2m1x2_to_f16x2(b: ir.IRBuilder, pair: ir.Value) -> ir.Value:
    """``cvt.rn.f16x2.e2m1x2``: a byte of two e2m1 values (i8) as an f16x2 word (i32; the
    low nibble's value in the low half)."""
    text = "{ .reg .b8 %e2m1x2_in; cvt.u8.u16 %e2m1x2_in, $1; cvt.rn.f16x2.e2m1x2 $0, %e2m1x2_in; }"
    return asm(b, I32, text, "=r,h", [b.zext(pair, I16)])


def predicated_nibble_store(b: ir.IRBuilder, word: ir.Value, shift: ir.Value, nibble: ir.Value,
                            pred: ir.Value, qualifiers: str = "global") -> None:
    """Write the 4-bit ``nibble`` (i32, low bits) at bit ``shift`` (i32) of the aligned 32-bit
    word at ``word`` when ``pred``: ``atom.and`` clears the nibble, ``atom.or`` sets it.  Other
    threads may write the other nibbles of the same bytes at the same time; and/or on disjoint
    bits commute, so every nibble lands."""
    sem = "relaxed.gpu" if qualifiers == "global" else qualifiers.rsplit(".", 1)[0]
    text = ("{ .reg .b32 %nib_keep, %nib_set, %nib_old; "
            "mov.b32 %nib_keep, 15; shl.b32 %nib_keep, %nib_keep, $2; not.b32 %nib_keep, %nib_keep; "
            "and.b32 %nib_set, $3, 15; shl.b32 %nib_set, %nib_set, $2; "
            f"@$1 atom.{sem}.global.and.b32 %nib_old, [$0], %nib_keep; "
            f"@$1 atom.{sem}.global.or.b32 %nib_old, [$0], %nib_set; }}")
    asm(b, ir.VoidType(), text, "l,b,r,r,~{memory}", [word, pred, shift, nibble], side_effect=True)


# -- UE5M3 scales (fnv8E5M3FNU, sm_107) ------------------------------------------------
def cvt_to_ue5m3(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``cvt.rn.satfinite.ue5m3x2.{f32,f16x2,bf16x2}``: an f32, half or bfloat value as a
    UE5M3 code (i8), the pair's other half zero.  The half forms take the value in the low
    half of their word and give its code in the low byte."""
    if isinstance(x.type, ir.FloatType):
        pair = asm(b, I16, "cvt.rn.satfinite.ue5m3x2.f32 $0, $2, $1;", "=h,f,f", [x, ir.Constant(x.type, 0.0)])
    else:
        kind = "f16x2" if isinstance(x.type, ir.HalfType) else "bf16x2"
        word = b.zext(b.bitcast(x, I16), I32)
        pair = asm(b, I16, f"cvt.rn.satfinite.ue5m3x2.{kind} $0, $1;", "=h,r", [word])
    return b.trunc(pair, I8)


def cvt_from_ue5m3(b: ir.IRBuilder, code: ir.Value, to: ir.Type) -> ir.Value:
    """``cvt.rn.{bf16x2,f16x2}.ue5m3x2``: a UE5M3 code (i8) as a bfloat or half value."""
    kind = "f16x2" if isinstance(to, ir.HalfType) else "bf16x2"
    pair = asm(b, I32, f"cvt.rn.{kind}.ue5m3x2 $0, $1;", "=r,h", [b.zext(code, I16)])
    return b.bitcast(b.trunc(pair, I16), to)


# -- UE8M0 scales (f8E8M0FNU, sm_100+) --------------------------------------------------
def cvt_f32x2_to_ue8m0x2(b: ir.IRBuilder, rounding: str, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``cvt.{rz,rp}.satfinite.ue8m0x2.f32``: two f32 values as UE8M0 codes (i8 each, ``x``'s
    first).  PTX has only these two roundings, and NVIDIA's tileiras always saturates."""
    pair = asm(b, I16, f"cvt.{rounding}.satfinite.ue8m0x2.f32 $0, $2, $1;", "=h,f,f", [x, y])
    return b.trunc(pair, I8), b.trunc(b.lshr(pair, ir.Constant(I16, 8)), I8)


def cvt_ue8m0x2_to_bf16x2(b: ir.IRBuilder, x: ir.Value, y: ir.Value, bf16: ir.Type) -> tuple[ir.Value, ir.Value]:
    """``cvt.rn.bf16x2.ue8m0x2``: two UE8M0 codes (i8) as ``bf16`` values, exactly (2^-127 is
    a bf16 subnormal; 0xFF gives NaN)."""
    codes = b.or_(b.zext(x, I16), b.shl(b.zext(y, I16), ir.Constant(I16, 8)))
    pair = asm(b, I32, "cvt.rn.bf16x2.ue8m0x2 $0, $1;", "=r,h", [codes])
    return (b.bitcast(b.trunc(pair, I16), bf16), b.bitcast(b.trunc(b.lshr(pair, ir.Constant(I32, 16)), I16), bf16))


# -- TMA (sm_90+): mbarriers and bulk tensor copies ----------------------------------------
def mbarrier_init(b: ir.IRBuilder, barrier: ir.Value, count: int) -> None:
    """``mbarrier.init`` of the shared-memory barrier at 32-bit address ``barrier``."""
    asm(b, ir.VoidType(), f"mbarrier.init.shared::cta.b64 [$0], {count};", "r,~{memory}", [barrier],
        side_effect=True)


def fence_mbarrier_init(b: ir.IRBuilder) -> None:
    """Makes initialized mbarriers visible to the async proxy (TMA) and the cluster."""
    b.asm(ir.FunctionType(ir.VoidType(), []), "fence.mbarrier_init.release.cluster;", "~{memory}", [],
          side_effect=True)


def fence_proxy_async(b: ir.IRBuilder) -> None:
    """Orders this thread's generic-proxy shared-memory accesses with the async proxy's."""
    b.asm(ir.FunctionType(ir.VoidType(), []), "fence.proxy.async.shared::cta;", "~{memory}", [],
          side_effect=True)


def ldmatrix(b: ir.IRBuilder, row: ir.Value, count: int, trans: bool = False) -> list[ir.Value]:
    """``ldmatrix.sync.aligned.m8n8.x<count>{.trans}.shared.b16``: ``count`` 8x8 blocks of
    16-bit elements whose rows lanes ``8i`` to ``8i + 7`` point at (``row``, a shared
    address); lane l gets row l / 4, columns 2 (l % 4) and the next of each block, or with
    ``.trans`` the same of the transposed block.  x4 on a row-major A gives each lane its
    mma A fragment; x2.trans on a row-major K x N piece of B its B fragment."""
    regs = ", ".join(f"${q}" for q in range(count))
    text = f"ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16 {{{regs}}}, [${count}];"
    result = asm(b, ir.LiteralStructType([I32] * count), text, ",".join(["=r"] * count + ["r"]),
                   [b.ptrtoint(row, I32)], side_effect=True)
    return [b.extract_value(result, q) for q in range(count)]


def ldmatrix_b8(b: ir.IRBuilder, row: ir.Value) -> list[ir.Value]:
    """``ldmatrix.sync.aligned.m16n16.x2.trans.shared.b8``: two 16 x 16 byte matrices whose
    rows lanes 0-15 and 16-31 point at (``row``, a shared address, 16 bytes aligned),
    transposed: register ``2 i + j`` of lane l holds rows ``4 (l % 4)`` to ``4 (l % 4) + 3``
    of matrix ``i`` at column ``l / 4 + 8 j``, the 8-bit B fragment of an ``m16n8k32``
    (matrix 0: K 0-15, its first register; matrix 1: K 16-31, its second) of the column
    block ``j``."""
    text = "ldmatrix.sync.aligned.m16n16.x2.trans.shared.b8 {$0, $1, $2, $3}, [$4];"
    result = asm(b, ir.LiteralStructType([I32] * 4), text, "=r,=r,=r,=r,r", [b.ptrtoint(row, I32)],
                   side_effect=True)
    return [b.extract_value(result, q) for q in range(4)]


def stmatrix(b: ir.IRBuilder, row: ir.Value, words: Sequence[ir.Value], trans: bool = False,
             offset: int = 0) -> None:
    """``stmatrix.sync.aligned.m8n8.x{len(words)}[.trans].shared.b16``: this lane's 32-bit
    ``words`` into the 8x8 blocks whose rows lanes ``8 i`` to ``8 i + 7`` name (this lane's
    row: the 32-bit shared address ``row`` plus the immediate ``offset`` bytes)."""
    n = len(words)
    regs = ", ".join(f"${1 + q}" for q in range(n))
    at = f"$0+{offset}" if offset else "$0"
    text = f"stmatrix.sync.aligned.m8n8.x{n}{'.trans' if trans else ''}.shared.b16 [{at}], {{{regs}}};"
    asm(b, ir.VoidType(), text, "r," + "r," * n + "~{memory}", [row, *words], side_effect=True)


def tensor_map_address(b: ir.IRBuilder, param: str) -> ir.Value:
    """Generic address of the kernel's hidden tensor-map parameter ``param`` (``cvta.param``)."""
    return asm(b, I64, f"mov.b64 $0, {param}; cvta.param.u64 $0, $0;", "=l", [])


def mbarrier_expect_tx(b: ir.IRBuilder, barrier: ir.Value, nbytes: int) -> None:
    """This thread arrives on ``barrier`` and announces ``nbytes`` of transactions to come."""
    asm(b, I64, f"mbarrier.arrive.expect_tx.shared::cta.b64 $0, [$1], {nbytes};",
        "=l,r,~{memory}", [barrier], side_effect=True)


def bulk_tensor_load(b: ir.IRBuilder, dst: ir.Value, tensor_map: ir.Value, coords: Sequence[ir.Value],
                     barrier: ir.Value, multicast: int = 0) -> None:
    """``cp.async.bulk.tensor`` of the box at ``coords`` (innermost first, elements) into
    shared memory at ``dst``; its bytes complete transactions on ``barrier``.  With
    ``multicast`` CTAs: into ``dst`` of each of the cluster's first ``multicast`` CTAs
    (``.multicast::cluster``), completing on the mbarrier at ``barrier`` in each."""
    n = len(coords)
    where = ", ".join(f"${2 + i}" for i in range(n))
    space, cast, mask, mask_constraint, operands = "shared::cta", "", "", "", [dst, tensor_map, *coords, barrier]
    if multicast:
        space, cast, mask, mask_constraint = "shared::cluster", ".multicast::cluster", f", ${3 + n}", "h,"
        operands.append(ir.Constant(I16, (1 << multicast) - 1))
    text = (f"cp.async.bulk.tensor.{n}d.{space}.global.tile.mbarrier::complete_tx::bytes{cast} "
            f"[$0], [$1, {{{where}}}], [${2 + n}]{mask};")
    asm(b, ir.VoidType(), text, "r,l," + "r," * n + "r," + mask_constraint + "~{memory}", operands,
        side_effect=True)


def mbarrier_arrive_remote(b: ir.IRBuilder, barrier: ir.Value, rank: int) -> None:
    """This thread arrives on the mbarrier at ``barrier``'s offset in the cluster's CTA
    ``rank`` (``mapa``, then ``mbarrier.arrive.shared::cluster``)."""
    asm(b, ir.VoidType(), "{ .reg .b32 %ra; mapa.shared::cluster.u32 %ra, $0, $1; "
        "mbarrier.arrive.shared::cluster.b64 _, [%ra]; }", "r,r,~{memory}", [barrier, ir.Constant(I32, rank)],
        side_effect=True)


def cluster_barrier(b: ir.IRBuilder, aligned: bool = True) -> None:
    """Every thread of the cluster that has not exited arrives and waits (release, then
    acquire: what each CTA did before is visible to all after); ``aligned``: every thread
    of the warp executes this very instruction."""
    a = ".aligned" if aligned else ""
    b.asm(ir.FunctionType(ir.VoidType(), []),
          f"barrier.cluster.arrive.release{a};\n\tbarrier.cluster.wait.acquire{a};", "~{memory}", [],
          side_effect=True)


def bulk_tensor_store(b: ir.IRBuilder, tensor_map: ir.Value, coords: Sequence[ir.Value], src: ir.Value,
                      reduce: str = "") -> None:
    """``cp.async.bulk.tensor`` of the box in shared memory at ``src`` to ``coords``
    (innermost first, elements) of the tensor, in this thread's open bulk async-group;
    ``reduce``: ``cp.reduce.async.bulk.tensor`` with that op (add, min, max, and, ...)."""
    n = len(coords)
    where = ", ".join(f"${1 + i}" for i in range(n))
    op = f"cp.reduce.async.bulk.tensor.{n}d.global.shared::cta.{reduce}" if reduce else \
        f"cp.async.bulk.tensor.{n}d.global.shared::cta"
    text = f"{op}.tile.bulk_group [$0, {{{where}}}], [${1 + n}];"
    asm(b, ir.VoidType(), text, "l," + "r," * n + "r,~{memory}", [tensor_map, *coords, src], side_effect=True)


def bulk_commit_group(b: ir.IRBuilder) -> None:
    """Closes this thread's bulk async-group (``cp.async.bulk.commit_group``)."""
    b.asm(ir.FunctionType(ir.VoidType(), []), "cp.async.bulk.commit_group;", "~{memory}", [],
          side_effect=True)


def bulk_wait_group(b: ir.IRBuilder, keep: int) -> None:
    """Waits until all but ``keep`` of this thread's committed bulk groups have completed
    (their writes done, not only their shared-memory reads)."""
    b.asm(ir.FunctionType(ir.VoidType(), []), f"cp.async.bulk.wait_group {keep};", "~{memory}", [],
          side_effect=True)


def bulk_wait_group_read(b: ir.IRBuilder, keep: int) -> None:
    """Waits until all but ``keep`` of this thread's committed bulk groups have read their
    shared-memory sources."""
    b.asm(ir.FunctionType(ir.VoidType(), []), f"cp.async.bulk.wait_group.read {keep};", "~{memory}", [],
          side_effect=True)


def mbarrier_try_wait(b: ir.IRBuilder, barrier: ir.Value, parity: ir.Value) -> ir.Value:
    """1 (i32) once the phase of ``barrier`` with ``parity`` has completed, else 0 (after
    the hardware's own bounded wait)."""
    text = ("{ .reg .pred %p; mbarrier.try_wait.parity.shared::cta.b64 %p, [$1], $2; "
            "selp.b32 $0, 1, 0, %p; }")
    return asm(b, I32, text, "=r,r,r,~{memory}", [barrier, parity], side_effect=True)
