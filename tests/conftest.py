"""Fixtures of the whole suite."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _sandbox_readable_tmp_path(request: pytest.FixtureRequest) -> None:
    """pytest makes `tmp_path` private to its user (0700); where the suite runs as
    root, sandboxed steps run as the unprivileged sandbox user and must be able to
    read the kernel sources a test writes there (toolchain.sandbox)."""
    if "tmp_path" in request.fixturenames:
        request.getfixturevalue("tmp_path").chmod(0o755)
