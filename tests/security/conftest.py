"""Make the suite's shared `scale_case` importable (the suite runs with
--import-mode=importlib, which puts no test directory on sys.path)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))
