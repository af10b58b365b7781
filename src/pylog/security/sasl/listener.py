"""What a SASL listener's configuration makes: its mechanisms, built once at start.

Kafka's lookup for every SASL setting of a listener: ``listener.name.<l>.<mechanism>.<key>``,
then ``listener.name.<l>.<key>``, then ``<key>`` (``BrokerConfig.mechanism_value``).

- ``sasl.enabled.mechanisms``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; GSSAPI (Kafka's
  default) is refused with an error naming the key.
- PLAIN needs a ``PlainLoginModule`` JAAS entry; its ``user_<name>`` options are the users.
- SCRAM checks the broker's credential store (``credentials.ScramCredentials``).
- OAUTHBEARER validates unsecured tokens (JAAS options ``unsecuredValidator*``) unless the
  JWKS validator is configured (``sasl.server.callback.handler.class`` set to Kafka's
  ``OAuthBearerValidatorCallbackHandler``, or ``sasl.oauthbearer.jwks.endpoint.url`` set).

The JAAS entry of ``sasl.mechanism.inter.broker.protocol`` on the inter-broker listener also
gives the broker's own credentials as a client (``username``/``password``, or for
OAUTHBEARER ``unsecuredLoginStringClaim_sub``): ``inter_broker_client``.

Built objects are immutable and shared by the listener's connections (the broker's loop).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Any

from pylog.config.values import ConfigError
from pylog.security.sasl import GSSAPI, MECHANISMS, OAUTHBEARER, PLAIN, SCRAM_SHA_256, SCRAM_SHA_512
from pylog.security.sasl import jaas as jaas_mod
from pylog.security.sasl.authenticator import SaslServerAuthenticator
from pylog.security.sasl.credentials import ScramCredentials
from pylog.security.sasl.oauthbearer import JwksValidator, OAuthBearerServer, UnsecuredValidator
from pylog.security.sasl.plain import PlainServer
from pylog.security.sasl.scram import ScramServer

log = logging.getLogger("pylog.security.sasl")

_MODULES = {PLAIN: jaas_mod.PLAIN_LOGIN_MODULE, SCRAM_SHA_256: jaas_mod.SCRAM_LOGIN_MODULE,
            SCRAM_SHA_512: jaas_mod.SCRAM_LOGIN_MODULE, OAUTHBEARER: jaas_mod.OAUTHBEARER_LOGIN_MODULE}


def listener_jaas(config: Any, listener: str, mechanism: str) -> jaas_mod.JaasEntry | None:
    """The JAAS entry for ``mechanism`` on ``listener`` (None when not configured).

    Raises:
        ConfigError: a syntax error, or the login module of another mechanism.
    """
    text = config.mechanism_value(listener, mechanism, "sasl.jaas.config")
    if not text:
        return None
    key = config.mechanism_key(listener, mechanism, "sasl.jaas.config")
    entry = jaas_mod.parse_jaas_config(key, str(text))
    if entry.login_module != _MODULES[mechanism]:
        raise ConfigError(key, f"{mechanism} needs {_MODULES[mechanism]}, not {entry.login_module}"
                          f" (give each mechanism its own listener.name.{listener.lower()}."
                          f"{mechanism.lower()}.sasl.jaas.config)")
    return entry


def enabled_mechanisms(config: Any, listener: str) -> list[str]:
    """``sasl.enabled.mechanisms`` of ``listener``, checked.

    Raises:
        ConfigError: GSSAPI or no mechanism.
    """
    key = (f"listener.name.{listener.lower()}.sasl.enabled.mechanisms"
           if config.is_explicit(f"listener.name.{listener.lower()}.sasl.enabled.mechanisms")
           else "sasl.enabled.mechanisms")
    mechanisms = list(dict.fromkeys(config.listener_value(listener, "sasl.enabled.mechanisms")))
    if GSSAPI in mechanisms:
        raise ConfigError(key, f"listener {listener}: GSSAPI (Kerberos) is not supported by pylog "
                          "(it is Kafka's default for this key); set it to some of "
                          f"{', '.join(MECHANISMS)}")
    if not mechanisms:
        raise ConfigError(key, f"listener {listener} is a SASL listener: enable at least one of "
                          f"{', '.join(MECHANISMS)}")
    return mechanisms


class ListenerSasl:
    """A SASL listener's mechanisms and session settings.

    Raises (at construction):
        ConfigError: anything that would make the listener unusable, naming the key.
    """

    def __init__(self, config: Any, listener: str, credentials: ScramCredentials,
                 now_ms: Callable[[], int]) -> None:
        self.listener = listener
        self.mechanisms = enabled_mechanisms(config, listener)
        self.max_reauth_ms: int = config.listener_value(listener, "connections.max.reauth.ms")
        self.failed_delay_ms: int = config["connection.failed.authentication.delay.ms"]
        self.max_receive_size: int = config["sasl.server.max.receive.size"]
        self._now_ms = now_ms
        fake_secret = secrets.token_bytes(32)
        factories: dict[str, Callable[[], Any]] = {}
        for mechanism in self.mechanisms:
            entry = listener_jaas(config, listener, mechanism)
            if mechanism == PLAIN:
                if entry is None:
                    raise ConfigError(
                        f"listener.name.{listener.lower()}.plain.sasl.jaas.config",
                        f"listener {listener} enables PLAIN but has no PlainLoginModule JAAS "
                        "configuration (its user_<name>=\"<password>\" options are the users)")
                users = jaas_mod.plain_users(entry)
                if not users:
                    log.warning("listener %s: PLAIN has no user_<name> options: every PLAIN "
                                "login will fail", listener)
                factories[PLAIN] = _plain_factory(users)
            elif mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
                factories[mechanism] = _scram_factory(mechanism, credentials, fake_secret)
            elif mechanism == OAUTHBEARER:
                validator = self._oauth_validator(config, listener, entry)
                factories[OAUTHBEARER] = _oauth_factory(validator, now_ms)
        self.factories = factories

    @staticmethod
    def _oauth_validator(config: Any, listener: str, entry: jaas_mod.JaasEntry | None) -> Any:
        def value(key: str) -> Any:
            return config.mechanism_value(listener, OAUTHBEARER, key)
        handler = value("sasl.server.callback.handler.class")
        url = value("sasl.oauthbearer.jwks.endpoint.url")
        from pylog.config.security_defs import JWKS_VALIDATOR_CLASSES

        if handler in JWKS_VALIDATOR_CLASSES or (url and not handler):
            key = config.mechanism_key(listener, OAUTHBEARER, "sasl.oauthbearer.jwks.endpoint.url")
            if not url:
                raise ConfigError(key, f"listener {listener}: {handler} needs the JWKS URL")
            try:
                return JwksValidator(
                    url, issuer=value("sasl.oauthbearer.expected.issuer"),
                    audience=value("sasl.oauthbearer.expected.audience") or [],
                    sub_claim=value("sasl.oauthbearer.sub.claim.name"),
                    scope_claim=value("sasl.oauthbearer.scope.claim.name"),
                    skew_s=value("sasl.oauthbearer.clock.skew.seconds"),
                    refresh_ms=value("sasl.oauthbearer.jwks.endpoint.refresh.ms"))
            except ValueError as exc:
                raise ConfigError(key, str(exc)) from None
        try:
            return UnsecuredValidator(entry.options if entry is not None else {})
        except ValueError as exc:
            raise ConfigError(config.mechanism_key(listener, OAUTHBEARER, "sasl.jaas.config"),
                              str(exc)) from None

    def authenticator(self) -> SaslServerAuthenticator:
        """A new connection's state machine."""
        return SaslServerAuthenticator(self.factories, self.max_reauth_ms, self._now_ms)


