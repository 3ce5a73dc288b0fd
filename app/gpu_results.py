"""GPU results for a run awaiting a GPU: the folder `tileport gpu-run` wrote for the
run's bundle, sent over REST (`POST /v1/conversions/{id}/gpu-results`) or returned
by a GPU worker. Each arrival is kept under `service/gpu-results/<n>/` and checked
against the bundle's manifest (`nodes.gpu_completion`). Results of a real GPU run
queue the conversion, and its next job finishes the graph from them; a GPU run that
reached no GPU (BLOCKED) is recorded, and the run keeps waiting."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app import conversions
from app.access import Caller, check_owner
from app.errors import ApiError
from app.settings import Settings
from app.storage.database import transaction
from app.storage.models import Conversion, utcnow
from app.worker.ingest import SERVICE_DIR
from app.worker.queue import changed_rows
from nodes.gpu_completion import GpuResults, GpuResultsError, bundle_dir, check_results
from schemas.api import ConversionStatus, ErrorCode, GpuCompletion, ResultsTrust
from schemas.gpu import RESULT_FILES
from schemas.run_layout import RunLayout

RESULTS_DIR = f"{SERVICE_DIR}/gpu-results"


@dataclass(frozen=True)
class Arrival:
    """One accepted result folder: where it is kept and whether the run resumes."""

    results: str
    checked: GpuResults
    resumed: bool
    trust: ResultsTrust


def not_awaiting(status: str) -> ApiError:
    return ApiError(
        409,
        ErrorCode.NOT_AWAITING_GPU,
        f"the conversion is {status}, not awaiting GPU results",
        {"status": status},
    )


def keep_folder(root: Path, files: dict[str, bytes]) -> Path:
    """Write one arrival to the next free `service/gpu-results/<n>/`."""
    parent = root / RESULTS_DIR
    parent.mkdir(parents=True, exist_ok=True)
    number = 1
    while True:
        folder = parent / str(number)
        try:
            folder.mkdir()
            break
        except FileExistsError:
            number += 1
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


def check_names(files: dict[str, bytes], limit: int) -> None:
    unknown = sorted(set(files) - set(RESULT_FILES))
    large = sorted(name for name, data in files.items() if len(data) > limit)
    if unknown or large:
        raise ApiError(
            422,
            ErrorCode.INVALID_GPU_RESULTS,
            "send the files of a `tileport gpu-run` result folder",
            {"unknown": unknown, "too_large": large, "known": list(RESULT_FILES), "limit": limit},
        )


def accept_results(
    sessions: sessionmaker[Session],
    settings: Settings,
    conversion_id: str,
    files: dict[str, bytes],
    sender: Caller | str,
) -> Arrival:
    """Keep and check one result folder; queue the run to finish from it when a GPU ran.
    The caller dispatches a resumed conversion. `sender` is an API caller, or the
    queue name of a GPU worker of this service that took the run. Results count as a
    GPU worker's (they can make the run pass) from such a worker or a token in
    API_GPU_WORKERS; the submitter or an admin may send them too, as user-reported."""
    if isinstance(sender, str):
        source, trust = sender, ResultsTrust.GPU_WORKER
    else:
        source, trust = f"api:{sender.name}", sender.results_trust
    with sessions() as session:
        conversion = conversions.get(session, conversion_id)
        if isinstance(sender, Caller) and not sender.gpu_worker:
            check_owner(conversion, sender, "send its GPU results")
        status = conversion.status
    if status != ConversionStatus.AWAITING_GPU:
        raise not_awaiting(status)
    check_names(files, settings.max_upload_bytes)
    root = conversions.run_dir(settings, conversion_id)
    folder = keep_folder(root, files)
    relative = folder.relative_to(root).as_posix()
    try:
        checked = check_results(bundle_dir(RunLayout(root)), folder)
    except GpuResultsError as error:
        shutil.rmtree(folder, ignore_errors=True)
        raise ApiError(
            422,
            ErrorCode.INVALID_GPU_RESULTS,
            "the folder is not a GPU run of this run's bundle",
            {"problems": error.problems},
        ) from None
    detail: dict[str, Any] = {"results": relative, "source": source, "trust": trust.value}
    with transaction(sessions) as session:
        if not checked.ran_on_gpu:
            conversions.record_event(
                session, "gpu.results_blocked", checked.run.statement, conversion_id, **detail
            )
            return Arrival(relative, checked, resumed=False, trust=trust)
        changed = changed_rows(
            session,
            update(Conversion)
            .where(
                Conversion.id == conversion_id,
                Conversion.status == ConversionStatus.AWAITING_GPU,
            )
            .values(
                status=ConversionStatus.QUEUED,
                gpu_results=relative,
                gpu_results_trust=trust.value,
                queued_at=utcnow(),
                updated_at=utcnow(),
            )
            .execution_options(synchronize_session=False),
        )
        if changed == 1:
            conversions.record_event(
                session, "gpu.results_accepted", checked.run.statement, conversion_id, **detail
            )
    if changed != 1:
        shutil.rmtree(folder, ignore_errors=True)
        raise not_awaiting("no longer awaiting GPU results (another folder came first)")
    return Arrival(relative, checked, resumed=True, trust=trust)


def completion(settings: Settings, conversion: Conversion) -> GpuCompletion | None:
    """How to complete a run awaiting a GPU, for the API and the pages."""
    if conversion.status != ConversionStatus.AWAITING_GPU:
        return None
    layout = RunLayout(conversions.run_dir(settings, conversion.id))
    bundle = layout.relative(bundle_dir(layout))
    base = settings.public_url.rstrip("/") or "http://127.0.0.1:8000"
    results_url = f"{base}/v1/conversions/{conversion.id}/gpu-results"
    return GpuCompletion(
        bundle=bundle,
        bundle_url=f"/v1/conversions/{conversion.id}/artifacts/{bundle}/manifest.json",
        results_url=results_url,
        command=f"tileport gpu-run {bundle_dir(layout)} --upload {results_url}",
    )


def gpu_queue_arch(settings: Settings, conversion: Conversion) -> str | None:
    """The architecture whose GPU queue runs this run's bundle, or None: the run asked
    for no GPU, or no GPU queue serves it."""
    options = conversion.options
    if options.get("no_gpu") or not settings.gpu_queues:
        return None
    wanted = options.get("gpu_arch") or settings.gpu_queues[0]
    return str(wanted) if wanted in settings.gpu_queues else None
