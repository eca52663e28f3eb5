"""Which view stores a store's token orders after it (``lower.tma.stores_after``): the
token followed through a ``for``'s trips and result and an ``if``'s branches, and None as
soon as anything but a view store is reached (a TMA store is waited on only until it has
read shared memory, so a later load could see the memory unwritten)."""
from __future__ import annotations

from tileiras.lower import tma
from tileiras.text.parser import parse_module
from tileiras.tile import ops_memory as MEM

PV = "partition_view<tile=(64), tensor_view<?xf32, strides=[1]>>"
LOAD = f"    %v, %vt = load_view_tko weak %pv[%c1] token = %r : {PV}, tile<i32> -> tile<64xf32>, token\n"


def kernel(tail: str) -> str:
    """A store in a ``for`` (its token carried to the next trip), then one in an ``if``
    ordered after the loop, then ``tail``, ordered after the ``if``."""
    return f"""cuda_tile.module @m {{
  entry @k(%x: tile<ptr<f32>>, %n: tile<i32>, %flag: tile<i1>) {{
    %tok = make_token : token
    %tv = make_tensor_view %x, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %pv = make_partition_view %tv : {PV}
    %c0 = constant <i32: 0> : tile<i32>
    %c1 = constant <i32: 1> : tile<i32>
    %c4 = constant <i32: 4> : tile<i32>
    %z = constant <f32: 0.0> : tile<64xf32>
    %for = for %i in (%c0 to %c4, step %c1) : tile<i32> iter_values(%t = %tok) -> (token) {{
      %s = store_view_tko weak %z, %pv[%i] token = %t : tile<64xf32>, {PV}, tile<i32> -> token
      continue %s : token
    }}
    %r = if %flag -> (token) {{
      %s2 = store_view_tko weak %z, %pv[%c0] token = %for : tile<64xf32>, {PV}, tile<i32> -> token
      yield %s2 : token
    }} else {{
      yield %for : token
    }}
{tail}    return
  }}
}}
"""


def after(tail: str) -> list:
    fn = parse_module(kernel(tail), "k.mlir").functions[0]
    users: dict = {}
    for op in fn.walk():
        for v in op.operands:
            users.setdefault(v, []).append(op)
    stores = [op for op in fn.walk() if isinstance(op, MEM.StoreViewTkoOp)]
    found = [tma.stores_after(s, users) for s in stores]
    return [None if f is None else sorted(stores.index(s) for s in f) for f in found]


def test_only_stores_follow():
    # the loop's store: itself a trip later, then the if's; the if's store: nothing after it
    assert after("") == [[0, 1], []]


def test_a_load_after_them_orders_both():
    assert after(LOAD) == [None, None]
