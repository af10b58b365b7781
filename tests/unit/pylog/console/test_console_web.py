"""pylog.console.web: what a page says when the client fails, as HTML and as JSON."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pylog import errors
from pylog.client.errors import KafkaConnectionError
from pylog.console.web import Console, kafka_errors, make_environment


class StandInSampler:
    def status(self) -> dict[str, Any]:
        return {"interval": 5.0, "source": "offsets", "error": "", "metrics_error": ""}


FAILURES = {"missing-api": errors.UnsupportedVersionError("h:1 does not serve DescribeGroups"),
            "no-topic": errors.UnknownTopicOrPartitionError("topic 'x': UNKNOWN_TOPIC"),
            "down": KafkaConnectionError("cannot connect to h:1"),
            "refused": errors.InvalidConfigError("alter configs: INVALID_CONFIG"),
            "bad": ValueError("limit 0: expected 1 to 1000")}


def app() -> Starlette:
    async def fail(request: Request) -> Response:
        raise FAILURES[request.path_params["what"].removesuffix(".json")]

    a = Starlette(routes=[Route("/fail/{what}", kafka_errors(fail))])
    a.state.jinja = make_environment(strict=True)
    a.state.console = Console(data=None, browser=None, history=None,  # type: ignore[arg-type]
                              sampler=StandInSampler(), clock=None,  # type: ignore[arg-type]
                              bootstrap="h:1")
    return a


async def fetch(path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app()),
                                 base_url="http://127.0.0.1") as client:
        return await client.get(path)


@pytest.mark.parametrize(("what", "status", "words"), [
    ("missing-api", 501, "the other pages work without it"),
    ("no-topic", 404, "The topic list is at /topics"),
    ("down", 503, "Restart the console with -b HOST:PORT"),
    ("refused", 400, "INVALID_CONFIG"),
    ("bad", 400, "expected 1 to 1000")])
def test_failures_say_what_to_do(what: str, status: int, words: str) -> None:
    page = asyncio.run(fetch(f"/fail/{what}"))
    assert page.status_code == status
    assert words in page.text and 'data-test="error"' in page.text
    data = asyncio.run(fetch(f"/fail/{what}.json"))
    assert data.status_code == status and words in data.json()["detail"]
