"""Types and attribute values in Tile IR text: the inverse of ``attributes.py``
and of ``Type.__str__``.

Types are accepted with or without the ``!cuda_tile.`` prefix.  Float literals
are rounded to the element type the way MLIR's parser does (decimal text ->
nearest-even bits); ``0x...`` literals are raw bit patterns.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Optional

from ..ir import attrs as A
from ..ir import types as T
from .floats import FORMATS, parse_decimal, encode
from .parser_scan import Scanner

SCALARS = frozenset(T.SCALAR_BITWIDTH)
I32_MAX = (1 << 31) - 1
_VIEW_WORDS = ("tile", "ptr", "tensor_view", "partition_view", "strided_view", "gather_scatter_view", "token")


class UnknownType(T.Type):
    """A type from another dialect (``tensor<f32>``, ``index``), kept only so the
    verifier can reject it with its spelling."""

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnknownType) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __str__(self) -> str:
        return self.text


def mlir_type(t: T.Type) -> str:
    """A type as MLIR spells it in diagnostics (``!cuda_tile.tile<4xf32>``, ``f32``)."""
    if isinstance(t, (T.ScalarType, UnknownType)):
        return str(t)
    return f"!cuda_tile.{t}"


def quoted(t: T.Type) -> str:
    return f"'{mlir_type(t)}'"


# ---------------------------------------------------------------------------
# types


def is_type_start(sc: Scanner) -> bool:
    word = sc.peek_ident()
    if sc.peek("!") or sc.peek("("):
        return True
    return word is not None and (word in SCALARS or word in _VIEW_WORDS or word in _BUILTIN_SHAPED
                                 or word == "index" or word == "none")


_BUILTIN_SHAPED = ("tensor", "vector", "memref")


def parse_type(sc: Scanner) -> T.Type:
    sc.skip()
    start = sc.pos
    if sc.accept("!"):
        if sc.text.startswith("cuda_tile.", sc.pos):
            sc.pos += len("cuda_tile.")
        else:
            name = sc.ident("type")
            return UnknownType("!" + name + _balanced(sc))
    elif sc.peek("("):
        return _function_type(sc)
    word = sc.peek_ident()
    if word is None:  # cuda_tile's type parser wants a keyword (``tile``, ``f32``...) here
        raise sc.error("expected valid keyword")
    if word in SCALARS:
        sc.ident()
        return T.ScalarType(word)
    parser = _TYPE_PARSERS.get(word)
    if parser is not None:
        sc.ident()
        at = sc.pos
        t = parser(sc)
        _check_type(sc, t, at)
        return t
    if word in _BUILTIN_SHAPED or word in ("index", "none") or (word[0] in "iuf" and word[1:].isdigit()):
        sc.ident()
        return UnknownType(word + _balanced(sc))
    raise sc.error("expected non-function type", start)


def _check_type(sc: Scanner, t: T.Type, at: int) -> None:
    """Reject an ill-formed type where it is written, as MLIR's ``getChecked`` does
    (the verifier checks types again for modules read from bytecode)."""
    from ..verify.types import own_type_problems

    problems = own_type_problems(t)
    if problems:
        raise sc.error(problems[0], at)


def _balanced(sc: Scanner) -> str:
    """The text of a ``<...>`` group (for types we only carry by spelling)."""
    if not sc.text.startswith("<", sc.pos):
        return ""
    depth, start = 0, sc.pos
    while sc.pos < len(sc.text):
        ch = sc.text[sc.pos]
        sc.pos += 1
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                break
    return sc.text[start:sc.pos]


def _function_type(sc: Scanner) -> T.FunctionType:
    sc.expect("(")
    inputs = [] if sc.peek(")") else type_list(sc)
    sc.expect(")")
    sc.expect("->")
    if sc.accept("("):
        results = [] if sc.peek(")") else type_list(sc)
        sc.expect(")")
    else:
        results = [parse_type(sc)]
    return T.FunctionType(tuple(inputs), tuple(results))


def type_list(sc: Scanner) -> list[T.Type]:
    types = [parse_type(sc)]
    while sc.accept(","):
        types.append(parse_type(sc))
    return types


def parse_dims(sc: Scanner, allow_dynamic: bool) -> tuple[tuple[int, ...], Optional[str]]:
    """``2x?x8x`` + element: returns the dims and, if the list ended with an
    element type name, nothing else (the caller parses the element)."""
    dims: list[int] = []
    while True:
        sc.skip()
        if sc.peek("?"):
            if not allow_dynamic:
                raise sc.error("expected static shape")
            sc.pos += 1
            dims.append(T.DYNAMIC)
        elif sc.peek_char().isdigit():
            start = sc.pos
            digits = sc.ident_prefix("0123456789")  # ``0x2`` is 0, x, 2 here, not a hex literal (as in MLIR)
            dims.append(int(digits))
        else:
            return tuple(dims), None
        if not sc.text.startswith("x", sc.pos):
            raise sc.error("expected 'x' in dimension list")
        sc.pos += 1


def _tile(sc: Scanner) -> T.Type:
    sc.expect("<")
    dims, _ = parse_dims(sc, allow_dynamic=False)
    element = parse_type(sc)
    sc.expect(">")
    return T.TileType(element, dims)


def _ptr_attr(sc: Scanner) -> T.PtrAttr:
    word = sc.ident("pointer attribute")
    for p in T.PtrAttr:
        if p.keyword == word:
            return p
    raise sc.error(f"unknown pointer attribute '{word}'")


def _ptr(sc: Scanner) -> T.Type:
    sc.expect("<")
    pointee = parse_type(sc)
    ptr_attr = None
    if sc.accept(","):
        sc.expect("<")
        ptr_attr = _ptr_attr(sc)
        sc.expect(">")
    sc.expect(">")
    return T.PointerType(pointee, ptr_attr)


def _int_list(sc: Scanner, open_: str, close: str, allow_dynamic: bool = False) -> tuple[int, ...]:
    sc.expect(open_)
    out: list[int] = []
    if not sc.peek(close):
        while True:
            if allow_dynamic and sc.accept("?"):
                out.append(T.DYNAMIC)
            else:
                out.append(sc.integer())
            if not sc.accept(","):
                break
    sc.expect(close)
    return tuple(out)


def _tensor_view(sc: Scanner) -> T.TensorViewType:
    """``tensor_view<2x?xf32, strides=[?,1]>``, with NVIDIA's messages for a missing
    or misplaced stride list and for non-positive strides."""
    sc.expect("<")
    dims, _ = parse_dims(sc, allow_dynamic=True)
    element = parse_type(sc)
    strides: tuple[int, ...] = ()
    ptr_attr = None
    if dims:
        if not sc.accept(","):
            raise sc.error("expected 'strides'")
        sc.expect("strides")
        sc.expect("=")
        strides = _strides(sc)
    elif sc.accept(","):
        if sc.accept_keyword("strides"):
            raise sc.error("strides must not be provided for 0-d tiles")
        if not sc.peek("#"):
            raise sc.error("unexpected token after element type in 0-d tensor_view")
        ptr_attr = _tensor_view_ptr_attr(sc)
    while sc.accept(","):
        ptr_attr = _tensor_view_ptr_attr(sc)
    sc.expect(">")
    return T.TensorViewType(element, dims, strides, ptr_attr)


def _tensor_view_ptr_attr(sc: Scanner) -> T.PtrAttr:
    sc.expect("#")
    sc.accept_keyword("cuda_tile.ptr_attr")
    sc.expect("<")
    ptr_attr = _ptr_attr(sc)
    sc.expect(">")
    return ptr_attr


def _strides(sc: Scanner) -> tuple[int, ...]:
    """``[4, ?, 1]``: each stride a strictly positive integer or ``?``."""
    sc.expect("[")
    out: list[int] = []
    if not sc.peek("]"):
        while True:
            start = sc.here()
            if sc.accept("?"):
                out.append(T.DYNAMIC)
            elif sc.peek_char() in "+-0123456789" and sc.peek_char():
                value = sc.integer()
                if value <= 0:
                    raise sc.error(f"expected strictly positive integer, got {value}", start)
                out.append(value)
            else:
                raise sc.error("expected either 64-bit integer or question mark")
            if not sc.accept(","):
                break
    sc.expect("]")
    return tuple(out)


def _tile_shape(sc: Scanner) -> tuple[int, ...]:
    sc.expect("tile")
    sc.expect("=")
    sc.expect("(")
    declared = sc.here()
    dims: list[int] = []
    if not sc.peek(")"):
        dims.append(sc.integer())
        while sc.text.startswith("x", sc.pos):
            sc.pos += 1
            dims.append(sc.integer())
    sc.expect(")")
    for i, d in enumerate(dims):
        if not 0 < d <= I32_MAX:
            raise sc.error(f"tile dimension {i} exceeds i32 limitations (got {d}, expected strictly positive and "
                           f"less than or equal to {I32_MAX})", declared)
    return tuple(dims)


def _padding(sc: Scanner) -> T.PaddingValue:
    sc.expect("=")
    word = sc.ident("padding value")
    for p in T.PaddingValue:
        if p.keyword == word:
            return p
    raise sc.error(f"unknown padding value '{word}'")


def _inner_tensor_view(sc: Scanner) -> T.TensorViewType:
    start = sc.here()
    t = parse_type(sc)
    if not isinstance(t, T.TensorViewType):
        raise sc.error(f"expected 'tensor_view' type, but got {quoted(t)}", start)
    return t


def _view_tail(sc: Scanner, keys: tuple[str, ...]) -> dict:
    """``, key=value`` items after the tensor view (``dim_map``, ``sparse_dim``)."""
    out: dict = {}
    while sc.accept(","):
        key = sc.ident()
        if key not in keys:
            raise sc.error(f"unexpected '{key}'")
        sc.expect("=")
        out[key] = _int_list(sc, "[", "]") if key == "dim_map" else sc.integer()
    sc.expect(">")
    return out


def _view_operand(sc: Scanner, keys: tuple[str, ...]):
    """``[padding_value = P,] tensor_view<...>[, key = ...]* >`` of the view types: the
    padding (or None), the viewed tensor_view type and the keyed tail."""
    padding = None
    if sc.accept_keyword("padding_value"):
        padding = _padding(sc)
        sc.expect(",")
    return padding, _inner_tensor_view(sc), _view_tail(sc, keys)


def _partition_view(sc: Scanner) -> T.Type:
    sc.expect("<")
    shape = _tile_shape(sc)
    sc.expect(",")
    padding, tv, tail = _view_operand(sc, ("dim_map",))
    return T.PartitionViewType(shape, tv, tail.get("dim_map", tuple(range(tv.rank))), padding)


def _strided_view(sc: Scanner) -> T.Type:
    sc.expect("<")
    shape = _tile_shape(sc)
    sc.expect(",")
    sc.expect("traversal_strides")
    sc.expect("=")
    strides = _int_list(sc, "[", "]")
    sc.expect(",")
    padding, tv, tail = _view_operand(sc, ("dim_map",))
    return T.StridedViewType(shape, strides, tv, tail.get("dim_map", tuple(range(tv.rank))), padding)


def _gather_scatter_view(sc: Scanner) -> T.Type:
    sc.expect("<")
    shape = _tile_shape(sc)
    sc.expect(",")
    padding, tv, tail = _view_operand(sc, ("sparse_dim",))
    return T.GatherScatterViewType(shape, tv, tail.get("sparse_dim", 0), padding)


_TYPE_PARSERS = {
    "tile": _tile, "ptr": _ptr, "tensor_view": _tensor_view, "partition_view": _partition_view,
    "strided_view": _strided_view, "gather_scatter_view": _gather_scatter_view,
    "token": lambda sc: T.TOKEN,
}


# ---------------------------------------------------------------------------
# scalars


def float_bits(sc: Scanner, text: str, element: T.ScalarType, start: int) -> int:
    """The bit pattern of a float literal in ``element``'s format."""
    fmt = FORMATS.get(element.name)
    if fmt is None:
        raise sc.error(f"unsupported float type '{element.name}'", start)
    body = text.lstrip("+-")
    if body.startswith("0x"):
        bits = int(body, 16)
        if bits >> fmt.width:
            raise sc.error("float constant out of range for type", start)
        return bits
    negative, magnitude = parse_decimal(text)
    bits = encode(Fraction(magnitude), negative, fmt)
    if bits is None and fmt.has_inf:  # APFloat rounds an overflowing decimal to infinity
        sign = int(negative) << (fmt.width - 1) if fmt.signed else 0
        bits = sign | (((1 << fmt.exp_bits) - 1) << fmt.man_bits)
    if bits is None:
        raise sc.error("floating point value too large for attribute", start)
    return bits


