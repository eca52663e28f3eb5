"""Op rules checked on parsed text, each with NVIDIA's exact message (the wording
tileiras 13.5 prints for the same IR as bytecode, or cuda-tile's parser for text)."""
from __future__ import annotations

import pytest

from tileiras.conformance import diagnose


def errors(src: str) -> list[str]:
    return [d.message for d in diagnose(src, "t.mlir", 0) if d.severity == "error"]


def func(args: str, body: str) -> str:
    return f"testing$func @f({args}) {{\n{body}\n}}\n"


def rmw(mode: str, t: str) -> str:
    return func(f"%a: tile<2xptr<{t}>>, %b: tile<2x{t}>",
                f"  %0, %t = atomic_rmw_tko relaxed device %a, {mode}, %b : tile<2xptr<{t}>>, tile<2x{t}> "
                f"-> tile<2x{t}>, token")


def red_view(mode: str = "add", t: str = "i32", ordering: str = "relaxed", scope: str = "device",
             index: str = "%c0, %c0", index_type: str = "tile<i32>") -> str:
    view = f"partition_view<tile=(2x2), tensor_view<2x2x{t}, strides=[2, 1]>>"
    return func(f"%v: {view}, %x: tile<2x2x{t}>, %i: tile<1xi32>",
                f"  %c0 = constant <i32: 0> : tile<i32>\n"
                f"  %t = atomic_red_view_tko {ordering} {scope} %v[{index}], {mode}, %x : tile<2x2x{t}>, {view}, "
                f"{index_type} -> token")


CASES = [
    # atomics
    (rmw("addf", "i32"), "'cuda_tile.atomic_rmw_tko' op 'addf' works only with floats f16, bf16, f32, and f64"),
    (rmw("addf", "tf32"), "'addf' works only with floats f16, bf16, f32, and f64"),
    (rmw("add", "f32"), "'cuda_tile.atomic_rmw_tko' op 'add' works only with integers i32 and i64"),
    (rmw("umin", "i16"), "'umin' works only with integers i32 and i64"),
    (rmw("xchg", "f16"), "'xchg' works only with integers or float of 32 or 64 bitwidth"),
    (rmw("xchg", "tf32"), "'xchg' works only with integers or float of 32 or 64 bitwidth"),
    (rmw("add", "i32").replace("relaxed device", "weak device"),
     "memory ordering semantics must be one of: relaxed, acquire, release, acq_rel"),
    (func("%a: tile<2xptr<f32>>, %b: tile<2xi32>",
          "  %0, %t = atomic_rmw_tko relaxed device %a, add, %b : tile<2xptr<f32>>, tile<2xi32> -> tile<2xi32>, token"),
     "expected pointee type ('f32') to match element type of 'arg' ('i32')"),
    (func("%a: tile<2xptr<i16>>, %b: tile<2xi16>",
          "  %0, %t = atomic_cas_tko relaxed device %a, %b, %b : tile<2xptr<i16>>, tile<2xi16> -> tile<2xi16>, token"),
     "'cuda_tile.atomic_cas_tko' op expect only float or integer types with 32 or 64 bit"),
    (red_view(mode="xchg"), "atomic_red_view_tko op cannot use xchg operation"),
    (red_view(mode="add", t="f32"), "'add' works only with integers i32 and i64"),
    (red_view(ordering="weak", scope=""), "only 'relaxed' memory ordering is supported for view-based atomic "
                                          "reductions"),
    (red_view(scope="sys"), "memory scope 'sys' is not supported for view-based atomic reductions; use 'tl_blk' or "
                            "'device' for TMA compatibility"),
    (red_view(index="%c0"), "expected 2 index operand(s) for view with tile rank 2, got 1"),
    (red_view(index="%i, %i", index_type="tile<1xi32>"),
     "index operand 0 must be a scalar tile (rank 0), got shape 1"),
    # pack / unpack
    (func("%a: tile<2x4xf16>", "  %0 = pack %a : tile<2x4xf16> -> tile<2x8xi8>"),
     "'cuda_tile.pack' op expects source and result to be rank-1 tiles"),
    (func("%a: tile<8xi8>", "  %0 = pack %a : tile<8xi8> -> tile<8xi8>"),
     "expects source and result to have different element type widths"),
    (func("%a: tile<32xf16>", "  %0 = pack %a : tile<32xf16> -> tile<32xi8>"),
     "expects source and result to have the same size in bytes, but got source tile size 64 bytes and result "
     "tile size 32 bytes"),
    (func("%a: tile<64xi8>", "  %0 = unpack %a : tile<64xi8> -> tile<64xf16>"),
     "'cuda_tile.unpack' op expects source and result to have the same size in bytes, but got source tile size "
     "64 bytes and result tile size 128 bytes"),
    # alloca and confined integer attributes
    ("entry @k() {\n  %0 = alloca num_elem = 64, alignment = 3 : tile<ptr<f32>>\n}\n",
     "'cuda_tile.alloca' op 'alignment' must be power of two"),
    ("entry @k() {\n  %0 = alloca num_elem = 64, alignment = 2 : tile<ptr<f32>>\n}\n",
     "'alignment' (2) must be at least the natural size (4 bytes) for element type 'f32'"),
    ("entry @k() {\n  %0 = alloca num_elem = 64, alignment = 2 : tile<ptr<tf32>>\n}\n",
     "'alignment' (2) must be at least the natural size (3 bytes) for element type 'tf32'"),
    ("entry @k() {\n  %0 = alloca num_elem = -10, alignment = 16 : tile<ptr<f32>>\n}\n",
     "'cuda_tile.alloca' op attribute 'num_elem' failed to satisfy constraint: 64-bit signless integer attribute "
     "whose minimum value is 0"),
    # print
    ("entry @k() {\n  %c = constant <i32: 0> : tile<i32>\n  %t = print_tko \"%d %d\", %c : tile<i32> -> token\n}\n",
     "'cuda_tile.print_tko' op incorrect number of operands: expected 2, found 1"),
    ("entry @k() {\n  %t = print_tko \"100%% and %5\" -> token\n}\n", "found unterminated format expression"),
]


