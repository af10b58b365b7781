"""What the views share: the console's state, rendering a context as HTML or JSON, CSRF.

A view returns a context dict; ``render`` answers with the template rendered from it, or
with the dict as JSON when the path ends in ``.json`` (``/topics.json``, the same data the
page shows). Templates are Jinja with autoescape on every file, so record keys, values,
headers, topic and group names are escaped wherever they are printed.

Every write is a POST whose form carries the CSRF token (``security``): ``checked_form``
parses the form and refuses the request (403) without a matching token or with an ``Origin``
of another site. In read-only mode the write routes are not registered at all and the
templates show no write control (``read_only`` in every context).
"""

from __future__ import annotations

import dataclasses
import datetime
import pathlib
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode, urlsplit

import jinja2
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from pylog import errors
from pylog._clock import Clock
from pylog.client.errors import KafkaConnectionError, KafkaTimeoutError
from pylog.console.browse import Browser
from pylog.console.data import ClusterData
from pylog.console.history import History, Sampler
from pylog.console.security import CSRF_COOKIE, CSRF_FIELD, csrf_matches, new_csrf_token

__all__ = ["Console", "render", "checked_form", "redirect", "kafka_errors", "error_page",
           "make_environment", "TEMPLATES"]

TEMPLATES = pathlib.Path(__file__).parent / "templates"


@dataclasses.dataclass
class Console:
    """The console's state, one per app (``request.app.state.console``)."""

    data: ClusterData
    browser: Browser
    history: History
    sampler: Sampler
    clock: Clock
    bootstrap: str
    read_only: bool = False
    metrics_urls: list[str] = dataclasses.field(default_factory=list)


def _ms_to_text(ms: Any) -> str:
    if not isinstance(ms, (int, float)) or ms < 0:
        return "-"
    dt = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{int(ms) % 1000:03d}Z"


def _rate(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def _bytes(value: Any) -> str:
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return str(value)


def make_environment(strict: bool = False) -> jinja2.Environment:
    """Jinja over ``templates/`` with autoescape on every template (``StrictUndefined`` when
    ``strict``: the tests render that way, so a missing context key fails). The templates
    are ``.jinja`` files: the repository ignores ``*.html`` and the wheel leaves it out
    (Cython's annotation files), and autoescape here does not depend on the extension."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
        undefined=jinja2.StrictUndefined if strict else jinja2.Undefined)
    env.filters["ms"] = _ms_to_text
    env.filters["rate"] = _rate
    env.filters["bytes"] = _bytes
    env.globals["urlencode"] = urlencode
    return env


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def csrf_token(request: Request) -> str:
    """The request's CSRF token: its cookie's, else a new one (set by ``render``)."""
    token = request.cookies.get(CSRF_COOKIE) or getattr(request.state, "new_csrf", None)
    if not token:
        token = request.state.new_csrf = new_csrf_token()
    return str(token)


def wants_json(request: Request) -> bool:
    return request.url.path.endswith(".json")


def render(request: Request, template: str, context: dict[str, Any], status: int = 200
           ) -> Response:
    """The context as JSON (``.json`` paths) or as ``template`` rendered."""
    console: Console = request.app.state.console
    if wants_json(request):
        return JSONResponse(_jsonable(context), status_code=status)
    env: jinja2.Environment = request.app.state.jinja
    token = csrf_token(request)
    page = env.get_template(template).render(
        **context, request=request, read_only=console.read_only, csrf_field=CSRF_FIELD,
        csrf_token=token, bootstrap=console.bootstrap, message=request.query_params.get("msg", ""),
        sampler=console.sampler.status(), path=request.url.path)
    resp = HTMLResponse(page, status_code=status)
    if request.cookies.get(CSRF_COOKIE) != token:
        resp.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path="/")
    return resp


async def checked_form(request: Request) -> FormData:
    """The POST's form, once its CSRF token matched the cookie and its Origin (if sent)
    names this host.

    Raises:
        HTTPException: 403 saying what was wrong.
    """
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
        raise HTTPException(403, f"cross-site request refused (Origin {origin})")
    form = await request.form()
    field = form.get(CSRF_FIELD)
    if not csrf_matches(request.cookies.get(CSRF_COOKIE),
                        field if isinstance(field, str) else None):
        raise HTTPException(403, "missing or wrong CSRF token: reload the page and submit "
                            "the form again")
    return form


def redirect(path: str, msg: str = "", **params: Any) -> RedirectResponse:
    query = {k: v for k, v in params.items() if v is not None}
    if msg:
        query["msg"] = msg
    return RedirectResponse(path + ("?" + urlencode(query) if query else ""), status_code=303)


def error_page(request: Request, status: int, title: str, detail: str) -> Response:
    return render(request, "error.jinja", {"title": title, "detail": detail}, status=status)


Handler = Callable[[Request], Awaitable[Response]]


def kafka_errors(view: Handler) -> Handler:
    """Turn the client's errors into a page saying what went wrong and what to do."""

    async def wrapped(request: Request) -> Response:
        console: Console = request.app.state.console
        try:
            return await view(request)
        except errors.UnknownTopicOrPartitionError as exc:
            return error_page(request, 404, "No such topic or partition",
                              f"{exc}. The topic list is at /topics.")
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            return error_page(request, 503, "The cluster does not answer",
                              f"{exc}. Is a broker listening at {console.bootstrap}? "
                              "Restart the console with -b HOST:PORT of one that is.")
        except errors.UnsupportedVersionError as exc:
            return error_page(request, 501, "Not served by this broker",
                              f"{exc}. This page needs that API; the other pages work "
                              "without it.")
        except errors.ApiError as exc:
            return error_page(request, 400, f"The broker refused: {type(exc).__name__}",
                              str(exc))
        except ValueError as exc:
            return error_page(request, 400, "Bad request", str(exc))
    wrapped.__name__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return wrapped
