"""One GPU job for many converted runs: their ports in one library, one bundle each.

    tileport gpu-bundle --runs RUN_DIR... --out DIR [--time-all]

A run stopped at the GPU boundary has its own bundle (`host/bundle`), whose library
holds the checkout's operators and that run's port: about 11 MB stripped, most of it
cutile's runtime, so forty runs' bundles are forty such libraries. This builds one
workspace holding every run's port, exactly as its run bound it (the kernel of its
workspace and the spec of its bundle), builds it once, and writes one bundle per run
under `DIR/<operator>`, each naming its run and host-builder attempt and carrying
the same library (hard links, so an archive of DIR stores it once).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from nodes.host_builder.binding import BindingError, bind_operator
from nodes.host_builder.bundle import BuiltBundle, BundleBuildError, build_bundle
from nodes.host_builder.library import (
    LibraryBuildError,
    LibraryCrate,
    add_operator,
    create_workspace,
    ensure_built,
    install_kernel,
    library_lock,
    read_manifest,
)
from nodes.host_builder.rust_entry import RustSourceError, parse_kernel_source
from nodes.host_builder.stage import BUNDLE_DIR, WORKSPACE_DIR
from schemas.gpu import LIBRARY_FILE, BundleManifest, LiteralDispatch
from schemas.port_spec import PortSpecError, load_port_spec

MANIFEST = "manifest.json"


class BatchError(ValueError):
    """A run cannot join the batch; the message names the run and why."""


@dataclass(frozen=True)
class RunPort:
    """A converted run's port as its host builder bound it."""

    run_dir: Path
    manifest: BundleManifest
    spec_path: Path  # the spec inside the run's bundle, with the modules it reads
    kernel: Path
    entries: dict[str, str] | None
    literal_entries: list[LiteralDispatch] | None


def read_run(run_dir: Path) -> RunPort:
    """The port of a run whose host builder wrote a bundle."""
    bundle = run_dir / "host" / BUNDLE_DIR
    try:
        manifest = BundleManifest.model_validate_json((bundle / MANIFEST).read_bytes())
    except (OSError, ValueError) as error:
        raise BatchError(f"{run_dir}: no GPU job bundle in host/{BUNDLE_DIR} ({error})") from None
    workspace = LibraryCrate(run_dir / "host" / WORKSPACE_DIR)
    try:
        operator = read_manifest(workspace).operator(manifest.operator)
    except KeyError:
        raise BatchError(f"{run_dir}: its library does not hold {manifest.operator}") from None
    return RunPort(
        run_dir=run_dir,
        manifest=manifest,
        spec_path=bundle / manifest.spec,
        kernel=workspace.src_dir / operator.kernel,
        entries=operator.entries,
        literal_entries=operator.literal_entries,
    )


def add_run(crate: LibraryCrate, port: RunPort) -> None:
    """Install the run's kernel in `crate` and bind it as the run did."""
    operator = port.manifest.operator
    try:
        spec = load_port_spec(port.spec_path)
        placed, module_path = install_kernel(crate, operator, port.kernel)
        binding = bind_operator(
            spec,
            port.spec_path,
            parse_kernel_source(placed),
            module_path,
            port.entries,
            port.literal_entries,
        )
    except (BindingError, RustSourceError, PortSpecError) as error:
        raise BatchError(f"{port.run_dir}: {error}") from None
    add_operator(crate, binding, port.entries, port.literal_entries)


def _share_library(bundles: list[BuiltBundle]) -> None:
    """Every bundle's library as a hard link to the first's (they are the same bytes)."""
    first = bundles[0].root / "lib" / LIBRARY_FILE
    shared = first.read_bytes()
    for bundle in bundles[1:]:
        library = bundle.root / "lib" / LIBRARY_FILE
        if library.read_bytes() == shared:
            library.unlink()
            os.link(first, library)


def build_batch(
    run_dirs: list[Path], out: Path, workspace: Path, *, time_all_configs: bool = False
) -> list[BuiltBundle]:
    """One bundle per run under `out`, all from one library built in `workspace`."""
    ports = [read_run(run.resolve()) for run in run_dirs]
    names = [port.manifest.operator for port in ports]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise BatchError(f"two runs of one operator: {', '.join(twice)}")
    crate = create_workspace(workspace)
    with library_lock():
        for port in ports:
            add_run(crate, port)
    ensure_built(crate)
    out.mkdir(parents=True, exist_ok=True)
    bundles = [
        build_bundle(
            port.spec_path,
            out / port.manifest.operator,
            crate,
            run_id=port.manifest.run_id,
            attempt=port.manifest.attempt,
            seeds=tuple(port.manifest.seeds),
            repetitions=port.manifest.perf_repetitions,
            max_repetitions=port.manifest.perf_max_repetitions or port.manifest.perf_repetitions,
            warmup=port.manifest.perf_warmup,
            time_all_configs=time_all_configs or port.manifest.time_all_configs,
        )
        for port in ports
    ]
    _share_library(bundles)
    return bundles


__all__ = ["BatchError", "BundleBuildError", "LibraryBuildError", "build_batch"]
