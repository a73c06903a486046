"""Pipeline files: the schema, errors that name the file, the field and the fix, and what they resolve to."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from jobs.config import FORMATS, PipelineConfigError, load_pipeline, pipeline_files
from tests.support.pipelines import REPO, blocks, write_pipeline


def _errors(tmp_path: Path, document, env=None) -> list[str]:
    path = tmp_path / "p.yaml"
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    with pytest.raises(PipelineConfigError) as caught:
        load_pipeline(path, env=env or {})
    lines = str(caught.value).splitlines()
    assert all(line.startswith(f"{path}: ") for line in lines)  # every line names the file
    return [line[len(f"{path}: "):] for line in lines]


def test_the_bundled_demo_file_validates_and_resolves_against_the_repository():
    cfg = load_pipeline(REPO / "dags" / "pipelines" / "demo.yaml", env={})
    assert cfg.dag_id == "cdc_demo" and cfg.source.format == "debezium" and cfg.source.location == "files"
    assert cfg.source.files == str(REPO / "demo" / "topics")
    assert cfg.sink.lake == str(REPO / "demo" / "out" / "airflow-lake")  # not the lake `make demo` fills
    assert cfg.sink.catalog is None  # ${CDC_ICEBERG_CATALOG:-} unset: the embedded catalog
    assert cfg.reconcile.counts == str(REPO / "demo" / "source_counts.json")
    assert cfg.table_setting("primary_keys", "shop.public.order_lines") == ["order_id", "line_no"]
    assert cfg.table_setting("primary_keys", "shop.public.orders") == ["id"]


def test_environment_references_and_cdc_home(tmp_path):
    path = write_pipeline(tmp_path, blocks(lake="${LAKE_ROOT}/lake", source={"files": "topics"},
                                           reconcile={"counts": "${COUNTS:-counts.json}"}))
    with pytest.raises(PipelineConfigError, match=r"sink.catalog: an S3 lake needs a pyiceberg catalog"):
        load_pipeline(path, env={"LAKE_ROOT": "s3://bucket", "CDC_HOME": "/srv/cdc"})
    cfg = load_pipeline(path, env={"LAKE_ROOT": "/data", "CDC_HOME": "/srv/cdc"})
    assert cfg.sink.lake == "/data/lake" and cfg.source.files == "/srv/cdc/topics"
    assert cfg.reconcile.counts == "/srv/cdc/counts.json"
    assert _errors(tmp_path, blocks(lake="${LAKE_ROOT}/lake")) == [
        "sink.lake: environment variable LAKE_ROOT is not set; fix: set it, or give a default as ${LAKE_ROOT:-value}"]


def test_without_cdc_home_relative_paths_resolve_against_the_files_folder(tmp_path):
    path = write_pipeline(tmp_path / "deploy" / "pipelines", blocks(lake="../lake", source={"files": "topics"},
                                                                     reconcile={"counts": "../../counts.json"}))
    cfg = load_pipeline(path, env={})
    assert (cfg.sink.lake, cfg.source.files, cfg.reconcile.counts) == (
        str(tmp_path / "deploy" / "lake"), str(tmp_path / "deploy" / "pipelines" / "topics"),
        str(tmp_path / "counts.json"))


def test_a_file_is_read_once_per_process_until_it_or_a_variable_it_reads_changes(tmp_path):
    path = write_pipeline(tmp_path, blocks(lake="${LAKE_ROOT}", source={"files": "topics"}))
    first = load_pipeline(path, env={"LAKE_ROOT": "/a"})
    # a DAG stub's parse, then its task, which Airflow gives variables of its own (AIRFLOW_CTX_*)
    assert load_pipeline(path, env={"LAKE_ROOT": "/a", "AIRFLOW_CTX_DAG_ID": "cdc_demo"}) is first
    assert load_pipeline(path, env={"LAKE_ROOT": "/b"}).sink.lake == "/b"
    assert first.source.files == str(tmp_path / "topics")
    assert load_pipeline(path, env={"LAKE_ROOT": "/a", "CDC_HOME": "/srv"}).source.files == "/srv/topics"
    path.write_text(path.read_text().replace("pipeline:\n  name: demo", "pipeline:\n  name: renamed"))
    assert load_pipeline(path, env={"LAKE_ROOT": "/a"}).name == "renamed"


@pytest.mark.parametrize("change, expected", [
    (lambda d: d["pipeline"].update(schedul="@daily"), "pipeline.schedul: unknown field; fix: did you mean `schedule`?"),
    (lambda d: d["source"].update(format="debezum"),
     "source.format: 'debezum' is not one of " + ", ".join(FORMATS) + "; fix: did you mean `debezium`?"),
    (lambda d: d["sink"].pop("lake"), "sink.lake: Field required; fix: add `lake:` (see docs/pipelines.md)"),
    (lambda d: d["pipeline"].update(schedule="every day"), "pipeline.schedule: 'every day' is not a cron expression"),
    (lambda d: d["pipeline"].update(name="my pipeline"), "pipeline.name: 'my pipeline' is not usable: letters, digits "
     "and _ only, starting with a letter or digit, at most 200 characters (it names the Iceberg namespace, the "
     "lake's folders and the DAG cdc_<name>); fix: rename it, e.g. 'my_pipeline'"),
    (lambda d: d["pipeline"].update(retry_delay="2 minutes"), "pipeline.retry_delay: '2 minutes' is not a duration"),
    (lambda d: d["source"].update(kafka={"topics": ["t"]}),
     "source: give exactly one of kafka, files, connect_s3, eventhubs_capture (got kafka, files)"),
    (lambda d: d["source"].pop("files"), "source: give exactly one of kafka, files, connect_s3, eventhubs_capture (got none)"),
    (lambda d: (d["source"].pop("files"), d["source"].update(kafka={"connection": None, "topics": ["t"]})),
     "source.kafka: give a connection (its extra holds bootstrap.servers and the security settings) or a bootstrap"),
    (lambda d: d["reconcile"].update(connection="src_db"), "reconcile: give connection or counts, not both"),
    (lambda d: d["reconcile"].update(counts="postgresql://u:secret@db/shop"), "reconcile.counts: a counts file's path, not a URL"),
    (lambda d: d["reconcile"].update(count_tolerance="lots"), "reconcile.count_tolerance: tolerance 'lots'"),
    (lambda d: d["alert"].update(to=["oncall"]), "alert.to: not an email address: oncall"),
    (lambda d: d["alert"].update(quarantine_threshold=2), "alert.quarantine_threshold: Input should be less than or equal to 1"),
    (lambda d: d["tables"].append({"match": "t", "primary_keys": []}),
     "tables.2.primary_keys: List should have at least 1 item after validation, not 0; fix: list at least one, or remove `primary_keys`"),
    (lambda d: d["tables"].append({"match": "t", "histroy": True}), "tables.2.histroy: unknown field; fix: did you mean `history`?"),
    (lambda d: d["tables"].append({"match": "t", "value_tolerances": {"price": -0.1}}),
     "tables.2.value_tolerances: a tolerance is a finite number of at least 0 (column price); fix: e.g."),
    (lambda d: d.update(spark_conf={}), "spark_conf: unknown field; fix: did you mean `spark`?"),
    (lambda d: d["pipeline"].update(end="2026-10-01"), "pipeline: end 2026-10-01 is before start 2026-11-01"),
    (lambda d: d["pipeline"].update(tags=["x" * 101]), "pipeline.tags.0: String should have at most 100 characters"),
])
def test_each_mistake_names_its_field_and_fix(tmp_path, change, expected):
    document = blocks()
    change(document)
    errors = _errors(tmp_path, document)
    assert len(errors) == 1 and errors[0].startswith(expected), errors


def test_several_mistakes_are_reported_together_and_yaml_errors_say_where(tmp_path):
    document = blocks()
    document["source"]["format"] = "x"
    document["alert"]["to"] = "not a list"
    assert [e.split(":")[0] for e in _errors(tmp_path, document)] == ["source.format", "alert.to"]
    [line] = _errors(tmp_path, "pipeline:\n  name: [unclosed\n")
    assert line.startswith("not valid YAML at line 3") and "fix: check the indentation and quoting there" in line
    [line] = _errors(tmp_path, "- just a list\n")
    assert "expected a mapping with blocks pipeline, source, sink" in line


def test_the_formats_are_the_decoders():
    from jobs.formats import available_formats

    assert set(FORMATS) == {"auto", *available_formats()}


def test_pipeline_files_are_the_folders_yaml_in_name_order(tmp_path, monkeypatch):
    for name in ("b.yaml", "a.yml", ".hidden.yaml", "notes.md"):
        (tmp_path / name).write_text("x")
    assert [p.name for p in pipeline_files(tmp_path)] == ["a.yml", "b.yaml"]
    monkeypatch.setenv("CDC_PIPELINES_DIR", str(tmp_path))
    assert [p.name for p in pipeline_files()] == ["a.yml", "b.yaml"]
    assert pipeline_files(tmp_path / "missing") == []


# ---- what a file may cost: a pipeline file is read by the DAG processor with every other one -----------
def _alias_bomb(levels: int) -> str:
    """The "billion laughs" document: each level's anchor lists the level below nine times, so the
    ``levels``-th holds 9**levels strings, in a few hundred bytes."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    bomb = _alias_bomb(12)  # 9**12 strings, were it expanded
    assert len(bomb.encode()) < 700
    [line] = _errors(tmp_path, bomb)
    assert line.startswith("more than 100,000 values, each alias (*name) counted as the values it repeats; fix: ")


