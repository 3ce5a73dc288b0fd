"""Stage B, the kernel writer: lifts a reference kernel's Tile IR into cutile-rs
source, recovers its generics by differential specialisation and proves the
port by compiling it back to Tile IR and SASS (docs/KERNEL_WRITER.md)."""

from nodes.kernel_writer.node import run

__all__ = ["run"]
