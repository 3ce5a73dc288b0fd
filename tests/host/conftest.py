"""Fixtures of the host/FFI tests: the real library, built by cargo, and its
generated cffi wrapper."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from nodes.host_builder.binding import OperatorBinding
from nodes.host_builder.library import binding_of, ensure_built, load_wrapper, read_manifest


@pytest.fixture(scope="session")
def library_file() -> Path:
    """The aggregated library, rebuilt first if a source is newer (cargo; slow once)."""
    return ensure_built()


@pytest.fixture(scope="session")
def wrapper() -> ModuleType:
    return load_wrapper()


@pytest.fixture(scope="session")
def library(wrapper: ModuleType, library_file: Path) -> Any:
    return wrapper.Library(library_file)


@pytest.fixture(scope="session")
def softmax_binding() -> OperatorBinding:
    """The softmax port the library holds now: the hand port, or the kernel writer's
    port once the pipeline has run; expectations that depend on it come from here."""
    return binding_of(read_manifest().operator("softmax"))
