"""Where the repository and the test resources are."""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# the vendor documents (seeds/) and the captured messages (<format>/, each folder's SOURCE.md gives their
# provenance and licence) the tests read; CDC_SHARED_DIR (tests/conftest.py) points elsewhere
RESOURCES = REPO / "tests" / "resources"
