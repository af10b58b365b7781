"""The seeded fault harness of a three-broker cluster (docs/replication.md, "Fault harness").

A package so that ``python -m tests.cluster.run`` works from the repository root; it puts
``tests/`` on ``sys.path`` for ``_harness`` as pytest's rootdir insertion does.
"""

from __future__ import annotations

import pathlib
import sys

_TESTS = str(pathlib.Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
