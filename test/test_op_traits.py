"""Op semantics live in the op declarations (tile/traits.py): every registered op has a
consistent trait set, and the passes do what the traits say (TileAA's dependences, dead ops,
recomputation, the verifier's terminators, the latency model's classes)."""
from __future__ import annotations

import pytest
from test_recompute import notes, rows_kernel, tileas

from tileiras.codegen import nvvm
from tileiras.lower.tileaa import analyze
from tileiras.sched.latency import AMPERE, classify
from tileiras.text.parser import parse_module
from tileiras.tile import OPS_BY_NAME
from tileiras.tile import ops_arith as AR
from tileiras.tile import ops_memory as MEM
from tileiras.tile.registry import OpDef, ops_with, terminators_of
from tileiras.tile.traits import (
    FUNCTION_BODY,
    Elementwise,
    ImplicitTerminator,
    Latency,
    MemoryEffects,
    NoMemoryEffect,
    OpClass,
    Pure,
    Read,
    Recomputable,
    Resource,
    Terminator,
    Write,
    check_traits,
    declared_effects,
    find_trait,
    is_pure,
    is_recomputable,
    is_trivially_dead_if_unused,
    latency_class,
)
from tileiras.verify import verify_module

DEFS = sorted(OPS_BY_NAME.items())


def with_traits(monkeypatch: pytest.MonkeyPatch, cls: type, *traits: object) -> None:
    """Give ``cls`` other traits for one test."""
    d = cls.definition
    monkeypatch.setattr(cls, "definition", OpDef(**{**d.__dict__, "traits": tuple(traits)}))


# -- every op's trait set -------------------------------------------------------------------
@pytest.mark.parametrize("name, d", DEFS, ids=[n for n, _ in DEFS])
def test_trait_set_is_consistent(name: str, d: OpDef) -> None:
    assert check_traits(d) == []
    if is_pure(d.cls):
        assert declared_effects(d.cls) == ()


@pytest.mark.parametrize("name, d", DEFS, ids=[n for n, _ in DEFS])
def test_terminators_name_registered_parents_that_take_them(name: str, d: OpDef) -> None:
    term = find_trait(d.cls, Terminator)
    if term is None:
        return
    assert term.parents
    for parent in term.parents:
        assert parent == FUNCTION_BODY or find_trait(OPS_BY_NAME[parent].cls, ImplicitTerminator) is not None
        assert d.cls in terminators_of(parent)


def test_every_region_op_has_its_implicit_terminator_first() -> None:
    for cls in ops_with(ImplicitTerminator):
        implicit = find_trait(cls, ImplicitTerminator).name
        assert terminators_of(cls.definition.name)[0] is OPS_BY_NAME[implicit].cls
    assert terminators_of(FUNCTION_BODY)[0] is OPS_BY_NAME["return"].cls


def test_every_op_codegen_emits_has_a_latency_class() -> None:
    from tileiras.codegen import emit_mma, emit_multimem  # noqa: F401  (registered on first use)

    emitted = set(nvvm.EMITTERS)
    assert AR.MmaFOp in emitted and MEM.MultimemStoreViewTkoOp in emitted
    missing = sorted(c.definition.name for c in emitted if latency_class(c) is None)
    assert missing == []


def test_every_latency_class_has_a_cost() -> None:
    assert set(AMPERE.costs) == set(OpClass)


def test_recomputable_and_elementwise_ops_are_effect_free() -> None:
    for cls in (*ops_with(Recomputable), *ops_with(Elementwise)):
        assert declared_effects(cls) == (), cls.definition.name


def test_the_pure_terminator_is_never_dead() -> None:
    """``yield`` is pure (as in NVIDIA's Ops.td) and a terminator: the terminator rule, not a
    special case, keeps it."""
    yield_op = OPS_BY_NAME["yield"].cls
    assert is_pure(yield_op)

    class FakeYield:
        definition = yield_op.definition
        regions: list = []
    assert not is_trivially_dead_if_unused(FakeYield())


# -- the traits drive the passes ------------------------------------------------------------
VIEW = "partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>"
STORE_THEN_LOAD = f"""cuda_tile.module @kernels {{
  entry @k(%p: tile<ptr<f32>>, %n: tile<i32>) {{
    %tok = make_token : token
    %v = make_tensor_view %p, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %pv = make_partition_view %v : {VIEW}
    %c0 = constant <i32: 0> : tile<i32>
    %one = constant <f32: 1.0> : tile<128xf32>
    %st = store_view_tko weak %one, %pv[%c0] token = %tok : tile<128xf32>, {VIEW}, tile<i32> -> token
    %x, %xt = load_view_tko weak %pv[%c0] token = %st : {VIEW}, tile<i32> -> tile<128xf32>, token
    %unused = addf %x, %x : tile<128xf32>
    return
  }}
}}
"""


