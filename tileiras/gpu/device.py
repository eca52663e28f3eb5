"""The CUDA driver through cuda-python (``cuda.bindings.driver``): one device, its cubins,
device memory, launches and event timing.

Every driver call goes through ``call``, which raises ``CudaError`` naming the call and the
error (``cuGetErrorName``/``cuGetErrorString``), so a failure is one readable line.  Without
the bindings or without ``libcuda`` the first use raises ``NoCudaDriver``; without a device,
``NoCudaDevice``.  Both are ``TileIRError``s: the command-line tools print them as one line.

Cubins are loaded as cuTile loads them (``cuLibraryLoadData`` then ``cuLibraryGetKernel``),
so the driver sees what it sees under cuTile, ``.nv.host`` callbacks included.  A launch uses
one of two conventions (``Convention``): cuTile's (block 1x1x1, no shared memory, no cluster
attribute: the driver takes the CTA size and the cluster from the cubin), or an explicit one
(``REQNTID`` threads, ``CTA_PER_CLUSTER`` as a cluster attribute, the grid counted in CTAs),
for a driver that does not read them; which one works is a question the first GPU run answers.
"""
from __future__ import annotations

import ctypes
import enum
import functools
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from ..errors import TileIRError
from .cubin import KernelFacts, kernel_facts
from .params import PackedParams

#: CUDA_ERROR_ASSERT: a device-side assert fired (the context is unusable afterwards).
CUDA_ERROR_ASSERT = 710
#: Errors that the driver makes sticky: the context and every later call of the process fail
#: with them, a primary-context reset included ("the process must be terminated and
#: relaunched"): an illegal address, a launch timeout, an assert, a hardware stack error, an
#: illegal instruction, a misaligned address, an invalid address space, an invalid PC, a failed
#: launch.
STICKY_ERRORS = frozenset({700, 702, 710, 714, 715, 716, 717, 718, 719})
#: How a kernel's ``trap`` ends its launch: Tile IR asserts print with ``vprintf`` and ``trap``
#: (NVIDIA's tileiras and ours), which the driver reports as CUDA_ERROR_LAUNCH_FAILED (719) or
#: CUDA_ERROR_ILLEGAL_INSTRUCTION (715); ``__assertfail`` as CUDA_ERROR_ASSERT.
TRAP_ERRORS = frozenset({710, 715, 719})
#: Statically allocated shared memory above this needs no opt-in for Tile IR kernels (ptxas's
#: extended shared memory), but dynamic shared memory above it does.
DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024


class NoCudaDriver(TileIRError):
    """cuda-python or libcuda is missing: nothing can run on a GPU here."""

    exit_code = 1


class NoCudaDevice(NoCudaDriver):
    """The driver loads but sees no device."""


class CudaError(TileIRError):
    """A driver call failed; ``name`` is the CUresult's name (``CUDA_ERROR_INVALID_IMAGE``)."""

    exit_code = 1

    def __init__(self, call: str, code: int, name: str, text: str):
        super().__init__(f"{call} failed: {name} ({text})")
        self.call, self.code, self.name = call, code, name


class ContextLost(TileIRError):
    """An earlier sticky error (``STICKY_ERRORS``) left this process unable to use the GPU."""

    exit_code = 1


class Convention(enum.Enum):
    CUTILE = "cutile"
    EXPLICIT = "explicit"


def load_bindings() -> Any:
    """``cuda.bindings.driver``, initialized; ``NoCudaDriver``/``NoCudaDevice`` otherwise."""
    try:
        from cuda.bindings import driver
    except ImportError as err:
        raise NoCudaDriver(f"no CUDA driver: cuda-python is not installed ({err.name}); "
                           "pip install 'tileiras[gpu]'") from None
    try:
        (result,) = driver.cuInit(0)
    except Exception as err:  # noqa: BLE001 - the bindings raise their own loader errors
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise NoCudaDriver(f"no CUDA driver: libcuda cannot be loaded ({reason})") from None
    if int(result) == int(driver.CUresult.CUDA_ERROR_NO_DEVICE):
        raise NoCudaDevice("no CUDA driver can use a device here: cuInit found no CUDA device")
    if int(result) != 0:
        raise NoCudaDriver(f"no CUDA driver: cuInit failed: {error_name(driver, result)}")
    return driver


def error_name(driver: Any, result: Any) -> str:
    err, name = driver.cuGetErrorName(result)
    return name.decode() if int(err) == 0 and name else f"CUresult {int(result)}"


