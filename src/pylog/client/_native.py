"""The producer's per-record path: compiled (``_csend.pyx``) or its pure-Python twin.

``send()`` of the blocking producer, the accumulator it appends to and the future it hands
out have two implementations with the same behaviour: ``pylog.client._csend`` (Cython) and
the Python classes of ``aio/_accumulator.py`` and ``_future.py``, which are the reference
and serve alone under ``LOGCORE_PUREPYTHON=1`` (as logcore's ``_ref`` twins) or when the
extension is not built. ``IMPLEMENTATION`` says which one is loaded: ``"c"`` or
``"python"``.
"""

from __future__ import annotations

from typing import Any

import logcore
from pylog.client._future import RecordFuture as PyRecordFuture
from pylog.client.aio._accumulator import RecordAccumulator as PyRecordAccumulator

__all__ = ["IMPLEMENTATION", "FastSend", "RecordAccumulator", "RecordFuture"]

FastSend: Any = None
RecordAccumulator: Any = PyRecordAccumulator
RecordFuture: Any = PyRecordFuture
IMPLEMENTATION = "python"

if logcore.IMPLEMENTATION == "c":
    try:
        from pylog.client import _csend
    except ImportError:  # a source tree whose extensions were not built: the twin serves
        pass
    else:
        FastSend, RecordAccumulator, RecordFuture = (_csend.FastSend, _csend.RecordAccumulator,
                                                     _csend.RecordFuture)
        IMPLEMENTATION = "c"
