"""Pinned project roots and home: set by a team manager, applied by the engine."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from approvals import services
from approvals.models import Agent, Rule

CWD = "/home/alice/project"
FACTS = {
    "home": "/home/alice",
    "user": "alice",
    "paths": {
        CWD: {"real": CWD, "exists": True, "dir": True},
        f"{CWD}/src/app.py": {"real": f"{CWD}/src/app.py", "exists": True, "dir": False},
        "/tmp/elsewhere": {"real": "/tmp/elsewhere", "exists": True, "dir": True},
        "/tmp/elsewhere/src/app.py": {"real": "/tmp/elsewhere/src/app.py", "exists": True, "dir": False},
    },
}


def _edit(agent: Any, cwd: str, facts: dict[str, Any] = FACTS) -> Any:
    call = {
        "tool_name": "Edit",
        "tool_input": {"file_path": "src/app.py", "old_string": "a", "new_string": "b"},
        "cwd": cwd,
        "facts": facts,
    }
    return services.request_submit(agent=agent, call=call)


@pytest.mark.django_db
class PinnedRootsTests:
    def test_it_allows_inside_and_asks_outside_the_pinned_roots(self, default_team: Any) -> None:
        Rule.objects.create(rule="Edit(src/**)", behavior="allow", source="projectSettings", team=default_team)
        agent, _ = services.agent_create(name="laptop", team=default_team, roots=[CWD])
        inside = _edit(agent, CWD).decision
        assert inside is not None and inside.behavior == "allow"
        outside = _edit(agent, "/tmp/elsewhere")
        assert outside.decision is None
        assert "pinned project roots" in outside.request.evaluation["message"]

    def test_it_overrides_the_reported_home_with_the_pinned_one(self, default_team: Any) -> None:
        Rule.objects.create(rule="Read(~/.ssh/**)", behavior="deny", source="policySettings", team=default_team)
        agent, _ = services.agent_create(name="laptop", team=default_team, home="/home/alice")
        key = "/home/alice/.ssh/id_rsa"
        lying = {"home": "/nowhere", "paths": {key: {"real": key, "exists": True, "dir": False}}}
        call = {"tool_name": "Read", "tool_input": {"file_path": key}, "cwd": CWD, "facts": lying}
        decided = services.request_submit(agent=agent, call=call).decision
        assert decided is not None and decided.behavior == "deny"

    @pytest.mark.parametrize("bad", ["relative/path", "", "/ok\x00"])
    def test_it_refuses_a_path_that_is_not_absolute(self, default_team: Any, bad: str) -> None:
        agent, _ = services.agent_create(name="laptop", team=default_team)
        if bad:
            with pytest.raises(services.ServiceError):
                services.agent_pin(agent=agent, roots=[bad], home="")
        else:
            assert services.agent_pin(agent=agent, roots=[bad], home="").pinned_roots == []

    def test_createagent_takes_repeated_roots_and_a_home(self, default_team: Any) -> None:
        out = StringIO()
        call_command("createagent", "ci", "--root", "/srv/a/", "--root", "/srv/b", "--home", "/home/ci", stdout=out)
        agent = Agent.objects.get(name="ci")
        assert (agent.pinned_roots, agent.pinned_home) == (["/srv/a", "/srv/b"], "/home/ci")


@pytest.mark.django_db
class AgentPagePinsTests:
    def test_a_manager_pins_and_a_viewer_cannot(self, alice: Any, bob: Any, ci_bot: Any) -> None:
        url = f"/agents/{ci_bot.agent.pk}/pins/"
        viewer = Client()
        viewer.force_login(bob)
        assert viewer.post(url, {"roots": "/srv/x", "home": ""}).status_code == 403
        manager = Client()
        manager.force_login(alice)
        manager.post(url, {"roots": "/srv/app\n/srv/lib/\n", "home": "/home/ci"})
        ci_bot.agent.refresh_from_db()
        assert (ci_bot.agent.pinned_roots, ci_bot.agent.pinned_home) == (["/srv/app", "/srv/lib"], "/home/ci")
        html = manager.get("/agents/").content.decode()
        assert "<code>/srv/app</code>" in html and "Pin roots and home" in html
