"""The console's ASGI application: ``create_app(ConsoleConfig(...))``.

Starlette routes (one module per page family under ``views/``), Jinja templates, static
files served from the package (a stylesheet and ``console.js``, no third-party JavaScript),
and three layers around them: basic auth when ``auth`` is set, security headers (a
Content-Security-Policy that allows only this origin's scripts and styles, so an injected
``<script>`` would not run even if escaping failed), and the error pages.

At start (the ASGI lifespan) it opens one ``pylog.client.aio.Admin`` and starts the
``Sampler`` that feeds the live charts; at shutdown it stops both and closes the browser's
consumer and producer.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import dataclasses
import hashlib
import hmac
import pathlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pylog._clock import SYSTEM_CLOCK, Clock
from pylog.client import ConfigError
from pylog.client.aio import Admin
from pylog.client.config import ADMIN, CONSUMER, PRODUCER
from pylog.console.browse import Browser
from pylog.console.data import ClusterData
from pylog.console.history import History, Sampler
from pylog.console.security import Credentials, verify_password
from pylog.console.views import cluster, groups, messages, topics
from pylog.console.web import Console, error_page, make_environment

__all__ = ["ConsoleConfig", "create_app", "split_settings"]

STATIC = pathlib.Path(__file__).parent / "static"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")


@dataclasses.dataclass
class ConsoleConfig:
    """What ``pylog console`` was given.

    Attributes:
        settings: client settings by Kafka name (``bootstrap.servers``, ``-X``,
            ``--command-config``); each client takes the ones it knows.
        read_only: no write route, no write control.
        auth: basic-auth credentials, or None for none.
        metrics_urls: brokers' ``/metrics`` URLs for rates and sizes.
        sample_interval: seconds between two samples of the live charts.
        strict_templates: fail on a missing template variable (the tests set it).
    """

    settings: Mapping[str, Any]
    read_only: bool = False
    auth: Credentials | None = None
    metrics_urls: list[str] = dataclasses.field(default_factory=list)
    sample_interval: float = 5.0
    clock: Clock = SYSTEM_CLOCK
    strict_templates: bool = False


def split_settings(settings: Mapping[str, Any]
                   ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The settings the admin client, the consumer and the producer each take.

    Raises:
        ConfigError: a setting none of the three knows (naming it).
    """
    unknown = [k for k in settings if k not in ADMIN and k not in CONSUMER and k not in PRODUCER]
    if unknown:
        raise ConfigError(f"unknown client setting(s) {', '.join(sorted(unknown))}: the "
                          "console's clients take the settings of pylog.client "
                          "(docs/client.md)")
    pick = lambda table: {k: v for k, v in settings.items() if k in table}  # noqa: E731
    return pick(ADMIN), pick(CONSUMER), pick(PRODUCER)


class BasicAuth:
    """HTTP basic auth against one user and scrypt hash. A header that passed once is
    remembered by its SHA-256, so scrypt runs once per browser, not once per request."""

    def __init__(self, app: ASGIApp, creds: Credentials) -> None:
        self.app = app
        self.creds = creds
        self._good: set[bytes] = set()

    async def _ok(self, header: bytes | None) -> bool:
        if not header or not header.lower().startswith(b"basic "):
            return False
        digest = hashlib.sha256(header).digest()
        if digest in self._good:
            return True
        try:
            user, sep, password = base64.b64decode(header[6:].strip(), validate=True
                                                   ).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not sep or not hmac.compare_digest(user.encode(), self.creds.user.encode()):
            return False
        if await asyncio.to_thread(verify_password, password, self.creds.password_hash):
            self._good.add(digest)
            return True
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization")
        if await self._ok(header):
            await self.app(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"www-authenticate", b'Basic realm="pylog console", charset="UTF-8"'),
            (b"content-type", b"text/plain; charset=utf-8")]})
        await send({"type": "http.response.body",
                    "body": b"401: this console needs a user name and password (--auth)\n"})


class SecurityHeaders:
    """Adds the CSP and the usual hardening headers to every response."""

    HEADERS = [(b"content-security-policy", CSP.encode()),
               (b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
               (b"referrer-policy", b"same-origin")]

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.HEADERS]}
            await send(message)
        await self.app(scope, receive, with_headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    titles = {403: "Refused", 404: "Not found", 405: "Not allowed"}
    detail = str(exc.detail)
    if exc.status_code == 405 and request.app.state.console.read_only:
        detail = "this console is read-only (--read-only): it makes no changes"
    return error_page(request, exc.status_code, titles.get(exc.status_code, "Error"), detail)


def create_app(config: ConsoleConfig) -> Starlette:
    """The console as an ASGI app (its lifespan opens the clients and the sampler).

    Raises:
        ConfigError: a client setting none of the console's clients knows.
    """
    admin_settings, consumer_settings, producer_settings = split_settings(config.settings)
    bootstrap = str(config.settings.get("bootstrap.servers") or config.settings.get("log.dir"))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        admin = Admin(admin_settings)
        data = ClusterData(admin, config.clock)
        history = History()
        sampler = Sampler(data, history, config.clock, config.sample_interval,
                          config.metrics_urls)
        browser = Browser(consumer_settings, producer_settings, data, config.clock)
        app.state.console = Console(data, browser, history, sampler, config.clock, bootstrap,
                                    config.read_only, list(config.metrics_urls))
        sampler.start()
        try:
            yield
        finally:
            await sampler.stop()
            await browser.close()
            await admin.close()

    routes = [*cluster.routes(config.read_only), *topics.routes(config.read_only),
              *messages.routes(config.read_only), *groups.routes(config.read_only),
              Mount("/static", StaticFiles(directory=str(STATIC)), name="static")]
    middleware = [Middleware(BasicAuth, creds=config.auth)] if config.auth is not None else []
    middleware.append(Middleware(SecurityHeaders))
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware,
                    exception_handlers={HTTPException: _http_error})
    app.state.jinja = make_environment(strict=config.strict_templates)
    return app
