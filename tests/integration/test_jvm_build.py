"""The JVM-side decoders' own tests (jvm/test): ``jvm/build.sh test`` builds the jar offline, compiles the
tests against it and runs them in a JVM of their own (hence integration)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.support.paths import REPO


@pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK: the JVM-side decoders cannot be built here")
def test_the_java_tests_of_the_jvm_side_decoders_pass():
    done = subprocess.run([str(REPO / "jvm" / "build.sh"), "test"], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    summary = re.search(r"^(\d+) passed, 0 failed$", done.stdout, re.MULTILINE)
    assert summary and int(summary.group(1)) >= 10, done.stdout[-4000:]
