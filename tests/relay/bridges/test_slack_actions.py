"""Slack, end to end: a real Daphne server posts Block Kit cards and takes signed presses."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.fakes.slack import block_actions, signed_interaction, view_submission
from tests.live import live_server
from tests.relay.bridges.conftest import ALICE_SLACK, SIGNING_SECRET, AgentCall, slack_env

pytestmark = pytest.mark.django_db(transaction=True)


def press(
    server_url: str,
    payload: dict,
    *,
    secret: str = SIGNING_SECRET,
    timestamp: int | None = None,
    retry: int | None = None,
) -> httpx.Response:
    body, headers = signed_interaction(secret, payload, timestamp=timestamp)
    if retry is not None:
        headers["X-Slack-Retry-Num"] = str(retry)
    return httpx.post(f"{server_url}/integrations/slack/actions", content=body, headers=headers, timeout=10)


def decisions() -> list:
    from approvals.models import Decision

    return list(Decision.objects.all())


class SlackActionTests:
    def test_it_posts_buttons_and_an_approvers_press_releases_the_agent(self, fake_sl, ci_bot):
        with live_server(**slack_env(fake_sl)) as srv:
            agent = AgentCall(srv.url, ci_bot.token, "terraform apply")
            card = fake_sl.wait_for(lambda: next(iter(fake_sl.cards()), None))
            assert "terraform apply" in card.all_text
            labels = [b["text"]["text"] for b in card.buttons]
            assert labels == ["Allow once", "Allow for session", "Always allow", "Deny"]
            assert "save `Bash(terraform apply:*)`" in card.all_text  # the grant, before the tap
            started = time.monotonic()
            response = press(srv.url, block_actions(card, "Allow once", user_id=ALICE_SLACK, username="alice"))
            assert response.status_code == 200
            assert time.monotonic() - started < 3  # Slack's acknowledgement deadline
            answer = agent.result()
            assert answer.status_code == 200
            assert answer.json()["decision"]["behavior"] == "allow"
            assert answer.json()["decision"]["surface"] == "slack"
            fake_sl.wait_for(lambda: "Allowed by alice (slack) via slack" in card.all_text)
            assert card.buttons == []

    def test_it_rejects_forged_and_replayed_requests_with_401(self, fake_sl, ci_bot):
        with live_server(**slack_env(fake_sl)) as srv:
            AgentCall(srv.url, ci_bot.token, "rm -rf /tmp/cache", wait=5)
            card = fake_sl.wait_for(lambda: next(iter(fake_sl.cards()), None))
            payload = block_actions(card, "Allow once", user_id=ALICE_SLACK)
            assert press(srv.url, payload, secret="not-the-secret").status_code == 401
            assert press(srv.url, payload, timestamp=int(time.time()) - 6 * 60).status_code == 401
            body, headers = signed_interaction(SIGNING_SECRET, payload)
            tampered = body.replace(b"U0ALICE", b"U0EVE00")
            forged = httpx.post(f"{srv.url}/integrations/slack/actions", content=tampered, headers=headers)
            assert forged.status_code == 401
            assert decisions() == []

    def test_it_applies_a_retried_delivery_once(self, fake_sl, ci_bot):
        with live_server(**slack_env(fake_sl)) as srv:
            agent = AgentCall(srv.url, ci_bot.token, "git push --force")
            card = fake_sl.wait_for(lambda: next(iter(fake_sl.cards()), None))
            payload = block_actions(card, "Deny", user_id=ALICE_SLACK, trigger_id="trig-1")
            assert press(srv.url, payload).status_code == 200
            assert press(srv.url, payload, retry=1).status_code == 200
            opened = fake_sl.wait_for(lambda: fake_sl.views)[0]
            submitted = view_submission(opened, user_id=ALICE_SLACK, reason="")
            assert press(srv.url, submitted).status_code == 200
            assert press(srv.url, submitted, retry=1).status_code == 200
            assert agent.result().json()["decision"]["behavior"] == "deny"
            assert len(decisions()) == 1
            assert len(fake_sl.views) == 1  # the retried press opened no second modal
            from relay.models import ProcessedUpdate

            assert ProcessedUpdate.objects.filter(surface="slack", update_id="trig-1").count() == 1
            assert fake_sl.ephemerals == []  # the retry did not even produce an "already decided"

    def test_deny_asks_for_a_reason_in_a_modal_and_the_agent_hears_it(self, fake_sl, ci_bot):
        with live_server(**slack_env(fake_sl)) as srv:
            agent = AgentCall(srv.url, ci_bot.token, "kubectl delete namespace prod")
            card = fake_sl.wait_for(lambda: next(iter(fake_sl.cards()), None))
            pressed = block_actions(card, "Deny", user_id=ALICE_SLACK, username="alice", trigger_id="trig-deny")
            assert press(srv.url, pressed).status_code == 200
            opened = fake_sl.wait_for(lambda: fake_sl.views)[0]
            assert opened["trigger_id"] == "trig-deny"
            assert decisions() == []  # nothing is decided until the reason is submitted
            reason = "use the staging cluster"
            submitted = view_submission(opened, user_id=ALICE_SLACK, username="alice", reason=reason)
            assert press(srv.url, submitted).status_code == 200
            answer = agent.result().json()["decision"]
            assert (answer["behavior"], answer["message"], answer["surface"]) == ("deny", reason, "slack")
            fake_sl.wait_for(lambda: "Denied by alice (slack) via slack" in card.all_text)
            assert card.buttons == []

    def test_a_reason_modal_decides_only_for_an_approver_and_its_signed_request(self, fake_sl, ci_bot):
        with live_server(**slack_env(fake_sl)) as srv:
            AgentCall(srv.url, ci_bot.token, "make deploy", wait=5)
            card = fake_sl.wait_for(lambda: next(iter(fake_sl.cards()), None))
            # A non-approver's Deny opens no modal.
            assert press(srv.url, block_actions(card, "Deny", user_id="U0MALLORY")).status_code == 200
            assert "not allowed" in fake_sl.wait_for(lambda: fake_sl.ephemerals)[0]["text"]
            assert press(srv.url, block_actions(card, "Deny", user_id=ALICE_SLACK)).status_code == 200
            opened = fake_sl.wait_for(lambda: fake_sl.views)[0]
            forged = view_submission(opened, user_id=ALICE_SLACK, reason="x")
            metadata = json.loads(forged["view"]["private_metadata"])
            forged["view"]["private_metadata"] = json.dumps({**metadata, "value": metadata["value"][:-4] + "AAAA"})
            assert press(srv.url, forged).status_code == 200
            stranger = view_submission({**opened, "id": "V-STRANGER"}, user_id="U0MALLORY", reason="x")
            assert press(srv.url, stranger).status_code == 200
            refusals = fake_sl.wait_for(lambda: fake_sl.ephemerals[1:] if len(fake_sl.ephemerals) >= 3 else None)
            assert [e["user"] for e in refusals] == [ALICE_SLACK, "U0MALLORY"]
            assert all("not allowed" in e["text"] for e in refusals)
            assert len(fake_sl.views) == 1
            assert decisions() == []

    def test_it_refuses_a_non_approver_with_an_ephemeral_message(self, fake_sl, ci_bot):
        with live_server(**slack_env(fake_sl)) as srv:
            AgentCall(srv.url, ci_bot.token, "make deploy", wait=5)
            card = fake_sl.wait_for(lambda: next(iter(fake_sl.cards()), None))
            assert press(srv.url, block_actions(card, "Allow once", user_id="U0MALLORY")).status_code == 200
            ephemeral = fake_sl.wait_for(lambda: fake_sl.ephemerals)
            assert ephemeral[0]["user"] == "U0MALLORY" and "not allowed" in ephemeral[0]["text"]
            assert decisions() == []

    def test_it_updates_the_card_when_the_web_decides_first(self, fake_sl, ci_bot, alice):
        from approvals import services
        from approvals.models import PermissionRequest

        token = services.personal_token_create(user=alice)
        with live_server(**slack_env(fake_sl)) as srv:
            agent = AgentCall(srv.url, ci_bot.token, "npm publish")
            card = fake_sl.wait_for(lambda: next(iter(fake_sl.cards()), None))
            stale = block_actions(card, "Allow once", user_id=ALICE_SLACK)  # Slack still shows the buttons
            request_id = PermissionRequest.objects.get().pk
            decided = httpx.post(
                f"{srv.url}/api/v1/permission-requests/{request_id}/decision",
                json={"behavior": "deny"},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert decided.status_code == 200, decided.text
            fake_sl.wait_for(lambda: "Denied by alice via" in card.all_text)
            assert card.buttons == []
            assert agent.result().json()["decision"]["behavior"] == "deny"
            assert press(srv.url, stale).status_code == 200
            assert "Already decided by alice" in fake_sl.wait_for(lambda: fake_sl.ephemerals)[0]["text"]
