"""One fan-out per decision: metrics at /metrics, a `tool_decision` event, a log line."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

from approvals import services
from relay import observability, race
from tests.relay.wsclient import ask_call

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def telemetry() -> InMemoryLogRecordExporter:
    exporter = InMemoryLogRecordExporter()
    observability.add_telemetry_processor(SimpleLogRecordProcessor(exporter))
    return exporter


def _metric(text: str, prefix: str) -> float:
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


class ObservabilityTests:
    def test_it_emits_a_tool_decision_event_without_the_input(
        self, telemetry: InMemoryLogRecordExporter, ci_bot: Any, alice: Any
    ) -> None:
        telemetry.clear()
        request = services.request_submit(
            agent=ci_bot.agent, call=ask_call("curl -H 'Authorization: Bearer sk-live-SECRET' https://x")
        ).request
        race.answer(request.pk, services.Answer(behavior="deny", surface="web", user=alice))
        events = [r for r in telemetry.get_finished_logs() if r.log_record.event_name == "tool_decision"]
        assert len(events) == 1
        attributes = dict(events[0].log_record.attributes or {})
        assert attributes["decision"] == "deny"
        assert attributes["reason_type"] == "user"
        assert attributes["source"] == "web"
        assert attributes["tool_name"] == "Bash"
        assert attributes["agent"] == "ci-bot"
        assert "sk-live-SECRET" not in repr(attributes)

    def test_engine_decisions_pass_through_it_too(
        self, telemetry: InMemoryLogRecordExporter, ci_bot: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        telemetry.clear()
        services.rule_create(rule="Bash(make:*)", behavior="allow", source="projectSettings", team=ci_bot.agent.team)
        with caplog.at_level(logging.INFO, logger="gatehouse.decisions"):
            services.request_submit(agent=ci_bot.agent, call=ask_call("make build"))
        [event] = [r for r in telemetry.get_finished_logs() if r.log_record.event_name == "tool_decision"]
        assert event.log_record.attributes is not None
        assert event.log_record.attributes["reason_type"] == "rule"
        assert event.log_record.attributes["source"] == "projectSettings"
        assert any('"reason_type": "rule"' in message for message in caplog.messages)

    def test_it_serves_prometheus_metrics(self, ci_bot: Any, alice: Any) -> None:
        before = _metric(
            observability.metrics_text().decode(),
            'gatehouse_decisions_total{behavior="allow",reason="user",surface="api"}',
        )
        waiting = services.request_submit(agent=ci_bot.agent, call=ask_call("rm -rf a", tool_use_id="a")).request
        services.request_submit(agent=ci_bot.agent, call=ask_call("rm -rf b", tool_use_id="b"))
        race.answer(waiting.pk, services.Answer(behavior="allow", surface="api", user=alice))
        loser = race.answer(waiting.pk, services.Answer(behavior="deny", surface="web", user=alice))
        assert not loser.won
        response = Client().get("/metrics")
        assert response.status_code == 200
        text = response.content.decode()
        assert _metric(text, 'gatehouse_decisions_total{behavior="allow",reason="user",surface="api"}') == before + 1
        assert _metric(text, "gatehouse_pending_requests ") == 1
        assert _metric(text, "gatehouse_claim_conflicts_total ") >= 1
        assert "gatehouse_decision_latency_seconds_bucket" in text
