# The consumer's per-record path, compiled: the twin of ``records.py``'s ``ConsumerRecord``
# (same fields, behaviour and equality) and of ``aio/_fetcher.py``'s ``_decode`` loop for a
# consumer without deserializers, reading logcore's ``Record`` fields directly instead of
# through attribute lookups. The Python code stays the reference (LOGCORE_PUREPYTHON=1 runs
# it alone; the unit tests compare the two).
"""The consumer's per-record path in C (see ``pylog.client.records``)."""

from logcore._record cimport Record


cdef class ConsumerRecord:
    """One consumed record (``pylog.client.records`` has the documented twin).

    Attributes:
        topic, partition, offset: where it was read.
        timestamp: milliseconds since the epoch; ``timestamp_type`` 0 create time, 1 log
            append time.
        key, value: bytes or None (or what the deserializers made of them).
        headers: list of (str, bytes | None) (made on first access for a record without
            headers).
        leader_epoch: the batch's partition leader epoch (-1 if unknown).
    """

    cdef public object topic
    cdef public object partition
    cdef public object offset
    cdef public object timestamp
    cdef public object timestamp_type
    cdef public object key
    cdef public object value
    cdef object _headers
    cdef public object leader_epoch

    _FIELDS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
               "headers", "leader_epoch")

    def __init__(self, topic, partition, offset, timestamp, timestamp_type, key, value,
                 headers, leader_epoch=-1):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self._headers = headers
        self.leader_epoch = leader_epoch

    @property
    def headers(self):
        if self._headers is None:
            self._headers = []
        return self._headers

    @headers.setter
    def headers(self, value):
        self._headers = value

    def __repr__(self):
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")

    def __eq__(self, other):
        if not isinstance(other, ConsumerRecord):
            return NotImplemented
        return all(getattr(self, a) == getattr(other, a) for a in self._FIELDS)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None

    def __reduce__(self):
        return (ConsumerRecord, (self.topic, self.partition, self.offset, self.timestamp,
                                 self.timestamp_type, self.key, self.value, self._headers,
                                 self.leader_epoch))


def decode_records(list batches, str topic, object partition, object position, list out):
    """Append to ``out`` a ``ConsumerRecord`` for every record at or after ``position`` of
    ``batches`` ((RecordBatch, start, end) spans, as the fetcher selects them); keys and
    values as they are (no deserializers)."""
    cdef Record r
    cdef ConsumerRecord cr
    cdef object ts_type, epoch
    for span in batches:
        batch = span[0]
        ts_type = 1 if batch.timestamp_type == "log_append" else 0
        epoch = batch.partition_leader_epoch
        for item in batch:
            r = <Record>item
            if r.offset < position:
                continue
            cr = ConsumerRecord.__new__(ConsumerRecord)
            cr.topic = topic
            cr.partition = partition
            cr.offset = r.offset
            cr.timestamp = r.timestamp
            cr.timestamp_type = ts_type
            cr.key = r.key
            cr.value = r.value
            # A Record owns its headers list (and is dropped here): no copy; no empty list
            # for a record without headers (made on first access of ``headers``).
            cr._headers = r._headers if r._headers else None
            cr.leader_epoch = epoch
            out.append(cr)
