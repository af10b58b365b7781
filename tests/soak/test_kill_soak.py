"""kill -9 soak: producers and consumers run while the broker is SIGKILLed and restarted,
over and over; then every acknowledged record must be in the log exactly once, in order, at
the offset it was acknowledged with, byte for byte (see ``_soak.Soak.audit``).

Idempotent producers with ``max.in.flight.requests.per.connection=1``: after a restart the
broker recognises each producer's last batch as a duplicate (the producer-state snapshot
keeps one batch per producer, as Kafka's does, and the batches after the snapshot are replayed
from the log), and with one request in flight the batch a producer retries after a kill is
always its last one.
"""

from __future__ import annotations

import os
import pathlib
import random
import time

from pylog.config import BROKER_CONFIG_DEFS

from ._soak import Settings, Soak, report


def soak_settings(seed: int, seconds: float, kills: int) -> Settings:
    return Settings(
        seed=seed, seconds=seconds, min_kills=kills,
        # Small segments: rolls (and the producer-state snapshots taken at a roll) happen
        # all the time, so kills land before, during and after them.
        topic_config={"segment.bytes": str(256 * 1024)},
        # Checkpoints often, so that kills also land around them (where this broker has
        # the periodic checkpoints at all: they are set only when the config is known).
        broker_config={k: v for k, v in {
            "log.flush.offset.checkpoint.interval.ms": "500",
            "log.flush.start.offset.checkpoint.interval.ms": "500",
            "log.flush.scheduler.interval.ms": "300",
        }.items() if k in BROKER_CONFIG_DEFS},
    )


def test_kill9_soak_loses_nothing(tmp_path: pathlib.Path, soak_budget: tuple[float, int],
                                  soak_seed: int, soak_figures: list[str]) -> None:
    seconds, min_kills = soak_budget
    settings = soak_settings(soak_seed, seconds, min_kills)
    settings.max_in_flight = int(os.environ.get("SOAK_MAX_IN_FLIGHT", "1"))
    again = (f"repeat with: make soak SOAK_SEED={soak_seed} SOAK_SECONDS={seconds:g} "
             f"SOAK_KILLS={min_kills}")
    if settings.max_in_flight != 1:
        again = f"SOAK_MAX_IN_FLIGHT={settings.max_in_flight} {again}"
    print(f"soak seed {soak_seed} ({again})")
    rng = random.Random(soak_seed)
    soak = Soak(tmp_path, settings)
    started = time.monotonic()
    try:
        soak.start()
        soak.wait_all_producing()  # every producer connected once before the first kill
        while soak.kills < min_kills or time.monotonic() - started < seconds:
            # A random moment: right after the restart (clients reconnecting, retrying),
            # or well into steady producing.
            time.sleep(rng.choice((rng.uniform(0.05, 0.4), rng.uniform(0.4, 2.5))))
            dead = soak.clients_alive()
            assert not dead, f"client processes died: {dead}; {again}"
            # One restart in five is killed again while the broker loads its logs.
            soak.kill_and_restart(down_s=rng.uniform(0.0, 0.6), kill_starting_after_s=(
                rng.uniform(0.05, 0.5) if rng.random() < 0.2 else None))
        time.sleep(1.0)
        soak.stop_clients()
        first = soak.read_all()
        fig, problems = soak.audit(first)
        elapsed = time.monotonic() - started
        soak_figures.append(report("kill -9 soak, after the last kill", fig, elapsed, settings))
        print(soak_figures[-1])
        assert not problems, "\n".join([again, *problems[:40]])
        # Recovery is idempotent: a clean restart changes nothing.
        rc = soak.broker.stop()
        assert rc == 0, f"clean stop exited {rc}; {again}"
        soak.start_broker()
        second = soak.read_all()
        assert second == first, f"the log changed across a clean restart; {again}"
        fig, problems = soak.audit(second)
        soak_figures.append(report("kill -9 soak, after a clean restart", fig,
                                   time.monotonic() - started, settings))
        print(soak_figures[-1])
        assert not problems, "\n".join([again, *problems[:40]])
        assert fig.lost == 0 and fig.duplicates == 0
        assert fig.kills >= min_kills
        assert fig.acknowledged > 0.5 * fig.produced, f"most records failed; {again}"
    except BaseException:
        soak_figures.append(f"kill -9 soak FAILED: {again}; files in {tmp_path}")
        print(soak_figures[-1])
        raise
    finally:
        soak.close()
