"""Checking what a client submits before anything is stored: the port spec
(validated by schemas.port_spec), the kernel source (a static check in a
sandboxed child, see kernel_check.py), the reference module the spec names,
and paths under SOURCE_ROOT.

A submission's files are laid out the way the spec expects them: the spec at
`<name>.port.yaml`, the source at the spec's `source` path and the reference
module beside the spec, all inside the run's input directory. A spec that names
a module of a library under SOURCE_ROOT brings the library modules its kernel
needs, under `library/`, and reads them there."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Final

import yaml

from app import kernel_check
from app.errors import ApiError
from schemas.api import ErrorCode
from schemas.pipeline import RunOptions
from schemas.port_spec import PortSpec, PortSpecError, load_port_spec, with_source_root
from schemas.run_layout import RunPathError, check_run_relative, safe_name
from toolchain.sandbox import Limits, Sandbox, SandboxUnavailable
from toolchain.source_tree import SourceTree, SourceTreeError, needed_files

KERNEL_CHECK_TIMEOUT_S = 15
KERNEL_CHECK_LIMITS = Limits(address_space_bytes=1 << 30, processes=8, cpu_s=10)
LIBRARY_DIR = "library"
MAX_LIBRARY_FILES = 64
MAX_PROBLEMS_SHOWN = 20


@dataclass(frozen=True)
class Submission:
    """A validated conversion request: every input file by its path in the input dir."""

    operator: str
    kernel: str
    spec_name: str
    source_path: str
    files: dict[str, bytes]
    options: RunOptions
    origin: dict[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> bytes:
        return self.files[self.spec_name]

    @property
    def source(self) -> bytes:
        return self.files[self.source_path]


@dataclass(frozen=True)
class RawSubmission:
    """What arrived: the spec text, the source bytes, any other files by name and, for a
    spec that names a library module, the library's modules it needs by path under
    `LIBRARY_DIR` (the spec then says `source_root: library`)."""

    spec: bytes
    source: bytes
    extra_files: dict[str, bytes] = field(default_factory=dict)
    library_files: dict[str, bytes] = field(default_factory=dict)


def invalid_spec(message: str, **detail: Any) -> ApiError:
    return ApiError(422, ErrorCode.INVALID_SPEC, message, detail)


def not_a_kernel(message: str, **detail: Any) -> ApiError:
    return ApiError(422, ErrorCode.NOT_A_KERNEL, message, detail)


def check_size(name: str, data: bytes, limit: int) -> None:
    if len(data) > limit:
        raise ApiError(
            413,
            ErrorCode.UPLOAD_TOO_LARGE,
            f"{name} is larger than the limit of {limit} bytes",
            {"field": name, "limit": limit},
        )


def spec_to_bytes(spec: bytes | str | dict[str, Any]) -> bytes:
    if isinstance(spec, bytes):
        return spec
    if isinstance(spec, str):
        return spec.encode()
    return yaml.safe_dump(spec, sort_keys=False).encode()


def load_spec(spec: bytes) -> PortSpec:
    """Validate the spec with the same loader the pipeline uses."""
    with tempfile.TemporaryDirectory(prefix="tileport-spec-") as folder:
        path = Path(folder) / "submitted.port.yaml"
        path.write_bytes(spec)
        try:
            return load_port_spec(path)
        except PortSpecError as error:
            problems = [
                {"field": where, "message": message}
                for where, message in error.problems[:MAX_PROBLEMS_SHOWN]
            ]
            raise invalid_spec("the port spec is not valid", problems=problems) from None
        except UnicodeDecodeError:
            raise invalid_spec("the port spec is not UTF-8 text") from None


# Every field of the port spec that names a file or folder (`schemas.port_spec.SPEC_PATH`),
# and how a submission's is checked: a plain relative path inside the run's input
# (`input_path`), or a folder under the server's SOURCE_ROOT (`resolve_under`).
SPEC_PATH_FIELDS: Final = {
    "source": "input_path",
    "source_root": "resolve_under",
    "variants[].reference_bytecode": "input_path",
}


def input_path(relative: str, what: str) -> str:
    """A spec-given path, as a plain relative path inside the input directory."""
    try:
        check_run_relative(relative)
        for part in PurePosixPath(relative).parts:
            safe_name(part)
    except RunPathError as error:
        raise invalid_spec(f"{what} must be a plain relative path", value=relative) from error
    return PurePosixPath(relative).as_posix()


def bytecode_dumps(spec: PortSpec) -> list[tuple[str, str]]:
    """Each variant's bytecode dump as (its field, its checked path in the input)."""
    return [
        (where, input_path(variant.reference_bytecode, where))
        for index, variant in enumerate(spec.variants)
        if variant.reference_bytecode is not None
        for where in [f"variants[{index}].reference_bytecode"]
    ]


