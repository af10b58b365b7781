"""`pylog configs describe | alter`: client quotas in the shape of Kafka's
``kafka-configs.sh`` (``--entity-type clients|users``, ``--entity-name NAME`` or
``--entity-default``, ``--add-config k=v,k=v``, ``--delete-config k,k``), over
``pylog.client.Admin`` (DescribeClientQuotas / AlterClientQuotas).

An entity is one ``--entity-type`` with its name, or two for a user's client:
``--entity-type users --entity-name alice --entity-type clients --entity-name app``. Each
``--entity-name`` / ``--entity-default`` belongs to the ``--entity-type`` before it; a type
without one describes every entity of that type. Output lines are kafka-configs.sh's:

    Quota configs for client-id 'app' are producer_byte_rate=1048576.0
    Completed updating config for client app.

Group configs (``--entity-type groups --entity-name G``) go through DescribeConfigs and
IncrementalAlterConfigs instead (``pylog.cli.configs_groups``).

Topic configs stay with ``pylog topics alter-config`` / ``pylog topics describe --configs``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from pylog.cli._common import CliError, run_command

ENTITY_TYPES = {"clients": "client-id", "users": "user", "groups": "group"}
_DEFAULT = ""  # --entity-default: the name of the default entity on the command line
_TYPE_WORDS = {"user": "user-principal", "client-id": "client-id"}


class _Entity(argparse.Action):
    """``--entity-type`` starts an entity, ``--entity-name`` / ``--entity-default`` name the
    last one (kafka-configs.sh pairs them by position)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        entities = list(getattr(namespace, "entities", None) or [])
        if option_string == "--entity-type":
            if values not in ENTITY_TYPES:
                parser.error(
                    f"--entity-type {values!r}: pylog configs handles "
                    "clients and users (client quotas) and groups (group configs); topic configs: "
                    "pylog topics alter-config / describe --configs"
                )
            entities.append([values, None])
        else:
            if not entities or entities[-1][1] is not None:
                parser.error(f"{option_string} must follow an --entity-type")
            entities[-1][1] = _DEFAULT if option_string == "--entity-default" else values
            if entities[-1][1] == "" and option_string == "--entity-name":
                parser.error("--entity-name must not be empty (use --entity-default)")
        namespace.entities = entities


def _add_entity_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--entity-type",
        action=_Entity,
        metavar="clients|users|groups",
        help="the entity's type; give two (users, then clients) for a user's client; groups: "
        "group configs",
    )
    p.add_argument(
        "--entity-name",
        action=_Entity,
        metavar="NAME",
        help="the name of the --entity-type before it (a client id or a user principal's name)",
    )
    p.add_argument(
        "--entity-default",
        action=_Entity,
        nargs=0,
        help="the default entity of the --entity-type before it "
        "(/config/clients/<default>, /config/users/<default>)",
    )
    p.set_defaults(entities=[])


