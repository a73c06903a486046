"""A pipeline is a YAML file: its schema, its validation, and what each setting means for a run.

One file per pipeline in the pipelines folder (``dags/pipelines/`` or ``$CDC_PIPELINES_DIR``); the loader
(jobs.pipeline_dags) makes one DAG of each. The blocks follow Flink CDC's YAML pipelines::

    pipeline:   name, schedule, start, owner, tags, retries ...  (the DAG)
    source:     format + where the topics are (Kafka through an Airflow connection, or files)
    sink:       the lake and its Iceberg catalog, snapshot retention
    reconcile:  the source's counts (an Airflow connection or a counts file), lag and tolerance
    alert:      recipients and thresholds
    spark:      the Spark connection and settings
    tables:     per-table settings, matched by table pattern (jobs.table_rules), like Flink's ``source-table``

Strings may use ``${NAME}`` or ``${NAME:-default}`` for environment variables (a deployment's paths);
relative paths resolve against ``$CDC_HOME`` (default: the repository). Secrets never belong in a file:
they come from Airflow connections. Every error names the file, the field and the fix
(:class:`PipelineConfigError`). Light at import (pydantic and PyYAML, which Airflow ships; no pyspark):
the DAG processor imports it on every parse.
"""
from __future__ import annotations

import difflib
import os
import re
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from jobs.table_rules import setting_for

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PIPELINES_DIR = REPO / "dags" / "pipelines"
# the decoders' registry (jobs.decoders) imports pyspark; tests/unit/test_pipeline_config.py keeps the two equal
FORMATS = ("auto", "canal", "dataworks", "debezium", "dts_avro", "maxwell", "ogg", "qlik", "shareplex")
PIPELINE_SUFFIXES = (".yaml", ".yml")
DOCS = "docs/pipelines.md"
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_]*$"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class PipelineConfigError(ValueError):
    """A pipeline file that cannot be used: every line names the file, the field and the fix."""


def parse_duration(text: str) -> timedelta:
    """A duration of a file: jobs.checkpoints' syntax, with its unit always written (``6`` reads as hours
    on the command line; in a file it is a mistake)."""
    from jobs.checkpoints import CheckpointError
    from jobs.checkpoints import parse_duration as seconds

    if not str(text).strip()[-1:].isalpha():
        raise ValueError(f"{text!r} is not a duration: a number and a unit, e.g. 90s, 2m, 6h, 1d")
    try:
        return timedelta(seconds=seconds(text))
    except CheckpointError:
        raise ValueError(f"{text!r} is not a duration: a number and a unit, e.g. 90s, 2m, 6h, 1d") from None


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _empty_is_unset(cls, data: Any) -> Any:
        """An empty value of an optional setting (``${VAR:-}``) means "not set"."""
        if not isinstance(data, dict):
            return data
        return {k: None if v == "" and k in cls.model_fields and cls.model_fields[k].default is None else v
                for k, v in data.items()}


def _duration_field(value: Any) -> str:
    parse_duration(value)
    return str(value).strip()


class PipelineBlock(_Block):
    name: str = Field(pattern=_NAME, max_length=200)
    description: str = ""
    owner: str = "data-platform"
    tags: list[Annotated[str, Field(min_length=1, max_length=100)]] = []  # Airflow's limit
    schedule: str = "0 0 * * *"
    start: date | datetime
    end: date | datetime | None = None
    catchup: bool = False
    paused: bool | None = None  # the DAG's state when Airflow first sees it; None: Airflow's default
    retries: int = Field(1, ge=0, le=20)
    retry_delay: str = "2m"
    execution_timeout: str = "2h"
    # intervals fold in order (max_active_runs=1, depends_on_past): not a setting

    _durations = field_validator("retry_delay", "execution_timeout")(_duration_field)

    @model_validator(mode="after")
    def _window(self) -> PipelineBlock:
        if self.end is not None and str(self.end) < str(self.start):
            raise ValueError(f"end {self.end} is before start {self.start}")
        return self

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        from croniter import croniter

        if not croniter.is_valid(value):
            raise ValueError(f"{value!r} is not a cron expression: five fields such as '0 0 * * *', or @daily, @hourly")
        return value


class KafkaSource(_Block):
    connection: str | None = "kafka_default"  # the apache-kafka provider's connection: bootstrap servers, SASL/SSL
    bootstrap: str | None = None  # over the connection's bootstrap.servers (without a connection: plain Kafka)
    topics: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _reachable(self) -> KafkaSource:
        if not (self.connection or self.bootstrap):
            raise ValueError("give a connection (its extra holds bootstrap.servers and the security settings) "
                             "or a bootstrap")
        return self