def test_anchors_and_merge_keys_within_the_budget_are_read_as_written(tmp_path):
    rules = "tables:\n- &audit {match: audit, key_rows_limit: 5}\n- {<<: *audit, match: log}\n"
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(blocks(), sort_keys=False).replace("tables:\n", rules, 1))
    cfg = load_pipeline(path, env={})
    assert cfg.table_setting("key_rows_limit", "x.y.audit") == cfg.table_setting("key_rows_limit", "x.y.log") == 5


def test_a_file_too_large_or_too_deep_is_refused_with_its_size_and_fix(tmp_path):
    big = yaml.safe_dump(blocks()) + "#" * (256 << 10) + "\n"
    [line] = _errors(tmp_path, big)
    assert line.startswith(f"{len(big.encode()):,} bytes, more than a pipeline file's 256 KiB; fix: ")
    for depth in (500, 5000):  # libyaml itself stops at 1000
        [line] = _errors(tmp_path, "pipeline:\n  description: " + "[" * depth + "]" * depth + "\n")
        assert line.startswith(("values nested more than 50 deep; fix: ",
                                "not valid YAML at line 2, column 1014: exceeded maximum nesting depth")), line
    assert _errors(tmp_path, "a: &a [*a]\n")[0].startswith("a YAML alias refers to a value holding itself")
    latin1 = tmp_path / "p.yaml"
    latin1.write_bytes("pipeline: {description: caf\u00e9}\n".encode("latin-1"))
    with pytest.raises(PipelineConfigError, match=r"p.yaml: not UTF-8 text \(byte 27\); fix: save it as UTF-8$"):
        load_pipeline(latin1, env={})


