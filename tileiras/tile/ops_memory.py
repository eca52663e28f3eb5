"""memory ops."""
from __future__ import annotations

from ..ir.core import Operation
from ..ir.version import V13_2, V13_3, V13_4, V13_5  # noqa: F401
from .constraints import (GATHER_VIEW, I1_TILE, INT_TILE, NUMBER_TILE, PARTITION_VIEW, PTR_TILE, SCALAR_INT,
                          SCALAR_PTR, STRIDED_VIEW, TENSOR_VIEW, TILE, TILE_VIEW, TOKEN, custom, pointer_to,
                          same, same_shape_of, sig)
from .enums import AtomicRMWMode, MemoryOrderingSemantics, MemoryScope, MultimemReductionKind  # noqa: F401
from .registry import I64_MIN_0, Attr, AttrKind, Operand, Optional_, Result, Variadic, tile_op
from .traits import Alloc, Latency, MemoryEffects, NoMemoryEffect, OpClass, Pure, Read, Resource, Write


@tile_op("alloca", traits=(MemoryEffects((Alloc(Resource.LOCAL),)), Latency(OpClass.FREE)))
class AllocaOp(Operation):
    result = Result()
    num_elem = Attr(AttrKind.INT, minimum=I64_MIN_0)
    alignment = Attr(AttrKind.INT, minimum=I64_MIN_0)
    global_ = Attr(AttrKind.UNIT, name="global")
    syntax = "`num_elem` `=` $num_elem `,` `alignment` `=` $alignment (`global` $global^)? attr-dict `:` type($result)"
    signature = sig(result=SCALAR_PTR)


@tile_op("atomic_cas_tko",
         traits=(MemoryEffects((Read(Resource.GLOBAL), Write(Resource.GLOBAL))), Latency(OpClass.ATOMIC)))
class AtomicCASTkoOp(Operation):
    result = Result()
    result_token = Result()
    pointers = Operand()
    cmp = Operand()
    val = Operand()
    mask = Optional_()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope)
    syntax = "$memory_ordering_semantics $memory_scope $pointers `,` $cmp `,` $val (`,` $mask^)? (`token` `` `=` `` $token^)? attr-dict `:` type($pointers) `,` type($val) (`,` type($mask)^)? `->` type($result) `,` type($result_token)"
    signature = sig(same("shape", "pointers", "cmp", "val", "result"), same("type", "cmp", "val", "result"),
                    pointers=PTR_TILE, cmp=TILE, val=TILE, mask=I1_TILE, token=TOKEN, result=TILE,
                    result_token=TOKEN)


@tile_op("atomic_rmw_tko",
         traits=(MemoryEffects((Read(Resource.GLOBAL), Write(Resource.GLOBAL))), Latency(OpClass.ATOMIC)))
class AtomicRMWTkoOp(Operation):
    result = Result()
    result_token = Result()
    pointers = Operand()
    arg = Operand()
    mask = Optional_()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope)
    mode = Attr(AttrKind.ENUM, enum=AtomicRMWMode)
    syntax = "$memory_ordering_semantics $memory_scope $pointers `,` $mode `,` $arg (`,` $mask^)? (`token` `` `=` `` $token^)? attr-dict `:` type($pointers) `,` type($arg) (`,` type($mask)^)? `->` type($result) `,` type($result_token)"
    signature = sig(same("shape", "pointers", "arg", "result"), same("type", "arg", "result"),
                    pointers=PTR_TILE, arg=TILE, mask=I1_TILE, token=TOKEN, result=TILE, result_token=TOKEN)


@tile_op("atomic_red_view_tko", sized_results=True,
         traits=(MemoryEffects((Read(Resource.GLOBAL), Write(Resource.GLOBAL))), Latency(OpClass.ATOMIC)))
