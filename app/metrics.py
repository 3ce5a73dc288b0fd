"""Prometheus metrics of one service instance, in a registry of its own (so
several app instances, as in tests, never collide)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from schemas.api import ConversionStatus

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class StatusCountCollector(Collector):
    """Conversions per status, read from the database at scrape time."""

    def __init__(self, count_by_status: Callable[[], dict[str, int]]) -> None:
        self.count_by_status = count_by_status

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "tileport_conversions", "Conversions by status", labels=["status"]
        )
        counts = self.count_by_status()
        for status in ConversionStatus:
            family.add_metric([status.value], counts.get(status.value, 0))
        yield family


class ServiceMetrics:
    def __init__(self, count_by_status: Callable[[], dict[str, int]]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "tileport_http_requests",
            "HTTP requests by route and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "tileport_http_request_seconds",
            "HTTP request latency by route",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.submitted = Counter(
            "tileport_conversions_submitted",
            "Conversions accepted, by origin",
            ["origin"],
            registry=self.registry,
        )
        self.rejected = Counter(
            "tileport_conversions_rejected",
            "Submissions refused, by error code",
            ["code"],
            registry=self.registry,
        )
        self.webhooks = Counter(
            "tileport_webhook_deliveries",
            "GitHub webhook deliveries by result",
            ["result"],
            registry=self.registry,
        )
        self.registry.register(StatusCountCollector(count_by_status))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Counts requests and their latency per route template (not per raw path,
    which would give one series per conversion id)."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"]
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - started)
