"""pylog.log.dir_lock: the data directory's .lock, and who holds it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pylog.log.dir_lock import DataDirLock, LogDirInUseError


def test_one_holder_per_process_and_release(tmp_path) -> None:
    lock = DataDirLock(str(tmp_path))
    with pytest.raises(LogDirInUseError, match=f"already in use by this process \\(pid {os.getpid()}\\)"):
        DataDirLock(str(tmp_path))
    lock.release()
    lock.release()  # idempotent
    DataDirLock(str(tmp_path)).release()
    assert os.listdir(tmp_path) == [".lock"]


@pytest.mark.parametrize("kind", ["flock", "lockf"])  # lockf: what Kafka's FileChannel.tryLock takes
def test_another_process_is_named_with_its_command_line(tmp_path, kind) -> None:
    code = (f"import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
            f"fcntl.{kind}(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / ".lock"), "marker-arg"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        with pytest.raises(LogDirInUseError) as info:
            DataDirLock(str(tmp_path))
        message = str(info.value)
        assert f"data directory {tmp_path} is in use: pid {holder.pid} (" in message
        assert "marker-arg" in message and f"holds {tmp_path}/.lock" in message
    finally:
        holder.communicate(b"", timeout=10)
    DataDirLock(str(tmp_path)).release()  # free again once the holder is gone