class AtomicRedViewTkoOp(Operation):
    result_token = Result()
    view = Operand()
    index = Variadic()
    value = Operand()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope)
    mode = Attr(AttrKind.ENUM, enum=AtomicRMWMode)
    inbounds = Attr(AttrKind.BOOL_ARRAY, since=V13_5, length_of="index")
    syntax = "$memory_ordering_semantics ($memory_scope^)? $view `[` $index `]` `,` $mode `,` $value (`token` `=` $token^)? (`inbounds` `=` $inbounds^)? attr-dict `:` type($value) `,` type($view) custom<IndexTypes>($index) `->` type($result_token)"
    signature = sig(view=TILE_VIEW, index=INT_TILE, value=TILE, token=TOKEN, result_token=TOKEN)


@tile_op("get_index_space_shape", sized_results=True, traits=(NoMemoryEffect(), Latency(OpClass.FREE)))
class GetIndexSpaceShapeOp(Operation):
    results = Result(variadic=True)
    src = Operand()
    syntax = "$src attr-dict `:` type($src) `->` custom<FirstType>($results)"
    signature = sig(src=TILE_VIEW, results=SCALAR_INT)


@tile_op("get_tensor_shape", sized_results=True, traits=(NoMemoryEffect(), Latency(OpClass.FREE)))
class GetTensorShapeOp(Operation):
    results = Result(variadic=True)
    src = Operand()
    syntax = "$src attr-dict `:` type($src) `->` custom<FirstType>($results)"
    signature = sig(src=TENSOR_VIEW, results=SCALAR_INT)


@tile_op("join_tokens", sized_results=True, traits=(Pure(), Latency(OpClass.FREE)))
class JoinTokensOp(Operation):
    result = Result()
    tokens = Variadic()
    syntax = "$tokens attr-dict `:` type($result)"
    signature = sig(tokens=TOKEN, result=TOKEN)


@tile_op("load_ptr_tko", traits=(MemoryEffects((Read(Resource.GLOBAL),)), Latency(OpClass.GLOBAL_LOAD)))
class LoadPtrTkoOp(Operation):
    result = Result()
    result_token = Result()
    source = Operand()
    mask = Optional_()
    paddingValue = Optional_()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope, optional=True)
    optimization_hints = Attr(AttrKind.HINTS, optional=True, hint_keys=("latency",))
    syntax = "$memory_ordering_semantics ($memory_scope^)? $source (`,` $mask^)? (`,` $paddingValue^)? (`token` `` `=` `` $token^)? (`optimization_hints` `=` $optimization_hints^)? attr-dict `:` type($source) (`,` type($mask)^)? (`,` type($paddingValue)^)? `->` type($result) `,` type($result_token)"
    signature = sig(custom("`source` type is expected a pointer type of `result` type", pointer_to,
                           "result", "source"),
                    custom("shape of 'mask' must match the shape of 'source'", same_shape_of, "source", "mask"),
                    custom("type of 'paddingValue' must match the type of 'result'",
                           lambda ts: ts[0] == ts[1], "result", "paddingValue"),
                    source=PTR_TILE, mask=I1_TILE, paddingValue=NUMBER_TILE, token=TOKEN, result=TILE,
                    result_token=TOKEN)


@tile_op("load_view_tko", sized_results=True,
         traits=(MemoryEffects((Read(Resource.GLOBAL),)), Latency(OpClass.GLOBAL_LOAD)))
class LoadViewTkoOp(Operation):
    tile = Result()
    result_token = Result()
    view = Operand()
    index = Variadic()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope, optional=True)
    optimization_hints = Attr(AttrKind.HINTS, optional=True, hint_keys=("latency", "allow_tma"))
    inbounds = Attr(AttrKind.BOOL_ARRAY, since=V13_4, length_of="index")
    syntax = "$memory_ordering_semantics ($memory_scope^)? $view `[` $index `]` (`token` `=` $token^)? (`optimization_hints` `=` $optimization_hints^)? (`inbounds` `=` $inbounds^)? attr-dict `:` type($view) custom<IndexTypes>($index) `->` type($tile) `,` type($result_token)"
    signature = sig(view=TILE_VIEW, index=INT_TILE, token=TOKEN, tile=TILE, result_token=TOKEN)


