"""OAUTHBEARER with signed tokens: a broker validating RS256 tokens against a JWKS served
over http on 127.0.0.1 (Kafka's OAuthBearerValidatorCallbackHandler settings), and
pylog.client sending a static token (``sasl.oauthbearer.token``); a token signed by another
key, or for another audience, is refused with the JSON status and the broker goes on."""

from __future__ import annotations

import base64
import http.server
import json
import re
import threading
import time

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from pylog.client import Admin, Consumer, Producer, TopicPartition
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _token(key, claims: dict, kid: str = "k1") -> str:
    head = _b64(json.dumps({"alg": "RS256", "kid": kid}).encode())
    body = _b64(json.dumps(claims).encode())
    sig = key.sign(f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{head}.{body}.{_b64(sig)}"


@pytest.fixture(scope="module")
def jwks_broker(tmp_path_factory: pytest.TempPathFactory):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    n = key.public_key().public_numbers()
    jwks = json.dumps({"keys": [{"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
                                 "n": _b64(n.n.to_bytes((n.n.bit_length() + 7) // 8, "big")),
                                 "e": _b64(n.e.to_bytes(3, "big"))}]}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(jwks)))
            self.end_headers()
            self.wfile.write(jwks)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    data = tmp_path_factory.mktemp("jwks") / "data"
    data.mkdir()
    b = BrokerProcess(data, {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url":
            f"http://127.0.0.1:{server.server_address[1]}/jwks.json",
        "sasl.oauthbearer.expected.issuer": "https://idp.example",
        "sasl.oauthbearer.expected.audience": "kafka",
        "auto.create.topics.enable": "true",
    })
    b.start()
    b.port = int(re.findall(r"listening on SASL_PLAINTEXT://127\.0\.0\.1:(\d+)", b.read_log())[0])
    yield b, key
    b.stop()
    server.shutdown()
    server.server_close()


def _conf(b: BrokerProcess, token: str) -> dict:
    return {"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token": token}


def test_signed_tokens_from_a_jwks_over_http(jwks_broker) -> None:
    b, key = jwks_broker
    now = int(time.time())
    claims = {"sub": "svc-orders", "iss": "https://idp.example", "aud": "kafka", "iat": now,
              "exp": now + 600}
    conf = _conf(b, _token(key, claims))
    with Producer(conf) as p:
        p.send("jwks", b"signed").result(30)
    with Consumer(conf) as c:
        c.assign([TopicPartition("jwks", 0)])
        c.seek(TopicPartition("jwks", 0), 0)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got += [r.value for r in c.poll(0.5)]
    assert got == [b"signed"]
    assert "authenticated as User:svc-orders (OAUTHBEARER)" in b.read_log()

    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    for bad in (_token(other, claims), _token(key, {**claims, "aud": "billing"})):
        with pytest.raises(Exception) as info:  # noqa: PT011 - the text is checked
            with Admin({**_conf(b, bad), "request.timeout.ms": 3000,
                        "default.api.timeout.ms": 3000}) as admin:
                admin.list_topics()
        assert '{"status":"invalid_token"}' in str(info.value)
    log = b.read_log()
    assert "invalid token: the token's signature does not verify" in log
    assert "invalid token: unexpected audience 'billing'" in log
