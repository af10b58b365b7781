"""The client's per-record paths: compiled or their pure-Python twins.

``send()`` of the blocking producer, the accumulator it appends to, the future it hands
out and the keys' partitions of ``send_many()`` (``_csend.pyx``), and the consumer's record decoding with ``ConsumerRecord``
(``_crecords.pyx``, chosen in ``records.py``) have two implementations with the same
behaviour: the compiled ones and the Python code of ``aio/_accumulator.py``, ``_future.py``,
``records.py`` and ``aio/_fetcher.py``, which is the reference and serves alone under
``LOGCORE_PUREPYTHON=1`` (as logcore's ``_ref`` twins) or when the extensions are not built.
``IMPLEMENTATION`` says which one is loaded: ``"c"`` or ``"python"``.
"""

from __future__ import annotations

from typing import Any

import logcore
from pylog.client._future import RecordFuture as PyRecordFuture
from pylog.client.aio._accumulator import RecordAccumulator as PyRecordAccumulator
from pylog.client.partitioner import partitions_for_keys as py_partitions_for_keys
from pylog.client.records import ConsumerRecord, PyConsumerRecord

__all__ = ["IMPLEMENTATION", "FastSend", "RecordAccumulator", "RecordFuture", "decode_records",
           "partitions_for_keys"]

FastSend: Any = None
decode_records: Any = None
RecordAccumulator: Any = PyRecordAccumulator
RecordFuture: Any = PyRecordFuture
partitions_for_keys: Any = py_partitions_for_keys
IMPLEMENTATION = "python"

if logcore.IMPLEMENTATION == "c":
    try:
        from pylog.client import _csend
    except ImportError:  # a source tree whose extensions were not built: the twin serves
        pass
    else:
        FastSend, RecordAccumulator, RecordFuture = (_csend.FastSend, _csend.RecordAccumulator,
                                                     _csend.RecordFuture)
        partitions_for_keys = _csend.partitions_for_keys
        IMPLEMENTATION = "c"
if ConsumerRecord is not PyConsumerRecord:
    from pylog.client._crecords import decode_records  # noqa: F811
