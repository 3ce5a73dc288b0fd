"""Paths a port spec names: each field that names a file or folder is marked in the
model and checked by the service's intake; a bytecode dump stays below the spec's
folder and is read as a plain file, never past a bound."""

from __future__ import annotations

import os
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from app.intake import SPEC_PATH_FIELDS
from schemas.port_spec import PortSpec, PortSpecError, load_port_spec
from toolchain.bytecode_dump import MAX_DUMP_BYTES, DumpError, bytecode_version
from toolchain.env import REPO_ROOT
from toolchain.sandbox import unavailable_reason
from toolchain.tools import INPUT, ToolError, _run_boxed, tileirdisasm

VECTOR_ADD = REPO_ROOT / "examples" / "kernels" / "vector_add.port.yaml"
DUMP = REPO_ROOT / "tests" / "reference" / "dumps" / "vector_add.tileirbc"
# A field named like one of these names a file or a folder, but for NOT_PATHS.
PATH_LIKE = ("source", "source_root", "bytecode", "_path", "_file", "_dir", "folder")
NOT_PATHS = {
    "launch_path",  # direct or autotuned
    "tolerances.source",  # where a tolerance's numbers were taken from
}


def _models(annotation: object) -> list[type[BaseModel]]:
    """The models an annotation holds (in a list, a dict, a union)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models(arg)]


def _fields(model: type[BaseModel], prefix: str = "") -> dict[str, bool]:
    """Every field of `model` and of the models below it (a list's as `name[]`), and
    whether it is marked as naming a path."""
    found: dict[str, bool] = {}
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra
        found[prefix + name] = isinstance(extra, dict) and extra.get("spec_path") is True
        listed = typing.get_origin(info.annotation) is list
        for inner in _models(info.annotation):
            found.update(_fields(inner, f"{prefix}{name}{'[]' if listed else ''}."))
    return found


def test_every_path_field_of_the_spec_is_checked_by_the_intake() -> None:
    fields = _fields(PortSpec)
    marked = {name for name, is_path in fields.items() if is_path}
    assert marked == set(SPEC_PATH_FIELDS)
    named = {name for name in fields if name.rsplit(".", 1)[-1].endswith(PATH_LIKE)}
    assert named - marked == NOT_PATHS


def _spec_with_dump(tmp_path: Path, dump: str) -> Path:
    data = yaml.safe_load(VECTOR_ADD.read_text())
    data["source"] = str(VECTOR_ADD.parent / "vector_add.py")
    data["variants"][0]["reference_bytecode"] = dump
    spec = tmp_path / "vector_add.port.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


@pytest.mark.parametrize(
    "dump", ["../secret.tileirbc", "/etc/shadow", "dumps/../../x", "./x", "a\\..\\b", "dumps/"]
)
def test_a_dump_outside_the_specs_folder_is_refused(tmp_path: Path, dump: str) -> None:
    with pytest.raises(PortSpecError) as caught:
        load_port_spec(_spec_with_dump(tmp_path, dump))
    [(field, message)] = caught.value.problems
    assert field == "variants[0].reference_bytecode"
    assert "not a plain relative path below the spec's folder" in message


def test_a_dump_below_the_specs_folder_is_taken(tmp_path: Path) -> None:
    spec = load_port_spec(_spec_with_dump(tmp_path, "dumps/vector_add.tileirbc"))
    assert spec.variants[0].reference_bytecode == "dumps/vector_add.tileirbc"


def test_a_dump_is_a_plain_file_of_bounded_size(tmp_path: Path) -> None:
    assert bytecode_version(DUMP, "v") == "13.3"
    link = tmp_path / "link.tileirbc"
    link.symlink_to(DUMP)
    folder = tmp_path / "folder.tileirbc"
    folder.mkdir()
    for path in (link, folder, Path(os.devnull), Path("/dev/zero")):
        with pytest.raises(DumpError, match="reference_bytecode: not a regular file"):
            bytecode_version(path, "v")
    large = tmp_path / "large.tileirbc"
    with large.open("wb") as sparse:  # no disk: a hole past the bound
        sparse.truncate(MAX_DUMP_BYTES + 1)
    with pytest.raises(DumpError, match=f"larger than {MAX_DUMP_BYTES} bytes"):
        bytecode_version(large, "v")


@pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
def test_the_tools_read_a_submitted_dump_in_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tileirdisasm and tileiras on a submitted dump run in the sandbox, on a copy,
    with the toolchain's variables only: not the service's secrets or files."""
    monkeypatch.setenv("API_TOKENS", "ci:secret-token")
    seen = _run_boxed(["/usr/bin/env"], DUMP, 60.0)
    assert "secret-token" not in seen and "CUDA_HOME=" in seen
    with pytest.raises(ToolError, match="exited"):
        _run_boxed(["/bin/cat", str(REPO_ROOT / "pyproject.toml")], DUMP, 60.0)
    copied = _run_boxed(["/usr/bin/wc", "-c", INPUT], DUMP, 60.0)
    assert copied.split()[0] == str(DUMP.stat().st_size)
    assert "entry @" in tileirdisasm(DUMP, submitted=True)
