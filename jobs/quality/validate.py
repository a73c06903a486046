"""The validate stage: Great Expectations 1.x suites (JSON files the package ships, see suite_file) on Spark
DataFrames.

- ``changes.json`` checks change records, evaluated from the decode's record profile rather than by GX
  over the records (see profile_changes); ``state.json``, run by GX, is a template for one state table whose
  key columns differ per table (``"$key_column"``: one expectation per key column,
  ``"$key_columns"``: the list of key columns; see ``expand_state_suite``).
- Suites run on a narrow projection (only the columns they check) whose columns are renamed to
  plain aliases, so a column name taken from a message (dots, spaces, quotes, backticks) can neither
  be read by GX/Spark as a struct path nor reach an expression unquoted; results report the real names.
- One ephemeral GX context per process; every call registers its own asset, suite and validation
  definition under a unique name and removes them afterwards, so repeated calls neither collide
  nor accumulate. GX persists the batch DataFrame it validates and never releases it: we do.
- Results are plain JSON-safe dicts (GX's contain numpy numbers, Decimals, datetimes, bytes).
"""
from __future__ import annotations

import datetime as dt
import decimal
import html
import itertools
import json
import logging
import math
import sys
import threading
import time
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs import env
from jobs.model.reports import SuiteResult, ValidationReport

log = logging.getLogger(__name__)

CHANGES_SUITE = "changes"
STATE_SUITE = "state"
KEY_COLUMN = "$key_column"  # in "column": repeat the expectation once per key column
KEY_COLUMNS = "$key_columns"  # in "column_list": all key columns (column form when there is one)

# GX's cheapest format that still says *which* values failed (SUMMARY adds a value-count pass). A suite
# runs first without examples (COUNTS_FORMAT: the same counts, no query per expectation for its first
# unexpected values, which scans the whole batch when there are none); only the expectations that found
# unexpected values run again for theirs (bench/README.md, "Validation")
RESULT_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": 10}
COUNTS_FORMAT = {**RESULT_FORMAT, "partial_unexpected_count": 0}
MAX_UNEXPECTED_SHOWN = 10
MAX_VALUE_CHARS = 200
OBSERVED_KEYS = (
    "element_count",
    "missing_count",
    "unexpected_count",
    "unexpected_percent",
    "partial_unexpected_list",
    "observed_value",
)

_lock = threading.Lock()  # the GX context is shared and not thread-safe
_call_numbers = itertools.count(1)
_gx_context: Any = None
_gx_source: Any = None
_gx_import: threading.Thread | None = None


def import_gx_in_background() -> None:
    """Start importing Great Expectations in a thread of its own: seconds of Python that a run's first
    validation would otherwise wait for, spent while the run's Spark work (decode, fold) goes on, when
    this process mostly waits for the JVM. The validation waits for the thread before it uses GX."""
    global _gx_import
    if _gx_import is None and "great_expectations" not in sys.modules:
        # first, here, what the run imports anyway and GX's import reaches too: no package is then imported
        # by two threads at once (two threads entering a package's import cycle at different modules make
        # Python raise "deadlock detected" in one of them)
        import pyarrow.parquet  # noqa: F401
        import pyspark.sql.classic.dataframe  # noqa: F401
        import sqlalchemy  # noqa: F401

        _gx_import = threading.Thread(target=_import_gx, name="import-great-expectations", daemon=True)
        _gx_import.start()


def _import_gx() -> None:
    try:
        import great_expectations  # noqa: F401
        from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: F401
        from great_expectations.expectations.expectation_configuration import ExpectationConfiguration  # noqa: F401
    except Exception:  # noqa: BLE001 - the validation imports it again, and its error is the run's
        log.debug("Great Expectations' import in the background failed", exc_info=True)


def _gx_imported() -> None:
    """Whatever import_gx_in_background started has ended (never two threads importing GX at once)."""
    if _gx_import is not None:
        _gx_import.join()


# ---- suites ------------------------------------------------------------------------------------
def suite_file(name: str) -> Traversable:
    """A suite's file: ``<name>.json`` of the folder CDC_EXPECTATIONS_DIR names (read when asked, not at
    import), else the one the package ships in jobs/quality/suites, through importlib.resources: the same
    call reads it from a checkout, an installed wheel or the zip spark-submit ships to a cluster's driver."""
    override = env.text("CDC_EXPECTATIONS_DIR")
    folder = Path(override) if override else resources.files(__package__) / "suites"
    return folder / f"{name}.json"


