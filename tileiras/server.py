"""The compile server behind ``tileiras.launch`` (see there for why, the protocol and trust).

    python -m tileiras.server SOCKET_PATH     (started by tileiras itself)
    python -m tileiras.server --stop          stop every server of this user

Started detached by the first ``tileiras`` command that finds none.  It takes a lock so
only one server serves a socket, imports every compiler stage and initializes LLVM's
targets, then keeps one forked child waiting for the next connection (a new one is forked
as soon as it takes one); the parent itself never compiles, so each command starts from
the same freshly imported state.  It exits after ``TILEIRAS_SERVER_IDLE`` seconds (default
600) without a connection, within seconds of its socket file being removed or its source
files edited, and it only answers its own user.

A child runs one command as a pure function: it never opens a path the client named (the
client reads and writes for it, ``Channel``), takes from the client's environment only
the variables a compile reads, and stops as soon as the client cancels or goes away.
"""
from __future__ import annotations

import fcntl
import io
import os
import queue
import select
import signal
import socket
import sys
import threading

from .knobs import SEND, knobs
from .launch import (Interrupted, hello_message, interrupt, package_stamp, peer_uid, private_dir, process_identity,
                     recv_message, send_message, socket_dir, socket_path)


def preload() -> None:
    """Import everything a compile touches and set up LLVM, so children start warm.

    Nothing here may read the environment in a way that sticks (tool paths, knobs):
    children take the variables a compile reads from their client after the fork."""
    import difflib  # noqa: F401  (option suggestions)
    import hashlib  # noqa: F401  (line-info file names)
    import subprocess  # noqa: F401  (ptxas)
    import tempfile  # noqa: F401  (ptxas's files)

    import click  # noqa: F401  (command lines that are not plainly spelled)
    import llvmlite.binding  # noqa: F401
    import llvmlite.ir  # noqa: F401

    from . import driver, pipeline, remarks, tilelib  # noqa: F401
    from .codegen import abi, emit_arith, emit_atomics, emit_control, emit_memory, emit_mma  # noqa: F401
    from .codegen import emit_multimem, emit_reduce, emit_shape  # noqa: F401
    from .codegen import backend, host, nvvm, ptx, ptxas  # noqa: F401
    from .codegen.libdevice import load as load_libdevice; load_libdevice()  # noqa: E702
    from .codegen.llvm_targets import init_llvm
    from .lower import tileaa, tileas  # noqa: F401
    from .reader import read_bytecode  # noqa: F401
    from .text import printer  # noqa: F401
    from .verify import check_module  # noqa: F401

    init_llvm()


def _bind(path: str) -> socket.socket:
    """Listen on ``path``, replacing a stale socket file (its server is gone)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except FileNotFoundError:
        pass
    except ConnectionRefusedError:
        os.unlink(path)
    else:
        raise FileExistsError(f"a server already listens on {path}")
    finally:
        probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    sock.listen(128)
    return sock


def _still_ours(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def serve(path: str) -> int:
    stamp, identity = package_stamp(), process_identity()
    if socket_path(stamp, identity) != path:  # the code changed between the client's look and now
        return 0
    try:
        private_dir(socket_dir(), create=True)
    except PermissionError:
        return 0  # someone else's folder: never listen there
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server is starting or running
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())  # who to signal to stop it
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))  # cleans up below
    try:
        sock = _bind(path)
    except OSError:
        return 0
    inode = os.stat(path).st_ino
    spare = 0
    try:
        preload()
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
        idle = knobs.server_idle
        hello = hello_message(stamp, identity)
        # One forked "spare" child always waits in accept(), so a command finds a process
        # ready instead of waiting for a fork; it reports taking a connection on ``ready``.
        ready_r, ready_w = os.pipe()
        waited = 0.0
        while _still_ours(path, inode) and package_stamp() == stamp:  # else: its code was edited
            if not spare:
                spare = _fork_spare(sock, hello, ready_w, (lock, ready_r))
            step = min(idle - waited, 10.0)
            if select.select([ready_r], [], [], max(step, 0.0))[0]:
                os.read(ready_r, 1)
                spare, waited = 0, 0.0
                continue
            waited += step
            if waited >= idle:
                break
    finally:
        if spare:
            os.kill(spare, signal.SIGTERM)
        if _still_ours(path, inode):
            os.unlink(path)
        sock.close()
    return 0


def _fork_spare(sock: socket.socket, hello: bytes, ready: int, parent_fds: tuple[int, ...]) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:  # the spare: never returns
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for fd in parent_fds:
            os.close(fd)
        conn, _ = sock.accept()
        os.write(ready, b".")
        os.close(ready)
        sock.close()
        if peer_uid(conn) == os.getuid():
            _serve_one(conn, hello)
    finally:
        os._exit(0)


class Channel:
    """The served child's line to its client: ``read_file``/``write_file`` (``hostio``'s
    remote) and stream writes are requests the client performs and answers.

    A thread reads everything the client sends: answers go to the waiting request; a
    ``cancel``, or the connection closing, interrupts the command (SIGUSR1 to the main
    thread raises ``Interrupted``, which unwinds it as a signal does in-process)."""

    def __init__(self, conn: socket.socket):
        self.conn = conn
        self.cancelled = 0
        self._answers: queue.SimpleQueue = queue.SimpleQueue()
        self._main = threading.get_ident()
        self._raised = False
        signal.signal(signal.SIGUSR1, self._interrupt)
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self) -> None:
        try:
            while True:
                message = recv_message(self.conn)
                if message[0] == "cancel":
                    return self._cancel(int(message[1]))
                self._answers.put(message)
        except Exception:  # noqa: BLE001 - the client went away (SIGKILL, a crash)
            self._cancel(signal.SIGKILL)

    def _cancel(self, signum: int) -> None:
        self.cancelled = signum
        self._answers.put(None)
        signal.pthread_kill(self._main, signal.SIGUSR1)

    def _interrupt(self, signum: int, frame: object) -> None:
        if self.cancelled and not self._raised:
            self._raised = True
            interrupt(self.cancelled)

    def request(self, *message: object) -> bytes:
        if self.cancelled:
            raise Interrupted(self.cancelled)
        send_message(self.conn, message)
        answer = self._answers.get()
        if answer is None:
            raise Interrupted(self.cancelled)
        error, reason, data = answer
        if error:
            raise OSError(error, reason)
        return data

    def read_file(self, path: str) -> bytes:
        return self.request("read", path)

    def write_file(self, path: str, data: bytes) -> None:
        self.request("write", path, bytes(data))


class _ClientStream(io.RawIOBase):
    """The client's stdout or stderr: each write is written there by the client."""

    def __init__(self, channel: Channel, fd: int):
        super().__init__()
        self.channel, self.fd = channel, fd

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:
        self.channel.request("out", self.fd, bytes(data))
        return len(data)


