"""Bearer tokens exist only as digests in the database, and secrets are compared in constant time."""

from __future__ import annotations

import ast
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import services
from approvals.auth import AgentPrincipal, authenticate_token
from tests.live import ROOT


def every_stored_text() -> str:
    """Every value of every column of every table, as one string."""
    chunks: list[str] = []
    with connection.cursor() as cursor:
        for model in apps.get_models():
            table = connection.ops.quote_name(model._meta.db_table)
            cursor.execute(f"SELECT * FROM {table}")  # noqa: S608 (table names come from the models)
            chunks.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(chunks)


@pytest.mark.django_db
class TokensAtRestTests:
    def test_it_stores_no_plaintext_agent_or_personal_token(self, ci_bot: Any, alice: Any) -> None:
        personal = services.personal_token_create(user=alice)
        stored = every_stored_text()
        for token in (ci_bot.token, personal):
            secret = token.split("_", 1)[1]
            assert token not in stored
            # Not even the secret part past the short display prefix.
            assert secret[4:] not in stored
            assert services.token_hash(token) in stored

    def test_it_accepts_the_token_and_refuses_near_misses(self, ci_bot: Any) -> None:
        assert authenticate_token(ci_bot.token) is not None
        assert authenticate_token(ci_bot.token[:-1]) is None
        assert authenticate_token(ci_bot.token + "x") is None
        assert authenticate_token(ci_bot.token.upper()) is None
        assert authenticate_token(services.token_hash(ci_bot.token)) is None  # the digest is no token

    def test_it_refuses_a_revoked_token(self, ci_bot: Any) -> None:
        services.agent_revoke(agent=ci_bot.agent)
        assert authenticate_token(ci_bot.token) is None

    def test_each_token_is_read_from_its_own_kind_only(self, ci_bot: Any, alice: Any) -> None:
        """The prefix picks the table: one read per token, and a token never crosses kinds."""
        personal = services.personal_token_create(user=alice)
        agent_secret = ci_bot.token.removeprefix(services.AGENT_TOKEN_PREFIX)
        personal_secret = personal.removeprefix(services.PERSONAL_TOKEN_PREFIX)
        # token -> who it is (None: refused)
        cases = {
            ci_bot.token: "agent",
            personal: "alice",
            services.PERSONAL_TOKEN_PREFIX + agent_secret: None,
            services.AGENT_TOKEN_PREFIX + personal_secret: None,
            agent_secret: None,
            personal_secret: None,
            "gha_": None,
            "ghp_": None,
            "GHA_" + agent_secret: None,
        }
        for token, expected in cases.items():
            with CaptureQueriesContext(connection) as reads:
                principal = authenticate_token(token)
            found = "agent" if isinstance(principal, AgentPrincipal) else getattr(principal, "username", None)
            assert found == expected, token
            prefixed = token.startswith((services.AGENT_TOKEN_PREFIX, services.PERSONAL_TOKEN_PREFIX))
            selects = [q["sql"] for q in reads.captured_queries if q["sql"].startswith("SELECT")]
            assert len(selects) == (1 if prefixed else 2), (token, selects)

    def test_a_token_of_neither_prefix_is_still_found(self, default_team: Any) -> None:
        agent, _ = services.agent_create(name="imported", team=default_team)
        agent.token_hash = services.token_hash("legacy-token-without-a-prefix")
        agent.save(update_fields=["token_hash"])
        principal = authenticate_token("legacy-token-without-a-prefix")
        assert isinstance(principal, AgentPrincipal) and principal.agent.pk == agent.pk


def comparisons_of_secrets(path: Any) -> list[str]:
    """`==`/`!=` comparisons whose operands are named like a secret, token or signature."""
    suspicious = ("secret", "signature", "token", "mac", "digest", "password")
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops):
            names = [ast.unparse(part).lower() for part in (node.left, *node.comparators)]
            # Comparing against a constant (None, "", a header name) leaks nothing secret.
            if any(isinstance(part, ast.Constant) for part in (node.left, *node.comparators)):
                continue
            if any(word in name for name in names for word in suspicious):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


# Reviewed comparisons that involve no secret an attacker could probe by timing.
NOT_SECRET = {
    "relay/claims.py: entry.token == token",  # the in-process claim owner's own token, never from a client
    "relay/claims.py: entry.token != token",
    "relay/bridges/base.py: len(token) != 2 + 1 + 32 + 20",  # a length check, the shape is public
    "gatehouse/settings.py: SECRET_KEY == DEV_SECRET_KEY",  # against the public development default
}


class ConstantTimeComparisonTests:
    def test_it_compares_no_secret_with_a_plain_equals_anywhere_on_the_server(self) -> None:
        files = [p for package in ("approvals", "relay", "gatehouse") for p in (ROOT / package).rglob("*.py")]
        found = [
            hit
            for path in files
            for hit in comparisons_of_secrets(path)
            if f"{hit.split(':')[0]}: {hit.split(': ', 1)[1]}" not in NOT_SECRET
        ]
        assert found == [], "use hmac.compare_digest for secrets:\n" + "\n".join(found)

    def test_it_checks_every_signature_and_shared_secret_with_compare_digest(self) -> None:
        checks = {
            "relay/bridges/base.py": "hmac.compare_digest(mac, _mac(surface, body))",  # signed chat buttons
            "relay/bridges/views.py": "hmac.compare_digest(given.encode(), bridge.config.webhook_secret",  # Telegram
            "relay/bridges/slack.py": "self.verifier.is_valid(",  # slack_sdk's SignatureVerifier: compare_digest
            "relay/webhooks.py": "hmac.compare_digest(signature(secret, timestamp, body), header)",
        }
        for path, needle in checks.items():
            assert needle in (ROOT / path).read_text(), f"{path} no longer checks its secret with {needle}"
