"""pylog.console.security: password hashes, --auth, CSRF tokens, secret configs."""

from __future__ import annotations

import pytest

from pylog.console.security import (
    csrf_matches,
    hash_password,
    is_secret_config,
    new_csrf_token,
    parse_auth,
    verify_password,
)

# A cheap scrypt cost keeps these tests fast; the format and the check are the same.
CHEAP = {"n": 2**4, "r": 1, "p": 1}


def test_hash_then_verify() -> None:
    stored = hash_password("s3cret", **CHEAP)
    assert stored.startswith("scrypt$16$1$1$")
    assert verify_password("s3cret", stored)
    assert not verify_password("s3cret ", stored)
    assert hash_password("s3cret", **CHEAP) != stored  # a fresh salt each time


def test_default_cost_is_scrypt_2_14() -> None:
    stored = hash_password("pw")
    assert stored.split("$")[1:4] == ["16384", "8", "1"]
    assert verify_password("pw", stored)


@pytest.mark.parametrize("bad", ["", "bcrypt$x", "scrypt$16$1$1$!!$AAAA",
                                 "scrypt$15$1$1$AAAA$AAAA", "scrypt$16$1$1$AAAA$"])
def test_malformed_hashes_are_refused_saying_how_to_make_one(bad: str) -> None:
    with pytest.raises(ValueError, match="hash-password"):
        verify_password("x", bad)


def test_parse_auth() -> None:
    stored = hash_password("pw", **CHEAP)
    creds = parse_auth(f"admin:{stored}")
    assert creds.user == "admin" and creds.password_hash == stored
    with pytest.raises(ValueError, match="USER:HASH"):
        parse_auth(stored.replace(":", ""))  # no colon at all
    with pytest.raises(ValueError, match="USER:HASH"):
        parse_auth(f":{stored}")


def test_csrf_tokens() -> None:
    a, b = new_csrf_token(), new_csrf_token()
    assert a != b and len(a) >= 40
    assert csrf_matches(a, a)
    assert not csrf_matches(a, b)
    assert not csrf_matches(None, a)
    assert not csrf_matches(a, "")


@pytest.mark.parametrize("name", ["ssl.keystore.password", "ssl.key.password",
                                  "sasl.jaas.config", "listener.name.x.sasl.jaas.config",
                                  "password.encoder.secret", "SSL.TRUSTSTORE.PASSWORD"])
def test_secret_configs(name: str) -> None:
    assert is_secret_config(name)


@pytest.mark.parametrize("name", ["retention.ms", "cleanup.policy", "sasl.mechanism",
                                  "ssl.keystore.location"])
def test_plain_configs(name: str) -> None:
    assert not is_secret_config(name)
    assert is_secret_config(name, is_sensitive=True)
