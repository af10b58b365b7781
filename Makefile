# pylog developer and CI entry points.
#   make run    install pylog and what the broker needs (not the test dependencies) and start
#               a single-node broker on 127.0.0.1:9092 (data in ./pylog-data)
#   make cluster  ZooKeeper + 3 brokers in cluster mode on 127.0.0.1:9092-9094 (make cluster-stop)
#   make test   install everything the tests need (system packages too) and run them all
#   make test-cluster  the client suites against ZooKeeper + 3 brokers (replication factor 3)
#   make soak   the kill -9 / disk-full soak with a long budget (SOAK_SECONDS=600 by default;
#               SOAK_SEED=N repeats a run, SOAK_KILLS=N sets the least number of kills)
#   make fuzz   the wire fuzzer standalone (docs/operations.md, "Wire fuzzing"): FUZZ_COUNT
#               mutants (100,000 by default) from FUZZ_SEED (0) against a broker subprocess;
#               failing mutants land in ./fuzz-failures (FUZZ_ARGS="--replay FILE" replays)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BASE_STAMP := $(VENV)/.installed-base
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: all install install-base compile debug sysdeps run cluster cluster-stop test test-c test-pure test-debug test-cluster test-cluster-ci soak fuzz lint bench bench-save wheel clean

all: compile

