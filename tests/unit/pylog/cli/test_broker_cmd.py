"""`pylog broker` start-up failures that must be one clear line, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import logcore


def test_cluster_mode_without_kazoo_is_one_line_naming_the_extra(tmp_path) -> None:
    # kazoo is installed here: a directory first on PYTHONPATH holds a `kazoo` package
    # whose import fails, as when the [cluster] extra was never installed.
    fake = tmp_path / "site"
    (fake / "kazoo").mkdir(parents=True)
    (fake / "kazoo" / "__init__.py").write_text(
        'raise ImportError("No module named \'kazoo\'", name="kazoo")\n'
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(fake), env.get("PYTHONPATH")) if p)
    cmd = [
        sys.executable,
        "-m",
        "pylog",
        "broker",
        "--override",
        "zookeeper.connect=127.0.0.1:1",
        "--override",
        f"log.dirs={tmp_path / 'data'}",
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0",
    ]
    if logcore.IMPLEMENTATION != "c":
        cmd.append("--allow-pure-python")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = [line for line in out.stderr.splitlines() if "kazoo" in line]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("pylog broker: cluster mode (zookeeper.connect) needs kazoo")
    assert "pip install 'pylog-kafka[cluster]'" in lines[0]
