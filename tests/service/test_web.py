"""The server-rendered pages, read as HTML: runs list and filters, the run page
(the result first: verdict, level, kernel.rs, patch; the timeline, IR diff with
the critical line highlighted and quiet lines folded, perf chart, grouped
downloads), a run awaiting a GPU, the polled fragments, HTML error pages, the
offline API reference, escaping and security headers."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from run_fixture import HOSTILE_SUMMARY, LEVEL, PERF, finished_run, running_run
from service_support import FIXTURES, submit

from app.context import ServiceContext
from app.conversions import run_dir
from app.storage.models import Conversion
from app.web.charts import FASTER, SLOWER, WITHIN_LIMIT, RatioBar, bar_colour, ratio_chart
from app.web.views import dead_constant_lines, side_by_side, variant_view


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


def test_run_page_leads_with_the_result(client: TestClient, context: ServiceContext) -> None:
    cid = finished_run(client, context)
    html = client.get(f"/runs/{cid}").text
    order = [
        html.index('class="result result-finished"'),
        html.index('id="kernel-rs"'),
        html.index('class="patch"'),
        html.index('class="ir"'),
        html.index("<h2>Stages</h2>"),
        html.index('class="downloads"'),
    ]
    assert order == sorted(order)
    assert f'<span class="level-line">{LEVEL}</span>' in html
    assert '<span class="k">pub</span>' in html, "kernel.rs is highlighted"
    assert 'data-copy="kernel-rs"' in html
    assert f'href="/v1/conversions/{cid}/artifacts/generated/kernel.rs" download' in html
    summaries = re.findall(r'<details class="download-group"[^>]*>\s*<summary>([^<]+)<', html)
    assert [name.strip() for name in summaries][:2] == ["reports", "Rust and Python"]
    assert re.search(r"[0-9.]+ (B|KiB|MiB)</span>", html)


def test_a_run_awaiting_a_gpu_is_amber_and_says_how_to_finish_it(
    client: TestClient, context: ServiceContext
) -> None:
    cid = finished_run(client, context)
    with context.sessions.begin() as session:
        row = session.get_one(Conversion, cid)
        row.status, row.gate_verdict = "awaiting_gpu", "AWAITING_GPU"
    html = client.get(f"/runs/{cid}").text
    assert 'class="status status-awaiting_gpu"' in html and "result-awaiting_gpu" in html
    assert '<strong class="verdict blocked">AWAITING_GPU</strong>' in html
    bundle = run_dir(context.settings, cid) / "host" / "bundle"
    assert f"tileport gpu-run {bundle} --upload http://" in html
    assert f"/v1/conversions/{cid}/gpu-results" in html
    assert "data-poll" not in html, "nothing to poll while it awaits a GPU"
    view = client.get(f"/v1/conversions/{cid}").json()
    assert view["reached_gpu_boundary"] and view["level"] == LEVEL
    assert view["gpu"]["results_url"].endswith(f"/v1/conversions/{cid}/gpu-results")


def test_unknown_run_page_is_an_html_404(client: TestClient) -> None:
    page = client.get("/runs/nope")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "<h1>Not found</h1>" in page.text and "no conversion has this id" in page.text
    assert client.get("/runs/nope/_timeline").status_code == 404
    assert client.get("/v1/conversions/nope").json()["error"]["code"] == "unknown_conversion"


def test_api_docs_are_rendered_here_without_outside_assets(client: TestClient) -> None:
    page = client.get("/v1/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert "<code>POST /v1/conversions/{conversion_id}/gpu-results</code>" in html
    assert 'id="schema-ConversionView"' in html and "reached_gpu_boundary" in html
    assert not re.search(r'(src|href)="(https?:)?//', html), "every asset is local"


def test_long_equal_stretches_and_dead_constants_fold() -> None:
    reference = (FIXTURES / "softmax_ref.mlir").read_text()
    assert dead_constant_lines(reference) == {7, 8}
    view = variant_view("row", reference, reference.replace("neg_inf", "zero"))
    assert [row.mark for row in view.rows if row.left_no in (7, 8)] == ["noise", "noise"]
    blocks = view.blocks()
    folded = [block for block in blocks if block.folded]
    assert folded and folded[0].noise == 2
    assert all(row.mark in ("", "noise") for block in folded for row in block.rows)
    shown = [row for block in blocks if not block.folded for row in block.rows]
    assert [row.mark for row in shown].count("critical") == 1
    assert sum(len(block.rows) for block in blocks) == len(view.rows)


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
    assert all(row.mark in ("", "noise") for row in view.rows), "only dead constants stand out"
    broken = variant_view("row", reference, "not tile ir {")
    assert broken.level == "unknown" and "could not be compared" in broken.error
