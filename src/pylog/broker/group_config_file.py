"""``group-configs.json``: a single node's group configs (``pylog.group.group_configs``),
``{"<group>": {"share.auto.offset.reset": "earliest", ...}}``, written through a temporary
file, fsynced and renamed, read at start. Cluster mode keeps them in ZooKeeper instead.

Called on the broker's event loop (small file, written only by config changes)."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from pylog.group.group_configs import GroupConfigs

log = logging.getLogger("pylog.broker.group_configs")

FILE_NAME = "group-configs.json"


def load(path: str) -> dict[str, dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.error("cannot read %s (%s): group configs start from the defaults", path, exc)
        return {}
    if not isinstance(data, dict):
        log.error("%s is not a JSON object: group configs start from the defaults", path)
        return {}
    return {g: dict(v) for g, v in data.items() if isinstance(v, dict)}


def save(path: str, overrides: dict[str, dict[str, Any]]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(overrides, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def open_group_configs(config: Any) -> GroupConfigs:
    """The broker's group configs: from the file on a single node, empty in cluster mode
    (the config-change listener reads ZooKeeper's at start)."""
    if config.cluster_mode:
        return GroupConfigs(config)
    path = os.path.join(config.log_dir, FILE_NAME)
    return GroupConfigs(config, load(path), lambda overrides: save(path, overrides))
