"""pylog imports without pyspark and pyarrow (the optional ``spark`` extra); register()
says how to install them."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> subprocess.CompletedProcess[str]:
    # sys.modules[name] = None makes any import of that name fail, as if not installed.
    prelude = "import sys\nsys.modules['pyspark'] = None\nsys.modules['pyarrow'] = None\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120)


def test_pylog_imports_without_pyspark_and_pyarrow() -> None:
    out = _run("""
        import pylog, pylog.client, pylog.broker.server, pylog.spark
        from pylog.spark import offsets, options
        options.parse_source_options({"path": "/d", "subscribe": "t"}, streaming=False)
        assert not any(m.split(".")[0] in ("pyspark", "pyarrow")
                       for m, v in sys.modules.items() if v is not None)
        try:
            pylog.spark.register(object())
        except ImportError as exc:
            print(exc)
    """)
    assert out.returncode == 0, out.stderr
    assert "pip install 'pylog-kafka[spark]'" in out.stdout


def test_register_imports_nothing_heavy_until_called() -> None:
    out = subprocess.run([sys.executable, "-c", "import pylog.spark, sys; "
                          "print(sorted(m for m in sys.modules if m.startswith(('pyspark', "
                          "'pyarrow'))))"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
