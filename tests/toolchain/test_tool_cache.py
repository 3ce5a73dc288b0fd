"""Deterministic tool runs kept by content (toolchain.tool_cache): a reproducible
tileiras run and a cuobjdump listing are looked up by their input bytes, flags and
tool; a sample, a submitted file and a changed input never are. Each test plants a
marker in the entry a run would read, so a lookup that did not happen (or happened
where it must not) shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolchain import tool_cache
from toolchain.env import REPO_ROOT, find_toolchain
from toolchain.sandbox import unavailable_reason
from toolchain.tools import TILEIRAS_OPT_LEVEL, _fixed_layout_prefix, cuobjdump_sass, tileiras

RUN = REPO_ROOT / (
    "tests/service/fixtures/h200_completion/service/artifacts/runs/"
    "38479f136dcc4cf691b49ed10af185f0/generated/generated"
)
BYTECODE = RUN / "row__ragged_f32.sm_90.bytecode"
CUBIN = RUN / "row__ragged_f32" / "reference.sm_90.cubin"
MARKER = b"kept entry"
FLAGS = ["--gpu-name=sm_90", TILEIRAS_OPT_LEVEL, "-o"]

needs_fixed_layout = pytest.mark.skipif(
    _fixed_layout_prefix() is None,
    reason="setarch cannot fix the address layout here: no tileiras run is reproducible",
)


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILEPORT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(tool_cache.SWITCH, raising=False)


def tileiras_key(bytecode: Path) -> str:
    return tool_cache.content_key(
        str(find_toolchain().tool("tileiras")), FLAGS, bytecode.read_bytes()
    )


@needs_fixed_layout
def test_a_reproducible_run_is_kept_and_served(tmp_path: Path) -> None:
    first = tileiras(BYTECODE, tmp_path / "first.cubin", "sm_90")
    assert tool_cache.restore("tileiras", tileiras_key(BYTECODE)) == first.read_bytes()
    tool_cache.keep("tileiras", tileiras_key(BYTECODE), MARKER)
    assert tileiras(BYTECODE, tmp_path / "second.cubin", "sm_90").read_bytes() == MARKER


@needs_fixed_layout
def test_another_input_target_or_a_sample_is_not_served(tmp_path: Path) -> None:
    tool_cache.keep("tileiras", tileiras_key(BYTECODE), MARKER)
    other = RUN / "row__ragged_f16.sm_90.bytecode"
    assert tileiras(other, tmp_path / "other.cubin", "sm_90").read_bytes() != MARKER
    assert tileiras(BYTECODE, tmp_path / "sm_100.cubin", "sm_100").read_bytes() != MARKER
    sample = tileiras(BYTECODE, tmp_path / "sample.cubin", "sm_90", fixed_layout=False)
    assert sample.read_bytes() != MARKER


@needs_fixed_layout
@pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
def test_submitted_bytes_are_assembled_in_the_sandbox_never_from_the_cache(
    tmp_path: Path,
) -> None:
    tool_cache.keep("tileiras", tileiras_key(BYTECODE), MARKER)
    boxed = tileiras(BYTECODE, tmp_path / "boxed.cubin", "sm_90", submitted=True)
    assert boxed.read_bytes() != MARKER
    assert tool_cache.restore("tileiras", tileiras_key(BYTECODE)) == MARKER


@needs_fixed_layout
def test_switched_off_nothing_is_read_or_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool_cache.keep("tileiras", tileiras_key(BYTECODE), MARKER)
    monkeypatch.setenv(tool_cache.SWITCH, "off")
    assert tileiras(BYTECODE, tmp_path / "cold.cubin", "sm_90").read_bytes() != MARKER
    monkeypatch.delenv(tool_cache.SWITCH)
    assert tool_cache.restore("tileiras", tileiras_key(BYTECODE)) == MARKER


def test_a_listing_is_kept_by_the_cubins_bytes(tmp_path: Path) -> None:
    listing = cuobjdump_sass(CUBIN)
    assert "FUNC" in listing or "Function" in listing
    key = tool_cache.content_key(
        str(find_toolchain().tool("cuobjdump")), ["-sass"], CUBIN.read_bytes()
    )
    assert tool_cache.restore("cuobjdump", key) == listing.encode()
    tool_cache.keep("cuobjdump", key, MARKER)
    assert cuobjdump_sass(CUBIN) == MARKER.decode()
    copy = tmp_path / "copy.cubin"
    copy.write_bytes(CUBIN.read_bytes())
    assert cuobjdump_sass(copy) == MARKER.decode()  # the bytes are the key, not the path
