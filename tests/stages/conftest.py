"""Make the shared helpers importable (the suite runs with --import-mode=importlib,
which puts no test directory on sys.path): this directory's stage_support and the
loopback OpenAI-compatible endpoint of tests/llm."""

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "llm"))
