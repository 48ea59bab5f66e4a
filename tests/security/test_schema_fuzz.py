"""Schemathesis against the live API: generated requests, positive and negative, find no 5xx.

Every operation of `/api/schema/` is fuzzed as an agent and as a person (an approver,
who may call everything a person can), with a bounded number of examples each. Waits
are capped at 1 s so a generated `?wait=600` costs a second, not ten minutes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from approvals import services
from tests.live import live_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

EXAMPLES = 12


def fuzz(schema: Any, base_url: str, token: str, mode: GenerationMode, failures: list[str]) -> int:
    calls = 0
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def run(case: Any) -> None:
            nonlocal calls
            calls += 1
            try:
                response = case.call(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
            except requests.ConnectionError as exc:
                # Daphne (Twisted) drops a request line over 16 KiB (no 414, but no crash);
                # anything else that breaks the connection is a failure.
                if len(urlencode(case.query or {}, doseq=True)) <= 15 * 1024:
                    failures.append(f"connection broken: {case.method} {case.formatted_path}: {exc!r}"[:400])
                return
            if response.status_code >= 500 and response.status_code != 503:
                failures.append(
                    f"{response.status_code} {case.method} {case.formatted_path} "
                    f"query={case.query} body={str(case.body)[:200]} -> {response.text[:200]}"
                )

        try:
            run()
        except Unsatisfiable:
            # A public operation with no parameter and no body (the VAPID key) has nothing
            # a negative case could make invalid; every other operation still has cases.
            if mode != GenerationMode.NEGATIVE:
                raise
    return calls


class SchemaFuzzTests:
    def test_it_answers_no_generated_request_with_a_server_error(
        self, django_db_blocker: Any, ci_bot: Any, alice: Any
    ) -> None:
        person = services.personal_token_create(user=alice)
        failures: list[str] = []
        with django_db_blocker.unblock(), live_server(GATEHOUSE_MAX_WAIT="1", GATEHOUSE_ASK_TIMEOUT="5") as srv:
            schema = schemathesis.openapi.from_url(f"{srv.url}/api/schema/")
            calls = sum(
                fuzz(schema, srv.url, token, mode, failures)
                for token in (ci_bot.token, person)
                for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
            )
            log = srv.log()
            alive = srv.process.poll() is None
        assert alive, "the server died under fuzzing"
        assert calls > 100
        assert failures == [], "\n".join(failures[:20])
        assert "Traceback" not in log, log[-3000:]
