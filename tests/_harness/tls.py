"""Throwaway TLS material for tests: a CA, a broker certificate and client certificates,
made with ``cryptography`` (EC P-256 keys: fast to make).

``make_pki(dir)`` writes PEM files and returns their paths:

- ``ca``: the CA certificate (the trust store of clients and brokers);
- ``broker``: the broker's private key and certificate in one PEM file (Kafka's PEM key
  store), valid for ``localhost`` and ``127.0.0.1``; ``broker_cert``/``broker_key`` apart;
- ``client``/``client_cert``/``client_key``: a client certificate with subject
  ``CN=alice,OU=eng,O=pylog,C=US`` signed by the CA;
- ``rogue_cert``/``rogue_key``: a client certificate from another CA (not trusted);
- ``client_key_encrypted``: the client key encrypted with ``KEY_PASSWORD``;
- ``client_p12``: the client key and certificate as PKCS12 with ``KEY_PASSWORD``.
"""

from __future__ import annotations

import datetime
import ipaddress
import pathlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

KEY_PASSWORD = "changeit"
CLIENT_SUBJECT = "CN=alice,OU=eng,O=pylog,C=US"  # RFC 2253 order, as the broker writes it


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pylog"),
    ]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _cert(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    hosts: tuple[str, ...] = (),
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        b = b.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        b = b.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        )
    else:
        b = b.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
    if hosts:
        names: list[x509.GeneralName] = []
        for h in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                names.append(x509.DNSName(h))
        b = b.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem_key(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    enc: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_pki(directory: pathlib.Path, extra_clients: tuple[str, ...] = ()) -> dict[str, str]:
    """A CA, a broker and client certificates as PEM files; ``extra_clients``: more client
    certificates with subject ``CN=<name>`` (files ``<name>_cert``, ``<name>_key``)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("pylog test CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker = _cert(_name("broker"), broker_key, ca_name, ca_key, hosts=("localhost", "127.0.0.1"))
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert(_name("alice", "eng"), client_key, ca_name, ca_key)
    rogue_ca_key = ec.generate_private_key(ec.SECP256R1())
    rogue_key = ec.generate_private_key(ec.SECP256R1())
    rogue = _cert(_name("mallory"), rogue_key, _name("rogue CA"), rogue_ca_key)
    files = {
        "ca": _pem(ca),
        "broker": _pem_key(broker_key) + _pem(broker),
        "broker_cert": _pem(broker),
        "broker_key": _pem_key(broker_key),
        "client": _pem_key(client_key) + _pem(client),
        "client_cert": _pem(client),
        "client_key": _pem_key(client_key),
        "client_key_encrypted": _pem_key(client_key, KEY_PASSWORD),
        "rogue_cert": _pem(rogue),
        "rogue_key": _pem_key(rogue_key),
        "client_p12": pkcs12.serialize_key_and_certificates(
            b"alice",
            client_key,
            client,
            [ca],
            serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
        ),
    }
    for cn in extra_clients:
        key = ec.generate_private_key(ec.SECP256R1())
        files[cn + "_cert"] = _pem(_cert(_name(cn), key, ca_name, ca_key))
        files[cn + "_key"] = _pem_key(key)
    out = {}
    for name, data in files.items():
        path = directory / (name + (".p12" if name.endswith("p12") else ".pem"))
        path.write_bytes(data)
        out[name] = str(path)
    return out