def load_suite(name: str) -> dict:
    """A suite (:func:`suite_file`) in GX 1.x form ({"name", "expectations": [{"type", "kwargs"}]})."""
    suite = json.loads(suite_file(name).read_text(encoding="utf-8"))
    for exp in suite.get("expectations", []):
        if "type" not in exp or "kwargs" not in exp:
            raise ValueError(f"suite {name}: every expectation needs 'type' and 'kwargs' (GX 1.x form): {exp}")
    return suite


def expand_state_suite(suite: dict, key_columns: list[str]) -> list[dict]:
    """The state suite's expectations for one table, its key-column placeholders filled in."""
    if not key_columns:
        raise ValueError("a state table needs at least one key column to validate")
    expanded: list[dict] = []
    for exp in suite["expectations"]:
        kwargs = exp["kwargs"]
        if kwargs.get("column") == KEY_COLUMN:
            expanded += [{"type": exp["type"], "kwargs": {**kwargs, "column": k}} for k in key_columns]
        elif kwargs.get("column_list") == KEY_COLUMNS:
            if exp["type"] == "expect_compound_columns_to_be_unique" and len(key_columns) == 1:
                # GX's compound form wants two or more columns; one column has its own expectation
                single = {k: v for k, v in kwargs.items() if k != "column_list"}
                expanded.append({"type": "expect_column_values_to_be_unique",
                                 "kwargs": {**single, "column": key_columns[0]}})
            else:
                expanded.append({"type": exp["type"], "kwargs": {**kwargs, "column_list": list(key_columns)}})
        else:
            expanded.append(exp)
    return expanded


# ---- the change suite, from the decode's record profile ------------------------------------------
# The change records are an in-memory intermediate of the run: a GX pass over them would cost a scan of
# every record. The decode aggregates them once anyway (to fill its cache); that aggregate is grouped by
# the columns the suite expects values of and counts the nulls of those it expects present, and the
# expectations are evaluated from it with GX's own definitions (tests/unit/quality/test_validate.py holds them
# to GX's results on the same records). So the change suite takes only these two kinds.
NOT_NULL, IN_SET = "expect_column_values_to_not_be_null", "expect_column_values_to_be_in_set"


def _profiled_columns(suite: dict) -> tuple[list[str], list[str]]:
    """(columns the profile groups by: those with a value set; columns whose nulls it counts)."""
    grouped, counted = [], []
    for exp in suite["expectations"]:
        column = exp["kwargs"].get("column")
        if exp["type"] not in (NOT_NULL, IN_SET) or not column:
            raise ValueError(f"suite {suite['name']} ({suite_file(CHANGES_SUITE)}): {exp['type']} "
                             f"cannot be evaluated from the decode's record profile; the change suite takes "
                             f"{NOT_NULL} and {IN_SET} on a column (checks of the published state go in state.json)")
        (grouped if exp["type"] == IN_SET else counted).append(column)
    return list(dict.fromkeys(grouped)), list(dict.fromkeys(counted))


def profile_changes(changes: DataFrame) -> list[dict]:
    """The change records' profile for the change suite: per combination of the suite's value-set columns,
    the records and the nulls of each column the suite expects present (one small aggregate)."""
    grouped, counted = _profiled_columns(load_suite(CHANGES_SUITE))
    aggregates = [F.count(F.lit(1)).alias("_records")] + [
        F.sum(F.col(c).isNull().cast("long")).alias(f"_nulls{i}") for i, c in enumerate(counted)]
    rows = changes.groupBy(*[F.col(c).alias(f"_value{i}") for i, c in enumerate(grouped)]).agg(*aggregates).collect()
    return [{"values": {c: row[f"_value{i}"] for i, c in enumerate(grouped)}, "records": row["_records"],
             "nulls": {c: int(row[f"_nulls{i}"] or 0) for i, c in enumerate(counted)}}
            for row in sorted(rows, key=lambda r: [str(v) for v in r])]


def check_changes(profile: list[dict]) -> dict:
    """The change suite's result (as run_suite gives one) evaluated from a record profile."""
    started = time.monotonic()
    suite = load_suite(CHANGES_SUITE)
    _profiled_columns(suite)
    results = [_check_profiled(exp, profile) for exp in suite["expectations"]]
    return _suite_result(suite["name"], None, results, {"evaluated_from": "the decode's record profile"}, started)


