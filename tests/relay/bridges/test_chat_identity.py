"""A chat account is linked to a person only by the account itself sending a one-time code.

The class: claiming someone else's chat id. A typed id (the profile form of old) let
Mallory book Alice's taps to Mallory, or block them. Now the profile shows a code, the
person sends `/link CODE` to the bot from that account, and nothing else links.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests.relay.bridges.conftest import ALICE_TG, STRANGER_TG, ask, decision_of

pytestmark = pytest.mark.django_db(transaction=True)


def profile_code(user: Any) -> str:
    """Press "Get a link code" on the person's profile page and read the code it shows."""
    import re

    client = Client()
    client.force_login(user)
    response = client.post("/profile/", {"action": "link-code"})
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    found = re.search(r'<code id="link-code">([^<]+)</code>', response.content.decode())
    assert found is not None
    return found.group(1)


def identities() -> list[tuple[str, str, str, bool]]:
    from approvals.models import ChatIdentity

    rows = ChatIdentity.objects.select_related("user").order_by("pk")
    return [(i.provider, i.external_id, i.user.username, i.proven_at is not None) for i in rows]


class TelegramLinkTests:
    def test_a_code_sent_from_the_account_links_it_and_its_presses_count_as_the_person(
        self, fake_tg, telegram_bridge, telegram_poller, ci_bot, alice
    ):
        code = profile_code(alice)
        fake_tg.say(f"/link {code}", user_id=ALICE_TG, username="alice_tg")
        reply = fake_tg.wait_for(lambda: fake_tg.sent_to(ALICE_TG))
        assert "Linked" in reply[0].text and "alice" in reply[0].text
        assert identities() == [("telegram", str(ALICE_TG), "alice", True)]
        request = ask(ci_bot.agent, "npm run build")
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        update_id = fake_tg.press(card, "Allow once", user_id=ALICE_TG)
        fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{update_id}"))
        decision = decision_of(request)
        assert (decision.decided_by, decision.decided_by_user_id) == ("alice", alice.pk)

    def test_a_code_works_once_so_a_second_account_links_nothing(
        self, fake_tg, telegram_bridge, telegram_poller, alice
    ):
        code = profile_code(alice)
        fake_tg.say(f"/link {code}", user_id=ALICE_TG)
        fake_tg.wait_for(lambda: fake_tg.sent_to(ALICE_TG))
        fake_tg.say(f"/link {code}", user_id=STRANGER_TG)
        reply = fake_tg.wait_for(lambda: fake_tg.sent_to(STRANGER_TG))
        assert "wrong or has expired" in reply[0].text
        assert identities() == [("telegram", str(ALICE_TG), "alice", True)]

    def test_a_code_shown_in_a_group_is_burnt_and_links_nothing(self, fake_tg, telegram_bridge, telegram_poller, alice):
        from tests.relay.bridges.conftest import CHAT_ID

        code = profile_code(alice)
        fake_tg.say(f"/link@gh_bot {code}", user_id=ALICE_TG, chat_id=CHAT_ID)
        reply = fake_tg.wait_for(lambda: [m for m in fake_tg.sent_to(CHAT_ID) if "private chat" in m.text])
        assert "no longer works" in reply[0].text
        fake_tg.say(f"/link {code}", user_id=STRANGER_TG)  # someone in the group was quicker
        assert "wrong or has expired" in fake_tg.wait_for(lambda: fake_tg.sent_to(STRANGER_TG))[0].text
        assert identities() == []

    def test_a_typed_claim_on_someone_elses_id_counts_for_nothing_and_proof_replaces_it(
        self, fake_tg, telegram_bridge, telegram_poller, ci_bot, alice, mallory
    ):
        from approvals.models import ChatIdentity

        # A link typed in by hand before codes existed: Mallory claimed Alice's Telegram id.
        ChatIdentity.objects.create(user=mallory, provider="telegram", external_id=str(ALICE_TG))
        request = ask(ci_bot.agent, "npm run build")
        card = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        update_id = fake_tg.press(card, "Allow once", user_id=ALICE_TG, username="alice_tg")
        fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{update_id}"))
        decision = decision_of(request)  # Alice is listed; the claim neither blocks nor renames her
        assert (decision.decided_by, decision.decided_by_user_id) == ("@alice_tg (telegram)", None)
        fake_tg.say(f"/link {profile_code(alice)}", user_id=ALICE_TG)
        fake_tg.wait_for(lambda: fake_tg.sent_to(ALICE_TG))
        assert identities() == [("telegram", str(ALICE_TG), "alice", True)]


