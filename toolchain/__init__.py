"""Adapters for the external tools: tileiras, tileirdisasm, cuobjdump, cargo, CUPTI."""
