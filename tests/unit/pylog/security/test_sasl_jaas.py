"""Kafka's JAAS syntax: quoted values and escapes, comments, flags, one entry, errors that
name the key."""

from __future__ import annotations

import pytest

from pylog.config.values import ConfigError
from pylog.security.sasl.jaas import parse_jaas_config, plain_users

KEY = "listener.name.sasl_ssl.plain.sasl.jaas.config"


def test_plain_entry_with_users() -> None:
    e = parse_jaas_config(KEY, 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                               'username="admin" password="admin-secret" user_admin="admin-secret" '
                               'user_alice="alice-secret";')
    assert e.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert e.flag == "required"
    assert e.options["username"] == "admin"
    assert plain_users(e) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert "admin-secret" not in repr(e)


def test_quoting_escapes_unquoted_values_and_comments() -> None:
    e = parse_jaas_config(KEY, '  x.Module  REQUIRED\n  a="with \\"quote\\" and \\\\ and ;=" '
                               'b=plain_word c="" /* comment */ d="multi\nline" // c2\n;  ')
    assert e.flag == "required"
    assert e.options == {"a": 'with "quote" and \\ and ;=', "b": "plain_word", "c": "",
                         "d": "multi\nline"}
    assert parse_jaas_config(KEY, "x.M optional;").options == {}


@pytest.mark.parametrize(("text", "fragment"), [
    ("", "empty JAAS configuration"),
    ("x.M required a=\"1\"", "missing ';'"),
    ("x.M mandatory;", "not a control flag"),
    ("x.M required a;", "expected '=' after option 'a'"),
    ("x.M required a=;", "option 'a' has no value"),
    ('x.M required a="open;', "unterminated quoted value"),
    ('x.M required a="1" a="2";', "given twice"),
    ("x.M required; y.N required;", "exactly one login module"),
    ("x.M required /* never closed", "unterminated comment"),
])
def test_errors_name_the_key(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_jaas_config(KEY, text)
    assert KEY in str(info.value) and fragment in str(info.value)