@tile_op("make_gather_scatter_view", traits=(Pure(), Latency(OpClass.FREE)))
class MakeGatherScatterViewOp(Operation):
    result = Result()
    tensor_view = Operand()
    syntax = "$tensor_view attr-dict `:` type($result)"
    signature = sig(tensor_view=TENSOR_VIEW, result=GATHER_VIEW)


@tile_op("make_partition_view", traits=(Pure(), Latency(OpClass.FREE)))
class MakePartitionViewOp(Operation):
    result = Result()
    tensor_view = Operand()
    syntax = "$tensor_view attr-dict `:` type($result)"
    signature = sig(tensor_view=TENSOR_VIEW, result=PARTITION_VIEW)


@tile_op("make_strided_view", traits=(Pure(), Latency(OpClass.FREE)))
class MakeStridedViewOp(Operation):
    result = Result()
    tensor_view = Operand()
    syntax = "$tensor_view attr-dict `:` type($result)"
    signature = sig(tensor_view=TENSOR_VIEW, result=STRIDED_VIEW)


@tile_op("make_tensor_view", sized_results=True, traits=(NoMemoryEffect(), Latency(OpClass.FREE)))
class MakeTensorViewOp(Operation):
    result = Result()
    base = Operand()
    dynamicShape = Variadic()
    dynamicStrides = Variadic()
    syntax = "$base `,` `shape` `=` `[` custom<MixedShape>($dynamicShape) `]` `,` `strides` `=` `[` custom<MixedStrides>($dynamicStrides) `]` attr-dict `:` (custom<TensorViewOperandTypes>($base, $dynamicShape, $dynamicStrides)^ `->`)? type($result)"
    signature = sig(base=SCALAR_PTR, dynamicShape=SCALAR_INT, dynamicStrides=SCALAR_INT, result=TENSOR_VIEW)


@tile_op("make_token", traits=(Pure(), Latency(OpClass.FREE)))
class MakeTokenOp(Operation):
    result = Result()
    syntax = "attr-dict `:` type($result)"
    signature = sig(result=TOKEN)


@tile_op("memory_fence_alias_tko",
         traits=(MemoryEffects((Write(Resource.EXECUTION),)), Latency(OpClass.BARRIER)))
class MemoryFenceAliasTkoOp(Operation):
    result_token = Result()
    token = Operand()
    syntax = "$token attr-dict"
    signature = sig(token=TOKEN, result_token=TOKEN)


@tile_op("multimem_load_reduce_view_tko", sized_results=True,
         traits=(MemoryEffects((Read(Resource.MULTICAST),)), Latency(OpClass.GLOBAL_LOAD)))
class MultimemLoadReduceViewTkoOp(Operation):
    reduced_values = Result()
    result_token = Result()
    view = Operand()
    index = Variadic()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope, optional=True)
    reduction = Attr(AttrKind.ENUM, enum=MultimemReductionKind)
    inbounds = Attr(AttrKind.BOOL_ARRAY, length_of="index")
    syntax = ("$memory_ordering_semantics ($memory_scope^)? $view `[` $index `]` (`token` `=` $token^)? "
              "custom<Inbounds>($inbounds) attr-dict-with-keyword($reduction^=add) `:` type($view) "
              "custom<IndexTypes>($index) (`,` type($token)^)? `->` type($reduced_values) `,` type($result_token)")
    signature = sig(view=TILE_VIEW, index=INT_TILE, token=TOKEN, reduced_values=TILE,
                    result_token=TOKEN)


@tile_op("multimem_reduce_view_tko", sized_results=True, traits=(
    MemoryEffects((Read(Resource.MULTICAST), Write(Resource.MULTICAST))),
    Latency(OpClass.ATOMIC)))
