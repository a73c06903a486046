"""Command line of the pipeline, used alike by the README's demo, the tests and the Airflow DAG.

    python -m jobs run --format debezium --raw PATH --lake PATH --pipeline NAME --run-id ID
    python -m jobs run --pipeline-file FILE --start TIME --end TIME    (the settings of a pipeline file;
                                                                    flags given override them)
    python -m jobs transform ...                                   (decode -> fold + publish -> validate,
                                                                    one Spark job: the DAG's Spark task)
    python -m jobs reconcile | alert                               (the DAG's tasks after it)
    python -m jobs decode | merge | validate                       (one stage each, for debugging)
    python -m jobs land ...                                        (topic -> raw snapshot)
    python -m jobs expire --as-of TIME ...                         (snapshots past the retention)
    python -m jobs attach --lake PATH [--write]                    (the lake's catalog entry for other readers)

Exit codes: 0 when the run completed (quarantined records and data-quality failures are reported
and alerted, not crashes); 2 with one clear line for unusable arguments; 1 when a stage failed.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from jobs import env
from jobs.errors import failure_line, mask
from jobs.formats import MESSAGE_SHAPES, available_formats
from jobs.lake import storage
from jobs.lake.layout import Lake, LakeError, check_name
from jobs.lake.raw import RawInputError, expand, input_files
from jobs.model.intervals import interval_of
from jobs.model.reports import (
    AlertReport,
    DecodeReport,
    ExpireReport,
    FoldReport,
    ReconciliationReport,
    RunReport,
    TableReconciliation,
)
from jobs.progress import to_stderr
from jobs.settings import RunSettings, SettingsError

GIVEN = argparse.SUPPRESS  # a setting's flag is in the arguments only when given (jobs.settings.RunSettings.from_args)


class UsageError(ValueError):
    """Arguments that cannot be used; reported as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    """argparse's own usage errors (exit 2) quote the arguments: masked like every line shown."""

    def error(self, message: str):
        super().error(mask(message))


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pipeline-file", metavar="FILE",
                   help="a pipeline file (docs/pipelines.md): the run's settings, each flag given overriding its "
                   "setting; the run is the interval of --start and --end")
    p.add_argument("--lake", default=GIVEN, help="lake root: a local folder, file://, s3:// or s3a:// URI")
    p.add_argument("--pipeline", default=GIVEN, help="pipeline name: the Iceberg namespace and lake sub-folder")
    p.add_argument("--run-id", default=GIVEN,
                   help="id of this run (re-running an id is safe and changes nothing); default: the interval's")
    p.add_argument("--start", type=_time, metavar="TIME",
                   help="the run's interval [--start, --end) (ISO-8601): its run id; with --pipeline-file also the "
                   "time reconcile measures waits at and expire counts back from")
    p.add_argument("--end", type=_time, metavar="TIME", help="the interval's end (exclusive)")
    p.add_argument("--quiet", action="store_true",
                   help="print nothing but errors: no progress lines (stderr) and no summary (for cron; the exit "
                   "code and the reports say how it went)")
    p.add_argument("--debug", action="store_true",
                   help="on a failure, the Python traceback after the one line that says what failed")


def _decode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", default=GIVEN, help=f"message format: {', '.join(available_formats())}")
    p.add_argument(
        "--raw", action="append", default=GIVEN,
        help="raw snapshot: a file or folder of Parquet in Spark's Kafka source schema, or text files "
        "(.jsonl/.json/.txt, optionally .gz) with one message value per line; repeatable; a local glob "
        "pattern (quoted) reads every match; default: the folders landed for the run's interval",
    )
    p.add_argument(
        "--primary-keys", action="append", default=GIVEN, type=_primary_key_rule, metavar="TABLE=COL[,COL...]",
        help="primary key of a table (full table id, its last part, or a glob such as 'shop.public.*' over "
        "whole table ids: jobs/model/table_rules.py); repeatable; overrides message keys",
    )
    p.add_argument(
        "--message-shape", choices=("auto", *MESSAGE_SHAPES), default=GIVEN,
        help="the shape of every topic's messages, for a format with several (Debezium: full 'envelope's or "
        "ExtractNewRecordState 'unwrapped' rows); auto (default): decided per topic by its first run's messages "
        "and kept; a message of another shape is quarantined",
    )


