"""Load test of status polling: starts `tileport serve` (no embedded worker) on
a fresh data directory, submits a conversion through the API, gives it the
stage timeline of a finished run (as a worker records it), then drives
GET /v1/conversions/{id} from concurrent clients and reports latency
percentiles and throughput.

    python -m app.loadtest [--concurrency 16] [--duration 20] [--database-url URL]

The server and the load generator share the machine, as they would on a
single small host."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.settings import load_settings
from app.storage.database import make_engine, make_session_factory
from app.worker import queue
from app.worker.job import StageRecorder
from schemas.api import ConversionView
from schemas.pipeline import Stage, StageRecord

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "examples" / "kernels"
SEEDED_STAGES = [
    (Stage.PREFLIGHT, "PASS"),
    (Stage.ANALYZER, "PASS"),
    (Stage.KERNEL_WRITER, "FAIL_COMPILE"),
    (Stage.KERNEL_WRITER, "COMPILED"),
]


@dataclass
class Result:
    requests: int
    errors: int
    seconds: float
    throughput_rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    concurrency: int
    database: str
    machine: str
    started_at: str


def percentile(sorted_values: list[float], fraction: float) -> float:
    index = min(len(sorted_values) - 1, round(fraction * (len(sorted_values) - 1)))
    return sorted_values[index]


def machine_description() -> str:
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    cpus = f"{os.cpu_count()} CPUs ({model or platform.processor()})"
    load = (
        f", load average {os.getloadavg()[0]:.1f} at the start" if hasattr(os, "getloadavg") else ""
    )
    return f"{cpus}, Python {platform.python_version()}{load}"


def start_server(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "app.cli_serve", "serve", "--port", str(port)]
    command += ["--workers", "0", "--log-level", "warning"]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_ready(base: str, server: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            stderr = server.stderr.read().decode() if server.stderr else ""
            raise SystemExit(f"the server exited: {stderr[-2000:]}")
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("the server did not become ready")


def seed(base: str, token: str, database_url: str, run_root: Path) -> str:
    """One conversion, submitted through the API and left running with the first
    stages of its timeline recorded, as a worker records them: what clients poll."""
    response = httpx.post(
        f"{base}/v1/conversions",
        json={"source_path": "softmax.py", "options": {"no_gpu": True}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    response.raise_for_status()
    conversion_id = str(response.json()["id"])
    engine = make_engine(database_url)
    sessions = make_session_factory(engine)
    claim = queue.try_claim(sessions, conversion_id, "loadtest", 600.0)
    assert claim is not None
    recorder = StageRecorder(sessions, conversion_id, run_root / conversion_id, 1)
    start = datetime.now(UTC)
    attempts: dict[Stage, int] = {}
    for stage, verdict in SEEDED_STAGES:
        end = start + timedelta(seconds=2)
        attempts[stage] = attempts.get(stage, 0) + 1
        recorder(
            StageRecord(
                stage=stage,
                attempt=attempts[stage],
                verdict=verdict,
                started_at=start,
                finished_at=end,
                summary=f"{stage.value}: {verdict}",
            )
        )
        start = end
    engine.dispose()
    return conversion_id


class KeepAliveClient:
    """A minimal HTTP/1.1 client on one keep-alive connection: far cheaper per
    request than a general client, so the shared CPUs go to the server."""

    def __init__(self, host: str, port: int, path: str, token: str) -> None:
        self.host, self.port = host, port
        self.request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n\r\n"
        ).encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self) -> int:
        if self.reader is None or self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = next(
            int(line.split(":", 1)[1])
            for line in lines
            if line.lower().startswith("content-length")
        )
        await self.reader.readexactly(length)
        return status

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()


async def drive(
    url: str, token: str, concurrency: int, duration: float
) -> tuple[list[float], int, float]:
    """Poll `url` with the reader's token from `concurrency` connections."""
    target = httpx.URL(url)
    latencies: list[float] = []
    errors = 0
    stop_at = time.perf_counter() + duration

    async def poller() -> None:
        nonlocal errors
        client = KeepAliveClient(target.host, target.port or 80, target.raw_path.decode(), token)
        try:
            while time.perf_counter() < stop_at:
                started = time.perf_counter()
                try:
                    ok = await client.get() == 200
                except (OSError, ValueError, StopIteration, asyncio.IncompleteReadError):
                    ok = False
                    await client.close()
                    client = KeepAliveClient(
                        target.host, target.port or 80, target.raw_path.decode(), token
                    )
                latencies.append(time.perf_counter() - started)
                errors += 0 if ok else 1
        finally:
            await client.close()

    began = time.perf_counter()
    await asyncio.gather(*(poller() for _ in range(concurrency)))
    return latencies, errors, time.perf_counter() - began


