"""The seeded fault harness in the normal test run (docs/replication.md, "Fault harness").

CI runs a short seed set: seeds 1 and 2 of the plain workload (a minute or two each), seed 1
of the compacted workload and seed 1 of the transactional one (those two in
test_fault_harness_workloads.py, so that another xdist worker runs them). Each seed injects one
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

import pytest

from .seeded_case import SEEDS, run_case

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.mark.parametrize("seed", SEEDS)
def test_no_acknowledged_record_lost_under_seeded_faults(tmp_path, seed: int) -> None:
    figures = run_case(tmp_path, seed, "plain")
    assert figures.acknowledged > 1000, figures.summary()
    assert figures.lost == 0 and figures.diverged_replicas == 0, figures.summary()
    assert figures.ok, figures.summary()
