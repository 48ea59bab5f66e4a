"""Gatehouse's data: teams, agents, permission requests, the audit log and rules.

Every write goes through `approvals.services`; these classes only describe the data and
guard the audit log's append-only rule.
"""

from __future__ import annotations

import uuid
from typing import Any, NoReturn

from django.conf import settings
from django.db import models
from django.db.models.functions import Length
from django.db.models.lookups import GreaterThan, LessThanOrEqual


class Role(models.TextChoices):
    """A person's role in one team, ranked: a viewer watches, an approver also decides,
    an admin also manages the team's people and settings (approvals/permissions.py)."""

    VIEWER = "viewer", "Viewer"
    APPROVER = "approver", "Approver"
    ADMIN = "admin", "Admin"


class Mode(models.TextChoices):
    DEFAULT = "default", "default"
    ACCEPT_EDITS = "acceptEdits", "acceptEdits"
    PLAN = "plan", "plan"
    BYPASS = "bypassPermissions", "bypassPermissions"
    DONT_ASK = "dontAsk", "dontAsk"
    AUTO = "auto", "auto"


class Context(models.TextChoices):
    INTERACTIVE = "interactive", "interactive"
    HEADLESS = "headless", "headless"
    COORDINATOR = "coordinator", "coordinator"


class UnknownTools(models.TextChoices):
    """What a call to a tool Gatehouse does not know (a newer Claude Code's) gets."""

    ASK = "ask", "ask a person"
    DENY = "deny", "deny it"


class Team(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A person's role in one team; it decides what they see and may decide."""

    user = models.ForeignKey(  # indexed by the unique (user, team) (migration 0029)
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships", db_index=False
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    # The team's named groups this person is in ("leads", "on_call"): who a quorum rule's
    # `approver_group` and the escalation ladder's on-call step mean.
    groups = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="membership_unique_user_team")]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} in {self.team}"


class TeamSettings(models.Model):
    """A team's approval settings, changed by a team admin: quorum, deadlines, the escalation ladder, unknown tools.

    Every duration is in seconds; None falls back to the next that applies (docs/POLICY.md).
    """

    team = models.OneToOneField(Team, on_delete=models.CASCADE, primary_key=True, related_name="approval_settings")
    # Approvals every ask of the team needs (1: one person, as without quorum).
    approvals_required = models.PositiveSmallIntegerField(default=1)
    # Risk classes: approvals a destructive command / a protected path needs (0: no class rule).
    destructive_approvals = models.PositiveSmallIntegerField(default=0)
    protected_path_approvals = models.PositiveSmallIntegerField(default=0)
    # When set, only members of this group count toward the team-wide and risk-class quorums.
    approver_group = models.CharField(max_length=64, blank=True, default="")
    # The agent's owner never counts toward a quorum on their own agent's calls.
    exclude_owner = models.BooleanField(default=False)
    # The deadline of an ask when no rule says (None: GATEHOUSE_ASK_TIMEOUT), and of a
    # deferred headless ask (None: GATEHOUSE_DEFERRED_TIMEOUT).
    ask_timeout = models.PositiveIntegerField(null=True, blank=True)
    deferred_timeout = models.PositiveIntegerField(null=True, blank=True)
    # The ladder: remind the same people after this long, then escalate to `on_call_group`.
    remind_after = models.PositiveIntegerField(null=True, blank=True)
    escalate_after = models.PositiveIntegerField(null=True, blank=True)
    on_call_group = models.CharField(max_length=64, blank=True, default="on_call")
    # A tool the registry does not know: a person decides (ask), or it is denied.
    unknown_tools = models.CharField(max_length=8, choices=UnknownTools.choices, default=UnknownTools.ASK)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"approval settings of team {self.team_id}"


