"""codegen/order.py: pure values move to just before their first use, side effects keep order."""
from __future__ import annotations

import pytest
from llvmlite import ir

from tileiras.codegen.order import order_function
from tileiras.pipeline import CompileOptions, compile_module
from tileiras.text.parser import parse_module

F32 = ir.FloatType()


def _kernel(name: str = "k"):
    module = ir.Module()
    ptr = ir.PointerType()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, F32, F32]), name=name)
    return module, fn


def _store(b: ir.IRBuilder, value, address) -> None:
    """An opaque side effect, as our predicated stores are (inline asm)."""
    b.asm(ir.FunctionType(ir.VoidType(), [F32, address.type]), "st.global.f32 [$1], $0;", "f,l",
          [value, address], side_effect=True)


def _names(block) -> list[str]:
    return [i.name for i in block.instructions if i.name and not i.name.startswith(".")]


def test_op_by_op_chains_become_one_chain_after_the_other():
    """Two registers computed op by op (a0 a1 b0 b1) are reordered per register, each
    chain right before its store; the stores keep their order."""
    _, fn = _kernel()
    p, x, y = fn.args
    b = ir.IRBuilder(fn.append_basic_block("body"))
    a0, a1 = b.fadd(x, y, name="a0"), b.fsub(x, y, name="a1")
    m0, m1 = b.fmul(a0, x, name="m0"), b.fmul(a1, y, name="m1")
    _store(b, m0, p)
    _store(b, m1, p)
    b.ret_void()
    order_function(fn)
    assert _names(fn.blocks[0]) == ["a0", "m0", "a1", "m1"]
    stores = [k for k, i in enumerate(fn.blocks[0].instructions) if isinstance(i, ir.CallInstr)]
    assert stores == [2, 5]


def test_loop_bodies_and_values_used_elsewhere_stay():
    _, fn = _kernel()
    p, x, y = fn.args
    entry, loop, done = fn.append_basic_block("entry"), fn.append_basic_block("loop"), fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    early = b.fadd(x, y, name="early")          # used in another block: stays first
    late = b.fmul(x, y, name="late")
    _store(b, late, p)
    b.branch(loop)
    b.position_at_end(loop)
    phi = b.phi(F32, name="acc")
    phi.add_incoming(x, entry)
    s0, s1 = b.fadd(phi, y, name="s0"), b.fmul(phi, y, name="s1")
    _store(b, s1, p)
    nxt = b.fadd(s0, early, name="next")
    phi.add_incoming(nxt, loop)
    b.cbranch(b.fcmp_ordered("<", nxt, y, name="more"), loop, done)
    b.position_at_end(done)
    b.ret_void()
    order_function(fn)
    assert _names(fn.blocks[0]) == ["early", "late"]
    assert _names(fn.blocks[1]) == ["acc", "s0", "s1", "next", "more"]  # a loop body: emission order


def test_values_do_not_move_past_a_collective():
    """A value computed before a barrier and used after it stays before the barrier: what
    one phase of collective work leaves behind is computed before the next phase."""
    module, fn = _kernel()
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    x, y = fn.args[1], fn.args[2]
    s = b.fadd(x, y, name="s")
    b.asm(ir.FunctionType(ir.VoidType(), []), "bar.sync 0;", "~{memory}", [], side_effect=True)
    t = b.fmul(x, x, name="t")
    _store(b, b.fadd(s, t, name="u"), fn.args[0])
    b.ret_void()
    order_function(fn)
    names = ["bar" if "bar.sync" in str(i) else i.name for i in fn.blocks[0].instructions]
    assert names.index("s") < names.index("bar") < names.index("t") < names.index("u")


def _guarded_store(b: ir.IRBuilder, value, address, index, name: str) -> None:
    """A store predicated on ``index < 100`` (as our stores of a partial tile are)."""
    guard = b.icmp_unsigned("<", index, ir.Constant(index.type, 100), name=f"{name}.in")
    b.asm(ir.FunctionType(ir.VoidType(), [ir.IntType(1), F32, address.type]), "@$0 st.global.f32 [$2], $1;",
          "b,f,l", [guard, value, address], side_effect=True)