def add_parser(sub: Any, add_bootstrap: Callable[[argparse.ArgumentParser], None]) -> None:
    c = sub.add_parser(
        "configs",
        help="describe and alter client quotas, SCRAM credentials and group configs (kafka-configs.sh)",
        description="Client quotas (producer_byte_rate, consumer_byte_rate in bytes/s, "
        "request_percentage) of client ids and users, as kafka-configs.sh --entity-type "
        "clients|users sets them (docs/quotas.md), and users' SCRAM credentials "
        "(SCRAM-SHA-256=[iterations=8192,password=...], docs/security.md), and group configs "
        "(--entity-type groups: consumer.session.timeout.ms, share.auto.offset.reset, ..., "
        "docs/configuration.md).",
    )
    csub = c.add_subparsers(dest="configs_command", metavar="ACTION", required=True)
    d = csub.add_parser(
        "describe",
        help="show client quotas",
        description="Show the quotas of an entity, of every entity of a type (--entity-type "
        "without a name) or of the default entity (--entity-default). Example: pylog configs "
        "describe --entity-type clients",
    )
    _add_entity_options(d)
    d.add_argument("--all", action="store_true",
                   help="groups: every group config, the broker's values included (default: "
                   "the group's own)")
    add_bootstrap(d)
    a = csub.add_parser(
        "alter",
        help="set or delete client quotas",
        description="Set (--add-config) or delete (--delete-config) quotas of one entity. "
        "Example: pylog configs alter --entity-type clients --entity-name app --add-config "
        "producer_byte_rate=1048576,consumer_byte_rate=2097152",
    )
    _add_entity_options(a)
    a.add_argument(
        "--add-config",
        action="append",
        default=[],
        metavar="K=V[,K=V...]",
        help="quotas to set: producer_byte_rate, consumer_byte_rate (bytes/s), "
        "request_percentage; for a user also SCRAM-SHA-256=[iterations=N,password=P] and "
        "SCRAM-SHA-512=[...] (repeatable)",
    )
    a.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="K[,K...]",
        help="quotas (or SCRAM-SHA-256, SCRAM-SHA-512 credentials) to remove (repeatable)",
    )
    a.add_argument(
        "--validate-only",
        action="store_true",
        help="have the broker check the change without making it",
    )
    add_bootstrap(a)


def run(args: argparse.Namespace) -> int:
    fn = describe if args.configs_command == "describe" else alter
    return run_command("configs", fn, args)


def _entity(args: argparse.Namespace, *, named: bool) -> dict[str, str | None]:
    """The command line's entity as the admin client takes it (None: the default)."""
    entities = args.entities
    if not entities:
        raise CliError(
            "give an entity: --entity-type clients|users with --entity-name NAME "
            "or --entity-default"
        )
    if len(entities) > 2 or len({t for t, _ in entities}) != len(entities):
        raise CliError("an entity is one --entity-type, or users then clients for a user's client")
    out: dict[str, str | None] = {}
    for etype, name in entities:
        if name is None and named:
            raise CliError(f"--entity-type {etype} needs --entity-name NAME or --entity-default")
        out[ENTITY_TYPES[etype]] = None if name == _DEFAULT else name
    return out


SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _split_top(text: str) -> list[str]:
    """Split on commas outside ``[...]`` (kafka-configs.sh's
    ``SCRAM-SHA-256=[iterations=8192,password=x],producer_byte_rate=1024``)."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in text:
        if c == "[":
            depth += 1
        elif c == "]":
            depth = max(0, depth - 1)
        if c == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    out.append("".join(cur))
    return out


def _scram_changes(args: argparse.Namespace) -> tuple[dict[str, tuple[str, int]], list[str]]:
    """The SCRAM part of --add-config / --delete-config: ({mechanism: (password, iterations)},
    [mechanism to delete]); those items are removed from ``args``."""
    from pylog.security.sasl.scram import DEFAULT_ITERATIONS

    ups: dict[str, tuple[str, int]] = {}
    rest = []
    for item in _split_top(",".join(args.add_config)):
        key, sep, value = item.partition("=")
        if key.strip().upper() not in SCRAM_MECHANISMS:
            rest.append(item)
            continue
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        fields: dict[str, str] = {}
        for part in value.split(","):
            k, s2, v = part.partition("=")
            if s2:
                fields[k.strip()] = v
            elif part.strip():
                fields["password"] = part  # SCRAM-SHA-256=secret
        if "password" not in fields:
            raise CliError(f"--add-config {key.strip()}: give [password=...] "
                           "(and optionally iterations=N)")
        try:
            iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
        except ValueError:
            raise CliError(f"--add-config {key.strip()}: iterations must be a number") from None
        ups[key.strip().upper()] = (fields["password"], iterations)
    dels = []
    keep = []
    for key in ",".join(args.delete_config).split(","):
        if key.strip().upper() in SCRAM_MECHANISMS:
            dels.append(key.strip().upper())
        elif key.strip():
            keep.append(key)
    args.add_config = [",".join(rest)] if any(r.strip() for r in rest) else []
    args.delete_config = keep
    return ups, dels


def _changes(args: argparse.Namespace) -> dict[str, float | None]:
    changes: dict[str, float | None] = {}
    for item in ",".join(args.add_config).split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(
                f"--add-config {item!r}: expected KEY=VALUE, e.g. producer_byte_rate=1048576"
            )
        try:
            changes[key.strip()] = float(value)
        except ValueError:
            raise CliError(f"--add-config {key.strip()}={value!r}: a quota is a number") from None
    for key in ",".join(args.delete_config).split(","):
        if key.strip():
            changes[key.strip()] = None
    if not changes:
        raise CliError("nothing to change: give --add-config K=V and/or --delete-config K")
    return changes


def _admin(args: argparse.Namespace) -> Any:
    from pylog.cli.tools import admin_for

    return admin_for(args)


def _groups(args: argparse.Namespace) -> bool:
    return any(t == "groups" for t, _ in args.entities)


def alter(args: argparse.Namespace) -> int:
    if _groups(args):
        from pylog.cli import configs_groups

        configs_groups.group_name(args)  # before connecting
        with _admin(args) as admin:
            configs_groups.alter(args, admin)
        return 0
    entity = _entity(args, named=True)
    ups, dels = _scram_changes(args)
    if (ups or dels) and (list(entity) != ["user"] or entity["user"] is None):
        raise CliError("SCRAM credentials belong to one user: --entity-type users "
                       "--entity-name NAME")
    changes = _changes(args) if (args.add_config or args.delete_config or not (ups or dels)) else {}
    with _admin(args) as admin:
        if changes:
            admin.alter_client_quotas(entity, changes, validate_only=args.validate_only)
        if (ups or dels) and not args.validate_only:
            user = str(entity["user"])
            admin.alter_user_scram_credentials({user: ups} if ups else {},
                                               {user: dels} if dels else {})
    etype, name = args.entities[0]
    if args.validate_only:
        print("Validated the change (nothing was altered).")
    elif name == _DEFAULT:
        print(f"Completed updating default config for {etype} in the cluster.")
    else:
        print(f"Completed updating config for {etype[:-1]} {name}.")
    return 0


def describe(args: argparse.Namespace) -> int:
    from pylog.client import QuotaFilter

    if _groups(args):
        from pylog.cli import configs_groups

        configs_groups.group_name(args)
        with _admin(args) as admin:
            configs_groups.describe(args, admin)
        return 0
    if getattr(args, "all", False):
        raise CliError("--all lists group configs: --entity-type groups --entity-name GROUP")
    filters = []
    for etype, name in args.entities:
        kind = ENTITY_TYPES[etype]
        if name is None:
            filters.append(QuotaFilter.of_type(kind))
        elif name == _DEFAULT:
            filters.append(QuotaFilter.of_default(kind))
        else:
            filters.append(QuotaFilter.of_entity(kind, name))
    scram: dict[str, dict[str, int]] = {}
    with _admin(args) as admin:
        quotas = admin.describe_client_quotas(filters, strict=bool(filters))
        users = [n for t, n in args.entities if t == "users" and n not in (None, _DEFAULT)]
        if len(args.entities) == 1 and args.entities[0][0] == "users" and args.entities[0][1] != _DEFAULT:
            from pylog import errors

            try:
                scram = admin.describe_user_scram_credentials(users or None)
            except errors.ResourceNotFoundError:
                scram = {}
    for entity, values in sorted(quotas.items(), key=lambda kv: [(t, n or "") for t, n in kv[0]]):
        parts = dict(entity)
        names = [
            f"{_TYPE_WORDS[t]} {parts[t]!r}"
            if parts[t] is not None
            else f"the default {_TYPE_WORDS[t]}"
            for t in ("user", "client-id")
            if t in parts
        ]
        values_text = ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
        print(f"Quota configs for {', '.join(names)} are {values_text}")
    for user, mechs in sorted(scram.items()):
        text = ",".join(f"{m}=iterations={i}" for m, i in sorted(mechs.items()))
        print(f"SCRAM credential configs for user-principal '{user}' are {text}")
    return 0
