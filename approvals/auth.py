"""Bearer tokens: agents and people's personal tokens, hashed at rest.

A token is looked up by its SHA-256, so the comparison happens in the database index
on a digest, never on the secret itself, and a timing difference reveals nothing
about the token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest
from django.http.request import RawPostDataException
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from approvals import selectors, services, strict_json
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


# What a caller sends with a token's read: statements built from the token's digest.
ReadsWithToken = Callable[[str], Sequence[Statement]]


def authenticate_token_with(
    token: str, reads: ReadsWithToken | None = None
) -> tuple[AgentPrincipal | object | None, list[list[tuple[Any, ...]]] | None]:
    """`authenticate_token`, and the rows of `reads(digest)` sent with the token's read in
    the same round trip (None when the token is no good).

    - The prefix says which table holds the token (`gha_` an agent's, `ghp_` a
      person's), so each call reads one table. A token with neither prefix (none is
      made so) is looked up in both, `reads` with the person's.
    - `reads` are sent before the token is known good: they may depend on the request and
      on the digest (to read for the agent the token names, in the statement itself), and
      their rows are the caller's to use only once the token is good.
    """
    digest = services.token_hash(token)
    also = list(reads(digest)) if reads is not None else []
    agents_token = token.startswith(services.AGENT_TOKEN_PREFIX)
    if not token.startswith(services.PERSONAL_TOKEN_PREFIX):
        agent, rows = selectors.agent_by_token_hash(digest, also if agents_token else ())
        if agent is not None:
            services.agent_touch(agent=agent)
            return AgentPrincipal(agent), (rows if agents_token and reads is not None else None)
        if agents_token:
            return None, None
    personal, rows = selectors.personal_token_by_hash(digest, also)
    if personal is not None and personal.user.is_active:
        services.personal_token_touch(token=personal)
        return personal.user, (rows if reads is not None else None)
    return None, None


# A body past this size is not read ahead of its token's check: it would be parsed twice,
# and parsed for a caller not yet known.
BODY_AHEAD_MAX_BYTES = 64 * 1024


def body_ahead(request: HttpRequest) -> Any:
    """The request's JSON body, read before its token is checked, for the reads sent with
    the token's (`reads_with_token`); None for a body that is not small, valid JSON (the
    view reads it as always, after the token, and says what is wrong with it)."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    if not 0 < length <= BODY_AHEAD_MAX_BYTES:
        return None
    try:
        return strict_json.loads(request.body)
    except (ValueError, RequestDataTooBig, RawPostDataException):
        return None


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """A bearer token.

    - A view whose first reads go with the token's read has
      `reads_with_token(request, digest, **url_kwargs) -> list[Statement]`: statements
      from the request and the token's digest, never trusted before the token is good.
      Their rows reach the view as `read_with_token(request)` once it is: one round trip
      where there were two (a person's decision, docs/PERFORMANCE.md, twenty-seventh
      pass; an agent's submit, twenty-eighth pass).
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
        kwargs = context.get("kwargs", {})
        reads: ReadsWithToken | None = None
        if reads_with is not None:

            def reads(digest: str) -> Sequence[Statement]:
                return reads_with(request, digest, **kwargs)

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
    read (a bearer token); None otherwise (a session, say): the view reads them."""
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
