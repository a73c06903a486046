"""jobs.spark.session: the session's settings, and a setting changed for one step only."""
import json

import pytest

from jobs.spark.session import JVM_OPTIONS, SPARK_CONF, jvm_log_level, jvm_options, session_conf, session_settings

KEY = "spark.sql.shuffle.partitions"


def test_session_conf_sets_for_the_block_then_restores_even_on_error(spark):
    before = spark.conf.get(KEY)
    assert before == session_settings()[KEY] == "2"  # CDC_SHUFFLE_PARTITIONS of tests/conftest.py
    with session_conf(spark, KEY, "5"):
        assert spark.conf.get(KEY) == "5"
    assert spark.conf.get(KEY) == before
    with pytest.raises(RuntimeError):
        with session_conf(spark, KEY, "3"):
            raise RuntimeError("a failed write")
    assert spark.conf.get(KEY) == before


def test_session_conf_unsets_what_was_not_set(spark):
    key = "spark.cdc.test.only"
    with session_conf(spark, key, "x"):
        assert spark.conf.get(key) == "x"
    assert spark.conf.get(key, None) is None


def test_the_session_runs_with_the_pipeline_settings(spark):
    # generated code split small and the parallel collector: what the bench's figures were measured with
    assert spark.conf.get("spark.sql.codegen.hugeMethodLimit") == "8000"
    assert "-XX:+UseParallelGC" in JVM_OPTIONS
    assert JVM_OPTIONS in spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")


def test_the_tuning_variables_are_read_when_a_session_is_made_and_change_only_their_settings():
    assert session_settings({})[KEY] == SPARK_CONF[KEY] == "8"
    tuned = session_settings({"CDC_SHUFFLE_PARTITIONS": " 3 ", "CDC_SPARK_ADAPTIVE": "false", "CDC_JIT": "c1"})
    assert (tuned[KEY], tuned["spark.sql.adaptive.enabled"], tuned["spark.ui.enabled"]) == ("3", "false", "false")
    assert tuned["spark.driver.extraJavaOptions"] == tuned["spark.executor.extraJavaOptions"] == jvm_options(
        {"CDC_JIT": "c1"})
    assert session_settings({"CDC_SPARK_UI": "true"})["spark.driver.extraJavaOptions"] == JVM_OPTIONS


def test_cdc_jit_chooses_the_quick_compiler_only_or_the_tiered_default():
    assert jvm_options({}) == JVM_OPTIONS == jvm_options({"CDC_JIT": "tiered"})
    assert jvm_options({"CDC_JIT": " C1 "}) == JVM_OPTIONS + " -XX:TieredStopAtLevel=1"
    with pytest.raises(ValueError, match="CDC_JIT='c2': one of tiered, c1"):
        jvm_options({"CDC_JIT": "c2"})


def test_lake_scans_split_small_files_into_pieces_for_every_core(spark, tmp_path):
    from jobs.stages import lake_scans

    path = str(tmp_path / "many")
    spark.range(0, 8000, numPartitions=8).write.parquet(path)  # 8 small files
    cores = spark.sparkContext.defaultParallelism
    packed = spark.read.parquet(path).rdd.getNumPartitions()
    with lake_scans(spark):
        split = spark.read.parquet(path).rdd.getNumPartitions()
    assert split >= min(8, 4 * cores)  # 4 pieces per core asked for (a file is not split below its row group)
    if cores <= 2:
        assert packed < 8  # on its own, Spark packs them to fill its cores once
    assert spark.conf.get("spark.sql.files.minPartitionNum", None) is None


def test_jvm_log_level_sets_a_logger_for_the_block_then_restores_it_even_on_error(spark):
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j
    name = "org.apache.spark.rdd.MapPartitionsRDD"

    def level() -> str:
        return log4j.LogManager.getLogger(name).getLevel().toString()

    before = level()
    assert before != "ERROR"
    with pytest.raises(RuntimeError):
        with jvm_log_level(spark, name, "ERROR"):
            assert level() == "ERROR"
            raise RuntimeError("boom")
    assert level() == before
    with jvm_log_level(spark, name, "ERROR"):  # again: the configuration the first block left behind
        pass
    # it inherits again, as before the blocks: a change of its parent's level reaches it
    with jvm_log_level(spark, name.rsplit(".", 1)[0], "DEBUG"):
        assert level() == "DEBUG"
    assert level() == before


