"""The server-rendered pages, read as HTML: runs list and filters, the run page's
timeline, IR diff with the critical line highlighted, perf chart, downloads,
the polled fragments, escaping and security headers."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from run_fixture import HOSTILE_SUMMARY, PERF, finished_run, running_run
from service_support import FIXTURES, submit

from app.context import ServiceContext
from app.web.charts import FASTER, SLOWER, WITHIN_LIMIT, RatioBar, bar_colour, ratio_chart
from app.web.views import side_by_side, variant_view


def test_runs_list_shows_and_filters(client: TestClient, context: ServiceContext) -> None:
    done = finished_run(client, context)
    queued = submit(client, headers={"Idempotency-Key": "q"}).json()["id"]
    page = client.get("/runs")
    assert page.status_code == 200
    assert done[:12] in page.text and queued[:12] in page.text
    assert 'data-poll="/runs/_rows?' in page.text
    only_finished = client.get("/runs", params={"status": "finished"}).text
    assert done[:12] in only_finished and queued[:12] not in only_finished
    none = client.get("/runs", params={"operator": "matmul"}).text
    assert "No conversions match." in none
    rows = client.get("/runs/_rows", params={"status": "queued"}).text
    assert queued[:12] in rows and "<html" not in rows
    assert client.get("/runs", params={"status": "nope"}).status_code == 422


def test_run_page_shows_timeline_ir_diff_perf_and_downloads(
    client: TestClient, context: ServiceContext
) -> None:
    cid = finished_run(client, context)
    page = client.get(f"/runs/{cid}")
    assert page.status_code == 200
    html = page.text
    for stage in ("preflight", "analyzer", "kernel_writer", "host_builder", "final_gate"):
        assert f'data-stage="{stage}"' in html
    assert '<span class="verdict ok">COMPILED</span>' in html
    assert "data-poll" not in html, "a finished run is not polled"
    critical = re.findall(r'<tr class="critical">.*?</tr>', html, re.S)
    assert len(critical) == 1
    assert "neg_inf" in critical[0] and "zero" in critical[0]
    assert "critical</strong> padding_value" in html
    assert '<span class="level level-different">different</span>' in html
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="ratio-chart"') == 1
    for name, _, _ in PERF:
        assert name in html
    assert "geomean port/baseline = " in html
    assert f'href="/v1/conversions/{cid}/artifacts/generated/kernel.rs"' in html
    assert f'href="/v1/conversions/{cid}/artifacts/service/port.patch"' in html
    assert "NVIDIA H200" in html and "ALL_PASS" in html


def test_untrusted_text_is_escaped_and_scripts_are_restricted(
    client: TestClient, context: ServiceContext
) -> None:
    cid = finished_run(client, context)
    page = client.get(f"/runs/{cid}")
    assert HOSTILE_SUMMARY not in page.text
    assert "&lt;script&gt;document.title" in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "<script>" not in page.text.replace('<script src="/static/tileport.js" defer>', "")


def test_running_run_polls_its_timeline_fragment(
    client: TestClient, context: ServiceContext
) -> None:
    cid = running_run(client, context, stages=1)
    page = client.get(f"/runs/{cid}").text
    assert f'data-poll="/runs/{cid}/_timeline"' in page
    assert 'data-reload-when-done="1"' in page
    fragment = client.get(f"/runs/{cid}/_timeline").text
    assert 'data-status="running"' in fragment and 'data-stage="preflight"' in fragment
    assert 'data-stage="analyzer"' not in fragment
    assert "No IR pair yet." in page and "No performance report." in page


def test_unknown_run_page_is_404(client: TestClient) -> None:
    assert client.get("/runs/nope").status_code == 404
    assert client.get("/runs/nope/_timeline").status_code == 404


def test_static_files_and_home(client: TestClient) -> None:
    assert client.get("/static/tileport.js").status_code == 200
    assert client.get("/static/../app/settings.py").status_code == 404
    home = client.get("/", follow_redirects=False)
    assert home.status_code == 307 and home.headers["location"] == "/runs"


def test_ratio_chart_colours_and_scale() -> None:
    assert bar_colour(0.97) == FASTER
    assert bar_colour(1.03) == WITHIN_LIMIT
    assert bar_colour(1.2) == SLOWER
    svg = ratio_chart([RatioBar("a<b", 0.97), RatioBar("c", 1.5)])
    assert svg.count("<rect") == 2 and "a&lt;b" in svg
    assert FASTER in svg and SLOWER in svg
    assert ratio_chart([]) == ""


def test_side_by_side_alignment() -> None:
    left = ["a", "b", "c", "d"]
    right = ["a", "x", "c", "d", "e"]
    assert side_by_side(left, right) == [(1, 1), (2, 2), (3, 3), (4, 4), (None, 5)]
    assert side_by_side([], ["only"]) == [(None, 1)]


def test_renaming_only_is_exact_and_unmarked() -> None:
    reference = (FIXTURES / "softmax_ref.mlir").read_text()
    renamed = reference.replace("%tile", "%loaded").replace("%reduce_11", "%row_sum")
    view = variant_view("row", reference, renamed)
    assert view.level == "exact" and view.critical == []
    assert all(row.mark == "" for row in view.rows)
    broken = variant_view("row", reference, "not tile ir {")
    assert broken.level == "unknown" and "could not be compared" in broken.error
