"""`pylog console`: its help, hash-password, and the errors it stops on before serving."""

from __future__ import annotations

import io
from typing import Any

import pytest

from pylog.cli.main import main
from pylog.console.security import verify_password


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["console", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for option in ("--read-only", "--auth", "--metrics-url", "--command-config", "-X",
                   "hash-password"):
        assert option in out
    with pytest.raises(SystemExit):
        main(["console", "hash-password", "--help"])
    assert "--auth USER:HASH" in capsys.readouterr().out


def test_hash_password_from_stdin(monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("correct horse\n"))
    assert main(["console", "hash-password"]) == 0
    stored = capsys.readouterr().out.strip()
    assert verify_password("correct horse", stored)
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert main(["console", "hash-password"]) == 1
    assert "empty password" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "words"), [
    (["--auth", "admin"], "USER:HASH"),
    (["--auth", "admin:plaintext"], "hash-password"),
    (["-X", "no.such.setting=1"], "no.such.setting"),
    (["-X", "novalue"], "KEY=VALUE"),
    (["--command-config", "/nonexistent/client.properties"], "--command-config"),
    (["--sample-interval", "0"], "--sample-interval"),
])
def test_bad_options_stop_before_serving(argv: list[str], words: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["console", "--port", "0", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pylog console: ") and words in err


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.5", False), ("console.example", False)])
def test_which_hosts_get_the_warning(host: str, loopback: bool) -> None:
    from pylog.cli.console_cmd import _is_loopback

    assert _is_loopback(host) is loopback


def test_client_settings_from_the_file_then_x(tmp_path: Any) -> None:
    from pylog.cli.console_cmd import _settings
    from pylog.cli.main import build_parser

    props = tmp_path / "client.properties"
    props.write_text("# the console's clients\nclient.id=ops-console\nrequest.timeout.ms=7000\n"
                     "metadata.max.age.ms=1000\n")
    args = build_parser().parse_args(["console", "-b", "h:1", "--command-config", str(props),
                                      "-X", "metadata.max.age.ms=2000"])
    assert _settings(args) == {"bootstrap.servers": "h:1", "request.timeout.ms": "7000",
                               "socket.connection.setup.timeout.ms": 10000,
                               "client.id": "ops-console", "metadata.max.age.ms": "2000"}
