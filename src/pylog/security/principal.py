"""Principals of TLS clients: the certificate subject as Kafka spells it, and Kafka's
``ssl.principal.mapping.rules``.

Kafka's default principal builder (``DefaultKafkaPrincipalBuilder``) names a TLS client
``User:<name>``, where ``<name>`` is the subject distinguished name of its certificate in
RFC 2253 form as Java's ``X500Principal.getName()`` writes it (last RDN first, attribute
keywords CN, C, L, ST, O, OU, STREET, DC, UID; other attributes as ``OID=#<DER hex>``;
``,+"\\<>;`` escaped with a backslash), passed through the mapping rules. A client without
a certificate is ``User:ANONYMOUS``.

Rules (``SslPrincipalMapper``): a comma-separated list of ``DEFAULT`` (the DN unchanged) and
``RULE:pattern/replacement/[LU]`` (when ``pattern`` matches the whole DN, the DN with every
match of ``pattern`` replaced by ``replacement``, ``$1`` naming a group; ``L``/``U`` lower- or
upper-case the result). The first rule that applies wins; a DN no rule applies to fails the
authentication (``NoMatchingRuleError``). Patterns use Python's ``re``, which reads the
patterns Kafka's documentation shows the same way Java does.

Pure functions and immutable objects: safe anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANONYMOUS",
    "NoMatchingRuleError",
    "PrincipalMapper",
    "Rule",
    "parse_rules",
    "rfc2253_name",
]

#: The principal of a connection that has no client certificate (or no TLS at all).
ANONYMOUS = "User:ANONYMOUS"

# Java's RULE_PATTERN: DEFAULT | RULE:pattern/replacement/[LU] | anything else (an error).
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)


class NoMatchingRuleError(ValueError):
    """No mapping rule applies to a certificate's subject (the client is refused)."""


@dataclass(frozen=True)
class Rule:
    """One mapping rule; ``pattern`` None is ``DEFAULT``."""

    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        """The mapped name, or None when this rule does not apply to ``dn``."""
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        groups = self.pattern.groups
        result = self.pattern.sub(lambda mm: _expand(self.replacement, mm, groups), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.pattern.pattern}/{self.replacement}/{self.case}"


def _expand(replacement: str, m: re.Match[str], groups: int) -> str:
    """Java's ``Matcher.appendReplacement``: ``$n`` is group n (the longest number that
    names a group; ``$n`` beyond the groups is literal, as Kafka escapes it), ``\\x`` is x."""
    out = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
            continue
        if c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 2
            n = int(replacement[i + 1])
            while (
                j < len(replacement)
                and replacement[j].isdigit()
                and int(replacement[i + 1 : j + 1]) <= groups
            ):
                n = int(replacement[i + 1 : j + 1])
                j += 1
            if n <= groups:
                out.append(m.group(n) or "")
                i = j
                continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_rules(text: str) -> list[Rule]:
    """Parse ``ssl.principal.mapping.rules``.

    Raises:
        ValueError: a rule that is neither DEFAULT nor RULE:pattern/replacement/[LU], or a
            pattern that is not a valid regular expression.
    """
    rules: list[Rule] = []
    for m in _SPLITTER.finditer(text.strip()):
        whole = m.group(1)
        if not whole:
            continue  # the empty match at the end
        # Java's lookingAt: the shortest match from the start must cover the whole entry
        # ("DEFAULT/L" and "RULE:p/r/LU" leave something over: invalid).
        p = _PARSER.match(whole)
        if p is None or p.end() != len(whole):
            raise ValueError(
                f"invalid rule: {whole!r}; expected DEFAULT or RULE:pattern/replacement/[LU]"
            )
        if p.group(1):
            rules.append(Rule())
        elif p.group(2) is not None:
            try:
                pattern = re.compile(p.group(2))
            except re.error as exc:
                raise ValueError(f"rule {whole!r}: bad pattern: {exc}") from None
            rules.append(Rule(pattern, p.group(3), p.group(4)))
    return rules or [Rule()]


class PrincipalMapper:
    """``ssl.principal.mapping.rules`` applied to subject DNs."""

    def __init__(self, rules: str | Iterable[Rule] = "DEFAULT") -> None:
        self.rules = parse_rules(rules) if isinstance(rules, str) else list(rules)

    def name(self, dn: str) -> str:
        """The principal name for ``dn``.

        Raises:
            NoMatchingRuleError: no rule applies.
        """
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRuleError(
            f"no rule applies to {dn!r} (rules: {', '.join(str(r) for r in self.rules)})"
        )

    def principal(self, cert: dict[str, Any] | None) -> str:
        """``User:<name>`` for a peer certificate as ``SSLObject.getpeercert()`` decodes
        it; ``User:ANONYMOUS`` when there is none."""
        if not cert or not cert.get("subject"):
            return ANONYMOUS
        return "User:" + self.name(rfc2253_name(cert["subject"]))


# Java's X500Principal RFC 2253 keywords, by the long names Python's ssl decodes.
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
# Other attributes are written as OID=#<DER>: their OID and the string type OpenSSL and
# Java give them (IA5String 0x16 for e-mail and DC, PrintableString 0x13 for serial
# numbers, UTF8String 0x0c otherwise).
_OIDS = {
    "emailAddress": ("1.2.840.113549.1.9.1", 0x16),
    "serialNumber": ("2.5.4.5", 0x13),
    "title": ("2.5.4.12", 0x0C),
    "givenName": ("2.5.4.42", 0x0C),
    "surname": ("2.5.4.4", 0x0C),
    "initials": ("2.5.4.43", 0x0C),
    "generationQualifier": ("2.5.4.44", 0x0C),
    "dnQualifier": ("2.5.4.46", 0x13),
    "pseudonym": ("2.5.4.65", 0x0C),
    "name": ("2.5.4.41", 0x0C),
    "postalCode": ("2.5.4.17", 0x0C),
    "businessCategory": ("2.5.4.15", 0x0C),
}


def _escape(value: str) -> str:
    out = []
    for i, c in enumerate(value):
        if c in ',+"\\<>;' or (c == "#" and i == 0) or (c == " " and i in (0, len(value) - 1)):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _der_hex(tag: int, value: str) -> str:
    data = value.encode("utf-8")
    n = len(data)
    length = (
        bytes([n])
        if n < 0x80
        else (bytes([0x81, n]) if n < 0x100 else bytes([0x82, n >> 8, n & 0xFF]))
    )
    return "#" + (bytes([tag]) + length + data).hex()


def rfc2253_name(subject: Iterable[Iterable[tuple[str, str]]]) -> str:
    """A subject as ``getpeercert()`` gives it (RDNs in certificate order, each a tuple of
    (attribute, value)) in Java's RFC 2253 form: RDNs last first, ``+`` inside an RDN."""
    rdns = []
    for rdn in subject:
        parts = []
        for attr, value in rdn:
            keyword = _KEYWORDS.get(attr)
            if keyword is not None:
                parts.append(f"{keyword}={_escape(value)}")
            else:
                oid, tag = _OIDS.get(attr, (attr, 0x0C))
                parts.append(f"{oid}={_der_hex(tag, value)}")
        rdns.append("+".join(parts))
    return ",".join(reversed(rdns))
