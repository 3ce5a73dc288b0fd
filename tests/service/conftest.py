"""The service fixtures (service_fixtures.py). The suite runs with
--import-mode=importlib: this folder is put on the path so the tests import
service_support."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from service_fixtures import anonymous, client, context, database, settings, source_root

__all__ = ["anonymous", "client", "context", "database", "settings", "source_root"]