def int_bits(sc: Scanner, value: int, element: T.ScalarType, start: int) -> int:
    width = element.bitwidth
    if element.name == "i1":
        if value not in (0, 1, -1):
            raise sc.error("integer constant out of range for type", start)
        return value & 1
    if value >= 1 << width or value < -(1 << (width - 1)):
        raise sc.error("integer constant out of range for type", start)
    return value & ((1 << width) - 1)


def scalar_bits(sc: Scanner, element: T.ScalarType) -> int:
    """One element of a constant: ``true``/``false``, an integer or a float."""
    start = sc.here()
    if element.is_int:
        if sc.accept_keyword("true") or sc.accept_keyword("false"):
            if element.name != "i1":
                raise sc.error("expected integer value", start)
            return int(sc.text[start:sc.pos] == "true")
        text = sc.number_text("integer value")
        if "." in text or ("e" in text.lower() and not text.lower().lstrip("+-").startswith("0x")):
            raise sc.error("expected integer value", start)
        return int_bits(sc, int(text, 0), element, start)
    if sc.peek_ident() in ("true", "false"):
        raise sc.error("expected floating point literal", start)
    text = sc.number_text("floating point literal")
    body = text.lstrip("+-").lower()
    if not body.startswith("0x") and "." not in body and "e" not in body:
        raise sc.error("unexpected decimal integer literal for a floating point value", start)
    return float_bits(sc, text, element, start)


