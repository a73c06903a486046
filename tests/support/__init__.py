"""Helpers shared by the tests (tests/unit and tests/integration): test modules import from here, never
from one another; pytest fixtures shared across files live in the conftest.py files instead."""
