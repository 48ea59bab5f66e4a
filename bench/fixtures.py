"""Create the people, agents and rules the benchmarks drive: `python -m bench.fixtures --out F`.

- `bench-agent` with an allow rule for `Bash(git status)`: its calls are auto-decided.
- `alice`, an approver with a personal token and 20 logged-in browser sessions.
- `--agents N` more agents, each with its own token, for the socket-scale figure.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import django

AUTO_RULE = "Bash(git status)"
DASHBOARDS = 20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    django.setup()

    from django.contrib.auth import get_user_model
    from django.test import Client

    from approvals import services

    team = services.default_team()
    agent, token = services.agent_create(name="bench-agent", team=team)
    services.rule_create(rule=AUTO_RULE, behavior="allow", source="projectSettings", team=team)
    alice = get_user_model().objects.create_user(username="alice", password="alice-bench-password-1")
    services.membership_set(user=alice, team=team, role="approver")
    approver_token = services.personal_token_create(user=alice)
    sessions = []
    for _ in range(DASHBOARDS):
        client = Client()
        client.force_login(alice)
        sessions.append(client.cookies["sessionid"].value)
    socket_agents = [services.agent_create(name=f"bench-sock-{i}", team=team)[1] for i in range(args.agents)]
    Path(args.out).write_text(
        json.dumps(
            {
                "agent_token": token,
                "agent_id": agent.pk,
                "auto_rule": AUTO_RULE,
                "approver_token": approver_token,
                "sessions": sessions,
                "socket_agent_tokens": socket_agents,
            }
        )
    )


if __name__ == "__main__":
    main()
