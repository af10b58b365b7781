"""TLS contexts from ssl.* settings, and the broker's TLS stream (tls_io) over a socket
pair: handshakes with and without client certificates, data both ways, file regions."""

from __future__ import annotations

import asyncio
import pathlib
import socket
import ssl

import pytest
from _harness.tls import CLIENT_SUBJECT, KEY_PASSWORD, make_pki

from pylog.broker.tls_io import TlsStream
from pylog.config import ConfigError
from pylog.security.principal import PrincipalMapper
from pylog.security.tls import client_context, openssl_cipher_name, server_context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _server(pki: dict[str, str], **extra: object) -> dict[str, object]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki["broker"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki["ca"],
        **extra,
    }


def _client(pki: dict[str, str], **extra: object) -> dict[str, object]:
    return {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"], **extra}


async def _pair(
    server: ssl.SSLContext,
    client: ssl.SSLContext,
    mapper: PrincipalMapper,
    payload: bytes = b"ping",
) -> tuple[str, bytes]:
    """Handshake a TlsStream (server) with asyncio's TLS client over a socket pair; the
    client sends ``payload``, the server echoes it back reversed. Returns (principal,
    echoed)."""
    a, b = socket.socketpair()
    a.setblocking(False)
    stream = TlsStream(a, server)

    async def serve() -> str:
        await stream.handshake()
        principal = mapper.principal(stream.peer_certificate())
        got = b""
        while len(got) < len(payload):
            more = await stream.recv(65536)
            if not more:
                break
            got += more
        await stream.write_chunks([got[::-1]])
        return principal

    async def talk() -> bytes:
        reader, writer = await asyncio.open_connection(
            sock=b, ssl=client, server_hostname="localhost"
        )
        writer.write(payload)
        await writer.drain()
        echoed = await reader.readexactly(len(payload))
        writer.close()
        return echoed

    try:
        principal, echoed = await asyncio.wait_for(asyncio.gather(serve(), talk()), 10)
    finally:
        a.close()
    return principal, echoed


def test_handshake_and_echo_without_client_certificate(pki: dict[str, str]) -> None:
    principal, echoed = asyncio.run(
        _pair(server_context(_server(pki)), client_context(_client(pki)), PrincipalMapper())
    )
    assert (principal, echoed) == ("User:ANONYMOUS", b"gnip")


def test_mutual_tls_principal_from_the_mapping_rules(pki: dict[str, str]) -> None:
    server = server_context(_server(pki, **{"ssl.client.auth": "required"}))
    client = client_context(
        _client(pki, **{"ssl.keystore.type": "PEM", "ssl.keystore.location": pki["client"]})
    )
    principal, _ = asyncio.run(_pair(server, client, PrincipalMapper()))
    assert principal == "User:" + CLIENT_SUBJECT
    mapper = PrincipalMapper("RULE:^CN=([^,]+),OU=eng,.*$/$1/U,DEFAULT")
    assert asyncio.run(_pair(server, client, mapper))[0] == "User:ALICE"


def test_required_client_auth_refuses_a_client_without_certificate(pki: dict[str, str]) -> None:
    server = server_context(_server(pki, **{"ssl.client.auth": "required"}))
    with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
        asyncio.run(_pair(server, client_context(_client(pki)), PrincipalMapper()))


def test_large_payload_crosses_many_records(pki: dict[str, str]) -> None:
    data = bytes(range(256)) * 8192  # 2 MiB: many 16 KiB records, recv in pieces
    _, echoed = asyncio.run(
        _pair(server_context(_server(pki)), client_context(_client(pki)), PrincipalMapper(), data)
    )
    assert echoed == data[::-1]


def test_kip651_pem_text_and_encrypted_key(pki: dict[str, str]) -> None:
    text = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": pathlib.Path(pki["broker_cert"]).read_text(),
        "ssl.keystore.key": pathlib.Path(pki["broker_key"]).read_text(),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": pathlib.Path(pki["ca"]).read_text(),
    }
    server = server_context(text)
    client = client_context(
        _client(
            pki,
            **{
                "ssl.certificate.location": pki["client_cert"],
                "ssl.key.location": pki["client_key_encrypted"],
                "ssl.key.password": KEY_PASSWORD,
            },
        )
    )
    assert asyncio.run(_pair(server, client, PrincipalMapper()))[1] == b"gnip"


def test_pkcs12_key_store(pki: dict[str, str]) -> None:
    client = client_context(
        _client(
            pki,
            **{
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": pki["client_p12"],
                "ssl.keystore.password": KEY_PASSWORD,
            },
        )
    )
    server = server_context(_server(pki, **{"ssl.client.auth": "required"}))
    assert asyncio.run(_pair(server, client, PrincipalMapper()))[0] == "User:" + CLIENT_SUBJECT


@pytest.mark.parametrize(
    ("settings", "key", "fragment"),
    [
        ({}, "ssl.keystore.location", "needs a certificate"),
        ({"ssl.keystore.location": "x.jks"}, "ssl.keystore.type", "keytool"),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent.pem"},
            "ssl.keystore.location",
            "no such file",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "BROKER",
                "ssl.keystore.password": "x",
            },
            "ssl.keystore.password",
            "PEM",
        ),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "KEY"}, "ssl.keystore.key", "both"),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "BROKER",
                "ssl.enabled.protocols": ["TLSv1.2"],
                "ssl.protocol": "TLSv1",
            },
            "ssl.protocol",
            "allows no",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "BROKER",
                "ssl.cipher.suites": ["TLS_NO_SUCH_SUITE_WITH_X"],
            },
            "ssl.cipher.suites",
            "not a cipher",
        ),
    ],
)
def test_bad_settings_name_the_key(
    pki: dict[str, str], settings: dict[str, object], key: str, fragment: str
) -> None:
    settings = {k: (pki["broker"] if v == "BROKER" else v) for k, v in settings.items()}
    with pytest.raises(ConfigError) as info:
        server_context(settings, "listener.name.ssl.")
    assert info.value.key == "listener.name.ssl." + key and fragment in str(info.value)


def test_versions_and_ciphers(pki: dict[str, str]) -> None:
    ctx = server_context(
        _server(
            pki,
            **{
                "ssl.protocol": "TLSv1.2",
                "ssl.cipher.suites": ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"],
            },
        )
    )
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    tls12 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-ECDSA-AES128-GCM-SHA256"]
    assert openssl_cipher_name("TLS_RSA_WITH_AES_256_CBC_SHA") == "AES256-SHA"


def test_client_checks_the_host_name_unless_told_not_to(pki: dict[str, str]) -> None:
    assert client_context(_client(pki)).check_hostname
    off = client_context(_client(pki, **{"ssl.endpoint.identification.algorithm": ""}))
    assert not off.check_hostname


def test_requested_client_auth_takes_a_certificate_when_given(pki: dict[str, str]) -> None:
    server = server_context(_server(pki, **{"ssl.client.auth": "requested"}))
    anonymous = client_context(_client(pki))
    alice = client_context(
        _client(pki, **{"ssl.keystore.type": "PEM", "ssl.keystore.location": pki["client"]})
    )
    assert asyncio.run(_pair(server, anonymous, PrincipalMapper()))[0] == "User:ANONYMOUS"
    assert asyncio.run(_pair(server, alice, PrincipalMapper()))[0] == "User:" + CLIENT_SUBJECT
