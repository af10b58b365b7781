"""``AclService`` (``broker.acls``): the broker's ACLs kept, changed and reloaded; the
authorizer (``broker.authorizer``) decides from the snapshot this service installs.

Start: the file store (single node) or ZooKeeper (cluster mode, after the session is up)
is read into a snapshot. CreateAcls / DeleteAcls change the store first, then install a
new snapshot. In cluster mode a watch on both ACL change paths wakes a task on the loop
that re-reads the resources the new notices name and installs the result.

Event-loop affinity: the broker's loop; blocking work goes to the executor or the
ZooKeeper thread, and only the loop installs snapshots.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from pylog import errors
from pylog.config.values import ConfigError
from pylog.security.authz.authorizer import AUTHORIZER_CLASSES, AclAuthorizer, AclSnapshot
from pylog.security.authz.bindings import AclBinding, AclBindingFilter, validate_binding
from pylog.security.authz.store import (
    EXTENDED_CHANGES,
    LITERAL_CHANGES,
    FileAclStore,
    ZkAclStore,
    run_blocking,
)

log = logging.getLogger("pylog.security.authz")


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:CN=admin;User:bob``)."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


def create_authorizer(config: Any) -> AclAuthorizer | None:
    """The authorizer ``authorizer.class.name`` names, or None when it is empty.

    Raises:
        ConfigError: a class pylog does not know.
    """
    name = (config["authorizer.class.name"] or "").strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASSES:
        raise ConfigError("authorizer.class.name",
                          f"{name!r} is not an authorizer pylog has; use one of "
                          + ", ".join(sorted(AUTHORIZER_CLASSES)))
    return AclAuthorizer(parse_super_users(config["super.users"]),
                         config["allow.everyone.if.no.acl.found"])


class AclService:
    """The ACL store and the ACL admin APIs (see the module docstring)."""

    def __init__(self, broker: Any, authorizer: AclAuthorizer) -> None:
        self.broker = broker
        self.authorizer = authorizer
        self._lock = asyncio.Lock()  # one change at a time on this broker
        self._zk: ZkAclStore | None = None
        self._file: FileAclStore | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._last_seq: dict[str, int] = {}
        self.reloads = 0  # snapshots installed from change notices (tests, logs)

    # -- start and stop ---------------------------------------------------------------------

    async def start_single_node(self) -> None:
        self._file = FileAclStore(self.broker.log_manager.log_dir)
        bindings = await run_blocking(self.broker.executor, self._file.load)
        self.authorizer.install(AclSnapshot(bindings))
        log.info("authorizer on: %d ACLs from %s; super users: %s", len(bindings),
                 self._file.path, ", ".join(sorted(self.authorizer.super_users)) or "none")

    async def start_cluster(self) -> None:
        """After the ZooKeeper session is up: every ACL, then watch the change paths."""
        cluster = self.broker.cluster
        store = self._zk = ZkAclStore(cluster.store)
        await cluster.zk(store.ensure_paths)
        self._last_seq = await cluster.zk(store.latest_seqs)
        bindings = await cluster.zk(store.load)
        self.authorizer.install(AclSnapshot(bindings))
        loop = asyncio.get_running_loop()

        def on_children(_children: list[str]) -> Any:
            if self._stopped:
                return False
            loop.call_soon_threadsafe(self._wake.set)
            return None

        client = cluster.store.client
        await cluster.zk(lambda: [client.ChildrenWatch(LITERAL_CHANGES, on_children),
                                  client.ChildrenWatch(EXTENDED_CHANGES, on_children)])
        self._task = asyncio.ensure_future(self._run())
        log.info("authorizer on: %d ACLs from ZooKeeper; super users: %s", len(bindings),
                 ", ".join(sorted(self.authorizer.super_users)) or "none")

    async def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while not self._stopped:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.process_changes()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the next notice must still be processed
                log.exception("processing ACL change notices failed")

    async def process_changes(self) -> None:
        """Re-read the resources named by new notices; install the new snapshot."""
        store, cluster = self._zk, self.broker.cluster
        assert store is not None
        last = dict(self._last_seq)
        now = self.broker.clock.time_ms()

        def read() -> tuple[set[Any], dict[Any, set[Any]]]:
            changed = store.changes(last, now)
            return changed, {p: store.read_resource(p)[0] for p in changed}
        # Under the change lock: a read that raced this broker's own write cannot install
        # the older copy after the newer one.
        async with self._lock:
            changed, entries = await cluster.zk(read)
            self._last_seq = last
            if not changed:
                return
            self._replace(changed, entries)
        self.reloads += 1
        log.info("ACLs of %d resources reloaded from ZooKeeper (%s); %d ACLs in all",
                 len(changed), ", ".join(sorted(str(p) for p in changed)),
                 len(self.authorizer.snapshot.bindings))

    def _replace(self, patterns: Iterable[Any], entries: dict[Any, set[Any]]) -> None:
        patterns = set(patterns)
        kept = {b for b in self.authorizer.snapshot.bindings if b.pattern not in patterns}
        for p in patterns:
            kept.update(AclBinding(p, e) for e in entries.get(p, ()))
        self.authorizer.install(AclSnapshot(kept))

    # -- the admin APIs ---------------------------------------------------------------------

    async def create(self, bindings: Sequence[AclBinding]) -> list[tuple[int, str | None]]:
        """CreateAcls: (error code, message) per binding, in order."""
        results: list[tuple[int, str | None]] = []
        valid: list[AclBinding] = []
        for b in bindings:
            why = validate_binding(b)
            if why is None:
                valid.append(b)
                results.append((0, None))
            else:
                results.append((errors.InvalidRequestError.code, why))
        if valid:
            async with self._lock:
                await self._change(add=valid, remove=())
            for b in valid:
                log.info("added ACL %s on %s", b.entry, b.pattern)
        return results

    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        """DescribeAcls: every binding the filter matches, sorted."""
        return sorted(b for b in self.authorizer.snapshot.bindings if flt.matches(b))

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """DeleteAcls: per filter, the bindings it matched (and which are now gone)."""
        async with self._lock:
            current = self.authorizer.snapshot.bindings
            matched = [sorted(b for b in current if f.matches(b)) for f in filters]
            gone = {b for m in matched for b in m}
            if gone:
                await self._change(add=(), remove=gone)
                for b in sorted(gone):
                    log.info("removed ACL %s on %s", b.entry, b.pattern)
        return matched

    async def _change(self, add: Iterable[AclBinding], remove: Iterable[AclBinding]) -> None:
        add, remove = set(add), set(remove)
        if self._zk is None:
            assert self._file is not None
            current = set(self.authorizer.snapshot.bindings)
            new = await run_blocking(self.broker.executor, self._file.change, current, add, remove)
            self.authorizer.install(AclSnapshot(new))
            return
        store = self._zk
        by_pattern: dict[Any, tuple[set[Any], set[Any]]] = {}
        for b in add:
            by_pattern.setdefault(b.pattern, (set(), set()))[0].add(b.entry)
        for b in remove:
            by_pattern.setdefault(b.pattern, (set(), set()))[1].add(b.entry)

        def write() -> dict[Any, set[Any]]:
            out = {}
            for p, (a, r) in by_pattern.items():
                def change(cur: set[Any], a: set[Any] = a, r: set[Any] = r) -> set[Any]:
                    return (cur | a) - r
                out[p] = store.update(p, change)
            return out
        written = await self.broker.cluster.zk(write)
        self._replace(written, written)  # now, not when this broker's own notice arrives
