"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them, sans-IO.

Messages (RFC 5802 section 7; Kafka's ``ScramMessages``)::

    client-first   gs2-header client-first-bare       gs2-header = "n,," | "n,a=<authzid>,"
    client-first-bare  n=<saslname>,r=<c-nonce>[,<ext>=<value>]*   (Kafka: tokenauth=true, ...)
    server-first   r=<c-nonce><s-nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=<base64 gs2-header>,r=<nonce>,p=<base64 ClientProof>
    server-final   v=<base64 ServerSignature>  |  e=<error>

Keys (RFC 5802 section 3)::

    SaltedPassword = Hi(password, salt, i)  (PBKDF2-HMAC)
    ClientKey = HMAC(SaltedPassword, "Client Key"); StoredKey = H(ClientKey)
    ServerKey = HMAC(SaltedPassword, "Server Key")
    AuthMessage = client-first-bare + "," + server-first + "," + client-final-without-proof
    ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(ServerKey, AuthMessage)

The server keeps a ``ScramCredential`` (salt, StoredKey, ServerKey, iterations): never the
password. It verifies ``H(ClientProof XOR HMAC(StoredKey, AuthMessage)) == StoredKey`` with
``hmac.compare_digest``. An unknown user gets a salt derived from a per-process secret and
the name, so the exchange looks the same until its final step fails with the same sentence as
a wrong password (RFC 5802 section 5.1 advice; Kafka fails earlier, with the same text).

Kafka's bounds: iterations 4096 to 16384 (``ScramMechanism.minIterations``, KIP-554's max).
Objects are per connection and not thread-safe; the functions are pure.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from pylog.security.sasl import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SaslAuthenticationError,
    SaslProtocolError,
)

#: {mechanism: hashlib name}.
HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
#: KIP-554 mechanism ids (``ScramMechanism.type``) as the admin APIs carry them.
MECHANISM_IDS = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_IDS.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
# Longest SCRAM message accepted (names, nonces and extensions are short; Kafka's whole SASL
# receive is bounded by sasl.server.max.receive.size anyway).
MAX_MESSAGE = 16 * 1024

#: What a client is told for any SCRAM failure (Kafka's text for SaslExceptions).
FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


