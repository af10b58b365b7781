"""Which share partitions of a share group have state at the share coordinators: the group
coordinator's ``ShareGroupStatePartitionMetadata`` (KIP-932; Kafka's
``GroupMetadataManager.shareGroupStatePartitionMetadata`` and ``ShareGroup.InitMapValue``).

Per share group, three sets of topics, written whole as record 15 of ``__consumer_offsets``
(``records.encode_share_group_state_metadata``) and replayed on load:

- **initializing**: topic id -> (name, partitions, timestamp): InitializeShareGroupState was
  (or is about to be) sent for these partitions;
- **initialized**: topic id -> (name, partitions, timestamp): their state exists; only these
  partitions are assigned to members (Kafka's ``withTopicAssignablePartitionsMap``);
- **deleting**: topic id -> name: DeleteShareGroupState is under way for these topics (a
  crash in the middle leaves them here, and the delete is done again).

The transitions, each a pure function from one value to the next (the caller writes the
record of the result)::

    (not known) --heartbeat: subscribed, not yet initialized------> initializing
    initializing --InitializeShareGroupState answered---------------> initialized
    initializing --it failed-----------------------------------------> (not known; the
                                                                       next heartbeat retries)
    initializing, older than the retry interval --next heartbeat----> initializing again
    initialized / initializing --DeleteGroups, delete offsets-------> deleting
    deleting --DeleteShareGroupState answered-------------------------> (not known)
    any --the topic was deleted----------------------------------------> (not known)
    deleting --the topic is initialized again (a new member)---------> initializing

Values are immutable in use: every function returns a new ``StatePartitionMetadata``.
Stateless functions, thread-safe.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["InitEntry", "StatePartitionMetadata", "to_initialize", "with_initializing",
           "with_initialized", "without_initializing", "with_deleting", "without_deleting",
           "without_topics", "assignment_pending"]

TopicPartitions = dict[uuid.UUID, set[int]]


@dataclass(frozen=True)
class InitEntry:
    """One topic's partitions in the initializing or initialized set (Kafka's
    ``InitMapValue``); ``timestamp_ms`` is when the topic was last added (wall clock)."""

    name: str
    partitions: frozenset[int]
    timestamp_ms: int


@dataclass(frozen=True)
class StatePartitionMetadata:
    initializing: Mapping[uuid.UUID, InitEntry] = field(default_factory=dict)
    initialized: Mapping[uuid.UUID, InitEntry] = field(default_factory=dict)
    deleting: Mapping[uuid.UUID, str] = field(default_factory=dict)

    def initialized_partitions(self) -> TopicPartitions:
        return {t: set(e.partitions) for t, e in self.initialized.items() if e.partitions}

    def known_partitions(self) -> TopicPartitions:
        """Initialized and initializing partitions: those that may have state."""
        out: TopicPartitions = {}
        for entries in (self.initialized, self.initializing):
            for t, e in entries.items():
                out.setdefault(t, set()).update(e.partitions)
        return out

    def topic_names(self) -> dict[uuid.UUID, str]:
        names = dict(self.deleting)
        names.update({t: e.name for t, e in self.initializing.items()})
        names.update({t: e.name for t, e in self.initialized.items()})
        return names

    def is_empty(self) -> bool:
        return not (self.initializing or self.initialized or self.deleting)


EMPTY = StatePartitionMetadata()


def _combine(base: Mapping[uuid.UUID, InitEntry], more: Mapping[uuid.UUID, InitEntry]) -> dict[uuid.UUID, InitEntry]:
    """Kafka's ``combineInitMaps``: partitions joined per topic; the name and timestamp of
    ``more`` win where it has the topic."""
    out = dict(base)
    for t, e in more.items():
        old = out.get(t)
        parts = e.partitions if old is None else old.partitions | e.partitions
        out[t] = InitEntry(e.name, frozenset(parts), e.timestamp_ms)
    return out


def _minus(entries: Mapping[uuid.UUID, InitEntry], parts: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, InitEntry]:
    out: dict[uuid.UUID, InitEntry] = {}
    for t, e in entries.items():
        left = e.partitions - frozenset(parts.get(t, ()))
        if left:
            out[t] = InitEntry(e.name, left, e.timestamp_ms)
    return out


def to_initialize(meta: StatePartitionMetadata, subscribed: Mapping[str, tuple[uuid.UUID, int]],
                  now_ms: int, retry_ms: int) -> dict[uuid.UUID, InitEntry]:
    """Kafka's ``subscribedTopicsChangeMap``: for each subscribed topic (name -> (id,
    partitions)), its partitions neither initialized nor initializing since less than
    ``retry_ms`` (an older initialization is taken as lost and done again)."""
    fresh = {t: e for t, e in meta.initializing.items() if now_ms - e.timestamp_ms < retry_ms}
    done = _combine(meta.initialized, fresh)
    out: dict[uuid.UUID, InitEntry] = {}
    for name, (tid, n) in subscribed.items():
        have = done[tid].partitions if tid in done else frozenset()
        missing = frozenset(range(n)) - have
        if missing:
            out[tid] = InitEntry(name, missing, now_ms)
    return out


def with_initializing(meta: StatePartitionMetadata, change: Mapping[uuid.UUID, InitEntry]) -> StatePartitionMetadata:
    """Kafka's ``addInitializingTopicsRecords``: ``change`` joins the initializing set; a
    topic being initialized again leaves the deleting set."""
    deleting = {t: n for t, n in meta.deleting.items() if t not in change}
    return StatePartitionMetadata(_combine(meta.initializing, change), dict(meta.initialized), deleting)


def with_initialized(meta: StatePartitionMetadata, parts: Mapping[uuid.UUID, Iterable[int]],
                     names: Mapping[uuid.UUID, str], now_ms: int) -> StatePartitionMetadata:
    """Kafka's ``initializeShareGroupState``: ``parts`` (whose state now exists) move from
    initializing to initialized (``names`` names a topic not in the initializing set)."""
    added: dict[uuid.UUID, InitEntry] = {}
    for t, ps in parts.items():
        ps = frozenset(ps)
        if not ps:
            continue
        e = meta.initializing.get(t)
        name = e.name if e is not None else names.get(t, meta.topic_names().get(t, ""))
        added[t] = InitEntry(name, ps, e.timestamp_ms if e is not None else now_ms)
    deleting = {t: n for t, n in meta.deleting.items() if t not in added}
    return StatePartitionMetadata(_minus(meta.initializing, parts), _combine(meta.initialized, added), deleting)


def without_initializing(meta: StatePartitionMetadata, parts: Mapping[uuid.UUID, Iterable[int]]) -> StatePartitionMetadata:
    """Kafka's ``uninitializeShareGroupState``: an initialization failed; ``parts`` leave
    the initializing set (the next heartbeat tries them again)."""
    return StatePartitionMetadata(_minus(meta.initializing, parts), dict(meta.initialized), dict(meta.deleting))


def with_deleting(meta: StatePartitionMetadata, topics: Mapping[uuid.UUID, str]) -> StatePartitionMetadata:
    """``topics`` (id -> name) leave the initializing and initialized sets for the deleting
    set: their state is being deleted (DeleteGroups, DeleteShareGroupOffsets)."""
    keep = lambda entries: {t: e for t, e in entries.items() if t not in topics}  # noqa: E731
    deleting = dict(meta.deleting)
    deleting.update(topics)
    return StatePartitionMetadata(keep(meta.initializing), keep(meta.initialized), deleting)


def without_deleting(meta: StatePartitionMetadata, topics: Iterable[uuid.UUID]) -> StatePartitionMetadata:
    """The state of ``topics`` is deleted: they leave the deleting set."""
    gone = set(topics)
    return StatePartitionMetadata(dict(meta.initializing), dict(meta.initialized),
                                  {t: n for t, n in meta.deleting.items() if t not in gone})


def without_topics(meta: StatePartitionMetadata, topics: Iterable[uuid.UUID]) -> StatePartitionMetadata:
    """Deleted topics leave every set."""
    gone = set(topics)
    keep = lambda entries: {t: e for t, e in entries.items() if t not in gone}  # noqa: E731
    return StatePartitionMetadata(keep(meta.initializing), keep(meta.initialized), keep(meta.deleting))


def assignment_pending(meta: StatePartitionMetadata, subscribed: Mapping[str, tuple[uuid.UUID, int]],
                       target: Mapping[str, Mapping[uuid.UUID, set[int]]], has_members: bool) -> bool:
    """Kafka's ``initializedAssignmentPending``: whether an initialized topic the group
    subscribes to (name -> (id, partitions) from the metadata) is not assigned exactly as
    initialized, among its existing partitions (then the assignment is computed again, with
    the group epoch bumped). A recorded topic id that is no longer the name's (a topic
    deleted and re-created) does not count."""
    if not has_members or not meta.initialized or not subscribed:
        return False
    assigned: TopicPartitions = {}
    for parts in target.values():
        for t, ps in parts.items():
            assigned.setdefault(t, set()).update(ps)
    for t, e in meta.initialized.items():
        current = subscribed.get(e.name)
        if current is None or current[0] != t:
            continue
        if assigned.get(t, set()) != set(e.partitions) & set(range(current[1])):
            return True
    return False