def _check_profiled(exp: dict, profile: list[dict]) -> dict:
    column, records = exp["kwargs"]["column"], sum(p["records"] for p in profile)
    if exp["type"] == NOT_NULL:
        unexpected = sum(p["nulls"].get(column, 0) for p in profile)
        observed = {"element_count": records, "unexpected_count": unexpected,
                    "unexpected_percent": _percent(unexpected, records),
                    "partial_unexpected_list": [None] * min(unexpected, MAX_UNEXPECTED_SHOWN)}
    else:  # IN_SET: nulls are missing values, not unexpected ones (GX's definition)
        allowed = set(exp["kwargs"]["value_set"])
        missing = sum(p["records"] for p in profile if p["values"][column] is None)
        outside = [p for p in profile if p["values"][column] is not None and p["values"][column] not in allowed]
        unexpected = sum(p["records"] for p in outside)
        shown = sorted({str(p["values"][column]) for p in outside})[:MAX_UNEXPECTED_SHOWN]
        observed = {"element_count": records, "missing_count": missing, "unexpected_count": unexpected,
                    "unexpected_percent": _percent(unexpected, records - missing),
                    "partial_unexpected_list": shown}
    return {"expectation": exp["type"], "kwargs": _json_safe(exp["kwargs"]), "success": unexpected == 0,
            "observed": _json_safe(observed, MAX_VALUE_CHARS), "exception": None}


def _percent(part: int, whole: int) -> float:
    return part / whole * 100 if whole else 0.0  # as GX computes it, to the last digit


# ---- public API --------------------------------------------------------------------------------

def validate_state(df: DataFrame, table_id: str, key_columns: list[str]) -> dict:
    """The state suite on one table's state: every key column not null, the key unique."""
    suite = load_suite(STATE_SUITE)
    return run_suite(df, suite["name"], expand_state_suite(suite, key_columns), table=table_id)


def validation_report(results: list[dict]) -> ValidationReport:
    """validation.json: the suites' results, a success when every suite is one."""
    return ValidationReport(success=all(r["success"] for r in results),
                            suites=tuple(SuiteResult.from_json(r) for r in results))


def run_suite(df: DataFrame, suite_name: str, expectations: list[dict], table: str | None) -> dict:
    """Validate df against expectations ({"type", "kwargs"}); a JSON-safe result dict.

    An expectation naming a column the DataFrame lacks is reported failed with an exception
    message (it is a data problem worth an alert, not a crash of the stage); the rest still run.
    """
    started = time.monotonic()
    present = set(df.columns)
    runnable = [e for e in expectations if all(c in present for c in _columns_of(e["kwargs"]))]
    columns = list(dict.fromkeys(c for e in runnable for c in _columns_of(e["kwargs"])))
    narrow, alias = narrow_projection(df, columns)
    real = {a: name for name, a in alias.items()}

    result_of: dict[int, dict] = {}  # id(expectation) -> its summarised GX result
    gx_statistics: dict = {}
    if runnable:
        gx_result = _run_gx(narrow, suite_name, _renamed(runnable, alias), COUNTS_FORMAT)
        gx_statistics = _json_safe(dict(gx_result.statistics))
        for expectation, result in zip(runnable, _results_in_suite_order(gx_result, runnable, alias, real)):
            result_of[id(expectation)] = result
        # examples only where there are some: the expectations that counted unexpected values run again
        found = [e for e in runnable if result_of[id(e)]["observed"].get("unexpected_count")]
        if found:
            again = _run_gx(narrow, suite_name, _renamed(found, alias), RESULT_FORMAT)
            for expectation, result in zip(found, _results_in_suite_order(again, found, alias, real)):
                result_of[id(expectation)] = result

    results = []
    for exp in expectations:
        if id(exp) in result_of:
            results.append(result_of[id(exp)])
        else:
            missing = [c for c in _columns_of(exp["kwargs"]) if c not in present]
            results.append({
                "expectation": exp["type"],
                "kwargs": _json_safe(exp["kwargs"]),
                "success": False,
                "observed": {"missing_columns": missing},
                "exception": f"column(s) not in the DataFrame: {', '.join(map(repr, missing))}",
            })
    return _suite_result(suite_name, table, results, {"gx": gx_statistics}, started)


def _suite_result(suite_name: str, table: str | None, results: list[dict], extra: dict, started: float) -> dict:
    successful = sum(1 for r in results if r["success"])
    log.info("suite %s%s: %d of %d expectations met", suite_name, f" on {table}" if table else "",
             successful, len(results))
    return {
        "suite": suite_name,
        "table": table,
        "success": successful == len(results),
        "results": results,
        "statistics": {
            "evaluated_expectations": len(results),
            "successful_expectations": successful,
            "unsuccessful_expectations": len(results) - successful,
            "success_percent": round(100.0 * successful / len(results), 4) if results else 100.0,
            **extra,
            "seconds": round(time.monotonic() - started, 3),
        },
    }


