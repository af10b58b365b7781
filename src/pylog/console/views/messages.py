"""The message browser, a record's page, the JSON-lines download and the produce form."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pylog.console.browse import BrowseRequest, record_json, record_view
from pylog.console.formatting import FORMATS
from pylog.console.reset import ResetError, parse_datetime
from pylog.console.web import Console, checked_form, kafka_errors, redirect, render

__all__ = ["routes", "browse_request"]


def _opt_int(params: Any, key: str, what: str) -> int | None:
    text = str(params.get(key, "") or "").strip()
    if text in ("", "all"):
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{what}: expected a whole number, got {text!r}") from None


def browse_request(name: str, params: Any) -> tuple[BrowseRequest, str]:
    """The browse the query string asks for, and the display format.

    Raises:
        ValueError: a malformed parameter, saying which.
    """
    mode = params.get("mode", "newest")
    fmt = params.get("format", "auto")
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    timestamp_ms = 0
    if mode == "timestamp":
        text = str(params.get("timestamp", "")).strip()
        if text.isdigit():
            timestamp_ms = int(text)
        else:
            try:
                timestamp_ms = parse_datetime(text)
            except ResetError as exc:
                raise ValueError(f"timestamp: {exc} or milliseconds since the epoch") from None
    limit = _opt_int(params, "limit", "limit")
    req = BrowseRequest(name, _opt_int(params, "partition", "partition"), mode,
                        offset=_opt_int(params, "offset", "offset") or 0,
                        timestamp_ms=timestamp_ms, limit=50 if limit is None else limit,
                        filter_text=str(params.get("filter", "")))
    return req, fmt


@kafka_errors
async def browse(request: Request) -> Response:
    console: Console = request.app.state.console
    name = request.path_params["name"]
    req, fmt = browse_request(name, request.query_params)
    result = await console.browser.browse(req)
    records = [record_view(r, fmt) for r in result["records"]]
    params = {k: v for k, v in request.query_params.items() if k != "msg"}
    return render(request, "messages.jinja", {
        "topic": name, "records": records, "scanned": result["scanned"],
        "complete": result["complete"], "partitions": result["partitions"],
        "query": {"partition": "" if req.partition is None else req.partition,
                  "mode": req.mode, "offset": req.offset,
                  "timestamp": request.query_params.get("timestamp", ""),
                  "limit": req.limit, "filter": req.filter_text, "format": fmt},
        "params": params, "formats": FORMATS})


@kafka_errors
async def download(request: Request) -> Response:
    console: Console = request.app.state.console
    name = request.path_params["name"]
    req, _ = browse_request(name, request.query_params)
    result = await console.browser.browse(req)
    body = "".join(json.dumps(record_json(r), ensure_ascii=False) + "\n"
                   for r in result["records"])
    return Response(body, media_type="application/x-ndjson", headers={
        "Content-Disposition": f'attachment; filename="{name}.jsonl"'})


@kafka_errors
async def record_page(request: Request) -> Response:
    console: Console = request.app.state.console
    name = request.path_params["name"]
    partition, offset = request.path_params["partition"], request.path_params["offset"]
    r = await console.browser.record(name, partition, offset)
    if r is None:
        return render(request, "error.jinja", {
            "title": "No such record",
            "detail": f"{name}-{partition} has no record at offset {offset} (deleted, "
                      "compacted, a transaction marker, or past the end)."}, status=404)
    views = {fmt: record_view(r, fmt, full=True) for fmt in FORMATS}
    return render(request, "record.jinja", {"topic": name, "record": views["auto"],
                                           "views": views, "formats": FORMATS,
                                           "raw": record_json(r)})


def _headers(text: str) -> list[tuple[str, bytes]]:
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"header {line!r}: expected NAME=VALUE, one a line")
        out.append((key.strip(), value.encode("utf-8")))
    return out


@kafka_errors
async def produce_form(request: Request) -> Response:
    console: Console = request.app.state.console
    name = request.path_params["name"]
    desc = (await console.data.admin.describe_topics([name]))[name]
    return render(request, "produce.jinja", {"topic": name,
                                            "partitions": [p.partition for p in desc.partitions]})


@kafka_errors
async def produce(request: Request) -> Response:
    console: Console = request.app.state.console
    name = request.path_params["name"]
    form = await checked_form(request)
    partition = _opt_int(form, "partition", "partition")
    key = str(form.get("key", ""))
    value = str(form.get("value", ""))
    headers = _headers(str(form.get("headers", "")))
    meta = await console.browser.produce(
        name, None if form.get("null_value") else value.encode("utf-8"),
        key.encode("utf-8") if key else None, headers, partition)
    return redirect(f"/topics/{name}/messages",
                    f"Produced to partition {meta.partition} at offset {meta.offset}.",
                    partition=meta.partition, mode="offset", offset=meta.offset)


def routes(read_only: bool) -> list[Route]:
    out = [Route("/topics/{name}/messages.json", browse),
           Route("/topics/{name}/messages.jsonl", download),
           Route("/topics/{name}/messages", browse),
           Route("/topics/{name}/messages/{partition:int}/{offset:int}.json", record_page),
           Route("/topics/{name}/messages/{partition:int}/{offset:int}", record_page)]
    if not read_only:
        out += [Route("/topics/{name}/produce", produce_form),
                Route("/topics/{name}/produce", produce, methods=["POST"])]
    return out