def _primary_key_rule(text: str) -> tuple[str, tuple[str, ...]]:
    table, sep, cols = text.partition("=")
    columns = tuple(c.strip() for c in cols.split(",") if c.strip())
    if not sep or not table.strip() or not columns:
        raise argparse.ArgumentTypeError(f"{text!r}: expected TABLE=COL[,COL...]")
    return table.strip(), columns


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def _merge_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--history", action="store_true", default=GIVEN,
                   help="also keep an SCD type 2 history table per source table (<table>__history: valid_from / "
                   "valid_to positions and times, is_current, op)")
    p.add_argument("--history-of", action=_HistoryRule, dest="history_rules", default=GIVEN, metavar="TABLE",
                   help="keep the SCD type 2 history of these tables only (a table id, its last part or a glob "
                   "such as 'shop.public.*': jobs/model/table_rules.py); repeatable")
    p.add_argument("--no-history-of", action=_HistoryRule, dest="history_rules", default=GIVEN, metavar="TABLE",
                   help="no SCD type 2 history for these tables, over --history or a wider --history-of; repeatable")
    p.add_argument("--state-buckets", type=_count, default=GIVEN, metavar="N",
                   help="key-hash buckets of a state table laid out by this run (default: $CDC_STATE_BUCKETS or "
                   "16); a run rewrites only the buckets its changes touch; an existing table keeps its own; "
                   "0: no buckets (every run rewrites the whole table)")


class _HistoryRule(argparse.Action):
    """--history-of / --no-history-of, kept as (pattern, on) in the order given: among globs the first
    naming a table wins (jobs.model.table_rules), as among a pipeline file's ``tables``."""

    def __call__(self, parser, namespace, value, option_string=None):
        rules = list(getattr(namespace, self.dest, None) or [])
        rules.append((value, option_string == "--history-of"))
        setattr(namespace, self.dest, rules)


def _keep_changes_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--keep-changes", action="store_true", default=GIVEN,
                   help="also write the run's decoded change records under changes/<pipeline>/run=<run id> "
                   "(an audit copy in Parquet; the run itself never reads it)")


def _reconcile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--source-counts", metavar="FILE_OR_URL", default=GIVEN,
        help="source row counts: a JSON counts file ({table: count}, or checkpoints with as_of / position: "
             "docs/operations/reconciliation.md) or a SQLAlchemy URL (one consistent snapshot and its moment)",
    )
    p.add_argument("--max-lag", type=_duration, metavar="DURATION", default=GIVEN,
                   help="alert when a checkpoint the lake has not reached is older than this at --checked-at "
                        "(6h, 90m, 1d; default: never)")
    p.add_argument("--checked-at", type=_time, metavar="TIME", default=GIVEN,
                   help="the time checkpoints' waits are measured at (the DAG passes its interval's end; "
                        "default: the time the SQL source was counted)")
    p.add_argument("--count-tolerance", type=_tolerance, metavar="ROWS[,PCT%]", default=GIVEN,
                   help="how far a count without a moment may be from the lake's at the time it was read (the counts "
                        "file's modification time, the SQL query's time), e.g. 10,0.5%%")
    p.add_argument("--key-rows-limit", type=_count, metavar="N", default=GIVEN,
                   help="name the differing keys of a mismatching table of at most N rows (default 10000)")
    from jobs.reconcile.landed_reach import DEFAULT_CAPTURE_DELAY

    p.add_argument("--capture-delay", type=_duration, metavar="DURATION", default=GIVEN,
                   help="how long a committed source change may take to reach its topic: a landing read past its "
                        f"interval's end reaches that end minus this (default {DEFAULT_CAPTURE_DELAY})")