# ---- GX plumbing ---------------------------------------------------------------------------------
def _context() -> tuple[Any, Any]:
    """The process's ephemeral GX context and its Spark data source (created on first use)."""
    global _gx_context, _gx_source
    if _gx_context is None:
        _gx_imported()
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context = gx.get_context(mode="ephemeral")
        context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        # not persisted: GX's default caches each batch (an in-memory columnar build of every row) for a
        # handful of metric queries that a narrow Parquet scan answers faster (bench/README.md, "Validation")
        _gx_source = context.data_sources.add_spark(name="cdc_spark", persist=False)
        _gx_context = context
    return _gx_context, _gx_source


def _renamed(expectations: list[dict], alias: dict[str, str]) -> list[dict]:
    return [{"type": e["type"], "kwargs": _rename_columns(e["kwargs"], alias)} for e in expectations]


def _run_gx(narrow: DataFrame, suite_name: str, expectations: list[dict], result_format: dict) -> Any:
    _gx_imported()
    import great_expectations as gx
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    with _lock:
        context, source = _context()
        n = next(_call_numbers)
        names = {"asset": f"{suite_name}_asset_{n}", "suite": f"{suite_name}_{n}", "validation": f"{suite_name}_v_{n}"}
        asset = source.add_dataframe_asset(name=names["asset"])
        try:
            batch = asset.add_batch_definition_whole_dataframe("whole")
            suite = gx.ExpectationSuite(name=names["suite"])
            for exp in expectations:
                suite.add_expectation_configuration(ExpectationConfiguration(type=exp["type"], kwargs=exp["kwargs"]))
            suite = context.suites.add(suite)
            definition = context.validation_definitions.add(
                gx.ValidationDefinition(name=names["validation"], data=batch, suite=suite))
            return definition.run(batch_parameters={"dataframe": narrow}, result_format=result_format)
        finally:
            for remove in (lambda: context.validation_definitions.delete(names["validation"]),
                           lambda: context.suites.delete(names["suite"]),
                           lambda: source.delete_asset(names["asset"])):
                try:
                    remove()
                except Exception:  # noqa: BLE001 - not registered because an earlier step failed
                    pass


def _results_in_suite_order(gx_result: Any, runnable: list[dict], alias: dict, real: dict) -> list[dict]:
    """GX results matched back to our expectations (GX may reorder them), with real column names."""
    wanted = [(e["type"], _rename_columns(e["kwargs"], alias)) for e in runnable]
    # the raw results, not to_json_dict(): that turns Decimals into floats and bytes into reprs
    pending = [{"expectation_config": {"type": r.expectation_config.type, "kwargs": dict(r.expectation_config.kwargs)},
                "success": r.success, "result": dict(r.result or {}), "exception_info": r.exception_info}
               for r in gx_result.results]
    ordered = []
    for exp_type, kwargs in wanted:
        match = next((r for r in pending if _same_expectation(r, exp_type, kwargs)), None)
        if match is None:
            raise RuntimeError(f"GX returned no result for {exp_type} {kwargs}")
        pending.remove(match)
        ordered.append(_summarise(match, real))
    return ordered


def _same_expectation(item: dict, exp_type: str, kwargs: dict) -> bool:
    config = item.get("expectation_config") or {}
    got = config.get("kwargs") or {}
    return config.get("type") == exp_type and all(got.get(k) == v for k, v in kwargs.items())


def _summarise(item: dict, real: dict) -> dict:
    config = item.get("expectation_config") or {}
    kwargs = {k: v for k, v in (config.get("kwargs") or {}).items() if k != "batch_id"}
    observed = {k: v for k, v in (item.get("result") or {}).items() if k in OBSERVED_KEYS}
    if "partial_unexpected_list" in observed:
        shown = observed["partial_unexpected_list"] or []
        observed["partial_unexpected_list"] = [
            {real.get(k, k): v for k, v in value.items()} if isinstance(value, dict) else value
            for value in shown[:MAX_UNEXPECTED_SHOWN]
        ]
    return {
        "expectation": config.get("type"),
        "kwargs": _json_safe(_rename_columns(kwargs, real)),
        "success": bool(item.get("success")),
        "observed": _json_safe(observed, MAX_VALUE_CHARS),
        "exception": _exception_message(item.get("exception_info")),
    }


