"""Functions fit on a screen: no function in the package over 60 lines (read from the source, no import)."""
from __future__ import annotations

import ast
from pathlib import Path

import jobs

MAX_LINES = 60
PACKAGE = Path(jobs.__file__).parent


def function_lengths(source: str) -> dict[str, int]:
    """Qualified name (Class.method, outer.inner) -> lines, decorators left out, of every function."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lengths[name] = child.end_lineno - child.lineno + 1
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return lengths


def test_function_lengths_count_every_line_of_nested_functions_and_methods():
    source = "class A:\n    def m(self):\n        def inner():\n            pass\n        return 1\n"
    assert function_lengths(source) == {"A.m": 4, "A.m.inner": 2}


def test_no_function_in_the_package_is_over_60_lines():
    over = {f"{path.relative_to(PACKAGE).as_posix()}:{name}": n
            for path in sorted(PACKAGE.rglob("*.py"))
            for name, n in function_lengths(path.read_text(encoding="utf-8")).items() if n > MAX_LINES}
    assert over == {}, "split these functions"