def _serve_one(conn: socket.socket, hello: bytes) -> None:
    """In the forked child: run the client's command as a pure function, report the code."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # ptxas and the LLVM child are waited for
        conn.setblocking(True)
        conn.sendall(hello)
        request = recv_message(conn)
        if request[0] != "run":
            return
        _, argv, env, streams = request
        channel = Channel(conn)
        code = _run(channel, argv, env, streams)
        if code is not None:
            send_message(conn, ("exit", code))
    except Exception:  # noqa: BLE001 - the client is gone or broke the protocol
        pass
    finally:
        os._exit(0)


def _run(channel: Channel, argv: list, env: dict, streams: tuple) -> int | None:
    """The command's exit code, or None once the client has cancelled it."""
    from . import hostio, tools
    import tempfile

    for name in knobs.served_as(SEND):
        del os.environ[name]
    os.environ.update({name: str(value) for name, value in env.items()})
    tempfile.tempdir = None             # recomputed from the client's TMPDIR
    tools.find_tool_cached.cache_clear()
    hostio.use_remote(channel)
    out_encoding, out_errors, err_encoding, err_errors, out_tty = streams
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.BufferedWriter(_ClientStream(channel, 1)),
                                                   encoding=out_encoding, errors=out_errors,
                                                   line_buffering=bool(out_tty))
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.BufferedWriter(_ClientStream(channel, 2)),
                                                   encoding=err_encoding, errors=err_errors,
                                                   line_buffering=True)
    sys.argv = list(argv)
    from .driver import main

    try:
        try:
            code = main(list(argv[1:]))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:
                pass
        return code
    except Interrupted:
        return None


def stop_all() -> int:
    """Stop every compile server of this user (``python -m tileiras.server --stop``);
    returns how many were signalled."""
    stopped = 0
    try:
        locks = sorted(name for name in os.listdir(socket_dir()) if name.endswith(".lock"))
    except FileNotFoundError:
        return 0
    for name in locks:
        path = os.path.join(socket_dir(), name)
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a live server, whose pid the file names
            text = os.read(fd, 64).decode().strip()
            if text.isdigit():
                try:
                    os.kill(int(text), signal.SIGTERM)
                    stopped += 1
                except ProcessLookupError:
                    pass
        else:  # nobody holds it: a leftover of a server that is gone
            os.unlink(path)
        finally:
            os.close(fd)
    return stopped


def main() -> int:
    if sys.argv[1:] == ["--stop"]:
        print(f"stopped {stop_all()} tileiras compile server(s)")
        return 0
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.stderr.write("usage: python -m tileiras.server SOCKET_PATH | --stop\n")
        return 2
    return serve(sys.argv[1])


if __name__ == "__main__":
    sys.exit(main())