def _exception_message(info: Any) -> str | None:
    """The first error message in GX's exception_info: flat, or keyed by the metric that failed."""
    if not isinstance(info, dict):
        return None
    message = info.get("exception_message")
    if message:
        return str(message).strip().splitlines()[0][:MAX_VALUE_CHARS]
    for nested in info.values():
        found = _exception_message(nested)
        if found:
            return found
    return None


# ---- helpers ---------------------------------------------------------------------------------------
def narrow_projection(df: DataFrame, columns: list[str]) -> tuple[DataFrame, dict[str, str]]:
    """Only the checked columns, renamed c0, c1, ... in order; the DataFrame and name -> alias."""
    alias = {name: f"c{i}" for i, name in enumerate(columns)}
    return df.select(*[F.col(quote_identifier(c)).alias(alias[c]) for c in columns]), alias


def quote_identifier(name: str) -> str:
    """A column name as one Spark SQL identifier, whatever characters it holds."""
    return "`" + name.replace("`", "``") + "`"


def _columns_of(kwargs: dict[str, Any]) -> list[str]:
    columns = [kwargs["column"]] if "column" in kwargs else []
    return columns + list(kwargs.get("column_list") or [])


def _rename_columns(kwargs: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    renamed = dict(kwargs)
    if "column" in renamed:
        renamed["column"] = mapping.get(renamed["column"], renamed["column"])
    if "column_list" in renamed:
        renamed["column_list"] = [mapping.get(c, c) for c in renamed["column_list"]]
    return renamed


def _json_safe(value: Any, max_chars: int | None = None) -> Any:
    """Plain JSON types only: numpy scalars, Decimals, datetimes, bytes and NaN made portable.

    max_chars truncates strings (observed values from the data); names are never truncated.
    """
    if isinstance(value, str):
        return value if max_chars is None or len(value) <= max_chars else value[:max_chars] + "…"
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _json_safe(v, max_chars) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_json_safe(v, max_chars) for v in value]
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return _json_safe(bytes(value).hex(), max_chars)
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        try:
            return _json_safe(item(), max_chars)
        except (TypeError, ValueError):
            pass
    return _json_safe(str(value), max_chars)


# ---- data docs -------------------------------------------------------------------------------------
def render_data_docs(results: list[dict]) -> str:
    """One self-contained HTML page of the suites' results.

    Rendered from our JSON results rather than by GX's site builder (which needs a file context
    and would show the internal column aliases): real column names are shown, and every name and
    value taken from messages is HTML-escaped.
    """
    report = validation_report(results)
    esc = html.escape

    def verdict(ok: Any, yes: str = "met", no: str = "FAILED") -> str:
        return f"<span class='{'ok' if ok else 'fail'}'>{yes if ok else no}</span>"

    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Validation results</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
        ".ok{color:#1a7f37}.fail{color:#cf222e;font-weight:bold}code{white-space:pre-wrap}</style></head><body>",
        f"<h1>Validation results: {verdict(report.success, 'passed')}</h1>",
    ]
    for suite in results:
        stats = suite.get("statistics") or {}
        table = f" &mdash; table <code>{esc(str(suite['table']))}</code>" if suite.get("table") else ""
        parts.append(
            f"<h2>{esc(str(suite.get('suite')))}{table}</h2>"
            f"<p>{verdict(suite.get('success'), 'passed')}: {esc(str(stats.get('successful_expectations', '?')))} of "
            f"{esc(str(stats.get('evaluated_expectations', '?')))} expectations met</p>"
            "<table><tr><th>expectation</th><th>columns</th><th>result</th><th>observed</th></tr>"
        )
        for r in suite.get("results") or []:
            observed = dict(r.get("observed") or {})
            if r.get("exception"):
                observed["exception"] = r["exception"]
            columns = ", ".join(str(c) for c in _columns_of(r.get("kwargs") or {}))
            parts.append(
                f"<tr><td>{esc(str(r.get('expectation')))}</td><td><code>{esc(columns)}</code></td>"
                f"<td>{verdict(r.get('success'))}</td>"
                f"<td><code>{esc(json.dumps(observed, indent=1, sort_keys=True, default=str))}</code></td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)


def build_data_docs(results: list[dict], out_dir: str | Path) -> Path:
    """Write render_data_docs(results) to <out_dir>/validation.html (a local folder); its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    page = out / "validation.html"
    page.write_text(render_data_docs(results), encoding="utf-8")
    return page
