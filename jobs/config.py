"""A pipeline is a YAML file: its schema, its validation, and what each setting means for a run.

One file per pipeline, beside its DAG stub of the same name in Airflow's DAGs folder (``dags/pipelines/``):
jobs.airflow.dags makes its DAG. The blocks follow Flink CDC's YAML pipelines::

    pipeline:   name, schedule, start, owner, tags, retries ...  (the DAG)
    source:     format + where the topics are (Kafka through an Airflow connection, or files)
    sink:       the lake and its Iceberg catalog, snapshot retention
    reconcile:  the source's counts (an Airflow connection or a counts file), lag and tolerance
    alert:      recipients and thresholds
    spark:      the Spark connection and settings
    tables:     per-table settings, matched by table pattern (jobs.model.table_rules), like Flink's ``source-table``

Strings may use ``${NAME}`` or ``${NAME:-default}`` for environment variables (a deployment's paths);
relative paths resolve against ``$CDC_HOME``, else the file's own folder. Secrets never belong in a file:
they come from Airflow connections. Every error names the file, the field and the fix
(:class:`PipelineConfigError`). Light at import (pydantic and PyYAML, which Airflow ships; no pyspark):
the DAG processor imports it on every parse.
"""
from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from jobs import env as environ
from jobs.errors import CREDENTIALS_FIX, mask, uri_credentials
from jobs.formats.registry import names as format_names
from jobs.model.names import pipeline_name_problem
from jobs.model.table_rules import setting_for
from jobs.reconcile.landed_reach import DEFAULT_CAPTURE_DELAY

DEFAULT_PIPELINES_DIR = Path("dags") / "pipelines"  # of the working folder, for the checker
FORMATS = format_names()  # the formats' registry, which imports no pyspark
PIPELINE_SUFFIXES = (".yaml", ".yml")
DOCS = "docs/pipelines.md"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# the variables whose values the DAG's doc and the checker show (a deployment's paths and names); any
# other variable may hold a secret: shown text has its reference ${NAME} instead
SHOWN_ENV = frozenset({"CDC_HOME", "CDC_LAKE", "CDC_ICEBERG_CATALOG", "CDC_DEMO_TOPICS", "CDC_SOURCE_COUNTS",
                       "CDC_PIPELINES_DIR"})


class PipelineConfigError(ValueError):
    """A pipeline file that cannot be used: every line names the file, the field and the fix."""


def parse_duration(text: str) -> timedelta:
    """A duration of a file: jobs.reconcile.checkpoints' syntax, with its unit always written (``6`` reads as hours
    on the command line; in a file it is a mistake)."""
    from jobs.reconcile.checkpoints import CheckpointError
    from jobs.reconcile.checkpoints import parse_duration as seconds

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


def _no_credentials(value: str | None) -> str | None:
    held = uri_credentials(value) if value else None
    if held:
        raise ValueError(f"holds credentials ({held}); fix: {CREDENTIALS_FIX}")
    return value


def _duration_field(value: Any) -> str:
    parse_duration(value)
    return str(value).strip()


class PipelineBlock(_Block):
    name: str
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

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        problem = pipeline_name_problem(value)
        if problem:
            like = re.sub(r"[^A-Za-z0-9_]+", "_", value).strip("_")[:200]
            raise ValueError(f"{problem}; fix: " + (f"rename it, e.g. {like!r}" if like else "name the pipeline"))
        return value

    @field_validator("start", "end", mode="before")
    @classmethod
    def _moment(cls, value: Any) -> Any:
        """One mistake for a bad time, where the union date | datetime would report one per member."""
        if value is None or isinstance(value, date):  # YAML read it as a date or a time already
            return value
        text = str(value).strip()
        try:
            return date.fromisoformat(text) if len(text) <= 10 else datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{value!r} is not a date or a time; fix: write it as 2026-11-01 or "
                             "2026-11-01T06:00:00Z (UTC unless it gives an offset)") from None

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

    _uris = field_validator("files", "connect_s3", "eventhubs_capture")(_no_credentials)


