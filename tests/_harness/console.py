"""Helpers for the console's tests: an in-process console behind httpx's ``ASGITransport``
(its lifespan run on an event loop thread, so tests call it synchronously), the CSRF token a
page hands out, and a ``pylog console`` subprocess for the browser tests."""

from __future__ import annotations

import asyncio
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from pylog.console import ConsoleConfig, create_app
from pylog.console.security import CSRF_COOKIE, CSRF_FIELD

_TOKEN = re.compile(rf'name="{CSRF_FIELD}" value="([^"]+)"')


class ConsoleClient:
    """Blocking calls into the app: each request runs on the app's own loop thread."""

    def __init__(self, app: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.app = app
        self.loop = loop
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                      base_url="http://127.0.0.1", follow_redirects=False)

    @property
    def cookies(self) -> httpx.Cookies:
        return self.http.cookies

    def _run(self, coro: Any) -> httpx.Response:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)  # type: ignore[no-any-return]

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self._run(self.http.get(url, **kw))

    def post(self, url: str, **kw: Any) -> httpx.Response:
        return self._run(self.http.post(url, **kw))


@contextmanager
def console_client(bootstrap: str, **config: Any) -> Iterator[ConsoleClient]:
    """A console on ``bootstrap`` (lifespan run: the admin client and the sampler are up).
    Templates render strictly: a missing variable fails the page."""
    config.setdefault("sample_interval", 0.3)
    app = create_app(ConsoleConfig({"bootstrap.servers": bootstrap, "request.timeout.ms": 10000},
                                   strict_templates=True, **config))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="console-test-loop", daemon=True)
    thread.start()
    lifespan = app.router.lifespan_context(app)
    asyncio.run_coroutine_threadsafe(lifespan.__aenter__(), loop).result(30)
    client = ConsoleClient(app, loop)
    try:
        yield client
    finally:
        asyncio.run_coroutine_threadsafe(client.http.aclose(), loop).result(30)
        asyncio.run_coroutine_threadsafe(lifespan.__aexit__(None, None, None), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def csrf(client: ConsoleClient, page: str = "/topics") -> str:
    """The CSRF token of a form on ``page`` (the cookie is then set in the client)."""
    resp = client.get(page)
    m = _TOKEN.search(resp.text)
    assert m is not None, f"no form with a CSRF token on {page}"
    assert client.cookies.get(CSRF_COOKIE) == m.group(1)
    return m.group(1)


def post(client: ConsoleClient, path: str, data: dict[str, Any], page: str = "/topics") -> Any:
    """A form POST as a browser sends it: the page's token in the form and the cookie."""
    return client.post(path, data={**data, CSRF_FIELD: csrf(client, page)})


class ConsoleProcess:
    """``pylog console`` in a subprocess on a free port; ``url`` once it serves."""

    def __init__(self, workdir: pathlib.Path, bootstrap: str, *extra: str) -> None:
        self.ready = workdir / f"console-{os.getpid()}-{time.monotonic_ns()}.url"
        self.log_path = self.ready.with_suffix(".log")
        self.cmd = [sys.executable, "-m", "pylog", "console", "-b", bootstrap, "--port", "0",
                    "--ready-file", str(self.ready), *extra]
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, timeout: float = 30.0) -> ConsoleProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready.exists():
                self.url = self.ready.read_text().strip()
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the console did not start; log:\n{self.log_path.read_text()}")

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
