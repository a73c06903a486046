# The README's two commands: `make demo` and `make test`.
.PHONY: setup setup-dev demo test test-unit test-properties demo-topics

setup:
	scripts/setup.sh

setup-dev:
	scripts/setup.sh --dev

## set up, then run the main job end to end on the embedded default
demo: setup
	.venv/bin/python scripts/demo.py

## set up, then run the whole test suite
test: setup-dev
	.venv/bin/python -m pytest -q

## only the fast unit tests
test-unit: setup-dev
	.venv/bin/python -m pytest -q tests/unit

## the property-based tests with a larger example budget (about half an hour on 2 cores)
test-properties: setup-dev
	CDC_PROPERTY_EXAMPLES=40 .venv/bin/python -m pytest -q tests/integration/test_properties.py

## regenerate the bundled demo topics and source database (deterministic)
demo-topics: setup
	.venv/bin/python scripts/make_demo.py --out demo/topics --source-db demo/source.db