def test_divisions_move_before_the_address_arithmetic_of_their_stores():
    """softmax's last step: two quotients by one sum, stored to adjacent elements.
    Depth-first, the first division lands between the stores' address arithmetic and the
    first store, so the address is live across ptxas's division subroutine as well; the
    divisions move up to just after the sum (softmax_rows f16 sm_80: 22 -> 18 registers)."""
    _, fn = _kernel()
    p, x, y = fn.args
    i32, i64 = ir.IntType(32), ir.IntType(64)
    entry, body = fn.append_basic_block("entry"), fn.append_basic_block("body")
    b = ir.IRBuilder(entry)
    tid = b.asm(ir.FunctionType(i32, []), "mov.u32 $0, %tid.x;", "=r", [], side_effect=True, name="tid")
    b.branch(body)
    b.position_at_end(body)
    total = b.fadd(x, y, name="sum")
    q0, q1 = b.fdiv(x, total, name="q0"), b.fdiv(y, total, name="q1")
    offset = b.mul(b.zext(tid, i64, name="wide"), ir.Constant(i64, 8), name="offset")
    address = b.add(b.ptrtoint(p, i64, name="base"), offset, name="address")
    _guarded_store(b, q0, address, tid, "s0")
    _guarded_store(b, q1, b.add(address, ir.Constant(i64, 4), name="next"),
                   b.add(tid, ir.Constant(i32, 1), name="tid1"), "s1")
    b.ret_void()
    order_function(fn)
    names = _names(fn.blocks[1])
    assert names[:3] == ["sum", "q0", "q1"], " ".join(names)
    assert names.index("address") > names.index("q1")


def test_a_division_stays_with_its_element_when_moving_it_up_keeps_more_values_alive():
    """Two elements, each divided, combined with another value and stored: moving the
    second element's division up would keep its quotient alive across the first one's
    division too, so each element keeps its depth-first chain (ew_arith: 25 registers
    that way, 28 with all divisions first)."""
    _, fn = _kernel()
    p, _, y = fn.args
    b = ir.IRBuilder(fn.append_basic_block("body"))
    load = ir.FunctionType(F32, [p.type])
    x0 = b.asm(load, "ld.global.f32 $0, [$1];", "=f,l", [p], side_effect=True, name="x0")
    x1 = b.asm(load, "ld.global.f32 $0, [$1+4];", "=f,l", [p], side_effect=True, name="x1")
    d0, d1 = b.fdiv(x0, y, name="d0"), b.fdiv(x1, y, name="d1")
    r0, r1 = b.fadd(d0, x0, name="r0"), b.fadd(d1, x1, name="r1")
    _store(b, r0, p)
    _store(b, r1, p)
    b.ret_void()
    order_function(fn)
    assert _names(fn.blocks[0]) == ["x0", "x1", "d0", "r0", "d1", "r1"]


def test_calls_are_the_slow_path_instructions():
    """becomes_call: IEEE division and square root (LLVM or PTX spelling), 64-bit integer
    division; not the approximate or full-range forms, nor 32-bit integer division."""
    from tileiras.codegen.order import becomes_call
    _, fn = _kernel()
    _, x, y = fn.args
    b = ir.IRBuilder(fn.append_basic_block("body"))
    i32, i64 = ir.IntType(32), ir.IntType(64)
    unary = ir.FunctionType(F32, [F32])

    def asm(text):
        return b.asm(unary, text, "=f,f", [x], False)
    calls = [b.fdiv(x, y), b.frem(x, y), b.sdiv(ir.Constant(i64, 7), ir.Constant(i64, 3)),
             b.urem(ir.Constant(i64, 7), ir.Constant(i64, 3)),
             b.call(ir.Function(fn.module, unary, "llvm.sqrt.f32"), [x]),
             asm("div.rn.f32 $0, $1, $1;"), asm("sqrt.rn.f32 $0, $1;"), asm("rcp.rz.f64 $0, $1;")]
    inline = [b.fmul(x, y), b.sdiv(ir.Constant(i32, 7), ir.Constant(i32, 3)),
              asm("div.approx.f32 $0, $1, $1;"), asm("div.full.f32 $0, $1, $1;"),
              asm("sqrt.approx.f32 $0, $1;"), asm("ex2.approx.f32 $0, $1;")]
    assert [becomes_call(i) for i in calls] == [True] * len(calls)
    assert [becomes_call(i) for i in inline] == [False] * len(inline)


