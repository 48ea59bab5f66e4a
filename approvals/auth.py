"""Bearer tokens: agents and people's personal tokens, hashed at rest.

A token is looked up by its SHA-256, so the comparison happens in the database index
on a digest, never on the secret itself, and a timing difference reveals nothing
about the token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from approvals import selectors, services
from approvals.models import Agent
from approvals.written import Statement


class AgentPrincipal(AnonymousUser):
    """The `request.user` of an agent: authenticated, never a person, never an approver."""

    def __init__(self, agent: Agent) -> None:
        super().__init__()
        self.agent = agent

    @property
    def is_authenticated(self) -> bool:  # type: ignore[override]
        return True

    @property
    def is_anonymous(self) -> bool:  # type: ignore[override]
        return False

    def __str__(self) -> str:
        return f"agent:{self.agent.name}"


def bearer_token(header: str) -> str | None:
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def authenticate_token(token: str) -> AgentPrincipal | object | None:
    """Resolve a bearer token to an agent principal or a person; None if unknown or revoked."""
    return authenticate_token_with(token)[0]


def authenticate_token_with(
    token: str, person_reads: Sequence[Statement] = ()
) -> tuple[AgentPrincipal | object | None, list[list[tuple[Any, ...]]] | None]:
    """`authenticate_token`, and the rows of `person_reads` sent with a person's token read
    in the same round trip (None when they were not sent: the token is not a person's).

    - The prefix says which table holds the token (`gha_` an agent's, `ghp_` a
      person's), so each call reads one table. A token with neither prefix (none is
      made so) is looked up in both.
    - `person_reads` may not depend on who asks: they are read before the token is
      known good, and their rows are the caller's to use only once it is.
    """
    digest = services.token_hash(token)
    if not token.startswith(services.PERSONAL_TOKEN_PREFIX):
        agent = selectors.agent_by_token_hash(digest)
        if agent is not None:
            services.agent_touch(agent=agent)
            return AgentPrincipal(agent), None
        if token.startswith(services.AGENT_TOKEN_PREFIX):
            return None, None
    personal, rows = selectors.personal_token_by_hash(digest, person_reads)
    if personal is not None and personal.user.is_active:
        services.personal_token_touch(token=personal)
        return personal.user, (rows if person_reads else None)
    return None, None


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """A bearer token.

    - A view whose first reads for a person go with the person's token read has
      `reads_with_token(**url_kwargs) -> list[Statement]`: statements from the URL's
      arguments alone, never from who asks. Their rows reach the view as
      `read_with_token(request)` once the token is known good: one round trip where there
      were two (a person's decision: docs/PERFORMANCE.md, twenty-seventh pass).
    """

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[object, str] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        token = bearer_token(header)
        if token is None:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        context = request.parser_context or {}
        reads_with = getattr(context.get("view"), "reads_with_token", None)
        reads: list[Statement] = reads_with(**context.get("kwargs", {})) if reads_with is not None else []
        principal, rows = authenticate_token_with(token, reads)
        if principal is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        if rows is not None:
            request.__dict__[_READ_WITH_TOKEN] = rows
        return principal, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


def read_with_token(request: Request) -> list[list[tuple[Any, ...]]] | None:
    """The rows of the view's `reads_with_token`, when they went with the caller's token
    read (a person's bearer token); None otherwise (a session, say): the view reads them."""
    rows: list[list[tuple[Any, ...]]] | None = request.__dict__.get(_READ_WITH_TOKEN)
    return rows


# Where the rows wait on DRF's request: its own attributes, never the wrapped HttpRequest's.
_READ_WITH_TOKEN = "gatehouse_read_with_token"  # noqa: S105  (a key, no secret)


def agent_of(request: Request) -> Agent | None:
    user = request.user
    return user.agent if isinstance(user, AgentPrincipal) else None


class PasswordChangeEndsSessions:
    """Closes a person's dashboard sockets, on every device, whenever their password changes.

    Not a rule on passwords: Django calls each of `AUTH_PASSWORD_VALIDATORS`'s
    `password_changed` once a new password is saved, by whatever path saved it (the
    password change and reset pages, the admin's password form, `manage.py
    changepassword`, `set_password` and `save` in a shell), so this is the one place that
    sees them all.
    """

    def validate(self, password: str, user: Any = None) -> None:
        return None

    def get_help_text(self) -> str:
        return "A new password closes every open dashboard page of the person, on every device."

    def password_changed(self, password: str, user: Any = None) -> None:
        if user is not None and user.pk is not None:
            services.person_credentials_changed(user=user)
