"""The JVM-side decoders (jobs.spark.jvm): on the class path of the tests' session with the record layout
the pipeline expects, and, where one is not, a setup error that names the jar and how to build it and
put it on the class path, which the command line prints as one line."""
from __future__ import annotations

import pytest

from jobs.errors import SetupError, failure_line
from jobs.formats.registry import ENTRIES
from jobs.model.record import CHANGE_RECORD_COLUMNS
from jobs.spark import jvm

DEBEZIUM, DTS_AVRO = ENTRIES["debezium"].jvm_decoder, ENTRIES["dts_avro"].jvm_decoder


def test_the_decoders_are_on_the_class_path_with_the_record_layout(spark):
    for class_name in (e.jvm_decoder for e in ENTRIES.values() if e.jvm_decoder):
        jvm.require(spark, class_name)  # raises where the jar of jvm/build.sh is not on the class path
    assert spark._jvm.cdc.Outcomes.RECORD_FIELDS.split(",") == list(CHANGE_RECORD_COLUMNS)


def test_a_decoder_not_on_the_class_path_is_a_setup_error_naming_the_jar_and_the_fix(spark):
    with pytest.raises(jvm.JvmDecoderMissing) as raised:
        jvm.require(spark, "cdc.NoSuchUdf")  # a class no jar holds: the shared session is left as it is
    message = str(raised.value)
    assert isinstance(raised.value, SetupError) and "\n" not in message
    assert "cdc.NoSuchUdf is not on the Spark driver's class path" in message
    assert str(jvm.jar_path() or jvm.DEFAULT_JAR) in message
    assert "make setup" in message and "jvm/build.sh" in message and "--jars" in message
    # the command line's one line says it is a setup problem and keeps the whole fix
    line = failure_line("run", "decode", raised.value)
    assert line.startswith("error: run failed in decode: setup problem: the JVM-side decoder cdc.NoSuchUdf")
    assert "make setup" in line and "--jars" in line and "\n" not in line


def test_the_error_says_whether_the_jar_was_not_built_or_not_given_to_the_session(monkeypatch, tmp_path):
    monkeypatch.setattr(jvm, "DEFAULT_JAR", tmp_path / "build" / "cdc-jvm.jar")
    monkeypatch.delenv("CDC_JVM_JAR", raising=False)
    not_built = str(jvm.missing(DEBEZIUM))
    assert f"its jar {tmp_path / 'build' / 'cdc-jvm.jar'} was not built" in not_built
    assert f"--jars {tmp_path / 'build' / 'cdc-jvm.jar'}" in not_built
    monkeypatch.setenv("CDC_JVM_JAR", str(tmp_path / "elsewhere.jar"))
    assert f"its jar {tmp_path / 'elsewhere.jar'} (CDC_JVM_JAR) does not exist" in str(jvm.missing(DTS_AVRO))
    built = tmp_path / "cdc-jvm.jar"
    built.write_bytes(b"PK")
    monkeypatch.setenv("CDC_JVM_JAR", str(built))
    started_without = str(jvm.missing(DTS_AVRO))
    assert f"the Spark session was started without its jar {built}" in started_without
    assert "make setup" in started_without and f"--jars {built}" in started_without
