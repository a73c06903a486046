"""The package's requirements (pyproject.toml reads them from requirements*.txt): the runtime, the wheel's own
dependencies, brings every module the package imports outside its Airflow room and its demo, and nothing of
Airflow, the demo or the tests; those come with the extras [airflow], [demo] and [dev]."""
from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from tests.support.packaging import REPO, RUNTIME, installed_closure, requirement_files, requirements

JOBS = REPO / "jobs"
# the rooms that may import what an extra brings, and which
ROOM_EXTRAS = {"airflow": "airflow", "demo": "demo"}
# the rest of the package imports Airflow only inside a function, where an Airflow connection is asked for
# (an SMTP or a Kafka one): without the [airflow] extra that path says so, nothing else needs Airflow
OPTIONAL_ELSEWHERE = {"airflow": "airflow"}


class _Imports(ast.NodeVisitor):
    """(top-level module, imported inside a function) of every absolute import of a module."""

    def __init__(self) -> None:
        self.found: list[tuple[str, bool]] = []
        self._depth = 0

    def _function(self, node: ast.AST) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = _function  # noqa: N815 - ast.NodeVisitor's hook names

    def visit_Import(self, node: ast.Import) -> None:  # noqa: N802
        self.found += [(alias.name.split(".")[0], self._depth > 0) for alias in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:  # noqa: N802
        if not node.level and node.module:
            self.found.append((node.module.split(".")[0], self._depth > 0))


def _third_party_imports() -> list[tuple[Path, str, bool]]:
    out = []
    for path in sorted(JOBS.rglob("*.py")):
        visitor = _Imports()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        out += [(path, module, lazy) for module, lazy in visitor.found
                if module not in sys.stdlib_module_names and module not in ("jobs", "__future__")]
    return out


_module_distributions = functools.cache(md.packages_distributions)  # a scan of every installed distribution


def _distributions(module: str) -> set[str]:
    found = _module_distributions().get(module)
    assert found, f"no installed distribution provides the module {module}"
    return {canonicalize_name(name) for name in found}


def _extra_allowed(path: Path, module: str, lazy: bool) -> str | None:
    room = path.relative_to(JOBS).parts[0]
    if room in ROOM_EXTRAS:
        return ROOM_EXTRAS[room]
    return OPTIONAL_ELSEWHERE.get(module) if lazy else None


@pytest.fixture(scope="module")
def runtime() -> set[str]:
    return installed_closure(requirements(RUNTIME))


def test_the_runtime_brings_what_the_package_imports_and_an_extra_only_where_it_may(runtime):
    extras = {extra: runtime | installed_closure(requirements(extra)) for extra in requirement_files() if extra}
    imports = _third_party_imports()
    assert {m for _, m, _ in imports} >= {"pyspark", "pyiceberg", "yaml", "croniter", "airflow", "aiosmtpd"}
    missing = []
    for path, module, lazy in imports:
        extra = _extra_allowed(path, module, lazy)
        if not _distributions(module) & (extras[extra] if extra else runtime):
            missing.append(f"{path.relative_to(REPO)}: {module} ({'[' + extra + ']' if extra else 'runtime'})")
    assert not missing, "imported, but not brought by the requirements:\n" + "\n".join(sorted(set(missing)))


@pytest.mark.parametrize("outsider", ["apache-airflow", "apache-airflow-core", "pyspark-client", "aiosmtpd",
                                      "pytest", "moto", "ruff"])
def test_the_runtime_brings_no_airflow_nor_a_demo_or_test_tool(runtime, outsider):
    assert outsider not in runtime


def test_every_requirement_is_an_exact_pin_in_one_file():
    where: dict[str, list[str]] = {}
    for extra in requirement_files():
        for req in requirements(extra):
            (spec,) = req.specifier
            assert spec.operator == "==" and not req.marker, f"{req}: pins stay exact"
            where.setdefault(canonicalize_name(req.name), []).append(extra or "runtime")
    assert {name: extras for name, extras in where.items() if len(extras) > 1} == {}