def assume(predicate: str, t: str) -> str:
    return func(f"%a: {t}", f"  %0 = assume {predicate}, %a : {t}")


def mmaf_scaled(element: str, scale: str, k: int, lhs_scale: str, rhs_scale: str, m: int = 128) -> str:
    types = (f"tile<{m}x{k}x{element}>, tile<{k}x128x{element}>, tile<{m}x128xf32>, tile<{lhs_scale}x{scale}>, "
             f"tile<{rhs_scale}x{scale}>")
    args = ", ".join(f"%{n}: {t}" for n, t in zip("abcde", types.split(", ")))
    return func(args, f"  %0 = mmaf_scaled %a, %b, %c, %d, %e : {types}")


CASES += [
    # assume predicates
    (assume("div_by<16>", "tile<f32>"),
     "'cuda_tile.assume' op 'cuda_tile.div_by' is valid only for tile of integer/pointer or tensor_view values"),
    (assume("div_by<9223372036854775808>", "tile<i8>"), "'cuda_tile.div_by' divisor is too large"),
    (assume("div_by<12>", "tile<i8>"), "'cuda_tile.div_by' divisor must be a power of 2"),
    (assume("div_by<1, every 8 along 0>", "tile<ptr<f16>>"),
     "'cuda_tile.div_by' 'every'/'along' cannot be used if the constrained value is a 0D tile"),
    (assume("div_by<1, every 8 along 0>", "tensor_view<8xf32, strides=[1]>"),
     "'cuda_tile.div_by' 'every'/'along' cannot be used if the constrained value is a tensor_view"),
    (assume("div_by<1, every 32 along 0>", "tile<16xi32>"),
     "expected 'cuda_tile.div_by' every_dim to be within 0 and the size of the respective dimension (16)"),
    (assume("div_by<1, every 8 along 1>", "tile<16xi32>"),
     "'cuda_tile.div_by' every_dim (1) must be >= 0 and < tile rank (1)"),
    (assume("same_elements<[1]>", "tile<i32>"),
     "expected number of values in 'cuda_tile.same_elements' (1) to match rank of constrained tile (0)"),
    (assume("same_elements<[1]>", "tile<4xf32>"),
     "'cuda_tile.same_elements' is valid only for tile of integer/pointer values"),
    (assume("same_elements<[32]>", "tile<16xi32>"),
     "expected 'cuda_tile.same_elements' value 0 to be within 0 and the size of the respective dimension (16)"),
    (assume("bounded<0, 1>", "tile<f32>"), "'cuda_tile.bounded' is valid only for tile of integer values"),
    (assume("bounded<0, 128>", "tile<i8>"), "'cuda_tile.bounded' expects upper bound to be within [-128, 127]"),
    (assume("bounded<-129, ?>", "tile<i8>"), "'cuda_tile.bounded' expects lower bound to be within [-128, 127]"),
    (assume("bounded<5, 4>", "tile<i8>"),
     "'cuda_tile.bounded' expects lower bound to be less than or equal to upper bound"),
    # mmaf_scaled
    (mmaf_scaled("f8E5M2", "f8E4M3FN", 128, "128x4", "4x128"),
     "'cuda_tile.mmaf_scaled' op unsupported combination of element types. Scale type 'f8E4M3FN' expects lhs and "
     "rhs element types to be 'f4E2M1FN', but got 'f8E5M2'"),
    (mmaf_scaled("f4E2M1FN", "f8E8M0FNU", 128, "64x4", "4x128"),
     "shape error: dim 0 of lhs (128) and dim 0 of lhs_scale (64) must match, but got lhs shape (128, 128) and "
     "lhs_scale shape (64, 4)"),
    (mmaf_scaled("f4E2M1FN", "f8E8M0FNU", 128, "128x8", "4x128"),
     "shape error: dim 1 of lhs_scale (8) and dim 0 of rhs_scale (4) must match, but got lhs_scale shape (128, 8) "
     "and rhs_scale shape (4, 128)"),
    (mmaf_scaled("f8E4M3FN", "f8E8M0FNU", 128, "128x8", "8x128"),
     "shape error: f8 element type requires block scale factor of lhs_scale and rhs_scale to be 32, but got 16"),
    (mmaf_scaled("f4E2M1FN", "f8E8M0FNU", 128, "128x16", "16x128"),
     "shape error: f4E2M1FN element type with f8E8M0FNU scales requires block scale factor of lhs_scale and "
     "rhs_scale to be 16 or 32, but got 8"),
    (mmaf_scaled("f4E2M1FN", "f8E4M3FN", 128, "128x16", "16x128"),
     "shape error: f4E2M1FN element type with f8E4M3FN scales requires block scale factor of lhs_scale and "
     "rhs_scale to be 16, but got 8"),
]


