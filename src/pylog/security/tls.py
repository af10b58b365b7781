"""TLS contexts from Kafka's ``ssl.*`` settings (``SslFactory`` / ``DefaultSslEngineFactory``).

``server_context`` builds the one ``ssl.SSLContext`` a listener uses for every connection
(from ``ssl.create_default_context(Purpose.CLIENT_AUTH)``); ``client_context`` the one a
broker uses towards other brokers and ``pylog.client`` towards brokers. Both take a mapping
of already-parsed values keyed by Kafka's names (a listener's settings after
``listener.name.<listener>.`` overrides, or a client's settings).

Key and trust material:

- ``ssl.keystore.type=PEM``: ``ssl.keystore.location`` (private key and certificate chain in
  one file), or ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` as PEM text
  (KIP-651); ``ssl.key.password`` decrypts an encrypted key. ``ssl.keystore.password`` is
  refused with PEM, as Kafka refuses it.
- ``ssl.keystore.type=PKCS12``: the ``.p12`` file at ``ssl.keystore.location`` opened with
  ``ssl.keystore.password`` (needs the ``cryptography`` package).
- ``ssl.truststore.type=PEM``: ``ssl.truststore.location`` or ``ssl.truststore.certificates``;
  PKCS12 as above; no trust store: the system's CAs.
- ``JKS`` (Kafka's default type) needs Java: refused with the command that converts it.

Python's ``ssl`` loads certificate chains from files only, so PEM text and PKCS12 contents
are written to a private temporary file (mode 0600), loaded and removed at once.

Versions: ``ssl.enabled.protocols`` gives the minimum and maximum version; ``ssl.protocol``
TLSv1.2 (or older) caps the maximum, as Java's context of that name does. Ciphers:
``ssl.cipher.suites`` narrows TLS 1.2 suites (IANA names are translated to OpenSSL's);
TLS 1.3 suites stay OpenSSL's (Python cannot narrow them).

``pylog.client`` also takes confluent-kafka's PEM names: ``ssl.ca.location`` (trusted CAs),
``ssl.certificate.location`` with ``ssl.key.location`` (client certificate and key).

Raises ``pylog.config.ConfigError`` naming the key for anything it cannot use. Pure
functions; a context is safe to share between connections of one loop.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any

from pylog.config import ConfigError

__all__ = ["CLIENT_AUTH", "client_context", "server_context"]

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}


def server_context(settings: Mapping[str, Any], where: str = "") -> ssl.SSLContext:
    """The context of an SSL listener. ``where`` prefixes key names in errors
    (``listener.name.internal.``)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _versions(ctx, settings, where)
    _ciphers(ctx, settings, where)
    if not _load_keystore(ctx, settings, where):
        raise ConfigError(
            where + "ssl.keystore.location",
            "an SSL listener needs a certificate and its key: set "
            "ssl.keystore.type=PEM and ssl.keystore.location (key and certificate "
            "chain in one PEM file), or ssl.keystore.certificate.chain and "
            "ssl.keystore.key",
        )
    auth = str(settings.get("ssl.client.auth") or "none").lower()
    ctx.verify_mode = CLIENT_AUTH[auth]
    if not _load_truststore(ctx, settings, where) and auth != "none":
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_context(settings: Mapping[str, Any], where: str = "") -> ssl.SSLContext:
    """The context of a TLS client: the peer's certificate is verified against the trust
    store (the system's CAs without one) and, unless ``ssl.endpoint.identification.algorithm``
    is empty, must name the host connected to. A key store, when given, is the client
    certificate offered for mutual TLS."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    algorithm = settings.get("ssl.endpoint.identification.algorithm")
    algorithm = "https" if algorithm is None else str(algorithm).strip()  # Kafka's default
    if algorithm.lower() == "none":  # librdkafka's spelling of "no check"
        algorithm = ""
    if algorithm and algorithm.lower() != "https":
        raise ConfigError(
            where + "ssl.endpoint.identification.algorithm",
            f"{algorithm!r} is not supported; use https or leave it empty",
        )
    ctx.check_hostname = bool(algorithm)
    _versions(ctx, settings, where)
    _ciphers(ctx, settings, where)
    _load_keystore(ctx, settings, where)
    if not _load_truststore(ctx, settings, where):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    return ctx


# --- versions and ciphers -------------------------------------------------------------------


def _versions(ctx: ssl.SSLContext, settings: Mapping[str, Any], where: str) -> None:
    enabled = [v for v in settings.get("ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"]]
    unknown = [v for v in enabled if v not in _VERSIONS]
    if unknown:
        raise ConfigError(
            where + "ssl.enabled.protocols",
            f"{', '.join(unknown)}: not a TLS version; use TLSv1.2,TLSv1.3",
        )
    order = list(_VERSIONS)
    lo = min(enabled, key=order.index)
    hi = max(enabled, key=order.index)
    protocol = str(settings.get("ssl.protocol") or "TLSv1.3")
    if protocol in _VERSIONS and order.index(protocol) < order.index(hi):
        hi = protocol
    if order.index(hi) < order.index(lo):
        raise ConfigError(
            where + "ssl.protocol",
            f"ssl.protocol={protocol} allows no version "
            f"of ssl.enabled.protocols ({', '.join(enabled)})",
        )
    try:
        ctx.minimum_version = _VERSIONS[lo]
        ctx.maximum_version = _VERSIONS[hi]
    except (ValueError, ssl.SSLError) as exc:
        raise ConfigError(
            where + "ssl.enabled.protocols", f"this OpenSSL refuses {lo}..{hi}: {exc}"
        ) from None


def openssl_cipher_name(name: str) -> str:
    """An IANA suite name as OpenSSL spells it (TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 ->
    ECDHE-RSA-AES256-GCM-SHA384); other names unchanged."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, _, cipher = name[4:].partition("_WITH_")
    kx = {"RSA": ""}.get(kx, kx.replace("_", "-"))
    parts = cipher.split("_")
    if parts[0] == "AES" and len(parts) >= 2:  # AES_256_GCM_SHA384 -> AES256-GCM-SHA384
        parts = ["AES" + parts[1]] + [p for p in parts[2:] if p != "CBC"]  # CBC is implied
    elif parts[0] == "CHACHA20" and len(parts) >= 2:  # CHACHA20_POLY1305_SHA256
        parts = ["CHACHA20", parts[1]]
    text = "-".join(parts)
    return f"{kx}-{text}" if kx else text


