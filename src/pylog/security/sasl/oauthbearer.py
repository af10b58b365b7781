"""SASL/OAUTHBEARER (RFC 7628) as Kafka speaks it, sans-IO, with Kafka's two validators.

Client's first (and only) message (RFC 7628 section 3.1; ``kvsep`` is ``%x01``)::

    gs2-header kvsep "auth=Bearer " token kvsep *(key "=" value kvsep) kvsep
    gs2-header = "n,," | "n,a=<authzid>,"

The server answers an empty challenge when the token is valid. Otherwise it answers a JSON
status (``{"status":"invalid_token"}``; ``insufficient_scope`` with the ``scope`` needed),
the client must answer a single ``%x01``, and the exchange fails with that status as the
message (Kafka's ``OAuthBearerSaslServer``).

Validators (``validate(token, now_ms) -> Token`` or ``TokenError``):

- ``UnsecuredValidator``: Kafka's default, ``OAuthBearerUnsecuredValidatorCallbackHandler``:
  ``alg: none`` tokens with an empty signature; options (JAAS options of the listener's
  OAuthBearerLoginModule) ``unsecuredValidatorPrincipalClaimName`` (``sub``),
  ``unsecuredValidatorScopeClaimName`` (``scope``), ``unsecuredValidatorRequiredScope``
  (space-separated), ``unsecuredValidatorAllowableClockSkewMs`` (0). ``exp`` is required.
- ``JwksValidator``: Kafka's ``OAuthBearerValidatorCallbackHandler`` (KIP-768): RS256/384/512,
  PS256/384/512 and ES256/384/512 signatures checked against the keys of
  ``sasl.oauthbearer.jwks.endpoint.url`` (a ``file:`` path or an http(s) URL), ``iss`` and
  ``aud`` against ``sasl.oauthbearer.expected.issuer`` / ``.expected.audience``, the
  principal from ``sasl.oauthbearer.sub.claim.name``, clock skew
  ``sasl.oauthbearer.clock.skew.seconds``.

A valid token's ``exp`` bounds the session (KIP-368 re-authentication).
Servers are per connection; validators are shared and thread-safe (the JWKS key set is
replaced whole, never mutated).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import threading
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pylog._clock import Clock, SystemClock
from pylog.security.sasl import SaslAuthenticationError, SaslProtocolError

log = logging.getLogger("pylog.security.sasl.oauthbearer")

KVSEP = "\x01"
MAX_MESSAGE = 64 * 1024
_KEY_RE = re.compile(r"[A-Za-z]+")
_VALUE_RE = re.compile(r"[\x21-\x7E \t\r\n]*")
_AUTH_RE = re.compile(r"Bearer ([A-Za-z0-9\-._~+/]+=*)", re.I)


@dataclass(frozen=True)
class Token:
    """A validated token: its principal, scope, expiry (ms since the epoch) and claims."""

    principal: str
    lifetime_ms: int
    scope: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=dict)


class TokenError(Exception):
    """An invalid token: ``status`` for the JSON answer, ``scope`` when a scope is missing."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope


class Validator(Protocol):
    def validate(self, token: str, now_ms: int) -> Token: ...


