"""Every environment variable the package reads is read in one module (jobs.env), when needed, never written,
and documented in one table (docs/operations/environment.md)."""
from __future__ import annotations

import ast
import re

import pytest

from jobs import env
from tests.support.paths import REPO

PACKAGE = REPO / "jobs"


def _environment_uses(path) -> list[str]:
    """Where a module touches the process environment: ``os.environ``, ``os.getenv``, ``os.putenv``..."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv", "unsetenv", "environb"):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [f"{path.relative_to(REPO)}:{node.lineno}: from os import {a.name}" for a in node.names
                      if a.name in ("environ", "getenv", "putenv", "unsetenv")]
    return found


def test_no_module_but_jobs_env_touches_the_environment():
    uses = [use for path in sorted(PACKAGE.rglob("*.py")) if path != PACKAGE / "env.py"
            for use in _environment_uses(path)]
    assert uses == []


def test_every_variable_read_is_in_the_operations_table_and_nothing_else_is():
    table = (REPO / "docs" / "operations" / "environment.md").read_text(encoding="utf-8")
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    documented = {name for cell in rows for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", cell)}
    assert documented == env.NAMES
    names_used = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            call = node if isinstance(node, ast.Call) else None
            if call and getattr(call.func, "attr", None) in ("get", "text", "number") and call.args and \
                    isinstance(call.args[0], ast.Constant) and str(call.args[0].value).isupper():
                names_used.add(call.args[0].value)
    assert {n for n in names_used if n.startswith(("CDC_", "SMTP_"))} <= env.NAMES


def test_a_variable_outside_the_table_is_refused_and_values_are_read_when_asked(monkeypatch):
    with pytest.raises(KeyError, match="NOT_DECLARED is not one of jobs.env.NAMES"):
        env.get("NOT_DECLARED")
    monkeypatch.setenv("CDC_STATE_MAX_FILES_PER_BUCKET", " 3 ")
    assert env.text("CDC_STATE_MAX_FILES_PER_BUCKET") == "3"
    assert env.number("CDC_STATE_MAX_FILES_PER_BUCKET", 16, whole=True) == 3
    monkeypatch.setenv("CDC_STATE_MAX_FILES_PER_BUCKET", "-1")
    with pytest.raises(ValueError, match=r"CDC_STATE_MAX_FILES_PER_BUCKET='-1' is not a whole number of at least 0: "
                                         r"unset it \(default 16\) or give one"):
        env.number("CDC_STATE_MAX_FILES_PER_BUCKET", 16, whole=True)
    monkeypatch.delenv("CDC_STATE_MAX_FILES_PER_BUCKET")
    assert env.number("CDC_STATE_MAX_FILES_PER_BUCKET", 16, whole=True) == 16
