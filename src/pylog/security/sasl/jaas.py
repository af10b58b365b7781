"""Kafka's JAAS configuration text (``sasl.jaas.config``), parsed.

Grammar (Java's ``ConfigFile`` syntax as Kafka's ``JaasConfig`` reads one entry)::

    entry   = module-class flag *option ";"
    flag    = "required" | "requisite" | "sufficient" | "optional"
    option  = name "=" value
    value   = quoted | word        ; quoted: "..." with \\" \\\\ \\n \\t \\r escapes
    word    = 1*(ALPHA / DIGIT / "_" / "." / "$" / "-" / "/" / ":" / "+" / "*")

Example::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret";

``sasl.jaas.config`` holds exactly one entry (Kafka refuses more). Errors name the config key
and the position. Pure functions: safe anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pylog.config.values import ConfigError

FLAGS = ("required", "requisite", "sufficient", "optional")
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.$-/:+*")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "'": "'"}

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@dataclass(frozen=True)
class JaasEntry:
    """One login module: its class name, control flag and options (in order given)."""

    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # options hold passwords: never print them
        return f"JaasEntry({self.login_module!r}, {self.flag!r}, options={sorted(self.options)})"


class _Lexer:
    def __init__(self, key: str, text: str) -> None:
        self.key, self.text, self.pos = key, text, 0

    def fail(self, what: str) -> ConfigError:
        return ConfigError(self.key, f"invalid JAAS configuration at character {self.pos}: {what}")

    def skip_space(self) -> None:
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c.isspace():
                self.pos += 1
            elif text.startswith("//", self.pos):  # Java's ConfigFile allows comments
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unterminated comment")
                self.pos = end + 2
            else:
                return

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def word(self, what: str) -> str:
        self.skip_space()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in _WORD:
            self.pos += 1
        if self.pos == start:
            found = self.text[self.pos] if self.pos < len(self.text) else "the end"
            raise self.fail(f"expected {what}, found {found!r}")
        return self.text[start:self.pos]

    def quoted(self) -> str:
        # at the opening quote
        self.pos += 1
        out: list[str] = []
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c == '"':
                self.pos += 1
                return "".join(out)
            if c == "\\":
                if self.pos + 1 >= len(text):
                    break
                nxt = text[self.pos + 1]
                out.append(_ESCAPES.get(nxt, nxt))
                self.pos += 2
                continue
            out.append(c)
            self.pos += 1
        raise self.fail("unterminated quoted value")

    def value(self, name: str) -> str:
        if self.peek() == '"':
            return self.quoted()
        try:
            return self.word("a value")
        except ConfigError:
            raise self.fail(f"option {name!r} has no value") from None


def parse_jaas_config(key: str, text: str) -> JaasEntry:
    """Parse ``sasl.jaas.config``'s value (``key`` names it in errors).

    Raises:
        ConfigError: a syntax error, an unknown control flag, an option given twice, no
            entry or more than one entry.
    """
    lex = _Lexer(key, text or "")
    if not lex.peek():
        raise ConfigError(key, "empty JAAS configuration: expected "
                          "'<LoginModule class> required [option=value ...];'")
    module = lex.word("a login module class name")
    flag = lex.word("a control flag (required, requisite, sufficient, optional)")
    if flag.lower() not in FLAGS:
        raise lex.fail(f"{flag!r} is not a control flag (required, requisite, sufficient, optional)")
    options: dict[str, str] = {}
    while True:
        c = lex.peek()
        if c == ";":
            lex.pos += 1
            break
        if not c:
            raise lex.fail("missing ';' at the end of the login module entry")
        name = lex.word("an option name or ';'")
        if lex.peek() != "=":
            raise lex.fail(f"expected '=' after option {name!r}")
        lex.pos += 1
        if name in options:
            raise lex.fail(f"option {name!r} is given twice")
        options[name] = lex.value(name)
    if lex.peek():
        raise ConfigError(key, "sasl.jaas.config must hold exactly one login module entry; "
                          f"found more text at character {lex.pos}")
    return JaasEntry(module, flag.lower(), options)


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """The ``user_<name>="<password>"`` options of a PlainLoginModule entry."""
    return {k[5:]: v for k, v in entry.options.items() if k.startswith("user_") and len(k) > 5}
