"""memory ops."""
from __future__ import annotations

from ..ir.core import Operation
from ..ir.version import V13_2, V13_3, V13_4, V13_5  # noqa: F401
from .enums import AtomicRMWMode, MemoryOrderingSemantics, MemoryScope, MultimemReductionKind  # noqa: F401
from .registry import Attr, AttrKind, Operand, Optional_, RegionDef, Result, Variadic, tile_op  # noqa: F401


@tile_op("alloca")
class AllocaOp(Operation):
    result = Result()
    num_elem = Attr(AttrKind.INT)
    alignment = Attr(AttrKind.INT)
    global_ = Attr(AttrKind.UNIT, name="global")
    syntax = "`num_elem` `=` $num_elem `,` `alignment` `=` $alignment (`global` $global^)? attr-dict `:` type($result)"


@tile_op("atomic_cas_tko")
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


@tile_op("atomic_rmw_tko")
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


@tile_op("atomic_red_view_tko", sized_results=True)
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


@tile_op("get_index_space_shape", sized_results=True)
class GetIndexSpaceShapeOp(Operation):
    results = Result(variadic=True)
    src = Operand()
    syntax = "$src attr-dict `:` type($src) `->` custom<FirstType>($results)"


@tile_op("get_tensor_shape", sized_results=True)
class GetTensorShapeOp(Operation):
    results = Result(variadic=True)
    src = Operand()
    syntax = "$src attr-dict `:` type($src) `->` custom<FirstType>($results)"


@tile_op("join_tokens", sized_results=True, traits=("pure",))
class JoinTokensOp(Operation):
    result = Result()
    tokens = Variadic()
    syntax = "$tokens attr-dict `:` type($result)"


@tile_op("load_ptr_tko")
class LoadPtrTkoOp(Operation):
    result = Result()
    result_token = Result()
    source = Operand()
    mask = Optional_()
    paddingValue = Optional_()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope, optional=True)
    optimization_hints = Attr(AttrKind.HINTS, optional=True)
    syntax = "$memory_ordering_semantics ($memory_scope^)? $source (`,` $mask^)? (`,` $paddingValue^)? (`token` `` `=` `` $token^)? (`optimization_hints` `=` $optimization_hints^)? attr-dict `:` type($source) (`,` type($mask)^)? (`,` type($paddingValue)^)? `->` type($result) `,` type($result_token)"


@tile_op("load_view_tko", sized_results=True)
class LoadViewTkoOp(Operation):
    tile = Result()
    result_token = Result()
    view = Operand()
    index = Variadic()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope, optional=True)
    optimization_hints = Attr(AttrKind.HINTS, optional=True)
    inbounds = Attr(AttrKind.BOOL_ARRAY, since=V13_4, length_of="index")
    syntax = "$memory_ordering_semantics ($memory_scope^)? $view `[` $index `]` (`token` `=` $token^)? (`optimization_hints` `=` $optimization_hints^)? (`inbounds` `=` $inbounds^)? attr-dict `:` type($view) custom<IndexTypes>($index) `->` type($tile) `,` type($result_token)"


@tile_op("make_gather_scatter_view", traits=("pure",))
class MakeGatherScatterViewOp(Operation):
    result = Result()
    tensor_view = Operand()
    syntax = "$tensor_view attr-dict `:` type($result)"


@tile_op("make_partition_view", traits=("pure",))
class MakePartitionViewOp(Operation):
    result = Result()
    tensor_view = Operand()
    syntax = "$tensor_view attr-dict `:` type($result)"


@tile_op("make_strided_view", traits=("pure",))
class MakeStridedViewOp(Operation):
    result = Result()
    tensor_view = Operand()
    syntax = "$tensor_view attr-dict `:` type($result)"


@tile_op("make_tensor_view", sized_results=True)
class MakeTensorViewOp(Operation):
    result = Result()
    base = Operand()
    dynamicShape = Variadic()
    dynamicStrides = Variadic()
    syntax = "$base `,` `shape` `=` `[` custom<MixedShape>($dynamicShape) `]` `,` `strides` `=` `[` custom<MixedStrides>($dynamicStrides) `]` attr-dict `:` (custom<TensorViewOperandTypes>($base, $dynamicShape, $dynamicStrides)^ `->`)? type($result)"


@tile_op("make_token", traits=("pure",))
class MakeTokenOp(Operation):
    result = Result()
    syntax = "attr-dict `:` type($result)"


@tile_op("memory_fence_alias_tko")
class MemoryFenceAliasTkoOp(Operation):
    result_token = Result()
    token = Operand()
    syntax = "$token attr-dict"


@tile_op("multimem_load_reduce_view_tko", sized_results=True)
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


@tile_op("multimem_reduce_view_tko", sized_results=True)
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


@tile_op("multimem_store_view_tko", sized_results=True)
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


@tile_op("store_ptr_tko")
class StorePtrTkoOp(Operation):
    result_token = Result()
    destination = Operand()
    value = Operand()
    mask = Optional_()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope, optional=True)
    optimization_hints = Attr(AttrKind.HINTS, optional=True)
    syntax = "$memory_ordering_semantics ($memory_scope^)? $destination `,` $value (`,` $mask^)? (`token` `` `=` `` $token^)? (`optimization_hints` `=` $optimization_hints^)? attr-dict `:` type($destination) `,` type($value) (`,` type($mask)^)? `->` type($result_token)"


@tile_op("store_view_tko", sized_results=True)
class StoreViewTkoOp(Operation):
    result_token = Result()
    tile = Operand()
    view = Operand()
    index = Variadic()
    token = Optional_()
    memory_ordering_semantics = Attr(AttrKind.ENUM, enum=MemoryOrderingSemantics)
    memory_scope = Attr(AttrKind.ENUM, enum=MemoryScope, optional=True)
    optimization_hints = Attr(AttrKind.HINTS, optional=True)
    inbounds = Attr(AttrKind.BOOL_ARRAY, since=V13_4, length_of="index")
    syntax = "$memory_ordering_semantics ($memory_scope^)? $tile `,` $view `[` $index `]` (`token` `=` $token^)? (`optimization_hints` `=` $optimization_hints^)? (`inbounds` `=` $inbounds^)? attr-dict `:` type($tile) `,` type($view) custom<IndexTypes>($index) `->` type($result_token)"