def reference_module_path(spec: PortSpec) -> str | None:
    module = spec.reference.function_module
    if module is None:
        return None
    return input_path(module.replace(".", "/") + ".py", "reference.function")


def check_kernel_source(source: bytes) -> list[str]:
    """Names of the kernels in `source`, found by the static check in the sandbox
    (toolchain.sandbox), which sees only the interpreter and the check itself."""
    checker = Path(kernel_check.__file__)
    with tempfile.TemporaryDirectory(prefix="tileport-check-") as scratch:
        box = Sandbox(scratch=Path(scratch), read_only=[checker], limits=KERNEL_CHECK_LIMITS)
        try:
            launch = box.launch([sys.executable, "-I", "-S", str(checker)])
            completed = subprocess.run(
                launch.argv,
                input=source,
                capture_output=True,
                timeout=KERNEL_CHECK_TIMEOUT_S,
                check=False,
                env=launch.env,
            )
        except SandboxUnavailable as error:
            raise ApiError(503, ErrorCode.SANDBOX_UNAVAILABLE, str(error)) from None
        except subprocess.TimeoutExpired:
            raise not_a_kernel("the kernel source took too long to parse") from None
    try:
        result: dict[str, Any] = json.loads(completed.stdout)
    except json.JSONDecodeError:
        # The child died (memory or CPU limit) before it could answer.
        raise not_a_kernel(
            "the kernel source could not be parsed within the limits",
            exit_code=completed.returncode,
        ) from None
    if not result.get("ok"):
        raise not_a_kernel(
            f"not a kernel source: {result.get('message', 'unknown reason')}",
            reason=result.get("reason"),
            line=result.get("line"),
        )
    return [str(name) for name in result["kernels"]]


def build_submission(
    raw: RawSubmission,
    options: RunOptions,
    limit: int,
    origin: dict[str, Any] | None = None,
) -> Submission:
    check_size("spec", raw.spec, limit)
    check_size("source", raw.source, limit)
    for name, data in raw.extra_files.items():
        check_size(name, data, limit)
    spec = load_spec(raw.spec)
    kernels = check_kernel_source(raw.source)
    if spec.kernel not in kernels:
        raise not_a_kernel(
            f"the spec names kernel {spec.kernel!r}, which the source does not define",
            kernels=kernels,
        )
    spec_name = f"{spec.name}.port.yaml"
    source_path = input_path(spec.source, "source")
    files = {spec_name: raw.spec, source_path: raw.source}
    for relative, data in raw.library_files.items():
        check_size(relative, data, limit)
        files[input_path(f"{LIBRARY_DIR}/{relative}", "library module")] = data
    for where, dump in bytecode_dumps(spec):
        submitted = raw.extra_files.get(PurePosixPath(dump).name)
        if submitted is None:
            raise invalid_spec(
                f"the bytecode dump {dump} was not submitted", field=where, expected_file=dump
            )
        files[dump] = submitted
    reference = reference_module_path(spec)
    if reference is not None and reference not in files:
        extra = raw.extra_files.get(PurePosixPath(reference).name)
        if extra is None:
            raise invalid_spec(
                f"the reference module {reference} was not submitted",
                field="reference.function",
                expected_file=reference,
            )
        files[reference] = extra
    return Submission(
        operator=spec.name,
        kernel=spec.kernel,
        spec_name=spec_name,
        source_path=source_path,
        files=files,
        options=options,
        origin=origin or {},
    )


def resolve_under(root: Path | None, relative: str, what: str, directory: bool = False) -> Path:
    """`root/relative`, a file (or a directory), refusing anything that resolves outside
    `root`."""
    if root is None:
        needs = "a library spec needs one" if directory else "upload the files instead"
        message = f"this server has no SOURCE_ROOT: {needs}"
        raise ApiError(400, ErrorCode.INVALID_SOURCE_PATH, message)
    base = root.resolve()
    candidate = (base / relative).resolve()
    if Path(relative).is_absolute() or not candidate.is_relative_to(base):
        raise ApiError(
            400,
            ErrorCode.INVALID_SOURCE_PATH,
            f"{what} is outside the source root",
            {what: relative},
        )
    kind = "directory" if directory else "file"
    if not (candidate.is_dir() if directory else candidate.is_file()):
        raise ApiError(
            400, ErrorCode.INVALID_SOURCE_PATH, f"{what} is not a {kind}", {what: relative}
        )
    return candidate