def call(driver: Any, name: str, *args: Any) -> Any:
    """``driver.<name>(*args)``; the value(s) after the CUresult, or ``CudaError``."""
    out = getattr(driver, name)(*args)
    result, values = out[0], out[1:]
    if int(result) != 0:
        err, text = driver.cuGetErrorString(result)
        raise CudaError(name, int(result), error_name(driver, result),
                        text.decode() if int(err) == 0 and text else "no description")
    return values[0] if len(values) == 1 else (values or None)


def arch_of(capability: tuple[int, int]) -> str:
    """The ``--gpu-name`` of a compute capability: (9, 0) -> ``sm_90``."""
    return f"sm_{capability[0]}{capability[1]}"


def runnable_archs(capability: tuple[int, int], archs: Sequence[str]) -> list[str]:
    """The ``archs`` whose cubins a device of ``capability`` runs.  A cubin runs only on its
    major version; from sm_90 on, tileiras compiles for the arch-specific ``sm_XXa``, which
    runs on that exact architecture only, and below it on minors up to the device's."""
    major, minor = capability
    out = []
    for arch in archs:
        sm = int(arch[3:])
        if sm // 10 != major:
            continue
        if (sm >= 90 and sm % 10 == minor) or (sm < 90 and sm % 10 <= minor):
            out.append(arch)
    return out


@dataclass
class Kernel:
    """A loaded kernel: the driver's handle and what the cubin says about it."""

    name: str
    function: Any
    facts: KernelFacts
    library: Any


