"""`pylog acls add | list | remove`: ACLs in the shape of Kafka's ``kafka-acls.sh``, over
``pylog.client.Admin`` (CreateAcls / DescribeAcls / DeleteAcls).

Flags are kafka-acls.sh's: ``--allow-principal`` / ``--deny-principal`` (repeatable),
``--allow-host`` / ``--deny-host`` (default ``*``), ``--operation`` (repeatable; Kafka's
names: Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs,
AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, All), resources ``--topic``,
``--group``, ``--transactional-id``, ``--cluster`` (repeatable), ``--resource-pattern-type
literal|prefixed|match|any`` (adding takes literal or prefixed), the conveniences
``--producer`` (WRITE, DESCRIBE, CREATE on topics; WRITE, DESCRIBE on transactional ids;
``--idempotent``: IDEMPOTENT_WRITE on the cluster) and ``--consumer`` (READ, DESCRIBE on
topics, READ on groups), ``--force`` (remove without asking). Output is kafka-acls.sh's
(``Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders,
patternType=LITERAL)`:``, then one tab-indented ``(principal=User:alice, host=*,
operation=READ, permissionType=ALLOW)`` line per ACL; ``Current ACLs for resource ...``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from pylog.cli._common import CliError, run_command
from pylog.security.acl import AclOperation, ResourceType
from pylog.security.authz.bindings import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    parse_operation,
)

_Op = AclOperation
_PATTERNS = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED,
             "match": PatternType.MATCH, "any": PatternType.ANY}


def add_parser(sub: Any, add_bootstrap: Callable[[argparse.ArgumentParser], None]) -> None:
    c = sub.add_parser(
        "acls",
        help="add, list and remove ACLs (kafka-acls.sh)",
        description="ACLs of a broker with an authorizer (authorizer.class.name), as "
        "kafka-acls.sh manages them; docs/security.md#authorization. The admin's principal "
        "needs ALTER (add, remove) or DESCRIBE (list) on the cluster, or to be a super user.",
    )
    csub = c.add_subparsers(dest="acls_command", metavar="ACTION", required=True)
    for name, text in (("add", "add ACLs"), ("list", "list ACLs"), ("remove", "remove ACLs")):
        p = csub.add_parser(name, help=text, description=_EXAMPLES[name])
        _add_options(p, name)
        add_bootstrap(p)


_EXAMPLES = {
    "add": "Example: pylog acls add --allow-principal User:alice --operation Read "
           "--operation Describe --topic orders --group billing",
    "list": "Example: pylog acls list --topic orders --resource-pattern-type match "
            "(every ACL that applies to topic orders); no resource: every ACL",
    "remove": "Example: pylog acls remove --allow-principal User:alice --operation Read "
              "--topic orders --force; no principal: every ACL of the resource",
}


def _add_options(p: argparse.ArgumentParser, action: str) -> None:
    p.add_argument("--topic", metavar="TOPIC", action="append", default=[], help="a topic resource (repeatable)")
    p.add_argument("--group", metavar="GROUP", action="append", default=[], help="a consumer group resource (repeatable)")
    p.add_argument("--transactional-id", metavar="ID", action="append", default=[],
                   help="a transactional id resource (repeatable)")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--resource-pattern-type", default="literal", type=str.lower,
                   choices=sorted(_PATTERNS),
                   help="literal (default) or prefixed; list and remove also take match "
                   "(every pattern that applies to the named resource) and any")
    if action == "list":
        p.add_argument("--principal", metavar="PRINCIPAL", action="append", default=[],
                       help="only the ACLs of this principal (repeatable)")
        return
    p.add_argument("--allow-principal", metavar="PRINCIPAL", action="append", default=[],
                   help="principal allowed (User:alice; User:* for everyone; repeatable)")
    p.add_argument("--deny-principal", metavar="PRINCIPAL", action="append", default=[],
                   help="principal denied (repeatable)")
    p.add_argument("--allow-host", metavar="HOST", action="append", default=[],
                   help="IP address the allowed principals may connect from (default *)")
    p.add_argument("--deny-host", metavar="HOST", action="append", default=[],
                   help="IP address the denied principals are denied from (default *)")
    p.add_argument("--operation", metavar="OP", action="append", default=[],
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                   "DescribeConfigs, AlterConfigs, IdempotentWrite, All (repeatable; "
                   "default All)")
    p.add_argument("--producer", action="store_true",
                   help="the producer's ACLs: WRITE, DESCRIBE, CREATE on --topic, WRITE, "
                   "DESCRIBE on --transactional-id")
    p.add_argument("--idempotent", action="store_true",
                   help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--consumer", action="store_true",
                   help="the consumer's ACLs: READ, DESCRIBE on --topic, READ on --group")
    if action == "remove":
        p.add_argument("--force", action="store_true", help="remove without asking")


def run(args: argparse.Namespace) -> int:
    fn = {"add": add, "list": list_acls, "remove": remove}[args.acls_command]
    return run_command("acls", fn, args)


# --- what the flags name ------------------------------------------------------------------


def _patterns(args: argparse.Namespace, *, required: bool) -> list[ResourcePattern]:
    ptype = _PATTERNS[args.resource_pattern_type]
    out = [ResourcePattern(ResourceType.TOPIC, t.strip(), ptype) for t in args.topic]
    if args.cluster or getattr(args, "idempotent", False):
        if ptype == PatternType.LITERAL or not args.cluster:
            out.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
        else:
            out.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, ptype))
    out += [ResourcePattern(ResourceType.GROUP, g.strip(), ptype) for g in args.group]
    out += [ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, ptype) for t in args.transactional_id]
    if required and not out:
        raise CliError("You must provide at least one resource: --topic <topic> or --cluster "
                       "or --group <group> or --transactional-id <id>")
    return list(dict.fromkeys(out))


def _principal(text: str) -> str:
    text = text.strip()
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise CliError(f"expected a string in format principalType:principalName but got {text}")
    return text


def _entries(args: argparse.Namespace, ops: set[AclOperation]) -> set[AccessControlEntry]:
    out: set[AccessControlEntry] = set()
    for principals, hosts, perm in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                    (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        for principal in principals:
            for host in [h.strip() for h in hosts] or ["*"]:
                out.update(AccessControlEntry(_principal(principal), host, op, perm) for op in ops)
    return out


def _operations(args: argparse.Namespace) -> set[AclOperation]:
    try:
        return {parse_operation(o.strip()) for o in args.operation} or {_Op.ALL}
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _resource_acls(args: argparse.Namespace) -> dict[ResourcePattern, set[AccessControlEntry]]:
    """{pattern: entries} the flags ask for (kafka-acls.sh's getResourceFilterToAcls)."""
    patterns = _patterns(args, required=True)
    out: dict[ResourcePattern, set[AccessControlEntry]] = {}
    if not args.producer and not args.consumer:
        entries = _entries(args, _operations(args))
        for p in patterns:
            out[p] = set(entries)
    if args.producer:
        for p in patterns:
            if p.resource_type == ResourceType.TOPIC:
                out.setdefault(p, set()).update(_entries(args, {_Op.WRITE, _Op.DESCRIBE, _Op.CREATE}))
            elif p.resource_type == ResourceType.TRANSACTIONAL_ID:
                out.setdefault(p, set()).update(_entries(args, {_Op.WRITE, _Op.DESCRIBE}))
            elif p.resource_type == ResourceType.CLUSTER and args.idempotent:
                out.setdefault(p, set()).update(_entries(args, {_Op.IDEMPOTENT_WRITE}))
    elif args.idempotent:
        raise CliError("The --idempotent option is only available if --producer is set")
    if args.consumer:
        for p in patterns:
            if p.resource_type == ResourceType.TOPIC:
                out.setdefault(p, set()).update(_entries(args, {_Op.READ, _Op.DESCRIBE}))
            elif p.resource_type == ResourceType.GROUP:
                out.setdefault(p, set()).update(_entries(args, {_Op.READ}))
    return out


def _entry_lines(entries: Any) -> str:
    return "\n".join("\t" + str(e) for e in sorted(entries))


def _filter_text(p: ResourcePattern) -> str:
    return (f"ResourcePatternFilter(resourceType={p.resource_type.name}, name={p.name}, "
            f"patternType={p.pattern_type.name})")


def _admin(args: argparse.Namespace) -> Any:
    from pylog.cli.tools import admin_for

    return admin_for(args)


# --- the actions ---------------------------------------------------------------------------


def add(args: argparse.Namespace) -> int:
    if _PATTERNS[args.resource_pattern_type] not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise CliError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type.upper()}' "
                       "is not valid when adding acls.")
    resource_acls = _resource_acls(args)
    if any(not entries for entries in resource_acls.values()):
        raise CliError("You must specify one of: --allow-principal, --deny-principal when trying "
                       "to add ACLs.")
    with _admin(args) as admin:
        for pattern, entries in resource_acls.items():
            print(f"Adding ACLs for resource `{pattern}`: \n {_entry_lines(entries)} \n")
            admin.create_acls([AclBinding(pattern, e) for e in sorted(entries)])
        _print_current(admin, list(resource_acls))
    return 0


