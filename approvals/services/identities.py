"""Agents, their tokens and pins; people's personal tokens, credentials and team roles."""

from __future__ import annotations

import hashlib
import logging
import posixpath
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from approvals import events
from approvals.models import (
    Agent,
    Membership,
    Mode,
    PersonalToken,
    Role,
    Team,
)
from approvals.services.outcomes import ServiceError
from policy.facts import is_normal_absolute

log = logging.getLogger(__name__)


# A token's kind is in its prefix, so a call is looked up in one table (`approvals.auth`).
AGENT_TOKEN_PREFIX = "gha_"  # noqa: S105  (a prefix, not a secret)
PERSONAL_TOKEN_PREFIX = "ghp_"  # noqa: S105


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _new_token(prefix: str) -> str:
    return f"{prefix}{secrets.token_urlsafe(32)}"


def default_team() -> Team:
    team, _ = Team.objects.get_or_create(name="default")
    return team


def agent_create(
    *,
    name: str,
    team: Team | None = None,
    owner: User | None = None,
    mode: str = "default",
    roots: list[str] | None = None,
    home: str = "",
) -> tuple[Agent, str]:
    """Register an agent; return it and its token (shown once, stored hashed)."""
    if mode not in Mode.values:
        raise ServiceError(f"unknown mode {mode!r}; use one of {', '.join(Mode.values)}")
    pinned_roots, pinned_home = _pins(roots or [], home)
    team = team or default_team()
    if Agent.objects.filter(team=team, name=name).exists():
        raise ServiceError(f"an agent named {name!r} already exists in team {team.name!r}")
    token = _new_token(AGENT_TOKEN_PREFIX)
    agent = Agent.objects.create(
        name=name,
        team=team,
        owner=owner,
        default_mode=mode,
        token_hash=token_hash(token),
        token_prefix=token[:8],
        pinned_roots=pinned_roots,
        pinned_home=pinned_home,
    )
    return agent, token


def agent_pin(*, agent: Agent, roots: list[str], home: str) -> Agent:
    """Pin (or, with empty values, unpin) an agent's project roots and home."""
    agent.pinned_roots, agent.pinned_home = _pins(roots, home)
    agent.save(update_fields=["pinned_roots", "pinned_home"])
    return agent


MAX_PINNED_ROOTS = 50


def _pins(roots: list[str], home: str) -> tuple[list[str], str]:
    """Normalised absolute paths, or a ServiceError naming the first bad one."""
    if len(roots) > MAX_PINNED_ROOTS:
        raise ServiceError(f"at most {MAX_PINNED_ROOTS} project roots")
    return [_pinned_path(root) for root in roots if root], _pinned_path(home) if home else ""


def _pinned_path(path: str) -> str:
    normal = posixpath.normpath(path)
    if "\x00" in path or not is_normal_absolute(normal):
        raise ServiceError(f"{path[:80]!r} is not an absolute path")
    return normal


def agent_revoke(*, agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


def agent_touch(*, agent: Agent) -> None:
    """Record that the agent was seen, at most once a minute (it is on every request)."""
    now = timezone.now()
    if agent.last_seen_at is None or now - agent.last_seen_at > timedelta(minutes=1):
        # Conditional: of many concurrent calls of one agent past the minute, only the
        # first rewrites the row; the others match nothing once it has committed.
        stale = Q(last_seen_at__isnull=True) | Q(last_seen_at__lt=now - timedelta(minutes=1))
        try:
            Agent.objects.filter(stale, pk=agent.pk).update(last_seen_at=now)
        except DatabaseError as exc:
            # Best effort: with the database locked, authentication must still succeed so
            # the call reaches the code that answers "audit unavailable", not a 500.
            log.warning("could not record that agent %s was seen: %s", agent.pk, exc)
            return
        agent.last_seen_at = now


def personal_token_touch(*, token: PersonalToken) -> None:
    """Record when a personal token was last used, at most once a minute."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        PersonalToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


def personal_token_revoke(*, token: PersonalToken) -> None:
    PersonalToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


TOKEN_LIFETIMES_DAYS = (0, 7, 30, 90, 365)  # 0: until revoked


def personal_token_create(*, user: User, expires_in_days: int = 0) -> str:
    """A new personal API token (shown once); it stops working after `expires_in_days` (0: never)."""
    if expires_in_days not in TOKEN_LIFETIMES_DAYS:
        raise ServiceError(f"a token lasts one of {TOKEN_LIFETIMES_DAYS} days (0: until revoked)")
    token = _new_token(PERSONAL_TOKEN_PREFIX)
    expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    PersonalToken.objects.create(user=user, token_hash=token_hash(token), token_prefix=token[:8], expires_at=expires_at)
    return token


def personal_token_revoke_own(*, user: User, token_id: int) -> bool:
    """Revoke one of the person's own tokens; False when they have no such live token."""
    return (
        PersonalToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())
        == 1
    )


