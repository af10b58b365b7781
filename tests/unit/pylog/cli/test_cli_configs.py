"""`pylog configs describe | alter`: the command lines accepted and refused, before any
broker is asked (the calls themselves run against a broker in tests/integration/test_quotas.py)."""

from __future__ import annotations

import pytest

from pylog.cli.main import build_parser, main


def test_entity_options_pair_by_position() -> None:
    args = build_parser().parse_args(
        [
            "configs",
            "alter",
            "--entity-type",
            "users",
            "--entity-default",
            "--entity-type",
            "clients",
            "--entity-name",
            "app",
            "--add-config",
            "producer_byte_rate=1",
        ]
    )
    assert args.entities == [["users", ""], ["clients", "app"]]
    args = build_parser().parse_args(["configs", "describe", "--entity-type", "clients"])
    assert args.entities == [["clients", None]]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["configs", "alter", "--entity-name", "x"], "must follow an --entity-type"),
        (["configs", "alter", "--entity-type", "topics"], "pylog topics alter-config"),
        (
            ["configs", "alter", "--entity-type", "clients", "--entity-name", ""],
            "must not be empty",
        ),
        (
            [
                "configs",
                "alter",
                "--entity-type",
                "clients",
                "--entity-name",
                "a",
                "--entity-default",
            ],
            "must follow an --entity-type",
        ),
    ],
)
def test_malformed_command_lines_say_what_is_expected(argv, needle, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (
            ["--entity-type", "clients", "--add-config", "producer_byte_rate=1"],
            "needs --entity-name",
        ),
        (["--entity-type", "clients", "--entity-name", "a"], "nothing to change"),
        (
            ["--entity-type", "clients", "--entity-name", "a", "--add-config", "x"],
            "expected KEY=VALUE",
        ),
        (
            ["--entity-type", "clients", "--entity-name", "a", "--add-config", "x=fast"],
            "a quota is a number",
        ),
        (["--add-config", "x=1"], "give an entity"),
        (
            [
                "--entity-type",
                "clients",
                "--entity-name",
                "a",
                "--entity-type",
                "clients",
                "--entity-name",
                "b",
                "--add-config",
                "x=1",
            ],
            "users then clients",
        ),
    ],
)
def test_alter_refuses_before_asking_a_broker(argv, needle, capsys) -> None:
    assert main(["configs", "alter", *argv, "-b", "127.0.0.1:1"]) == 1
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--entity-type", "groups", "--add-config", "share.auto.offset.reset=earliest"],
         "needs --entity-name GROUP"),
        (["--entity-type", "groups", "--entity-default", "--add-config", "a=1"], "no default group"),
        (["--entity-type", "groups", "--entity-name", "g", "--entity-type", "clients",
          "--entity-name", "c", "--add-config", "a=1"], "one --entity-type groups"),
        (["--entity-type", "groups", "--entity-name", "g"], "nothing to change"),
        (["--entity-type", "groups", "--entity-name", "g", "--add-config", "a=1",
          "--delete-config", "a"], "both added and deleted"),
    ],
)
def test_group_configs_refused_before_asking_a_broker(argv, needle, capsys) -> None:
    assert main(["configs", "alter", *argv, "-b", "127.0.0.1:1"]) == 1
    assert needle in capsys.readouterr().err


def test_all_is_for_groups(capsys) -> None:
    assert main(["configs", "describe", "--entity-type", "clients", "--all", "-b", "127.0.0.1:1"]) == 1
    assert "--all lists group configs" in capsys.readouterr().err
