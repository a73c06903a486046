"""How far a run's landing shows the lake has reached in source time: evidence for a quiet source.

Only applied changes move the lake's reach (jobs.reconcile.checkpoints): a count taken just after a source's last
change would stay ``behind`` until another change arrived. A run whose landing consumed every partition
of every topic it read through its interval's end holds every change the source committed up to that
end minus the pipeline's **capture delay** (how long a committed change may take to reach the topic,
with its timestamp, from the source: a connector's lag, a restart), whether or not one came. The
landings' manifests (jobs/land/) say how each partition ended:

- ``timestamp``: at a message at or after the end; ``next_interval``: where the interval landed after it
  starts. Both read past the end.
- ``high_watermark`` (Kafka): at the high watermark; past the end only when the watermark was read at or
  after the end (``high_watermark_read_at``), so that every message appended before then is below it.
- anything else (an export read to the end of the files there were, a landing from files, a manifest
  without these fields): no evidence, for what came after the files is not known.

Reading a manifest never fails a run: a field absent is no evidence.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jobs.model.intervals import IntervalError, utc

DEFAULT_CAPTURE_DELAY = "15m"  # a connector restart or a rebalance delays capture by minutes
MANIFEST = "_manifest.json"
_READ_PAST_END = ("timestamp", "next_interval")


@dataclass(frozen=True)
class LandedReach:
    """``through``: epoch microseconds; the lake holds every change of source time at or before it (None:
    the landing is no evidence, ``why_not`` says why)."""

    through: int | None
    capture_delay_s: float
    interval_end: int | None = None
    why_not: str | None = None

    def as_dict(self) -> dict[str, Any]:
        from jobs.reconcile.checkpoints import format_time

        return {"landed_through": format_time(self.through), "interval_end": format_time(self.interval_end),
                "capture_delay_s": self.capture_delay_s, "why_not": self.why_not}


def _micros(text: Any) -> int | None:
    try:
        moment = utc(text)
    except (IntervalError, TypeError):
        return None
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond


def _not_past_end(manifest: dict[str, Any], end: int) -> str | None:
    """Why some partition of a landed interval was not read past its end (None: every one was)."""
    topic, partitions = manifest.get("topic"), manifest.get("partitions") or []
    if not partitions:
        return f"{topic}: the landing lists no partition"
    for p in partitions:
        reason, where = p.get("end_reason"), f"{topic}[{p.get('partition')}]"
        if reason in _READ_PAST_END:
            continue
        if reason == "high_watermark":
            read_at = _micros(p.get("high_watermark_read_at"))
            if read_at is None:
                return f"{where} stopped at a high watermark read at an unknown time"
            if read_at < end:
                return f"{where} stopped at the high watermark read at {p['high_watermark_read_at']}, before the " \
                       "interval's end"
            continue
        kind = (manifest.get("source") or {}).get("kind")
        return f"{where}: the landing ({kind}) does not show it read past the interval's end"
    return None


def landing_reach(manifests: list[dict[str, Any]], capture_delay_s: float) -> LandedReach:
    """The evidence of the landed intervals a run read: every partition read past its interval's end."""
    if not manifests:
        return LandedReach(None, capture_delay_s, why_not="the run read no landed interval")
    ends = []
    for manifest in manifests:
        end = _micros((manifest.get("interval") or {}).get("end"))
        if end is None:
            return LandedReach(None, capture_delay_s, why_not=f"{manifest.get('topic')}: no interval end")
        why = _not_past_end(manifest, end)
        if why is not None:
            return LandedReach(None, capture_delay_s, why_not=why)
        ends.append(end)
    end = min(ends)
    return LandedReach(end - round(capture_delay_s * 1_000_000) - 1, capture_delay_s, end)


def run_landing_reach(lake, pipeline: str, run_id: str, capture_delay_s: float) -> LandedReach:
    """The evidence of the landed intervals the run decoded (its decode.json's ``raw``)."""
    from jobs.lake import storage
    from jobs.lake.layout import Lake
    from jobs.lake.raw import expand
    from jobs.model.reports import DecodeReport

    report = f"{Lake.report_dir(pipeline, run_id)}/{DecodeReport.FILE}"
    if not lake.exists(report):
        return LandedReach(None, capture_delay_s, why_not="no decode report of this run")
    raw = DecodeReport.from_json(lake.read_json(report)).raw or []
    manifests = []
    try:
        for folder in (f for given in ([raw] if isinstance(raw, str) else raw) for f in expand(given)):
            location = folder.replace("s3a://", "s3://", 1).rstrip("/")
            if not storage.exists(f"{location}/{MANIFEST}"):
                return LandedReach(None, capture_delay_s, why_not=f"{folder} is not a landed interval (no {MANIFEST})")
            manifests.append(json.loads(storage.read_text(f"{location}/{MANIFEST}")))
    except (OSError, ValueError) as exc:  # the run is reconciled all the same, without this evidence
        return LandedReach(None, capture_delay_s, why_not=f"its landing cannot be read ({type(exc).__name__}: {exc})")
    return landing_reach(manifests, capture_delay_s)