def person_credentials_changed(*, user: User) -> None:
    """A person's password changed: every open dashboard socket of theirs closes.

    Their sessions stop working at the next HTTP request (Django's session hash); the
    sockets opened before must not outlive them, on any device. The sockets close once
    the new password commits: a page that reconnected before would still pass the old
    hash. Django calls this for every saved password (`auth.PasswordChangeEndsSessions`).
    """
    user_id = user.pk
    transaction.on_commit(lambda: events.end_user_sessions(user_id))


def person_deactivate(*, user: User) -> None:
    """Deactivate a person: they cannot log in, and every open dashboard socket of theirs closes."""
    User.objects.filter(pk=user.pk).update(is_active=False)
    user.is_active = False
    events.end_user_sessions(user.pk)


def membership_set(*, user: User, team: Team, role: str) -> Membership:
    if role not in Role.values:
        raise ServiceError(f"unknown role {role!r}; use viewer, approver or admin")
    membership, _ = Membership.objects.update_or_create(user=user, team=team, defaults={"role": role})
    return membership


def person_add(*, username: str, team: Team, role: str, email: str = "", password: str | None = None) -> User:
    """Add a person to a team with a role, creating them when the name is new.

    - A new person without `password` gets none that works: they set it through
      `person_login_link`. A password is checked by Django's validators.
    - A person removed earlier (deactivated) is made active again; their password stays.
    - A name already in the team is an error: change the role with `membership_set`.
    """
    if role not in Role.values:
        raise ServiceError(f"unknown role {role!r}; use viewer, approver or admin")
    username = username.strip()
    try:
        User.username_validator(username)
    except ValidationError as exc:
        raise ServiceError(f"{username!r} is not a valid user name: {' '.join(exc.messages)}") from exc
    user = User.objects.filter(username=username).first()
    if user is not None and Membership.objects.filter(user=user, team=team).exists():
        raise ServiceError(f"{username} is already in team {team.name!r}; change their role instead")
    if password is not None:
        try:
            validate_password(password, user)
        except ValidationError as exc:
            raise ServiceError(" ".join(exc.messages)) from exc
    with transaction.atomic():
        if user is None:
            user = User.objects.create_user(username=username, email=email, password=password)
        elif not user.is_active:
            User.objects.filter(pk=user.pk).update(is_active=True)
            user.is_active = True
        if password is not None and not user.check_password(password):
            user.set_password(password)
            user.save(update_fields=["password"])
        membership_set(user=user, team=team, role=role)
    return user


def person_login_link(*, user: User) -> str:
    """A one-time link at which the person sets their password and can log in.

    - Django's password-reset token: it stops working once the password is set (or
      they log in), and after PASSWORD_RESET_TIMEOUT (three days by default).
    """
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    return settings.PUBLIC_URL + reverse("password_reset_confirm", args=[uid, token])


def person_role_change(*, user: User, team: Team, role: str) -> Membership:
    """Change a member's role; their open sockets close, so every page re-reads what they may do."""
    if not Membership.objects.filter(user=user, team=team).exists():
        raise ServiceError(f"{user.get_username()} is not in team {team.name!r}")
    membership = membership_set(user=user, team=team, role=role)
    events.end_user_sessions(user.pk)
    return membership


def person_remove(*, user: User, team: Team) -> None:
    """Take a person out of a team: their sockets close; out of their last team, they are deactivated.

    - Every HTTP request checks the person's teams again, so a session of someone still
      in other teams sees nothing of this one from the next page on. Someone in no team
      any more cannot log in at all (`person_deactivate`, which also ends their sessions).
    """
    if Membership.objects.filter(user=user, team=team).delete()[0] == 0:
        raise ServiceError(f"{user.get_username()} is not in team {team.name!r}")
    if not user.is_superuser and not Membership.objects.filter(user=user).exists():
        person_deactivate(user=user)
    else:
        events.end_user_sessions(user.pk)