def _print_current(admin: Any, patterns: list[ResourcePattern]) -> None:
    found: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for p in patterns:
        flt = AclBindingFilter(p.resource_type, p.name, p.pattern_type)
        for b in admin.describe_acls(flt):
            found.setdefault(b.pattern, set()).add(b.entry)
    _print_resources(found)


def _print_resources(found: dict[ResourcePattern, set[AccessControlEntry]]) -> None:
    for pattern in sorted(found):
        print(f"Current ACLs for resource `{pattern}`: \n {_entry_lines(found[pattern])} \n")


def list_acls(args: argparse.Namespace) -> int:
    patterns = _patterns(args, required=False)
    with _admin(args) as admin:
        if patterns:
            bindings = [b for p in patterns for b in admin.describe_acls(
                AclBindingFilter(p.resource_type, p.name, p.pattern_type))]
        else:
            bindings = admin.describe_acls(AclBindingFilter(
                pattern_type=_PATTERNS[args.resource_pattern_type]
                if args.resource_pattern_type != "literal" else PatternType.ANY))
    found: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for b in bindings:
        found.setdefault(b.pattern, set()).add(b.entry)
    if not args.principal:
        _print_resources(found)
        return 0
    for principal in args.principal:
        print(f"ACLs for principal `{_principal(principal)}`")
        _print_resources({p: {e for e in es if e.principal == principal.strip()}
                          for p, es in found.items()
                          if any(e.principal == principal.strip() for e in es)})
    return 0


def _confirm(args: argparse.Namespace, message: str) -> bool:
    if args.force:
        return True
    print(message)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def remove(args: argparse.Namespace) -> int:
    principals = args.allow_principal or args.deny_principal
    if principals or args.producer or args.consumer:
        resource_acls = _resource_acls(args)
    else:
        resource_acls = {p: set() for p in _patterns(args, required=True)}
    with _admin(args) as admin:
        for pattern, entries in resource_acls.items():
            flt_text = _filter_text(pattern)
            if not entries:
                if _confirm(args, "Are you sure you want to delete all ACLs for resource filter "
                                  f"`{flt_text}`? (y/n)"):
                    admin.delete_acls([AclBindingFilter(pattern.resource_type, pattern.name,
                                                         pattern.pattern_type)])
                continue
            if _confirm(args, f"Are you sure you want to remove ACLs: \n {_entry_lines(entries)} \n"
                              f" from resource filter `{flt_text}`? (y/n)"):
                admin.delete_acls([AclBindingFilter(
                    pattern.resource_type, pattern.name, pattern.pattern_type, e.principal, e.host,
                    e.operation, e.permission_type) for e in sorted(entries)])
        _print_current(admin, [p for p in resource_acls
                               if p.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)])
    return 0
