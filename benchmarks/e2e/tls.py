"""TLS against PLAINTEXT in one run: kcat producing and consuming through one pylog broker
that has both listeners, alternating the two, with a throwaway CA made by ``openssl``.

TLS costs the broker the encryption of every byte in Python's ``ssl`` (OpenSSL), and a
consumer's fetch data can no longer go out with ``sendfile``: it is read (``pread``) and
encrypted (``broker/tls_io.py``). This measures what that leaves: records/s and MB/s of
kcat producers and consumers on each listener, the broker's CPU seconds per phase, and the
SSL/PLAINTEXT ratios of the medians (the goal is at least 0.6). The clients' own TLS work
(librdkafka) runs in their processes.

Example (the figure in RESULTS.md)::

    python benchmarks/e2e/tls.py --num-records 1000000 --record-size 100 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (benchmarks/e2e/harness.py: ports, CPU, kcat, data files)


def make_pki(workdir: str) -> dict[str, str]:
    """A CA and a broker certificate for 127.0.0.1 (the openssl steps of docs/security.md)."""

    def run(*cmd: str) -> None:
        subprocess.run(cmd, cwd=workdir, check=True, capture_output=True, timeout=60)

    run(
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=bench CA",
    )
    run(
        "openssl",
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "broker.key",
        "-out",
        "broker.csr",
        "-subj",
        "/CN=broker",
    )
    with open(os.path.join(workdir, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run(
        "openssl",
        "x509",
        "-req",
        "-in",
        "broker.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "broker.crt",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    )
    with open(os.path.join(workdir, "broker.pem"), "w") as out:
        for name in ("broker.key", "broker.crt"):
            with open(os.path.join(workdir, name)) as f:
                out.write(f.read())
    return {"ca": os.path.join(workdir, "ca.pem"), "broker": os.path.join(workdir, "broker.pem")}


def start_broker(workdir: str, pki: dict[str, str]) -> tuple[subprocess.Popen[bytes], int, int]:
    plain, tls = harness.free_port(), harness.free_port()
    log = open(os.path.join(workdir, "pylog.log"), "wb")  # noqa: SIM115 - the broker's lifetime
    cmd = [sys.executable, "-m", "pylog", "broker", "--log-level", "WARNING"]
    for item in (
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
        f"log.dirs={os.path.join(workdir, 'data')}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={pki['broker']}",
    ):
        cmd += ["--override", item]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    harness.wait_port(plain)
    harness.wait_port(tls)
    return proc, plain, tls


def kcat_args(port: int, protocol: str, pki: dict[str, str]) -> list[str]:
    out = [harness.kcat(), "-b", f"127.0.0.1:{port}"]
    if protocol == "SSL":
        out += ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki['ca']}"]
    return out


def one_round(
    protocol: str,
    port: int,
    pki: dict[str, str],
    args: argparse.Namespace,
    data_file: str,
    pid: int,
    env: dict[str, str] | None,
) -> dict[str, Any]:
    topic = f"tls-bench-{protocol.lower()}-{int(time.time() * 1000)}"
    base = kcat_args(port, protocol, pki)
    harness.create_topic(f"127.0.0.1:{port}" if protocol == "PLAINTEXT" else args.plain, topic, 1)
    produce = base + [
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        "-X",
        "linger.ms=5",
        "-X",
        "batch.num.messages=1000000",
        "-X",
        "batch.size=1000000",
        "-X",
        "queue.buffering.max.messages=2000000",
        "-X",
        "queue.buffering.max.kbytes=2097151",
        "-X",
        "acks=1",
        "-l",
        data_file,
    ]
    consume = base + [
        "-C",
        "-t",
        topic,
        "-o",
        "beginning",
        "-e",
        "-q",
        "-f",
        "%o\n",
        "-X",
        "fetch.max.bytes=52428800",
        "-X",
        "max.partition.fetch.bytes=10485760",
        "-c",
        str(args.num_records),
    ]
    mb = args.num_records * args.record_size / 1e6
    out = {}
    for phase, cmd in (("produce", produce), ("consume", consume)):
        cpu0 = harness.cpu_seconds(pid)
        seconds, outs = harness._run_all([cmd], env)
        cpu = harness.cpu_seconds(pid) - cpu0
        lines = outs[0].count(b"\n")
        if phase == "consume" and lines != args.num_records:
            raise SystemExit(f"{protocol} consumer read {lines} of {args.num_records} records")
        out[phase] = {
            "seconds": round(seconds, 3),
            "records_per_s": round(args.num_records / seconds),
            "mb_per_s": round(mb / seconds, 1),
            "broker_cpu_s": round(cpu, 3),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--num-records", type=int, default=1_000_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kcat-librdkafka", choices=["system", "confluent"], default="system")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pylog-tls-bench-") as workdir:
        pki = make_pki(workdir)
        env = harness.kcat_env(args.kcat_librdkafka, workdir)
        data_file = harness._kcat_data(
            os.path.join(workdir, "records"), args.num_records, args.record_size
        )
        proc, plain, tls = start_broker(workdir, pki)
        args.plain = f"127.0.0.1:{plain}"
        runs: dict[str, list[dict[str, Any]]] = {"PLAINTEXT": [], "SSL": []}
        try:
            for r in range(args.repeat):  # alternate which goes first
                order = ["PLAINTEXT", "SSL"] if r % 2 == 0 else ["SSL", "PLAINTEXT"]
                for protocol in order:
                    port = plain if protocol == "PLAINTEXT" else tls
                    runs[protocol].append(
                        one_round(protocol, port, pki, args, data_file, proc.pid, env)
                    )
        finally:
            proc.terminate()
            proc.wait(30)
    medians: dict[str, Any] = {}
    for protocol, rs in runs.items():
        medians[protocol] = {
            phase: {k: statistics.median(r[phase][k] for r in rs) for k in rs[0][phase]}
            for phase in ("produce", "consume")
        }
    ratio = {
        phase: round(medians["SSL"][phase]["mb_per_s"] / medians["PLAINTEXT"][phase]["mb_per_s"], 2)
        for phase in ("produce", "consume")
    }
    print(
        json.dumps(
            {
                "num_records": args.num_records,
                "record_size": args.record_size,
                "repeat": args.repeat,
                "commit": harness.git_commit(),
                "implementation": harness.implementation(),
                "kcat_librdkafka": harness.kcat_librdkafka_version(env),
                "median": medians,
                "ssl_over_plaintext": ratio,
                "runs": runs,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