class Device:
    """One CUDA device with its primary context current on this thread."""

    def __init__(self, ordinal: int = 0):
        self.driver = load_bindings()
        if call(self.driver, "cuDeviceGetCount") <= ordinal:
            raise NoCudaDevice(f"no CUDA driver can use device {ordinal}: the driver sees no such device")
        self.handle = call(self.driver, "cuDeviceGet", ordinal)
        self.context = call(self.driver, "cuDevicePrimaryCtxRetain", self.handle)
        call(self.driver, "cuCtxSetCurrent", self.context)
        #: The sticky error that ended this process's use of the device (``lose``), if any.
        self.lost: Optional[str] = None

    def lose(self, err: CudaError) -> None:
        """Record a sticky error: every later load, allocation and launch raises ``ContextLost``."""
        self.lost = err.name

    def usable(self) -> None:
        if self.lost is not None:
            raise ContextLost(f"the GPU is unusable in this process after {self.lost} (the driver keeps "
                              f"that error: only a new process can run kernels again)")

    # -- facts
    def attribute(self, name: str) -> int:
        return int(call(self.driver, "cuDeviceGetAttribute", getattr(self.driver.CUdevice_attribute, name),
                        self.handle))

    @property
    def capability(self) -> tuple[int, int]:
        return (self.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
                self.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"))

    @property
    def arch(self) -> str:
        return arch_of(self.capability)

    @property
    def name(self) -> str:
        return call(self.driver, "cuDeviceGetName", 256, self.handle).split(b"\0")[0].decode()

    @property
    def driver_version(self) -> str:
        v = int(call(self.driver, "cuDriverGetVersion"))
        return f"{v // 1000}.{v % 1000 // 10}"

    # -- code
    def load(self, cubin: bytes, entry: str) -> Kernel:
        """Load ``cubin`` as cuTile does and look up ``entry``."""
        self.usable()
        library = call(self.driver, "cuLibraryLoadData", cubin, [], [], 0, [], [], 0)
        kernel = call(self.driver, "cuLibraryGetKernel", library, entry.encode())
        function = call(self.driver, "cuKernelGetFunction", kernel)
        facts = kernel_facts(cubin).get(entry) or KernelFacts(entry, (1, 1, 1), (1, 1, 1), (), None, None)
        return Kernel(entry, function, facts, library)

    def unload(self, kernel: Kernel) -> None:
        call(self.driver, "cuLibraryUnload", kernel.library)

    def function_attribute(self, kernel: Kernel, name: str) -> int:
        return int(call(self.driver, "cuFuncGetAttribute", getattr(self.driver.CUfunction_attribute, name),
                        kernel.function))

    # -- memory
    def alloc(self, nbytes: int) -> int:
        self.usable()
        return int(call(self.driver, "cuMemAlloc", max(int(nbytes), 1)))

    def free(self, ptr: int) -> None:
        call(self.driver, "cuMemFree", ptr)

    def upload(self, ptr: int, host: np.ndarray) -> None:
        host = np.ascontiguousarray(host) if not (host.flags.c_contiguous or host.flags.f_contiguous) else host
        call(self.driver, "cuMemcpyHtoD", ptr, host.ctypes.data, host.nbytes)

    def download(self, ptr: int, host: np.ndarray) -> None:
        """Copy ``host.nbytes`` bytes into ``host``, which must be contiguous in C or F order."""
        assert host.flags.c_contiguous or host.flags.f_contiguous
        call(self.driver, "cuMemcpyDtoH", host.ctypes.data, ptr, host.nbytes)

    def fill(self, ptr: int, nbytes: int, byte: int) -> None:
        call(self.driver, "cuMemsetD8", ptr, byte, nbytes)

    def synchronize(self) -> None:
        call(self.driver, "cuCtxSynchronize")

    # -- launches
    def launch(self, kernel: Kernel, grid: Sequence[int], params: PackedParams,
               convention: Convention = Convention.CUTILE, dynamic_smem: int = 0, stream: Any = None) -> None:
        """Launch over the tile grid ``grid``; asynchronous (``synchronize`` to wait)."""
        self.usable()
        d = self.driver
        config = d.CUlaunchConfig()
        gx, gy, gz = (tuple(int(g) for g in grid) + (1, 1))[:3]
        attrs = []
        if convention is Convention.EXPLICIT:
            bx, by, bz = kernel.facts.threads
            cx, cy, cz = kernel.facts.cluster
            gx, gy, gz = gx * cx, gy * cy, gz * cz
            if kernel.facts.cta_per_cluster > 1:
                attr = d.CUlaunchAttribute()
                attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cx, cy, cz
                attrs.append(attr)
        else:
            bx = by = bz = 1
        if dynamic_smem > DEFAULT_DYNAMIC_SMEM_LIMIT:
            call(d, "cuFuncSetAttribute", kernel.function,
                 d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_smem)
        config.gridDimX, config.gridDimY, config.gridDimZ = gx, gy, gz
        config.blockDimX, config.blockDimY, config.blockDimZ = bx, by, bz
        config.sharedMemBytes = dynamic_smem
        config.hStream = stream if stream is not None else d.CUstream(0)
        config.attrs, config.numAttrs = attrs, len(attrs)
        buffer = ctypes.create_string_buffer(params.buffer, max(len(params.buffer), 1))
        pointers = (ctypes.c_void_p * max(len(params.offsets), 1))(
            *[ctypes.addressof(buffer) + off for off in params.offsets])
        call(d, "cuLaunchKernelEx", config, kernel.function, ctypes.addressof(pointers), 0)

    def recover(self) -> None:
        """Start a fresh primary context after a failed launch whose error is not sticky (a
        refused configuration); after a sticky one (``STICKY_ERRORS``) nothing helps but a new
        process: see ``lose``."""
        call(self.driver, "cuDevicePrimaryCtxRelease", self.handle)
        call(self.driver, "cuDevicePrimaryCtxReset", self.handle)
        self.context = call(self.driver, "cuDevicePrimaryCtxRetain", self.handle)
        call(self.driver, "cuCtxSetCurrent", self.context)

    # -- timing
    def time_ms(self, run: Any, repeat: int, warmup: int = 3) -> list[float]:
        """Milliseconds of each of ``repeat`` calls of ``run(i)`` (after ``warmup`` untimed
        ones), measured with CUDA events around each call."""
        d = self.driver
        for i in range(warmup):
            run(i)
        self.synchronize()
        flags = d.CUevent_flags.CU_EVENT_DEFAULT
        events = [(call(d, "cuEventCreate", flags), call(d, "cuEventCreate", flags)) for _ in range(repeat)]
        for i, (start, end) in enumerate(events):
            call(d, "cuEventRecord", start, d.CUstream(0))
            run(warmup + i)
            call(d, "cuEventRecord", end, d.CUstream(0))
        self.synchronize()
        times = [float(call(d, "cuEventElapsedTime", start, end)) for start, end in events]
        for start, end in events:
            call(d, "cuEventDestroy", start)
            call(d, "cuEventDestroy", end)
        return times


@functools.cache
def open_device(ordinal: int = 0) -> Device:
    """The device, opened once per process (a primary context is per process anyway)."""
    return Device(ordinal)


def probe() -> Optional[str]:
    """None when a device can be opened, else the one-line reason (for skipping tests)."""
    try:
        open_device()
    except NoCudaDriver as err:
        return err.message
    return None
