"""The web pages in real headless Chromium (Debian's `chromium`): the run page's
DOM and a screenshot checked for its content (the result first: verdict, level,
kernel.rs; a run awaiting a GPU in amber), and the live timeline updating by
polling until the run ends. Chromium is installed with apt-get when it is
missing and the suite runs as root; otherwise these tests are skipped."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient
from png_reader import read_png
from run_fixture import LEVEL, finish, finished_run, running_run
from service_support import free_port, wait_http

from app.api.main import create_app
from app.context import ServiceContext
from app.storage.models import Conversion
from app.web.charts import FASTER, WITHIN_LIMIT

# A real browser per test: seconds each.
pytestmark = pytest.mark.slow

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
INSTALL_TIMEOUT_S = 900
CRITICAL_BACKGROUND = (0xFF, 0xCD, 0xD2)
HEADER_BACKGROUND = (0x26, 0x32, 0x38)
FINISHED_GREEN = (0x2E, 0x7D, 0x32)  # the status badge and the result's border
AMBER = (0xEF, 0x8F, 0x00)  # awaiting a GPU: badge and border
AMBER_BACKGROUND = (0xFF, 0xF8, 0xE1)


def hex_rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def install_chromium() -> str:
    """Install Debian's chromium; returns why it could not be, or ''."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "chromium is not installed and this is not a root Debian machine"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"],
    ):
        done = subprocess.run(
            command, env=env, capture_output=True, timeout=INSTALL_TIMEOUT_S, check=False
        )
        if done.returncode != 0:
            return f"`{' '.join(command)}` failed: {done.stderr.decode()[-300:]}"
    return ""


@pytest.fixture(scope="session")
def browser() -> str:
    found = find_browser()
    if found is None:
        problem = install_chromium()
        found = find_browser()
        if found is None:
            pytest.skip(f"no headless Chromium: {problem or 'install did not provide one'}")
    return found


def run_browser(browser: str, profile: Path, url: str, *flags: str) -> str:
    command = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *flags,
        url,
    ]
    done = subprocess.run(command, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode()


class LiveServer:
    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        wait_http(f"{self.url}/healthz")
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def public_pages(context: ServiceContext) -> ServiceContext:
    """Pages readable without signing in (PUBLIC_READ): a headless browser loading one
    address has no session; tests/security/test_tenancy.py tests the sign-in."""
    context.settings.public_read = True
    return context


@pytest.fixture
def live(public_pages: ServiceContext) -> Iterator[LiveServer]:
    with LiveServer(create_app(public_pages)) as server:
        yield server


def test_run_page_renders_in_chromium(
    browser: str, live: LiveServer, client: TestClient, context: ServiceContext, tmp_path: Path
) -> None:
    cid = finished_run(client, context)
    url = f"{live.url}/runs/{cid}"
    dom = run_browser(browser, tmp_path / "profile-dom", url, "--dump-dom")
    result = dom.split('<section class="result result-finished">')[1].split("</section>")[0]
    assert "status-finished" in result and ">PASS</strong>" in result and LEVEL in result
    assert dom.index("result-finished") < dom.index('id="kernel-rs"') < dom.index('class="ir"')
    assert '<span class="k">pub</span>' in dom, "kernel.rs is highlighted"
    assert 'data-stage="final_gate"' in dom
    assert 'class="critical"' in dom and "padding_value" in dom
    assert "<svg" in dom and "ratio-chart" in dom
    assert "pwned" not in dom.split("<title>")[1].split("</title>")[0]
    shot = tmp_path / "run.png"
    run_browser(
        browser,
        tmp_path / "profile-shot",
        url,
        f"--screenshot={shot}",
        "--window-size=1100,2600",
        "--force-device-scale-factor=1",
    )
    width, height, colours = read_png(shot.read_bytes())
    assert (width, height) == (1100, 2600)
    assert len(colours) > 50, "the screenshot is blank"
    assert colours[HEADER_BACKGROUND] > 1100 * 20, "no page header"
    assert colours[FINISHED_GREEN] > 300, "no verdict at the top"
    assert colours[CRITICAL_BACKGROUND] > 2000, "the critical IR line is not highlighted"
    assert colours[hex_rgb(FASTER)] > 500, "no bar at or under parity in the chart"
    assert colours[hex_rgb(WITHIN_LIMIT)] > 500, "no bar within the limit in the chart"


def test_a_run_awaiting_a_gpu_is_amber_in_chromium(
    browser: str, live: LiveServer, client: TestClient, context: ServiceContext, tmp_path: Path
) -> None:
    cid = finished_run(client, context)
    with context.sessions.begin() as session:
        row = session.get_one(Conversion, cid)
        row.status, row.gate_verdict = "awaiting_gpu", "AWAITING_GPU"
    url = f"{live.url}/runs/{cid}"
    dom = run_browser(browser, tmp_path / "profile-dom", url, "--dump-dom")
    assert "GPU run is pending" in dom and "tileport gpu-run " in dom and LEVEL in dom
    shot = tmp_path / "awaiting.png"
    run_browser(
        browser,
        tmp_path / "profile-shot",
        url,
        f"--screenshot={shot}",
        "--window-size=1100,900",
        "--force-device-scale-factor=1",
    )
    _, _, colours = read_png(shot.read_bytes())
    assert colours[AMBER] > 300, "no amber verdict"
    assert colours[AMBER_BACKGROUND] > 1100 * 40, "no amber result panel"
    assert colours[FINISHED_GREEN] < 50, "nothing says finished"


class FinishOnFirstPoll:
    """Ends the run the first time the page polls its timeline, so that only the
    polling can bring the new stages into the page."""

    def __init__(self, app: Any, context: ServiceContext, conversion_id: str) -> None:
        self.app = app
        self.context = context
        self.conversion_id = conversion_id
        self.polls = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith(f"{self.conversion_id}/_timeline"):
            self.polls += 1
            if self.polls == 1:
                finish(self.context, self.conversion_id, done=1)
        await self.app(scope, receive, send)


def test_timeline_updates_live_by_polling(
    browser: str, client: TestClient, public_pages: ServiceContext, tmp_path: Path
) -> None:
    context = public_pages
    cid = running_run(client, context, stages=1)
    initial = client.get(f"/runs/{cid}").text
    assert 'data-stage="final_gate"' not in initial
    app = FinishOnFirstPoll(create_app(context), context, cid)
    with LiveServer(app) as server:
        dom = run_browser(
            browser,
            tmp_path / "profile",
            f"{server.url}/runs/{cid}",
            "--dump-dom",
            "--virtual-time-budget=15000",
        )
    assert app.polls >= 1
    assert 'data-stage="final_gate"' in dom
    assert 'class="status status-finished"' in dom
    assert "data-poll" not in dom, "the page did not reload into its final form"
