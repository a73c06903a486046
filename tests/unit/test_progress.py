"""jobs.progress: the line each stage ends with, from its report."""
from jobs.progress import STAGE_REPORTS, SUMMARIES, stage_done


def test_each_stage_says_what_it_did():
    decode = {"total": {"landed": 12345, "decoded": 12000, "quarantined": 3, "ignored": 342}, "tables": {"a": {}, "b": {}}}
    assert stage_done("decode", 12.34, decode) == (
        "decode: 12,345 messages: 12,000 decoded, 3 quarantined, 342 ignored; 2 tables (12.3 s)")
    merge = {"tables": {"a": {"state_rows": 1000}, "b": {"state_rows": 24}, "c": {"error": "plan", "records": 2}},
             "held": {"records": 7}}
    assert stage_done("fold_publish", 3, merge) == (
        "fold_publish: 2 tables committed, 1,024 rows in their state, 7 records held for the next run; "
        "not published: c (3.0 s)")
    recon = {"tables": [{"status": "match"}, {"status": "behind"}, {"status": "match"}]}
    assert stage_done("reconcile", 1, recon) == "reconcile: 3 tables: 1 behind, 2 match (1.0 s)"
    assert stage_done("alert", 0.5, {"sent": False, "skipped": "no problems"}) == "alert: no email: no problems (0.5 s)"
    assert stage_done("validate", 2, {"suites": [{"success": True}, {"success": False}]}) == "validate: 2 suites, 1 failed (2.0 s)"
    assert stage_done("expire", 1, None) == "expire: done (1.0 s)"


def test_every_stage_with_a_report_has_a_summary():
    assert set(STAGE_REPORTS) == set(SUMMARIES)


def test_a_rerun_of_a_published_run_says_its_tables_are_unchanged_not_committed():
    """merge.json of a re-run marks the tables the run had already committed ``already_published``: nothing
    was committed again, and the closing line says so."""
    rerun = {"tables": {t: {"already_published": True, "snapshot_id": 1, "state_rows": 10} for t in "abc"}}
    assert stage_done("fold_publish", 1, rerun) == (
        "fold_publish: 3 tables unchanged (already published by this run), 30 rows in their state (1.0 s)")
    # a re-run that finished what a killed attempt left: one table committed now, two unchanged
    partly = {"tables": {"a": {"state_rows": 5}, "b": {"already_published": True, "state_rows": 1},
                         "c": {"already_published": True, "state_rows": 1}}}
    assert stage_done("fold_publish", 1, partly) == (
        "fold_publish: 1 table committed, 2 tables unchanged (already published by this run), "
        "7 rows in their state (1.0 s)")
