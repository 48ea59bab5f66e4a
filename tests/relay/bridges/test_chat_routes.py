"""Each team's asks go to its own chat, and only that team's listed approvers decide them.

The class: a chat press deciding another team's request. One chat for every team let a
listed approver of team A decide team B's ask, and showed B's commands to A's people.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.test import Client

from tests.relay.bridges.conftest import ALICE_SLACK, ALICE_TG, CHAT_ID, STRANGER_TG, ask, decision_of

pytestmark = pytest.mark.django_db(transaction=True)

OTHER_CHAT = "-100999"
OTHER_TG = 222  # listed for the other team only
OTHER_SLACK_CHANNEL = "C0OTHER"
OTHER_SLACK = "U0OTHER"


@pytest.fixture
def other_routes(other_team: Any) -> Any:
    from relay.bridges import services

    services.chat_route_set(team=other_team, surface="telegram", channel=OTHER_CHAT, approvers=[str(OTHER_TG)])
    services.chat_route_set(team=other_team, surface="slack", channel=OTHER_SLACK_CHANNEL, approvers=[OTHER_SLACK])
    return other_team


class TeamRoutingTests:
    def test_each_teams_ask_is_posted_to_its_own_chat_only(
        self, fake_tg, telegram_bridge, ci_bot, other_bot, other_routes
    ):
        ask(ci_bot.agent, "npm run build")
        ask(other_bot.agent, "make deploy")
        ours = fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        theirs = fake_tg.wait_for(lambda: fake_tg.card_for("other-bot"))
        assert (ours.chat_id, theirs.chat_id) == (CHAT_ID, OTHER_CHAT)
        assert telegram_bridge.queue.wait_idle(10)
        assert not [m for m in fake_tg.sent_to(CHAT_ID) if "make deploy" in m.text]
        assert not [m for m in fake_tg.sent_to(OTHER_CHAT) if "npm run build" in m.text]

    def test_a_team_without_a_route_gets_no_chat_post(self, fake_tg, telegram_bridge, ci_bot, other_bot):
        ask(other_bot.agent, "make deploy")  # the other team has no route; the env is the default team's
        ask(ci_bot.agent, "npm run build")
        fake_tg.wait_for(lambda: fake_tg.card_for("ci-bot"))
        assert telegram_bridge.queue.wait_idle(10)
        assert fake_tg.card_for("other-bot") is None

    def test_a_press_on_another_teams_card_is_refused_and_its_own_approver_decides(
        self, fake_tg, telegram_bridge, telegram_poller, other_bot, other_routes
    ):
        request = ask(other_bot.agent, "make deploy")
        card = fake_tg.wait_for(lambda: fake_tg.card_for("other-bot"))
        refused = fake_tg.press(card, "Allow once", user_id=ALICE_TG)  # listed, but for the default team
        assert "not allowed" in fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{refused}"))[0]
        assert decision_of(request) is None
        applied = fake_tg.press(card, "Allow once", user_id=OTHER_TG)
        fake_tg.wait_for(lambda: fake_tg.toast_for(f"cq{applied}"))
        assert decision_of(request).behavior == "allow"


def bridges() -> dict[str, Any]:
    """Both bridges as the environment configures them, not announcing (presses only)."""
    from relay.bridges.slack import SlackBridge, SlackConfig
    from relay.bridges.telegram import TelegramBridge, TelegramConfig

    telegram = TelegramBridge(TelegramConfig(token="1:x", chat_id=CHAT_ID, approvers=[str(ALICE_TG)]))
    slack = SlackBridge(SlackConfig(token="x", signing_secret="s", channel="C0DEF", approvers=[ALICE_SLACK]))
    return {"telegram": telegram, "slack": slack}


PRESSERS = {
    "telegram": {"default approver": str(ALICE_TG), "other approver": str(OTHER_TG), "stranger": str(STRANGER_TG)},
    "slack": {"default approver": ALICE_SLACK, "other approver": OTHER_SLACK, "stranger": "U0STRANGER"},
}
ENTITLED = {("default approver", "default"), ("other approver", "other")}


class PressTeamCorpusTests:
    def test_every_press_is_checked_against_the_requests_team(self, ci_bot, other_bot, other_routes):
        """Every surface, presser, request team and action: only that team's list decides."""
        from relay.bridges.base import ACTIONS, Press, apply_press

        agents = {"default": ci_bot.agent, "other": other_bot.agent}
        counter = itertools.count()
        for surface, bridge in bridges().items():
            for (who, external_id), team, action in itertools.product(PRESSERS[surface].items(), agents, ACTIONS):
                request = ask(agents[team], f"printf {next(counter)}")
                outcome = apply_press(Press(surface, external_id, who, str(request.pk), action), bridge.approvers_for)
                entitled = (who, team) in ENTITLED
                case = (surface, who, team, action, outcome.text)
                assert outcome.applied is entitled and outcome.refused is not entitled, case
                assert (decision_of(request) is not None) is entitled, case

    def test_a_route_change_moves_the_authority_at_once(self, other_bot, other_routes):
        from relay.bridges import services
        from relay.bridges.base import Press, apply_press

        telegram = bridges()["telegram"]
        services.chat_route_set(team=other_routes, surface="telegram", channel=OTHER_CHAT, approvers=["333"])
        request = ask(other_bot.agent, "make deploy")
        press = Press("telegram", str(OTHER_TG), "was listed", str(request.pk), "o")
        assert apply_press(press, telegram.approvers_for).refused
        press = Press("telegram", "333", "now listed", str(request.pk), "o")
        assert apply_press(press, telegram.approvers_for).applied


