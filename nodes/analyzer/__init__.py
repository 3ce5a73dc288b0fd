"""Stage A, the analyzer (see `nodes.analyzer.stage`). Launch capture for GPU
hosts lives in `nodes.analyzer.capture`."""

from nodes.analyzer.stage import run

__all__ = ["run"]