@dataclass(frozen=True)
class ScramCredential:
    """What the server stores for one user and mechanism (Kafka's ``ScramCredential``)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        """Kafka's stored form: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=N``."""
        b64 = _b64
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        """Parse ``to_text``'s form.

        Raises:
            ValueError: a missing or malformed field.
        """
        fields: dict[str, str] = {}
        for part in text.split(","):
            k, sep, v = part.partition("=")
            if not sep:
                raise ValueError(f"malformed SCRAM credential field {k!r}")
            fields[k.strip()] = v.strip()
        try:
            return cls(_unb64(fields["salt"]), _unb64(fields["stored_key"]),
                       _unb64(fields["server_key"]), int(fields["iterations"]))
        except KeyError as exc:
            raise ValueError(f"SCRAM credential without {exc.args[0]}") from None

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations})"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ValueError(f"invalid base64 {text[:40]!r}") from None


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def salted_password(mechanism: str, password: str | bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802 (PBKDF2 with HMAC of the mechanism's hash)."""
    pw = password.encode("utf-8") if isinstance(password, str) else password
    return hashlib.pbkdf2_hmac(HASHES[mechanism], pw, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential for a salted password (KIP-554's AlterUserScramCredentials
    sends the salted password, not the password)."""
    h = HASHES[mechanism]
    client_key = _hmac(h, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(h, client_key).digest(),
                           _hmac(h, salted, b"Server Key"), iterations)


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """A new credential: a random 32-byte salt unless given."""
    salt = secrets.token_bytes(32) if salt is None else salt
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations),
                                  salt, iterations)


def check_iterations(iterations: int) -> str | None:
    """Why ``iterations`` is unacceptable, or None."""
    if iterations < MIN_ITERATIONS:
        return f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS}"
    if iterations > MAX_ITERATIONS:
        return f"Iterations {iterations} is more than the maximum {MAX_ITERATIONS}"
    return None


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _saslname_decode(text: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` is an error."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "=":
            code = text[i + 1:i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise SaslProtocolError("invalid '=' escape in a SCRAM user name")
            i += 3
            continue
        if c == ",":
            raise SaslProtocolError("unescaped ',' in a SCRAM user name")
        out.append(c)
        i += 1
    return "".join(out)


def saslname_encode(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _attributes(text: str) -> list[tuple[str, str]]:
    """``a=x,b=y`` -> [(a, x), (b, y)]; each attribute one letter or an extension name."""
    out = []
    for part in text.split(","):
        k, sep, v = part.partition("=")
        if not sep or not k:
            raise SaslProtocolError(f"malformed SCRAM attribute {part[:40]!r}")
        out.append((k, v))
    return out


def _valid_nonce(nonce: str) -> bool:
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


@dataclass(frozen=True)
class ClientFirst:
    gs2_header: str
    authzid: str
    username: str
    nonce: str
    extensions: dict[str, str]
    bare: str


def parse_client_first(message: bytes) -> ClientFirst:
    """Parse a client-first message.

    Raises:
        SaslProtocolError: not a client-first message, or channel binding requested.
    """
    if len(message) > MAX_MESSAGE:
        raise SaslProtocolError("SCRAM client-first message too long")
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslProtocolError("SCRAM client-first message is not UTF-8") from None
    flag, sep, rest = text.partition(",")
    if not sep or flag not in ("n", "y"):
        # "p=...": the client wants channel binding, which Kafka does not offer.
        raise SaslProtocolError("invalid SCRAM client-first message: channel binding is not supported"
                                if flag.startswith("p") else "invalid SCRAM client-first message")
    authz, sep, bare = rest.partition(",")
    if not sep:
        raise SaslProtocolError("invalid SCRAM client-first message")
    authzid = ""
    if authz:
        if not authz.startswith("a="):
            raise SaslProtocolError("invalid SCRAM authorization id")
        authzid = _saslname_decode(authz[2:])
    attrs = _attributes(bare)
    if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
        raise SaslProtocolError("invalid SCRAM client-first message: expected n=...,r=...")
    username = _saslname_decode(attrs[0][1])
    nonce = attrs[1][1]
    if not username or not _valid_nonce(nonce):
        raise SaslProtocolError("invalid SCRAM client-first message: empty name or bad nonce")
    extensions = dict(attrs[2:])
    return ClientFirst(f"{flag},{authz},", authzid, username, nonce, extensions, bare)


class ScramServer:
    """The server side of one SCRAM exchange (Kafka's ``ScramSaslServer``).

    Args:
        mechanism: SCRAM-SHA-256 or SCRAM-SHA-512.
        lookup: ``lookup(username, mechanism)`` -> ScramCredential or None.
        fake_secret: per-process random bytes making unknown users' fake salts.
        nonce: server nonce factory (tests pass a fixed one).
    """

    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None],
                 fake_secret: bytes, nonce: Callable[[], str] | None = None) -> None:
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._lookup = lookup
        self._fake_secret = fake_secret
        self._nonce = nonce or (lambda: secrets.token_urlsafe(24))
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._known = False
        self.complete = False
        self.authorization_id: str | None = None
        self.failed_sentence = FAILED.format(mechanism)

    def _fail(self, reason: str) -> SaslAuthenticationError:
        return SaslAuthenticationError(self.failed_sentence, reason)

    def evaluate(self, response: bytes) -> bytes:
        """The challenge for ``response``.

        Raises:
            SaslAuthenticationError: bad credentials (one sentence for all of them).
            SaslProtocolError: a malformed message or a step after completion.
        """
        if self.complete:
            raise SaslProtocolError("SCRAM exchange already complete")
        if self._first is None:
            return self._on_client_first(response)
        return self._on_client_final(response)

    def _on_client_first(self, response: bytes) -> bytes:
        first = parse_client_first(response)
        if first.extensions.get("tokenauth", "").lower() == "true":
            # Delegation tokens (KIP-48) are not issued by pylog.
            raise self._fail(f"user {first.username!r}: delegation token authentication is "
                             "not supported")
        if first.authzid and first.authzid != first.username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username", f"user {first.username!r} asked for authorization id "
                f"{first.authzid!r}")
        cred = self._lookup(first.username, self.mechanism)
        self._known = cred is not None
        if cred is None:
            salt = _hmac(self._hash, self._fake_secret, first.username.encode("utf-8"))
            cred = ScramCredential(salt, b"", b"", DEFAULT_ITERATIONS)
        elif cred.iterations < MIN_ITERATIONS:
            raise self._fail(f"user {first.username!r}: stored iterations {cred.iterations} "
                             f"below the minimum {MIN_ITERATIONS}")
        self._credential = cred
        self._first = first
        self._server_first = f"r={first.nonce}{self._nonce()},s={_b64(cred.salt)},i={cred.iterations}"
        return self._server_first.encode("ascii")

    def _on_client_final(self, response: bytes) -> bytes:
        first, cred = self._first, self._credential
        assert first is not None and cred is not None
        if len(response) > MAX_MESSAGE:
            raise SaslProtocolError("SCRAM client-final message too long")
        try:
            text = response.decode("ascii")
        except UnicodeDecodeError:
            raise SaslProtocolError("SCRAM client-final message is not ASCII") from None
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise SaslProtocolError("invalid SCRAM client-final message: no proof")
        attrs = dict(_attributes(without_proof))
        nonce = self._server_first.split(",", 1)[0][2:]
        # Kafka checks endsWith, not equality: librdkafka before 2.1 sends the client nonce
        # twice (client nonce + the server's whole nonce). The proof still covers what was sent.
        if not attrs.get("r", "").endswith(nonce):
            raise SaslProtocolError("Invalid client nonce in the final client message.")
        try:
            binding = _unb64(attrs.get("c", ""))
            proof = _unb64(proof_attr)
        except ValueError:
            raise SaslProtocolError("invalid base64 in the SCRAM client-final message") from None
        if binding != first.gs2_header.encode("utf-8"):
            raise self._fail(f"user {first.username!r}: channel binding data does not match")
        if not self._known:
            raise self._fail(f"unknown user {first.username!r}")
        auth_message = f"{first.bare},{self._server_first},{without_proof}".encode()
        h = self._hash
        signature = _hmac(h, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._fail(f"user {first.username!r}: invalid client proof")
        client_key = _xor(proof, signature)
        if not hmac.compare_digest(hashlib.new(h, client_key).digest(), cred.stored_key):
            raise self._fail(f"user {first.username!r}: invalid password")
        self.complete = True
        self.authorization_id = first.username
        server_signature = _hmac(h, cred.server_key, auth_message)
        return f"v={_b64(server_signature)}".encode("ascii")


class ScramClient:
    """The client side of one SCRAM exchange (``initial()``, then ``evaluate`` twice)."""

    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: str | None = None, extensions: dict[str, str] | None = None) -> None:
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._username = username
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._extensions = extensions or {}
        self._bare = ""
        self._server_signature = b""
        self.complete = False

    def initial(self) -> bytes:
        ext = "".join(f",{k}={v}" for k, v in self._extensions.items())
        self._bare = f"n={saslname_encode(self._username)},r={self._nonce}{ext}"
        return f"n,,{self._bare}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The next message, or None once the server's signature is verified.

        Raises:
            SaslAuthenticationError: the server's messages are invalid or its signature wrong.
        """
        try:
            text = challenge.decode("utf-8")
            attrs = dict(_attributes(text))
        except (UnicodeDecodeError, SaslProtocolError):
            raise SaslAuthenticationError("invalid SCRAM message from the server") from None
        if self._server_signature:
            if "e" in attrs:
                raise SaslAuthenticationError(f"SCRAM authentication failed: {attrs['e']}")
            try:
                ok = hmac.compare_digest(_unb64(attrs.get("v", "")), self._server_signature)
            except ValueError:
                ok = False
            if not ok:
                raise SaslAuthenticationError("invalid SCRAM server signature")
            self.complete = True
            return None
        nonce, salt_text, iters_text = attrs.get("r", ""), attrs.get("s", ""), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) <= len(self._nonce):
            raise SaslAuthenticationError("invalid SCRAM server nonce")
        try:
            salt = _unb64(salt_text)
            iterations = int(iters_text)
        except ValueError:
            raise SaslAuthenticationError("invalid SCRAM server-first message") from None
        if not MIN_ITERATIONS <= iterations <= 1_000_000:
            raise SaslAuthenticationError(f"SCRAM iterations {iterations} out of range")
        h = self._hash
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        client_key = _hmac(h, salted, b"Client Key")
        stored_key = hashlib.new(h, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        proof = _xor(client_key, _hmac(h, stored_key, auth_message))
        self._server_signature = _hmac(h, _hmac(h, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode("ascii")
