"""An injected error is answered with the API's own error response (``error_response``,
what ``Faults.intercept`` returns): for every API the broker serves, at its lowest and
highest version, a request with one element in every list gets a response that carries
the code in every error field of that version, and that encodes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pylog.broker.handlers import HANDLERS, RequestContext
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.protocol.apis import api_name
from pylog.protocol.connection import request_class
from pylog.testing.faults import Faults

CODE = 29  # TOPIC_AUTHORIZATION_FAILED: no API answers it on its own in these requests
# Error fields that do not carry the request's outcome, left 0 as Kafka's
# getErrorResponse leaves them: CreateTopics' topic_config_error_code says whether the
# configs of a created topic could be described (KIP-525), and no topic was created.
NOT_OUTCOME = {"topic_config_error_code"}


def _in(version: int, versions: Any) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


def _filled(cls: type, version: int) -> Any:
    """``cls`` with one element in every list of structs, and names in strings."""
    kwargs: dict[str, Any] = {}
    for name, type_, versions, *_ in cls.FIELDS:  # type: ignore[attr-defined]
        if not _in(version, versions):
            continue
        if type_.startswith("[]") and hasattr(cls, type_[2:]):
            kwargs[name] = [_filled(getattr(cls, type_[2:]), version)]
        elif type_ == "[]int32":
            kwargs[name] = [0]
        elif type_ == "[]string":
            kwargs[name] = ["t"]
        elif type_ == "string" and name in ("name", "topic", "group_id", "transactional_id",
                                            "key", "member_id", "resource_name"):
            kwargs[name] = "t"
        elif name == "acks":
            kwargs[name] = -1
    return cls(**kwargs)


def _error_codes(obj: Any, version: int) -> list[int]:
    found: list[int] = []
    for name, type_, versions, *_ in type(obj).FIELDS:
        if not _in(version, versions):
            continue
        value = getattr(obj, name)
        if name.endswith("error_code") and name not in NOT_OUTCOME:
            found.append(value)
        elif type_.startswith("[]") and value:
            for item in value:
                if hasattr(type(item), "FIELDS"):
                    found.extend(_error_codes(item, version))
        elif hasattr(type(value), "FIELDS"):
            found.extend(_error_codes(value, version))
    return found


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Broker:
    return Broker(BrokerConfig({"log.dirs": str(tmp_path_factory.mktemp("data"))}),
                  allow_pure_python=True)


CASES = [(key, v) for key, (_handler, module) in sorted(HANDLERS.items())
         for v in sorted(set(module.VERSIONS))]


@pytest.mark.parametrize(("api_key", "version"), CASES,
                         ids=[f"{api_name(k)}-v{v}" for k, v in CASES])
def test_an_injected_error_fills_every_error_field(broker: Broker, api_key: int,
                                                   version: int) -> None:
    request = _filled(request_class(api_key), version)
    ctx = RequestContext(broker, api_key, version, 1, "test", "127.0.0.1:1")
    faults = Faults("broker")
    from pylog import errors

    faults.push_errors(api_key, errors.ERRORS_BY_CODE[CODE], 1)
    module = HANDLERS[api_key][1]
    response = asyncio.run(faults.intercept(ctx, request, module.error_response))
    codes = _error_codes(response, version)
    assert codes, f"{api_name(api_key)} v{version}: the response has no error field"
    assert set(codes) == {CODE}, f"{api_name(api_key)} v{version}: error fields {codes}"
    response.encode_into(version, bytearray(), [])
