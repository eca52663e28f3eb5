"""Run LLVM's back end in a forked child process.

LLVM reports some errors by aborting the process ("LLVM ERROR: ..."), which
would take the whole compiler (or a test session, or a service embedding us)
down with it.  ``Isolated`` forks, runs the function in the child, and turns a
crash into a ``CompileError`` carrying LLVM's message.
"""
from __future__ import annotations

import os
import pickle
from typing import Any, Callable

from ..errors import CompileError


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


class Isolated:
    """``fn(*args)`` started in a forked child; ``result()`` waits for it.

    The parent is free in between, so the compiler overlaps LLVM's PTX generation with
    work that does not need it (the .nv.host object)."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self._value: Any = None
        self._pid = 0
        if not hasattr(os, "fork"):  # pragma: no cover - non-POSIX hosts run in-process
            self._value = fn(*args)
            return
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: never returns
            try:
                os.close(out_r)
                os.close(err_r)
                os.dup2(err_w, 2)
                try:
                    payload = pickle.dumps(("ok", fn(*args)))
                except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
                    payload = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
                view = memoryview(payload)
                while view:
                    n = os.write(out_w, view)
                    view = view[n:]
            finally:
                os._exit(0)
        os.close(out_w)
        os.close(err_w)
        self._pid, self._out, self._err = pid, out_r, err_r

    def result(self) -> Any:
        """The child's (picklable) result, or a CompileError with LLVM's message."""
        if not self._pid:
            return self._value
        data = _read_all(self._out)
        stderr = _read_all(self._err).decode("utf-8", "replace").strip()
        _, status = os.waitpid(self._pid, 0)
        self._pid = 0
        if data:
            kind, value = pickle.loads(data)
            if kind == "ok":
                self._value = value
                return value
            raise CompileError(f"LLVM failed: {value}")
        message = stderr.splitlines()[-1] if stderr else f"LLVM back end died (status {status})"
        raise CompileError(message.removeprefix("LLVM ERROR: "))

