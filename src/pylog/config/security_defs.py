"""The security config definitions: inter-broker listener selection and TLS (``ssl.*``).

Names, types and defaults are Kafka's (``BrokerSecurityConfigs``, ``SslConfigs``,
``ReplicationConfigs`` in apache/kafka 3.9). ``definitions.py`` appends this list to the
broker table. Every ``ssl.*`` key may also be given per listener as
``listener.name.<listener>.<key>`` (lower-case listener name, as Kafka), which wins over
the plain key for that listener (``BrokerConfig.listener_value``).

What the values mean and how they are checked against each other lives in
``pylog.security.tls`` (contexts) and ``pylog.config.broker`` (listeners).
"""

from __future__ import annotations

from typing import Any

from pylog.config.values import ConfigError, one_of

#: Security protocols of listeners (Kafka's ``SecurityProtocol``, with their wire ids: the
#: ``security_protocol`` field of UpdateMetadata endpoints).
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
#: Protocols with TLS under them.
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
#: Protocols pylog serves (all of Kafka's).
SERVED_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
#: SASL mechanisms pylog serves, and the ones Kafka knows (GSSAPI is refused at start).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
KNOWN_SASL_MECHANISMS = SASL_MECHANISMS + ("GSSAPI",)
#: Kafka's OAUTHBEARER validators accepted as sasl.server.callback.handler.class (the JWKS one).
JWKS_VALIDATOR_CLASSES = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
UNSECURED_VALIDATOR_CLASS = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler")

#: Store types pylog can read (Kafka's JKS needs a Java runtime).
STORE_TYPES = ("JKS", "PKCS12", "PEM")
TLS_VERSIONS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")

#: The keys that ``listener.name.<listener>.`` may prefix.
LISTENER_OVERRIDABLE_PREFIXES = ("ssl.", "sasl.", "connections.max.reauth.ms")
#: ``listener.name.<listener>.<mechanism>.<key>``: keys given per listener and mechanism
#: (``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config``), mechanism in lower case.
MECHANISM_PREFIXES = tuple(f"{m.lower()}." for m in KNOWN_SASL_MECHANISMS)


def _protocol(key: str, value: Any) -> None:
    if value not in SECURITY_PROTOCOLS:
        raise ConfigError(
            key, f"{value!r} is not a security protocol; use one of {', '.join(SECURITY_PROTOCOLS)}"
        )


def _tls_versions(key: str, value: Any) -> None:
    for v in value:
        if v not in TLS_VERSIONS:
            raise ConfigError(key, f"{v!r} is not a TLS version; use {', '.join(TLS_VERSIONS)}")
    if not value:
        raise ConfigError(key, "name at least one TLS version (e.g. TLSv1.2,TLSv1.3)")


def _ssl_protocol(key: str, value: Any) -> None:
    if value not in ("TLS",) + TLS_VERSIONS:
        raise ConfigError(
            key, f"{value!r} is not supported; use TLSv1.3 (Kafka's default), TLSv1.2 or TLS"
        )


def _mechanisms(key: str, value: Any) -> None:
    for m in value:
        if m not in KNOWN_SASL_MECHANISMS:
            raise ConfigError(key, f"{m!r} is not a SASL mechanism; pylog serves "
                              f"{', '.join(SASL_MECHANISMS)}")


def _callback_class(key: str, value: Any) -> None:
    if value not in JWKS_VALIDATOR_CLASSES + (UNSECURED_VALIDATOR_CLASS,):
        raise ConfigError(key, f"{value!r} cannot be loaded (pylog is not Java); the OAUTHBEARER "
                          f"validators are {JWKS_VALIDATOR_CLASSES[0]} (JWKS) and "
                          f"{UNSECURED_VALIDATOR_CLASS} (the default)")


def _at_least(low: int) -> Any:
    def check(key: str, value: Any) -> None:
        if value < low:
            raise ConfigError(key, f"must be at least {low}, got {value}")
    return check


