"""pylog.protocol.messages and the package's lazy access to the generated classes."""

from __future__ import annotations

import pytest

import pylog.protocol
from pylog.protocol import _schema, messages


def test_every_message_is_reachable_by_name() -> None:
    for name in _schema.MESSAGES:
        cls = getattr(messages, name)
        assert cls is getattr(pylog.protocol, name) is _schema.load(name)
        assert cls.NAME == name and cls.__name__ == name


def test_index_agrees_with_the_classes() -> None:
    for name, (module, api_key, kind, versions, flexible_min) in _schema.MESSAGES.items():
        cls = _schema.load(name)
        assert cls.__module__ == f"pylog.protocol._schema.{module}"
        assert (cls.API_KEY, cls.MESSAGE_TYPE, cls.VALID_VERSIONS) == (api_key, kind, versions)
        assert cls.FLEXIBLE_MIN == (flexible_min if flexible_min is not None and flexible_min <= versions[1] else None)
    for key, name in messages.REQUESTS.items():
        assert _schema.MESSAGES[name][1] == key and name.endswith("Request")
    assert set(messages.REQUESTS) == set(messages.RESPONSES)


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError):
        messages.NoSuchRequest  # noqa: B018
    with pytest.raises(AttributeError):
        pylog.protocol.NoSuchRequest  # noqa: B018
    with pytest.raises(AttributeError):
        _schema.NoSuchRequest  # noqa: B018
