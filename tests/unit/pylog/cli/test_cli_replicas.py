"""`pylog cluster elect-leaders | reassign | reassignments`: the command lines accepted and
refused (the calls themselves run against a cluster in tests/integration)."""

from __future__ import annotations

import pytest

from pylog.cli.main import build_parser, main


def test_partitions_and_moves_parse() -> None:
    args = build_parser().parse_args(["cluster", "elect-leaders", "--partition", "a.b-c:3",
                                      "--partition", "x:0", "--election-type", "UNCLEAN"])
    assert args.partition == [("a.b-c", 3), ("x", 0)] and args.election_type == "unclean"
    args = build_parser().parse_args(["cluster", "reassign", "--move", "t:0=3,1,2",
                                      "--cancel", "t:1"])
    assert args.move == [(("t", 0), [3, 1, 2])] and args.cancel == [("t", 1)]


@pytest.mark.parametrize("argv, needle", [
    (["cluster", "elect-leaders"], "one of the arguments"),
    (["cluster", "elect-leaders", "--partition", "t"], "TOPIC:PARTITION"),
    (["cluster", "elect-leaders", "--partition", "t:0", "--election-type", "sideways"],
     "invalid choice"),
    (["cluster", "reassign", "--move", "t:0"], "TOPIC:PARTITION=BROKER"),
    (["cluster", "reassign", "--move", "t:0=1,x"], "TOPIC:PARTITION=BROKER"),
])
def test_malformed_command_lines_say_what_is_expected(argv, needle, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


def test_reassign_without_anything_to_do(capsys) -> None:
    assert main(["cluster", "reassign", "-b", "127.0.0.1:1"]) == 1
    assert "nothing to do" in capsys.readouterr().err
    assert main(["cluster", "reassign", "--move", "t:0=1", "--cancel", "t:0",
                 "-b", "127.0.0.1:1"]) == 1
    assert "both moved and cancelled" in capsys.readouterr().err
