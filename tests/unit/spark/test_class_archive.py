"""jobs.spark.class_archive: the driver's class archive recorded by a real JVM, kept once that JVM has exited, then
mapped by the next ones; a recording cut short is never kept, and new jars record a new archive."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from jobs.spark.class_archive import class_archive, with_driver_options

JAVA = shutil.which("java")
pytestmark = pytest.mark.skipif(JAVA is None, reason="needs a JVM")


@pytest.fixture
def env(tmp_path):
    """A Spark home of one jar, the archives in a folder of the test's own."""
    (tmp_path / "spark" / "jars").mkdir(parents=True)
    (tmp_path / "spark" / "jars" / "spark-core.jar").write_bytes(b"classes")
    return {"PATH": os.environ["PATH"], "SPARK_HOME": str(tmp_path / "spark"),
            "CDC_CLASS_ARCHIVE": str(tmp_path / "archives")}


def java(options: str, *more: str) -> subprocess.CompletedProcess:
    """A JVM started with a driver's options (what spark-submit's driver is, for the archive)."""
    return subprocess.run([JAVA, *options.split(), *more, "-version"], capture_output=True, text=True, check=False)


def test_the_first_driver_records_the_archive_and_the_next_ones_map_it(env, tmp_path):
    assert class_archive(record=False, env=env) is None  # none yet, and none recorded unless asked
    first = class_archive(record=True, env=env)
    assert first.pending.parent == tmp_path / "archives" and not first.path.exists()
    assert java(first.jvm_options).returncode == 0  # the JVM writes it as it exits
    assert first.settle()
    assert sorted((tmp_path / "archives").iterdir()) == [first.path]  # renamed into place: no recording left
    later = class_archive(record=True, env=env)
    assert later.pending is None and later.path == first.path
    # -Xshare:on: a JVM that cannot map the archive does not start
    mapped = java(later.jvm_options, "-Xshare:on")
    assert mapped.returncode == 0 and "sharing" in mapped.stderr


def test_a_recording_cut_short_is_not_kept(env, tmp_path, monkeypatch):
    whole = class_archive(record=True, env=env)
    java(whole.jvm_options)
    cut = class_archive(record=True, env=env)
    cut.pending.write_bytes(whole.pending.read_bytes()[: whole.pending.stat().st_size // 2])
    # a JVM mapping it would crash: it is checked by one before it is kept, and removed
    crashes = tmp_path / "crashes"
    crashes.mkdir()
    assert java(f"-XX:SharedArchiveFile={cut.pending} -XX:ErrorFile={crashes}/hs_err_%p.log").returncode != 0
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    assert not cut.settle()
    assert list(workdir.iterdir()) == []  # the checking JVM's crash report is not left where the caller works
    assert not cut.pending.exists() and not cut.path.exists()
    assert class_archive(record=False, env=env) is None


def test_new_jars_record_a_new_archive_and_the_old_one_goes(env, tmp_path):
    old = class_archive(record=True, env=env)
    java(old.jvm_options)
    assert old.settle()
    (tmp_path / "spark" / "jars" / "spark-sql.jar").write_bytes(b"more classes")  # another Spark
    assert class_archive(record=False, env=env) is None
    new = class_archive(record=True, env=env)
    assert new.path != old.path
    java(new.jvm_options)
    assert new.settle()
    assert sorted((tmp_path / "archives").iterdir()) == [new.path]


def test_off_or_a_folder_the_jvm_options_cannot_name_means_no_archive(env, tmp_path):
    assert class_archive(record=True, env={**env, "CDC_CLASS_ARCHIVE": "off"}) is None
    assert class_archive(record=True, env={**env, "CDC_CLASS_ARCHIVE": str(tmp_path / "with blank")}) is None
    assert class_archive(record=True, env={**env, "SPARK_HOME": "", "JAVA_HOME": str(tmp_path / "no-jdk")}) is None


def test_the_archive_options_follow_the_drivers_own(env):
    archive = class_archive(record=True, env=env)
    conf = with_driver_options({"spark.driver.extraJavaOptions": "-Duser.timezone=UTC", "k": "v"}, archive)
    assert conf == {"spark.driver.extraJavaOptions": f"-Duser.timezone=UTC {archive.jvm_options}", "k": "v"}
    assert with_driver_options({"k": "v"}, None) == {"k": "v"}