# Variants of what a person (or a guesser) sends, through the one door every bridge uses.
CODE_FORMS = [
    ("as shown", lambda c: c, True),
    ("lower case", lambda c: c.lower(), True),
    ("no dash", lambda c: c.replace("-", ""), True),
    ("spaces", lambda c: " ".join(c), True),
    ("one character changed", lambda c: c[:-1] + ("0" if c[-1] != "0" else "1"), False),
    ("cut short", lambda c: c[:-1], False),
    ("one character more", lambda c: c + "7", False),
    ("empty", lambda c: "", False),
    ("another alphabet", lambda c: c.replace("A", "\u0410"), None),  # Cyrillic A, when the code has an A
    ("the hash of it", lambda c: __import__("hashlib").sha256(c.encode()).hexdigest(), False),
    ("SQL", lambda c: "' OR '1'='1", False),
]


class LinkCodeCorpusTests:
    @pytest.mark.parametrize(("label", "transform", "links"), CODE_FORMS, ids=[f[0] for f in CODE_FORMS])
    def test_only_the_code_itself_links(self, alice, label, transform, links):
        from relay.bridges.base import apply_link

        code = profile_code(alice)
        sent = transform(code)
        expected = links if links is not None else sent == code
        answer = apply_link("telegram", "4242", sent)
        assert (identities() == [("telegram", "4242", "alice", True)]) is expected, answer

    @pytest.mark.parametrize(
        "age", [timedelta(minutes=11), timedelta(hours=2), timedelta(days=30)], ids=["11min", "2h", "30d"]
    )
    def test_an_expired_code_links_nothing(self, alice, age):
        from approvals.models import ChatLinkCode
        from relay.bridges.base import apply_link

        code = profile_code(alice)
        ChatLinkCode.objects.update(expires_at=timezone.now() - age + timedelta(minutes=10))
        assert "expired" in apply_link("slack", "U0ALICE", code)
        assert identities() == []

    def test_a_new_code_voids_the_old_one(self, alice):
        from relay.bridges.base import apply_link

        old = profile_code(alice)
        new = profile_code(alice)
        assert "expired" in apply_link("slack", "U0ALICE", old)
        assert "Linked" in apply_link("slack", "U0ALICE", new)

    def test_a_deactivated_persons_code_links_nothing(self, alice):
        from relay.bridges.base import apply_link

        code = profile_code(alice)
        alice.is_active = False
        alice.save()
        assert "deactivated" in apply_link("telegram", "4242", code)
        assert identities() == []

    def test_an_account_proven_for_one_person_is_not_taken_by_another(self, alice, mallory):
        from relay.bridges.base import apply_link

        assert "Linked" in apply_link("telegram", "4242", profile_code(alice))
        assert "another person" in apply_link("telegram", "4242", profile_code(mallory))
        assert identities() == [("telegram", "4242", "alice", True)]

    @pytest.mark.parametrize(
        "form",
        [
            {"provider": "telegram", "external_id": str(ALICE_TG)},
            {"provider": "slack", "external_id": "U0ALICE"},
            {"action": "link", "provider": "telegram", "external_id": "1"},
            {"action": "link-code", "provider": "telegram", "external_id": "1"},
            {"action": "token", "provider": "telegram", "external_id": "1"},
        ],
    )
    def test_typing_an_id_on_the_profile_links_nothing(self, mallory, form):
        client = Client()
        client.force_login(mallory)
        assert client.post("/profile/", form).status_code in (200, 302)
        assert identities() == []


def slash_command(secret: str, form: dict[str, str], *, timestamp: int | None = None) -> tuple[bytes, dict[str, str]]:
    """A slash command's POST, signed as Slack signs it."""
    import hashlib
    import hmac
    import time
    from urllib.parse import urlencode

    body = urlencode(form).encode()
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return body, {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest}",
    }


