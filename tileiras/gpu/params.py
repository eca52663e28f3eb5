"""Kernel parameters as the driver takes them: a byte buffer laid out as the kernel ABI says.

Pure functions, testable without a GPU.  A kernel's signature is the tuple of its parameter
*kinds* (``ptr`` or a scalar type name such as ``i32`` or ``bf16``: ``abi.param_kind``), so
a launcher needs neither the IR nor the compiler: ``bench/gpu.py`` ships kinds in a manifest
to a machine that has no compiler at all.  Offsets and sizes come from ``codegen.abi``,
the same rules that declare the PTX ``.param``s, so the packer cannot drift from what the
kernel reads.  Only the user parameters are packed: the hidden tensor-map parameters of
NVIDIA's TMA kernels are written by the driver from the cubin's ``.nv.host`` callbacks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..codegen import abi

#: numpy dtypes that encode each scalar kind's bytes (little-endian, as the GPU reads them).
_FLOAT_DTYPES = {"f32": "<f4", "f64": "<f8", "f16": "<f2"}


@dataclass(frozen=True)
class PackedParams:
    """The parameter buffer of one launch: ``buffer[offsets[i]:offsets[i] + sizes[i]]`` is
    parameter ``i``; the driver gets a pointer to each of those slices (``kernelParams``)."""

    buffer: bytes
    offsets: tuple[int, ...]
    sizes: tuple[int, ...]


def signature_of(fn: Any) -> tuple[str, ...]:
    """The parameter kinds of entry ``fn`` (a ``tileiras.ir.core.Function``)."""
    return tuple(abi.param_kind(t) for t in fn.type.inputs)


def param_slots(kinds: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """(offset, size) of every parameter of ``kinds``."""
    kinds = tuple(kinds)
    return tuple((off, abi.kind_layout(k)[0]) for off, k in zip(abi.kind_offsets(kinds), kinds))


def encode_param(kind: str, value: Any) -> bytes:
    """The bytes of one parameter: a device address or an integer wraps to the kind's width
    (cuTile passes unsigned values in the signed slots), floats round to the kind's format."""
    size, _ = abi.kind_layout(kind)
    if kind == abi.POINTER_KIND or kind.startswith("i"):
        return (int(value) & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    if kind == "bf16":
        import ml_dtypes

        return np.asarray(value, dtype=np.float64).astype(ml_dtypes.bfloat16).tobytes()
    if kind in _FLOAT_DTYPES:
        return np.asarray(value, dtype=np.float64).astype(_FLOAT_DTYPES[kind]).tobytes()
    raise ValueError(f"no encoding for parameter kind '{kind}'")


def pack_params(kinds: Sequence[str], values: Sequence[Any]) -> PackedParams:
    """Lay ``values`` (device addresses for ``ptr`` kinds, numbers otherwise) out at the ABI's
    offsets; padding bytes are zero."""
    if len(kinds) != len(values):
        raise ValueError(f"the kernel takes {len(kinds)} parameters, got {len(values)}")
    slots = param_slots(kinds)
    end = max((off + size for off, size in slots), default=0)
    buffer = bytearray(end)
    for (off, size), kind, value in zip(slots, kinds, values):
        buffer[off:off + size] = encode_param(kind, value)
    return PackedParams(bytes(buffer), tuple(o for o, _ in slots), tuple(s for _, s in slots))
