"""How ``pylog consume`` prints a record: the classic columns, a kcat-style template, JSON.

Classic (no ``--format``/``--json``): optional ``PARTITION:OFFSET``, ``CreateTime:MS`` (or
``LogAppendTime:MS``), headers as ``name=value,...``, the key, then the value, joined by
``--key-separator`` (a tab); a null key or value prints as ``null``.

``--format TEMPLATE`` takes kcat's ``-f`` tokens:

====== ===========================================================
``%s`` value                       ``%S`` value length (-1 for null)
``%k`` key                         ``%K`` key length (-1 for null)
``%t`` topic                       ``%p`` partition
``%o`` offset                      ``%T`` timestamp (ms since the epoch)
``%h`` headers as ``name=value,...``  ``%R`` value length as a 4-byte big-endian int
``%%`` a ``%``                     ``\\n \\r \\t \\\\ \\xHH`` escapes
====== ===========================================================

As kcat, a null key or value prints as nothing and no newline is added: end the template
with ``\\n``.

``--json``: one object per line, kcat's ``-J`` envelope: ``topic``, ``partition``,
``offset``, ``tstype`` (``create``/``logappend``), ``ts``, ``headers`` (a list of
``[name, value]`` pairs: Kafka allows a name twice), ``key``, ``payload`` (strings, or null).
A key, value or header value that is not UTF-8 is given base64-encoded under ``key_b64``,
``payload_b64`` (instead of ``key``/``payload``) or as ``{"b64": ...}``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from pylog.cli._common import CliError
from pylog.client.records import ConsumerRecord

__all__ = ["classic_formatter", "template_formatter", "json_formatter"]

Formatter = Callable[[ConsumerRecord], bytes]


def _headers_csv(headers: list[tuple[str, bytes | None]]) -> bytes:
    return b",".join(k.encode() + b"=" + (v if v is not None else b"") for k, v in headers)


def classic_formatter(*, offsets: bool, timestamp: bool, headers: bool, key: bool,
                      separator: str) -> Formatter:
    sep = separator.encode()

    def fmt(rec: ConsumerRecord) -> bytes:
        parts: list[bytes] = []
        if offsets:
            parts.append(b"%d:%d" % (rec.partition, rec.offset))
        if timestamp:
            kind = b"LogAppendTime" if rec.timestamp_type == 1 else b"CreateTime"
            parts.append(kind + b":%d" % rec.timestamp)
        if headers:
            parts.append(_headers_csv(rec.headers))
        if key:
            parts.append(rec.key if rec.key is not None else b"null")
        parts.append(rec.value if rec.value is not None else b"null")
        return sep.join(parts) + b"\n"

    return fmt


_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\"}

_TOKENS: dict[str, Callable[[ConsumerRecord], bytes]] = {
    "s": lambda r: r.value if r.value is not None else b"",
    "S": lambda r: b"%d" % (len(r.value) if r.value is not None else -1),
    "R": lambda r: (len(r.value) if r.value is not None else -1).to_bytes(4, "big", signed=True),
    "k": lambda r: r.key if r.key is not None else b"",
    "K": lambda r: b"%d" % (len(r.key) if r.key is not None else -1),
    "t": lambda r: r.topic.encode(),
    "p": lambda r: b"%d" % r.partition,
    "o": lambda r: b"%d" % r.offset,
    "T": lambda r: b"%d" % r.timestamp,
    "h": lambda r: _headers_csv(r.headers),
}


def template_formatter(template: str) -> Formatter:
    """Compile a kcat ``-f`` template.

    Raises:
        CliError: an unknown ``%`` token or a bad escape, naming it and the known ones.
    """
    pieces: list[bytes | Callable[[ConsumerRecord], bytes]] = []
    literal = bytearray()
    i = 0
    n = len(template)
    while i < n:
        ch = template[i]
        if ch == "%" or ch == "\\":
            if i + 1 >= n:
                raise CliError(f"--format {template!r}: {ch!r} at the end (write {ch}{ch} for "
                               f"a literal {ch})")
            nxt = template[i + 1]
            if ch == "%" and nxt == "%":
                literal += b"%"
            elif ch == "%":
                token = _TOKENS.get(nxt)
                if token is None:
                    raise CliError(f"--format {template!r}: unknown token %{nxt} (known: "
                                   + " ".join("%" + t for t in _TOKENS) + " %%)")
                if literal:
                    pieces.append(bytes(literal))
                    literal.clear()
                pieces.append(token)
            elif nxt == "x":
                hexdigits = template[i + 2:i + 4]
                try:
                    literal.append(int(hexdigits, 16))
                except ValueError:
                    raise CliError(f"--format {template!r}: \\x needs two hex digits") from None
                i += 4
                continue
            elif nxt in _ESCAPES:
                literal += _ESCAPES[nxt]
            else:
                raise CliError(f"--format {template!r}: unknown escape \\{nxt} "
                               "(known: \\n \\r \\t \\\\ \\xHH)")
            i += 2
            continue
        literal += ch.encode()
        i += 1
    if literal:
        pieces.append(bytes(literal))
    if len(pieces) == 1 and isinstance(pieces[0], bytes):
        constant = pieces[0]
        return lambda rec: constant
    fixed = tuple(pieces)

    def fmt(rec: ConsumerRecord) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(rec) for p in fixed)

    return fmt


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def json_formatter() -> Formatter:
    def fmt(rec: ConsumerRecord) -> bytes:
        obj: dict[str, Any] = {
            "topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
            "tstype": "logappend" if rec.timestamp_type == 1 else "create",
            "ts": rec.timestamp,
        }
        if rec.headers:
            hdrs: list[list[Any]] = []
            for name, hv in rec.headers:
                if hv is None:
                    hdrs.append([name, None])
                else:
                    text = _text(hv)
                    hdrs.append([name, text if text is not None
                                 else {"b64": base64.b64encode(hv).decode()}])
            obj["headers"] = hdrs
        for field, data in (("key", rec.key), ("payload", rec.value)):
            if data is None:
                obj[field] = None
                continue
            text = _text(data)
            if text is not None:
                obj[field] = text
            else:
                obj[field + "_b64"] = base64.b64encode(data).decode()
        return json.dumps(obj, ensure_ascii=False).encode() + b"\n"

    return fmt
