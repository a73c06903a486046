"""Pipeline names: the one rule, for the command line (jobs.lake.layout.check_name) and pipeline files
(jobs.config). Light: the DAG processor imports it on every parse.

A pipeline's name is its Iceberg namespace, its folders in the lake (``raw/<name>/``, ``changes/<name>/``
...) and its DAG ``cdc_<name>``. Hence letters, digits and ``_`` only: a ``.`` splits an Iceberg
namespace into levels; a ``:`` breaks Hadoop paths; a ``=`` makes a folder a partition to Spark's
discovery; ``-`` and ``+`` need quoting in Spark SQL and are refused by Hive and Glue database names.
Run ids keep their own, wider rule (jobs.lake.layout).
"""
from __future__ import annotations

import re

PIPELINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_]{0,199}")
PIPELINE_NAME_RULE = "letters, digits and _ only, starting with a letter or digit, at most 200 characters"


def pipeline_name_problem(name: str | None) -> str | None:
    """Why ``name`` cannot name a pipeline, or None."""
    if isinstance(name, str) and PIPELINE_NAME.fullmatch(name):
        return None
    return (f"{name!r} is not usable: {PIPELINE_NAME_RULE} (it names the Iceberg namespace, the lake's "
            "folders and the DAG cdc_<name>)")