def _ops(text: str) -> tuple:
    fn = parse_module(text, "k.mlir").functions[0]
    aa = analyze(fn)
    ops = {op.name.split(".")[-1]: op for op in fn.walk()}
    return aa, ops


def test_tileaa_orders_a_load_after_a_write_effect() -> None:
    aa, ops = _ops(STORE_THEN_LOAD)
    assert aa.deps[ops["load_view_tko"]] == {ops["store_view_tko"]}
    assert aa.needs_barrier(ops["load_view_tko"])


def test_tileaa_reads_the_write_effect_from_the_trait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Declared a read, the store is no longer a write the load must wait for."""
    with_traits(monkeypatch, MEM.StoreViewTkoOp, MemoryEffects((Read(Resource.GLOBAL),)),
                Latency(OpClass.GLOBAL_STORE))
    aa, ops = _ops(STORE_THEN_LOAD)
    assert not aa.needs_barrier(ops["load_view_tko"])


def test_dead_ops_follow_the_effects(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unused pure op and an unused load go; declared to write memory, the same op stays."""
    aa, ops = _ops(STORE_THEN_LOAD)
    assert ops["addf"] in aa.dead and ops["load_view_tko"] in aa.dead
    assert ops["store_view_tko"] not in aa.dead
    with_traits(monkeypatch, AR.AddFOp, MemoryEffects((Read(Resource.GLOBAL), Write(Resource.GLOBAL))),
                Latency(OpClass.FLOAT))
    aa, ops = _ops(STORE_THEN_LOAD)
    assert ops["addf"] not in aa.dead and ops["load_view_tko"] not in aa.dead


def test_only_recomputable_ops_are_computed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    text = rows_kernel("muli %iota, %three : tile<64xi32>")
    assert notes(tileas(text)) == [" recomputed"]
    assert is_recomputable(AR.MulIOp)
    with_traits(monkeypatch, AR.MulIOp, Pure(), Elementwise(), Latency(OpClass.INT_MUL))
    assert notes(tileas(text)) == [""]      # through shared memory now


def test_the_verifier_reads_terminator_parents(monkeypatch: pytest.MonkeyPatch) -> None:
    text = """cuda_tile.module @kernels {
  entry @k() {
    %c = constant <i1: true> : tile<i1>
    if %c {
      yield
    }
    return
  }
}
"""
    assert verify_module(parse_module(text, "k.mlir")) == []
    with_traits(monkeypatch, OPS_BY_NAME["yield"].cls, Pure(), Terminator(("reduce", "scan")),
                Latency(OpClass.FREE))
    messages = [d.message for d in verify_module(parse_module(text, "k.mlir"))]
    want = "'cuda_tile.yield' op expects parent op to be one of 'cuda_tile.reduce, cuda_tile.scan'"
    assert want in messages


def test_the_latency_model_classifies_by_trait(monkeypatch: pytest.MonkeyPatch) -> None:
    aa, ops = _ops(STORE_THEN_LOAD)
    assert classify(ops["addf"]) is OpClass.FLOAT
    with_traits(monkeypatch, AR.AddFOp, Pure(), Latency(OpClass.TRANSCENDENTAL))
    assert classify(ops["addf"]) is OpClass.TRANSCENDENTAL
    with_traits(monkeypatch, AR.AddFOp, Pure())
    with pytest.raises(ValueError, match="no class for op"):
        classify(ops["addf"])


def test_no_memory_effect_is_not_pure() -> None:
    """``divi`` may trap: no effect, but not speculatable (MLIR NoMemoryEffect)."""
    assert isinstance(find_trait(AR.DivIOp, MemoryEffects), NoMemoryEffect)
    assert not is_pure(AR.DivIOp)


@pytest.mark.parametrize("name, d", DEFS, ids=[n for n, _ in DEFS])
def test_signature_names_the_ops_own_fields(name: str, d: OpDef) -> None:
    if d.signature is None:
        return
    fields = {f.name for f in (*d.operands, *d.results)}
    assert set(d.signature.fields) <= fields
    for m in d.signature.matches:
        assert {f.split("=")[0] for f in m.fields} <= fields
