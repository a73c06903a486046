# The README's two commands: `make demo` and `make test`.
.PHONY: setup setup-dev wheel demo airflow airflow-stop lint test test-scenarios test-long test-all test-unit test-properties test-fuzz demo-topics bench

## .venv with the runtime, [airflow] and [demo] pins (-dev: and [dev]'s test tools), and the JVM-side
## decoders' jar; AIRFLOW_CONSTRAINTS names Airflow's constraints file (docs/operations/setup.md)
setup:
	scripts/setup.sh

setup-dev:
	scripts/setup.sh --dev

## the package as a wheel in dist/, its suites, schemas and the decoders' jar inside (tests/integration/test_wheel.py
## builds and runs one); setuptools builds in build/, whose lib/ would keep a deleted module
wheel: setup
	rm -rf dist build/lib build/bdist.*
	.venv/bin/python -m pip wheel --no-deps -q -w dist .

## set up, then run the main job end to end on the embedded default
demo: setup
	.venv/bin/python -m jobs.demo

## a local Airflow on 127.0.0.1 running the pipelines of dags/pipelines/ (jobs/airflow/local.py);
## AIRFLOW_PORT picks the UI's port, AIRFLOW_DB a metadata database URL (default: SQLite in build/airflow)
AIRFLOW_PORT ?= 8080
airflow: setup
	CDC_AIRFLOW_DB="$(AIRFLOW_DB)" .venv/bin/python -m jobs.airflow.local start --port $(AIRFLOW_PORT)

airflow-stop:
	.venv/bin/python -m jobs.airflow.local stop

## set up, then run the whole test suite
# two pytest-xdist workers (a JVM each): most of a test's time is single-threaded driver work (planning,
# code generation, Python), so two cores run two tests at once; an idle worker takes tests from the
# other's queue (work stealing: no worker idles while the other still holds a long file)
TEST_WORKERS ?= 2
PYTEST_PARALLEL = -n $(TEST_WORKERS) --dist worksteal
test: setup-dev lint
	.venv/bin/python -m pytest -q $(PYTEST_PARALLEL) -m "not scenario and not long"

## the slowest real-service scenarios make test leaves out, but their matrices' long tail (CI runs both: .ci/run)
test-scenarios: setup-dev
	.venv/bin/python -m pytest -q $(PYTEST_PARALLEL) -m "scenario and not long"

## the rest of the scenarios' matrices: every format, every kill point (tests/support/tiers.py)
test-long: setup-dev
	.venv/bin/python -m pytest -q $(PYTEST_PARALLEL) -m long

## everything: make test, make test-scenarios and make test-long in one pytest run
test-all: setup-dev lint
	.venv/bin/python -m pytest -q $(PYTEST_PARALLEL)

## ruff over the whole repository, and the package's layering (both configured in pyproject.toml)
lint: setup-dev
	.venv/bin/ruff check .
	.venv/bin/lint-imports

## only the unit tests (no servers, no whole runs)
test-unit: setup-dev
	.venv/bin/python -m pytest -q $(PYTEST_PARALLEL) tests/unit

## the property-based tests with a larger example budget (long: tens of minutes on 2 cores)
test-properties: setup-dev
	CDC_PROPERTY_EXAMPLES=40 .venv/bin/python -m pytest -q tests/integration/test_properties.py \
		tests/unit/formats/test_debezium.py::test_generated_messages_keep_the_fuzz_properties

## the decoders' fuzz tests with a larger budget, from a random seed, with values of megabytes
test-fuzz: setup-dev
	CDC_FUZZ_EXAMPLES=$${CDC_FUZZ_EXAMPLES:-40} CDC_FUZZ_HUGE_CHARS=$${CDC_FUZZ_HUGE_CHARS:-2000000} \
		.venv/bin/python -m pytest -q -s tests/unit/formats/test_fuzzing.py \
		tests/integration/test_decoder_fuzzing_runs.py

## regenerate the bundled demo topics and source database (deterministic)
demo-topics: setup
	.venv/bin/python -m jobs.demo.generate --out demo/topics --source-db demo/source.db

## the benchmark (bench/README.md): 1M and 4M messages of every format against Spark's floor, a naive
## Spark fold and DuckDB; prints a table, writes bench/results/bench-<time>.json and .png
bench: setup
	.venv/bin/pip install -q -r bench/requirements.txt
	.venv/bin/python -m bench.bench $(BENCH_ARGS)
