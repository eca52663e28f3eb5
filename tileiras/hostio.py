"""The files a command reads and writes, as a compiler reads and writes them.

Every path the user names (the input, ``-o``, ``-l`` libraries, the remarks file, a tile
library's parts) is read with ``read_file`` and written with ``write_file``; nothing else in
the compiler opens a user's path.  That is what lets the compile server stay a pure
function: in a served command these two calls go back to the client (``tileiras.launch``),
which performs them itself, in its own mount namespace, working folder, credentials and
umask (``use_remote``).

``write_file`` writes as GCC and LLVM do:

* a regular file, or a new path: the whole output or nothing.  The bytes go to a temporary
  file beside the target, which is then renamed over it; an existing file keeps its mode
  (and, where we may, its owner).  A symbolic link is followed and its target replaced;
  the link stays a link.
* anything else (a character device such as ``/dev/null``, a FIFO, a socket, a terminal,
  ``/dev/stdout``): opened and written through, never replaced.
* a writable file in a folder where no temporary file can be made (read-only folder):
  written through in place.

This module is imported by the served client on its short start-up path, so it uses only
``os`` and ``stat``.
"""
from __future__ import annotations

import errno
import os
import stat

#: Set in a compile server's child: an object with ``read_file``/``write_file`` that asks
#: the client to do the work (``tileiras.server``).
_remote = None

#: Where a temporary file cannot be made, but the target may still be writable in place.
_NO_TEMP = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


def use_remote(remote: object) -> None:
    """Route every user path through ``remote`` (the compile server's child calls this)."""
    global _remote
    _remote = remote


def read_file(path: str) -> bytes:
    """The whole file; ``OSError`` (with the errno the user's system gave) if it cannot be read."""
    if _remote is not None:
        return _remote.read_file(path)
    return read_local(path)


def write_file(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` as described above; ``OSError`` if that is impossible
    (then nothing was created or changed)."""
    if _remote is not None:
        _remote.write_file(path, data)
    else:
        write_local(path, data)


def read_local(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write_local(path: str, data: bytes) -> None:
    try:
        st = os.stat(path)  # follows links, /dev/stdout's magic ones included
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_through(path, data, truncate=False)
        return
    real = os.path.realpath(path)
    if st is not None and not _same_file(real, st):
        # Reached through a link that names no path (``/dev/stdout`` -> ``/proc/self/fd/1``
        # -> a file the shell opened): the file behind it is the one to write.
        _write_through(path, data, truncate=True)
        return
    try:
        _replace(real, data, st)
    except OSError as err:
        if st is None or err.errno not in _NO_TEMP:
            raise
        _write_through(real, data, truncate=True)


def _same_file(path: str, st: os.stat_result) -> bool:
    try:
        other = os.stat(path)
    except OSError:
        return False
    return (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino)


def _write_through(path: str, data: bytes, truncate: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | (os.O_TRUNC if truncate else 0))
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _replace(target: str, data: bytes, existing: os.stat_result | None) -> None:
    """Write a temporary file beside ``target`` and rename it over ``target``."""
    folder, name = os.path.split(target)
    fd, tmp = _temporary(folder or ".", name)
    try:
        try:
            write_all(fd, data)
            if existing is not None:
                _keep_owner_and_mode(fd, existing)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        tmp = None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _temporary(folder: str, name: str) -> tuple[int, str]:
    """A new file ``.NAME.XXXXXXXX.tmp`` in ``folder``, created with mode 0666 & ~umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    for _ in range(100):
        tmp = os.path.join(folder, f".{name}.{os.urandom(4).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), folder)


def _keep_owner_and_mode(fd: int, existing: os.stat_result) -> None:
    if existing.st_uid != os.geteuid() or existing.st_gid != os.getegid():
        try:  # only root (or a member of the group) may; a plain user's file stays theirs anyway
            os.fchown(fd, existing.st_uid, existing.st_gid)
        except OSError:
            pass
    os.fchmod(fd, stat.S_IMODE(existing.st_mode))