def test_valid_assume_and_mmaf_scaled_are_clean() -> None:
    assert errors(assume("div_by<16, every 4 along 0>", "tile<16xi32>")) == []
    assert errors(assume("div_by<16>", "tensor_view<8xf32, strides=[1]>")) == []
    assert errors(assume("same_elements<[16]>", "tile<16xptr<f32>>")) == []
    assert errors(assume("bounded<-1, 0>", "tile<i1>")) == []
    assert errors(mmaf_scaled("f4E2M1FN", "f8E8M0FNU", 128, "128x4", "4x128")) == []
    assert errors(mmaf_scaled("f8E4M3FN", "f8E8M0FNU", 128, "128x4", "4x128")) == []


@pytest.mark.parametrize("src, message", CASES, ids=range(len(CASES)))
def test_rule(src: str, message: str) -> None:
    found = errors(src)
    assert any(message in m for m in found), found


def test_valid_counterparts_are_clean() -> None:
    assert errors(rmw("addf", "bf16")) == []
    assert errors(rmw("xchg", "f64")) == []
    assert errors(red_view()) == []
    assert errors(func("%a: tile<32xf16>", "  %0 = pack %a : tile<32xf16> -> tile<64xi8>")) == []
    assert errors("entry @k() {\n  %0 = alloca num_elem = 0, alignment = 1 : tile<ptr<i1>>\n}\n") == []
    assert errors("entry @k() {\n  %c = constant <f32: 0.0> : tile<f32>\n"
                  "  %t = print_tko \"100%% %5.2f\", %c : tile<f32> -> token\n}\n") == []


