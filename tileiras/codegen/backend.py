"""LLVM's back end in a child process, started before the compiler needs it.

Two reasons to run LLVM apart from the compiler:

* LLVM reports some errors by aborting the process ("LLVM ERROR: ..."), which would take
  the compiler (or a test session, or a service embedding us) down with it; a crash of the
  child becomes a ``CompileError`` carrying LLVM's message.
* Loading LLVM (libLLVM and llvmlite's bindings: about 30 ms, a large part of a cold
  ``tileiras`` run) need not hold the compiler up.  ``compile_module`` starts the back end
  first; the child loads LLVM while the compiler lowers the module and emits its LLVM IR,
  builds the ``.nv.host`` object while the IR is emitted, and then turns the IR into PTX.
  The compiler itself never loads LLVM's bindings (``llvmlite.ir`` is plain Python).

The child runs jobs in the order they are submitted: a module-level function and its
picklable arguments go down a pipe, its picklable result (or the exception it raised)
comes back.  ``close`` kills the child, done or not (it has nothing to finish).
"""
from __future__ import annotations

import os
import pickle
import signal
import struct
from typing import Any, Callable

from ..errors import CompileError

_LEN = struct.Struct("!I")


def _read_exact(fd: int, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def _read_message(fd: int) -> Any:
    length = _LEN.unpack(_read_exact(fd, _LEN.size))[0]
    return pickle.loads(_read_exact(fd, length))


def _write_message(fd: int, value: Any) -> None:
    payload = pickle.dumps(value)
    view = memoryview(_LEN.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view):]


def _read_all(fd: int) -> bytes:
    """Everything up to the end of the pipe, which is then closed."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _outcome(fn: Callable[..., Any], args: tuple) -> tuple:
    """("ok", result) or ("raise", exception); one that cannot be pickled comes back as a
    RuntimeError naming it."""
    try:
        return ("ok", fn(*args))
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the compiler
        try:
            pickle.dumps(exc)
        except Exception:  # noqa: BLE001
            exc = RuntimeError(f"{type(exc).__name__}: {exc}")
        return ("raise", exc)


def _serve(requests: int, replies: int) -> None:
    """The child: load LLVM, then run jobs until the compiler closes ``requests``."""
    from .host import build_host_object  # noqa: F401  (the host job starts warm)
    from .llvm_targets import init_llvm

    init_llvm()
    while True:
        try:
            fn, args = _read_message(requests)
        except EOFError:
            return
        _write_message(replies, _outcome(fn, args))


class Backend:
    """The back-end child: ``submit`` a job, ``result`` waits for it, ``close`` ends the child.

    One job is in flight at a time (``submit`` first collects the previous job's outcome), so
    neither side can block writing a large message the other is not reading."""

    def __init__(self) -> None:
        self._pid = 0
        self._outcomes: list[tuple] = []
        self._submitted = 0
        self._crash: str | None = None
        if not hasattr(os, "fork"):  # pragma: no cover - non-POSIX hosts run jobs in-process
            return
        # The compiler emits with llvmlite.ir in any case; imported before the fork, the
        # child (whose llvmlite.binding needs it too) does not import it a second time.
        import llvmlite.ir  # noqa: F401

        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: never returns
            status = 1
            try:
                for fd in (requests_w, replies_r, err_r):
                    os.close(fd)
                os.dup2(err_w, 2)
                _serve(requests_r, replies_w)
                status = 0
            except BaseException as exc:  # noqa: BLE001 - LLVM did not load (memory limits...)
                line = f"\nthe LLVM back end could not start: {type(exc).__name__}: {exc}\n"
                os.write(2, line.encode("utf-8", "replace"))
            finally:
                os._exit(status)
        for fd in (requests_r, replies_w, err_w):
            os.close(fd)
        self._pid, self._requests, self._replies, self._err = pid, requests_w, replies_r, err_r

    def submit(self, fn: Callable[..., Any], *args: Any) -> int:
        """Queue ``fn(*args)`` (``fn`` a module-level function); returns the job's number."""
        if not self._pid:  # pragma: no cover - no fork: run it here
            self._outcomes.append(_outcome(fn, args))
        else:
            self._collect(self._submitted)
            if self._crash is None:
                try:
                    _write_message(self._requests, (fn, args))
                except OSError:  # the child is gone (it could not start): its message says why
                    self._lost()
        self._submitted += 1
        return self._submitted - 1

    def result(self, job: int) -> Any:
        """The job's result; the exception it raised is raised here, and a crash of the child
        (LLVM aborting) is a CompileError with LLVM's last message."""
        self._collect(job + 1)
        if job >= len(self._outcomes):
            raise CompileError(self._crash or "the LLVM back end was closed")
        kind, value = self._outcomes[job]
        if kind == "raise":
            raise value
        return value

    def _collect(self, count: int) -> None:
        """Read outcomes until ``count`` jobs have one (or the child is gone)."""
        while len(self._outcomes) < count and self._crash is None and self._pid:
            try:
                self._outcomes.append(_read_message(self._replies))
            except EOFError:
                self._lost()

    def _lost(self) -> None:
        """The child died: LLVM's last message (or how it died) becomes the error."""
        self.close()
        stderr = self._stderr.decode("utf-8", "replace").strip()
        message = stderr.splitlines()[-1] if stderr else f"LLVM back end died (status {self._status})"
        self._crash = message.removeprefix("LLVM ERROR: ")

    def close(self) -> None:
        """End the child at once (it holds nothing but LLVM) and reap it."""
        if not self._pid:
            return
        os.close(self._requests)
        os.kill(self._pid, signal.SIGKILL)  # it may still be loading LLVM: no need to wait
        _, self._status = os.waitpid(self._pid, 0)
        self._stderr = _read_all(self._err)
        os.close(self._replies)
        self._pid = 0

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