def _duration(text: str) -> float:
    from jobs.reconcile.checkpoints import CheckpointError, parse_duration

    try:
        return parse_duration(text)
    except CheckpointError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _tolerance(text: str) -> str:
    from jobs.reconcile.checkpoints import CheckpointError, parse_tolerance

    try:
        parse_tolerance(text)
    except CheckpointError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _alert_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--alert-to", action="append", default=GIVEN, metavar="ADDR",
                   help="data-quality alert recipient; repeatable (SMTP from connection smtp_default or SMTP_* env)")
    p.add_argument("--quarantine-threshold", type=_fraction, default=GIVEN, metavar="FRACTION",
                   help="alert when quarantined/landed exceeds this fraction (default 0: any quarantined message)")


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction between 0 and 1")
    return value


def _time(text: str):
    from jobs.land.command import LandError, parse_time  # ISO-8601, a time without an offset is UTC

    try:
        return parse_time(text)
    except LandError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _expire_args(p: argparse.ArgumentParser) -> None:
    from jobs.iceberg.expire import DEFAULT_RETAIN_DAYS, DEFAULT_RETAIN_LAST

    p.add_argument("--as-of", type=_time, default=GIVEN, metavar="TIME",
                   help="the time the retention counts back from (the DAG passes its interval's end; with "
                   "--pipeline-file: --end)")
    p.add_argument("--retain-days", type=_count, default=GIVEN, metavar="N",
                   help=f"keep the snapshots committed in the N days before --as-of (default {DEFAULT_RETAIN_DAYS})")
    p.add_argument("--retain-last", type=_count, default=GIVEN, metavar="N",
                   help=f"keep each table's N newest snapshots whatever their age (default {DEFAULT_RETAIN_LAST}, "
                   "at least 1)")
    p.add_argument("--dry-run", action="store_true",
                   help="print what would go and write nothing, not even expire.json (a read-only lake will do)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a line per table")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m jobs", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="transform, then reconcile -> alert")
    _common(run), _decode_args(run), _merge_args(run), _keep_changes_arg(run), _reconcile_args(run), _alert_args(run)
    run.add_argument("--statsd-host", metavar="HOST[:PORT]", default=None,
                     help="send the run's metrics to this StatsD server (default $CDC_STATSD_HOST; none: not sent; "
                          "docs/operations/metrics.md)")
    transform = sub.add_parser("transform", help="decode -> fold + publish -> validate in one Spark job")
    _common(transform), _decode_args(transform), _merge_args(transform), _keep_changes_arg(transform)
    decode = sub.add_parser("decode", help="debugging: raw snapshot -> changes/, quarantine/, decode.json")
    _common(decode), _decode_args(decode)
    merge = sub.add_parser("merge", help="debugging: changes/ written by decode -> Iceberg state")
    _common(merge), _merge_args(merge)
    validate = sub.add_parser("validate", help="the change suite from decode.json, Great Expectations on the state")
    _common(validate)
    reconcile = sub.add_parser("reconcile", help="state rows against source row counts")
    _common(reconcile), _reconcile_args(reconcile)
    alert = sub.add_parser("alert", help="one data-quality email when a check failed")
    _common(alert), _alert_args(alert)
    expire = sub.add_parser("expire", help="expire the tables' snapshots past the retention, and their files")
    _common(expire), _expire_args(expire)
    sub.add_parser("land", help="topic interval -> raw snapshot (see python -m jobs land --help)", add_help=False)
    attach = sub.add_parser("attach", help="the lake's catalog entry (.pyiceberg.yaml) other Iceberg readers open "
                            "its tables with (docs/operations/reading-the-lake.md)")
    attach.add_argument("--lake", required=True, help="lake root: a local folder or file:// URI")
    attach.add_argument("--write", action="store_true",
                        help="also write it to <lake>/.pyiceberg.yaml, for PYICEBERG_HOME=<lake>")
    return parser


