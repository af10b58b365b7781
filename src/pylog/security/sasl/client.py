"""The requesting side's SASL settings, as confluent-kafka and the Java client name them.

``security.protocol`` SASL_PLAINTEXT or SASL_SSL, ``sasl.mechanism`` (``sasl.mechanisms``,
librdkafka's plural, too) and the credentials:

- PLAIN, SCRAM-SHA-256/512: ``sasl.username`` and ``sasl.password`` (confluent-kafka), or the
  Java client's ``sasl.jaas.config`` with ``username``/``password`` options;
- OAUTHBEARER: ``sasl.oauthbearer.token`` (a static token) or, for an unsecured token made
  here, ``sasl.oauthbearer.config`` in librdkafka's form (``principal=alice scope=a,b
  lifeSeconds=3600``) or the Java ``sasl.jaas.config`` options
  ``unsecuredLoginStringClaim_sub``, ``unsecuredLoginLifetimeSeconds``.

``SaslClientConfig.new_client()`` gives a fresh mechanism client per exchange (the
connection drives it: ``pylog.net.connection``). Immutable: safe to share.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pylog.config.values import ConfigError
from pylog.security.sasl import MECHANISMS, OAUTHBEARER, PLAIN, SCRAM_SHA_256, SCRAM_SHA_512
from pylog.security.sasl.jaas import parse_jaas_config
from pylog.security.sasl.oauthbearer import OAuthBearerClient, unsecured_token
from pylog.security.sasl.plain import PlainClient
from pylog.security.sasl.scram import ScramClient


@dataclass(frozen=True)
class SaslClientConfig:
    mechanism: str
    username: str = ""
    password: str = ""
    token: str | None = None  # OAUTHBEARER: a static token
    unsecured_sub: str | None = None  # OAUTHBEARER: make an unsecured token for this principal
    unsecured_lifetime_s: float = 3600.0
    unsecured_scope: tuple[str, ...] = ()

    def __repr__(self) -> str:  # no secrets in logs
        return f"SaslClientConfig({self.mechanism}, username={self.username!r})"

    def new_client(self) -> Any:
        if self.mechanism == PLAIN:
            return PlainClient(self.username, self.password)
        if self.mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
            return ScramClient(self.mechanism, self.username, self.password)
        token = self.token or unsecured_token(self.unsecured_sub or "", self.unsecured_lifetime_s,
                                              scope=list(self.unsecured_scope) or None)
        return OAuthBearerClient(token)


def client_sasl(settings: Mapping[str, Any]) -> SaslClientConfig | None:
    """The SASL settings among a client's settings (None unless security.protocol is SASL_*).

    Raises:
        ConfigError: a mechanism pylog does not speak or missing credentials.
    """
    protocol = str(settings.get("security.protocol") or "PLAINTEXT").upper()
    if not protocol.startswith("SASL_"):
        return None
    mechanism = str(settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "GSSAPI").upper()
    if mechanism not in MECHANISMS:
        raise ConfigError("sasl.mechanism", f"{mechanism!r} is not one of {', '.join(MECHANISMS)}"
                          " (set sasl.mechanism; GSSAPI is not supported)")
    options: dict[str, str] = {}
    jaas = settings.get("sasl.jaas.config")
    if jaas:
        options = parse_jaas_config("sasl.jaas.config", str(jaas)).options
    if mechanism == OAUTHBEARER:
        token = settings.get("sasl.oauthbearer.token")
        if token:
            return SaslClientConfig(mechanism, token=str(token))
        sub = options.get("unsecuredLoginStringClaim_sub") or settings.get("sasl.oauthbearer.unsecured.sub")
        life = float(options.get("unsecuredLoginLifetimeSeconds", 3600))
        scope: tuple[str, ...] = tuple(options.get("unsecuredLoginListClaim_scope", "").split(",")) \
            if options.get("unsecuredLoginListClaim_scope") else ()
        conf = settings.get("sasl.oauthbearer.config")
        if conf and not sub:
            for item in str(conf).split():
                k, _, v = item.partition("=")
                if k == "principal":
                    sub = v
                elif k == "lifeSeconds":
                    life = float(v)
                elif k == "scope":
                    scope = tuple(s for s in v.split(",") if s)
        if not sub:
            raise ConfigError("sasl.oauthbearer.config", "OAUTHBEARER needs a token "
                              "(sasl.oauthbearer.token) or a principal for an unsecured one "
                              "(sasl.oauthbearer.config=principal=<name>)")
        return SaslClientConfig(mechanism, unsecured_sub=str(sub), unsecured_lifetime_s=life,
                                unsecured_scope=scope)
    username = settings.get("sasl.username") or options.get("username")
    password = settings.get("sasl.password")
    if password is None:
        password = options.get("password")
    if not username or password is None:
        raise ConfigError("sasl.username", f"{mechanism} needs sasl.username and sasl.password "
                          "(or sasl.jaas.config with username and password)")
    return SaslClientConfig(mechanism, str(username), str(password))