class Agent(models.Model):
    name = models.CharField(max_length=100)
    # Indexed by the unique (team, name) (migration 0029).
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="agents", db_index=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="agents"
    )
    default_mode = models.CharField(max_length=32, choices=Mode.choices, default=Mode.DEFAULT)
    # Only a SHA-256 of the token is stored; the prefix lets people tell tokens apart.
    token_hash = models.CharField(max_length=64, unique=True)
    token_prefix = models.CharField(max_length=16)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Pinned by a team admin: where this agent may work and what its home is. A call from
    # a working directory outside the roots never auto-allows; the home overrides the
    # agent's reported one (its facts are its own claims).
    pinned_roots = models.JSONField(default=list, blank=True)
    pinned_home = models.CharField(max_length=4096, blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="agent_unique_team_name")]

    def __str__(self) -> str:
        return self.name

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class PersonalToken(models.Model):
    """An API token for a person (scripts, a phone app)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    token_hash = models.CharField(max_length=64, unique=True)
    token_prefix = models.CharField(max_length=16)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # None: the token works until revoked.
    expires_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.token_prefix}… ({self.user})"


class RequestState(models.TextChoices):
    PENDING = "pending", "pending"
    DECIDED = "decided", "decided"
    CANCELLED = "cancelled", "cancelled"
    EXPIRED = "expired", "expired"


class PermissionRequest(models.Model):
    """One proposed tool call."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: `request_unique_agent_tool_use_id` leads with the agent. With a
    # second one, a plan made before the table's statistics (a prepared read's, kept) took
    # it for the replay check and read every request of the agent (migration 0029).
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="requests", db_index=False)
    # No index of its own either: `request_team_state_created` leads with the team, and
    # every request stored kept both up (migration 0030).
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="requests", db_index=False)
    tool_use_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200)
    tool_input = models.JSONField(default=dict)
    # SHA-256 of the canonical input: how a PermissionRequest hook (no tool_use_id) finds
    # the PreToolUse request of the same call.
    input_hash = models.CharField(max_length=64)
    # What makes calls "like" each other (approvals.changes.likeness_hash): a pending card
    # names the last person's allow of a call like it (selectors.last_allowed_like) by this.
    # Set at submit (services.submit); empty on the rows made elsewhere, which no person
    # answers (the stop switch's, and the agent's own refusals of calls never asked here).
    # Empty in the database's default too: a server of the version before, still running
    # while the upgrade is applied, writes its rows without it.
    likeness = models.CharField(max_length=64, blank=True, default="", db_default="")
    session_id = models.CharField(max_length=200, blank=True, default="")
    cwd = models.CharField(max_length=4096, blank=True, default="")
    permission_mode = models.CharField(max_length=32, choices=Mode.choices, default=Mode.DEFAULT)
    context = models.CharField(max_length=16, choices=Context.choices, default=Context.INTERACTIVE)
    transcript_path = models.CharField(max_length=4096, blank=True, default="")
    # What the engine said: trace, warnings, suggested rules, destructive warning.
    evaluation = models.JSONField(default=dict)
    # Claude Code's own "always allow" suggestions from a PermissionRequest hook.
    permission_suggestions = models.JSONField(default=list, blank=True)
    # What the agent reported about its own machine (home, user, paths): the decision's
    # premises, shown to reviewers. Null when the transport carried none (curl, http hook).
    facts = models.JSONField(null=True, blank=True)
    # What Claude Code says of the call's place in the session (`calls.CALL_CONTEXT`): the
    # prompt it answers (`prompt_id`), the subagent making it (`agent_id`, `agent_type`),
    # the effort level, and the user's prompt when the agent opted in to send it. Null
    # when the caller sent none.
    call_context = models.JSONField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=RequestState.choices, default=RequestState.PENDING)
    # Bumped by every state change; the conditional update on it is the race's fence.
    version = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    # The escalation ladder's next steps (None: done or none); the sweeper takes each once.
    remind_at = models.DateTimeField(null=True, blank=True)
    escalate_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # The outcome's audit row; the request's other audit rows (quorum votes, ladder
    # steps) are `audit_rows`. No database constraint: the archive removes audit rows
    # and requests in one transaction, and the audit log's own guards protect both.
    decision = models.OneToOneField(
        "Decision", null=True, blank=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    # PostToolUse / PostToolUseFailure, recorded against the request.
    result = models.JSONField(null=True, blank=True)
    result_at = models.DateTimeField(null=True, blank=True)

    # Not a column: the team's rules version the submit read, set on the instance it
    # announces (services.submit), so a surface can tell from what it kept for that
    # version whether it has anything to ask (relay.race); None on a request read back.
    rules_version: str | None = None

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "tool_use_id"], name="request_unique_agent_tool_use_id"),
        ]
        indexes = [
            models.Index(fields=["state", "deadline_at"], name="request_state_deadline"),
            models.Index(fields=["team", "state", "-created_at"], name="request_team_state_created"),
            models.Index(fields=["agent", "session_id", "tool_name", "input_hash"], name="request_match"),
            models.Index(fields=["state", "remind_at"], name="request_state_remind"),
            models.Index(fields=["state", "escalate_at"], name="request_state_escalate"),
            # The agent's asks waiting for a person, counted on every submit (the pending cap).
            models.Index(fields=["agent"], condition=models.Q(state="pending"), name="request_agent_pending"),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.tool_name} by {self.agent_id} ({self.state})"

    def outcome_sentence(self, decision: Decision | None, *, holder: str = "", late: bool = False) -> str:
        """Who decided what, in the words every surface uses: 'allowed by alice via web'.

        - `late`: said to whoever answered second: 'already decided by alice via web (allowed)'.
        - `holder`: who holds the claim while no decision is recorded yet.
        Surfaces add only their markup (a capital, an icon, a full stop).
        """
        already = "already " if late else ""
        if decision is None:
            if holder:
                return f"{already}being decided by {holder}"
            return "no longer pending" if late else str(self.state)
        if self.state == RequestState.EXPIRED:
            return f"{already}expired: nobody answered before the deadline"
        by = f"by {decision.decided_by} via {decision.surface}"
        if self.state == RequestState.CANCELLED:
            detail = decision.reason.get("detail") if isinstance(decision.reason, dict) else ""
            return f"{already}cancelled {by}" + (f" ({detail})" if detail else "")
        verb = {"allow": "allowed", "deny": "denied"}.get(decision.behavior, "decided")
        return f"{already}decided {by} ({verb})" if late else f"{verb} {by}"


