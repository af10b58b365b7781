"""OAUTHBEARER's JWKS validator (Kafka's OAuthBearerValidatorCallbackHandler): RS256 and
ES256 tokens against a ``file:`` JWKS; signature, key id, issuer, audience, expiry and the
principal claim are checked; the listener builds it from Kafka's config names."""

from __future__ import annotations

import base64
import json
import pathlib

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

from pylog.config.broker import BrokerConfig
from pylog.config.values import ConfigError
from pylog.security.sasl.credentials import ScramCredentials
from pylog.security.sasl.listener import ListenerSasl
from pylog.security.sasl.oauthbearer import JwksValidator, OAuthBearerClient, TokenError

NOW_S = 1_700_000_000


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int(n: int, size: int | None = None) -> str:
    return _b64(n.to_bytes(size or (n.bit_length() + 7) // 8, "big"))


def _sign(key, alg: str, kid: str, claims: dict) -> str:
    head = _b64(json.dumps({"alg": alg, "kid": kid, "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims).encode())
    signed = f"{head}.{body}".encode()
    if alg == "RS256":
        sig = key.sign(signed, padding.PKCS1v15(), hashes.SHA256())
    else:
        r, s = utils.decode_dss_signature(key.sign(signed, ec.ECDSA(hashes.SHA256())))
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{head}.{body}.{_b64(sig)}"


@pytest.fixture
def keys(tmp_path: pathlib.Path):
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    rn = rsa_key.public_key().public_numbers()
    en = ec_key.public_key().public_numbers()
    jwks = {"keys": [
        {"kty": "RSA", "kid": "r1", "alg": "RS256", "use": "sig", "n": _int(rn.n), "e": _int(rn.e)},
        {"kty": "EC", "kid": "e1", "crv": "P-256", "x": _int(en.x, 32), "y": _int(en.y, 32)},
    ]}
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks))
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())
    return rsa_key, ec_key, other, path.as_uri()


def _validator(url: str) -> JwksValidator:
    return JwksValidator(url, issuer="https://issuer", audience=["kafka"], sub_claim="sub",
                         scope_claim="scope", skew_s=30, refresh_ms=3600000)


CLAIMS = {"sub": "svc", "iss": "https://issuer", "aud": ["kafka", "x"], "iat": NOW_S,
          "exp": NOW_S + 600, "scope": "read"}


def test_rs256_and_es256_tokens(keys) -> None:
    rsa_key, ec_key, _other, url = keys
    v = _validator(url)
    for key, alg, kid in ((rsa_key, "RS256", "r1"), (ec_key, "ES256", "e1")):
        token = v.validate(_sign(key, alg, kid, CLAIMS), NOW_S * 1000)
        assert token.principal == "svc" and token.lifetime_ms == (NOW_S + 600) * 1000
        assert token.scope == frozenset({"read"})


@pytest.mark.parametrize(("change", "fragment"), [
    ({"iss": "https://evil"}, "issuer"),
    ({"aud": "other"}, "audience"),
    ({"exp": NOW_S - 100}, "expired"),
    ({"sub": ""}, "principal claim"),
])
def test_claims_are_checked(keys, change: dict, fragment: str) -> None:
    rsa_key, _ec, _other, url = keys
    with pytest.raises(TokenError, match=fragment):
        _validator(url).validate(_sign(rsa_key, "RS256", "r1", {**CLAIMS, **change}), NOW_S * 1000)


def test_signatures_and_keys_are_checked(keys) -> None:
    rsa_key, ec_key, other, url = keys
    v = _validator(url)
    with pytest.raises(TokenError, match="does not verify"):
        v.validate(_sign(other, "RS256", "r1", CLAIMS), NOW_S * 1000)
    with pytest.raises(TokenError, match="no key"):
        v.validate(_sign(rsa_key, "RS256", "nope", CLAIMS), NOW_S * 1000)
    with pytest.raises(TokenError, match="is for RS256"):
        v.validate(_sign(ec_key, "ES256", "r1", CLAIMS), NOW_S * 1000)
    unsigned = _sign(rsa_key, "RS256", "r1", CLAIMS).rsplit(".", 1)[0] + "."
    with pytest.raises(TokenError):
        v.validate(unsigned, NOW_S * 1000)
    none_alg = _b64(b'{"alg":"none"}') + "." + _b64(json.dumps(CLAIMS).encode()) + "."
    with pytest.raises(TokenError, match="unsupported signature algorithm"):
        v.validate(none_alg, NOW_S * 1000)


def test_listener_builds_the_jwks_validator_from_kafkas_keys(keys) -> None:
    rsa_key, _ec, _other, url = keys
    config = BrokerConfig({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": url,
        "sasl.oauthbearer.expected.issuer": "https://issuer",
        "sasl.oauthbearer.expected.audience": "kafka",
    })
    lst = ListenerSasl(config, "SASL_PLAINTEXT", ScramCredentials(), lambda: NOW_S * 1000)
    auth = lst.authenticator()
    assert auth.on_handshake(1, "OAUTHBEARER")[0] == 0
    token = _sign(rsa_key, "RS256", "r1", CLAIMS)
    out = auth.on_token(OAuthBearerClient(token).initial())
    assert out.error_code == 0 and auth.principal == "User:svc"
    bad = BrokerConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                        "sasl.enabled.mechanisms": "OAUTHBEARER",
                        "sasl.oauthbearer.jwks.endpoint.url": "file:///nonexistent/jwks.json"})
    with pytest.raises(ConfigError, match="sasl.oauthbearer.jwks.endpoint.url"):
        ListenerSasl(bad, "SASL_PLAINTEXT", ScramCredentials(), lambda: 0)


