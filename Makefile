# spark-kafkalog: the two commands are `make run` and `make test`; both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: setup test run docs bench fuzz soak clean

setup: $(STAMP)

# The default editable mode: pyproject's package-dir makes it a static .pth of the project
# root, so pyspark's discovery of the top-level pyspark_kafkalog module sees it.
# Then WORKER_PYTHON_PTH: at the start of every interpreter of the venv, PYSPARK_PYTHON and
# PYSPARK_DRIVER_PYTHON default to that interpreter (never over a value that is set, never
# under spark-submit), so a script run as .venv/bin/python script.py, activated or not, gets
# Spark Python workers with this venv's pyarrow and pyspark, whatever it imports first.
WORKER_PYTHON_PTH := import os, sys; 'PYSPARK_GATEWAY_PORT' in os.environ or not sys.executable or [os.environ.setdefault(k, sys.executable) for k in ('PYSPARK_PYTHON', 'PYSPARK_DRIVER_PYTHON')]
$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -c "import pathlib, sys, sysconfig; pathlib.Path(sysconfig.get_paths()['purelib'], 'kafkalog-worker-python.pth').write_text(sys.argv[1] + '\n')" "$(WORKER_PYTHON_PTH)"
	@touch $(STAMP)

# ruff first (lint and import order, configured in pyproject.toml), then mypy (the static
# types of broker/server, broker/log and spark_kafkalog, [tool.mypy] in pyproject.toml: a
# seam between layers that no longer fits, or an Optional used unchecked, fails in seconds
# rather than in the one test that reaches that path), then the suite on
# TEST_WORKERS pytest-xdist workers, one test file per worker at a time (--dist loadfile:
# a file's tests keep their order and share their module fixtures); most tests wait on
# brokers, clients and Spark, so more workers than cores overlap those waits.
# TEST_WORKERS=0 runs the suite in this process, serially.
TEST_WORKERS ?= 4
# The suite starts hundreds of Python processes (brokers, tools, Spark's Python workers, one
# interpreter per xdist worker that imports every test module). Where the environment turns
# bytecode caching off (PYTHONDONTWRITEBYTECODE, as CI's machines do), each would compile
# the project's modules from source again (~0.6 s of CPU a broker start, ~20 s a worker's
# collection); the suite turns it back on, so the first process to import a module of the
# project writes its __pycache__, and the installed packages' bytecode, which pip and Python
# compiled when they were installed, is read as it is (~4,400 modules a run imports).
# Spark's JVMs share an archive of Spark's classes (tests/support/jvm_archive.py); its
# first dump in a new venv (~45 s) starts first, so it runs beside ruff and mypy. So does a
# collection of the suite (pytest --collect-only, its output and status ignored), which
# writes the test modules' assertion-rewritten bytecode once: in a new clone each xdist
# worker would otherwise rewrite and compile all of them itself (~14 s of CPU a worker).
test: export PYTHONDONTWRITEBYTECODE :=
test: setup
	$(PY) -m tests.support.jvm_archive
	$(PY) -m ruff check .
	$(PY) -m pytest -q --collect-only $(PYTEST_ARGS) >/dev/null 2>&1 & collect=$$!; \
	  $(PY) -m mypy; status=$$?; wait $$collect; exit $$status
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The main job: a clickstream pipeline on an embedded broker (./data is kept between runs).
# RUN_ARGS passes options, e.g. RUN_ARGS='--events 1000000' or '--bootstrap-servers host:9092'.
run: setup
	$(PY) -m spark_kafkalog.jobs.pipeline --data-dir data $(RUN_ARGS)

# The documentation site into site/ (mkdocs.yml; the reference pages are generated from the
# code at build time by tools/gen_docs.py); --strict: a broken link or anchor fails the build.
docs: setup
	$(PY) -m mkdocs build --strict --site-dir site

# Coverage-guided fuzzing, the long version (FUZZ_SECONDS per target; tests/fuzz/run.py).
# A finding is written as fuzz-findings/<target>/crash-*: copy it into tests/fuzz/regressions/<target>/.
FUZZ_SECONDS ?= 600
fuzz: setup
	@for t in request frames batch log_dir sasl tls; do \
	  mkdir -p fuzz-findings/$$t fuzz-corpus/$$t; \
	  echo "== $$t ($(FUZZ_SECONDS) s)"; \
	  PYTHONPATH=. $(PY) -m tests.fuzz.run $$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	    -artifact_prefix=fuzz-findings/$$t/ fuzz-corpus/$$t tests/fuzz/corpus/$$t || exit 1; \
	done

# The reliability suite's long versions (more bounces and iterations).
soak: setup
	KAFKALOG_SOAK=1 $(PY) -m pytest -q -s tests/test_reliability_bounces.py tests/test_reliability_faults.py tests/test_reliability_crash_loops.py tests/test_reliability_resources.py tests/test_reliability_spark_faults.py tests/test_history_checker.py tests/test_tables_kills.py tests/test_reliability_share.py $(PYTEST_ARGS)

bench: setup
	@for f in bench/*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
