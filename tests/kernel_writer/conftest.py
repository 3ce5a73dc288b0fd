"""Make the lifter tests' shared kernel (lift_support) importable: the suite runs
with --import-mode=importlib, which puts no test directory on sys.path."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
