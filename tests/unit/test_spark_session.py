"""jobs.spark: the session's settings, and a setting changed for one step only."""
import pytest

from jobs.spark import JVM_OPTIONS, SPARK_CONF, session_conf

KEY = "spark.sql.shuffle.partitions"


def test_session_conf_sets_for_the_block_then_restores_even_on_error(spark):
    before = spark.conf.get(KEY)
    assert before == SPARK_CONF[KEY]
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