class SourceBlock(_Block):
    format: Literal[FORMATS]  # type: ignore[valid-type]
    message_shape: Literal["auto", "envelope", "unwrapped"] = "auto"
    kafka: KafkaSource | None = None
    files: str | None = None  # Parquet topic dumps (Spark's Kafka schema): a folder or s3:// prefix
    connect_s3: str | None = None  # Kafka Connect S3 sink output
    eventhubs_capture: str | None = None  # Azure Event Hubs Capture Avro files
    topics: list[str] = []  # with files, connect_s3 or eventhubs_capture: only these topics (default: all)

    @model_validator(mode="after")
    def _one_location(self) -> SourceBlock:
        given = [n for n in self.locations() if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(self.locations())} (got {', '.join(given) or 'none'})")
        if self.kafka is not None and self.topics:
            raise ValueError("with kafka, list the topics under kafka.topics")
        return self

    @staticmethod
    def locations() -> tuple[str, ...]:
        return ("kafka", "files", "connect_s3", "eventhubs_capture")

    @property
    def location(self) -> str:
        return next(n for n in self.locations() if getattr(self, n) is not None)


class SinkBlock(_Block):
    lake: str  # a local folder, s3:// or s3a:// URI
    catalog: str | None = None  # a pyiceberg catalog's name (required for an S3 lake); default: SQLite in the lake
    state_buckets: int | None = Field(None, ge=0)
    keep_changes: bool = False
    retain_days: int = Field(7, ge=0)
    retain_last: int = Field(10, ge=1)


class ReconcileBlock(_Block):
    connection: str | None = None  # an Airflow connection of the source database (common-sql hooks)
    counts: str | None = None  # or a JSON counts file (docs/operations.md, "Counts files")
    max_lag: str | None = "6h"
    count_tolerance: str = "0"
    key_rows_limit: int = Field(10_000, ge=0)

    @model_validator(mode="after")
    def _one_source(self) -> ReconcileBlock:
        if self.connection and self.counts:
            raise ValueError("give connection or counts, not both")
        return self

    @field_validator("counts")
    @classmethod
    def _file(cls, value: str | None) -> str | None:
        if value and "://" in value:
            raise ValueError("a counts file's path, not a URL; fix: a database is an Airflow connection "
                             "(reconcile.connection), so its password never sits in a file")
        return value

    @field_validator("max_lag")
    @classmethod
    def _lag(cls, value: str | None) -> str | None:
        return None if value in (None, "") else _duration_field(value)

    @field_validator("count_tolerance")
    @classmethod
    def _tolerance(cls, value: str) -> str:
        return _checked_tolerance(value)


def _checked_tolerance(value: Any) -> str:
    from jobs.checkpoints import CheckpointError, parse_tolerance

    try:
        parse_tolerance(str(value))
    except CheckpointError as exc:
        raise ValueError(str(exc)) from None
    return str(value)


class AlertBlock(_Block):
    to: list[str] = []
    quarantine_threshold: float = Field(0.0, ge=0, le=1)
    smtp_connection: str = "smtp_default"
    from_email: str | None = None
    on_task_failure: bool = True  # also mail ``to`` when a task fails for good (once, not per try)

    @field_validator("to")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        bad = [a for a in value if not re.fullmatch(r"[^@\s,]+@[^@\s,]+", a)]
        if bad:
            raise ValueError(f"not an email address: {', '.join(bad)}")
        return value


class SparkBlock(_Block):
    connection: str = "spark_default"  # the apache-spark provider's connection: master, deploy mode, queue
    conf: dict[str, str | int | float | bool] = {}
    packages: list[str] = []  # Maven coordinates (hadoop-aws for an S3 lake ...)
    ship_package: bool = False  # executors on other machines: send the jobs package and its jar with the job
    executor_python: str | None = None  # the executors' interpreter (spark.pyspark.python)


class TableBlock(_Block):
    match: str = Field(min_length=1)  # a table id, its last part, or a glob: jobs.table_rules
    primary_keys: list[str] | None = Field(None, min_length=1)
    history: bool | None = None
    count_tolerance: str | None = None
    key_rows_limit: int | None = Field(None, ge=0)

    @field_validator("count_tolerance")
    @classmethod
    def _tolerance(cls, value: str | None) -> str | None:
        return None if value is None else _checked_tolerance(value)


class PipelineConfig(_Block):
    pipeline: PipelineBlock
    source: SourceBlock
    sink: SinkBlock
    reconcile: ReconcileBlock = ReconcileBlock()
    alert: AlertBlock = AlertBlock()
    spark: SparkBlock = SparkBlock()
    tables: list[TableBlock] = []

    @property
    def name(self) -> str:
        return self.pipeline.name

    @property
    def dag_id(self) -> str:
        return f"cdc_{self.pipeline.name}"

    def per_table(self, setting: str) -> tuple[tuple[str, Any], ...]:
        """(pattern, value) of every ``tables`` entry that sets ``setting``, in the file's order."""
        return tuple((t.match, getattr(t, setting)) for t in self.tables if getattr(t, setting) is not None)

    def table_setting(self, setting: str, table_id: str, default: Any = None) -> Any:
        """``setting`` of one table: the most specific entry naming it (jobs.table_rules)."""
        return setting_for(self.per_table(setting), table_id, default)


