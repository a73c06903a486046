"""The stages' reports as types: what each stage writes under ``reports/<pipeline>/run=<run_id>/`` and
what the next stages, report.html, the progress lines and the command line's summary read.

A report file is a public contract (people and tools read ``reconciliation.json``): a field's name is its
JSON key, and what a stage writes keeps the keys it always had. Reading takes every version the lake may
hold: a key the file lacks reads as its field's default and stays out when the report is written again
(``absent``); a key the type does not name is kept as read (``extra``). So ``from_json(d).to_json() == d``
for every report a stage ever wrote, and a field with a default is all a newer reader needs. (A broken
file is read as far as it goes: where an object should be and is not, a field that may be None is None,
one that may not is absent.)
"""
from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Self

_BOOKKEEPING = ("extra", "absent")


@dataclass(frozen=True)
class Record:
    """A JSON object with typed fields (see the module's docstring for ``extra`` and ``absent``)."""

    extra: Mapping[str, Any] = field(default_factory=dict, kw_only=True, repr=False)
    absent: frozenset[str] = field(default=frozenset(), kw_only=True, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        kind = cls._type_of(data)
        hints = _readable_fields(kind)
        values = {name: _read(hint, data[name]) for name, hint in hints.items() if name in data}
        # a record's place (one that cannot be None) holding no object: as if the key were not there
        broken = {name for name, value in values.items() if value is None and _is_record(hints[name])}
        fixed = {f.name for f in fields(kind) if not f.init}
        extra = {k: v for k, v in data.items() if k not in hints and k not in fixed}
        return kind(**{k: v for k, v in values.items() if k not in broken}, extra=extra,
                    absent=frozenset(hints) - (set(data) - broken))

    @classmethod
    def _type_of(cls, data: Mapping[str, Any]) -> type[Self]:
        """The type a JSON object reads as (a family of records told apart by a field overrides it)."""
        return cls

    @classmethod
    def of(cls, **values: Any) -> Self:
        """A record of these fields only: the others are absent, not written."""
        return cls(**values, absent=frozenset(_readable_fields(cls)) - set(values))

    def has(self, name: str) -> bool:
        """Whether the record holds the field (made with it, or read from JSON that has it)."""
        return name not in self.absent

    def updated(self, **values: Any) -> Self:
        """The record with these fields set (and so written, even if the JSON it was read from lacked them)."""
        return replace(self, **values, absent=self.absent - set(values))

    def to_json(self) -> dict[str, Any]:
        out = dict(self.extra)
        for f in fields(self):
            if f.name not in _BOOKKEEPING and f.name not in self.absent:
                out[f.name] = _written(getattr(self, f.name))
        return out


@functools.cache
def _readable_fields(kind: type) -> dict[str, Any]:
    """Field name -> type hint, for the fields JSON sets (not the bookkeeping, not a fixed ``kind``)."""
    hints = typing.get_type_hints(kind)
    return {f.name: hints[f.name] for f in fields(kind) if f.init and f.name not in _BOOKKEEPING}


def _is_record(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, Record)


def _read(hint: Any, value: Any) -> Any:
    """A JSON value as the field's type: records, and tuples and mappings of them; anything else as read
    (a record's place holding something other than an object reads as None)."""
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _read(inner[0], value) if len(inner) == 1 else value
    if _is_record(hint):
        return hint.from_json(value) if isinstance(value, Mapping) else None
    if origin is tuple and isinstance(value, list):
        return tuple(_read(args[0], v) for v in value)
    if origin in (dict, Mapping) and isinstance(value, Mapping):
        return {k: _read(args[1], v) for k, v in value.items()}
    return value


def _written(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [_written(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _written(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Report(Record):
    """A stage's report: one file of the run's report folder."""

    FILE: ClassVar[str]


# ---- decode.json ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class MessageCounts(Record):
    """Messages by outcome (landed = decoded + quarantined + ignored) and the change records decoded."""

    landed: int = 0
    decoded: int = 0
    quarantined: int = 0
    ignored: int = 0
    records: int = 0
    topics: tuple[str, ...] = ()  # of a table's messages (the lineage of its columns); none in a total


@dataclass(frozen=True)
class DecodeCounts(Record):
    """What the decode's one aggregate counts, in total and per table (jobs.decode.stage.decode_counts)."""

    total: MessageCounts = field(default_factory=MessageCounts)
    tables: Mapping[str, MessageCounts] = field(default_factory=dict)
    quarantine_reasons: Mapping[str, int] = field(default_factory=dict)
    ignored_reasons: Mapping[str, int] = field(default_factory=dict)
    balanced: bool = True


@dataclass(frozen=True)
class DecodeReport(DecodeCounts, Report):
    FILE: ClassVar[str] = "decode.json"

    pipeline: str = ""
    run_id: str = ""
    format: str | None = None
    raw: str | list[str] | None = None  # the run's input, as given
    remembered_documents: int = 0
    topic_shapes: Mapping[str, str] = field(default_factory=dict)
    # the change suite's figures (jobs.quality.validate.profile_changes); None: decoded by an older version
    record_profile: tuple[Mapping[str, Any], ...] | None = None
    changes_kept: str | None = None  # the audit copy of the change records, when kept

    @classmethod
    def of_counts(cls, counts: DecodeCounts, **values: Any) -> DecodeReport:
        return cls(**{f.name: getattr(counts, f.name) for f in fields(DecodeCounts)}, **values)


# ---- merge.json ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class HeldRecords(Record):
    """The records of transactions still open at the end of the run, held for the run that ends them."""

    transactions: int = 0
    records: int = 0
    path: str | None = None
    released_from: str | None = None  # the held records of an earlier run this one applied
    from_position: str | None = None
    from_time: int | None = None


@dataclass(frozen=True)
class Reach(Record):
    """How far the run's applied records reach, and where the first transaction it holds back starts."""

    reach_position: str | None = None
    reach_time: int | None = None
    held_position: str | None = None
    held_time: int | None = None


@dataclass(frozen=True)
class UnconvertedColumn(Record):
    """Values of a column its type cannot hold: published as null, or rounded; the least as an example."""

    type: str | None = None
    nulled: int = 0
    rounded: int = 0
    example: str | None = None


@dataclass(frozen=True)
class TableReport(Record):
    """One table of merge.json: what the plan said, what the commit did (jobs.iceberg.write.Published) and
    the count steps it wrote; or an ``error`` (the table could not be folded, nothing published). A re-run
    of a published run reports what that run committed, ``already_published``."""

    table_id: str = ""
    error: str | None = None
    records: int = 0
    iceberg_table: str | None = None
    snapshot_id: int | None = None
    state_rows: int = 0
    already_published: bool = False
    mode: str = "rewrite"  # "delta": changed rows appended and the rows they replace deleted by position
    files_added: int = 0
    files_removed: int = 0
    bytes_added: int = 0
    bytes_removed: int = 0
    buckets: int | None = None
    buckets_rewritten: int | None = None
    position_deletes: int = 0
    delete_files_added: int = 0
    delete_files_removed: int = 0
    key_columns: tuple[str, ...] = ()
    key_source: str | None = None
    rekeyed_from: tuple[str, ...] | None = None
    type_changes: tuple[Mapping[str, Any], ...] = ()
    added_columns: tuple[str, ...] = ()
    dropped_columns: tuple[str, ...] = ()
    full_load_position: str | None = None
    full_load: Mapping[str, Any] | None = None
    key_moves: int = 0
    unconverted_values: Mapping[str, UnconvertedColumn] = field(default_factory=dict)
    counts: Mapping[str, Any] | None = None  # the count steps written (jobs.lake.ledger)
    history: Mapping[str, Any] | None = None  # the SCD2 history table's commit, when the table keeps one


@dataclass(frozen=True)
class FoldReport(Report):
    FILE: ClassVar[str] = "merge.json"

    pipeline: str = ""
    run_id: str = ""
    tables: Mapping[str, TableReport] = field(default_factory=dict)
    held: HeldRecords = field(default_factory=HeldRecords)
    reach: Reach = field(default_factory=Reach)


# ---- validation.json -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ExpectationResult(Record):
    expectation: str | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    success: bool = False
    observed: Any = None
    exception: str | None = None


@dataclass(frozen=True)
class SuiteResult(Record):
    suite: str | None = None
    table: str | None = None  # None: the change records' suite
    success: bool = True
    results: tuple[ExpectationResult, ...] = ()
    statistics: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None  # a suite that could not run at all (older versions)


@dataclass(frozen=True)
class ValidationReport(Report):
    FILE: ClassVar[str] = "validation.json"

    success: bool = True
    suites: tuple[SuiteResult, ...] = ()


# ---- reconciliation.json -------------------------------------------------------------------------
@dataclass(frozen=True)
class Lag(Record):
    """How far a checkpoint the lake has not reached is ahead of the lake (jobs.reconcile.checkpoints)."""

    checkpoint: str | None = None
    lake_position: str | None = None
    lake_time: str | None = None
    landed_through: str | None = None
    seconds: float | None = None
    overdue: bool = False
    waiting_seconds: float | None = None  # only with a maximum lag


@dataclass(frozen=True)
class KeyDiff(Record):
    missing_in_lake: tuple[str, ...] = ()
    extra_in_lake: tuple[str, ...] = ()


@dataclass(frozen=True)
class ValueKeys(Record):
    """The keys whose rows differ, are missing or extra at a moment (small tables whose snapshot kept them)."""

    differ: tuple[str, ...] = ()
    missing_in_lake: tuple[str, ...] = ()
    extra_in_lake: tuple[str, ...] = ()


@dataclass(frozen=True)
class ValueColumn(Record):
    """A column whose values differ in one row, with both values as canonical texts (masked when sensitive)."""

    column: str | None = None
    source: str | None = None
    lake: str | None = None
    within_tolerance: bool = False


@dataclass(frozen=True)
class ValueRow(Record):
    """A key whose row differs at a moment: its differing columns, or why they are not shown
    (jobs.reconcile.columns)."""

    key: str | None = None
    columns: tuple[ValueColumn, ...] | None = None
    not_compared: str | None = None


@dataclass(frozen=True)
class ValueDiff(Record):
    """The buckets of keys whose value fingerprints differ at a checkpoint's moment (jobs.reconcile.checkpoints)."""

    buckets: int = 0  # of the table
    differing: int = 0
    source: Mapping[str, str] | None = None  # bucket -> fingerprint (16 hex digits), the first few
    lake: Mapping[str, str] | None = None
    keys: ValueKeys | None = None
    rows: tuple[ValueRow, ...] = ()  # the first differing keys' columns, with both values
    columns_not_compared: str | None = None  # why no row's columns are shown


@dataclass(frozen=True)
class CheckpointVerdict(Record):
    """A source count with its moment, judged against the lake's count at that moment."""

    table: str | None = None
    verdict: str = "unknown"  # match, mismatch, behind, unknown (jobs.reconcile.checkpoints)
    moment: str | None = None
    moment_kind: str | None = None
    exact: bool = False
    moment_assumed: str | None = None  # a count without a moment: the moment it is judged at, and why
    source_rows: int | None = None
    lake_rows: int | list[int] | None = None  # the counts the lake held across a bracket, for a bracket
    source: str | None = None
    taken_in: str | None = None
    taken_at: str | None = None
    difference: int | None = None
    reason: str | None = None
    judged_run: str | None = None
    lag: Lag | None = None
    key_diff: KeyDiff | None = None
    value_diff: ValueDiff | None = None


@dataclass(frozen=True)
class TableReconciliation(Record):
    table: str = ""
    state_rows: int = 0
    source_rows: int | None = None  # of the checkpoint that decided the status
    status: str = "unknown"
    snapshot_id: int | None = None
    in_state: bool = False
    checkpoints: tuple[CheckpointVerdict, ...] = ()  # judged
    pending: tuple[CheckpointVerdict, ...] = ()  # not reached yet
    overdue: bool = False
    previous: CheckpointVerdict | None = None  # no count this run: an earlier run's last verdict


@dataclass(frozen=True)
class LandingReach(Record):
    """What the run's landing showed of the lake's reach (jobs.reconcile.landed_reach)."""

    landed_through: str | None = None
    interval_end: str | None = None
    capture_delay_s: float | None = None
    why_not: str | None = None


@dataclass(frozen=True)
class ReconciliationReport(Report):
    FILE: ClassVar[str] = "reconciliation.json"

    pipeline: str = ""
    run_id: str = ""
    source: str | None = None  # what the source offered for the moment
    max_lag_s: float | None = None
    landing: LandingReach | None = None
    tables: tuple[TableReconciliation, ...] = ()


# ---- alert.json ----------------------------------------------------------------------------------
# kinds of reason, in the order the email shows them
EXPECTATION, COUNT_MISMATCH, QUARANTINE, UNBALANCED = "expectation", "count_mismatch", "quarantine", "unbalanced"
UNCONVERTED, LAG, VALUE_MISMATCH = "unconverted", "lag", "value_mismatch"


@dataclass(frozen=True)
class Reason(Record):
    """Something in a run's reports that should reach a human; a kind of its own per subclass."""

    kind: str = ""

    @classmethod
    def _type_of(cls, data: Mapping[str, Any]) -> type[Reason]:
        return _REASONS.get(data.get("kind"), cls) if cls is Reason else cls


@dataclass(frozen=True)
class FailedExpectation(Reason):
    kind: str = field(default=EXPECTATION, init=False)
    suite: str | None = None
    table: str | None = None
    expectation: str | None = None
    column: str | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    observed: Any = None


@dataclass(frozen=True)
class CountMismatch(Reason):
    kind: str = field(default=COUNT_MISMATCH, init=False)
    table: str | None = None
    moment: str | None = None
    source_rows: int | None = None
    lake_rows: int | list[int] | None = None
    difference: int | None = None
    missing_in_lake: tuple[str, ...] | None = None
    extra_in_lake: tuple[str, ...] | None = None
    snapshot_id: int | None = None


@dataclass(frozen=True)
class ValueMismatch(Reason):
    """A checkpoint whose counts agree and whose values do not (jobs.reconcile.checkpoints.judge_values)."""

    kind: str = field(default=VALUE_MISMATCH, init=False)
    table: str | None = None
    moment: str | None = None
    source_rows: int | None = None
    differing_buckets: int | None = None
    keys_differ: tuple[str, ...] | None = None
    missing_in_lake: tuple[str, ...] | None = None
    extra_in_lake: tuple[str, ...] | None = None
    # key -> its differing columns (names only: the values, maybe personal data, are on report.html)
    columns_differ: Mapping[str, str] | None = None
    snapshot_id: int | None = None


@dataclass(frozen=True)
class OverdueCheckpoint(Reason):
    kind: str = field(default=LAG, init=False)
    table: str | None = None
    moment: str | None = None
    lake_time: str | None = None
    lag_seconds: float | None = None
    waiting_seconds: float | None = None


@dataclass(frozen=True)
class QuarantineOverThreshold(Reason):
    kind: str = field(default=QUARANTINE, init=False)
    quarantined: int = 0
    landed: int = 0
    ratio: float = 0.0
    threshold: float = 0.0
    by_reason: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Unbalanced(Reason):
    kind: str = field(default=UNBALANCED, init=False)
    problem: str = ""


@dataclass(frozen=True)
class UnconvertedValues(Reason):
    kind: str = field(default=UNCONVERTED, init=False)
    table: str | None = None
    column: str | None = None
    type: str | None = None
    nulled: int = 0
    rounded: int = 0


_REASONS: dict[str, type[Reason]] = {kind.kind: kind for kind in (
    FailedExpectation, CountMismatch, ValueMismatch, OverdueCheckpoint, QuarantineOverThreshold, Unbalanced,
    UnconvertedValues)}


@dataclass(frozen=True)
class SentEmail(Record):
    digest: str | None = None  # of the problems it reported (jobs.alert.stage.problems_digest)
    sent_at: str | None = None
    recipients: tuple[str, ...] = ()
    subject: str | None = None


@dataclass(frozen=True)
class AlertReport(Report):
    FILE: ClassVar[str] = "alert.json"

    sent: bool = False
    reasons: tuple[Reason, ...] = ()
    recipients: tuple[str, ...] = ()
    error: str | None = None  # the email was owed and could not go
    skipped: str | None = None  # why no email was owed
    subject: str | None = None
    digest: str | None = None
    emails: tuple[SentEmail, ...] = ()  # every email sent for this run id, over its re-runs


# ---- run.json, expire.json -----------------------------------------------------------------------
@dataclass(frozen=True)
class RunReport(Report):
    FILE: ClassVar[str] = "run.json"

    timings_s: Mapping[str, float] = field(default_factory=dict)
    alert_sent: bool | None = None  # written by ``run``, not by ``transform``


@dataclass(frozen=True)
class ExpiredTable(Record):
    table: str = ""
    snapshots_expired: int = 0
    snapshots_kept: int = 0
    files_deleted: Mapping[str, int] = field(default_factory=dict)  # kind -> files
    bytes_deleted: int = 0
    runs_expired: tuple[str, ...] = ()
    orphans_deleted: int = 0
    orphan_bytes_deleted: int = 0
    count_steps_deleted: int = 0


@dataclass(frozen=True)
class ExpireReport(Report):
    FILE: ClassVar[str] = "expire.json"

    run_id: str | None = None
    pipeline: str = ""
    as_of: str | None = None
    older_than: str | None = None
    orphans_before: str | None = None
    retain_days: int = 0
    retain_last: int = 0
    dry_run: bool = False
    tables: tuple[ExpiredTable, ...] = ()


# ---- a run's reports together --------------------------------------------------------------------
@dataclass(frozen=True)
class RunReports:
    """A run's reports as the alert and report.html read them (None: not written)."""

    decode: DecodeReport | None = None
    fold: FoldReport | None = None
    validation: ValidationReport = field(default_factory=ValidationReport)
    reconciliation: ReconciliationReport = field(default_factory=ReconciliationReport)
