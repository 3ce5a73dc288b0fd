"""Correctness on a GPU: the job runner (`runner`) and its arrays and comparisons
(`harness`). The host/FFI builder's stage runs it; `tileport gpu-run` exposes it."""
