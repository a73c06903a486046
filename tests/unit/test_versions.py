"""pyspark-client installs into pyspark's own folder: Python and JVM Spark must be one version."""
import pyspark

from tests.support.packaging import pinned


def test_python_and_jvm_spark_versions_agree(spark):
    assert spark.version == pyspark.__version__


def test_requirements_pin_pyspark_and_client_to_the_same_version():
    # pyspark is the runtime's, pyspark-client the [airflow] extra's (the Spark provider pulls it)
    assert pinned("pyspark") == pinned("pyspark-client", "airflow") == pyspark.__version__