def read_limited(path: Path, name: str, limit: int) -> bytes:
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    check_size(name, data, limit)
    return data


def library_submission(
    root: Path | None, folder: PurePosixPath, spec: bytes, parsed: PortSpec, limit: int
) -> RawSubmission:
    """A spec that names a module of a library under SOURCE_ROOT: the run keeps a copy of
    the library modules the kernel needs (found statically, `needed_files`) under
    `LIBRARY_DIR`, and its spec is rewritten to read them there."""
    assert parsed.module is not None and parsed.source_root is not None
    library = resolve_under(root, str(folder / parsed.source_root), "source_root", True)
    try:
        tree = SourceTree(library)
        tree.kernel(parsed.module, parsed.kernel)
        needed = needed_files(tree, parsed.module, parsed.kernel)
    except SourceTreeError as error:
        where = {"file": str(error.file.relative_to(library))} if error.file else {}
        raise invalid_spec(error.message, field="module", line=error.line, **where) from None
    if len(needed) > MAX_LIBRARY_FILES:
        raise invalid_spec(
            f"the kernel needs {len(needed)} library modules (at most {MAX_LIBRARY_FILES})",
            field="module",
        )
    for path in needed:
        if not stays_inside(library, path):
            raise invalid_spec(
                "a library module the kernel needs is a link, or leads out of source_root",
                field="module",
                file=path.relative_to(library).as_posix(),
            )
    files = {
        path.relative_to(library).as_posix(): read_limited(path, "library module", limit)
        for path in sorted(needed)
    }
    module_file = tree.module(parsed.module).path.relative_to(library).as_posix()
    return RawSubmission(
        spec=with_source_root(spec, LIBRARY_DIR),
        source=files[module_file],
        library_files=files,
    )


def stays_inside(base: Path, path: Path) -> bool:
    """Whether `path`, below `base`, is reached without following a link: no part
    from `base` down is a symbolic link, and it resolves inside `base`."""
    relative = path.relative_to(base)
    for depth in range(1, len(relative.parts) + 1):
        if (base / Path(*relative.parts[:depth])).is_symlink():
            return False
    return path.resolve().is_relative_to(base.resolve())


def locate_spec(source_path: str | None, spec_path: str | None) -> str:
    """The spec's path under SOURCE_ROOT: given, or `<stem>.port.yaml` beside the source."""
    if spec_path:
        return spec_path
    if not source_path:
        raise ApiError(400, ErrorCode.INVALID_REQUEST, "name a source_path or a spec_path")
    source = PurePosixPath(source_path)
    return str(source.with_name(f"{source.stem}.port.yaml"))


def from_source_root(
    root: Path | None,
    source_path: str | None,
    spec_path: str | None,
    inline_spec: bytes | None,
    limit: int,
) -> RawSubmission:
    """Read the spec (unless given inline), then the source and the reference module
    it names, resolved beside the spec (or beside the source for an inline spec)."""
    if inline_spec is not None and not spec_path and not source_path:
        raise ApiError(400, ErrorCode.INVALID_REQUEST, "an inline spec needs a source_path")
    spec_relative = locate_spec(source_path, spec_path)
    if inline_spec is None:
        spec = read_limited(resolve_under(root, spec_relative, "spec_path"), "spec", limit)
    else:
        spec = inline_spec
    parsed = load_spec(spec)
    folder = PurePosixPath(spec_relative).parent
    if parsed.module is not None and parsed.source_root is not None:
        return library_submission(root, folder, spec, parsed, limit)
    source_relative = str(folder / input_path(parsed.source, "source"))
    if source_path and PurePosixPath(source_path) != PurePosixPath(source_relative):
        raise invalid_spec(
            "the spec's `source` does not name the given source_path",
            source=parsed.source,
            source_path=source_path,
        )
    source = read_limited(resolve_under(root, source_relative, "source"), "source", limit)
    reference = reference_module_path(parsed)
    extra: dict[str, bytes] = {}
    reference_relative = str(folder / reference) if reference is not None else source_relative
    if reference is not None and reference_relative != source_relative:
        reference_file = resolve_under(root, reference_relative, "reference module")
        extra[PurePosixPath(reference).name] = read_limited(reference_file, "reference", limit)
    for where, dump in bytecode_dumps(parsed):
        dump_file = resolve_under(root, str(folder / dump), where)
        extra[PurePosixPath(dump).name] = read_limited(dump_file, where, limit)
    return RawSubmission(spec=spec, source=source, extra_files=extra)
