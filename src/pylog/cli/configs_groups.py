"""`pylog configs describe | alter --entity-type groups --entity-name G`: group configs
(resource type GROUP: ``consumer.session.timeout.ms``, ``share.auto.offset.reset``, ...,
docs/configuration.md) in the shape of Kafka's ``kafka-configs.sh --entity-type groups``,
over ``pylog.client.Admin`` (DescribeConfigs / IncrementalAlterConfigs)::

    $ pylog configs alter --entity-type groups --entity-name workers \\
          --add-config share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000
    Completed updating config for group workers.
    $ pylog configs describe --entity-type groups --entity-name workers
    Dynamic configs for group workers are:
      share.auto.offset.reset=earliest sensitive=false synonyms={GROUP_CONFIG:share.auto.offset.reset=earliest}
      ...

``describe --all`` lists every group config, the broker's values included.
"""

from __future__ import annotations

import argparse
from typing import Any

from pylog.cli._common import CliError


def group_name(args: argparse.Namespace) -> str:
    """The one group the command line names."""
    entities = args.entities
    if len(entities) != 1:
        raise CliError("a group config entity is one --entity-type groups --entity-name GROUP")
    name = entities[0][1]
    if name is None or name == "":
        raise CliError("--entity-type groups needs --entity-name GROUP (there is no default group)")
    return str(name)


def changes(args: argparse.Namespace) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for item in ",".join(args.add_config).split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--add-config {item!r}: expected KEY=VALUE, e.g. share.auto.offset.reset=earliest")
        out[key.strip()] = value.strip()
    for key in ",".join(args.delete_config).split(","):
        if key.strip():
            if key.strip() in out:
                raise CliError(f"{key.strip()} is both added and deleted")
            out[key.strip()] = None
    if not out:
        raise CliError("nothing to change: give --add-config K=V and/or --delete-config K")
    return out


def alter(args: argparse.Namespace, admin: Any) -> None:
    from pylog.client import ConfigResource

    group = group_name(args)
    admin.alter_configs(ConfigResource("group", group), changes(args), validate_only=args.validate_only)
    if args.validate_only:
        print("Validated the change (nothing was altered).")
    else:
        print(f"Completed updating config for group {group}.")


def describe(args: argparse.Namespace, admin: Any) -> None:
    from pylog.client import ConfigResource

    group = group_name(args)
    resource = ConfigResource("group", group)
    entries = admin.describe_configs([resource])[resource]
    shown = [e for e in entries.values() if args.all or e.source == "GROUP_CONFIG"]
    print(f"{'All' if args.all else 'Dynamic'} configs for group {group} are:")
    for e in sorted(shown, key=lambda e: e.name):
        # A group's own value is its only synonym; the broker's values show none.
        synonyms = f"GROUP_CONFIG:{e.name}={e.value}" if e.source == "GROUP_CONFIG" else ""
        print(f"  {e.name}={e.value} sensitive={str(e.is_sensitive).lower()} synonyms={{{synonyms}}}")
