"""spark-submit's application (jobs.spark.submit.submit_settings): runs jobs.cli with the ``jobs``
package spark-submit put on the path (``--py-files``: the archive of jobs.spark.submit), never with
the package this file lies in, so that the driver runs the very code its executors run.

    spark-submit --py-files cdc-jobs-<digest>.zip jobs/spark_entry.py transform --lake ... --raw ...
"""
import os
import sys


def _without_own_folder(path: list[str]) -> list[str]:
    """``path`` without this file's folder, which Python put first because it runs this file."""
    here = os.path.dirname(os.path.realpath(__file__))
    return [p for p in path if not p or os.path.realpath(p) != here]


if __name__ == "__main__":
    sys.path[:] = _without_own_folder(sys.path)
    import jobs
    from jobs.cli import main

    print(f"cdc: jobs package from {os.path.dirname(jobs.__file__)}", file=sys.stderr, flush=True)
    sys.exit(main())
