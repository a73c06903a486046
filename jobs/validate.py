"""The validate stage: Great Expectations 1.x suites (JSON under expectations/) on Spark DataFrames.

Suites run on narrow projections (only the columns they check), renamed to plain names so that a
column name taken from a message (dots, spaces, quotes) can neither break GX's column resolution
nor reach it unescaped; results report the real names.
"""
from __future__ import annotations

import itertools
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

EXPECTATIONS_DIR = Path(os.environ.get("CDC_EXPECTATIONS_DIR", Path(__file__).resolve().parents[1] / "expectations"))
_names = itertools.count()


def load_suite(name: str) -> dict:
    return json.loads((EXPECTATIONS_DIR / f"{name}.json").read_text())


@lru_cache(maxsize=1)
def _context():
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context, context.data_sources.add_spark(name="cdc_spark")


def expand_template(suite: dict, key_columns: list[str]) -> list[dict]:
    """The state suite names its key columns by placeholders; one table's expectations."""
    out = []
    for exp in suite["expectations"]:
        kwargs = exp["kwargs"]
        if kwargs.get("column") == "$each_key_column":
            out += [{"type": exp["type"], "kwargs": {**kwargs, "column": k}} for k in key_columns]
        elif kwargs.get("column_list") == "$key_columns":
            if len(key_columns) == 1:  # GX's single-column form of the same check
                out.append({"type": "expect_column_values_to_be_unique",
                            "kwargs": {k: v for k, v in kwargs.items() if k != "column_list"} | {
                                "column": key_columns[0]}})
            else:
                out.append({"type": exp["type"], "kwargs": {**kwargs, "column_list": list(key_columns)}})
        else:
            out.append(exp)
    return out


def run_suite(df: DataFrame, suite_name: str, expectations: list[dict], table: str | None) -> dict:
    """Validate df against the expectations; a JSON-safe result."""
    import great_expectations as gx
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    columns = sorted({c for e in expectations for c in _columns_of(e["kwargs"])})
    alias = {c: f"c{i}" for i, c in enumerate(columns)}
    narrow = df.select(*[F.col(_quoted(c)).alias(alias[c]) for c in columns])

    context, source = _context()
    n = next(_names)
    asset = source.add_dataframe_asset(name=f"asset_{n}")
    batch = asset.add_batch_definition_whole_dataframe(f"batch_{n}")
    suite = gx.ExpectationSuite(name=f"{suite_name}_{n}")
    for exp in expectations:
        kwargs = _renamed(exp["kwargs"], alias)
        suite.add_expectation_configuration(ExpectationConfiguration(type=exp["type"], kwargs=kwargs))
    suite = context.suites.add(suite)
    definition = context.validation_definitions.add(gx.ValidationDefinition(name=f"v_{n}", data=batch, suite=suite))
    result = definition.run(batch_parameters={"dataframe": narrow}, result_format="SUMMARY")

    back = {v: k for k, v in alias.items()}
    results = []
    for r in result.results:
        item = r.to_json_dict()
        config = item.get("expectation_config") or {}
        observed = item.get("result") or {}
        results.append({
            "expectation": config.get("type"),
            "kwargs": _renamed({k: v for k, v in (config.get("kwargs") or {}).items() if k != "batch_id"}, back),
            "success": bool(item.get("success")),
            "observed": {k: observed[k] for k in ("element_count", "unexpected_count", "unexpected_percent",
                                                  "partial_unexpected_list", "observed_value") if k in observed},
            "exception": (item.get("exception_info") or {}).get("exception_message") or None,
        })
    return {
        "suite": suite_name,
        "table": table,
        "success": bool(result.success),
        "results": results,
        "statistics": json.loads(json.dumps(result.statistics, default=str)),
    }


def validate_changes(df: DataFrame) -> dict:
    suite = load_suite("changes")
    return run_suite(df, suite["name"], suite["expectations"], None)


def validate_state(df: DataFrame, table_id: str, key_columns: list[str]) -> dict:
    suite = load_suite("state")
    return run_suite(df, suite["name"], expand_template(suite, key_columns), table_id)


def validation_report(results: list[dict]) -> dict:
    return {"success": all(r["success"] for r in results), "suites": results}


def _columns_of(kwargs: dict[str, Any]) -> list[str]:
    cols = [kwargs["column"]] if "column" in kwargs else []
    return cols + list(kwargs.get("column_list", []))


def _renamed(kwargs: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    out = dict(kwargs)
    if "column" in out:
        out["column"] = mapping.get(out["column"], out["column"])
    if "column_list" in out:
        out["column_list"] = [mapping.get(c, c) for c in out["column_list"]]
    return out


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
