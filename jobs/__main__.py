"""``python -m jobs``: see jobs.cli."""
import sys

from jobs.cli import main

sys.exit(main())
