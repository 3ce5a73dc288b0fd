"""`tileport serve` (API, web pages and the embedded worker) and `tileport worker`
(the embedded worker alone, for a separate process or host)."""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import signal
import sys
import threading
from pathlib import Path

import uvicorn

from app.api.connections import server_config
from app.api.main import create_app
from app.context import ServiceContext, build_context
from app.github.report import notifier
from app.settings import Settings, WorkerMode, load_settings
from app.storage.migrate import upgrade_to_head
from app.worker.pool import WorkerPool
from app.worker.reaper import LeaseReaper
from toolchain.doctor import run_doctor

log = logging.getLogger("tileport.serve")

TOKEN_FILE = "api-token"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser("serve", help="run the HTTP API, web pages and the embedded worker")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        help="embedded worker threads (default WORKER_THREADS; 0: none, jobs wait "
        "for a separate `tileport worker`)",
    )
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(handler=serve_command)
    worker = commands.add_parser("worker", help="run the embedded worker without the API")
    worker.add_argument("--threads", type=int, default=None)
    worker.add_argument("--log-level", default="info")
    worker.set_defaults(handler=worker_command)


def local_token(data_dir: Path) -> str:
    """The API token of a server started with no API_TOKENS: made once, kept 0600."""
    path = data_dir / TOKEN_FILE
    if path.is_file():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token + "\n")
    return token


def prepare(settings: Settings) -> ServiceContext:
    """Settings completed, database migrated, directories made."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    settings.resolved_artifact_root.mkdir(parents=True, exist_ok=True)
    context = build_context(settings)
    upgrade_to_head(context.engine)
    # /readyz compares revisions on every call; alembic would log each one.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    return context


def with_local_token(settings: Settings) -> Settings:
    if settings.api_tokens:
        return settings
    token = local_token(settings.data_dir)
    print(f"API token (no API_TOKENS set): {settings.data_dir / TOKEN_FILE}", flush=True)
    return settings.model_copy(update={"api_tokens": {"local": token}})


def missing_requirements() -> list[str]:
    """tileport doctor's required checks that fail here, each with its fix (the
    sandbox check among them), logged once at start."""
    missing = [f"{check.name}: {check.fix}" for check in run_doctor().missing()]
    for line in missing:
        log.error("not ready: %s", line)
    # /readyz checks the sandbox live (installing bubblewrap needs no restart).
    return [line for line in missing if not line.startswith("sandbox:")]


def serve_command(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    settings = with_local_token(load_settings())
    context = prepare(settings)
    context.missing_requirements = missing_requirements()
    threads = settings.worker_threads if args.workers is None else args.workers
    pool: WorkerPool | None = None
    reaper: LeaseReaper | None = None
    if settings.worker_mode is WorkerMode.INPROC and threads > 0:
        pool = WorkerPool(settings, context.sessions, threads, notifier(settings, context.sessions))
        pool.start()
    elif settings.worker_mode is WorkerMode.CELERY:
        reaper = LeaseReaper(settings, context.sessions, context.dispatcher)
        reaper.start()
    try:
        config = server_config(
            create_app(context), settings, args.host, args.port, log_level=args.log_level
        )
        uvicorn.Server(config).run()
    finally:
        if pool is not None:
            pool.stop()
        if reaper is not None:
            reaper.stop()
    return 0


def worker_command(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    settings = load_settings()
    context = prepare(settings)
    pool = WorkerPool(
        settings, context.sessions, args.threads, notifier(settings, context.sessions)
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    pool.start()
    log.info("worker running with %d threads", pool.size)
    stop.wait()
    pool.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m app.cli_serve serve|worker ...`: the same commands without the CLI."""
    parser = argparse.ArgumentParser(prog="python -m app.cli_serve")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    handler = args.handler
    result: int = handler(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