class AuditTamperError(Exception):
    pass


class DecisionQuerySet(models.QuerySet["Decision"]):
    def update(self, **kwargs: Any) -> NoReturn:
        raise AuditTamperError("The audit log is append-only: decisions cannot be updated.")

    def delete(self) -> NoReturn:
        raise AuditTamperError("The audit log is append-only: decisions cannot be deleted.")


# Rules up to this many characters are copied into the denials index: at 4 bytes a
# character at most, beside the tool name and the decider, the entry stays under
# PostgreSQL's B-tree limit (~2.7 kB), so no denial can fail to be written.
INDEXED_RULE_CHARS = 256


class AuditKind(models.TextChoices):
    """What an audit row records: a request's outcome, or a step on the way to it."""

    DECISION = "decision", "decision"
    VOTE = "vote", "vote"  # one person's approval toward a quorum
    REMINDER = "reminder", "reminder"  # the ladder reminded the same people
    ESCALATION = "escalation", "escalation"  # the ladder escalated to the on-call group
    AUTOPILOT = "autopilot", "autopilot"  # after this request's allow, the autopilot saved a trial rule


# The reason types of rows that are not a decision: a vote toward a quorum, a ladder step,
# an autopilot promotion (after the decision). Counts of decisions leave them out; the
# denials monitor never meets them (none denies).
STEP_REASON_TYPES = ("vote", "ladder", "autopilot")


