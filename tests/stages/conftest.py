"""Make the shared helpers importable (the suite runs with --import-mode=importlib,
which puts no test directory on sys.path): this directory's stage_support, the
loopback OpenAI-compatible endpoint of tests/llm and the scripted stages of
tests/graph."""

import sys
from pathlib import Path

HERE = Path(__file__).parent
for directory in (HERE, HERE.parent / "llm", HERE.parent / "graph"):
    sys.path.insert(0, str(directory))
