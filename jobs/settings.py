"""A run's settings, parsed once into one typed, frozen object and handed to the stages (as Flink CDC's
composer is handed its ``PipelineDef``): where the lake and its catalog are, which run, and each stage's
part (:class:`TransformSettings`, :class:`ReconcileSettings`, :class:`AlertSettings`,
:class:`ExpireSettings`).

Built from a pipeline file and the run's interval (:meth:`RunSettings.from_pipeline`: the DAG's tasks and
its spark-submit'ed transform, which gets the file and the interval, never the file's rules as flags), or
from the command line's flags (:meth:`RunSettings.from_args`), where ``--pipeline-file`` gives the file and
each flag given wins over it. A list a flag gives (``--primary-keys``, ``--history-of`` ...) replaces the
file's list.

Light at import (the DAG processor imports it through jobs.airflow): what a stage takes (DecodeOptions,
ReconcileOptions, a Lake) is made by the methods that need it.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from jobs import env
from jobs.config import PipelineConfig, PipelineConfigError, load_pipeline, parse_duration
from jobs.model.intervals import IntervalError, checked, run_id_for


class SettingsError(ValueError):
    """Settings that cannot make a run: one line naming the flag or the file's field (exit 2)."""


@dataclass(frozen=True)
class TransformSettings:
    """decode -> fold + publish -> validate: what the run reads, how it decodes, what the fold keeps."""

    fmt: str | None = None
    raw: tuple[str, ...] = ()  # none: the folders landed for the run's interval (jobs.land.command.landed_folders)
    topics: tuple[str, ...] = ()  # with no raw, only these topics' folders (none: every topic landed)
    message_shape: str = "auto"
    primary_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (table pattern, key columns), in order
    history: tuple[tuple[str, bool], ...] = ()  # (table pattern, on): which tables keep an SCD2 history
    state_buckets: int | None = None  # a new table's key-hash buckets; None: jobs.iceberg.write's default
    keep_changes: bool = False

    def decode_options(self):
        """The decoders' options: each table's primary key under every form a table id may give it."""
        from jobs.formats import DecodeOptions
        from jobs.model.record import table_id_forms
        from jobs.model.table_rules import is_glob

        keys: dict[str, tuple[str, ...]] = {}
        for table, columns in self.primary_keys:
            # a glob over whole table ids (jobs.model.table_rules) as written; a name as in the source or
            # as in the table id: each part in its table-id form (jobs.model.record)
            for form in (table,) if is_glob(table) else table_id_forms(table.split(".")):
                keys[form] = columns
        shape = None if self.message_shape == "auto" else self.message_shape
        return DecodeOptions(primary_keys=keys, message_shape=shape)


@dataclass(frozen=True)
class ReconcileSettings:
    """The source's counts and how they are judged; None: the reconcile stage's default."""

    source_counts: str | None = None  # a counts file, a SQLAlchemy URL, or conn:<Airflow connection>
    count_tolerance: str | None = None  # ROWS[,PCT%]
    max_lag_s: float | None = None
    checked_at: datetime | None = None  # when checkpoints' waits are measured (the interval's end in the DAG)
    key_rows_limit: int | None = None
    capture_delay_s: float | None = None
    table_tolerances: tuple[tuple[str, str], ...] = ()  # (table pattern, tolerance), in order
    table_key_rows_limits: tuple[tuple[str, int], ...] = ()
    table_sensitive_columns: tuple[tuple[str, tuple[str, ...]], ...] = ()
    table_value_tolerances: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()

    def options(self, fmt: str | None):
        """The reconcile stage's options for a pipeline of format ``fmt``."""
        from jobs.reconcile.checkpoints import parse_time, parse_tolerance
        from jobs.reconcile.stage import ReconcileOptions

        given = {"key_rows_limit": self.key_rows_limit, "capture_delay_s": self.capture_delay_s}
        return ReconcileOptions(
            fmt=fmt, tolerance=parse_tolerance(self.count_tolerance) if self.count_tolerance else None,
            max_lag_s=self.max_lag_s, as_of=parse_time(self.checked_at.isoformat()) if self.checked_at else None,
            table_tolerances=tuple((p, parse_tolerance(t)) for p, t in self.table_tolerances),
            table_key_rows_limits=self.table_key_rows_limits, table_sensitive_columns=self.table_sensitive_columns,
            table_value_tolerances=self.table_value_tolerances, **{k: v for k, v in given.items() if v is not None})


