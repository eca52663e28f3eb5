"""Every environment variable tileiras reads, as typed descriptors.

Nothing else in the package calls ``os.environ``: read ``knobs.debug`` (etc.) instead.
Each knob is read when accessed, so tests can ``monkeypatch.setenv`` freely, and a
compile-server child that takes over a client's environment sees the client's values.

This module is imported by the start-up path of every command (``tileiras.launch``), so it
stays free of ``dataclasses`` and ``typing``: plain descriptor classes import in well
under a millisecond.
"""
from __future__ import annotations

import os

#: How a served command treats a variable (``tileiras.launch``): the client SENDs it with the
#: command, since the compile reads it; only the CLIENT reads it (the server need not know it);
#: or it must MATCH the server's own value, since it changes what the programs we run do
#: (ptxas's dynamic loader), else the command runs in-process.
SEND, CLIENT, MATCH = "send", "client", "match"

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


class _EnvKnob:
    """A typed view of one environment variable (``parse`` turns its text into a value)."""

    __slots__ = ("name", "default", "help", "served")

    def __init__(self, name: str, default: object, help: str = "", served: str = SEND) -> None:
        self.name = name
        self.default = default
        self.help = help
        self.served = served

    def __get__(self, obj: object, objtype: type | None = None) -> object:
        raw = os.environ.get(self.name)
        if raw is None:
            return self.default
        return self.parse(raw)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, default={self.default!r})"

    def parse(self, raw: str) -> object:  # pragma: no cover - overridden
        raise NotImplementedError

    def absolute(self, raw: str) -> str:
        """``raw`` meaning the same from any working folder (paths are made absolute)."""
        return raw


class _BoolKnob(_EnvKnob):
    """``1/true/yes/on`` or ``0/false/no/off`` (any case); anything else keeps the default."""

    __slots__ = ()

    def parse(self, raw: str) -> bool:
        value = raw.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        return self.default


class _PathKnob(_EnvKnob):
    """A path or a search path; empty means unset."""

    __slots__ = ()

    def parse(self, raw: str) -> str | None:
        return raw or None

    def absolute(self, raw: str) -> str:
        return os.path.abspath(raw) if raw else raw


class _SearchPathKnob(_PathKnob):
    """Folders separated by ``os.pathsep``; empty entries are skipped."""

    __slots__ = ()

    def absolute(self, raw: str) -> str:
        return os.pathsep.join(os.path.abspath(entry) for entry in raw.split(os.pathsep) if entry)


