"""The wire fuzzer in CI: a few thousand mutants of recorded client frames (fixed seed)
against a real broker subprocess, then the inter-broker APIs, which a single-node broker
must refuse cleanly. ``make fuzz`` runs the same driver standalone for longer.

Failures (``tests/fuzz/driver.py``): a complete frame neither answered nor closed within
5 s, an answer with another correlation id, a valid frame not answered, the broker dead,
its peak RSS over the bound, a Python traceback in its log, or a normal client unable to
produce and consume afterwards. Failing mutants are saved under the test's tmp_path
(``python -m fuzz --replay FILE``).
"""

from __future__ import annotations

import pathlib
import struct
import time

import pytest
from integration.conftest import BrokerProcess  # type: ignore[import-not-found]

from pylog.protocol.connection import response_class

from . import driver, mutators

pytestmark = pytest.mark.integration

SEED = 18  # issue 18
SEQUENTIAL = 1500
PARALLEL = 1500
INTER_BROKER = 400


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("fuzz") / "data"
    data.mkdir()
    b = BrokerProcess(data, {"auto.create.topics.enable": "true"}).start()
    driver.prepare(b.bootstrap)
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log tail:\n{b.read_log()[-5000:]}"


def _check(report: driver.Report, broker: BrokerProcess) -> None:
    print(report.summary())
    assert report.ok, report.summary() + f"\nbroker log: {broker.log_path}"


def test_wire_fuzz(fuzz_broker: BrokerProcess, tmp_path: pathlib.Path) -> None:
    health = driver.Health(fuzz_broker.proc.pid, fuzz_broker.log_path)
    address = (fuzz_broker.host, fuzz_broker.port)
    t0 = time.monotonic()
    report = driver.run(address, health, SEED, SEQUENTIAL, out_dir=tmp_path)
    report = driver.run(
        address, health, SEED + 1, PARALLEL, parallel=8, out_dir=tmp_path, report=report
    )
    _check(report, fuzz_broker)
    # The corpus is real: every kind ran, most mutants got an answer or a close, and the
    # Produce mutants reached the batch checks (answered, not closed).
    assert {k for k, _ in report.by_kind} == set(mutators.KINDS)
    assert report.by_kind["batch", "answered"] > 100
    assert time.monotonic() - t0 < 120
    driver.client_check(fuzz_broker.bootstrap, "after-fuzz")
    assert health.problems() == []


def test_inter_broker_apis_are_refused(fuzz_broker: BrokerProcess, tmp_path: pathlib.Path) -> None:
    """LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, WriteTxnMarkers from
    a client of a single-node broker: every well-formed request gets an error answer (or a
    close, for versions not served), then a few hundred mutants of them change nothing."""
    health = driver.Health(fuzz_broker.proc.pid, fuzz_broker.log_path)
    address = (fuzz_broker.host, fuzz_broker.port)
    codes: dict[int, set[int]] = {}
    for frame in mutators.inter_broker_frames():
        key, version = struct.unpack_from(">hh", frame, 4)
        outcome = driver.send_one(address, frame, driver.PREFIX_FRAMES[1])
        assert outcome.status in ("answered", "closed"), (key, version, outcome)
        if outcome.status == "answered":
            codes.setdefault(key, set()).add(_top_error(key, version, frame, address))
    # Every answer refuses: no inter-broker request is applied on a single-node broker.
    assert all(0 not in c for c in codes.values()), codes
    assert set(codes) >= {4, 5, 7, 27}, codes
    report = driver.run(
        address, health, SEED, INTER_BROKER, parallel=4, kinds=["inter-broker"], out_dir=tmp_path
    )
    _check(report, fuzz_broker)
    driver.client_check(fuzz_broker.bootstrap, "after-inter-broker-fuzz")


def _top_error(key: int, version: int, frame: bytes, address: tuple[str, int]) -> int:
    """The error code of the broker's answer to ``frame`` (top level, else the first
    nested one)."""
    import socket

    with socket.create_connection(address, timeout=5) as s:
        s.sendall(frame)
        answer = driver._read_frame(s, time.monotonic() + 5)
    assert answer is not None
    cls = response_class(key)
    off = 8 + (1 if cls.is_flexible(version) else 0)
    body = cls.decode(answer[off:], version)
    code = getattr(body, "error_code", None)
    if code is None:  # WriteTxnMarkers: per marker, per topic, per partition
        code = body.markers[0].topics[0].partitions[0].error_code if body.markers else -999
    return code