def pack_elements(values: list[int], element: T.ScalarType) -> bytes:
    """Raw little-endian dense data, as the reader produces it: i1 packed eight a
    byte, i4/f4 one element a byte."""
    width = element.bitwidth
    if width == 1:
        out = bytearray((len(values) + 7) // 8)
        for i, v in enumerate(values):
            out[i // 8] |= (v & 1) << (i % 8)
        return bytes(out)
    if width == 4:  # one byte per element, as MLIR stores sub-byte floats (checked with tileirdisasm 13.5)
        return bytes(v & 0xF for v in values)
    return b"".join(v.to_bytes(width // 8, "little") for v in values)


def dense_values(sc: Scanner, element: T.ScalarType, shape: Optional[tuple[int, ...]]) -> bytes:
    """The body of a dense constant: a splat, nested lists or a ``"0x..."`` blob,
    checked against ``shape`` with MLIR's messages: the literal's structure and
    every element first, then its shape (``shape`` None: no shape check yet)."""
    count = 1
    for d in shape or ():
        count *= d
    start = sc.here()
    if sc.peek_string():
        blob = sc.string()
        if not blob.startswith("0x"):
            raise sc.error("expected hex string", start)
        return bytes.fromhex(blob[2:])
    if not sc.peek("["):
        value = scalar_bits(sc, element)
        return pack_elements([value] * count, element)
    tree = _literal(sc)
    inferred = _literal_shape(sc, tree, start)
    flat: list[int] = []
    end = sc.pos
    _leaf_values(sc, tree, element, flat)
    sc.pos = end
    if shape is not None and inferred != shape:
        raise sc.error(f"inferred shape of elements literal ({_dims(inferred)}) does not match type "
                       f"({_dims(shape)})", start)
    return pack_elements(flat, element)


def _dims(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _literal(sc: Scanner) -> object:
    """A nested list literal: lists of sub-literals, leaves as their start positions."""
    if not sc.accept("["):
        pos = sc.here()
        if sc.accept_keyword("true") or sc.accept_keyword("false"):
            return pos
        sc.number_text("integer value")
        return pos
    items: list[object] = []
    if not sc.peek("]"):
        while True:
            items.append(_literal(sc))
            if not sc.accept(","):
                break
    sc.expect("]")
    return items


def _literal_shape(sc: Scanner, tree: object, start: int) -> tuple[int, ...]:
    if not isinstance(tree, list):
        return ()
    shapes = [_literal_shape(sc, t, start) for t in tree]
    if any(s != shapes[0] for s in shapes):  # MLIR says "ranks" for any difference in nested shape
        raise sc.error("tensor literal is invalid; ranks are not consistent between elements", start)
    return (len(tree),) + (shapes[0] if shapes else ())


def _leaf_values(sc: Scanner, tree: object, element: T.ScalarType, out: list[int]) -> None:
    if isinstance(tree, list):
        for t in tree:
            _leaf_values(sc, t, element, out)
        return
    assert isinstance(tree, int)
    save = sc.pos
    sc.pos = tree
    out.append(scalar_bits(sc, element))
    sc.pos = save


# ---------------------------------------------------------------------------
# attributes


def parse_attribute(sc: Scanner, default_int: Optional[T.Type] = None) -> A.Attribute:
    """A self-contained attribute in MLIR's builtin spelling (``1 : i32``,
    ``1.0 : f32``, ``"s"``, ``[..]``, ``{..}``, ``dense<..> : T``, ``#cuda_tile...``)."""
    start = sc.here()
    if sc.accept_keyword("true"):
        return A.BoolAttr(True)
    if sc.accept_keyword("false"):
        return A.BoolAttr(False)
    if sc.peek_string():
        return A.StringAttr(sc.string())
    if sc.accept("["):
        items: list[A.Attribute] = []
        if not sc.peek("]"):
            items.append(parse_attribute(sc))
            while sc.accept(","):
                items.append(parse_attribute(sc))
        sc.expect("]")
        return A.ArrayAttr(tuple(items))
    if sc.peek("{"):
        return parse_dict(sc)
    if sc.accept_keyword("dense"):
        sc.expect("<")
        body_start = sc.pos
        depth = 1
        while depth:
            if sc.pos >= len(sc.text):
                raise sc.error("expected '>'")
            depth += {"<": 1, ">": -1}.get(sc.text[sc.pos], 0)
            sc.pos += 1
        body = sc.text[body_start:sc.pos - 1]
        sc.expect(":")
        t = parse_type(sc)
        elem = t.element if isinstance(t, T.TileType) else t
        shape = t.shape if isinstance(t, T.TileType) else ()
        sub = Scanner(body, sc.filename)
        sub.pos = 0
        if not isinstance(elem, T.ScalarType):
            raise sc.error("expected dense element type", start)
        return A.DenseElementsAttr(t, dense_values(sub, elem, shape))
    if sc.peek("#"):
        return parse_tile_attr(sc)
    if sc.peek_number():
        text = sc.number_text("attribute value")
        t: Optional[T.Type] = None
        if sc.accept(":"):
            t = parse_type(sc)
        is_float = "." in text or ("e" in text.lower() and "0x" not in text.lower())
        if t is None:
            t = T.F64 if is_float else (default_int or T.I64)
        if not isinstance(t, T.ScalarType):
            raise sc.error("expected scalar type for number attribute", start)
        if t.is_float:
            return A.FloatAttr(t, float_bits(sc, text, t, start))
        if is_float:
            raise sc.error("expected integer value", start)
        return A.IntegerAttr(t, int_bits(sc, int(text, 0), t, start))
    if is_type_start(sc):
        return A.TypeAttr(parse_type(sc))
    raise sc.error("expected attribute value")


def parse_dict(sc: Scanner) -> A.DictAttr:
    sc.expect("{")
    entries: list[tuple[str, A.Attribute]] = []
    if not sc.peek("}"):
        while True:
            key = sc.string() if sc.peek_string() else sc.ident("attribute name")
            if sc.accept("="):
                entries.append((key, parse_attribute(sc, default_int=T.I32 if key != "" else None)))
            else:
                entries.append((key, A.BoolAttr(True)))
            if not sc.accept(","):
                break
    sc.expect("}")
    return A.DictAttr(tuple(entries))


def parse_hints(sc: Scanner) -> A.OptimizationHintsAttr:
    """``<sm_90 = {num_cta_in_cga = 2}, ...>``."""
    sc.expect("<")
    entries: list[tuple[str, A.DictAttr]] = []
    if not sc.peek(">"):
        while True:
            if sc.peek_string():
                arch = sc.string()
            elif sc.peek_ident():
                arch = sc.ident()
            else:
                raise sc.error("expected valid keyword or string")
            sc.expect("=")
            start = sc.here()
            if not sc.peek("{"):
                from .attributes import print_attr

                value = parse_attribute(sc)
                raise sc.error(f"expected dictionary attribute for optimization_hints entry `{arch}` got "
                               f"value={print_attr(value)}", start)
            entries.append((arch, parse_dict(sc)))
            if not sc.accept(","):
                break
    sc.expect(">")
    return A.OptimizationHintsAttr(tuple(entries))


def parse_predicate(sc: Scanner) -> A.Attribute:
    """An assume predicate, with or without ``#cuda_tile.``."""
    start = sc.here()
    if sc.accept("#"):
        if not sc.text.startswith("cuda_tile.", sc.pos):
            raise sc.error("expected cuda_tile attribute", start)
        sc.pos += len("cuda_tile.")
    word = sc.ident("predicate")
    sc.expect("<")
    if word == "div_by":
        divisor = sc.integer()
        every = along = None
        if sc.accept(","):
            sc.expect("every")
            every = sc.integer()
            sc.expect("along")
            along = sc.integer()
        sc.expect(">")
        return A.DivByAttr(divisor, every, along)
    if word == "bounded":
        lower = None if sc.accept("?") else sc.integer()
        sc.expect(",")
        upper = None if sc.accept("?") else sc.integer()
        sc.expect(">")
        return A.BoundedAttr(lower, upper)
    if word == "same_elements":
        values = _int_list(sc, "[", "]")
        sc.expect(">")
        return A.SameElementsAttr(values)
    raise sc.error(f"unknown predicate '{word}'", start)


def parse_tile_attr(sc: Scanner) -> A.Attribute:
    """``#cuda_tile.div_by<...>``, ``#cuda_tile.optimization_hints<...>``..."""
    start = sc.here()
    save = sc.pos
    sc.expect("#")
    name = sc.ident("attribute name")
    sc.pos = save
    if name == "cuda_tile.optimization_hints":
        sc.pos += 1 + len(name)
        return parse_hints(sc)
    if name in ("cuda_tile.div_by", "cuda_tile.bounded", "cuda_tile.same_elements"):
        return parse_predicate(sc)
    raise sc.error(f"unknown attribute '#{name}'", start)