class _SecondsKnob(_EnvKnob):
    """A non-negative number of seconds; anything unparsable keeps the default."""

    __slots__ = ()

    def parse(self, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            return self.default
        return value if value >= 0 else self.default


class _Knobs:
    """Namespace of knobs; use the module-level ``knobs`` instance."""

    debug = _BoolKnob("TILEIRAS_DEBUG", False,
                      "show Python tracebacks for internal errors instead of one error line")
    cuda_home = _PathKnob("CUDA_HOME", None, "CUDA toolkit root (its bin/ is searched for tools)")
    cuda_path = _PathKnob("CUDA_PATH", None, "alternative spelling of CUDA_HOME")
    path = _SearchPathKnob("PATH", None, "executable search path")
    ptxas = _PathKnob("TILEIRAS_PTXAS", None, "the ptxas to run (a wrapper script is fine), instead of "
                      "the one the wheels, PATH or CUDA_HOME hold")
    server = _BoolKnob("TILEIRAS_SERVER", True,
                       "compile in a forked child of a warm background server (0 to turn off)", CLIENT)
    server_idle = _SecondsKnob("TILEIRAS_SERVER_IDLE", 600.0,
                               "seconds an unused compile server waits before it exits", CLIENT)
    runtime_dir = _PathKnob("XDG_RUNTIME_DIR", None,
                            "per-user runtime folder for the server socket (else the temp folder)", CLIENT)
    # A compile server loads libdevice before it forks (``server.preload``), so its children
    # never look for the cache: the cache folder is a CLIENT knob, not sent with a command.
    cache_home = _PathKnob("XDG_CACHE_HOME", None, "per-user cache folder (tileiras/ in it holds "
                           "libdevice split for fast loading); else ~/.cache", CLIENT)
    home = _PathKnob("HOME", None, "the user's home folder (for ~/.cache)", CLIENT)
    tmpdir = _PathKnob("TMPDIR", None, "temporary folder (ptxas's files)")
    temp = _PathKnob("TEMP", None, "temporary folder, where TMPDIR is unset")
    tmp = _PathKnob("TMP", None, "temporary folder, where TMPDIR and TEMP are unset")
    warp_specialize = _BoolKnob("TILEIRAS_WARP_SPECIALIZE", None,
                                "TMA rings: 1 warp-specializes them where the kernel allows it (a "
                                "producer warp, setmaxnreg), 0 never; unset: the measured default (a "
                                "persistent GEMM's ring is, a top-level K loop's is not)")
    mma_tma_ring = _BoolKnob("TILEIRAS_MMA_TMA_RING", True,
                             "sm_90 and later: K loops multiplying with mma.sync TMA-load their tiles into "
                             "a ring of mbarrier stages (NVIDIA's form); 0: cp.async rings, as on sm_80")
    s_ahead = _BoolKnob("TILEIRAS_S_AHEAD", True,
                        "sm_90 flash attention: Q @ K^T of the next iteration runs on wgmma during this "
                        "iteration's softmax where the TMA ring has 3 stages or more; 0: after it")
    product_ahead = _BoolKnob("TILEIRAS_PRODUCT_AHEAD", False,
                              "sm_90: a wgmma K loop that scales each tile's product (an fp8 GEMM with block "
                              "scales) issues the next tile's group before using this one's; off until a GPU "
                              "measures it: copying the product's registers costs executed instructions")
    tma_stream = _BoolKnob("TILEIRAS_TMA_STREAM", True,
                           "sm_90 and sm_100: a loop streaming TMA-loaded tiles (a persistent norm's row "
                           "blocks) issues each trip's copies trips ahead (tma_stream.TmaStream); "
                           "0: each trip copies and waits for its own")
    wide_loop_warps = _BoolKnob("TILEIRAS_WIDE_LOOP_WARPS", True,
                                "a kernel without matrix multiplies that makes tiles of 16384 elements or "
                                "more in a loop (a persistent norm's row blocks), or holds 128 registers a "
                                "thread whole at a reduction or scan, runs on 8 warps "
                                "(cta_size.wide_loop_tiles, wide_live_tiles); 0: on 4, as NVIDIA's tileiras "
                                "on sm_80")
    tcgen05 = _BoolKnob("TILEIRAS_TCGEN05", True,
                        "sm_100 family: matrix multiplies of 16-bit, tf32 and 8-bit floats run on tcgen05.mma "
                        "(tensor memory accumulators) where lower/tensor_memory.py allows; 0: mma.sync")
    device_tensor_maps = _BoolKnob("TILEIRAS_DEVICE_TENSOR_MAPS", True,
                                   "sm_90 and later: a K loop whose views the kernel makes from addresses it "
                                   "loads (a grouped GEMM's) goes through TMA with tensor maps the kernel "
                                   "builds in its workspace (NVIDIA's form); 0: a ring of cp.async copies")
    verify_each = _BoolKnob("TILEIRAS_VERIFY_EACH", False, "check the TileAS invariants after every pass "
                            "(lower/tileas_verify.py; the test suite turns it on)")
    ld_preload = _PathKnob("LD_PRELOAD", None, "libraries preloaded into ptxas", MATCH)
    ld_library_path = _PathKnob("LD_LIBRARY_PATH", None, "ptxas's library search path", MATCH)

    @classmethod
    def served_as(cls, how: str, absolute: bool = False) -> dict[str, str]:
        """The variables of the knobs served ``how`` that are set, name -> text (with paths
        made absolute, for a process in another working folder, when ``absolute``)."""
        chosen = [k for k in vars(cls).values() if isinstance(k, _EnvKnob) and k.served == how]
        return {k.name: k.absolute(os.environ[k.name]) if absolute else os.environ[k.name]
                for k in chosen if k.name in os.environ}


knobs = _Knobs()
