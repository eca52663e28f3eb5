"""codegen/order.py: pure values move to just before their first use, side effects keep order."""
from __future__ import annotations

from llvmlite import ir

from tileiras.codegen.order import order_function

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