def _ciphers(ctx: ssl.SSLContext, settings: Mapping[str, Any], where: str) -> None:
    suites = [s for s in settings.get("ssl.cipher.suites") or [] if s]
    if not suites:
        return
    available = {c["name"] for c in ctx.get_ciphers()}
    tls12 = []
    for suite in suites:
        name = openssl_cipher_name(suite)
        if name not in available:
            raise ConfigError(
                where + "ssl.cipher.suites",
                f"{suite}: not a cipher suite this OpenSSL offers; choose from "
                f"{', '.join(sorted(available))}",
            )
        if not name.startswith("TLS_"):  # TLS 1.3 suites cannot be set from Python
            tls12.append(name)
    if tls12:
        ctx.set_ciphers(":".join(tls12))


# --- key and trust stores -------------------------------------------------------------------


def _text(settings: Mapping[str, Any], key: str) -> str | None:
    value = settings.get(key)
    return str(value) if value not in (None, "") else None


def _load_keystore(ctx: ssl.SSLContext, settings: Mapping[str, Any], where: str) -> bool:
    """Load the certificate chain and key; False when none is configured."""
    store_type = str(settings.get("ssl.keystore.type") or "JKS").upper()
    location = _text(settings, "ssl.keystore.location")
    chain = _text(settings, "ssl.keystore.certificate.chain")
    key = _text(settings, "ssl.keystore.key")
    key_password = _text(settings, "ssl.key.password")
    store_password = _text(settings, "ssl.keystore.password")
    certificate = _text(settings, "ssl.certificate.location")  # confluent-kafka's names
    if certificate is not None:
        key_location = _text(settings, "ssl.key.location")
        if key_location is None or location is not None:
            raise ConfigError(
                where + "ssl.certificate.location",
                "ssl.certificate.location "
                "goes with ssl.key.location (and without ssl.keystore.location)",
            )
        _load_chain(
            ctx, certificate, key_location, key_password, where + "ssl.certificate.location"
        )
        return True
    if location is None and chain is None and key is None:
        return False
    if chain is not None or key is not None:
        if store_type != "PEM":
            raise ConfigError(
                where + "ssl.keystore.type",
                "ssl.keystore.certificate.chain and ssl.keystore.key need ssl.keystore.type=PEM",
            )
        if location is not None:
            raise ConfigError(
                where + "ssl.keystore.location",
                "give ssl.keystore.location or "
                "ssl.keystore.certificate.chain with ssl.keystore.key, not both",
            )
        if chain is None or key is None:
            raise ConfigError(
                where + "ssl.keystore.key",
                "ssl.keystore.certificate.chain and ssl.keystore.key go together: set both",
            )
        _load_pem_text(ctx, key + "\n" + chain, key_password, where + "ssl.keystore.key")
        return True
    assert location is not None
    if store_type == "JKS":
        _refuse_jks(where + "ssl.keystore.type", location)
    if store_type == "PEM":
        if store_password is not None:
            raise ConfigError(
                where + "ssl.keystore.password",
                "a PEM key store has no store "
                "password: remove it (ssl.key.password decrypts the key)",
            )
        _load_chain(ctx, location, None, key_password, where + "ssl.keystore.location")
        return True
    key_pem, chain_pem = _pkcs12_keystore(
        location, store_password or key_password, where + "ssl.keystore.location"
    )
    _load_pem_text(ctx, key_pem + chain_pem, None, where + "ssl.keystore.location")
    return True