@dataclass(frozen=True)
class AlertSettings:
    to: tuple[str, ...] = ()
    quarantine_threshold: float = 0.0
    smtp_connection: str | None = None  # an Airflow connection (the DAG); None: SMTP_* or smtp_default
    from_email: str | None = None


@dataclass(frozen=True)
class ExpireSettings:
    as_of: datetime | None = None  # the time the retention counts back from (the interval's end in the DAG)
    retain_days: int | None = None  # None: jobs.iceberg.expire's default
    retain_last: int | None = None

    def retention(self) -> tuple[int, int]:
        """(days, newest snapshots kept), the expire stage's defaults where unset."""
        from jobs.iceberg.expire import DEFAULT_RETAIN_DAYS, DEFAULT_RETAIN_LAST

        return (DEFAULT_RETAIN_DAYS if self.retain_days is None else self.retain_days,
                DEFAULT_RETAIN_LAST if self.retain_last is None else self.retain_last)


@dataclass(frozen=True)
class RunSettings:
    """Everything one run of a pipeline needs."""

    lake: str
    pipeline: str
    run_id: str
    catalog: str | None = None  # a pyiceberg catalog's name; None: the SQLite catalog inside the lake
    start: datetime | None = None  # the run's interval, where it was given as one
    end: datetime | None = None
    transform: TransformSettings = field(default_factory=TransformSettings)
    reconcile: ReconcileSettings = field(default_factory=ReconcileSettings)
    alert: AlertSettings = field(default_factory=AlertSettings)
    expire: ExpireSettings = field(default_factory=ExpireSettings)

    def lake_at(self):
        """The run's lake, with its catalog (jobs.lake.layout.Lake)."""
        from jobs.lake.layout import Lake

        return Lake.at(self.lake, self.catalog)

    @classmethod
    def from_pipeline(cls, cfg: PipelineConfig, window: tuple[datetime, datetime]) -> RunSettings:
        """The settings of the run of ``cfg`` over ``window`` [start, end)."""
        start, end = checked(*window)
        tables, source, r = cfg.per_table, cfg.source, cfg.reconcile
        counts = f"conn:{r.connection}" if r.connection else r.counts
        return cls(
            lake=cfg.sink.lake, pipeline=cfg.name, run_id=run_id_for(start, end), catalog=cfg.sink.catalog,
            start=start, end=end,
            transform=TransformSettings(
                fmt=source.format, topics=tuple(source.kafka.topics if source.kafka else source.topics),
                message_shape=source.message_shape,
                primary_keys=tuple((p, tuple(c)) for p, c in tables("primary_keys")), history=tables("history"),
                state_buckets=cfg.sink.state_buckets, keep_changes=cfg.sink.keep_changes),
            reconcile=ReconcileSettings(
                source_counts=counts, count_tolerance=r.count_tolerance,
                max_lag_s=parse_duration(r.max_lag).total_seconds() if r.max_lag else None, checked_at=end,
                key_rows_limit=r.key_rows_limit, capture_delay_s=parse_duration(r.capture_delay).total_seconds(),
                table_tolerances=tables("count_tolerance"), table_key_rows_limits=tables("key_rows_limit"),
                table_sensitive_columns=tuple((p, tuple(c)) for p, c in tables("sensitive_columns")),
                table_value_tolerances=tuple((p, tuple(sorted(t.items()))) for p, t in tables("value_tolerances"))),
            alert=AlertSettings(to=tuple(cfg.alert.to), quarantine_threshold=cfg.alert.quarantine_threshold,
                                smtp_connection=cfg.alert.smtp_connection, from_email=cfg.alert.from_email),
            expire=ExpireSettings(as_of=end, retain_days=cfg.sink.retain_days, retain_last=cfg.sink.retain_last))

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunSettings:
        """The settings of a command line (jobs.cli): ``--pipeline-file`` and the interval, else the run's
        flags, then every flag given over them; unset, ``CDC_STATE_BUCKETS`` and (without a file)
        ``CDC_ICEBERG_CATALOG`` fill in. A flag not given is absent from ``args`` (argparse.SUPPRESS)."""
        given = {name: value for name, value in vars(args).items() if name in FLAGS}
        window = _window(getattr(args, "start", None), getattr(args, "end", None))
        if getattr(args, "pipeline_file", None):
            settings = _from_file(args.pipeline_file, window)
        else:
            settings = _from_flags(given, window)
        history = _history(getattr(args, "history_rules", None), getattr(args, "history", False))
        settings = settings.given({**given, **({"history_patterns": history} if history is not None else {})})
        if settings.transform.state_buckets is None:
            buckets = env.number("CDC_STATE_BUCKETS", None, whole=True)
            settings = replace(settings, transform=replace(settings.transform, state_buckets=buckets))
        return settings

    def given(self, values: dict[str, Any]) -> RunSettings:
        """These settings with ``values`` (flags by their argparse names: :data:`FLAGS`) put over them."""
        top: dict[str, Any] = {}
        parts: dict[str, dict[str, Any]] = {}
        for name, value in values.items():
            part, setting = FLAGS[name]
            value = tuple(value) if isinstance(value, list) else value
            (parts.setdefault(part, {}) if part else top)[setting] = value
        return replace(self, **top, **{part: replace(getattr(self, part), **new) for part, new in parts.items()})


