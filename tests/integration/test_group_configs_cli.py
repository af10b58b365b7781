"""`pylog configs alter | describe --entity-type groups` against a broker: set, describe
(the group's own, then --all with the broker's values), a value out of bounds refused
naming the key, delete."""

from __future__ import annotations

import uuid

import pytest

from pylog.cli.main import main

pytestmark = pytest.mark.integration


def _run(capsys, bootstrap: str, *args: str) -> tuple[int, str, str]:
    code = main(["configs", *args, "-b", bootstrap])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_group_configs_through_the_cli(broker, capsys) -> None:
    group = f"cli-{uuid.uuid4().hex[:6]}"
    entity = ("--entity-type", "groups", "--entity-name", group)
    code, out, _ = _run(capsys, broker.bootstrap, "alter", *entity, "--add-config",
                        "share.auto.offset.reset=earliest,consumer.session.timeout.ms=50000")
    assert (code, out) == (0, f"Completed updating config for group {group}.\n")

    code, out, _ = _run(capsys, broker.bootstrap, "describe", *entity)
    assert code == 0
    assert out.splitlines() == [
        f"Dynamic configs for group {group} are:",
        "  consumer.session.timeout.ms=50000 sensitive=false synonyms={GROUP_CONFIG:consumer.session.timeout.ms=50000}",
        "  share.auto.offset.reset=earliest sensitive=false synonyms={GROUP_CONFIG:share.auto.offset.reset=earliest}",
    ]
    code, out, _ = _run(capsys, broker.bootstrap, "describe", *entity, "--all")
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"All configs for group {group} are:"
    assert "  consumer.heartbeat.interval.ms=5000 sensitive=false synonyms={}" in lines
    assert "  share.isolation.level=read_uncommitted sensitive=false synonyms={}" in lines
    assert "  share.renew.acknowledge.enable=true sensitive=false synonyms={}" in lines
    assert len(lines) == 1 + 10  # every group config (Kafka 4.2's share-group ones included)

    code, _, err = _run(capsys, broker.bootstrap, "alter", *entity, "--add-config",
                        "consumer.heartbeat.interval.ms=1")
    assert code == 1
    assert "consumer.heartbeat.interval.ms must be greater than or equal to " \
           "group.consumer.min.heartbeat.interval.ms" in err

    code, out, _ = _run(capsys, broker.bootstrap, "alter", *entity, "--delete-config",
                        "share.auto.offset.reset", "--delete-config", "consumer.session.timeout.ms")
    assert code == 0
    code, out, _ = _run(capsys, broker.bootstrap, "describe", *entity)
    assert out.splitlines() == [f"Dynamic configs for group {group} are:"]