class SinkBlock(_Block):
    lake: str  # a local folder, s3:// or s3a:// URI
    catalog: str | None = None  # a pyiceberg catalog's name (required for an S3 lake); default: SQLite in the lake
    state_buckets: int | None = Field(None, ge=0)
    keep_changes: bool = False
    retain_days: int = Field(7, ge=0)
    retain_last: int = Field(10, ge=1)

    _uris = field_validator("lake")(_no_credentials)


class ReconcileBlock(_Block):
    connection: str | None = None  # an Airflow connection of the source database (common-sql hooks)
    counts: str | None = None  # or a JSON counts file (docs/operations/reconciliation.md, "Counts files")
    max_lag: str | None = "6h"
    count_tolerance: str = "0"
    key_rows_limit: int = Field(10_000, ge=0)
    capture_delay: str = DEFAULT_CAPTURE_DELAY  # a landing read past its end reaches it minus this

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

    _capture_delay = field_validator("capture_delay")(_duration_field)


def _checked_tolerance(value: Any) -> str:
    from jobs.reconcile.checkpoints import CheckpointError, parse_tolerance

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
    match: str = Field(min_length=1)  # a table id, its last part, or a glob: jobs.model.table_rules
    primary_keys: list[str] | None = Field(None, min_length=1)
    history: bool | None = None
    count_tolerance: str | None = None
    key_rows_limit: int | None = Field(None, ge=0)
    # the comparison of values (docs/operations/reconciliation.md, "Values"): columns whose values no report
    # shows, and the largest absolute difference of a number column that is no mismatch
    sensitive_columns: list[str] | None = None
    value_tolerances: dict[str, float] | None = None

    @field_validator("count_tolerance")
    @classmethod
    def _tolerance(cls, value: str | None) -> str | None:
        return None if value is None else _checked_tolerance(value)

    @field_validator("value_tolerances")
    @classmethod
    def _value_tolerances(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        bad = [c for c, t in (value or {}).items() if not t >= 0 or t == float("inf")]
        if bad:
            raise ValueError(f"a tolerance is a finite number of at least 0 (column {', '.join(bad)}); "
                             "fix: e.g. value_tolerances: {price: 0.005}")
        return value


class PipelineConfig(_Block):
    pipeline: PipelineBlock
    source: SourceBlock
    sink: SinkBlock
    reconcile: ReconcileBlock = ReconcileBlock()
    alert: AlertBlock = AlertBlock()
    spark: SparkBlock = SparkBlock()
    tables: list[TableBlock] = []
    # field path -> the string as shown, where it read a variable outside SHOWN_ENV (see shown)
    _shown_values: dict[tuple[str, ...], str] = PrivateAttr(default_factory=dict)

    def shown(self) -> PipelineConfig:
        """This pipeline as the UI and the checker show it: a value that read a variable outside SHOWN_ENV
        has the reference ``${NAME}`` in place of what it read (mask the text made of it as well)."""
        out: Any = self
        for path, text in self._shown_values.items():
            out = _replaced(out, path, text)
        return out

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
        """``setting`` of one table: the most specific entry naming it (jobs.model.table_rules)."""
        return setting_for(self.per_table(setting), table_id, default)


def _replaced(value: Any, path: tuple[str, ...], text: str) -> Any:
    """``value`` (a model, a list or a dict of the pipeline) with the item at ``path`` replaced by ``text``."""
    if not path:
        return text
    head, rest = path[0], path[1:]
    if isinstance(value, BaseModel):
        return value.model_copy(update={head: _replaced(getattr(value, head), rest, text)})
    if isinstance(value, list):
        return [_replaced(v, rest, text) if str(i) == head else v for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _replaced(v, rest, text) if k == head else v for k, v in value.items()}
    return value


# ---- reading files --------------------------------------------------------------------------------
def expand_env(value: Any, env: dict[str, str], where: list[str],
               hidden: dict[tuple[str, ...], tuple[str, str]] | None = None) -> Any:
    """``${NAME}`` / ``${NAME:-default}`` in every string of a parsed YAML document; ``hidden``, when
    given, collects each string that read a variable outside SHOWN_ENV: its field path -> (the string,
    the string as shown, with the reference in place of that variable's value)."""
    if isinstance(value, dict):
        return {k: expand_env(v, env, [*where, str(k)], hidden) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, env, [*where, str(i)], hidden) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def one(m: re.Match, shown: bool = False) -> str:
        if m.group(1) in env:
            return m.group(0) if shown and m.group(1) not in SHOWN_ENV else env[m.group(1)]
        if m.group(2) is not None:
            return m.group(2)
        raise PipelineConfigError(f"{'.'.join(where)}: environment variable {m.group(1)} is not set; "
                                  f"fix: set it, or give a default as ${{{m.group(1)}:-value}}")
    expanded = _ENV_REF.sub(one, value)
    if hidden is not None:
        as_shown = _ENV_REF.sub(lambda m: one(m, shown=True), value)
        if as_shown != expanded:
            hidden[tuple(where)] = (expanded, as_shown)
    return expanded


def load_pipeline(path: str | Path, env: dict[str, str] | None = None) -> PipelineConfig:
    """The validated pipeline of one file; :class:`PipelineConfigError` names what to fix. Read once per
    process while the file and the variables it reads stay as they are (an Airflow worker parses the DAG
    stub, then runs the task, in one process)."""
    path = Path(path)
    env = environ.environment() if env is None else dict(env)
    try:
        stat = path.stat()
    except OSError:
        return _load(path, env)[0]  # the error read_document names
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    loaded = _LOADED.get(key)
    if loaded is None or any(env.get(name) != value for name, value in loaded[1].items()):
        if len(_LOADED) >= 64:
            _LOADED.clear()
        config, names = _load(path, env)
        loaded = _LOADED[key] = (config, {name: env.get(name) for name in names})
    return loaded[0]


# file (path, change time, size) -> its pipeline and the values of the variables it read
_LOADED: dict[tuple[Any, ...], tuple[PipelineConfig, dict[str, str | None]]] = {}


def _load(path: Path, env: dict[str, str]) -> tuple[PipelineConfig, set[str]]:
    """The pipeline of a file, and the variables it read (its ``${NAME}``s and CDC_HOME)."""
    document = read_document(path)
    if not isinstance(document, dict):
        raise PipelineConfigError(f"{path}: expected a mapping with blocks pipeline, source, sink ... "
                                  f"(see {DOCS}); fix: start from dags/pipelines/demo.yaml")
    names = {"CDC_HOME", *(m.group(1) for m in _ENV_REF.finditer(json.dumps(document, default=str)))}
    hidden: dict[tuple[str, ...], tuple[str, str]] = {}
    try:
        document = expand_env(document, env, [], hidden)
        config = PipelineConfig.model_validate(document)
    except PipelineConfigError as exc:
        raise PipelineConfigError(f"{path}: {exc}") from None
    except ValidationError as exc:
        lines = (_shown_line(f"{path}: {line}", hidden.values()) for line in _explain(exc))
        raise PipelineConfigError("\n".join(lines)) from None
    config._shown_values = {where: shown for where, (_, shown) in hidden.items()}
    return resolve_paths(config, Path(env.get("CDC_HOME") or path.resolve().parent), path), names


def _shown_line(line: str, hidden: Iterable[tuple[str, str]]) -> str:
    """An error line as it may be shown: a value read from a hidden variable as its reference, masked."""
    for expanded, shown in sorted(hidden, key=lambda pair: -len(pair[0])):
        if expanded:
            line = line.replace(expanded, shown)
    return mask(line)


# ---- what reading a file may cost ------------------------------------------------------------------
# The DAG processor reads every pipeline file in one parse: a file that took minutes (a 600-byte alias
# bomb, a 50 MB file) would hold every pipeline's DAG back. Real files are a few kilobytes.
MAX_FILE_BYTES = 256 << 10
MAX_VALUES = 100_000  # once aliases are expanded
MAX_DEPTH = 50


def read_document(path: Path) -> Any:
    """The YAML document of a pipeline file, refused before it costs much: a file over MAX_FILE_BYTES,
    values nested deeper than MAX_DEPTH, aliases that expand past MAX_VALUES values."""
    if not path.is_file():  # a FIFO or a device would block the parse, a folder cannot be read
        what = "no such file" if not path.exists() else "not a regular file"
        raise PipelineConfigError(f"{path}: cannot be read ({what}); fix: a pipeline file is a .yaml file")
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise PipelineConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_FILE_BYTES:
        raise PipelineConfigError(f"{path}: {path.stat().st_size:,} bytes, more than a pipeline file's "
                                  f"{MAX_FILE_BYTES >> 10} KiB; fix: keep only the pipeline's settings in it "
                                  "(a pipeline file is a few kilobytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PipelineConfigError(f"{path}: not UTF-8 text (byte {exc.start}); fix: save it as UTF-8") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        problem = None if node is None else _costly(node)
        if problem:
            raise PipelineConfigError(f"{path}: {problem}")
        return None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise PipelineConfigError(f"{path}: not valid YAML{at}: {getattr(exc, 'problem', None) or exc}; "
                                  "fix: check the indentation and quoting there") from None
    finally:
        loader.dispose()


def _costly(root: yaml.Node) -> str | None:
    """Why building the document of ``root`` (a composed YAML graph, where every alias is the node it
    names) would cost too much, or None. Walked without recursion, each node once."""
    values: dict[int, int] = {}  # id(node) -> values it expands to
    height: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        children = _children(node)
        if children_done:
            on_path.discard(id(node))
            values[id(node)] = 1 + sum(values[id(c)] for c in children)
            height[id(node)] = 1 + max((height[id(c)] for c in children), default=0)
            if height[id(node)] > MAX_DEPTH:
                return f"values nested more than {MAX_DEPTH} deep; fix: a pipeline file's settings nest a few levels"
            if values[id(node)] > MAX_VALUES or len(values) > MAX_VALUES:
                return (f"more than {MAX_VALUES:,} values, each alias (*name) counted as the values it repeats; "
                        "fix: keep only the pipeline's settings, with fewer anchors and aliases")
        elif id(node) in on_path:
            return "a YAML alias refers to a value holding itself; fix: an alias (*name) must follow its anchor's value"
        elif id(node) not in values:
            on_path.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in children)
    return None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


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
        msg = _plain(msg)  # a validator's message may carry its own fix
        lines.append(f"{field}: {msg}" + ("" if "; fix: " in msg else f"; fix: {fix}"))
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
    return os.path.normpath(home / value)


def resolve_paths(config: PipelineConfig, home: Path, path: Path) -> PipelineConfig:
    """Relative local paths made absolute against ``home`` ($CDC_HOME, else the file's folder); an S3 lake
    needs a named catalog."""
    source = config.source.model_copy(update={n: _local(getattr(config.source, n), home)
                                              for n in ("files", "connect_s3", "eventhubs_capture")})
    sink = config.sink.model_copy(update={"lake": _local(config.sink.lake, home)})
    if sink.lake.startswith(("s3://", "s3a://")) and not sink.catalog:
        raise PipelineConfigError(f"{path}: sink.catalog: an S3 lake needs a pyiceberg catalog (SQLite cannot live "
                                  "on S3); fix: name one configured for pyiceberg, e.g. catalog: lake_catalog")
    reconcile = config.reconcile.model_copy(update={"counts": _local(config.reconcile.counts, home)})
    return config.model_copy(update={"source": source, "sink": sink, "reconcile": reconcile})


def dag_stub(path: str | Path) -> Path:
    """The DAG stub of a pipeline file: the Python file of its name beside it (jobs.airflow.dags)."""
    return Path(path).with_suffix(".py")


def pipeline_files(folder: str | Path | None = None) -> list[Path]:
    """The pipeline files of a folder (``$CDC_PIPELINES_DIR``, else dags/pipelines/ of the working folder), in
    name order."""
    folder = Path(folder or environ.text("CDC_PIPELINES_DIR") or DEFAULT_PIPELINES_DIR)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in PIPELINE_SUFFIXES and not p.name.startswith("."))


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.config [FILE...]``: each file's resolved settings (stdout), or its
    mistakes (stderr, exit 1); exit 2 for unusable arguments."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m jobs.config",
        description="Check pipeline files as the DAG processor reads them: print what each resolves to (values "
                    "of variables outside an allow-list as ${NAME}, secrets masked), or each mistake with its "
                    "file, field and fix; also that the local folders and files it reads exist.")
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="pipeline files (default: every .yaml of $CDC_PIPELINES_DIR, else dags/pipelines/)")
    args = parser.parse_args(argv)
    paths = args.files or [str(p) for p in pipeline_files()]
    if not paths:
        print("no pipeline file found (give files, or set CDC_PIPELINES_DIR)", file=sys.stderr)
        return 1
    failed = False
    for path in paths:
        try:
            config = load_pipeline(path)
        except PipelineConfigError as exc:
            print(exc, file=sys.stderr)
            failed = True
            continue
        mistakes, notes = location_problems(config, Path(path))
        if not dag_stub(path).is_file():
            notes.append(f"{path}: no DAG stub {dag_stub(path).name} beside it: Airflow makes no DAG of it; fix: "
                         "copy dags/pipelines/demo.py there (every pipeline's stub is the same)")
        for line in [*mistakes, *notes]:
            print(line, file=sys.stderr)
        failed = failed or bool(mistakes)
        shown = {"file": str(path), "dag_id": config.dag_id, **config.shown().model_dump(mode="json")}
        print(json.dumps(_masked(shown), indent=2))
    return 1 if failed else 0


