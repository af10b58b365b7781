"""The data directory's lock: Kafka's ``.lock`` file at the root of each log dir.

A broker takes it first thing in ``LogManager.startup`` and holds it until shutdown, so a second
broker on the same directory (or a process opening it in embedded mode, ``pylog.client``'s
``log_dir=``, which runs the same LogManager) fails at once, before it reads or writes anything there, with a
message naming the directory and (where Linux can tell, from ``/proc/locks``) the pid and
command line of the process that holds it.

Two locks on one open file: an ``flock`` (what logcore takes on each partition directory; it
also conflicts between two holders in one process) and a POSIX record lock (``lockf``), which
is what Kafka's ``FileChannel.tryLock`` takes, so a Kafka broker on the same directory is
detected as well. POSIX locks belong to the process and are dropped when *any* descriptor of
the file is closed, so a process never opens the lock file of a directory it already holds:
``_HELD`` refuses that before ``open``.

Thread-safe (``_HELD`` is guarded); a lock is released by ``release()`` or when its process
ends, whatever way it ends.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading

LOCK_FILE = ".lock"

_HELD: set[str] = set()
_HELD_GUARD = threading.Lock()


class LogDirInUseError(OSError):
    """The data directory is locked by another broker (or another LogManager of this process).

    Attributes:
        log_dir: the directory asked for.
        holder: ``(pid, command line)`` of the process holding it, when Linux can tell;
            ``(os.getpid(), ...)`` when it is this process; None when unknown.
    """

    log_dir: str = ""
    holder: tuple[int, str] | None = None


def _in_use(errno_: int, message: str, log_dir: str, holder: tuple[int, str] | None
            ) -> LogDirInUseError:
    exc = LogDirInUseError(errno_, message)
    exc.log_dir = log_dir
    exc.holder = holder
    return exc


class DataDirLock:
    """An exclusive lock on ``<log_dir>/.lock``; see the module docstring.

    Raises (constructor):
        LogDirInUseError: another process, or this one, holds it.
        OSError: the lock file cannot be opened.
    """

    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(os.path.abspath(log_dir), LOCK_FILE)
        self._fd = -1
        with _HELD_GUARD:
            if self.path in _HELD:
                raise _in_use(errno.EAGAIN, f"data directory {log_dir} is already in use by this "
                              f"process (pid {os.getpid()})", log_dir,
                              (os.getpid(), _command_line(os.getpid())))
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = lock_holder(fd)
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                who = f"pid {holder[0]} ({holder[1]})" if holder else "another process"
                raise _in_use(
                    exc.errno, f"data directory {log_dir} is in use: {who} holds {self.path}; "
                    "stop that process (a broker, or a program with embedded pylog clients open on "
                    "the directory) or give this one another log.dirs", log_dir, holder) from None
            _HELD.add(self.path)
            self._fd = fd

    def release(self) -> None:
        """Unlock (idempotent)."""
        with _HELD_GUARD:
            fd, self._fd = self._fd, -1
            if fd >= 0:
                os.close(fd)  # drops both locks
                _HELD.discard(self.path)


def lock_holder(fd: int) -> tuple[int, str] | None:
    """The pid and command line of another process holding a lock on ``fd``'s file, read
    from ``/proc/locks`` (Linux); None where that cannot be told."""
    try:
        st = os.fstat(fd)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        # "1: FLOCK  ADVISORY  WRITE 16192 fe:00:2146473 0 EOF" (blocked waiters: "-> ...")
        fields = line.split()
        if len(fields) < 6 or "->" in fields or fields[5] != dev:
            continue
        try:
            pid = int(fields[4])
        except ValueError:
            continue
        if pid != os.getpid():
            return pid, _command_line(pid)
    return None


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return "command line unknown"
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace") or "command line unknown"