class MultimemReduceViewTkoOp(Operation):
    result_token = Result()
    view = Operand()
    tile = Operand()
    index = Variadic()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope)
    reduction = Attr(AttrKind.ENUM, enum=MultimemReductionKind)
    inbounds = Attr(AttrKind.BOOL_ARRAY, length_of="index")
    syntax = ("$memory_ordering_semantics ($memory_scope^)? $view `,` $tile `[` $index `]` (`token` `=` $token^)? "
              "custom<Inbounds>($inbounds) attr-dict-with-keyword($reduction^=add) `:` type($view) `,` type($tile) "
              "custom<IndexTypes>($index) (`,` type($token)^)? `->` type($result_token)")
    signature = sig(view=TILE_VIEW, tile=TILE, index=INT_TILE, token=TOKEN, result_token=TOKEN)


@tile_op("multimem_store_view_tko", sized_results=True,
         traits=(MemoryEffects((Write(Resource.MULTICAST),)), Latency(OpClass.GLOBAL_STORE)))
class MultimemStoreViewTkoOp(Operation):
    result_token = Result()
    view = Operand()
    tile = Operand()
    index = Variadic()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope, optional=True)
    inbounds = Attr(AttrKind.BOOL_ARRAY, length_of="index")
    syntax = ("$memory_ordering_semantics ($memory_scope^)? $view `,` $tile `[` $index `]` (`token` `=` $token^)? "
              "custom<Inbounds>($inbounds) attr-dict `:` type($view) `,` type($tile) "
              "custom<IndexTypes>($index) (`,` type($token)^)? `->` type($result_token)")
    signature = sig(view=TILE_VIEW, tile=TILE, index=INT_TILE, token=TOKEN, result_token=TOKEN)


@tile_op("store_ptr_tko", traits=(MemoryEffects((Write(Resource.GLOBAL),)), Latency(OpClass.GLOBAL_STORE)))
class StorePtrTkoOp(Operation):
    result_token = Result()
    destination = Operand()
    value = Operand()
    mask = Optional_()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope, optional=True)
    optimization_hints = Attr(AttrKind.HINTS, optional=True, hint_keys=("latency",))
    syntax = "$memory_ordering_semantics ($memory_scope^)? $destination `,` $value (`,` $mask^)? (`token` `` `=` `` $token^)? (`optimization_hints` `=` $optimization_hints^)? attr-dict `:` type($destination) `,` type($value) (`,` type($mask)^)? `->` type($result_token)"
    signature = sig(custom("`destination` type is expected a pointer type of `value` type", pointer_to,
                           "value", "destination"),
                    custom("shape of 'destination' must match the shape of 'mask'", same_shape_of,
                           "mask", "destination"),
                    destination=PTR_TILE, value=TILE, mask=I1_TILE, token=TOKEN, result_token=TOKEN)


@tile_op("store_view_tko", sized_results=True,
         traits=(MemoryEffects((Write(Resource.GLOBAL),)), Latency(OpClass.GLOBAL_STORE)))
class StoreViewTkoOp(Operation):
    result_token = Result()
    tile = Operand()
    view = Operand()
    index = Variadic()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope, optional=True)
    optimization_hints = Attr(AttrKind.HINTS, optional=True, hint_keys=("latency", "allow_tma"))
    inbounds = Attr(AttrKind.BOOL_ARRAY, since=V13_4, length_of="index")
    syntax = "$memory_ordering_semantics ($memory_scope^)? $tile `,` $view `[` $index `]` (`token` `=` $token^)? (`optimization_hints` `=` $optimization_hints^)? (`inbounds` `=` $inbounds^)? attr-dict `:` type($tile) `,` type($view) custom<IndexTypes>($index) `->` type($result_token)"
    signature = sig(tile=TILE, view=TILE_VIEW, index=INT_TILE, token=TOKEN, result_token=TOKEN)