def test_s3a_settings_name_no_credentials_and_what_was_given_wins() -> None:
    from jobs.spark.session import S3A_DURATIONS, s3a_conf, session_settings

    conf = s3a_conf("http://127.0.0.1:9000")
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert all(conf[f"spark.hadoop.{key}"].isdigit() for key in S3A_DURATIONS)  # plain numbers
    assert "EnvironmentVariableCredentialsProvider" in conf["spark.hadoop.fs.s3a.aws.credentials.provider"]
    assert not {"spark.hadoop.fs.s3a.endpoint", "spark.hadoop.fs.s3a.path.style.access"} & set(s3a_conf(None))
    env = {"AWS_ENDPOINT_URL": "http://any:1", "AWS_ENDPOINT_URL_S3": "http://s3:2", "AWS_ACCESS_KEY_ID": "AKIDSECRETID",
           "AWS_SECRET_ACCESS_KEY": "the-secret-key",
           "CDC_SPARK_CONF": json.dumps({"spark.hadoop.fs.s3a.path.style.access": "false", "spark.jars": "/x/a.jar"})}
    settings = session_settings(env)
    assert not {"AKIDSECRETID", "the-secret-key"} & {*settings.values()}  # S3A reads them from the environment
    assert settings["spark.hadoop.fs.s3a.endpoint"] == "http://s3:2"  # the S3 one first, as jobs.lake.storage
    assert settings["spark.hadoop.fs.s3a.path.style.access"] == "false"  # CDC_SPARK_CONF wins
    assert settings["spark.jars"].split(",")[-1] == "/x/a.jar"
    # a driver spark-submit started keeps what it was given (jobs.spark.submit passed CDC_SPARK_CONF, jars)
    submitted = session_settings(env, launched={"spark.hadoop.fs.s3a.endpoint": "http://given:3", "spark.jars": "y"})
    assert "spark.hadoop.fs.s3a.endpoint" not in submitted and "spark.jars" not in submitted
    assert submitted["spark.hadoop.fs.s3a.connection.timeout"] == S3A_DURATIONS["fs.s3a.connection.timeout"]


def test_the_driver_heap_is_a_quarter_of_the_machine_within_bounds_unless_given():
    from jobs.spark.session import DRIVER_MEMORY_BOUNDS_MB, driver_memory

    low, high = DRIVER_MEMORY_BOUNDS_MB
    assert driver_memory(machine_mb=24 * 1024) == "6144m"
    assert driver_memory(machine_mb=2 * 1024) == f"{low}m"  # a small machine still gets Spark's least
    assert driver_memory(machine_mb=256 * 1024) == f"{high}m"
    assert driver_memory("3g", machine_mb=24 * 1024) == "3g"
    assert driver_memory(" auto ", machine_mb=24 * 1024) == "6144m"


def test_a_fresh_jvm_gets_the_default_driver_heap_unless_the_user_sets_one():
    from jobs.spark.session import driver_memory, session_settings

    assert session_settings(env={})["spark.driver.memory"] == driver_memory()
    given = session_settings(env={"CDC_SPARK_CONF": '{"spark.driver.memory": "2g"}'})
    assert given["spark.driver.memory"] == "2g"
    # a driver spark-submit started keeps the heap it was given
    assert "spark.driver.memory" not in session_settings(env={}, launched={"spark.driver.memory": "5g"})


def test_columns_written_without_a_dictionary_are_plain_encoded_and_the_others_keep_theirs(spark, tmp_path):
    import pyarrow.parquet as pq

    from jobs.spark.session import without_dictionary

    rows = spark.range(1000).selectExpr("CAST(id AS STRING) AS position", "CAST(id % 3 AS STRING) AS op")
    rows.coalesce(1).write.options(**without_dictionary(["position"])).parquet(str(tmp_path / "out"))
    (part,) = (tmp_path / "out").glob("*.parquet")
    group = pq.ParquetFile(part).metadata.row_group(0)
    chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    assert not chunks["position"].has_dictionary_page and chunks["op"].has_dictionary_page
