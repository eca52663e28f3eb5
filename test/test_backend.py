"""LLVM's back-end process (``tileiras.codegen.backend``): jobs, errors, crashes, clean-up."""
from __future__ import annotations

import os

import pytest

from tileiras.codegen.backend import Backend
from tileiras.codegen.llvm_targets import nvptx_assembly
from tileiras.errors import CompileError


def _die_like_llvm() -> None:
    os.write(2, b"LLVM ERROR: Cannot select: intrinsic %llvm.nvvm.bogus\n")
    os._exit(1)


def test_jobs_run_in_a_child_in_order() -> None:
    with Backend() as backend:
        pid, power = backend.submit(os.getpid), backend.submit(pow, 2, 10)
        assert backend.result(power) == 1024
        assert backend.result(pid) not in (os.getpid(), 0)


def test_exceptions_come_back() -> None:
    with Backend() as backend:
        job = backend.submit(int, "not a number")
        with pytest.raises(ValueError, match="invalid literal"):
            backend.result(job)
        assert backend.result(backend.submit(abs, -3)) == 3  # the child keeps serving


def test_llvm_errors_come_back() -> None:
    with Backend() as backend:
        with pytest.raises(RuntimeError, match="parsing error"):
            backend.result(backend.submit(nvptx_assembly, "this is not LLVM IR", "sm_90a", 3))


def test_a_crash_is_a_compile_error_with_llvms_message() -> None:
    with Backend() as backend:
        first, second = backend.submit(_die_like_llvm), backend.submit(abs, -1)
        for job in (second, first):
            with pytest.raises(CompileError, match=r"^error: Cannot select: intrinsic %llvm.nvvm.bogus$"):
                backend.result(job)


def test_a_silent_crash_names_the_status() -> None:
    with Backend() as backend:
        with pytest.raises(CompileError, match=r"LLVM back end died \(status"):
            backend.result(backend.submit(os._exit, 3))


def test_large_messages_and_unread_results() -> None:
    """Megabyte requests and replies, and closing with a reply nobody read, never hang."""
    backend = Backend()
    big = "x" * (1 << 20)
    unread = backend.submit(bytes, 1 << 20)
    assert backend.result(backend.submit(len, big)) == len(big)
    assert len(backend.result(unread)) == 1 << 20
    backend.submit(bytes, 1 << 20)
    backend.close()
    backend.close()  # twice is fine


def test_close_ends_a_child_that_is_still_loading_llvm() -> None:
    """A compilation that fails before reaching LLVM does not wait for LLVM to load."""
    backend = Backend()
    pid = backend._pid
    backend.close()
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(pid, 0)
    assert backend._status != 0  # killed, not exited after loading LLVM