# ---- reading files --------------------------------------------------------------------------------
def expand_env(value: Any, env: dict[str, str], where: list[str]) -> Any:
    """``${NAME}`` / ``${NAME:-default}`` in every string of a parsed YAML document."""
    if isinstance(value, dict):
        return {k: expand_env(v, env, [*where, str(k)]) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, env, [*where, str(i)]) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def one(m: re.Match) -> str:
        if m.group(1) in env:
            return env[m.group(1)]
        if m.group(2) is not None:
            return m.group(2)
        raise PipelineConfigError(f"{'.'.join(where)}: environment variable {m.group(1)} is not set; "
                                  f"fix: set it, or give a default as ${{{m.group(1)}:-value}}")
    return _ENV_REF.sub(one, value)


def load_pipeline(path: str | Path, env: dict[str, str] | None = None) -> PipelineConfig:
    """The validated pipeline of one file; :class:`PipelineConfigError` names what to fix."""
    path = Path(path)
    env = dict(os.environ if env is None else env)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PipelineConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise PipelineConfigError(f"{path}: not valid YAML{at}: {getattr(exc, 'problem', None) or exc}; "
                                  "fix: check the indentation and quoting there") from None
    if not isinstance(document, dict):
        raise PipelineConfigError(f"{path}: expected a mapping with blocks pipeline, source, sink ... "
                                  f"(see {DOCS}); fix: start from dags/pipelines/demo.yaml")
    try:
        document = expand_env(document, env, [])
        config = PipelineConfig.model_validate(document)
    except PipelineConfigError as exc:
        raise PipelineConfigError(f"{path}: {exc}") from None
    except ValidationError as exc:
        raise PipelineConfigError("\n".join(f"{path}: {line}" for line in _explain(exc))) from None
    return resolve_paths(config, Path(env.get("CDC_HOME") or REPO), path)


def _explain(exc: ValidationError) -> list[str]:
    lines = []
    for error in exc.errors(include_url=False):
        loc = [str(p) for p in error["loc"]]
        field = ".".join(loc) or "(top level)"
        kind, msg = error["type"], error["msg"]
        if kind == "missing":
            fix = f"add `{loc[-1]}:` (see {DOCS})"
        elif kind == "extra_forbidden":
            known = _known_fields(loc[:-1])
            close = difflib.get_close_matches(loc[-1], known, n=1)
            fix = (f"did you mean `{close[0]}`?" if close else f"remove it; known here: {', '.join(known)}")
            msg = "unknown field"
        elif kind == "literal_error":
            expected = re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", "")))
            close = difflib.get_close_matches(str(error.get("input")), expected, n=1)
            msg = f"{error.get('input')!r} is not one of {', '.join(expected)}"
            fix = f"did you mean `{close[0]}`?" if close else "use one of those"
        elif kind == "too_short":
            fix = f"list at least one, or remove `{loc[-1]}`"
        else:
            fix = f"see {DOCS} for what `{loc[-1] if loc else 'it'}` takes"
        lines.append(f"{field}: {_plain(msg)}; fix: {fix}")
    return lines


def _plain(msg: str) -> str:
    return msg.removeprefix("Value error, ")


def _known_fields(loc: list[str]) -> list[str]:
    model: Any = PipelineConfig
    for part in loc:
        if part.isdigit():
            continue
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field is None:
            return []
        annotation = field.annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        for arg in list(candidates):
            candidates += list(getattr(arg, "__args__", ()))
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if model is None:
            return []
    return sorted(model.model_fields)


def _local(value: str | None, home: Path) -> str | None:
    if value is None or "://" in value or Path(value).is_absolute():
        return value
    return str(home / value)


def resolve_paths(config: PipelineConfig, home: Path, path: Path) -> PipelineConfig:
    """Relative local paths made absolute against ``home``; an S3 lake needs a named catalog."""
    source = config.source.model_copy(update={n: _local(getattr(config.source, n), home)
                                              for n in ("files", "connect_s3", "eventhubs_capture")})
    sink = config.sink.model_copy(update={"lake": _local(config.sink.lake, home)})
    if sink.lake.startswith(("s3://", "s3a://")) and not sink.catalog:
        raise PipelineConfigError(f"{path}: sink.catalog: an S3 lake needs a pyiceberg catalog (SQLite cannot live "
                                  "on S3); fix: name one configured for pyiceberg, e.g. catalog: lake_catalog")
    reconcile = config.reconcile.model_copy(update={"counts": _local(config.reconcile.counts, home)})
    return config.model_copy(update={"source": source, "sink": sink, "reconcile": reconcile})


def pipeline_files(folder: str | Path | None = None) -> list[Path]:
    """The pipeline files of a folder (``$CDC_PIPELINES_DIR``, else dags/pipelines/), in name order."""
    folder = Path(folder or os.environ.get("CDC_PIPELINES_DIR") or DEFAULT_PIPELINES_DIR)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in PIPELINE_SUFFIXES and not p.name.startswith("."))


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.pipeline_config FILE...``: each file's resolved settings, or its mistakes (exit 1)."""
    import json
    import sys

    paths = (sys.argv[1:] if argv is None else argv) or [str(p) for p in pipeline_files()]
    failed = False
    for path in paths:
        try:
            config = load_pipeline(path)
        except PipelineConfigError as exc:
            print(exc, file=sys.stderr)
            failed = True
            continue
        print(json.dumps({"file": str(path), "dag_id": config.dag_id, **config.model_dump(mode="json")}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
