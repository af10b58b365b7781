"""Every generated message class by name, loaded on first use.

``from pylog.protocol.messages import FetchRequest, FetchResponse`` (module ``__getattr__``;
the classes live in ``pylog.protocol._schema``, one module per Kafka spec).
"""

from __future__ import annotations

from typing import Any

from pylog.protocol import _schema

MESSAGES = _schema.MESSAGES
REQUESTS = _schema.REQUESTS
RESPONSES = _schema.RESPONSES
load = _schema.load


def __getattr__(name: str) -> Any:
    if name in _schema.MESSAGES:
        return _schema.load(name)
    raise AttributeError(f"module 'pylog.protocol.messages' has no attribute {name!r}")
