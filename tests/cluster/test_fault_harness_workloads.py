"""The seeded fault harness's compacted and transactional workloads (seed 1 of each in the
normal run; ``FAULT_HARNESS_WORKLOAD_SEEDS`` widens it). The plain workload and what a seed
does are in test_fault_harness.py; the two files run on different pytest-xdist workers."""

from __future__ import annotations

import pytest

from .seeded_case import WORKLOAD_SEEDS, run_case

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.mark.parametrize("seed", WORKLOAD_SEEDS)
def test_compacted_topic_keeps_every_latest_value_under_seeded_faults(tmp_path,
                                                                      seed: int) -> None:
    figures = run_case(tmp_path, seed, "compact")
    assert figures.acknowledged > 1000 and figures.tombstones > 0, figures.summary()
    # The cleaner ran during the faults: acknowledged records were superseded and removed.
    assert figures.cleaned > 0, figures.summary()
    assert figures.lost == 0 and figures.diverged_replicas == 0, figures.summary()
    assert figures.ok, figures.summary()


@pytest.mark.parametrize("seed", WORKLOAD_SEEDS)
def test_transactions_all_or_nothing_under_seeded_faults(tmp_path, seed: int) -> None:
    figures = run_case(tmp_path, seed, "txn")
    assert figures.transactions.get("committed", 0) > 100, figures.summary()
    assert figures.transactions.get("aborted", 0) > 10, figures.summary()
    assert figures.lost == 0 and figures.aborted_visible == 0, figures.summary()
    assert figures.partial_transactions == 0 and figures.duplicates == 0, figures.summary()
    assert figures.ok, figures.summary()
