"""Vector add in cuTile, exported to Tile IR bytecode (``examples/vadd.tileir``).

    python examples/vadd.py [OUTPUT]   # needs cuda-tile (pip install -e '.[test]'); no GPU

The exported file is committed, so compiling the example needs only tileiras.
"""
from __future__ import annotations

import sys
from pathlib import Path

import cuda.tile as ct
from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature, export_kernel

TILE = 128


@ct.kernel
def vadd(a, b, c, tile: ct.Constant[int]):
    block = ct.bid(0)
    x = ct.load(a, index=(block,), shape=(tile,))
    y = ct.load(b, index=(block,), shape=(tile,))
    ct.store(c, index=(block,), tile=x + y)


def signature() -> KernelSignature:
    array = ArrayConstraint(ct.float32, 1, index_dtype=ct.int32, stride_lower_bound_incl=0,
                            alias_groups=(), may_alias_internally=False, stride_constant=(1,))
    params = [array, array, array, TILE]
    return KernelSignature(params, CallingConvention.cutile_python_v1()).with_mangled_symbol("vadd")


def main(output: str) -> None:
    export_kernel(vadd, [signature()], output, gpu_code="sm_90",
                  output_format="tileir_bytecode", bytecode_version="13.1")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).with_suffix(".tileir")))