def test_a_bomb_beside_good_files_leaves_their_dags_loading_at_once(tmp_path):
    """The DAG processor parses every pipeline file's stub: a file that took minutes would hold the
    pipelines' DAGs back. A subprocess, so that Airflow's import stays out of the other tests."""
    import os
    import subprocess
    import sys

    folder = tmp_path / "pipelines"
    write_pipeline(folder, blocks("orders", lake=str(tmp_path / "lake")))
    for name, text in (("bomb", _alias_bomb(12)), ("big", "#" * (50 << 20))):
        (folder / f"{name}.yaml").write_text(text)
        (folder / f"{name}.py").write_text((REPO / "dags" / "pipelines" / "demo.py").read_text())
    probe = ("import json, sys; from airflow.dag_processing.dagbag import DagBag; bag = DagBag(sys.argv[1]); "
             "print(json.dumps([sorted(bag.dags), {k.rsplit('/', 1)[-1]: v for k, v in bag.import_errors.items()}]))")
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", probe, str(folder)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    dags, errors = json.loads(done.stdout.strip().splitlines()[-1])
    assert dags == ["cdc_orders"] and sorted(errors) == ["big.py", "bomb.py"]
    assert "bomb.yaml: more than 100,000 values" in errors["bomb.py"]
    assert "big.yaml: 52,428,800 bytes, more than" in errors["big.py"]