def _b64url(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise TokenError("token part is not base64url") from None


def _json_part(text: str, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(_b64url(text))
    except (ValueError, UnicodeDecodeError):
        raise TokenError(f"token {what} is not JSON") from None
    if not isinstance(obj, dict):
        raise TokenError(f"token {what} is not a JSON object")
    return obj


def _split(token: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError(f"a JWS has 3 dot-separated parts, this one has {len(parts)}")
    return _json_part(parts[0], "header"), _json_part(parts[1], "payload"), parts


def _number(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenError(f"required claim {name!r} is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TokenError(f"claim {name!r} is not a number")
    return float(value)


def _scope(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return frozenset(value)
    raise TokenError(f"claim {name!r} is neither a string nor a list of strings")


def _principal(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not value.strip():
        raise TokenError(f"the principal claim {name!r} is missing or empty")
    return value


def _check_times(claims: Mapping[str, Any], now_ms: int, skew_ms: int) -> int:
    exp = _number(claims, "exp", True)
    assert exp is not None
    iat = _number(claims, "iat", False)
    if exp * 1000 <= now_ms - skew_ms:
        raise TokenError(f"the token expired at {int(exp * 1000)} ms (now {now_ms} ms)")
    if iat is not None and iat * 1000 > now_ms + skew_ms:
        raise TokenError(f"the token was issued in the future ({int(iat * 1000)} ms; now {now_ms} ms)")
    nbf = _number(claims, "nbf", False)
    if nbf is not None and nbf * 1000 > now_ms + skew_ms:
        raise TokenError("the token is not valid yet (nbf)")
    return int(exp * 1000)


class UnsecuredValidator:
    """Kafka's unsecured JWS validator (see the module docstring)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub") or "sub"
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope") or "scope"
        self.required_scope = frozenset(options.get("unsecuredValidatorRequiredScope", "").split())
        try:
            self.skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0)
        except ValueError:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must be an integer") from None
        if self.skew_ms < 0:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must not be negative")

    def validate(self, token: str, now_ms: int) -> Token:
        header, claims, parts = _split(token)
        if header.get("alg") != "none":
            raise TokenError("an unsecured token has the header alg: none")
        if parts[2]:
            raise TokenError("an unsecured token has an empty signature")
        lifetime = _check_times(claims, now_ms, self.skew_ms)
        principal = _principal(claims, self.principal_claim)
        scope = _scope(claims, self.scope_claim)
        missing = self.required_scope - scope
        if missing:
            raise TokenError(f"the token lacks the required scope {' '.join(sorted(missing))}",
                             "insufficient_scope", " ".join(sorted(self.required_scope)))
        return Token(principal, lifetime, scope, claims)


# --- JWKS ------------------------------------------------------------------------------------

_ALGS = {"RS256": ("RSA", "SHA256"), "RS384": ("RSA", "SHA384"), "RS512": ("RSA", "SHA512"),
         "PS256": ("PSS", "SHA256"), "PS384": ("PSS", "SHA384"), "PS512": ("PSS", "SHA512"),
         "ES256": ("EC", "SHA256"), "ES384": ("EC", "SHA384"), "ES512": ("EC", "SHA512")}


def _int_b64(text: Any) -> int:
    if not isinstance(text, str):
        raise ValueError("JWK number is not a string")
    return int.from_bytes(_b64url(text), "big")


def _load_jwk(jwk: Mapping[str, Any]) -> Any:
    """A ``cryptography`` public key for a JWK (RSA or EC P-256/384/521)."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    kty = jwk.get("kty")
    if kty == "RSA":
        return rsa.RSAPublicNumbers(_int_b64(jwk.get("e")), _int_b64(jwk.get("n"))).public_key()
    if kty == "EC":
        curves = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}
        curve = curves.get(str(jwk.get("crv")))
        if curve is None:
            raise ValueError(f"unsupported EC curve {jwk.get('crv')!r}")
        return ec.EllipticCurvePublicNumbers(_int_b64(jwk.get("x")), _int_b64(jwk.get("y")),
                                             curve).public_key()
    raise ValueError(f"unsupported JWK key type {kty!r}")


def fetch_jwks(url: str, timeout_s: float = 10.0) -> dict[str | None, Any]:
    """{kid: public key} of the JWKS at ``url`` (``file:`` or http(s)).

    Raises:
        ValueError: unreadable or not a JWKS.
    """
    parsed = urllib.parse.urlparse(url)
    try:
        if parsed.scheme == "file":
            with open(urllib.request.url2pathname(parsed.path), "rb") as f:
                data = f.read()
        elif parsed.scheme in ("http", "https"):
            with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - configured URL
                data = resp.read(4 * 1024 * 1024)
        else:
            raise ValueError(f"{url}: the JWKS URL must be file:, http: or https:")
        doc = json.loads(data)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the JWKS at {url}: {exc}") from None
    keys: dict[str | None, Any] = {}
    for jwk in doc.get("keys", []) if isinstance(doc, dict) else []:
        if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
            continue
        try:
            keys[jwk.get("kid")] = (_load_jwk(jwk), jwk.get("alg"))
        except (ValueError, TypeError, TokenError) as exc:
            log.warning("%s: skipping key %r: %s", url, jwk.get("kid"), exc)
    if not keys:
        raise ValueError(f"the JWKS at {url} has no usable signing key")
    return keys


class JwksValidator:
    """Signed tokens checked against a JWKS (see the module docstring). The key set is read
    at construction and refreshed every ``refresh_ms`` (and at most every 10 s when a token
    names an unknown key) on a background thread; validation never waits for the network."""

    def __init__(self, url: str, *, issuer: str | None, audience: list[str], sub_claim: str,
                 scope_claim: str, skew_s: int, refresh_ms: int, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self.url = url
        self.issuer = issuer
        self.audience = list(audience)
        self.sub_claim = sub_claim or "sub"
        self.scope_claim = scope_claim or "scope"
        self.skew_ms = skew_s * 1000
        self.refresh_s = max(refresh_ms, 1000) / 1000.0
        self._keys = fetch_jwks(url)
        self._loaded = self._clock.monotonic()
        self._refreshing = threading.Lock()

    def _maybe_refresh(self, force: bool) -> None:
        age = self._clock.monotonic() - self._loaded
        if (age < self.refresh_s and not force) or (force and age < 10.0):
            return
        if not self._refreshing.acquire(blocking=False):
            return

        def run() -> None:
            try:
                self._keys = fetch_jwks(self.url)
            except ValueError as exc:
                log.warning("JWKS refresh failed (keeping the old keys): %s", exc)
            finally:
                self._loaded = self._clock.monotonic()
                self._refreshing.release()
        threading.Thread(target=run, name="pylog-jwks-refresh", daemon=True).start()

    def validate(self, token: str, now_ms: int) -> Token:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding, utils

        header, claims, parts = _split(token)
        alg = header.get("alg")
        if alg not in _ALGS:
            raise TokenError(f"unsupported signature algorithm {alg!r}")
        self._maybe_refresh(False)
        keys = self._keys
        kid = header.get("kid")
        entry = keys.get(kid) if kid is not None or len(keys) != 1 else next(iter(keys.values()))
        if entry is None:
            self._maybe_refresh(True)
            raise TokenError(f"no key {kid!r} in the JWKS")
        key, key_alg = entry
        if key_alg and key_alg != alg:
            raise TokenError(f"key {kid!r} is for {key_alg}, the token says {alg}")
        family, hash_name = _ALGS[alg]
        digest = getattr(hashes, hash_name)()
        signed = f"{parts[0]}.{parts[1]}".encode("ascii")
        signature = _b64url(parts[2])
        try:
            if family == "RSA":
                key.verify(signature, signed, padding.PKCS1v15(), digest)
            elif family == "PSS":
                key.verify(signature, signed, padding.PSS(padding.MGF1(digest), digest.digest_size),
                           digest)
            else:
                half = len(signature) // 2
                der = utils.encode_dss_signature(int.from_bytes(signature[:half], "big"),
                                                 int.from_bytes(signature[half:], "big"))
                key.verify(der, signed, ec.ECDSA(digest))
        except (InvalidSignature, TypeError, ValueError, AttributeError):
            raise TokenError("the token's signature does not verify") from None
        lifetime = _check_times(claims, now_ms, self.skew_ms)
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise TokenError(f"unexpected issuer {claims.get('iss')!r}")
        if self.audience:
            aud = claims.get("aud")
            auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            if not set(self.audience) & {a for a in auds if isinstance(a, str)}:
                raise TokenError(f"unexpected audience {aud!r}")
        return Token(_principal(claims, self.sub_claim), lifetime,
                     _scope(claims, self.scope_claim), claims)


# --- the exchange ----------------------------------------------------------------------------


def parse_client_message(message: bytes) -> tuple[str, str, dict[str, str]]:
    """(authzid, token, extensions) of a client's first message.

    Raises:
        SaslProtocolError: not RFC 7628's format.
    """
    if len(message) > MAX_MESSAGE:
        raise SaslProtocolError("OAUTHBEARER message too long")
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslProtocolError("OAUTHBEARER message is not UTF-8") from None
    if not text.startswith("n,") and not text.startswith("y,"):
        raise SaslProtocolError("invalid OAUTHBEARER message: bad GS2 header")
    gs2_end = text.find(",", 2)
    if gs2_end < 0:
        raise SaslProtocolError("invalid OAUTHBEARER message: bad GS2 header")
    authz = text[2:gs2_end]
    authzid = ""
    if authz:
        if not authz.startswith("a="):
            raise SaslProtocolError("invalid OAUTHBEARER message: bad authorization id")
        authzid = authz[2:].replace("=2C", ",").replace("=3D", "=")
    rest = text[gs2_end + 1:]
    if not rest.startswith(KVSEP) or not rest.endswith(KVSEP + KVSEP):
        raise SaslProtocolError("invalid OAUTHBEARER message: bad key/value framing")
    pairs: dict[str, str] = {}
    for item in rest[1:-2].split(KVSEP):
        k, sep, v = item.partition("=")
        if not sep or not _KEY_RE.fullmatch(k) or not _VALUE_RE.fullmatch(v) or k in pairs:
            raise SaslProtocolError("invalid OAUTHBEARER message: bad key/value pair")
        pairs[k] = v
    auth = pairs.pop("auth", None)
    m = _AUTH_RE.fullmatch(auth or "")
    if m is None:
        raise SaslProtocolError("invalid OAUTHBEARER message: no auth=Bearer <token>")
    return authzid, m.group(1), pairs


class OAuthBearerServer:
    """The server side of one OAUTHBEARER exchange.

    Args:
        validator: checks tokens.
        now_ms: the broker clock's wall time in ms.
    """

    mechanism = "OAUTHBEARER"

    def __init__(self, validator: Validator, now_ms: Any) -> None:
        self._validator = validator
        self._now_ms = now_ms
        self._error: str | None = None
        self._reason = ""
        self.complete = False
        self.authorization_id: str | None = None
        self.lifetime_ms: int | None = None

    def evaluate(self, response: bytes) -> bytes:
        if self.complete:
            raise SaslProtocolError("OAUTHBEARER exchange already complete")
        if self._error is not None:
            if bytes(response) != KVSEP.encode():
                raise SaslProtocolError("OAUTHBEARER: expected %x01 after an error")
            raise SaslAuthenticationError(self._error, self._reason)
        authzid, token, _extensions = parse_client_message(bytes(response))
        try:
            valid = self._validator.validate(token, self._now_ms())
        except TokenError as exc:
            body: dict[str, str] = {"status": exc.status}
            if exc.scope:
                body["scope"] = exc.scope
            self._error = json.dumps(body, separators=(",", ":"))
            self._reason = f"invalid token: {exc}"
            return self._error.encode("utf-8")
        if authzid and authzid != valid.principal:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username", f"token principal {valid.principal!r}, authorization id {authzid!r}")
        self.complete = True
        self.authorization_id = valid.principal
        self.lifetime_ms = valid.lifetime_ms
        return b""


def unsecured_token(principal: str, lifetime_s: float = 3600.0, *, scope: list[str] | None = None,
                    principal_claim: str = "sub", now_s: float | None = None,
                    extra: Mapping[str, Any] | None = None) -> str:
    """An ``alg: none`` token (what Kafka's unsecured login module makes)."""
    now = SystemClock().time_ms() / 1000.0 if now_s is None else now_s
    claims: dict[str, Any] = {principal_claim: principal, "iat": now, "exp": now + lifetime_s}
    if scope:
        claims["scope"] = scope
    claims.update(extra or {})

    def enc(obj: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{enc({'alg': 'none'})}.{enc(claims)}."


class OAuthBearerClient:
    """The client side: one message with a token; on a JSON error, ``%x01`` then failure."""

    mechanism = "OAUTHBEARER"

    def __init__(self, token: str, extensions: Mapping[str, str] | None = None) -> None:
        ext = "".join(f"{k}={v}{KVSEP}" for k, v in (extensions or {}).items())
        self._message = f"n,,{KVSEP}auth=Bearer {token}{KVSEP}{ext}{KVSEP}".encode()
        self.complete = False
        self._error: str | None = None

    def initial(self) -> bytes:
        return self._message

    def evaluate(self, challenge: bytes) -> bytes | None:
        if challenge:
            self._error = bytes(challenge).decode("utf-8", "replace")
            return KVSEP.encode()
        self.complete = True
        return None