_READ = {"files": ("folder", "land or copy the topic dumps there"),
         "connect_s3": ("folder", "point it at the sink's output"),
         "eventhubs_capture": ("folder", "point it at the capture files"),
         "counts": ("file", "write the counts file there (docs/operations/reconciliation.md, Counts files)")}


def location_problems(config: PipelineConfig, path: Path) -> tuple[list[str], list[str]]:
    """What the checker says of the locations a pipeline reads: the local ones missing (mistakes), and
    the ones it cannot check without credentials (notes). Not part of loading: the DAG processor may run
    where the workers' paths do not exist."""
    mistakes: list[str] = []
    notes: list[str] = []
    shown = config.shown()
    for block, field in (("source", "files"), ("source", "connect_s3"), ("source", "eventhubs_capture"),
                         ("reconcile", "counts")):
        value = getattr(getattr(config, block), field)
        if value is None:
            continue
        where = f"{path}: {block}.{field}: {mask(str(getattr(getattr(shown, block), field)))}"
        kind, fix = _READ[field]
        if "://" in value:
            notes.append(f"{where}: not checked: reading S3 needs the credentials the run has, which this check "
                         "does not use")
        elif not (Path(value).is_dir() if kind == "folder" else Path(value).is_file()):
            mistakes.append(f"{where}: no such {kind}; fix: {fix}, or correct the path (a relative one resolves "
                            "against $CDC_HOME, else the file's folder)")
    return mistakes, notes


def _masked(value: Any) -> Any:
    """Every string of a JSON document through jobs.errors.mask."""
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return mask(value) if isinstance(value, str) else value


if __name__ == "__main__":
    raise SystemExit(main())
