"""The seeded fault harness in the normal test run (docs/replication.md, "Fault harness").

CI runs a short seed set: seeds 1 and 2 of the plain workload (a minute or two each), seed 1
of the compacted workload and seed 1 of the transactional one. Each seed injects one
shuffled round of every fault kind (SIGKILL of a leader, of the controller, of a follower;
SIGSTOP past the session timeout; a ZooKeeper restart; a rolling restart with controlled
shutdown; for transactions also SIGKILL of the transaction coordinator) under two
producers and two consumers, then checks every acknowledged record (per key on the
compacted topic, per transaction with read_committed) and every replica.
``FAULT_HARNESS_SEEDS`` (``1-5``, ``3,7``), ``FAULT_HARNESS_WORKLOAD_SEEDS`` (seeds of the
compact and txn workloads, default ``1``) and ``FAULT_HARNESS_FAULTS`` (faults per seed)
widen it; ``python -m tests.cluster.run --seeds 1-20 --duration 120`` is the long run.
"""

from __future__ import annotations

import os

import pytest
from _harness.zookeeper import missing_reason

from .faults import WORKLOADS, run_seed
from .run import parse_seeds

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SEEDS = parse_seeds(os.environ.get("FAULT_HARNESS_SEEDS", "1,2"))
WORKLOAD_SEEDS = parse_seeds(os.environ.get("FAULT_HARNESS_WORKLOAD_SEEDS", "1"))
FAULT_COUNT = os.environ.get("FAULT_HARNESS_FAULTS")


def _run(tmp_path, seed: int, workload: str):  # type: ignore[no-untyped-def]
    if missing_reason():
        pytest.skip(missing_reason() or "")
    kinds = WORKLOADS[workload].faults
    count = int(FAULT_COUNT) if FAULT_COUNT else len(kinds)
    figures = run_seed(seed, 0.0, tmp_path, min_faults=count, workload=workload)
    print(figures.summary())
    assert len(figures.faults) == count
    if count >= len(kinds):  # a full round: every kind once
        assert {f.split(" ", 1)[0] for f in figures.faults} == set(kinds)
    return figures


@pytest.mark.parametrize("seed", SEEDS)
def test_no_acknowledged_record_lost_under_seeded_faults(tmp_path, seed: int) -> None:
    figures = _run(tmp_path, seed, "plain")
    assert figures.acknowledged > 1000, figures.summary()
    assert figures.lost == 0 and figures.diverged_replicas == 0, figures.summary()
    assert figures.ok, figures.summary()


@pytest.mark.parametrize("seed", WORKLOAD_SEEDS)
def test_compacted_topic_keeps_every_latest_value_under_seeded_faults(tmp_path,
                                                                      seed: int) -> None:
    figures = _run(tmp_path, seed, "compact")
    assert figures.acknowledged > 1000 and figures.tombstones > 0, figures.summary()
    # The cleaner ran during the faults: acknowledged records were superseded and removed.
    assert figures.cleaned > 0, figures.summary()
    assert figures.lost == 0 and figures.diverged_replicas == 0, figures.summary()
    assert figures.ok, figures.summary()


@pytest.mark.parametrize("seed", WORKLOAD_SEEDS)
def test_transactions_all_or_nothing_under_seeded_faults(tmp_path, seed: int) -> None:
    figures = _run(tmp_path, seed, "txn")
    assert figures.transactions.get("committed", 0) > 100, figures.summary()
    assert figures.transactions.get("aborted", 0) > 10, figures.summary()
    assert figures.lost == 0 and figures.aborted_visible == 0, figures.summary()
    assert figures.partial_transactions == 0 and figures.duplicates == 0, figures.summary()
    assert figures.ok, figures.summary()
