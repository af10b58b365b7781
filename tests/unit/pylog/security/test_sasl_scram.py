"""SCRAM math and exchanges: RFC 7677's SCRAM-SHA-256 example, both directions, and the
failures (one sentence for a wrong password and an unknown user)."""

from __future__ import annotations

import base64

import pytest

from pylog.security.sasl import SaslAuthenticationError, SaslProtocolError
from pylog.security.sasl.scram import (
    ScramClient,
    ScramCredential,
    ScramServer,
    check_iterations,
    make_credential,
    parse_client_first,
    salted_password,
)

# RFC 7677 section 3.
C_NONCE = "rOprNGfwEbeRWgbNEkqO"
S_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
MECH = "SCRAM-SHA-256"


def _server(creds: dict[str, ScramCredential]) -> ScramServer:
    return ScramServer(MECH, lambda user, mech: creds.get(user), b"secret", nonce=lambda: S_NONCE)


def test_rfc7677_client_side() -> None:
    client = ScramClient(MECH, "user", "pencil", nonce=C_NONCE)
    assert client.initial() == CLIENT_FIRST
    assert client.evaluate(SERVER_FIRST) == CLIENT_FINAL
    assert client.evaluate(SERVER_FINAL) is None and client.complete


def test_rfc7677_server_side() -> None:
    server = _server({"user": make_credential(MECH, "pencil", 4096, SALT)})
    assert server.evaluate(CLIENT_FIRST) == SERVER_FIRST
    assert server.evaluate(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.authorization_id == "user"


def test_credential_text_round_trip_holds_no_password() -> None:
    cred = make_credential("SCRAM-SHA-512", "alice-secret", 8192)
    text = cred.to_text()
    assert text.startswith("salt=") and text.endswith(",iterations=8192")
    assert "alice-secret" not in text and "stored_key=" in text and "server_key=" in text
    assert ScramCredential.from_text(text) == cred
    assert len(salted_password("SCRAM-SHA-512", "x", b"s", 4096)) == 64
    with pytest.raises(ValueError):
        ScramCredential.from_text("salt=AA==,iterations=4096")


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_exchange_and_failures_say_the_same(mech: str) -> None:
    creds = {"alice": make_credential(mech, "right", 4096)}

    def run(user: str, password: str) -> str | None:
        server = ScramServer(mech, lambda u, m: creds.get(u), b"k")
        client = ScramClient(mech, user, password)
        try:
            final = server.evaluate(client.evaluate(server.evaluate(client.initial())) or b"")
        except SaslAuthenticationError as exc:
            return str(exc)
        assert client.evaluate(final) is None
        return None

    assert run("alice", "right") is None
    wrong, unknown = run("alice", "wrong"), run("nobody", "x")
    assert wrong == unknown == ("Authentication failed during authentication due to invalid "
                                f"credentials with SASL mechanism {mech}")


def test_unknown_user_gets_a_stable_fake_salt() -> None:
    a = _server({}).evaluate(b"n,,n=ghost,r=abc")
    b = _server({}).evaluate(b"n,,n=ghost,r=abc")
    assert a == b and b",i=4096" in a


def test_tokenauth_extension_and_authzid_are_refused() -> None:
    server = _server({"user": make_credential(MECH, "pencil", 4096, SALT)})
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(b"n,,n=user,r=abc,tokenauth=true")
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        _server({}).evaluate(b"n,a=admin,n=user,r=abc")


@pytest.mark.parametrize("message", [
    b"", b"n", b"p=tls-unique,,n=user,r=abc", b"n,,r=abc,n=user", b"n,,n=,r=abc",
    b"n,,n=us=er,r=abc", b"n,,n=user,r=a,b", b"\xff\xfe", b"n,,n=user,r=" + b"x" * 20000,
])
def test_malformed_client_first(message: bytes) -> None:
    with pytest.raises(SaslProtocolError):
        parse_client_first(message)


def test_client_final_checks_nonce_binding_and_proof() -> None:
    cred = make_credential(MECH, "pencil", 4096, SALT)
    for final, error in [
        (CLIENT_FINAL.replace(b"r=rOpr", b"r=XOpr"), SaslProtocolError),
        (CLIENT_FINAL.replace(b"c=biws", b"c=eSws"), SaslAuthenticationError),
        (CLIENT_FINAL[:-8] + b"AAAAAAA=", SaslAuthenticationError),
        (CLIENT_FINAL.split(b",p=")[0], SaslProtocolError),
        (CLIENT_FINAL + b"%%", SaslProtocolError),
    ]:
        server = _server({"user": cred})
        server.evaluate(CLIENT_FIRST)
        with pytest.raises(error):
            server.evaluate(final)
        assert not server.complete


def test_final_nonce_may_repeat_the_client_nonce_as_kafka_allows() -> None:
    # librdkafka < 2.1 sends r=<client nonce><server's nonce>; Kafka checks endsWith.
    creds = {"user": make_credential(MECH, "pencil", 4096)}
    server = ScramServer(MECH, lambda u, m: creds.get(u), b"k")
    client = ScramClient(MECH, "user", "pencil", nonce="abc")
    server_first = server.evaluate(client.initial())
    nonce = server_first.decode().split(",")[0][2:]
    final = client.evaluate(server_first.replace(f"r={nonce}".encode(), f"r=abc{nonce}".encode()))
    assert final is not None and f"r=abc{nonce}".encode() in final
    # The proof was computed over a different AuthMessage, so this one fails, but on the proof.
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(final)


def test_iteration_bounds_are_kafkas() -> None:
    assert check_iterations(4096) is None and check_iterations(16384) is None
    assert "minimum 4096" in (check_iterations(4095) or "")
    assert "maximum 16384" in (check_iterations(16385) or "")