# ---- secrets: never in a location, never shown ---------------------------------------------------------
KEY_ID, SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize("change, field", [
    (lambda d: d["sink"].update(lake=f"s3://{KEY_ID}:{SECRET}@bucket/lake", catalog="c"), "sink.lake"),
    (lambda d: d["sink"].update(lake=f"s3://bucket/lake?X-Amz-Signature={SECRET}", catalog="c"), "sink.lake"),
    (lambda d: d["source"].update(files=f"s3://${{KEY}}:{SECRET}@bucket/topics"), "source.files"),
])
def test_credentials_in_a_location_are_refused_saying_where_they_go(tmp_path, change, field):
    document = blocks()
    change(document)
    [line] = _errors(tmp_path, document, env={"KEY": KEY_ID})
    assert line.startswith(f"{field}: holds credentials (") and "fix: remove them from the URI" in line, line
    assert "AWS_ACCESS_KEY_ID" in line and SECRET not in line and KEY_ID not in line


def _secretive_pipeline(tmp_path):
    """A file whose shown values come from variables, some of which hold secrets."""
    document = blocks(pipeline={"description": "orders; ping ${ONCALL_TOKEN} or https://u:pw@wiki/x"},
                      source={"format": "debezium", "files": None,
                              "kafka": {"connection": None, "bootstrap": "${KAFKA_BOOTSTRAP}", "topics": ["t"]}},
                      sink={"lake": "${CDC_LAKE}/lake"},
                      spark={"conf": {"spark.hadoop.fs.s3a.secret.key": "${AWS_SECRET_ACCESS_KEY}"}})
    env = {"ONCALL_TOKEN": "tok-" + SECRET, "KAFKA_BOOTSTRAP": "broker-7.internal:9092",
           "AWS_SECRET_ACCESS_KEY": SECRET, "CDC_LAKE": str(tmp_path / "data")}
    return write_pipeline(tmp_path, document), env


