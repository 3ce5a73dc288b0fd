"""Make the suite's shared `scale_case` and the service's fixtures importable (the
suite runs with --import-mode=importlib, which puts no test directory on sys.path)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "service"))

from service_fixtures import anonymous, client, context, database, settings, source_root

__all__ = ["anonymous", "client", "context", "database", "settings", "source_root"]
