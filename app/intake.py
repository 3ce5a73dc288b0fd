"""Checking what a client submits before it is stored: the port spec (YAML/JSON
mapping), the kernel source (in a sandboxed child, see kernel_check.py), file
names and paths under SOURCE_ROOT."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app import kernel_check
from app.errors import ApiError
from schemas.api import ErrorCode
from schemas.pipeline import RunOptions

SOURCE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,95}\.py$")
OPERATOR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
KERNEL_CHECK_TIMEOUT_S = 15


@dataclass(frozen=True)
class Submission:
    """A conversion request, validated: bytes of both files plus what was derived."""

    source_name: str
    source: bytes
    spec: bytes
    operator: str
    kernels: list[str]
    options: RunOptions
    origin: dict[str, Any] = field(default_factory=dict)

    @property
    def spec_name(self) -> str:
        return f"{Path(self.source_name).stem}.port.yaml"


def invalid_spec(message: str, **detail: Any) -> ApiError:
    return ApiError(422, ErrorCode.INVALID_SPEC, message, detail)


def parse_spec(text: bytes | str | dict[str, Any]) -> dict[str, Any]:
    """The port spec as a mapping; YAML or JSON text, or an already parsed object."""
    if isinstance(text, dict):
        return text
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise invalid_spec("the port spec is not valid YAML", line=line) from error
    if not isinstance(document, dict) or not document:
        raise invalid_spec("the port spec must be a non-empty mapping")
    return document


def operator_of(spec: dict[str, Any], source_name: str) -> str:
    """The operator's name: the spec's `operator` (or `name`), else the file's stem."""
    named = spec.get("operator", spec.get("name"))
    if named is not None and not isinstance(named, str):
        raise invalid_spec("`operator` must be a string", field="operator")
    operator = named or Path(source_name).stem
    if not OPERATOR_NAME.fullmatch(operator):
        raise invalid_spec(
            "the operator name must be a Python identifier", field="operator", value=operator
        )
    return operator


def check_source_name(name: str) -> str:
    base = Path(name.replace("\\", "/")).name
    if not SOURCE_NAME.fullmatch(base):
        raise ApiError(
            422,
            ErrorCode.NOT_A_KERNEL,
            "the kernel source must be a .py file with a plain name",
            {"filename": name[:200]},
        )
    return base


def check_kernel_source(source: bytes) -> list[str]:
    """Names of the kernels in `source`, found by the sandboxed static check."""
    try:
        completed = subprocess.run(
            [sys.executable, "-I", "-S", kernel_check.__file__],
            input=source,
            capture_output=True,
            timeout=KERNEL_CHECK_TIMEOUT_S,
            check=False,
            env={},
        )
    except subprocess.TimeoutExpired as error:
        raise ApiError(
            422, ErrorCode.NOT_A_KERNEL, "the kernel source took too long to parse"
        ) from error
    try:
        result: dict[str, Any] = json.loads(completed.stdout)
    except json.JSONDecodeError as error:
        # The child died (memory or CPU limit) before it could answer.
        raise ApiError(
            422,
            ErrorCode.NOT_A_KERNEL,
            "the kernel source could not be parsed within the limits",
            {"exit_code": completed.returncode},
        ) from error
    if not result.get("ok"):
        raise ApiError(
            422,
            ErrorCode.NOT_A_KERNEL,
            f"not a kernel source: {result.get('message', 'unknown reason')}",
            {"reason": result.get("reason"), "line": result.get("line")},
        )
    return [str(name) for name in result["kernels"]]


def check_size(name: str, data: bytes, limit: int) -> None:
    if len(data) > limit:
        raise ApiError(
            413,
            ErrorCode.UPLOAD_TOO_LARGE,
            f"{name} is larger than the limit of {limit} bytes",
            {"field": name, "limit": limit},
        )


def build_submission(
    source_name: str,
    source: bytes,
    spec: bytes | str | dict[str, Any],
    options: RunOptions,
    limit: int,
    origin: dict[str, Any] | None = None,
) -> Submission:
    check_size("source", source, limit)
    spec_bytes = spec_to_bytes(spec)
    check_size("spec", spec_bytes, limit)
    name = check_source_name(source_name)
    spec_document = parse_spec(spec)
    operator = operator_of(spec_document, name)
    kernels = check_kernel_source(source)
    return Submission(
        source_name=name,
        source=source,
        spec=spec_bytes,
        operator=operator,
        kernels=kernels,
        options=options,
        origin=origin or {},
    )


def spec_to_bytes(spec: bytes | str | dict[str, Any]) -> bytes:
    if isinstance(spec, bytes):
        return spec
    if isinstance(spec, str):
        return spec.encode()
    return yaml.safe_dump(spec, sort_keys=False).encode()


def resolve_under(root: Path | None, relative: str, what: str) -> Path:
    """`root/relative`, refusing anything that resolves outside `root`."""
    if root is None:
        raise ApiError(
            400,
            ErrorCode.INVALID_SOURCE_PATH,
            "this server has no SOURCE_ROOT: upload the files instead",
        )
    base = root.resolve()
    candidate = (base / relative).resolve()
    if Path(relative).is_absolute() or not candidate.is_relative_to(base):
        raise ApiError(
            400, ErrorCode.INVALID_SOURCE_PATH, f"{what} is outside the source root", {what: relative}
        )
    if not candidate.is_file():
        raise ApiError(
            400, ErrorCode.INVALID_SOURCE_PATH, f"{what} is not a file", {what: relative}
        )
    return candidate


def read_limited(path: Path, name: str, limit: int) -> bytes:
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    check_size(name, data, limit)
    return data
