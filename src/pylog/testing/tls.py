"""Throwaway TLS material for test brokers: a certificate authority that signs a broker
certificate and client certificates, written as PEM files (Kafka's PEM key and trust
stores, librdkafka's ``ssl.ca.location`` / ``ssl.certificate.location`` /
``ssl.key.location``).

Keys are EC P-256 (a key takes well under a millisecond to make; RSA 2048 takes tens),
certificates are valid from five minutes ago for two days. Made with ``cryptography``
(the ``tls`` extra: ``pip install 'pylog-kafka[tls]'``), imported only when a
``CertificateAuthority`` is made.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import pathlib
import re
from typing import Any, NamedTuple

__all__ = ["CertificateAuthority", "ClientCertificate"]

_VALID_BEFORE = datetime.timedelta(minutes=5)
_VALID_FOR = datetime.timedelta(days=2)
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def _crypto() -> Any:
    try:
        import cryptography  # noqa: F401
    except ImportError:
        raise RuntimeError("TLS test material needs the 'cryptography' package: "
                           "pip install 'pylog-kafka[tls]'") from None
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    return x509, hashes, serialization, ec, NameOID


class ClientCertificate(NamedTuple):
    """A client certificate signed by the test CA, as PEM files.

    ``principal`` is what the broker makes of it with the default
    ``ssl.principal.mapping.rules``: ``User:`` and the subject in RFC 2253 form.
    """

    cert_location: str
    key_location: str
    principal: str


class CertificateAuthority:
    """A CA in ``directory`` (created if missing) that issues server and client certificates.

    ``ca_location`` is the CA certificate (the trust store of brokers and clients);
    ``server_certificate`` and ``client_certificate`` write signed certificates next to it.
    Subjects are ``CN=<name>,O=pylog-test`` so that principals read ``User:CN=<name>,O=pylog-test``.
    """

    ORGANIZATION = "pylog-test"

    def __init__(self, directory: str | os.PathLike[str], name: str = "pylog test CA") -> None:
        x509, _hashes, serialization, ec, NameOID = _crypto()
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, self.ORGANIZATION),
                                x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = self._sign(self._name, self._key.public_key(), ca=True)
        self.ca_location = self._write("ca.pem", cert.public_bytes(serialization.Encoding.PEM))

    def subject(self, common_name: str) -> str:
        """The RFC 2253 subject of a certificate issued for ``common_name`` (most specific
        attribute first, as the broker writes principals)."""
        return f"CN={common_name},O={self.ORGANIZATION}"

    def server_certificate(self, hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
                           common_name: str = "broker") -> str:
        """A key store for a broker: its private key and certificate (valid for ``hosts``,
        names or IP addresses) in one PEM file, Kafka's ``ssl.keystore.type=PEM``."""
        key, cert = self._issue(common_name, hosts)
        return self._write(f"server-{_SAFE_NAME.sub('_', common_name)}.pem", key + cert)

    def client_certificate(self, common_name: str) -> ClientCertificate:
        """A client certificate for ``common_name``, its key apart (librdkafka's
        ``ssl.certificate.location`` and ``ssl.key.location``)."""
        key, cert = self._issue(common_name, ())
        stem = f"client-{_SAFE_NAME.sub('_', common_name)}"
        return ClientCertificate(self._write(stem + ".pem", cert),
                                 self._write(stem + ".key", key),
                                 "User:" + self.subject(common_name))

    # --- making certificates ----------------------------------------------------------

    def _issue(self, common_name: str, hosts: tuple[str, ...]) -> tuple[bytes, bytes]:
        x509, _hashes, serialization, ec, NameOID = _crypto()
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, self.ORGANIZATION),
                             x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        cert = self._sign(subject, key.public_key(), hosts=hosts)
        key_pem = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        return key_pem, cert.public_bytes(serialization.Encoding.PEM)

    def _sign(self, subject: Any, public_key: Any, *, ca: bool = False,
              hosts: tuple[str, ...] = ()) -> Any:
        x509, hashes, _serialization, _ec, _oid = _crypto()
        now = datetime.datetime.now(datetime.timezone.utc)
        b = (x509.CertificateBuilder()
             .subject_name(subject)
             .issuer_name(self._name)
             .public_key(public_key)
             .serial_number(x509.random_serial_number())
             .not_valid_before(now - _VALID_BEFORE)
             .not_valid_after(now + _VALID_FOR)
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            b = b.add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key),
                                critical=False)
        else:
            b = b.add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False)
        if hosts:
            names: list[Any] = []
            for h in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(h)))
                except ValueError:
                    names.append(x509.DNSName(h))
            b = b.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return b.sign(self._key, hashes.SHA256())

    def _write(self, name: str, data: bytes) -> str:
        path = self.directory / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return str(path)
