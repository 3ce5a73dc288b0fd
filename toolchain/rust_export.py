"""Client of `tileport-rs-export`, the Rust tool that compiles a cutile-rs
kernel source to Tile IR without a GPU and without a cargo rebuild.

`RustExporter` keeps one exporter process resident (`--serve`, JSON lines),
so a batch of exports pays the process start once."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from types import TracebackType

from schemas.export import RustExportRequest, RustExportResponse
from toolchain.env import rs_export_binary, toolchain_env


class ExporterUnavailable(RuntimeError):
    """The exporter binary is missing: `make setup` builds it."""


def _binary() -> Path:
    binary = rs_export_binary()
    if not binary.exists():
        raise ExporterUnavailable(f"{binary} is missing; run `make setup` to build kernels_rs/")
    return binary


def export_once(request: RustExportRequest, timeout_s: float = 120.0) -> RustExportResponse:
    """Run one export in a fresh exporter process."""
    with RustExporter(timeout_s=timeout_s) as exporter:
        return exporter.export(request)


class RustExporter:
    """A resident exporter process; thread-safe, one request at a time."""

    def __init__(self, timeout_s: float = 120.0) -> None:
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [str(_binary()), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=toolchain_env(),
        )

    def export(self, request: RustExportRequest) -> RustExportResponse:
        with self._lock:
            stdin, stdout = self._process.stdin, self._process.stdout
            if stdin is None or stdout is None or self._process.poll() is not None:
                return RustExportResponse(ok=False, error_kind="exporter", error="exporter exited")
            stdin.write(request.model_dump_json() + "\n")
            stdin.flush()
            line = _read_line(stdout, self._timeout_s)
        if line is None:
            self.close()
            return RustExportResponse(
                ok=False, error_kind="exporter", error="exporter timed out or exited"
            )
        return RustExportResponse.model_validate_json(line)

    def close(self) -> None:
        if self._process.poll() is None:
            if self._process.stdin:
                self._process.stdin.close()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def __enter__(self) -> RustExporter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _read_line(stream: object, timeout_s: float) -> str | None:
    """Read one line, giving up after `timeout_s` (the compiler can hang on
    pathological input)."""
    result: list[str] = []

    def reader() -> None:
        line = stream.readline()  # type: ignore[attr-defined]
        if line:
            result.append(line)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return result[0] if result else None
