"""pyspark-client installs into pyspark's own folder: Python and JVM Spark must be one version."""
import re
from pathlib import Path

import pyspark


def test_python_and_jvm_spark_versions_agree(spark):
    assert spark.version == pyspark.__version__


def test_requirements_pin_pyspark_and_client_to_the_same_version():
    text = (Path(__file__).resolve().parents[2] / "requirements.txt").read_text()
    pins = dict(re.findall(r"^(pyspark|pyspark-client)==(\S+)", text, re.M))
    assert pins["pyspark"] == pins["pyspark-client"] == pyspark.__version__