def _load_truststore(ctx: ssl.SSLContext, settings: Mapping[str, Any], where: str) -> bool:
    """Load the trusted CAs; False when no trust store is configured."""
    store_type = str(settings.get("ssl.truststore.type") or "JKS").upper()
    location = _text(settings, "ssl.truststore.location")
    certificates = _text(settings, "ssl.truststore.certificates")
    ca_location = _text(settings, "ssl.ca.location")  # confluent-kafka's name: a PEM file
    if ca_location is not None:
        if location is not None or certificates is not None:
            raise ConfigError(
                where + "ssl.ca.location",
                "give ssl.ca.location or the ssl.truststore.* settings, not both",
            )
        location, store_type = ca_location, "PEM"
    if location is None and certificates is None:
        return False
    key = where + (
        "ssl.truststore.certificates"
        if certificates
        else "ssl.ca.location"
        if ca_location is not None
        else "ssl.truststore.location"
    )
    if certificates is not None:
        if store_type != "PEM":
            raise ConfigError(key, "ssl.truststore.certificates needs ssl.truststore.type=PEM")
        if location is not None:
            raise ConfigError(
                key, "give ssl.truststore.location or ssl.truststore.certificates, not both"
            )
        try:
            ctx.load_verify_locations(cadata=certificates)
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigError(key, f"not PEM certificates: {exc}") from None
        return True
    assert location is not None
    if store_type == "JKS":
        _refuse_jks(where + "ssl.truststore.type", location)
    try:
        if store_type == "PEM":
            ctx.load_verify_locations(cafile=location)
        else:
            ctx.load_verify_locations(
                cadata=_pkcs12_certificates(
                    location, _text(settings, "ssl.truststore.password"), key
                )
            )
    except FileNotFoundError:
        raise ConfigError(key, f"{location}: no such file") from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(key, f"{location}: not a PEM trust store: {exc}") from None
    return True


def _refuse_jks(key: str, location: str) -> None:
    raise ConfigError(
        key,
        f"{location}: JKS stores need Java; set PEM or PKCS12 (convert with "
        "keytool -importkeystore -srckeystore <file.jks> -destkeystore <file.p12> "
        "-deststoretype PKCS12)",
    )


def _load_chain(
    ctx: ssl.SSLContext, path: str, keyfile: str | None, password: str | None, key: str
) -> None:
    try:
        ctx.load_cert_chain(path, keyfile, password=password)
    except FileNotFoundError:
        raise ConfigError(key, f"{path}: no such file") from None
    except ssl.SSLError as exc:
        hint = (
            "; if the key is encrypted, set ssl.key.password"
            if password is None
            else "; check ssl.key.password"
        )
        raise ConfigError(
            key,
            f"{path}: cannot load a private key and certificate chain "
            f"from it ({exc.reason or exc}){hint}",
        ) from None
    except OSError as exc:
        raise ConfigError(key, f"{path}: {exc.strerror or exc}") from None


def _load_pem_text(ctx: ssl.SSLContext, pem: str, password: str | None, key: str) -> None:
    fd, path = tempfile.mkstemp(prefix="pylog-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:  # mkstemp: mode 0600
            f.write(pem)
        _load_chain(ctx, path, None, password, key)
    finally:
        os.unlink(path)


def _pkcs12(location: str, password: str | None, key: str) -> Any:
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError(
            key,
            "PKCS12 stores need the cryptography package (pip install "
            "cryptography), or use ssl.keystore.type=PEM",
        ) from None
    try:
        with open(location, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ConfigError(key, f"{location}: {exc.strerror or exc}") from None
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as exc:
        raise ConfigError(
            key, f"{location}: cannot open the PKCS12 store ({exc}); check its password"
        ) from None


def _pkcs12_keystore(location: str, password: str | None, key: str) -> tuple[str, str]:
    from cryptography.hazmat.primitives import serialization

    p12 = _pkcs12(location, password, key)
    if p12.key is None or p12.cert is None:
        raise ConfigError(
            key, f"{location}: the PKCS12 store holds no private key with its certificate"
        )
    key_pem = p12.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    certs = [p12.cert.certificate] + [c.certificate for c in p12.additional_certs]
    return key_pem, "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _pkcs12_certificates(location: str, password: str | None, key: str) -> str:
    from cryptography.hazmat.primitives import serialization

    p12 = _pkcs12(location, password, key)
    certs = [c.certificate for c in p12.additional_certs]
    if p12.cert is not None:
        certs.insert(0, p12.cert.certificate)
    if not certs:
        raise ConfigError(key, f"{location}: the PKCS12 store holds no certificate")
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
