#!/usr/bin/env bash
# Builds a release wheel locally with `python -m build` and smoke-tests it in a fresh
# virtualenv outside the source tree (the unit and property suites against the installed
# wheel). Release wheels for manylinux x86_64/aarch64 come from cibuildwheel
# ([tool.cibuildwheel] in pyproject.toml), which needs Docker; this is the recipe CI runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/wheels/dist"
PYTHON="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

rm -rf "$out"
mkdir -p "$out"

"$PYTHON" -m venv "$work/tool"
"$work/tool/bin/python" -m pip install -q --upgrade pip build
"$work/tool/bin/python" -m build --wheel --outdir "$out" "$root"
wheel="$(ls "$out"/pylog-*.whl)"
echo "built $wheel"

# The wheel must not carry generated C or Cython sources.
if "$work/tool/bin/python" -m zipfile -l "$wheel" | grep -E '\.(c|pyx|html)\s'; then
  echo "wheel contains generated or source files" >&2
  exit 1
fi

"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip
"$work/venv/bin/python" -m pip install -q "$wheel[test]"

cd "$work"
"$work/venv/bin/python" - <<'PY'
import logcore, pylog, sys
assert logcore.IMPLEMENTATION == "c", logcore.IMPLEMENTATION
assert "site-packages" in logcore.__file__, logcore.__file__
print("installed", pylog.__version__, "logcore", logcore.IMPLEMENTATION, "from", logcore.__file__)
PY
"$work/venv/bin/pylog" --version
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider -c "$root/pyproject.toml" \
  --rootdir "$work" "$root/tests/unit" "$root/tests/property"
echo "wheel smoke test passed"
