"""Builds a GPU job bundle: everything `tileport gpu-run` needs on a GPU host.

    python -m nodes.host_builder.bundle build examples/kernels/softmax.port.yaml --out DIR

The GPU host has python3, torch, cuda.tile, cupti-python, cffi and pydantic,
but neither cargo nor this package. So the bundle carries the library built
here (stripped), its generated cffi wrapper, the port spec with the reference
kernel and its correctness reference, the runner with the exact modules of
this repository it imports, and `run.py`:

    bundle/
      manifest.json          BundleManifest: what to run, sha256 of every file
      run.py                 python3 run.py [--out DIR] [--perf-anyway]
      lib/libtileport_kernels.so
      py/tileport_kernels.py the wrapper
      py/tileport_tensor_facts.cpp  its optional tensor-facts reader (built on the GPU host)
      py/nodes/..., py/schemas/..., py/toolchain/...   the runner and its imports
      spec/<op>.port.yaml, spec/<kernel>.py, spec/<reference module>.py

The library is the one a workspace built (`nodes.host_builder.library`): stage
D's in the run directory, or, from the command line, a temporary copy of the
checkout's. It is rebuilt first if a source is newer, and loaded here through
the wrapper (no GPU needed) so a stale build never travels.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from modulefinder import ModuleFinder
from pathlib import Path

from nodes.host_builder.library import (
    LibraryBuildError,
    LibraryCrate,
    create_workspace,
    ensure_built,
    load_wrapper,
    read_manifest,
)
from schemas.exit_codes import ExitCode
from schemas.gpu import LIBRARY_FILE, WRAPPER_MODULE, BundleFile, BundleManifest
from schemas.port_spec import (
    PortSpec,
    PortSpecError,
    kernel_parameter_order,
    load_port_spec,
    spec_relative,
    with_source_root,
)
from toolchain.env import REPO_ROOT
from toolchain.source_tree import SourceTree, needed_files

LIBRARY_DIR = "library"  # a library spec's modules, beside the bundle's spec
RUNNER_MODULE = REPO_ROOT / "nodes" / "correctness" / "runner.py"
OWN_PACKAGES = ("app", "graph", "nodes", "schemas", "tileir", "toolchain")
SIZE_LIMIT_BYTES = 60 << 20
DEFAULT_SEEDS = (0, 1, 2)
DEFAULT_REPETITIONS = 100
DEFAULT_MAX_REPETITIONS = 2000
DEFAULT_WARMUP = 10

RUN_PY = '''#!/usr/bin/env python3
"""Runs this GPU job bundle: python3 run.py [--out DIR] [--perf-anyway]."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "py"))

from nodes.correctness.runner import main  # noqa: E402