class Decision(models.Model):
    """The audit log: one row per request outcome or step (vote, ladder, autopilot), append-only, hash-chained."""

    # One `decision` row per finished request (PermissionRequest.decision names it), any
    # number of vote and ladder rows before it, and an `autopilot` row after a person's
    # allow of it made the autopilot save a trial rule.
    request = models.ForeignKey(PermissionRequest, on_delete=models.PROTECT, related_name="audit_rows")
    kind = models.CharField(max_length=16, choices=AuditKind.choices, default=AuditKind.DECISION)
    # Denormalised so the audit list and the denials monitor filter without joins. No
    # index of their own: `decision_agent_tool_created` and `decision_team_created` lead
    # with them, and every audit row appended kept both up (migration 0030).
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="decisions", db_index=False)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="decisions", db_index=False)
    tool_name = models.CharField(max_length=200)
    session_id = models.CharField(max_length=200, blank=True, default="")
    behavior = models.CharField(max_length=8)
    message = models.TextField(blank=True, default="")
    updated_input = models.JSONField(null=True, blank=True)
    reason_type = models.CharField(max_length=32, db_index=True)
    reason = models.JSONField(default=dict)
    rule = models.CharField(max_length=4096, blank=True, default="")
    rule_source = models.CharField(max_length=32, blank=True, default="")
    decided_by = models.CharField(max_length=150)
    decided_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="decisions"
    )
    surface = models.CharField(max_length=32)
    latency_ms = models.FloatField(default=0.0)
    created_at = models.DateTimeField(db_index=True)
    # prev_hash is unique, so two writers that read the same chain head cannot both
    # commit: the loser retries on the new head and the chain never forks.
    prev_hash = models.CharField(max_length=64, unique=True)
    hash = models.CharField(max_length=64, unique=True)
    # Which fields `hash` covers (approvals.audit): 1 the decision's, 2 also its request's,
    # 3 also the row's kind.
    format = models.PositiveSmallIntegerField(default=3)

    objects = DecisionQuerySet.as_manager()

    class Meta:
        constraints = [
            # One outcome per request, and a person's approval counts once toward a quorum.
            models.UniqueConstraint(
                fields=["request"], condition=models.Q(kind="decision"), name="decision_one_outcome_per_request"
            ),
            models.UniqueConstraint(
                fields=["request", "decided_by_user"], condition=models.Q(kind="vote"), name="decision_one_vote_each"
            ),
        ]
        indexes = [
            models.Index(fields=["team", "-created_at"], name="decision_team_created"),
            models.Index(fields=["agent", "tool_name", "created_at"], name="decision_agent_tool_created"),
            models.Index(fields=["behavior", "created_at"], name="decision_behavior_created"),
            # The denials monitor reads only these (index-only scans on PostgreSQL): the
            # denials with every column it groups by (the cause, too), split by the rule's length because
            # a B-tree entry must stay under ~2.7 kB, and the asks people answered or
            # let time out.
            models.Index(
                fields=["team", "created_at"],
                include=["tool_name", "agent", "decided_by", "rule", "reason_type"],
                condition=models.Q(behavior="deny") & models.Q(LessThanOrEqual(Length("rule"), INDEXED_RULE_CHARS)),
                name="decision_denied_short_rule",
            ),
            models.Index(
                fields=["team", "created_at"],
                include=["tool_name", "agent", "decided_by", "reason_type"],
                condition=models.Q(behavior="deny") & models.Q(GreaterThan(Length("rule"), INDEXED_RULE_CHARS)),
                name="decision_denied_long_rule",
            ),
            models.Index(
                fields=["team", "created_at"],
                include=["reason_type", "latency_ms"],
                condition=models.Q(reason_type__in=["user", "timeout"]),
                name="decision_team_asked",
            ),
            # Every pending card reads the newest people's allows of its agent and tool
            # (selectors.last_allowed_like): without this the read walked every call the
            # rules allowed too, and grew with the agent's history.
            models.Index(
                fields=["agent", "tool_name", "-created_at"],
                condition=models.Q(behavior="allow", reason_type="user"),
                name="decision_people_allows",
            ),
        ]
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.behavior} {self.tool_name} ({self.reason_type})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise AuditTamperError("The audit log is append-only: decisions cannot be updated.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AuditTamperError("The audit log is append-only: decisions cannot be deleted.")


class AuditSearch(models.Model):
    """The folded text an audit row is found by (`approvals.audit_search`), one per row.

    A table of its own: the audit row stays as it is hashed, and the search text, which is
    derived from it, can be rebuilt. Written in the same transaction as the row.
    """

    # No database constraint: the audit log's own guards decide what may remove a row
    # (the archive removes search rows with their rows), and a search row must never be
    # what stops that, nor a check that finds rows removed behind its back.
    decision = models.OneToOneField(
        Decision, primary_key=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="search"
    )
    text = models.TextField()

    def __str__(self) -> str:
        return f"search text of decision {self.decision_id}"


class RuleSource(models.TextChoices):
    """Claude Code's eight rule sources; settings-class ones weakest to strongest."""

    USER_SETTINGS = "userSettings", "userSettings"
    PROJECT_SETTINGS = "projectSettings", "projectSettings"
    LOCAL_SETTINGS = "localSettings", "localSettings"
    FLAG_SETTINGS = "flagSettings", "flagSettings"
    POLICY_SETTINGS = "policySettings", "policySettings"
    CLI_ARG = "cliArg", "cliArg"
    COMMAND = "command", "command"
    SESSION = "session", "session"
    # Saved by Gatehouse itself after repeated approvals; the weakest source (docs/POLICY.md).
    AUTOPILOT = "autopilot", "autopilot"


# What a person may write; autopilot rules are only ever made by the autopilot.
PERSON_SOURCES = [(value, label) for value, label in RuleSource.choices if value != RuleSource.AUTOPILOT]


class RuleBehavior(models.TextChoices):
    ALLOW = "allow", "allow"
    DENY = "deny", "deny"
    ASK = "ask", "ask"


class RuleScope(models.TextChoices):
    GLOBAL = "global", "everyone"
    AGENT = "agent", "one agent"
    PROJECT = "project", "one project path"
    SESSION = "session", "one session"


class Rule(models.Model):
    rule = models.CharField(max_length=4096)
    behavior = models.CharField(max_length=8, choices=RuleBehavior.choices)
    source = models.CharField(max_length=32, choices=RuleSource.choices)
    # No index of its own: `rule_team_scope` leads with the team (migration 0030).
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="rules", db_index=False)
    scope = models.CharField(max_length=16, choices=RuleScope.choices, default=RuleScope.GLOBAL)
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="rules")
    project_path = models.CharField(max_length=4096, blank=True, default="")
    session_id = models.CharField(max_length=200, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True)
    # Per-rule override of GATEHOUSE_ASK_TIMEOUT for asks this rule produces.
    ask_timeout = models.PositiveIntegerField(null=True, blank=True)
    # An ask rule's quorum: approvals from distinct people, optionally of one team group.
    approvals_required = models.PositiveSmallIntegerField(default=1)
    approver_group = models.CharField(max_length=64, blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="rules"
    )
    note = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["team", "scope"], name="rule_team_scope")]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.behavior} {self.rule} ({self.source})"