def _plain_factory(users: dict[str, str]) -> Callable[[], Any]:
    return lambda: PlainServer(users)


def _scram_factory(mechanism: str, credentials: ScramCredentials, secret: bytes) -> Callable[[], Any]:
    return lambda: ScramServer(mechanism, credentials.lookup, secret)


def _oauth_factory(validator: Any, now_ms: Callable[[], int]) -> Callable[[], Any]:
    return lambda: OAuthBearerServer(validator, now_ms)


def inter_broker_client(config: Any) -> dict[str, str] | None:
    """The broker's own SASL client settings on the inter-broker listener (client names:
    ``sasl.mechanism``, ``sasl.username``, ``sasl.password``, ``sasl.oauthbearer.token``),
    or None when that listener is not SASL.

    Raises:
        ConfigError: the mechanism is not enabled there, or its JAAS entry lacks credentials.
    """
    name = config.inter_broker_listener
    listener = config.listener(name)
    if listener is None or not listener.security_protocol.startswith("SASL_"):
        return None
    mechanism = config["sasl.mechanism.inter.broker.protocol"]
    key = "sasl.mechanism.inter.broker.protocol"
    if mechanism == GSSAPI:
        raise ConfigError(key, f"the inter-broker listener {name} is SASL: set this to one of "
                          f"{', '.join(MECHANISMS)} (GSSAPI, Kafka's default, is not supported)")
    if mechanism not in enabled_mechanisms(config, name):
        raise ConfigError(key, f"{mechanism} is not enabled on the inter-broker listener {name}")
    entry = listener_jaas(config, name, mechanism)
    jkey = config.mechanism_key(name, mechanism, "sasl.jaas.config")
    opts = entry.options if entry is not None else {}
    if mechanism == OAUTHBEARER:
        sub = opts.get("unsecuredLoginStringClaim_sub")
        if not sub:
            raise ConfigError(jkey, "inter-broker OAUTHBEARER needs the JAAS option "
                              "unsecuredLoginStringClaim_sub (the broker's principal)")
        return {"sasl.mechanism": mechanism, "sasl.oauthbearer.unsecured.sub": sub}
    if not opts.get("username") or opts.get("password") is None:
        raise ConfigError(jkey, f"inter-broker {mechanism} needs the JAAS options username and "
                          "password (the broker's own credentials)")
    return {"sasl.mechanism": mechanism, "sasl.username": opts["username"],
            "sasl.password": opts["password"]}