def _from_flags(given: dict[str, Any], window: tuple[datetime, datetime] | None) -> RunSettings:
    missing = [f"--{n.replace('_', '-')}" for n in ("lake", "pipeline") if n not in given]
    if "run_id" not in given and window is None:
        missing.append("--run-id (or --start and --end)")
    if missing:
        raise SettingsError(f"the following arguments are required: {', '.join(missing)} (or --pipeline-file "
                            "FILE --start TIME --end TIME)")
    start, end = window or (None, None)
    return RunSettings(lake=given["lake"], pipeline=given["pipeline"],
                       run_id=run_id_for(start, end) if window else given["run_id"],
                       catalog=env.text("CDC_ICEBERG_CATALOG") or None, start=start, end=end)


def _history(rules: list[tuple[str, bool]] | None, every: bool) -> tuple[tuple[str, bool], ...] | None:
    """Which tables keep an SCD2 history, as (pattern, on) rules: --history-of and --no-history-of in their
    order, then --history for every other table; None when no such flag was given."""
    if not rules and not every:
        return None
    return tuple(rules or ()) + ((("*", True),) if every else ())


def _window(start: datetime | None, end: datetime | None) -> tuple[datetime, datetime] | None:
    if start is None and end is None:
        return None
    if start is None or end is None:
        raise SettingsError("give both --start and --end, or neither")
    try:
        return checked(start, end)
    except IntervalError as exc:
        raise SettingsError(f"--start/--end: {exc}") from None


def _from_file(path: str, window: tuple[datetime, datetime] | None) -> RunSettings:
    if window is None:
        raise SettingsError("--pipeline-file needs the run's interval: --start TIME --end TIME")
    try:
        cfg = load_pipeline(path)
    except PipelineConfigError as exc:
        raise SettingsError(str(exc)) from None
    return RunSettings.from_pipeline(cfg, window)


# every flag of jobs.cli that sets a setting (but --pipeline-file, --start, --end and the history flags, read
# as a whole): its argparse name -> (part of RunSettings, or None for its own fields; setting)
FLAGS: dict[str, tuple[str | None, str]] = {
    "lake": (None, "lake"), "pipeline": (None, "pipeline"), "run_id": (None, "run_id"),
    **{name: ("transform", setting) for name, setting in (
        ("format", "fmt"), ("raw", "raw"), ("message_shape", "message_shape"), ("primary_keys", "primary_keys"),
        ("history_patterns", "history"), ("state_buckets", "state_buckets"), ("keep_changes", "keep_changes"))},
    **{name: ("reconcile", setting) for name, setting in (
        ("source_counts", "source_counts"), ("count_tolerance", "count_tolerance"), ("max_lag", "max_lag_s"),
        ("checked_at", "checked_at"), ("key_rows_limit", "key_rows_limit"), ("capture_delay", "capture_delay_s"))},
    **{name: ("alert", setting) for name, setting in (("alert_to", "to"),
                                                       ("quarantine_threshold", "quarantine_threshold"))},
    **{name: ("expire", setting) for name, setting in (
        ("as_of", "as_of"), ("retain_days", "retain_days"), ("retain_last", "retain_last"))},
}
