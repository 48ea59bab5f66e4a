"""One fan-out point for every decision (SPEC §8): metrics, a telemetry event, a log line.

The audit row is written by `services` before any of this runs; this module is an
`Announcer`, so it is called from `transaction.on_commit` for engine decisions and
human ones alike. It records what decided and how, never the tool input or a secret.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from approvals.models import Decision, PermissionRequest

log = logging.getLogger("gatehouse.decisions")

REGISTRY = CollectorRegistry(auto_describe=True)

DECISIONS = Counter(
    "gatehouse_decisions",
    "Decisions recorded, by behavior, reason type and surface.",
    ["behavior", "reason", "surface"],
    registry=REGISTRY,
)
DECISION_LATENCY = Histogram(
    "gatehouse_decision_latency_seconds",
    "Time from a request's arrival to its decision.",
    ["reason"],
    buckets=(0.005, 0.025, 0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600),
    registry=REGISTRY,
)
CLAIM_CONFLICTS = Counter(
    "gatehouse_claim_conflicts",
    "Answers that arrived while another surface held the request's claim, or lost the fence.",
    registry=REGISTRY,
)
TOOL_ERRORS = Counter(
    "gatehouse_tool_errors",
    "Tool failures reported by agents, by telemetry-safe error class.",
    ["error"],
    registry=REGISTRY,
)


class PendingCollector(Collector):
    """The pending gauge, read from the database at scrape time.

    A per-process gauge would be wrong with several server processes (the process
    that announced a request is rarely the one that sees it decided).
    """

    def describe(self) -> Iterator[GaugeMetricFamily]:
        # Registering calls describe(); without it the registry would collect() — a
        # database query while Django is still starting up.
        yield GaugeMetricFamily("gatehouse_pending_requests", "Requests waiting for an answer.")

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from approvals.models import RequestState

        gauge = GaugeMetricFamily("gatehouse_pending_requests", "Requests waiting for an answer.")
        try:
            gauge.add_metric([], PermissionRequest.objects.filter(state=RequestState.PENDING).count())
        except Exception:  # a scrape must not fail because the database blinked
            log.warning("pending gauge unavailable", exc_info=True)
            return
        yield gauge


REGISTRY.register(PendingCollector())


def metrics_text() -> bytes:
    return generate_latest(REGISTRY)


def record_claim_conflict() -> None:
    CLAIM_CONFLICTS.inc()


def record_tool_error(error_class: str) -> None:
    TOOL_ERRORS.labels(error=error_class[:64]).inc()


# --- OpenTelemetry ----------------------------------------------------------------------

_otel_lock = threading.Lock()
_otel_provider: Any = None
# Whether a processor listens for the `tool_decision` events (OTLP export or one added by
# `add_telemetry_processor`): without one, no event is built (the SDK's record of one cost
# ~18 µs, half of a decision's whole fan-out, to be dropped).
_otel_listened = False


def telemetry_provider() -> Any:
    """The OpenTelemetry LoggerProvider, built once; OTLP export only when configured."""
    global _otel_provider, _otel_listened
    with _otel_lock:
        if _otel_provider is None:
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
            from opentelemetry.sdk.resources import Resource

            provider = LoggerProvider(resource=Resource.create({"service.name": "gatehouse"}))
            if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
                from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

                provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
                _otel_listened = True
            _otel_provider = provider
        return _otel_provider


def add_telemetry_processor(processor: Any) -> None:
    """Send `tool_decision` events to one more processor (an exporter of your choice)."""
    global _otel_listened
    telemetry_provider().add_log_record_processor(processor)
    _otel_listened = True


def decision_attributes(request: PermissionRequest, decision: Decision) -> dict[str, str | float]:
    """What a decision looks like in telemetry: who and how, never the input."""
    return {
        "decision": decision.behavior,
        "reason_type": decision.reason_type,
        "source": decision.rule_source or decision.surface,
        "surface": decision.surface,
        "decided_by": decision.decided_by,
        "tool_name": request.tool_name,
        "agent": request.agent.name if request.agent_id else "",
        "state": request.state,
        "request_id": str(request.pk),
        "latency_ms": round(decision.latency_ms, 3),
    }


def record_decision(request: PermissionRequest, decision: Decision) -> None:
    """Fan one committed decision out to metrics, the telemetry event and the log."""
    attributes = decision_attributes(request, decision)
    DECISIONS.labels(decision.behavior, decision.reason_type, decision.surface).inc()
    DECISION_LATENCY.labels(decision.reason_type).observe(max(decision.latency_ms, 0.0) / 1000)
    try:
        provider = telemetry_provider()  # built once, with OTLP export when it is configured
        if _otel_listened:
            provider.get_logger("gatehouse.relay").emit(
                event_name="tool_decision", body="tool_decision", attributes=attributes
            )
    except Exception:  # telemetry is never a reason to lose the decision
        log.warning("tool_decision event not emitted", exc_info=True)
    if log.isEnabledFor(logging.INFO):
        log.info("tool_decision %s", json.dumps(attributes, sort_keys=True))


class ObservabilityAnnouncer:
    """Registered in `relay.wiring`; sees every finished request after commit."""

    name = "observability"

    def request_created(self, request: PermissionRequest) -> None:
        return None

    def request_finished(self, request: PermissionRequest, decision: Decision) -> None:
        record_decision(request, decision)
