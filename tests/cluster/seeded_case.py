"""What the seeded fault harness's test files share (test_fault_harness.py: the plain
workload; test_fault_harness_workloads.py: the compacted and transactional ones, in their own
file so that pytest-xdist's loadfile runs the two halves on different workers)."""

from __future__ import annotations

import os

import pytest
from _harness.zookeeper import missing_reason

from .faults import WORKLOADS, run_seed
from .run import parse_seeds

SEEDS = parse_seeds(os.environ.get("FAULT_HARNESS_SEEDS", "1,2"))
WORKLOAD_SEEDS = parse_seeds(os.environ.get("FAULT_HARNESS_WORKLOAD_SEEDS", "1"))
FAULT_COUNT = os.environ.get("FAULT_HARNESS_FAULTS")


def run_case(tmp_path, seed: int, workload: str):  # type: ignore[no-untyped-def]
    """One seed of ``workload`` with a full round of its fault kinds (or FAULT_COUNT)."""
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