sys.exit(main([str(HERE), *sys.argv[1:]]))
'''


class BundleBuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class BuiltBundle:
    root: Path
    manifest: BundleManifest
    total_bytes: int


def runner_modules() -> list[Path]:
    """The files of this repository the runner imports (its import closure, packages'
    `__init__` included), found statically."""
    finder = ModuleFinder(path=[str(REPO_ROOT)])
    finder.run_script(str(RUNNER_MODULE))
    files: set[Path] = {RUNNER_MODULE}
    for name, module in finder.modules.items():
        path = getattr(module, "__file__", None)
        if name.split(".")[0] in OWN_PACKAGES and path:
            files.add(Path(path).resolve())
    return sorted(files)


def _copy(source: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, destination)


def _strip(library: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    strip = shutil.which("strip")
    if strip is None:
        shutil.copyfile(library, destination)
        return
    done = subprocess.run(
        [strip, "--strip-unneeded", "-o", str(destination), str(library)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise BundleBuildError(f"strip failed: {done.stderr.strip()}")


def _reference_module(spec: PortSpec, spec_path: Path) -> Path | None:
    module = spec.reference.function_module
    if module is None:
        return None
    path = spec_relative(spec_path, f"{module.replace('.', '/')}.py")
    if not path.is_file():
        raise BundleBuildError(f"the correctness reference module {path.name} is missing")
    return path


def _copy_library(spec_path: Path, spec: PortSpec, folder: Path) -> Path:
    """A library spec's kernel module and the modules it needs, under `folder/library`,
    and the spec rewritten to read them there; returns the kernel module's copy."""
    assert spec.module is not None and spec.source_root is not None
    tree = SourceTree(spec_relative(spec_path, spec.source_root))
    for file in needed_files(tree, spec.module, spec.kernel):
        _copy(file, folder / LIBRARY_DIR / file.relative_to(tree.root))
    (folder / spec_path.name).write_bytes(with_source_root(spec_path.read_bytes(), LIBRARY_DIR))
    return folder / LIBRARY_DIR / tree.module(spec.module).path.relative_to(tree.root)


def _torch_equivalent(spec: PortSpec, spec_path: Path, choice: str | None) -> str | None:
    """The torch column's function: `module:function` beside the spec, or the spec's
    correctness function for "reference" (none when the reference kernel is the oracle)."""
    if choice is None or (choice == "reference" and spec.reference.function is None):
        return None
    function = spec.reference.function if choice == "reference" else choice
    assert function is not None
    module = function.split(":")[0]
    if not spec_relative(spec_path, f"{module.replace('.', '/')}.py").is_file():
        raise BundleBuildError(f"the torch equivalent's module {module} is not beside the spec")
    return function


def _crate_versions(crate: LibraryCrate) -> dict[str, str]:
    lock = (crate.workspace / "Cargo.lock").read_text(encoding="utf-8")
    versions: dict[str, str] = {}
    for name, version in re.findall(r'name = "([^"]+)"\nversion = "([^"]+)"', lock):
        if name.startswith("cutile") or name in ("cuda-async", "cuda-core", "tileport-kernels"):
            versions[f"crate {name}"] = version
    return versions


def _built_on(crate: LibraryCrate, fingerprint: int) -> dict[str, str]:
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True, check=False)
    libc, libc_version = platform.libc_ver()
    return {
        "glibc": f"{libc} {libc_version}".strip(),
        "python": platform.python_version(),
        "rustc": rustc.stdout.strip() or "unknown",
        "cdef fingerprint": hex(fingerprint),
        **_crate_versions(crate),
    }


def _digest(root: Path, relative: str) -> BundleFile:
    data = (root / relative).read_bytes()
    return BundleFile(path=relative, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))


def build_bundle(
    spec_path: Path,
    out: Path,
    crate: LibraryCrate,
    *,
    run_id: str = "standalone",
    attempt: int = 1,
    seeds: tuple[int, ...] = DEFAULT_SEEDS,
    repetitions: int = DEFAULT_REPETITIONS,
    max_repetitions: int = DEFAULT_MAX_REPETITIONS,
    warmup: int = DEFAULT_WARMUP,
    torch_equivalent: str | None = "reference",
    time_all_configs: bool = False,
) -> BuiltBundle:
    """Writes the bundle of the operator `spec_path` describes into `out` (emptied),
    with the library of `crate`, which must hold the operator. `torch_equivalent` is
    `module:function` beside the spec, "reference" for the spec's correctness
    reference (plain PyTorch in this corpus), or None."""
    spec = load_port_spec(spec_path)
    if spec.name not in {op.name for op in read_manifest(crate).operators}:
        raise BundleBuildError(
            f"operator {spec.name!r} is not in the library: `tileport convert {spec_path}` "
            "ports it and writes its bundle (host/bundle/ of the run)"
        )
    library = ensure_built(crate)
    wrapper = load_wrapper(crate.wrapper_path)
    wrapper.Library(library)  # refuses a library built from another cdef
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    _strip(library, out / "lib" / LIBRARY_FILE)
    _copy(crate.wrapper_path, out / "py" / f"{WRAPPER_MODULE}.py")
    _copy(crate.tensor_facts_path, out / "py" / crate.tensor_facts_path.name)
    for module in runner_modules():
        _copy(module, out / "py" / module.relative_to(REPO_ROOT.resolve()))
    source = spec_relative(spec_path, spec.source)
    reference = _reference_module(spec, spec_path)
    extra = (
        []
        if torch_equivalent in (None, "reference")
        else [spec_relative(spec_path, f"{torch_equivalent.split(':')[0].replace('.', '/')}.py")]
    )
    if spec.module is not None and spec.source_root is not None:
        source = _copy_library(spec_path, spec, out / "spec")
        copied = (*([reference] if reference else []), *extra)
    else:
        copied = (spec_path, source, *([reference] if reference else []), *extra)
    for file in copied:
        _copy(file, out / "spec" / file.name)
    (out / "run.py").write_text(RUN_PY, encoding="utf-8")
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    manifest = BundleManifest(
        operator=spec.name,
        symbol=f"cutile_{spec.name}",
        run_id=run_id,
        attempt=attempt,
        spec=f"spec/{spec_path.name}",
        reference_source=source.relative_to(out).as_posix()
        if source.is_relative_to(out)
        else f"spec/{source.name}",
        kernel_parameters=kernel_parameter_order(spec, spec_path),
        reference_module=f"spec/{reference.name}" if reference else None,
        torch_equivalent=_torch_equivalent(spec, spec_path, torch_equivalent),
        library=f"lib/{LIBRARY_FILE}",
        wrapper=f"py/{WRAPPER_MODULE}.py",
        files=[_digest(out, relative) for relative in files],
        built_on=_built_on(crate, int(wrapper.FINGERPRINT)),
        seeds=list(seeds),
        perf_repetitions=repetitions,
        perf_max_repetitions=max(max_repetitions, repetitions),
        perf_warmup=warmup,
        time_all_configs=time_all_configs,
    )
    (out / "manifest.json").write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    if total > SIZE_LIMIT_BYTES:
        raise BundleBuildError(f"the bundle is {total / 2**20:.1f} MiB, over the 60 MiB limit")
    return BuiltBundle(root=out, manifest=manifest, total_bytes=total)


def add_build_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", type=Path, nargs="?", help="the operator's port spec")
    parser.add_argument(
        "--runs",
        type=Path,
        nargs="+",
        metavar="RUN_DIR",
        help="instead of SPEC: runs stopped at the GPU boundary; one library holds all "
        "their ports and OUT/<operator> is each run's bundle",
    )
    parser.add_argument("--out", type=Path, required=True, help="the bundle directory (emptied)")
    parser.add_argument("--run-id", default="standalone", help="the run the reports belong to")
    parser.add_argument("--attempt", type=int, default=1)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS))
    parser.add_argument(
        "--repetitions",
        type=int,
        default=DEFAULT_REPETITIONS,
        help="rounds of every perf configuration before its medians are judged",
    )
    parser.add_argument(
        "--max-repetitions",
        type=int,
        default=DEFAULT_MAX_REPETITIONS,
        help="the most rounds a configuration gets while a median's 95%% interval is "
        "wider than ±0.5%%",
    )
    parser.add_argument("--warmup", type=int, default=DEFAULT_WARMUP)
    parser.add_argument(
        "--time-all",
        action="store_true",
        help="time every configuration, the test ones too (default: the spec's perf set)",
    )
    parser.add_argument(
        "--torch-equivalent",
        default="reference",
        help="module:function beside the spec timed as the torch column; 'reference' (the "
        "default) uses the spec's correctness reference; 'none' leaves the column out",
    )


def build_from_args(args: argparse.Namespace) -> int:
    """Bundles an operator of the checkout's library, built in a temporary workspace;
    returns the exit code (`schemas/exit_codes.py`)."""
    try:
        with tempfile.TemporaryDirectory(prefix="tileport-bundle-") as scratch:
            built = build_bundle(
                args.spec.resolve(),
                args.out,
                create_workspace(Path(scratch) / "kernels_rs"),
                run_id=args.run_id,
                attempt=args.attempt,
                seeds=tuple(args.seeds),
                repetitions=args.repetitions,
                max_repetitions=args.max_repetitions,
                warmup=args.warmup,
                torch_equivalent=None if args.torch_equivalent == "none" else args.torch_equivalent,
                time_all_configs=args.time_all,
            )
    except (PortSpecError, OSError) as exc:
        print(f"gpu bundle: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except (BundleBuildError, LibraryBuildError, ValueError) as exc:
        # ValueError: the port cannot be bound (BindingError, RustSourceError).
        print(f"gpu bundle: {exc}", file=sys.stderr)
        return ExitCode.STAGE_FAILED
    print(
        json.dumps(
            {
                "bundle": str(built.root),
                "operator": built.manifest.operator,
                "files": len(built.manifest.files),
                "mib": round(built.total_bytes / 2**20, 2),
            }
        )
    )
    return ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nodes.host_builder.bundle")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build a GPU job bundle")
    add_build_arguments(build)
    args = parser.parse_args(argv)
    return build_from_args(args)


if __name__ == "__main__":
    sys.exit(main())
