"""Micro benchmarks of pylog.protocol's hot paths (STYLE 8).

- Fetch response encode through ``ServerConnection.send`` (what the broker does per fetch):
  1/10/100 partitions, records as file-region placeholders (passed through) or bytes.
- Produce request decode through ``ServerConnection.next_event`` (frame, header, body):
  1/10/100 partitions with 1 KiB / 16 KiB record batches (opaque to the codec).

Inputs are built outside the timed call; outputs are consumed. Run:
``.venv/bin/python -m pytest benchmarks/micro/bench_protocol.py --benchmark-columns=min,median,ops``
"""

from __future__ import annotations

import pytest

from pylog.protocol import ClientConnection, Request, ServerConnection
from pylog.protocol.messages import FetchRequest, FetchResponse, ProduceRequest


class Region:
    """Shape of logcore's FileRegion as the codec sees it: a size, never read."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size


def fetch_response(partitions: int, records_kind: str) -> FetchResponse:
    P = FetchResponse.PartitionData
    parts = []
    for i in range(partitions):
        records = Region(64 * 1024) if records_kind == "region" else b"r" * 1024
        parts.append(P(partition_index=i, error_code=0, high_watermark=1000 + i,
                       last_stable_offset=1000 + i, log_start_offset=0,
                       aborted_transactions=None, records=records))
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="bench-topic", partitions=parts)])


@pytest.mark.benchmark(group="fetch-response-encode")
@pytest.mark.parametrize("version", [11, 12])
@pytest.mark.parametrize("records_kind", ["region", "bytes"])
@pytest.mark.parametrize("partitions", [1, 10, 100])
def test_fetch_response_encode(benchmark, partitions: int, records_kind: str, version: int) -> None:
    client = ClientConnection()
    server = ServerConnection()
    for chunk in client.send(FetchRequest(max_wait_ms=0), version):
        server.receive_data(bytes(chunk))
    request = server.next_event()
    assert isinstance(request, Request)
    body = fetch_response(partitions, records_kind)

    def run():
        return server.send(request, body)

    chunks = benchmark(run)
    assert len(chunks) >= 1


def produce_frame(partitions: int, record_size: int, version: int) -> bytes:
    T = ProduceRequest.TopicProduceData
    body = ProduceRequest(acks=1, timeout_ms=30000, topic_data=[T(name="bench-topic", partition_data=[
        T.PartitionProduceData(index=i, records=b"b" * record_size) for i in range(partitions)])])
    return b"".join(bytes(c) for c in ClientConnection().send(body, version))


@pytest.mark.benchmark(group="produce-request-decode")
@pytest.mark.parametrize("version", [7, 9])
@pytest.mark.parametrize("record_size", [1024, 16384])
@pytest.mark.parametrize("partitions", [1, 10, 100])
def test_produce_request_decode(benchmark, partitions: int, record_size: int, version: int) -> None:
    frame = produce_frame(partitions, record_size, version)
    server = ServerConnection()

    def run():
        server.receive_data(frame)
        return server.next_event()

    event = benchmark(run)
    assert isinstance(event, Request)
    assert len(event.body.topic_data[0].partition_data) == partitions


def fetch_request_frame(partitions: int, version: int) -> bytes:
    T = FetchRequest.FetchTopic
    body = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=52428800, topics=[T(topic="bench-topic", partitions=[
        T.FetchPartition(partition=i, fetch_offset=1000 * i, partition_max_bytes=1048576)
        for i in range(partitions)])])
    return b"".join(bytes(c) for c in ClientConnection().send(body, version))


@pytest.mark.benchmark(group="fetch-request-decode")
@pytest.mark.parametrize("version", [11, 12])
@pytest.mark.parametrize("partitions", [1, 10, 100])
def test_fetch_request_decode(benchmark, partitions: int, version: int) -> None:
    frame = fetch_request_frame(partitions, version)
    server = ServerConnection()

    def run():
        server.receive_data(frame)
        return server.next_event()

    event = benchmark(run)
    assert isinstance(event, Request)
    assert len(event.body.topics[0].partitions) == partitions
