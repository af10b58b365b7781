"""FileRegion: a byte range of a segment file, sent to a socket without entering Python.

``Log.read`` answers with a FileRegion instead of bytes (Kafka's ``FileRecords.slice``):
the broker puts it in a response's chunk list and writes it with ``os.sendfile``, so record
data goes from the page cache to the socket buffer with no copy through user space.

A region keeps its segment's file descriptor alive (a shared, reference-counted handle),
so it stays readable after retention renames and unlinks the segment, or the log closes:
the descriptor is closed when the last region or segment holding it is gone.

Thread-safety: a FileRegion is immutable; ``read`` and ``transfer_to`` use ``pread`` /
``sendfile`` with explicit positions and may run in any number of threads at once.
"""

from __future__ import annotations

import errno
import os

from .errors import LogcoreError


class SharedFd:
    """An open file descriptor closed when the last reference to this object goes away.

    Segments and the regions cut from them hold it; nobody closes the descriptor
    explicitly, so a region can never see its descriptor number reused for another file.
    """

    __slots__ = ("fd", "path", "__weakref__")

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path

    def __del__(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:  # pragma: no cover - nothing useful to do in a finaliser
                pass

    def __repr__(self) -> str:
        return f"SharedFd({self.fd}, {self.path!r})"


_SENDFILE_CHUNK = 1 << 30  # Linux sends at most ~2 GiB per call; stay well below


class FileRegion:
    """``size`` bytes at ``position`` of a segment file, on record-batch boundaries.

    Attributes:
        position: byte position of the first batch in the segment file.
        size: length in bytes (0 for an empty read).
        first_offset: base offset of the first batch (the requested offset when empty).
        last_offset: last offset of the last batch (``first_offset - 1`` when empty).
        path: the segment file the region was cut from (it may since have been renamed).
    """

    __slots__ = ("_file", "position", "size", "first_offset", "last_offset")

    def __init__(
        self, file: SharedFd | None, position: int, size: int, first_offset: int, last_offset: int
    ) -> None:
        self._file = file
        self.position = position
        self.size = size
        self.first_offset = first_offset
        self.last_offset = last_offset

    @property
    def fileno(self) -> int:
        """The segment's file descriptor (-1 for an empty region without a file).

        Valid for as long as this region is alive; do not close it.
        """
        return self._file.fd if self._file is not None else -1

    @property
    def path(self) -> str | None:
        return self._file.path if self._file is not None else None

    def __len__(self) -> int:
        return self.size

    def head(self, size: int, last_offset: int) -> FileRegion:
        """The first ``size`` bytes of this region as a region of their own (same file,
        no copy). The caller knows that they end on a batch boundary, after the batch
        whose last offset is ``last_offset`` (e.g. from a read at ``last_offset + 1``).

        Raises:
            ValueError: ``size`` outside ``[0, self.size]``.
        """
        if not 0 <= size <= self.size:
            raise ValueError(f"head of {size} bytes of a region of {self.size}")
        return FileRegion(self._file, self.position, size, self.first_offset,
                          last_offset if size else self.first_offset - 1)

    def __bool__(self) -> bool:
        return self.size > 0

    def read(self) -> bytes:
        """The region's bytes, copied into a new ``bytes`` object.

        Raises:
            LogcoreError: the file was truncated under the region (a replica truncation).
        """
        if self.size == 0:
            return b""
        assert self._file is not None
        data = os.pread(self._file.fd, self.size, self.position)
        if len(data) < self.size:
            parts = [data]
            got = len(data)
            while got < self.size:
                more = os.pread(self._file.fd, self.size - got, self.position + got)
                if not more:
                    raise self._truncated(got)
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        return data

    def transfer_to(self, fd: int, offset: int = 0) -> int:
        """Send bytes ``[offset, size)`` of the region to ``fd`` with ``os.sendfile``.

        Partial writes are continued in a loop. On a non-blocking descriptor whose buffer
        is full (EAGAIN) it returns at once with the count sent so far (possibly 0): wait
        until ``fd`` is writable and call again with ``offset`` advanced by the total
        returned. A blocking descriptor gets everything in one call. Where ``sendfile``
        cannot serve the descriptor (EINVAL/ENOSYS/EOPNOTSUPP) it falls back to
        ``pread`` + ``write``.

        Args:
            fd: a socket, pipe or file descriptor (an object with ``fileno()`` works too).
            offset: bytes of this region already sent by earlier calls.

        Returns:
            The number of bytes sent by this call.

        Raises:
            ValueError: offset outside [0, size].
            OSError: the write failed (EPIPE, ECONNRESET, ...).
            LogcoreError: the file was truncated under the region.
        """
        if not 0 <= offset <= self.size:
            raise ValueError(f"offset {offset} outside region of {self.size} bytes")
        if not isinstance(fd, int):
            fd = fd.fileno()
        remaining = self.size - offset
        if remaining == 0:
            return 0
        assert self._file is not None
        src = self._file.fd
        pos = self.position + offset
        sent = 0
        while remaining > 0:
            try:
                n = os.sendfile(fd, src, pos, min(remaining, _SENDFILE_CHUNK))
            except BlockingIOError:
                return sent
            except OSError as exc:
                if exc.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP) and sent == 0:
                    return self._copy_to(fd, offset)
                raise
            if n == 0:
                raise self._truncated(offset + sent)
            sent += n
            pos += n
            remaining -= n
        return sent

    def _copy_to(self, fd: int, offset: int) -> int:
        """The copying path (descriptors sendfile refuses): same contract as transfer_to."""
        assert self._file is not None
        sent = 0
        remaining = self.size - offset
        while remaining > 0:
            chunk = os.pread(self._file.fd, min(remaining, 1 << 20), self.position + offset + sent)
            if not chunk:
                raise self._truncated(offset + sent)
            view = memoryview(chunk)
            while view:
                try:
                    n = os.write(fd, view)
                except BlockingIOError:
                    return sent
                sent += n
                remaining -= n
                view = view[n:]
        return sent

    def _truncated(self, at: int) -> LogcoreError:
        return LogcoreError(
            f"segment file {self.path} was truncated under a file region "
            f"(position {self.position}, size {self.size}, ended after {at} bytes)"
        )

    def __repr__(self) -> str:
        return (
            f"FileRegion(path={self.path!r}, position={self.position}, size={self.size}, "
            f"offsets=[{self.first_offset}, {self.last_offset}])"
        )