def test_math_library_calls_move_and_the_operand_with_more_of_them_goes_first():
    """libdevice calls are pure: each moves to its first use, and of an op's operands the
    one that calls the library more is computed first, so nothing of the other waits across
    its inlined slow paths (ew_transcendental f32 sm_120: 38 -> 34 registers, f64 44 -> 36)."""
    module, fn = _kernel()
    p, x, _ = fn.args
    unary = ir.FunctionType(F32, [F32])

    def lib(name):
        return module.globals.get(name) or ir.Function(module, unary, name)
    b = ir.IRBuilder(fn.append_basic_block("body"))
    e = b.call(lib("__nv_expf"), [x], name="e")                 # emitted first, used last
    s = b.call(lib("__nv_sinf"), [x], name="s")
    c = b.call(lib("__nv_cosf"), [x], name="c")
    sc = b.fmul(s, c, name="sc")
    _store(b, b.fadd(e, sc, name="sum"), p)
    b.ret_void()
    order_function(fn)
    assert _names(fn.blocks[0]) == ["s", "c", "sc", "e", "sum"]


# --------------------------------------------------------------------------- loops

LOOP_KERNEL = """
entry @k(%a: tile<ptr<f32>>, %c: tile<ptr<f32>>, %n: tile<i32>) {
  %tok = make_token : token
  %ta = make_tensor_view %a, shape = [%n, %n], strides = [%n, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %tc = make_tensor_view %c, shape = [%n, %n], strides = [%n, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %pa = make_partition_view %ta : partition_view<tile=(1x256), tensor_view<?x?xf32, strides=[?,1]>>
  %pc = make_partition_view %tc : partition_view<tile=(1x256), tensor_view<?x?xf32, strides=[?,1]>>
  %bx, %by, %bz = get_tile_block_id : tile<i32>
  %zero = constant <f32: 0.000000e+00> : tile<1x256xf32>
  %lo = constant <i32: 0> : tile<i32>
  %hi = constant <i32: 16> : tile<i32>
  %one = constant <i32: 1> : tile<i32>
  %sum = for %i in (%lo to %hi, step %one) : tile<i32> iter_values(%acc = %zero) -> (tile<1x256xf32>) {
    %x, %t = load_view_tko weak %pa[%bx, %i] token = %tok : partition_view<tile=(1x256), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<1x256xf32>, token
    %s = addf %acc, %x : tile<1x256xf32>
    continue %s : tile<1x256xf32>
  }
  %done = store_view_tko weak %sum, %pc[%bx, %lo] token = %tok : tile<1x256xf32>, partition_view<tile=(1x256), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> token
  return
}
"""


def loop_bodies(ptx: str) -> list[str]:
    """The text between each label and a later branch back to it."""
    lines = [line.strip() for line in ptx.splitlines()]
    bodies = []
    for i, line in enumerate(lines):
        if line.endswith(":"):
            label = line[:-1]
            for j in range(i + 1, len(lines)):
                if "bra" in lines[j] and lines[j].rstrip(";").split()[-1] == label:
                    bodies.append("\n".join(lines[i:j + 1]))
    return bodies


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_loop_bodies_do_not_read_the_thread_id(arch):
    """Guarded accesses outside loops read %tid.x afresh (as NVIDIA's PTX); inside a loop
    that would run on every trip, so the coordinates come from the prologue and LLVM hoists
    the arithmetic on them out of the loop."""
    # a trip count known only at run time: 16 known trips would be unrolled (no loop left)
    dynamic = LOOP_KERNEL.replace("(%lo to %hi,", "(%lo to %n,")
    ptx = compile_module(parse_module(dynamic, "loop.mlir"), CompileOptions(gpu_name=arch), "ptx")
    bodies = loop_bodies(ptx)
    assert bodies, "no loop in the PTX"
    for body in bodies:
        assert "%tid.x" not in body and "cvt.u64.u32" not in body.split("ld.global")[0]


def test_wide_accesses_in_loops_keep_fresh_coordinates():
    """An access of many registers a thread (here 64x128 f32: 64) keeps computing its
    addresses inside the loop: hoisted, every row's address would stay live across it
    (a 128x128 matrix multiply's operand loads spilled on sm_120)."""
    wide = LOOP_KERNEL.replace("1x256", "64x128")
    ptx = compile_module(parse_module(wide, "wide.mlir"), CompileOptions(gpu_name="sm_90"), "ptx")
    assert any("%tid.x" in body for body in loop_bodies(ptx))


