"""The metrics endpoint: ``/metrics``, ``/healthz`` and ``/readyz`` over HTTP/1.1 on
``metrics.listener``, served by the broker's own event loop.

Why on the loop, not on a thread: the state a scrape reads (request counters, the replica
manager's partitions, the group coordinators' offsets, the connections) belongs to the
loop and is changed there without locks; a thread would need either locks on the request
path or snapshots built on the loop anyway, and under the GIL it would still take the
same CPU from the loop. On the loop a scrape reads it consistently for free, and it gives
the loop back between slices of partitions (``collectors.SLICE``), so a scrape of 10,000
partitions never holds the loop for more than a few milliseconds at a time
(benchmarks/RESULTS.md, "Metrics").

The server is a few lines of asyncio streams, not a web framework: one GET (or HEAD) per
connection, answered with ``Connection: close``; a request head larger than 8 KiB or not
complete within 10 s is dropped. Anything else gets 404 or 405.

Event-loop affinity: everything runs on the broker's loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pylog.metrics.collectors import collect
from pylog.metrics.registry import Exposition

log = logging.getLogger("pylog.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_HEAD = 8192
READ_TIMEOUT_S = 10.0


def health(broker: Any) -> tuple[int, str]:
    """``/healthz``: 200 while the broker serves requests, 503 while it starts or stops."""
    if broker.stopping:
        return 503, "stopping: the broker is shutting down\n"
    if not broker.started:
        return 503, "starting: the logs are not loaded yet\n"
    return 200, "ok: serving\n"


def readiness(broker: Any) -> tuple[int, str]:
    """``/readyz``: 200 once the logs are loaded and, in cluster mode, the broker is
    registered in ZooKeeper with a live session; 503 with the reason otherwise."""
    code, text = health(broker)
    if code != 200:
        return code, text
    cluster = broker.cluster
    if cluster is not None:
        if cluster.broker_epoch < 0:
            return 503, "not ready: not registered in ZooKeeper yet\n"
        if not cluster.store.connected:
            return 503, "not ready: the ZooKeeper session is disconnected\n"
        return 200, f"ready: logs loaded, registered as broker {broker.node_id}\n"
    return 200, "ready: logs loaded\n"


async def scrape(broker: Any) -> str:
    """One scrape, giving the loop back between slices."""
    out = Exposition()
    for _ in collect(broker, out):
        await asyncio.sleep(0)
    return out.text()


class MetricsServer:
    """The HTTP listener of ``metrics.listener``.

    Args:
        broker: the broker to report on.
        host, port: where to listen (port 0: any free port; ``address`` says which).
    """

    def __init__(self, broker: Any, host: str, port: int) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.address: tuple[str, int] = (host, port)
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        """Bind and serve.

        Raises:
            OSError: the address cannot be bound (the message names ``metrics.listener``).
        """
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port,
                                                      reuse_address=True)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {self.host}:{self.port} "
                          f"(metrics.listener): {exc.strerror}; choose another port or "
                          "port 0") from None
        self.address = self._server.sockets[0].getsockname()[:2]
        host = self.address[0]
        shown = f"[{host}]" if ":" in host else host
        log.info("metrics on http://%s:%d/metrics (healthz, readyz)", shown, self.address[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except (asyncio.TimeoutError, asyncio.IncompleteReadError,
                    asyncio.LimitOverrunError, ConnectionError):
                return
            if len(head) > MAX_HEAD:
                return
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split(" ")
            if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                await self._answer(writer, 400, "bad request line\n", False)
                return
            method, target = parts[0], parts[1]
            path = target.split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                await self._answer(writer, 405, "only GET and HEAD are served\n", False,
                                   extra="Allow: GET, HEAD\r\n")
                return
            head_only = method == "HEAD"
            if path == "/metrics":
                body = await scrape(self.broker)
                await self._answer(writer, 200, body, head_only, CONTENT_TYPE)
            elif path == "/healthz":
                await self._answer(writer, *health(self.broker), head_only)
            elif path == "/readyz":
                await self._answer(writer, *readiness(self.broker), head_only)
            else:
                await self._answer(writer, 404, "not found: try /metrics, /healthz or "
                                   "/readyz\n", head_only)
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _answer(writer: asyncio.StreamWriter, status: int, body: str, head_only: bool,
                      content_type: str = "text/plain; charset=utf-8", extra: str = "") -> None:
        data = body.encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found",
                  405: "Method Not Allowed", 503: "Service Unavailable"}[status]
        writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
                     f"Content-Length: {len(data)}\r\nConnection: close\r\n{extra}\r\n"
                     .encode("latin-1"))
        if not head_only:
            writer.write(data)
        await writer.drain()
