"""The seeded fault harness in the normal test run (docs/replication.md, "Fault harness").

CI runs a short seed set (1 and 2, a minute or two each): each seed injects one shuffled
round of every fault kind (SIGKILL of a leader, of the controller, of a follower; SIGSTOP
past the session timeout; a ZooKeeper restart; a rolling restart with controlled shutdown)
under two idempotent acks=all producers and two consumers, then checks every acknowledged
record and every replica's bytes.
``FAULT_HARNESS_SEEDS`` (``1-5``, ``3,7``) and ``FAULT_HARNESS_FAULTS`` (faults per seed)
widen it; ``python -m tests.cluster.run --seeds 1-20 --duration 120`` is the long run.
"""

from __future__ import annotations

import os

import pytest
from _harness.zookeeper import missing_reason

from .faults import FAULTS, run_seed
from .run import parse_seeds

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SEEDS = parse_seeds(os.environ.get("FAULT_HARNESS_SEEDS", "1,2"))
FAULT_COUNT = int(os.environ.get("FAULT_HARNESS_FAULTS", str(len(FAULTS))))


@pytest.mark.parametrize("seed", SEEDS)
def test_no_acknowledged_record_lost_under_seeded_faults(tmp_path, seed: int) -> None:
    if missing_reason():
        pytest.skip(missing_reason())
    figures = run_seed(seed, 0.0, tmp_path, min_faults=FAULT_COUNT)
    print(figures.summary())
    assert len(figures.faults) == FAULT_COUNT
    if FAULT_COUNT >= len(FAULTS):  # a full round: every kind once
        assert {f.split(" ", 1)[0] for f in figures.faults} == set(FAULTS)
    assert figures.acknowledged > 1000, figures.summary()
    assert figures.lost == 0 and figures.diverged_replicas == 0, figures.summary()
    assert figures.ok, figures.summary()