class AutopilotSetting(models.Model):
    """A team's autopilot (off unless a person turns it on): when it saves a trial rule."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, primary_key=True, related_name="autopilot")
    enabled = models.BooleanField(default=False)
    # Approvals of one narrow pattern, from this many distinct sessions, with no denial.
    approvals = models.PositiveSmallIntegerField(default=5)
    # How long a rule it saves lives before it must be earned again.
    trial_hours = models.PositiveIntegerField(default=24)
    # How far back the evidence (approvals, and denials that forbid it) is read.
    window_days = models.PositiveSmallIntegerField(default=30)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"autopilot of team {self.team_id}: {'on' if self.enabled else 'off'}"


class RulesVersion(models.Model):
    """A token that changes in the same commit as any change to a team's rules or webhooks.

    Every server process caches its compiled rules per team, and the relay the team's
    webhooks a call must ask, and reads this one row per call to know whether they are
    still current (`rule_cache.compiled_rules_for`, the pre-decision providers). A
    database trigger sets it on every insert, update and delete of a rule (migration
    0004) and of a webhook (the relay's migration 0004), so no write path — services, the
    admin, a shell, a cascade — can forget it. It is random rather than a counter, so a
    rolled-back change never reuses a value.
    `team_id` is no foreign key: the trigger may write it while the team is deleted.
    """

    team_id = models.BigIntegerField(primary_key=True)
    version = models.CharField(max_length=32)

    def __str__(self) -> str:
        return f"rules of team {self.team_id} at {self.version}"


class SessionDenials(models.Model):
    """The engine's denial-tracking state for one agent session."""

    # No index of its own: `denials_unique_agent_session` leads with the agent (as requests').
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="denial_states", db_index=False)
    session_id = models.CharField(max_length=200)
    state = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "session_id"], name="denials_unique_agent_session"),
        ]

    def __str__(self) -> str:
        return f"denials of {self.agent_id} in {self.session_id}"


