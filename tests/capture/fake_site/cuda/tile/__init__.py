"""A CPU-only stand-in for cuTile Python: `launch` runs the kernel's Python body
and, like the real one, compiles (`kernel._compile`) once per signature."""

from cuda.tile._cext import launch
from cuda.tile._execution import kernel

__all__ = ["kernel", "launch"]