def run_settings(args: argparse.Namespace) -> RunSettings:
    """The run's settings (jobs.settings), checked before any stage starts: names, format, inputs, the counts,
    the lake; with the interval's landed folders as the input where none is given. UsageError, SettingsError,
    LakeError or RawInputError say what cannot be used."""
    settings = RunSettings.from_args(args)
    check_name("pipeline", settings.pipeline)
    check_name("run id", settings.run_id)
    lake = settings.lake_at()
    if args.command in ("run", "transform", "decode"):
        settings = replace(settings, transform=replace(settings.transform, raw=_inputs(settings, lake)))
    if args.command == "expire":
        _check_retention(settings)
    if args.command in ("run", "reconcile") and settings.reconcile.source_counts:
        _check_source_counts(settings)  # read now: a bad file must not wait until after publishing
    if lake.is_s3 and args.command != "decode" and not lake.catalog:
        # before any stage writes: the embedded SQLite catalog cannot live on S3
        raise UsageError(f"lake {settings.lake}: an S3 lake needs CDC_ICEBERG_CATALOG naming a pyiceberg catalog")
    if getattr(args, "dry_run", False):
        _check_readable(lake)  # a dry run writes nothing, not even check_usable's probe
    else:
        lake.check_usable()
    from jobs.spark.session import jvm_options

    jvm_options()  # CDC_JIT: a bad value is one line here, not a traceback when the JVM starts
    return settings


def _inputs(settings: RunSettings, lake: Lake) -> tuple[str, ...]:
    """What the run decodes, each checked (something to read, landings complete) before Spark starts: the
    ``--raw`` given, else the folders landed for the run's interval."""
    transform = settings.transform
    if not transform.fmt:
        raise UsageError("the following arguments are required: --format (or --pipeline-file)")
    if transform.fmt not in available_formats():
        raise UsageError(f"unknown format {transform.fmt!r}; known: {', '.join(available_formats())}")
    raw = transform.raw or _landed(settings, lake)
    for given in raw:
        for path in expand(given):
            input_files(path)
    return raw


def _landed(settings: RunSettings, lake: Lake) -> tuple[str, ...]:
    from jobs.land.command import landed_folders

    interval = (settings.start, settings.end) if settings.start else interval_of(settings.run_id)
    folders = landed_folders(lake, settings.pipeline, *interval, settings.transform.topics) if interval else []
    if not folders:
        raise UsageError(f"no --raw, and nothing landed for run {settings.run_id} under "
                         f"{lake.join(Lake.raw_pipeline_dir(settings.pipeline))}: land the interval first "
                         "(python -m jobs land), or give --raw")
    return tuple(folders)


def _check_retention(settings: RunSettings) -> None:
    if settings.expire.as_of is None:
        raise UsageError("the following arguments are required: --as-of (or --pipeline-file and the interval)")
    if settings.expire.retention()[1] < 1:
        raise UsageError("--retain-last must keep at least the current snapshot (1)")


def _check_source_counts(settings: RunSettings) -> None:
    from jobs.reconcile.stage import check_source_counts

    spec, fmt = settings.reconcile.source_counts, settings.transform.fmt
    if spec.startswith("conn:"):
        raise UsageError(f"reconcile.connection {spec[5:]!r} is an Airflow connection, which only the DAG's reconcile "
                         "task reads; fix: give --source-counts FILE_OR_URL")
    check_source_counts(spec, None if fmt in (None, "auto") else fmt)


