"""Run Tile IR kernels on a real GPU through the CUDA driver (cuda-python), with the same
arguments the reference interpreter takes.

    device = open_device()
    cubin = compile_cubin(module, device.arch)           # or NVIDIA's cubin for the module
    outcome = run_cubin(device, cubin, entry, signature_of(fn), grid, args)

``args`` are the interpreter's: a numpy array for each pointer parameter (the memory it points
at), a number for each scalar (``interp.cutile_args`` expands arrays into cuTile's pointer,
shapes and strides; ``diffcheck.synthesize_args`` makes them from the IR alone).  Arrays go to
device memory (one allocation per distinct array, as the interpreter maps them), parameters are
packed by ``params.pack_params`` at the ABI's offsets, and after the launch every array is
copied back into the caller's copies: the result is a ``diffcheck.Outcome``, comparable with
the interpreter's and the emulator's by ``diffcheck.compare``.

Launching needs only numpy, cuda-python and this package's ``params``/``cubin``/``device``
modules; compiling (``compile_cubin``) needs the whole compiler and is imported lazily, so a
machine without llvmlite or ptxas can still run cubins compiled elsewhere (``bench/gpu.py``).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..diffcheck import Outcome
from ..interp.arraylist import ArrayList, arrays_of
from ..interp.values import is_nibble_dtype, pack_nibbles, unpack_nibbles
from .device import (  # noqa: F401
    CUDA_ERROR_ASSERT,
    STICKY_ERRORS,
    TRAP_ERRORS,
    ContextLost,
    Convention,
    CudaError,
    Device,
    Kernel,
    NoCudaDevice,
    NoCudaDriver,
    open_device,
    probe,
    runnable_archs,
)
from .params import PackedParams, pack_params, signature_of  # noqa: F401


def compile_cubin(module: Any, gpu_name: str) -> bytes:
    """Our cubin for ``module`` (every entry), as ``tileiras --gpu-name=<gpu_name>`` writes it."""
    from ..pipeline import CompileOptions, compile_module

    return compile_module(module, CompileOptions(gpu_name=gpu_name), "cubin")


def device_image(arr: np.ndarray) -> np.ndarray:
    """The bytes an array occupies in device memory: its own buffer when contiguous (C or F
    order: the strides passed with it describe that buffer), a C-order copy otherwise (as the
    interpreter maps it); 4-bit elements packed two a byte, rounded up to a 32-bit word as a
    ``cudaMalloc``'d buffer is (nibble stores are atomics on that word)."""
    if is_nibble_dtype(arr.dtype):
        packed = pack_nibbles(arr)
        image = np.zeros(-(-packed.size // 4) * 4, np.uint8)
        image[:packed.size] = packed
        return image
    if arr.flags.c_contiguous or arr.flags.f_contiguous:
        return arr
    return np.ascontiguousarray(arr)


def restore(arr: np.ndarray, image: np.ndarray) -> None:
    """Write a downloaded ``image`` back into ``arr`` (the inverse of ``device_image``)."""
    if is_nibble_dtype(arr.dtype):
        np.copyto(arr, unpack_nibbles(image, arr.dtype, arr.shape))
    elif image is not arr:
        np.copyto(arr, image)


def upload_arguments(device: Device, kinds: Sequence[str], args: Sequence[Any]) -> tuple[list, list]:
    """(parameter values with device addresses for arrays, [(array, image, address)])."""
    values: list[Any] = []
    buffers: list[tuple[np.ndarray, np.ndarray, int]] = []
    address: dict[int, int] = {}
    for kind, arg in zip(kinds, args):
        if isinstance(arg, np.ndarray) and kind == "ptr":
            values.append(_upload(device, arg, address, buffers))
        elif isinstance(arg, ArrayList) and kind == "ptr":  # the members, then their table
            table = arg.table([_upload(device, a, address, buffers) for a in arg.arrays])
            values.append(_upload(device, table, address, buffers))
        else:
            values.append(arg)
    return values, buffers


def _upload(device: Device, arr: np.ndarray, address: dict, buffers: list) -> int:
    """The device address of ``arr``, uploaded on first use."""
    if id(arr) not in address:
        image = device_image(arr)
        address[id(arr)] = device.alloc(image.nbytes)
        device.upload(address[id(arr)], image)
        buffers.append((arr, image, address[id(arr)]))
    return address[id(arr)]


def copy_arguments(args: Sequence[Any]) -> list[Any]:
    """``args`` with each distinct array copied once, in its own layout (an array passed
    twice stays one buffer); lists of arrays copied member by member."""
    memo: dict[int, Any] = {}
    return [memo.setdefault(id(a), a.copy(order="K") if isinstance(a, np.ndarray) else a.copy())
            if isinstance(a, (np.ndarray, ArrayList)) else a for a in args]


def run_cubin(device: Device, cubin: bytes, entry: str, kinds: Sequence[str], grid: Sequence[int],
              args: Sequence[Any], convention: Convention = Convention.CUTILE) -> Outcome:
    """Run ``entry`` of ``cubin`` over the tile grid ``grid`` on copies of ``args``.

    A trap (a Tile IR assert is ``vprintf`` + ``trap``: ``TRAP_ERRORS``) is an outcome
    (``failed``), as an assert is for the interpreter, but it is sticky: the device is lost to
    this process afterwards (``Device.lose``: later calls raise ``ContextLost``), so run kernels
    that may assert in a process of their own.  Any other CUDA error raises ``CudaError``."""
    copies = copy_arguments(args)
    kernel = device.load(cubin, entry)
    values, buffers = upload_arguments(device, kinds, copies)
    failed = False
    try:
        device.launch(kernel, grid, pack_params(kinds, values), convention)
        device.synchronize()
        for arr, image, ptr in buffers:
            device.download(ptr, image)
            restore(arr, image)
    except CudaError as err:
        buffers = []  # nothing can be freed in a lost context, or they went with a reset one
        if err.code in STICKY_ERRORS:
            device.lose(err)
        else:
            device.recover()
        if err.code not in TRAP_ERRORS:
            raise
        failed = True
    finally:
        for _, _, ptr in buffers:
            device.free(ptr)
        if device.lost is None:
            device.unload(kernel)
    return Outcome(arrays_of(copies), failed)