def hint_diagnostics(hints: str, mode):
    src = f"entry @k(%a: tile<ptr<f32>>) optimization_hints=<{hints}> {{\n  return\n}}\n"
    return [(d.severity, d.message) for d in diagnose(src, "t.mlir", 0, mode)]


@pytest.mark.parametrize("hints, warning", [
    ("sm_100a={num_cta_in_cga=2}", "unknown hint key sm_100a"),
    ("sm_100={num_qqq=1}", "num_qqq is not known hint for current Operation"),
    ('sm_100={num_cta_in_cga="a"}', "integer value expected for sm_100.num_cta_in_cga"),
    ("sm_100={num_cta_in_cga=7}", "expected power-of-two ≤ 16 for sm_100.num_cta_in_cga"),
    ("sm_80={num_cta_in_cga=2}", "expected 1 for sm_80.num_cta_in_cga"),
    ("sm_100={occupancy=64}", "integer value in the range [1, 32] is expected for sm_100.occupancy"),
    ("sm_100={num_worker_warps_per_cta=9}", "expected power-of-two ≤ 32 for sm_100.num_worker_warps_per_cta"),
])
def test_optimization_hints(hints: str, warning: str) -> None:
    assert hint_diagnostics(hints, None) == []  # tileiras accepts any hint silently
    assert hint_diagnostics(hints, "warn") == [("warning", warning)]
    assert hint_diagnostics(hints, "error") == [("warning", warning),
                                                ("error", "Optimization hints verification failed")]


def test_valid_hints_are_silent() -> None:
    assert hint_diagnostics("sm_100={num_cta_in_cga=2, occupancy=4, num_worker_warps_per_cta=8}", "error") == []


def ftof(src: str, dst: str, mode: str) -> str:
    return func(f"%a: tile<2x{src}>", f"  %f = ftof %a rounding<{mode}> : tile<2x{src}> -> tile<2x{dst}>")


_NARROWING = ("invalid rounding mode specified. Only 'nearest_even' and 'zero' are supported for narrowing "
              "conversions to standard types")
_LOW = "invalid rounding mode specified for conversion to low-precision type. Only 'nearest_even' is supported"
_WIDENING = ("invalid rounding mode specified for widening conversion. Only IEEE float rounding modes are "
             "supported: 'nearest_even', 'zero', 'negative_inf', 'positive_inf', 'nearest_away'")


@pytest.mark.parametrize("src, dst, mode, message", [  # tileiras 13.5's answers, one per kind of conversion
    ("f32", "f64", "negative_inf", None),
    ("f16", "f32", "nearest_away", None),
    ("f8E4M3FN", "f16", "zero", None),
    ("f16", "f32", "approx", _WIDENING),
    ("f32", "f16", "negative_inf", _NARROWING),
    ("f16", "bf16", "negative_inf", _NARROWING),
    ("f8E8M0FNU", "f32", "negative_inf", _NARROWING),
    ("f32", "f8E5M2", "zero", _LOW),
    ("f32", "f4E2M1FN", "negative_inf", _LOW),
    ("f64", "f32", "negative_inf", None),
    ("f64", "f32", "approx", "invalid rounding mode specified for conversion from f64 to f32. Only 'nearest_even', "
                             "'zero', 'negative_inf', and 'positive_inf' are supported"),
    ("f32", "tf32", "nearest_away", None),
    ("f32", "tf32", "negative_inf", "invalid rounding mode specified for conversion from f32 to tf32. Only "
                                    "'nearest_even', 'zero', and 'nearest_away' are supported"),
    ("f32", "f8E8M0FNU", "nearest_even", "invalid rounding mode specified for conversion to f8E8M0FNU. Only 'zero' "
                                         "and 'positive_inf' are supported"),
])
def test_ftof_rounding_modes(src: str, dst: str, mode: str, message) -> None:
    assert errors(ftof(src, dst, mode)) == ([] if message is None else [f"'cuda_tile.ftof' op {message}"])


def test_function_without_blocks() -> None:
    src = '"cuda_tile.testing$func"() ({ }) {function_type = () -> (), sym_name = "foo"} : () -> ()\n'
    assert any("failed to verify constraint: region with 1 blocks" in m for m in errors(src))
