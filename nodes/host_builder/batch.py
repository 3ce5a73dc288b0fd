"""One GPU job for many converted runs: their ports in one library, one bundle each.

    tileport gpu-bundle --runs RUN_DIR... --out DIR [--time-all] [--archive FILE]

A run stopped at the GPU boundary has its own bundle (`host/bundle`), whose library
holds the checkout's operators and that run's port: about 11 MB stripped, most of it
cutile's runtime, so forty runs' bundles are forty such libraries. This builds one
workspace holding every run's port, exactly as its run bound it (the kernel of its
workspace and the spec of its bundle), builds it once, and writes one bundle per run
under `DIR/<operator>`, each naming its run and host-builder attempt and carrying
the same library (hard links, so an archive of DIR stores it once). A run that did
not stop at the GPU boundary, or whose port cannot be bundled, is skipped with where
it stopped. The archive holds DIR and `bench/run_bundles.py`, which runs the bundles
on a GPU host that has no checkout (docs/C_ABI.md, "Many runs, one GPU job").
"""

from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

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
from schemas.pipeline import RunSummary, Stage
from schemas.port_spec import PortSpecError, load_port_spec
from schemas.reports import GateReport, ReportError, load_report
from schemas.run_layout import RunLayout
from toolchain.env import REPO_ROOT

MANIFEST = "manifest.json"
# What runs the bundles on a GPU host; the archive carries it at this path.
RUN_BUNDLES: Final = Path("bench") / "run_bundles.py"


class BatchError(ValueError):
    """The batch cannot be made; the message says why."""


class NoRunBundled(BatchError):
    """Every run given was skipped; the message lists each with why, as `skipped` does."""

    def __init__(self, skipped: list[SkippedRun]) -> None:
        reasons = "; ".join(f"{run.run_dir}: {run.reason}" for run in skipped)
        super().__init__(f"no run could be bundled: {reasons}")
        self.skipped = skipped


class RunRefused(BatchError):
    """One run cannot join the batch: `reason` says why."""

    def __init__(self, run_dir: Path, reason: str) -> None:
        super().__init__(f"{run_dir}: {reason}")
        self.run_dir = run_dir
        self.reason = reason


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
        raise RunRefused(run_dir, f"no GPU job bundle in host/{BUNDLE_DIR} ({error})") from None
    workspace = LibraryCrate(run_dir / "host" / WORKSPACE_DIR)
    try:
        operator = read_manifest(workspace).operator(manifest.operator)
    except KeyError:
        raise RunRefused(run_dir, f"its library does not hold {manifest.operator}") from None
    return RunPort(
        run_dir=run_dir,
        manifest=manifest,
        spec_path=bundle / manifest.spec,
        kernel=workspace.src_dir / operator.kernel,
        entries=operator.entries,
        literal_entries=operator.literal_entries,
    )


@dataclass(frozen=True)
class SkippedRun:
    run_dir: Path
    reason: str  # where the run stopped, or why its port cannot join


@dataclass(frozen=True)
class Batch:
    bundles: list[BuiltBundle]
    skipped: list[SkippedRun]


def where_it_stopped(run_dir: Path) -> str | None:
    """None for a run stopped at the GPU boundary; else where it stopped (its last
    stage's verdict and the gate's), as its reports say."""
    layout = RunLayout(run_dir)
    try:
        gate = load_report(GateReport, layout)
        summary = RunSummary.model_validate_json(layout.summary_path.read_bytes())
    except (ReportError, OSError, ValueError):
        return "not a finished run: no valid reports/gate.json and reports/summary.json"
    if gate.reached_gpu_boundary:
        return None
    routed = [record for record in summary.stages if record.stage is not Stage.FINAL_GATE]
    if not routed:
        return f"no stage ran (gate {gate.verdict})"
    last = routed[-1]
    verdict = f"{last.verdict} ({last.verdict_class})" if last.verdict_class else last.verdict
    said = f": {last.summary}" if last.summary else ""
    return f"stopped after {last.stage.value} {verdict}, gate {gate.verdict}{said}"


def add_run(crate: LibraryCrate, port: RunPort) -> None:
    """Install the run's kernel in `crate` and bind it as the run did. A kernel that
    cannot be bound stays out of the library: it joins the crate's modules only
    through the manifest, which `add_operator` alone writes."""
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
        add_operator(crate, binding, port.entries, port.literal_entries)
    except (BindingError, RustSourceError, PortSpecError) as error:
        raise RunRefused(port.run_dir, str(error)) from None


def _share_library(bundles: list[BuiltBundle]) -> None:
    """Every bundle's library as a hard link to the first's (they are the same bytes)."""
    first = bundles[0].root / "lib" / LIBRARY_FILE
    shared = first.read_bytes()
    for bundle in bundles[1:]:
        library = bundle.root / "lib" / LIBRARY_FILE
        if library.read_bytes() == shared:
            library.unlink()
            os.link(first, library)


def _ports_at_the_boundary(run_dirs: list[Path]) -> tuple[list[RunPort], list[SkippedRun]]:
    ports: list[RunPort] = []
    skipped: list[SkippedRun] = []
    for run_dir in run_dirs:
        stopped = where_it_stopped(run_dir)
        if stopped is not None:
            skipped.append(SkippedRun(run_dir, stopped))
            continue
        try:
            ports.append(read_run(run_dir))
        except RunRefused as refused:
            skipped.append(SkippedRun(run_dir, refused.reason))
    return ports, skipped


def _some_left(ports: list[RunPort], skipped: list[SkippedRun]) -> None:
    if not ports:
        raise NoRunBundled(skipped)


def build_batch(
    run_dirs: list[Path], out: Path, workspace: Path, *, time_all_configs: bool = False
) -> Batch:
    """One bundle per run at the GPU boundary under `out`, all from one library built
    in `workspace`; the other runs are skipped with where they stopped. Raises
    NoRunBundled when none is left, BatchError when two runs are of one operator."""
    ports, skipped = _ports_at_the_boundary([run.resolve() for run in run_dirs])
    names = [port.manifest.operator for port in ports]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise BatchError(f"two runs of one operator: {', '.join(twice)}")
    _some_left(ports, skipped)
    crate = create_workspace(workspace)
    bound: list[RunPort] = []
    with library_lock():
        for port in ports:
            try:
                add_run(crate, port)
                bound.append(port)
            except RunRefused as refused:
                skipped.append(SkippedRun(port.run_dir, refused.reason))
    _some_left(bound, skipped)
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
        for port in bound
    ]
    _share_library(bundles)
    return Batch(bundles, skipped)


def write_archive(bundles: Path, archive: Path) -> list[str]:
    """`bundles` (as its own folder name) and the bundle runner at `RUN_BUNDLES`, as one
    .tar.xz for a GPU host without a checkout; a hard-linked library is stored once.
    Returns the archive's member names."""
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(bundles, arcname=bundles.name)
        tar.add(REPO_ROOT / RUN_BUNDLES, arcname=RUN_BUNDLES.as_posix())
        return tar.getnames()


__all__ = [
    "Batch",
    "BatchError",
    "BundleBuildError",
    "LibraryBuildError",
    "NoRunBundled",
    "SkippedRun",
    "build_batch",
    "write_archive",
]
