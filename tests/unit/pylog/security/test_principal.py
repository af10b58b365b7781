"""ssl.principal.mapping.rules and the RFC 2253 subject names (Kafka's SslPrincipalMapper
cases)."""

from __future__ import annotations

import pytest

from pylog.security.principal import (
    ANONYMOUS,
    NoMatchingRuleError,
    PrincipalMapper,
    parse_rules,
    rfc2253_name,
)

RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT"
)


@pytest.mark.parametrize(
    ("dn", "name"),
    [
        ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "Duke"),
        ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
        ("cn=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
        ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),  # DEFAULT
    ],
)
def test_first_matching_rule_wins(dn: str, name: str) -> None:
    assert PrincipalMapper(RULES).name(dn) == name


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1/L/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1/LU",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1/UU",
        "RULE:CN=(.*?,OU=x/$1/",  # not a regular expression
    ],
)
def test_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError, match="rule"):
        parse_rules(rules)


def test_rules_may_span_lines_and_contain_commas() -> None:
    mapper = PrincipalMapper("RULE:^CN=([^,]+),OU=(eng|ops),.*$/$2-$1/L ,\n  DEFAULT")
    assert mapper.name("CN=Alice,OU=eng,O=pylog,C=US") == "eng-alice"
    assert mapper.name("CN=Bob,OU=sales,O=pylog") == "CN=Bob,OU=sales,O=pylog"


def test_replacement_groups_and_escapes_as_java() -> None:
    # $12 with one group is group 1 then "2"; $5 beyond the groups is literal; \$ escapes.
    assert PrincipalMapper("RULE:^CN=(\\w+)$/$12/").name("CN=x") == "x2"
    assert PrincipalMapper("RULE:^CN=(\\w+)$/$5/").name("CN=x") == "$5"
    assert PrincipalMapper("RULE:^CN=(\\w+)$/u\\$$1/").name("CN=x") == "u$x"


def test_no_matching_rule_refuses_the_client() -> None:
    mapper = PrincipalMapper("RULE:^CN=(.*),OU=ops$/$1/")
    with pytest.raises(NoMatchingRuleError, match="no rule applies"):
        mapper.name("CN=alice,OU=eng")


def test_subject_in_java_rfc2253_form() -> None:
    # getpeercert() order (certificate order, C first); Java writes the last RDN first.
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Acme, Inc."),),
        (("organizationalUnitName", "eng"), ("userId", "7")),
        (("commonName", " alice+bob "),),
        (("emailAddress", "a@x.io"),),
    )
    assert rfc2253_name(subject) == (
        "1.2.840.113549.1.9.1=#16066140782e696f,CN=\\ alice\\+bob\\ ,OU=eng+UID=7,"
        "O=Acme\\, Inc.,C=US"
    )


def test_principal_of_a_certificate_and_of_none() -> None:
    mapper = PrincipalMapper("DEFAULT")
    cert = {"subject": ((("countryName", "US"),), (("commonName", "alice"),))}
    assert mapper.principal(cert) == "User:CN=alice,C=US"
    assert mapper.principal(None) == ANONYMOUS == "User:ANONYMOUS"
