"""``make fuzz``: the wire fuzzer standalone (``PYTHONPATH=tests python -m fuzz --help``).

Starts a ``pylog broker`` subprocess (or uses ``--bootstrap``), sends ``--count`` mutants
from ``--seed`` (``tests/fuzz/driver.py`` says what counts as a failure), prints progress
lines, then counts per mutation kind and per API key (answered, closed, ...), and saves each
failing mutant under ``--out`` for ``--replay FILE``. Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time
import warnings

from . import driver, mutators


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m fuzz",
        description="Fuzz a pylog broker with mutated Kafka request frames recorded from real "
        "clients (tests/fuzz/corpus). Each mutant goes on its own connection after a valid "
        "ApiVersions or Metadata request.",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the mutants (default 0)")
    p.add_argument("--count", type=int, default=100_000, help="mutants to send (default 100000)")
    p.add_argument(
        "--parallel",
        type=int,
        default=8,
        help="connections at once (default 8; 1 sends one mutant at a time)",
    )
    p.add_argument(
        "--kinds",
        default="",
        help=f"comma-separated mutation kinds (default all: {', '.join(mutators.KINDS)})",
    )
    p.add_argument(
        "--out",
        type=pathlib.Path,
        default=pathlib.Path("fuzz-failures"),
        help="where failing mutants are saved (default ./fuzz-failures)",
    )
    p.add_argument(
        "--replay",
        type=pathlib.Path,
        nargs="+",
        metavar="FILE",
        help="send these saved mutants (one each, in order) instead of fuzzing",
    )
    p.add_argument(
        "--bootstrap",
        help="HOST:PORT of a running broker to use instead of "
        "starting one (its pid is then needed for the health checks: --pid)",
    )
    p.add_argument("--pid", type=int, help="the --bootstrap broker's process id")
    p.add_argument("--log", type=pathlib.Path, help="the --bootstrap broker's log file")
    p.add_argument("--progress", type=float, default=10.0, help="seconds between progress lines")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    warnings.simplefilter("ignore")
    sys.path.insert(0, str(driver.HERE.parent))
    from integration.conftest import BrokerProcess  # type: ignore[import-not-found]

    broker = None
    tmp = None
    if args.bootstrap:
        if args.pid is None or args.log is None:
            print("--bootstrap needs --pid and --log for the health checks", file=sys.stderr)
            return 2
        host, port = args.bootstrap.rsplit(":", 1)
        address, bootstrap = (host, int(port)), args.bootstrap
        health = driver.Health(args.pid, args.log)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="pylog-fuzz-")
        data = pathlib.Path(tmp.name) / "data"
        data.mkdir()
        broker = BrokerProcess(data, {"auto.create.topics.enable": "true"}).start()
        address, bootstrap = (broker.host, broker.port), broker.bootstrap
        health = driver.Health(broker.proc.pid, broker.log_path)
        print(f"broker {bootstrap} (pid {broker.proc.pid}, log {broker.log_path})", flush=True)
    ok = True
    try:
        driver.prepare(bootstrap)
        if args.replay:
            for path in args.replay:
                data_bytes = path.read_bytes()
                outcome = driver.send_one(address, data_bytes, driver.PREFIX_FRAMES[0])
                problems = health.problems()
                print(
                    f"{path}: api {mutators.api_key(data_bytes)}, {len(data_bytes)} bytes: "
                    f"{outcome.status} {outcome.detail} ({outcome.seconds:.2f} s)"
                )
                for p in problems:
                    print(f"  BROKER: {p}")
                ok = ok and outcome.status not in driver.FAILURES and not problems
                if not health.alive():
                    break
        else:
            kinds = [k for k in args.kinds.split(",") if k] or None
            t0 = time.monotonic()
            print(
                f"fuzzing: seed {args.seed}, {args.count} mutants, {args.parallel} at once",
                flush=True,
            )
            report = driver.run(
                address,
                health,
                args.seed,
                args.count,
                parallel=args.parallel,
                kinds=kinds,
                out_dir=args.out,
                progress=args.progress,
            )
            print(report.summary())
            ok = report.ok
            print(f"done in {time.monotonic() - t0:.1f} s")
        if health.alive():
            try:
                driver.client_check(bootstrap, f"after-fuzz-{args.seed}")
                print("a normal client still produces and consumes")
            except Exception as exc:
                print(f"FAIL: a normal client after the fuzz: {exc}")
                ok = False
        else:
            print("FAIL: the broker died; log:", broker.log_path if broker else args.log)
            ok = False
    finally:
        if broker is not None:
            rc = broker.stop()
            if rc != 0:
                print(f"FAIL: broker exit status {rc}; log tail:\n{broker.read_log()[-4000:]}")
                ok = False
        if tmp is not None and ok:
            tmp.cleanup()
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