def _load(b: ir.IRBuilder, address, name: str):
    """A predicated global load as intrinsics.predicated_load emits it (inline asm with a
    side effect)."""
    return b.asm(ir.FunctionType(F32, [address.type]), "ld.global.b32 $0, [$1];", "=f,l", [address],
                 side_effect=True, name=name)


def _loads_then_stores(effect: str = ""):
    """w0 w1 loaded, then (optionally an effect), then x*w0 and x*w1 stored."""
    _, fn = _kernel()
    p, x, _ = fn.args
    b = ir.IRBuilder(fn.append_basic_block("body"))
    w0, w1 = _load(b, p, "w0"), _load(b, p, "w1")
    if effect:
        b.asm(ir.FunctionType(ir.VoidType(), []), effect, "~{memory}", [], side_effect=True)
    _store(b, b.fmul(x, w0, name="m0"), p)
    _store(b, b.fmul(x, w1, name="m1"), p)
    b.ret_void()
    return fn, {id(w0), id(w1)}


def _kinds(fn) -> str:
    """'l' load, 's' store, 'f' other effect, per side effect in block order."""
    out = ""
    for i in fn.blocks[0].instructions:
        if isinstance(i, ir.CallInstr) and isinstance(i.callee, ir.InlineAsm):
            text = i.callee.asm
            out += "l" if text.startswith("ld.") else "s" if text.startswith("st.global.f32") else "f"
    return out


def test_sinkable_loads_move_to_the_store_that_uses_them():
    """Loads the emitter names sinkable (no write is token-ordered after them) go just
    before their first use, past plain stores: one element's load at a time is live."""
    fn, sinkable = _loads_then_stores()
    order_function(fn, sinkable)
    assert _kinds(fn) == "lsls"
    assert _names(fn.blocks[0]) == ["w0", "m0", "w1", "m1"]


def test_loads_not_named_sinkable_keep_their_place():
    fn, _ = _loads_then_stores()
    order_function(fn)
    assert _kinds(fn) == "llss"


@pytest.mark.parametrize("effect", ["bar.sync 0;", "fence.acq_rel.gpu;", "st.global.release.gpu.b32 [0], 0;"])
def test_sinkable_loads_stay_before_any_other_effect(effect: str):
    """A barrier, a fence or an ordered store is not a plain store: the loads stay before it
    (still after nothing they used to precede)."""
    fn, sinkable = _loads_then_stores(effect)
    order_function(fn, sinkable)
    assert _kinds(fn) == "llfss"


def _scratch_reads_then_stores(effect: str):
    """w0 w1 read from shared memory (a conversion's plain LLVM loads), then an inline-asm
    ``effect``, then x*w0 and x*w1 stored to global memory."""
    _, fn = _kernel()
    p, x, _ = fn.args
    b = ir.IRBuilder(fn.append_basic_block("body"))
    scratch = ir.Constant(ir.PointerType(addrspace=3), None)
    w0, w1 = b.load(scratch, typ=F32, name="w0"), b.load(scratch, typ=F32, name="w1")
    b.asm(ir.FunctionType(ir.VoidType(), [x.type, p.type]), effect, "f,l", [x, p], side_effect=True)
    _store(b, b.fmul(x, w0, name="m0"), p)
    _store(b, b.fmul(x, w1, name="m1"), p)
    b.ret_void()
    return fn, {id(w0), id(w1)}


def test_sinkable_shared_reads_pass_global_stores_not_shared_ones():
    """A conversion's reads of its scratch (emit_shape.exchange) move to their uses past
    plain global stores, but not past a plain shared store, which may write what they read."""
    fn, sinkable = _scratch_reads_then_stores("st.global.f32 [$1], $0;")
    order_function(fn, sinkable)
    assert _names(fn.blocks[0]) == ["w0", "m0", "w1", "m1"]
    fn, sinkable = _scratch_reads_then_stores("st.shared.f32 [$1], $0;")
    order_function(fn, sinkable)
    assert _names(fn.blocks[0]) == ["w0", "w1", "m0", "m1"]