def test_listener_config_errors_name_the_key() -> None:
    def build(values: dict) -> None:
        config = BrokerConfig({"listeners": "SASL_SSL://127.0.0.1:0", **values})
        ListenerSasl(config, "SASL_SSL", ScramCredentials(), lambda: 0)

    with pytest.raises(ConfigError, match="sasl.enabled.mechanisms.*GSSAPI"):
        build({})
    with pytest.raises(ConfigError, match="listener.name.sasl_ssl.plain.sasl.jaas.config"):
        build({"sasl.enabled.mechanisms": "PLAIN"})
    with pytest.raises(ConfigError, match="PLAIN needs org.apache.kafka.common.security.plain.PlainLoginModule"):
        build({"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config":
               "org.apache.kafka.common.security.scram.ScramLoginModule required;"})
    with pytest.raises(ConfigError, match="unterminated quoted value"):
        build({"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config":
               'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="x;'})
    with pytest.raises(ConfigError, match="cannot be loaded"):
        build({"sasl.enabled.mechanisms": "OAUTHBEARER",
               "sasl.server.callback.handler.class": "com.example.Mine"})
    build({"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"})  # no JAAS needed


def test_inter_broker_and_client_settings() -> None:
    from pylog.security.sasl.client import client_sasl
    from pylog.security.sasl.listener import inter_broker_client

    base = {"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol"):
        inter_broker_client(BrokerConfig(base))
    with pytest.raises(ConfigError, match="needs the JAAS options username and password"):
        inter_broker_client(BrokerConfig({**base, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}))
    with pytest.raises(ConfigError, match="PLAIN is not enabled"):
        inter_broker_client(BrokerConfig({**base, "sasl.mechanism.inter.broker.protocol": "PLAIN"}))
    conf = BrokerConfig({**base, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                         "listener.name.internal.scram-sha-512.sasl.jaas.config":
                             'org.apache.kafka.common.security.scram.ScramLoginModule required '
                             'username="broker" password="pw";'})
    settings = inter_broker_client(conf)
    assert settings == {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "broker",
                        "sasl.password": "pw"}
    assert inter_broker_client(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"})) is None
    # Client side: confluent-kafka's names, the Java JAAS form, librdkafka's unsecured OAUTHBEARER.
    c = client_sasl({"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
                     "sasl.username": "a", "sasl.password": "b"})
    assert c is not None and c.new_client().initial() == b"\x00a\x00b"
    c = client_sasl({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                     "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                                         'required username="u" password="p";'})
    assert c is not None and c.username == "u" and "p" not in repr(c)
    c = client_sasl({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                     "sasl.oauthbearer.config": "principal=svc lifeSeconds=60 scope=a,b"})
    assert c is not None and c.unsecured_sub == "svc" and c.unsecured_scope == ("a", "b")
    assert client_sasl({"security.protocol": "SSL"}) is None