# What the broker needs (`make run`, `make cluster`): pylog with uvloop and kazoo, the web
# console's stack (`pylog console`), and the build tools for its extensions; no test
# dependencies (pyspark, pyarrow, clients, linters).
$(BASE_STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip "setuptools>=77" wheel "Cython>=3.0,<4" "numpy>=1.24"
	@# The distribution was named pylog before it became pylog-kafka: drop that install
	@# from an older .venv so that only one distribution owns the pylog package.
	$(PY) -m pip uninstall -q -y pylog 2>/dev/null || true
	$(PY) -m pip install -q --no-build-isolation -e '.[fast,cluster,console]'
	touch $@

# Everything the tests need on top (`make test` and the other test targets).
$(STAMP): $(BASE_STAMP)
	$(PY) -m pip install -q --no-build-isolation -e '.[test]'
	touch $@

install-base: $(BASE_STAMP)
install: $(STAMP)

# Build the extensions next to their sources (the editable install imports them from src/).
compile: $(BASE_STAMP)
	LOGCORE_BUILD_JOBS=2 $(PY) setup.py -q build_ext --inplace

# Debug build: bounds checks on, line tracing, LOGCORE_DEBUG invariant checks.
debug: $(STAMP)
	LOGCORE_DEBUG=1 LOGCORE_BUILD_JOBS=2 $(PY) setup.py -q build_ext --inplace --force

# System packages the tests drive (kcat, zookeeper, java, chromium), installed when missing.
sysdeps:
	bash tools/install-sysdeps.sh

# A single-node broker on 127.0.0.1:9092 with its data in ./pylog-data (Ctrl-C stops it cleanly).
run: compile
	$(PY) -m pylog broker --override listeners=PLAINTEXT://127.0.0.1:9092 --override log.dirs=./pylog-data

# A local cluster: ZooKeeper (Debian's package) and 3 brokers on 127.0.0.1:9092-9094, data in
# ./pylog-cluster; `make cluster-stop` stops it.
cluster: sysdeps compile
	$(PY) -m pylog cluster start --brokers 3 --data-dir ./pylog-cluster

cluster-stop:
	$(PY) -m pylog cluster stop --data-dir ./pylog-cluster

test: sysdeps install compile test-c test-pure test-cluster-ci

# The suites run on pytest-xdist workers, a test file per worker at a time (module-scoped
# brokers stay within one worker): most integration tests sleep on brokers, ZooKeeper and
# timeouts, so four workers keep two cores busy. XDIST= runs everything in one process.
XDIST ?= -n 4 --dist loadfile
# --durations: the slowest tests in every run's log, to keep CI within its time budget.
test-c: $(STAMP)
	$(PY) -m pytest -q $(XDIST) --durations=30 $(PYTEST_ARGS)

# The client suites against a cluster (tests/integration/conftest.py, PYLOG_TEST_CLUSTER): a
# real ZooKeeper and 3 brokers with default/offsets/transaction replication factor 3 and
# min.insync.replicas=2 behind the `broker` fixture; tests that need the single broker
# process skip, saying why.
CLUSTER_SUITES := tests/integration/test_client_interop.py tests/integration/test_admin_clients.py \
	tests/integration/test_client_parity.py tests/integration/test_client_roundtrip.py \
	tests/integration/test_idempotence.py tests/integration/test_groups.py \
	tests/integration/test_cli_client_tools.py tests/integration/test_client_api.py \
	tests/integration/test_broker_fetch.py tests/integration/test_group_migration.py
test-cluster: $(STAMP)
	PYLOG_TEST_CLUSTER=3 $(PY) -m pytest -q $(XDIST) $(CLUSTER_SUITES) $(PYTEST_ARGS)

# The bounded subset `make test` (and CI) runs in cluster mode: about three minutes.
CLUSTER_CI_SUITES := tests/integration/test_client_interop.py \
	tests/integration/test_admin_clients.py tests/integration/test_client_roundtrip.py \
	tests/integration/test_idempotence.py tests/integration/test_client_parity.py \
	tests/integration/test_groups.py tests/integration/test_group_migration.py
test-cluster-ci: $(STAMP)
	PYLOG_TEST_CLUSTER=3 $(PY) -m pytest -q $(XDIST) $(CLUSTER_CI_SUITES) $(PYTEST_ARGS)

# logcore's pure-Python twin runs the logcore and property suites too (docs/architecture.md, Tests).
test-pure: $(STAMP)
	LOGCORE_PUREPYTHON=1 $(PY) -m pytest -q $(XDIST) tests/unit/logcore tests/property $(PYTEST_ARGS)

# The debug build (bounds checks on, LOGCORE_DEBUG invariant checks) runs the logcore and
# property suites too. It is built in its own copy of the sources under build/debug so that
# it never replaces the release extensions next to src/.
DEBUG_TREE := build/debug
test-debug: $(STAMP)
	rm -rf $(DEBUG_TREE) && mkdir -p $(DEBUG_TREE)
	git ls-files -z src setup.py pyproject.toml README.md | xargs -0 cp --parents -t $(DEBUG_TREE)
	cd $(DEBUG_TREE) && LOGCORE_DEBUG=1 LOGCORE_BUILD_JOBS=2 $(abspath $(PY)) setup.py -q build_ext --inplace
	PYTHONPATH=$(DEBUG_TREE)/src $(PY) -c "import logcore._record as b; assert '$(DEBUG_TREE)/src' in b.__file__, b.__file__"
	PYTHONPATH=$(DEBUG_TREE)/src $(PY) -m pytest -q $(XDIST) -p no:cacheprovider tests/unit/logcore tests/property tests/fault $(PYTEST_ARGS)

# The soak (tests/soak/README.md) by hand with a long budget; `make test` runs it short.
SOAK_SECONDS ?= 600
SOAK_SEED ?=
SOAK_KILLS ?=
soak: install compile
	SOAK_SECONDS=$(SOAK_SECONDS) SOAK_SEED=$(SOAK_SEED) SOAK_KILLS=$(SOAK_KILLS) \
		$(PY) -m pytest -q -rA tests/soak $(PYTEST_ARGS)

# The wire fuzzer (tests/fuzz) by hand with a long budget; `make test` runs 3,000 mutants.
FUZZ_SEED ?= 0
FUZZ_COUNT ?= 100000
FUZZ_ARGS ?=
fuzz: install compile
	PYTHONPATH=tests$${PYTHONPATH:+:$$PYTHONPATH} $(PY) -m fuzz --seed $(FUZZ_SEED) \
		--count $(FUZZ_COUNT) $(FUZZ_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests tools benchmarks
	$(VENV)/bin/mypy

bench: install compile
	$(PY) -m pytest benchmarks/micro -q --benchmark-columns=min,median,ops --benchmark-sort=name

bench-save: install compile
	$(PY) -m pytest benchmarks/micro -q --benchmark-autosave

wheel:
	bash wheels/build.sh

clean:
	rm -rf build dist wheels/dist src/*.egg-info
	find src -name '*.so' -delete -o -name '*.c' -path '*/logcore/*' -delete -o -name '*.html' -delete
