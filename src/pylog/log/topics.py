"""Topic names, topic IDs and the durable topic-metadata store of a single-node broker.

Kafka facts used here (``org.apache.kafka.common.internals.Topic``, ``Uuid``,
``PartitionMetadataFile``):
- legal topic names: 1 to 249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``; two
  names that differ only by ``.`` versus ``_`` collide (metric names would clash);
- topic IDs are random UUIDs shown as URL-safe base64 without padding; Kafka redraws one
  whose text starts with ``-`` and never uses the all-zero UUID;
- each partition directory holds ``partition.metadata``: ``version: 0`` then
  ``topic_id: <id>``.

The store (``pylog-topics.json`` at the root of the log dir) is the embedded controller's
record of topics, partition counts, topic IDs and per-topic config overrides. It is written
to a temporary file, fsynced and renamed, so a crash leaves the old or the new version.
Not thread-safe: the LogManager serialises writers.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

STORE_NAME = "pylog-topics.json"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"


class TopicNameError(ValueError):
    """An illegal topic name (Kafka's InvalidTopicException)."""


def validate_topic_name(name: str) -> None:
    """Raise TopicNameError when ``name`` is not a legal Kafka topic name."""
    if not name:
        raise TopicNameError("topic name is empty")
    if name in (".", ".."):
        raise TopicNameError(f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicNameError(
            f"topic name is {len(name)} characters long, the limit is {MAX_NAME_LENGTH}"
        )
    if not _LEGAL.fullmatch(name):
        raise TopicNameError(
            f"topic name {name!r} is illegal: it may contain only ASCII letters, digits, '.', '_' and '-'"
        )


def collision_key(name: str) -> str:
    """Names with the same key collide (``a.b`` and ``a_b``)."""
    return name.replace(".", "_")


def new_topic_id() -> uuid.UUID:
    while True:
        u = uuid.uuid4()
        if not topic_id_str(u).startswith("-"):
            return u


def topic_id_str(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def topic_id_from_str(s: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    if len(raw) != 16:
        raise ValueError(f"bad topic id {s!r}")
    return uuid.UUID(bytes=raw)


def write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through ``path.tmp``: fsync, rename, fsync the directory."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write_partition_metadata(directory: str, topic_id: uuid.UUID) -> None:
    text = f"version: 0\ntopic_id: {topic_id_str(topic_id)}\n"
    write_atomically(os.path.join(directory, PARTITION_METADATA), text.encode("ascii"))


def read_partition_metadata(directory: str) -> uuid.UUID | None:
    try:
        with open(os.path.join(directory, PARTITION_METADATA), encoding="ascii") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    try:
        if fields.get("version", "").strip() != "0":
            return None
        return topic_id_from_str(fields["topic_id"].strip())
    except (KeyError, ValueError):
        return None


class TopicStore:
    """The durable record of topics: ``{name: {"topic_id", "partitions", "configs"}}``."""

    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(log_dir, STORE_NAME)

    def load(self) -> dict[str, dict]:
        try:
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return {}
        if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("topics"), dict):
            raise ValueError(f"{self.path}: unrecognised topic store")
        return doc["topics"]

    def save(self, topics: dict[str, dict]) -> None:
        doc = {"version": 1, "topics": topics}
        write_atomically(self.path, json.dumps(doc, indent=1, sort_keys=True).encode("utf-8"))


def read_meta_properties(log_dir: str) -> dict[str, str]:
    try:
        with open(os.path.join(log_dir, META_PROPERTIES), encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def write_meta_properties(log_dir: str, props: dict[str, str]) -> None:
    text = "#\n" + "".join(f"{k}={v}\n" for k, v in sorted(props.items()))
    write_atomically(os.path.join(log_dir, META_PROPERTIES), text.encode("utf-8"))