def _check_readable(lake: Lake) -> None:
    if lake.is_s3:
        lake.check_usable()  # on S3: the bucket's existence, nothing written
    elif not storage.is_dir(lake.root):
        raise UsageError(f"lake {lake.root}: no such folder")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["land"]:
        from jobs.land.command import main as land_main

        return land_main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "attach":
        return _attach(args.lake, args.write)
    try:
        settings = run_settings(args)
    except (UsageError, SettingsError, LakeError, RawInputError, ValueError) as exc:
        print(f"error: {mask(str(exc))}", file=sys.stderr)
        return 2

    from jobs import stages

    # a dry run's report is what it prints (the progress line would read the run's last expire.json)
    quiet = args.quiet or getattr(args, "dry_run", False)
    ctx = stages.RunContext.of(settings, progress=None if quiet else to_stderr)
    try:
        return _run_command(args, ctx, settings)
    except Exception as exc:  # noqa: BLE001 - an operational failure is one line (jobs.errors), exit 1
        from jobs.iceberg.catalog import embedded_catalog_file

        print(failure_line(args.command, ctx.stage, exc, embedded_catalog_file(ctx.lake)), file=sys.stderr)
        if args.debug:
            raise
        return 1


def _attach(root: str, write: bool) -> int:
    """Print the lake's catalog entry (jobs.iceberg.attach), with ``write`` also into ``<lake>/.pyiceberg.yaml``;
    a lake whose tables are in a catalog of its own (CDC_ICEBERG_CATALOG) says so instead: exit 2."""
    from jobs import env
    from jobs.iceberg.attach import AttachError, attach

    try:
        text, path = attach(Lake.at(root, env.text("CDC_ICEBERG_CATALOG") or None), write)
    except (AttachError, LakeError) as exc:
        print(f"error: {mask(str(exc))}", file=sys.stderr)
        return 2
    print(text, end="")
    if path:
        print(f"written to {path}: readers find it with PYICEBERG_HOME={path.rsplit('/', 1)[0]}", file=sys.stderr)
    return 0


def _run_command(args: argparse.Namespace, ctx, settings: RunSettings) -> int:
    from jobs import stages
    from jobs.spark.session import build_spark, driver_class_archive, keep_class_archive

    if args.command == "expire":  # pyiceberg only: no Spark
        report = stages.run_expire(ctx, settings.expire.as_of, *settings.expire.retention(), args.dry_run)
        if args.json:
            print(json.dumps(report.to_json(), indent=2, sort_keys=True, default=str))
        elif not args.quiet:
            _print_expiry(report)
        return 0
    # the first driver of this JVM and these jars records the class archive the next ones map
    archive = driver_class_archive(record=True)
    spark = build_spark(f"cdc-{args.command}-{settings.pipeline}", archive=archive)
    done = _spark_command(args, ctx, settings, spark)
    keep_class_archive(spark, archive)
    return done


def _spark_command(args: argparse.Namespace, ctx, settings: RunSettings, spark) -> int:
    from jobs import stages

    transform, reconcile, alert_to = settings.transform, settings.reconcile, list(settings.alert.to)
    if args.command in ("run", "transform"):
        stages.run_transform(spark, ctx, transform)
        if args.command == "transform":
            ctx.write_report(RunReport.of(timings_s=ctx.timings))
            return 0
        stages.run_reconcile(ctx, reconcile.source_counts, reconcile.options(transform.fmt))
        alert = stages.run_alert(ctx, alert_to, settings.alert.quarantine_threshold)
        ctx.write_report(RunReport(timings_s=ctx.timings, alert_sent=alert.sent))
        _send_metrics(ctx, args.statsd_host or env.text("CDC_STATSD_HOST") or None)
        if not args.quiet:
            _print_summary(ctx, alert)
        return _alert_exit(alert)
    elif args.command == "decode":
        stages.run_decode(spark, ctx, transform.fmt, list(transform.raw), transform.decode_options(),
                          keep_changes=True).release()
    elif args.command == "merge":
        stages.run_merge(spark, ctx, stages.read_changes(spark, ctx), history=transform.history,
                         buckets=transform.state_buckets)
    elif args.command == "validate":
        stages.run_validate(spark, ctx)
    elif args.command == "reconcile":
        stages.run_reconcile(ctx, reconcile.source_counts, reconcile.options(transform.fmt))
    elif args.command == "alert":
        return _alert_exit(stages.run_alert(ctx, alert_to, settings.alert.quarantine_threshold))
    return 0