class SlackLinkTests:
    def test_a_signed_slash_command_links_the_sender_and_nothing_else_does(self, fake_sl, alice):
        import time

        import httpx

        from tests.live import live_server
        from tests.relay.bridges.conftest import ALICE_SLACK, SIGNING_SECRET, slack_env

        code = profile_code(alice)
        with live_server(**slack_env(fake_sl)) as srv:
            url = f"{srv.url}/integrations/slack/commands"

            def send(form: dict[str, str], secret: str = SIGNING_SECRET, **kw: Any) -> httpx.Response:
                body, headers = slash_command(secret, form, **kw)
                return httpx.post(url, content=body, headers=headers, timeout=10)

            link = {"command": "/gatehouse", "text": f"link {code}", "user_id": "U0MALLORY"}
            assert send(link, secret="not-the-secret").status_code == 401
            assert send(link, timestamp=int(time.time()) - 600).status_code == 401  # outside the window
            assert identities() == []  # an unsigned or stale command links nothing
            answer = send({"command": "/gatehouse", "text": "hello", "user_id": ALICE_SLACK})
            assert answer.status_code == 200 and "Unknown command" in answer.json()["text"]
            assert send({"command": "/gatehouse", "text": f"link {code}"}).status_code == 400  # no sender
            answer = send({"command": "/link", "text": code, "user_id": ALICE_SLACK})
            assert answer.json() == {
                "response_type": "ephemeral",
                "text": "Linked: your presses here are now recorded as alice in Gatehouse.",
            }
            assert identities() == [("slack", ALICE_SLACK, "alice", True)]
            replayed = send({"command": "/link", "text": code, "user_id": "U0MALLORY"})
            assert "wrong or has expired" in replayed.json()["text"]
        assert identities() == [("slack", ALICE_SLACK, "alice", True)]


class TelegramStopSwitchTests:
    def test_a_team_admin_pauses_and_resumes_an_agent_from_chat(
        self, fake_tg, telegram_bridge, telegram_poller, ci_bot, carol
    ):
        from approvals import services
        from approvals.models import Decision, Pause

        fake_tg.say(f"/link {profile_code(carol)}", user_id=ALICE_TG)
        fake_tg.wait_for(lambda: fake_tg.sent_to(ALICE_TG))
        fake_tg.say("/pause ci-bot", user_id=ALICE_TG)
        reply = fake_tg.wait_for(lambda: [m for m in fake_tg.sent_to(ALICE_TG) if "Paused" in m.text])
        assert "Paused agent ci-bot" in reply[0].text
        pause = Pause.objects.get()
        assert (pause.agent_id, pause.answer, pause.created_by_id) == (ci_bot.agent.pk, "deny", carol.pk)
        denied = services.request_submit(
            agent=ci_bot.agent, call={"tool_name": "Bash", "tool_input": {"command": "ls"}}
        )
        assert denied.decision is not None and denied.decision.reason["detail"] == "paused"
        fake_tg.say("/resume ci-bot", user_id=ALICE_TG)
        fake_tg.wait_for(lambda: [m for m in fake_tg.sent_to(ALICE_TG) if "Resumed" in m.text])
        assert not Pause.objects.exists()
        audited = Decision.objects.filter(tool_name__startswith="Gatehouse:").values_list("surface", "decided_by")
        assert list(audited) == [("telegram", "carol"), ("telegram", "carol")]

    def test_an_unlinked_account_or_an_approver_pauses_nothing(
        self, fake_tg, telegram_bridge, telegram_poller, ci_bot, alice
    ):
        from approvals.models import Pause

        fake_tg.say("/pause", user_id=STRANGER_TG)
        reply = fake_tg.wait_for(lambda: fake_tg.sent_to(STRANGER_TG))
        assert "Link this chat account first" in reply[0].text
        fake_tg.say(f"/link {profile_code(alice)}", user_id=ALICE_TG)
        fake_tg.wait_for(lambda: fake_tg.sent_to(ALICE_TG))
        fake_tg.say("/pause ci-bot", user_id=ALICE_TG)
        refused = fake_tg.wait_for(lambda: [m for m in fake_tg.sent_to(ALICE_TG) if "team admin" in m.text])
        assert refused and not Pause.objects.exists()
