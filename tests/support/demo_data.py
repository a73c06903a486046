"""The bundled demo's topics, generated for a test session: ``demo/topics`` is not in the repository
(``make demo`` writes it), so a clean clone's tests make their own copy with jobs/demo/generate.py,
whose output is deterministic (the committed demo/source_counts.json is the same file it writes)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def generate_demo(folder: Path, messages: int | None = None) -> Path:
    """The demo's topics under ``folder/topics`` (its source database and counts beside), about ``messages``
    of them (default: the bundled demo's); the topics' path."""
    topics = folder / "topics"
    size = ["--messages", str(messages)] if messages else []
    subprocess.run([sys.executable, "-m", "jobs.demo.generate", "--out", str(topics),
                    "--source-db", str(folder / "source.db"), *size], check=True, capture_output=True, timeout=300, cwd=REPO)
    return topics