def sasl_defs() -> list[Any]:
    """The SASL ConfigDefs (Kafka's ``BrokerSecurityConfigs`` and ``SaslConfigs``)."""
    from pylog.config.definitions import ConfigDef

    return [
        ConfigDef("sasl.enabled.mechanisms", "list", ["GSSAPI"],
                  "SASL mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, "
                  "SCRAM-SHA-512, OAUTHBEARER (GSSAPI, Kafka's default, is refused at start: "
                  "set this on every SASL listener). Per listener: "
                  "listener.name.<listener>.sasl.enabled.mechanisms.", _mechanisms),
        ConfigDef("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI",
                  "The SASL mechanism brokers use with each other when the inter-broker "
                  "listener is SASL_PLAINTEXT or SASL_SSL (its JAAS username and password).",
                  _mechanisms_one),
        ConfigDef("sasl.jaas.config", "password", None,
                  "JAAS login module and options (Kafka's syntax). Usually given per listener "
                  "and mechanism: listener.name.<listener>.<mechanism>.sasl.jaas.config "
                  "(PlainLoginModule: username, password, user_<name>=<password>; "
                  "ScramLoginModule and OAuthBearerLoginModule: the broker's own "
                  "credentials and the unsecured validator's options).", sensitive=True),
        ConfigDef("sasl.server.callback.handler.class", "class", None,
                  "OAUTHBEARER's validator: Kafka's OAuthBearerValidatorCallbackHandler "
                  "(signed tokens, sasl.oauthbearer.jwks.endpoint.url) or unset (unsecured "
                  "tokens). Other classes cannot be loaded.", _callback_class),
        ConfigDef("connections.max.reauth.ms", "long", 0,
                  "KIP-368: a SASL session lasts this long (or until its OAUTHBEARER token "
                  "expires); then the client must re-authenticate on the connection, or it "
                  "is closed at its next request. 0: sessions do not expire.", _at_least(0)),
        ConfigDef("connection.failed.authentication.delay.ms", "int", 100,
                  "How long the answer to a failed authentication is delayed before the "
                  "connection is closed (slows password guessing).", _at_least(0)),
        ConfigDef("sasl.server.max.receive.size", "int", 524288,
                  "Largest request accepted from a client that is not authenticated yet.",
                  _at_least(1)),
        ConfigDef("sasl.oauthbearer.jwks.endpoint.url", "string", None,
                  "OAUTHBEARER: the JSON Web Key Set that signs tokens (file: path or "
                  "http(s) URL). Set: tokens must be signed (RS256/ES256 ...)."),
        ConfigDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", "long", 3600000,
                  "How often the JWKS is read again.", _at_least(1000)),
        ConfigDef("sasl.oauthbearer.expected.issuer", "string", None,
                  "OAUTHBEARER (JWKS): the iss claim tokens must carry."),
        ConfigDef("sasl.oauthbearer.expected.audience", "list", [],
                  "OAUTHBEARER (JWKS): tokens' aud claim must name one of these."),
        ConfigDef("sasl.oauthbearer.sub.claim.name", "string", "sub",
                  "OAUTHBEARER (JWKS): the claim naming the principal."),
        ConfigDef("sasl.oauthbearer.scope.claim.name", "string", "scope",
                  "OAUTHBEARER (JWKS): the claim holding the scope."),
        ConfigDef("sasl.oauthbearer.clock.skew.seconds", "int", 30,
                  "OAUTHBEARER (JWKS): clock difference tolerated for exp, iat and nbf.",
                  _at_least(0)),
    ]


def _mechanisms_one(key: str, value: Any) -> None:
    _mechanisms(key, [value])


