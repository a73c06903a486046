# The README's two commands: `make demo` and `make test`.
.PHONY: setup setup-dev demo test test-unit demo-topics

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

## regenerate the bundled demo topics and source database (deterministic)
demo-topics: setup
	.venv/bin/python scripts/make_demo.py --out demo/topics --source-db demo/source.db