def test_the_checker_shows_other_variables_as_their_references(tmp_path, monkeypatch, capsys):
    from jobs.config import main

    path, env = _secretive_pipeline(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main([str(path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert SECRET not in json.dumps(shown) and "broker-7" not in json.dumps(shown)
    assert shown["pipeline"]["description"] == "orders; ping ${ONCALL_TOKEN} or https://u:***@wiki/x"
    assert shown["source"]["kafka"]["bootstrap"] == "${KAFKA_BOOTSTRAP}"
    assert shown["spark"]["conf"] == {"spark.hadoop.fs.s3a.secret.key": "${AWS_SECRET_ACCESS_KEY}"}
    assert shown["sink"]["lake"] == f"{tmp_path}/data/lake"  # CDC_LAKE: a deployment's path, shown
    # what the run uses is the value
    cfg = load_pipeline(path, env=env)
    assert cfg.source.kafka.bootstrap == "broker-7.internal:9092" and cfg.spark.conf[
        "spark.hadoop.fs.s3a.secret.key"] == SECRET


def test_the_dags_doc_and_description_show_no_secret(tmp_path):
    from jobs.airflow.dags import build_dag

    path, env = _secretive_pipeline(tmp_path)
    dag = build_dag(load_pipeline(path, env=env), path)
    assert SECRET not in dag.doc_md and "broker-7" not in dag.doc_md and "pw@" not in dag.doc_md
    assert "bootstrap `${KAFKA_BOOTSTRAP}`" in dag.doc_md and "${ONCALL_TOKEN} or https://u:***@wiki/x" in dag.doc_md
    assert dag.description == "orders; ping ${ONCALL_TOKEN} or https://u:***@wiki/x"


# ---- one rule for pipeline names: the command line's, the file's, the lake's folders, the namespace -----
@pytest.mark.parametrize("name", ["a.b", "a:b", "a+b", "a=b", "a-b", "_a", "a b", "", "x" * 201])
def test_a_pipeline_name_the_file_refuses_the_command_line_refuses_too(tmp_path, name):
    from jobs.lake.layout import LakeError, check_name

    with pytest.raises(LakeError) as on_the_command_line:
        check_name("pipeline", name)
    [in_a_file] = _errors(tmp_path, blocks(name=name))
    rule = "letters, digits and _ only, starting with a letter or digit, at most 200 characters"
    assert rule in str(on_the_command_line.value) and in_a_file.startswith(f"pipeline.name: {name!r} is not usable: ")
    assert rule in in_a_file and "fix: " in in_a_file


def test_names_both_accept_and_run_ids_keep_their_own_rule(tmp_path):
    from jobs.lake.layout import check_name

    for name in ("orders", "Orders_2", "9x", "x" * 200):
        assert check_name("pipeline", name) == name == load_pipeline(write_pipeline(
            tmp_path, blocks(name=name), "p.yaml"), env={}).name
    assert check_name("run id", "manual:2026-11-01T00:00:00+00:00=a.b") == "manual:2026-11-01T00:00:00+00:00=a.b"


# ---- the checker: python -m jobs.config -------------------------------------------------------
def test_the_checker_is_a_command_line_with_help(capsys):
    from jobs.config import main

    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m jobs.config [-h] [FILE ...]") and "CDC_PIPELINES_DIR" in out
    with pytest.raises(SystemExit) as exited:
        main(["--bogus"])
    assert exited.value.code == 2


def test_the_checker_says_which_local_paths_are_missing_and_which_it_cannot_check(tmp_path, capsys):
    from jobs.config import main

    topics = tmp_path / "topics"
    path = write_pipeline(tmp_path, blocks(source={"files": str(topics)},
                                           reconcile={"counts": str(tmp_path / "counts.json")}))
    assert main([str(path)]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"{path}: source.files: {topics}: no such folder; fix: land or copy the topic dumps there, or correct the "
        "path (a relative one resolves against $CDC_HOME, else the file's folder)",
        f"{path}: reconcile.counts: {tmp_path}/counts.json: no such file; fix: write the counts file there "
        "(docs/operations/reconciliation.md, Counts files), or correct the path (a relative one resolves against $CDC_HOME, else "
        "the file's folder)"]
    topics.mkdir()
    (tmp_path / "counts.json").write_text("{}")
    assert main([str(path)]) == 0 and capsys.readouterr().err == ""
    path.with_suffix(".py").unlink()  # no DAG stub: a note, not a mistake (the command line runs it all the same)
    assert main([str(path)]) == 0
    assert capsys.readouterr().err.strip() == (f"{path}: no DAG stub demo.py beside it: Airflow makes no DAG of it; "
                                               "fix: copy dags/pipelines/demo.py there (every pipeline's stub is the same)")
    remote = write_pipeline(tmp_path, blocks(source={"files": None, "connect_s3": "s3://exports/topics"}), "s3.yaml")
    assert main([str(remote)]) == 0
    assert capsys.readouterr().err.strip() == (
        f"{remote}: source.connect_s3: s3://exports/topics: not checked: reading S3 needs the credentials "
        "the run has, which this check does not use")


def test_a_bad_start_is_one_mistake(tmp_path):
    for start in ("2026-13-01", "tomorrow", "2026-11-01T25:00:00"):
        assert _errors(tmp_path, blocks(pipeline={"start": start})) == [
            f"pipeline.start: {start!r} is not a date or a time; fix: write it as 2026-11-01 or "
            "2026-11-01T06:00:00Z (UTC unless it gives an offset)"]
    assert _errors(tmp_path, blocks(pipeline={"end": "soon"}))[0].startswith("pipeline.end: 'soon' is not a date")
