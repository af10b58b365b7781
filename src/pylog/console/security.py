"""The console's guards: password hashes for basic auth, CSRF tokens, secret masking.

- **Passwords** are stored as scrypt hashes (``hash_password``; ``pylog console
  hash-password`` prints one): ``scrypt$N$r$p$salt$key`` with base64 salt and key. A check
  costs one scrypt run, so a successful ``Authorization`` header is remembered (its SHA-256)
  for the life of the process and not hashed again.
- **CSRF**: Django's double-submit scheme. A random token lives in a cookie
  (``SameSite=Strict``, ``HttpOnly``); every form carries it in a hidden field; a POST is
  accepted only when both are present and equal (``hmac.compare_digest``), and, when the
  browser sends ``Origin``, it names this host. A site that cannot read our cookie cannot
  forge the field.
- **Secrets**: configs whose names are secret by Kafka's conventions (``*.password``,
  ``sasl.jaas.config``, ``*.secret``...) or that the broker marks sensitive are shown masked
  and never sent to the page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from typing import NamedTuple

__all__ = ["hash_password", "verify_password", "parse_auth", "Credentials", "new_csrf_token",
           "csrf_matches", "is_secret_config", "MASK", "CSRF_COOKIE", "CSRF_FIELD"]

# scrypt cost: 2**14 blocks of 8 x 128 bytes (16 MiB), the parameters Python's docs and
# OWASP's cheat sheet give for interactive logins.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
MASK = "********"
CSRF_COOKIE = "pylog_console_csrf"
CSRF_FIELD = "csrf_token"


def hash_password(password: str, *, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P
                  ) -> str:
    """An scrypt hash of ``password`` with a fresh 16-byte salt, as ``--auth`` takes it."""
    salt = secrets.token_bytes(16)
    key = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=32,
                         maxmem=n * r * 256)
    b64 = base64.b64encode
    return f"scrypt${n}${r}${p}${b64(salt).decode()}${b64(key).decode()}"


def _parse_hash(stored: str) -> tuple[int, int, int, bytes, bytes]:
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        raise ValueError("expected a hash made by `pylog console hash-password` "
                         "(scrypt$N$r$p$salt$key)")
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, key = base64.b64decode(parts[4], validate=True), base64.b64decode(parts[5],
                                                                                validate=True)
    except (ValueError, binascii.Error):
        raise ValueError("malformed scrypt hash: make a new one with "
                         "`pylog console hash-password`") from None
    if n < 2 or n & (n - 1) or not 0 < r <= 64 or not 0 < p <= 16 or not key:
        raise ValueError("scrypt hash with parameters out of range: make a new one with "
                         "`pylog console hash-password`")
    return n, r, p, salt, key


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches ``stored`` (constant-time comparison of the keys).

    Raises:
        ValueError: ``stored`` is not a hash ``hash_password`` made.
    """
    n, r, p, salt, key = _parse_hash(stored)
    got = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=len(key),
                         maxmem=n * r * 256)
    return hmac.compare_digest(got, key)


class Credentials(NamedTuple):
    user: str
    password_hash: str


def parse_auth(text: str) -> Credentials:
    """``USER:HASH`` (``--auth``) -> Credentials, checking the hash's form.

    Raises:
        ValueError: no ``:``, an empty user, or a malformed hash.
    """
    user, sep, stored = text.partition(":")
    if not sep or not user:
        raise ValueError("--auth: expected USER:HASH (make the hash with "
                         "`pylog console hash-password`)")
    _parse_hash(stored)
    return Credentials(user, stored)


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_matches(cookie: str | None, field: str | None) -> bool:
    """Whether a POST's form field repeats its cookie (both present, equal)."""
    if not cookie or not field:
        return False
    return hmac.compare_digest(cookie.encode(), field.encode())


_SECRET_SUFFIXES = (".password", ".secret", "secret.key", ".jaas.config", "credentials")


def is_secret_config(name: str, is_sensitive: bool = False) -> bool:
    """Whether a config's value must not be shown: the broker says so, or its name is one
    of Kafka's secret kinds (``ssl.keystore.password``, ``sasl.jaas.config``,
    ``password.encoder.secret``...)."""
    lowered = name.lower()
    return (is_sensitive or lowered == "sasl.jaas.config" or "password" in lowered
            or lowered.endswith(_SECRET_SUFFIXES))
