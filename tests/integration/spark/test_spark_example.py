"""The example pipeline (examples/spark/clicks.py) runs end to end as the README says:
producer, streaming job (to a pylog topic and Parquet), direct-mode backfill, and its own
check that the streamed counts equal the backfilled ones."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "spark" / "clicks.py"


def test_example_pipeline_demo(new_broker, tmp_path) -> None:
    b = new_broker().start()
    out = tmp_path / "out"
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    env.pop("PYSPARK_PYTHON", None)  # the example sets it itself
    cmd = [sys.executable, str(EXAMPLE), "demo", "--bootstrap", b.bootstrap,
           "--data-dir", str(b.data_dir), "--out", str(out), "--events", "6000",
           "--minutes", "20"]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-5000:]
    assert "produced 6000 clicks to clicks" in run.stdout
    assert "check: " in run.stdout and "counts agree" in run.stdout
    assert list((out / "stream").glob("*.parquet")) and list((out / "backfill").glob("*.parquet"))
    # A second demo on the same output refuses, saying what to do.
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode != 0 and "remove it, or pass --out DIR" in again.stderr


def test_example_help() -> None:
    run = subprocess.run([sys.executable, str(EXAMPLE), "--help"], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0 and "backfill" in run.stdout and "--data-dir" in run.stdout
