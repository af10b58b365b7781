"""``pylog cluster start|stop``: a local cluster for development (ZooKeeper + N brokers).

``start`` runs Debian's ``zookeeper`` package (``make sysdeps`` installs it) the way its
``zkServer.sh`` does: ``java -cp /usr/share/java/zookeeper.jar`` (whose manifest class path
names the jars it needs) ``org.apache.zookeeper.server.ZooKeeperServerMain zoo.cfg``, in
the background with its own ``zoo.cfg`` and data under ``<data-dir>/zookeeper``; then N
``pylog broker`` processes with ``broker.id`` 0..N-1, ``zookeeper.connect`` and their data
in ``<data-dir>/broker-<id>``, on ``127.0.0.1`` ports ``base-port + id``. It waits until
each serves, prints their addresses and writes ``<data-dir>/cluster.json`` (process ids,
ports), which ``stop`` reads to stop the brokers (SIGTERM: controlled shutdown) and then
ZooKeeper. Logs: ``<data-dir>/*.log``.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any

ZOOKEEPER_JAR = pathlib.Path("/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE_JAR = pathlib.Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
STATE_FILE = "cluster.json"


class LauncherError(RuntimeError):
    """The local cluster cannot be started or stopped (the message says what to do)."""


def _alive(pid: int) -> bool:
    """The process runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: kill(0) is all there is
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _port_free(port: int) -> bool:
    """Whether a server could listen on ``127.0.0.1:port`` now.

    The test binds with SO_REUSEADDR, as the brokers (asyncio) and ZooKeeper (Java) do: the
    connections a stopped cluster leaves in TIME_WAIT do not keep a listener off the port,
    so they must not fail the check either (``cluster start`` right after ``cluster stop``).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _port_taken(port: int, who: str, flag: str) -> str:
    return (f"port {port} ({who}) is in use by another process (`ss -ltnp 'sport = :{port}'` "
            f"shows which): stop it, or pass {flag} to use other ports")


def _ruok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(b"srvr")
            return b"Mode:" in s.recv(4096)
    except OSError:
        return False


def start_zookeeper(base: pathlib.Path, port: int, timeout: float = 60.0) -> int:
    if not ZOOKEEPER_JAR.exists():
        raise LauncherError("Debian's zookeeper package is not installed (no "
                            f"{ZOOKEEPER_JAR}): run `make sysdeps` (or apt-get install zookeeper)")
    if shutil.which("java") is None:
        raise LauncherError("no java on PATH: run `make sysdeps` (openjdk-17-jre-headless)")
    if not _port_free(port):
        raise LauncherError(_port_taken(port, "ZooKeeper", "--zookeeper-port"))
    data = base / "zookeeper"
    data.mkdir(parents=True, exist_ok=True)
    cfg = base / "zoo.cfg"
    cfg.write_text(f"tickTime=500\ndataDir={data}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
                   "minSessionTimeout=1000\nmaxSessionTimeout=60000\nmaxClientCnxns=0\n"
                   "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr,stat\n")
    cp = str(ZOOKEEPER_JAR) + (f":{SLF4J_SIMPLE_JAR}" if SLF4J_SIMPLE_JAR.exists() else "")
    with open(base / "zookeeper.log", "ab") as log:
        proc = subprocess.Popen(["java", "-Xmx256m", "-Dzookeeper.admin.enableServer=false",
                                 "-cp", cp, MAIN_CLASS, str(cfg)], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + timeout
    while not _ruok(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise LauncherError(f"ZooKeeper did not start; see {base / 'zookeeper.log'}")
        time.sleep(0.2)
    return proc.pid


def start_broker(base: pathlib.Path, broker_id: int, port: int, zk_connect: str,
                 extra: list[str], timeout: float = 60.0, protocol: str = "PLAINTEXT",
                 config_file: pathlib.Path | None = None) -> int:
    if not _port_free(port):
        raise LauncherError(_port_taken(port, f"broker {broker_id}", "--base-port"))
    data = base / f"broker-{broker_id}"
    data.mkdir(parents=True, exist_ok=True)
    ready = base / f"broker-{broker_id}.ready"
    ready.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pylog", "broker", "--ready-file", str(ready),
           *(["--config", str(config_file)] if config_file is not None else []),
           "--override", f"broker.id={broker_id}", "--override", f"node.id={broker_id}",
           "--override", f"listeners={protocol}://127.0.0.1:{port}",
           "--override", f"log.dirs={data}", "--override", f"zookeeper.connect={zk_connect}"]
    for item in extra:
        cmd += ["--override", item]
    with open(base / f"broker-{broker_id}.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    while not (ready.exists() and ready.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise LauncherError(f"broker {broker_id} did not start; see "
                                f"{base / f'broker-{broker_id}.log'}")
        time.sleep(0.1)
    return proc.pid


def internal_topic_defaults(brokers: int) -> list[str]:
    """``key=value`` overrides giving ``__consumer_offsets``, ``__transaction_state`` and
    ``__share_group_state`` Kafka's default replication (3, min ISR 2) on a local cluster of
    ``brokers``."""
    rf = min(3, brokers)
    return [f"offsets.topic.replication.factor={rf}",
            f"transaction.state.log.replication.factor={rf}",
            f"transaction.state.log.min.isr={min(2, rf)}",
            f"share.coordinator.state.topic.replication.factor={rf}",
            f"share.coordinator.state.topic.min.isr={min(2, rf)}"]


SASL_PROPERTIES = "sasl-broker.properties"
CLIENT_PROPERTIES = "client.properties"


def setup_sasl(base: pathlib.Path, zk_connect: str) -> pathlib.Path:
    """A secured cluster (``--sasl``): SASL_PLAINTEXT listeners with SCRAM-SHA-256/512, the
    brokers talking SCRAM-SHA-512 to each other as user ``broker``; an ``admin`` user for
    clients. Random passwords; the SCRAM credentials go to ZooKeeper (salted) before any
    broker starts; the brokers' settings and the client's go to files only the owner can
    read (``sasl-broker.properties``, ``client.properties``, for ``--command-config``).
    Returns the client settings file."""
    import secrets

    from pylog.cluster.zk_store import ZkStore
    from pylog.security.sasl.credentials import zk_alter_user
    from pylog.security.sasl.scram import make_credential

    broker_pw, admin_pw = secrets.token_urlsafe(18), secrets.token_urlsafe(18)
    store = ZkStore(zk_connect)
    store.start()
    try:
        zk_alter_user(store, "broker", {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", broker_pw)}, [])
        zk_alter_user(store, "admin", {m: make_credential(m, admin_pw)
                                       for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}, [])
    finally:
        store.close()

    def write(path: pathlib.Path, lines: list[str]) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
    write(base / SASL_PROPERTIES, [
        "security.inter.broker.protocol=SASL_PLAINTEXT",
        "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="broker" password="{broker_pw}";'])
    client = base / CLIENT_PROPERTIES
    write(client, ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512",
                   "sasl.username=admin", f"sasl.password={admin_pw}"])
    return client


def start(data_dir: str, brokers: int, base_port: int, zk_port: int,
          overrides: list[str], sasl: bool = False) -> dict[str, Any]:
    base = pathlib.Path(data_dir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    state_path = base / STATE_FILE
    if state_path.exists():
        old = json.loads(state_path.read_text())
        if any(_alive(p) for p in [old["zookeeper"]["pid"], *(b["pid"] for b in old["brokers"])]):
            raise LauncherError(f"a cluster from {base} is running: `pylog cluster stop "
                                f"--data-dir {data_dir}` first")
    state: dict[str, Any] = {"zookeeper": {}, "brokers": []}
    # The internal topics replicated as a Kafka cluster's are by default (3 replicas, a
    # transaction log min ISR of 2), capped by the brokers there are; --override wins.
    extra = [*internal_topic_defaults(brokers), *overrides]
    try:
        state["zookeeper"] = {"pid": start_zookeeper(base, zk_port), "port": zk_port}
        zk = f"127.0.0.1:{zk_port}"
        protocol, config_file = "PLAINTEXT", None
        if sasl:
            state["client_properties"] = str(setup_sasl(base, zk))
            protocol, config_file = "SASL_PLAINTEXT", base / SASL_PROPERTIES
        for i in range(brokers):
            pid = start_broker(base, i, base_port + i, zk, extra, protocol=protocol,
                               config_file=config_file)
            state["brokers"].append({"id": i, "pid": pid, "host": "127.0.0.1",
                                     "port": base_port + i})
    except BaseException:
        stop_processes(state)
        raise
    state_path.write_text(json.dumps(state, indent=2) + "\n")
    return state


def stop_processes(state: dict[str, Any], timeout: float = 60.0) -> list[str]:
    """Stop the brokers one at a time, the controller last, then ZooKeeper; what each did.

    One at a time, as a rolling restart does: each broker's controlled shutdown hands its
    leaderships to brokers that are still up and returns at once. Stopped together, every
    broker would be shutting down, none could take a leadership, and each would wait out
    its ``controlled.shutdown.max.retries`` backoffs. The controller goes last so that no
    shutdown waits for a new controller to be elected. Returns lines such as
    ``"stopped broker 1"``, ``"broker 2 was not running"`` or
    ``"broker 0 did not stop in 60 s: killed"``.
    """
    brokers = list(state.get("brokers", []))
    controller = _controller_id(state)
    brokers.sort(key=lambda b: (b["id"] == controller, b["id"]))
    done = []
    for b in brokers:
        name, pid = f"broker {b['id']}", b["pid"]
        if not _alive(pid):
            done.append(f"{name} was not running")
            continue
        os.kill(pid, signal.SIGTERM)
        if _wait_exit(pid, timeout):
            done.append(f"stopped {name}")
        else:
            os.kill(pid, signal.SIGKILL)
            done.append(f"{name} did not stop in {timeout:.0f} s: killed")
    zk = state.get("zookeeper", {}).get("pid")
    if zk and _alive(zk):
        os.killpg(zk, signal.SIGTERM)
        done.append("stopped zookeeper" if _wait_exit(zk, 20.0) else "zookeeper did not stop")
    elif zk:
        done.append("zookeeper was not running")
    return done


def _wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        _reap(pid)
        if not _alive(pid):
            break
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _controller_id(state: dict[str, Any]) -> int | None:
    """The id of the cluster's controller, read from ZooKeeper's ``/controller``; None when
    ZooKeeper does not answer (the brokers are then stopped in id order)."""
    port = state.get("zookeeper", {}).get("port")
    if not port or not _ruok(port):
        return None
    try:
        from pylog.cluster.zk_store import ZkStore
    except ImportError:
        return None
    store = ZkStore(f"127.0.0.1:{port}")
    try:
        store.start(timeout_s=5.0)
        reg = store.get_controller()
        return reg.broker_id if reg is not None else None
    except Exception:  # ZooKeeper going away: fall back to id order
        return None
    finally:
        store.close()


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop(data_dir: str) -> list[str]:
    """Stop what ``start`` started from ``data_dir``; one line per process (see
    ``stop_processes``)."""
    state_path = pathlib.Path(data_dir).resolve() / STATE_FILE
    if not state_path.exists():
        raise LauncherError(f"no {STATE_FILE} in {data_dir}: nothing started there (pass the "
                            "--data-dir given to `pylog cluster start`)")
    stopped = stop_processes(json.loads(state_path.read_text()))
    state_path.unlink()
    return stopped
