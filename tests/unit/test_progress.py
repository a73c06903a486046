"""jobs.progress: the line each stage ends with, from its report."""
from jobs.progress import STAGE_REPORTS, SUMMARIES, stage_done


def test_each_stage_says_what_it_did():
    decode = {"total": {"landed": 12345, "decoded": 12000, "quarantined": 3, "ignored": 342}, "tables": {"a": {}, "b": {}}}
    assert stage_done("decode", 12.34, decode) == (
        "decode: 12,345 messages: 12,000 decoded, 3 quarantined, 342 ignored; 2 tables (12.3 s)")
    merge = {"tables": {"a": {"state_rows": 1000}, "b": {"state_rows": 24}, "c": {"error": "plan", "records": 2}},
             "held": {"records": 7}}
    assert stage_done("fold_publish", 3, merge) == (
        "fold_publish: 3 tables committed, 1,024 rows in their state, 7 records held for the next run; "
        "not published: c (3.0 s)")
    recon = {"tables": [{"status": "match"}, {"status": "behind"}, {"status": "match"}]}
    assert stage_done("reconcile", 1, recon) == "reconcile: 3 tables: 1 behind, 2 match (1.0 s)"
    assert stage_done("alert", 0.5, {"sent": False, "skipped": "no problems"}) == "alert: no email: no problems (0.5 s)"
    assert stage_done("validate", 2, {"suites": [{"success": True}, {"success": False}]}) == "validate: 2 suites, 1 failed (2.0 s)"
    assert stage_done("expire", 1, None) == "expire: done (1.0 s)"


def test_every_stage_with_a_report_has_a_summary():
    assert set(STAGE_REPORTS) == set(SUMMARIES)