@contextmanager
def fresh_database(database_url: str | None) -> Iterator[str | None]:
    """SQLite: None (a file in the data dir). PostgreSQL: the URL narrowed to a new
    schema of its own, dropped afterwards, so the run starts empty."""
    if not database_url or make_url(database_url).get_backend_name() != "postgresql":
        yield database_url
        return
    schema = f"tileport_load_{secrets.token_hex(4)}"
    admin = make_engine(database_url)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield (
            make_url(database_url)
            .update_query_dict({"options": f"-csearch_path={schema}"})
            .render_as_string(hide_password=False)
        )
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def run(concurrency: int, duration: float, warmup: float, database_url: str | None) -> Result:
    machine = machine_description()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    with (
        fresh_database(database_url) as database,
        tempfile.TemporaryDirectory(prefix="tileport-load-") as folder,
    ):
        data = Path(folder)
        token = secrets.token_urlsafe(16)
        settings = load_settings(
            {}, data_dir=data, database_url=database or "", api_tokens={"load": token}
        )
        env = {
            **os.environ,
            "TILEPORT_DATA_DIR": str(data),
            "DATABASE_URL": settings.resolved_database_url,
            "API_TOKENS": f"load:{token}",
            "SOURCE_ROOT": str(CORPUS),
        }
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = start_server(env, port)
        try:
            wait_ready(base, server)
            cid = seed(
                base,
                token,
                settings.resolved_database_url,
                settings.resolved_artifact_root / "runs",
            )
            url = f"{base}/v1/conversions/{cid}"
            auth = {"Authorization": f"Bearer {token}"}
            polled = ConversionView.model_validate_json(
                httpx.get(url, headers=auth, timeout=10).content
            )
            assert polled.status == "running" and len(polled.stages) == len(SEEDED_STAGES)
            asyncio.run(drive(url, token, concurrency, warmup))
            latencies, errors, elapsed = asyncio.run(drive(url, token, concurrency, duration))
        finally:
            server.terminate()
            server.wait(timeout=30)
    ordered = sorted(latencies)
    backend = "postgresql" if settings.resolved_database_url.startswith("postgresql") else "sqlite"
    return Result(
        requests=len(ordered),
        errors=errors,
        seconds=round(elapsed, 2),
        throughput_rps=round(len(ordered) / elapsed, 1),
        p50_ms=round(1000 * statistics.median(ordered), 2),
        p90_ms=round(1000 * percentile(ordered, 0.90), 2),
        p99_ms=round(1000 * percentile(ordered, 0.99), 2),
        max_ms=round(1000 * ordered[-1], 2),
        concurrency=concurrency,
        database=backend,
        machine=machine,
        started_at=started_at,
    )


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.loadtest", description=__doc__)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds measured")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds before measuring")
    parser.add_argument("--database-url", default=None, help="default: SQLite in a temp dir")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--min-rps", type=float, default=0.0, help="exit 1 below this rate")
    args = parser.parse_args(argv)
    result = run(args.concurrency, args.duration, args.warmup, args.database_url)
    if args.json:
        print(json.dumps(asdict(result), indent=2))
    else:
        print(
            f"{result.requests} requests in {result.seconds} s ({result.database}, "
            f"{result.concurrency} concurrent clients): {result.throughput_rps} req/s, "
            f"p50 {result.p50_ms} ms, p90 {result.p90_ms} ms, p99 {result.p99_ms} ms, "
            f"max {result.max_ms} ms, {result.errors} errors; {result.machine}"
        )
    return 0 if result.errors == 0 and result.throughput_rps >= args.min_rps else 1


if __name__ == "__main__":
    sys.exit(main())