def api(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


ROUTE = "/api/v1/teams/{team}/chat-routes"


@pytest.fixture(autouse=True)
def environment_route(settings: Any) -> None:
    """The environment configures the default team's Telegram route."""
    settings.TELEGRAM_BOT_TOKEN = "1:x"
    settings.TELEGRAM_CHAT_ID = CHAT_ID
    settings.TELEGRAM_APPROVERS = [str(ALICE_TG)]
    settings.SLACK_BOT_TOKEN = ""


class ChatRouteApiTests:
    def test_a_team_admin_sets_reads_and_removes_the_teams_route(self, carol, default_team):
        client = api(carol)
        url = ROUTE.format(team="default")
        assert client.get(url).json() == [
            {"surface": "telegram", "channel": CHAT_ID, "approvers": [str(ALICE_TG)], "source": "environment"}
        ]
        body = {"channel": "-100555", "approvers": ["111", "112", "111"]}
        response = client.put(f"{url}/telegram", body, content_type="application/json")
        assert response.status_code == 200, response.content
        assert response.json() == {
            "surface": "telegram",
            "channel": "-100555",
            "approvers": ["111", "112"],
            "source": "team",
        }
        assert client.get(url).json()[0]["source"] == "team"
        assert client.delete(f"{url}/telegram").status_code == 204
        assert client.get(url).json()[0]["source"] == "environment"
        assert client.delete(f"{url}/telegram").status_code == 404

    def test_one_chat_serves_one_team(self, carol, mallory, default_team, other_routes):
        response = api(carol).put(
            ROUTE.format(team="default") + "/telegram",
            {"channel": OTHER_CHAT, "approvers": []},
            content_type="application/json",
        )
        assert response.status_code == 400
        assert "another team" in response.json()["error"]["message"]

    @pytest.mark.parametrize(
        ("body", "status"),
        [
            ({"channel": "", "approvers": []}, 400),
            ({"channel": "-1", "approvers": ["has space"]}, 400),
            ({"channel": "-1", "approvers": "111"}, 400),
            ({"channel": "-1", "approvers": [111]}, 400),
            ({"channel": "-1"}, 400),
            ({"channel": "-1", "approvers": [], "team": "other"}, 400),
            ({"channel": "x" * 201, "approvers": []}, 400),
        ],
    )
    def test_bad_input_is_a_400(self, carol, body, status):
        response = api(carol).put(ROUTE.format(team="default") + "/slack", body, content_type="application/json")
        assert response.status_code == status, response.content

    def test_who_may_manage_routes(self, alice, bob, carol, mallory, other_team):
        url = ROUTE.format(team="default")
        body = {"channel": "-1", "approvers": []}
        assert api(bob).get(url).status_code == 403  # a viewer
        assert api(alice).get(url).status_code == 403  # an approver: routes are the team admin's setting
        assert api(alice).put(f"{url}/telegram", body, content_type="application/json").status_code == 403
        assert api(bob).put(f"{url}/telegram", body, content_type="application/json").status_code == 403
        assert api(mallory).get(url).status_code == 404  # another team's approver sees no such team
        assert api(carol).put(f"{url}/discord", body, content_type="application/json").status_code == 404
        assert api(carol).get(ROUTE.format(team="other")).status_code == 404


class ChatRouteAdminPageTests:
    def test_a_superuser_sets_a_teams_route_on_the_admin_site_and_bad_input_is_refused(
        self, admin, default_team, other_team
    ):
        from relay.models import ChatRoute

        client = Client()
        client.force_login(admin)
        add = "/admin/relay/chatroute/add/"
        assert client.get(add).status_code == 200
        form = {"team": other_team.pk, "surface": "telegram", "channel": "-100777", "approvers": '["333", 334]'}
        saved = client.post(add, form)
        assert saved.status_code == 302, saved.content[:2000]
        route = ChatRoute.objects.get(team=other_team, surface="telegram")
        assert (route.channel, route.approvers) == ("-100777", ["333", "334"])

        for bad in ({"team": default_team.pk}, {"team": default_team.pk, "channel": "-1", "approvers": "111"}):
            refused = client.post(add, {**form, **bad})
            assert refused.status_code == 200  # the form again, with what is wrong
        assert ChatRoute.objects.count() == 1  # one chat serves one team; approvers are a list