def _send_metrics(ctx, statsd_host: str | None) -> None:
    """The run's metrics (jobs.metrics) to a StatsD server, when one is given."""
    if not statsd_host:
        return
    from jobs.metrics import UdpStatsd, send_safely
    from jobs.stages import run_metrics_of

    send_safely(UdpStatsd(statsd_host), run_metrics_of(ctx))


# the run is published, but the data-quality alert it owed could not be sent (as the Airflow task,
# which fails with AlertNotSent): a scheduler sees it and can retry the alert alone
ALERT_NOT_SENT = 3


def _alert_exit(alert: AlertReport) -> int:
    if alert.error:
        print(f"error: data-quality alert not sent: {alert.error}; check the SMTP server, its sender and "
              "recipient rules and the connection smtp_default or SMTP_* (then python -m jobs alert sends it again)",
              file=sys.stderr)
        return ALERT_NOT_SENT
    return 0


def _print_summary(ctx, alert: AlertReport) -> None:
    recon = ctx.read_report(ReconciliationReport) or ReconciliationReport()
    t = (ctx.read_report(DecodeReport) or DecodeReport()).total
    print(f"run {ctx.run_id} of pipeline {ctx.pipeline}: landed {t.landed}, decoded {t.decoded}, "
          f"quarantined {t.quarantined}, ignored {t.ignored}")
    print(f"{'table':<40} {'state rows':>10} {'source rows':>11}  {'status':<9} source counted at")
    for row in recon.tables:
        print(f"{row.table:<40} {row.state_rows:>10} {'-' if row.source_rows is None else row.source_rows:>11}  "
              f"{row.status:<9} {_counted_at(row)}")
    fold = ctx.read_report(FoldReport) or FoldReport()
    for name, table in sorted(fold.tables.items()):
        if table.error:  # no state, so no reconciliation row: the table is listed with why
            print(f"{name:<40} {'-':>10} {'-':>11}  not published: {table.error}")
    print(f"report: {ctx.lake.join(ctx.report_dir)}")
    problems = len(alert.reasons)
    why = f" ({problems} problem{'s' if problems != 1 else ''})" if problems else ""
    err = f"; error: {alert.error}" if alert.error else ""
    print(f"alert email sent: {'yes' if alert.sent else 'no'}{why}{err}")


def _counted_at(row: TableReconciliation) -> str:
    """When the source count that decided the row was true (and how many wait); with no count this run,
    what the last one was."""
    before = row.previous
    if before is not None:
        return f"- (last: {before.verdict} at {before.moment}, run {before.judged_run})"
    judged = row.checkpoints or row.pending
    waiting = f" ({len(row.pending)} pending)" if row.pending else ""
    return f"{judged[-1].moment if judged else '-'}{waiting}"


def _print_expiry(report: ExpireReport) -> None:
    verb = "would expire" if report.dry_run else "expired"
    print(f"snapshots committed before {report.older_than} (each table's {report.retain_last} newest kept):")
    for t in report.tables:
        files = ", ".join(f"{n} {kind}" for kind, n in t.files_deleted.items()) or "no file"
        print(f"  {t.table}: {verb} {t.snapshots_expired}, kept {t.snapshots_kept}; "
              f"files {'to delete' if report.dry_run else 'deleted'}: {files} "
              f"({t.bytes_deleted:,} bytes of data); "
              f"orphans: {t.orphans_deleted} ({t.orphan_bytes_deleted:,} bytes)")


if __name__ == "__main__":  # spark-submit jobs/cli.py <command> ...
    sys.exit(main())