class ChatIdentity(models.Model):
    """Links a chat account (Telegram user id, Slack user id) to a Gatehouse user."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_identities")
    provider = models.CharField(max_length=32)
    external_id = models.CharField(max_length=200)
    # Set when the account itself sent the person's one-time code to the bot. A link typed
    # in by hand (before codes) stays None and counts for nothing: anyone could type any id.
    proven_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["provider", "external_id"], name="chat_identity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.provider}:{self.external_id} → {self.user}"


class ChatLinkCode(models.Model):
    """A one-time code shown on a person's profile; sent to a bot, it links that chat account.

    Only its SHA-256 is stored. It works once, for a few minutes.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_link_codes")
    code_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"link code for {self.user} until {self.expires_at:%H:%M}"


class AuditCut(models.Model):
    """Where `manage.py audit_archive` cut the audit log: the chain goes on from `head_hash`.

    Rows up to `through_id` live in the compressed JSONL file `file_name` (its SHA-256 in
    `file_sha256`); the first live row's `prev_hash` is `head_hash`, so the archive and
    the live table verify as one chain.
    """

    created_at = models.DateTimeField(auto_now_add=True)
    before = models.DateTimeField()
    first_id = models.BigIntegerField()
    through_id = models.BigIntegerField(unique=True)
    rows = models.IntegerField()
    start_hash = models.CharField(max_length=64)
    head_hash = models.CharField(max_length=64, unique=True)
    file_name = models.CharField(max_length=255)
    file_sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["-through_id"]

    def __str__(self) -> str:
        return f"audit cut through decision {self.through_id} ({self.rows} rows in {self.file_name})"


class SavedAuditFilter(models.Model):
    """A person's named audit query ("denials on prod this week"), one click from the audit page."""

    user = models.ForeignKey(  # indexed by the unique (user, name) (migration 0029)
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_audit_filters", db_index=False
    )
    name = models.CharField(max_length=80)
    # The query string, as the audit filter form wrote it back (validated when saved).
    query = models.CharField(max_length=2000)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="saved_audit_filter_unique_name")]
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"


class PauseAnswer(models.TextChoices):
    DENY = "deny", "deny every call"
    ASK = "ask", "ask a person for every call"


class Pause(models.Model):
    """The stop switch: while a row exists, every call of the agent (or of the whole team) is
    answered `answer` at once. A team admin sets and lifts it; both are rows in the audit chain."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="pauses")
    # None: every agent of the team, also ones registered while it is paused.
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="pauses")
    answer = models.CharField(max_length=8, choices=PauseAnswer.choices, default=PauseAnswer.DENY)
    note = models.CharField(max_length=500, blank=True, default="")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team"], condition=models.Q(agent__isnull=True), name="pause_one_per_team"),
            models.UniqueConstraint(
                fields=["agent"], condition=models.Q(agent__isnull=False), name="pause_one_per_agent"
            ),
        ]

    def __str__(self) -> str:
        return f"pause of {self.agent or self.team}: {self.answer}"