def security_defs() -> list[Any]:
    """The security ConfigDefs (imported here to keep ``definitions`` the one owner of the
    ConfigDef class)."""
    from pylog.config.definitions import ConfigDef

    def ssl(
        name: str,
        type_: str,
        default: Any,
        doc: str,
        validator: Any = None,
        sensitive: bool = False,
    ) -> Any:
        return ConfigDef(name, type_, default, doc, validator, sensitive=sensitive)

    return [
        ConfigDef(
            "inter.broker.listener.name",
            "string",
            None,
            "The listener brokers use to talk to each other (follower fetches, the "
            "controller's requests, transaction markers). Must be one of "
            "advertised.listeners. Set this or security.inter.broker.protocol, not both.",
        ),
        ConfigDef(
            "security.inter.broker.protocol",
            "string",
            "PLAINTEXT",
            "Security protocol between brokers: the listener named like the protocol is used. "
            "Set this or inter.broker.listener.name, not both.",
            _protocol,
        ),
        ssl(
            "ssl.protocol",
            "string",
            "TLSv1.3",
            "The newest TLS version a context may negotiate (TLSv1.2 caps it there; TLSv1.3 "
            "and TLS leave ssl.enabled.protocols in charge).",
            _ssl_protocol,
        ),
        ssl(
            "ssl.enabled.protocols",
            "list",
            ["TLSv1.2", "TLSv1.3"],
            "TLS versions accepted (and offered by the broker as a client).",
            _tls_versions,
        ),
        ssl(
            "ssl.cipher.suites",
            "list",
            [],
            "TLS 1.2 cipher suites allowed, by IANA (TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384) or "
            "OpenSSL name; empty: the standard library's defaults. TLS 1.3 suites are "
            "OpenSSL's defaults and cannot be narrowed.",
        ),
        ssl(
            "ssl.keystore.type",
            "string",
            "JKS",
            "Format of the key store: PEM or PKCS12 (JKS, Kafka's default, needs Java: convert "
            "with keytool -importkeystore -deststoretype PKCS12).",
            one_of(*STORE_TYPES, case_insensitive=True),
        ),
        ssl(
            "ssl.keystore.location",
            "string",
            None,
            "The key store file: for PEM, the private key and the certificate chain in one "
            "file; for PKCS12, the .p12 file.",
        ),
        ssl(
            "ssl.keystore.password",
            "password",
            None,
            "Password of a PKCS12 key store (not used with PEM).",
            sensitive=True,
        ),
        ssl(
            "ssl.key.password",
            "password",
            None,
            "Password of the private key (an encrypted PEM key, or a PKCS12 key store "
            "without ssl.keystore.password).",
            sensitive=True,
        ),
        ssl(
            "ssl.keystore.certificate.chain",
            "password",
            None,
            "The certificate chain as PEM text (KIP-651; ssl.keystore.type=PEM), instead of "
            "ssl.keystore.location.",
            sensitive=True,
        ),
        ssl(
            "ssl.keystore.key",
            "password",
            None,
            "The private key as PEM text (KIP-651; ssl.keystore.type=PEM), with "
            "ssl.keystore.certificate.chain.",
            sensitive=True,
        ),
        ssl(
            "ssl.truststore.type",
            "string",
            "JKS",
            "Format of the trust store: PEM or PKCS12 (JKS needs Java).",
            one_of(*STORE_TYPES, case_insensitive=True),
        ),
        ssl(
            "ssl.truststore.location",
            "string",
            None,
            "The CA certificates trusted to sign peers' certificates (PEM file or PKCS12); "
            "unset: the system's CAs.",
        ),
        ssl(
            "ssl.truststore.password",
            "password",
            None,
            "Password of a PKCS12 trust store.",
            sensitive=True,
        ),
        ssl(
            "ssl.truststore.certificates",
            "password",
            None,
            "Trusted CA certificates as PEM text (KIP-651; ssl.truststore.type=PEM).",
            sensitive=True,
        ),
        ssl(
            "ssl.client.auth",
            "string",
            "none",
            "Client certificates: none; requested (verified when given); required (a client "
            "without one fails the handshake).",
            one_of("none", "requested", "required", case_insensitive=True),
        ),
        ssl(
            "ssl.endpoint.identification.algorithm",
            "string",
            "https",
            "https: the broker, as a client of other brokers, checks that their certificate "
            "names the host it connects to; empty: no host check.",
        ),
        ssl(
            "ssl.principal.mapping.rules",
            "string",
            "DEFAULT",
            "Rules mapping a client certificate's subject (RFC 2253) to a principal name: "
            "RULE:pattern/replacement/[LU] entries and DEFAULT, the first that matches wins "
            "(docs/security.md).",
        ),
        ConfigDef(
            "authorizer.class.name",
            "string",
            "",
            "The authorizer that checks every request against ACLs: "
            "kafka.security.authorizer.AclAuthorizer, "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer or "
            "pylog.security.AclAuthorizer (all the same pylog authorizer); empty: no "
            "authorization (every request allowed, the ACL APIs answer SECURITY_DISABLED).",
        ),
        ConfigDef(
            "super.users",
            "string",
            "",
            "Principals allowed every operation whatever the ACLs, separated by semicolons "
            "(User:CN=admin;User:broker). The brokers' own principal on the inter-broker "
            "listener must be one (or hold CLUSTER_ACTION on the cluster).",
        ),
        ConfigDef(
            "allow.everyone.if.no.acl.found",
            "boolean",
            False,
            "With an authorizer: allow a request on a resource no ACL applies to (false: "
            "deny it, Kafka's default).",
        ),
    ]
