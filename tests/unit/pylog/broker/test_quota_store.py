"""``ClientQuotas`` on a single node (pylog.broker.quotas.store): AlterClientQuotas entries
validated one by one, ``validate_only``, ``client-quotas.json`` written and read back, and
a damaged file refused with its name."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from types import SimpleNamespace as NS
from typing import Any

import pytest

from pylog import errors
from pylog._clock import ManualClock
from pylog.broker.quotas import ClientQuotas
from pylog.broker.quotas.entities import DescribeFilter
from pylog.broker.quotas.manager import DEFAULT, QuotaEntity
from pylog.config import BrokerConfig


def _broker(tmp_path: Any, executor: Any) -> Any:
    return NS(
        config=BrokerConfig(),
        clock=ManualClock(),
        cluster=None,
        executor=executor,
        log_manager=NS(log_dir=str(tmp_path)),
    )


def entry(entity: list[tuple[str, str | None]], **ops: float | None) -> NS:
    return NS(
        entity=[NS(entity_type=t, entity_name=n) for t, n in entity],
        ops=[NS(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()],
    )


def test_alter_stores_applies_and_reloads(tmp_path) -> None:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        quotas = ClientQuotas(_broker(tmp_path, pool))

        async def run() -> list[Any]:
            await quotas.alter([entry([("client-id", "c")], producer_byte_rate=2048.0)], True)
            assert quotas.entities == {} and not (tmp_path / "client-quotas.json").exists()
            return await quotas.alter(
                [
                    entry([("client-id", "c")], producer_byte_rate=1024.0),
                    entry([("client-id", "d")], bogus=1.0),
                    entry([("user", None)], request_percentage=50.0, consumer_byte_rate=10.0),
                ],
                False,
            )

        results = asyncio.run(run())
        assert [(code, msg is None) for _e, code, msg in results] == [
            (0, True),
            (errors.InvalidRequestError.code, False),
            (0, True),
        ]
        assert quotas.produce.quota("ANONYMOUS", "c") == 1024.0
        assert quotas.request.quota("ANONYMOUS", "x") == 50.0
        stored = json.loads((tmp_path / "client-quotas.json").read_text())
        assert stored == {
            "version": 1,
            "entities": {
                "clients/c": {"producer_byte_rate": "1024"},
                "users/<default>": {"consumer_byte_rate": "10", "request_percentage": "50.0"},
            },
        }

        again = ClientQuotas(_broker(tmp_path, pool))
        again.load_from_file()
        assert again.entities == quotas.entities
        assert [e for e, _ in again.describe(DescribeFilter([], False))] == [
            QuotaEntity(None, "c"),
            QuotaEntity(DEFAULT, None),
        ]


@pytest.mark.parametrize(
    "text, says",
    [
        ("{not json", "cannot read the client quotas"),
        ('{"version": 2, "entities": {}}', "not a version 1 client quota file"),
        ("[1]", "not a version 1 client quota file"),
    ],
)
def test_a_damaged_file_stops_the_start_naming_it(tmp_path, text: str, says: str) -> None:
    (tmp_path / "client-quotas.json").write_text(text)
    quotas = ClientQuotas(_broker(tmp_path, None))
    with pytest.raises(errors.KafkaError, match=f"client-quotas.json: {says}"):
        quotas.load_from_file()
