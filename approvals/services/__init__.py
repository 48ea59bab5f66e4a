"""Every write Gatehouse makes, by domain. Views, consumers, bridges and commands call these.

One module per domain (like zulip's `zerver/actions/`): `submit`, `decide`, `rules`,
`identities`, `chat`, `autopilot`, and `outcomes` for what they answer and raise. Callers
use the package: `services.request_submit(...)`.
"""

from approvals.services.autopilot import AUTOPILOT_LIMITS, autopilot_configure, autopilot_consider
from approvals.services.chat import (
    CHAT_PROVIDERS,
    LINK_CODE_LIFETIME,
    chat_identity_prove,
    chat_identity_unlink,
    chat_link_code_burn,
    chat_link_code_create,
)
from approvals.services.decide import (
    BATCH_LIMIT,
    HOLDER_WAIT_SECONDS,
    request_cancel,
    request_decide,
    request_decide_batch,
    request_expire,
    request_join_prompt,
    request_record_result,
)
from approvals.services.identities import (
    MAX_PINNED_ROOTS,
    TOKEN_LIFETIMES_DAYS,
    agent_create,
    agent_pin,
    agent_revoke,
    agent_touch,
    default_team,
    membership_set,
    person_credentials_changed,
    person_deactivate,
    personal_token_create,
    personal_token_revoke,
    personal_token_revoke_own,
    personal_token_touch,
    token_hash,
)
from approvals.services.outcomes import (
    AUDIT_UNAVAILABLE,
    REMEMBER_CHOICES,
    AuditUnavailable,
    DecideResult,
    ServiceError,
    SubmitResult,
    ToolUseIdReused,
)
from approvals.services.rules import rule_create, rule_delete, rule_update, rule_validate
from approvals.services.submit import REPLAY_WINDOW, SAFETY_FLOOR_DETAIL, request_submit

__all__ = [
    "AUDIT_UNAVAILABLE",
    "AUTOPILOT_LIMITS",
    "BATCH_LIMIT",
    "CHAT_PROVIDERS",
    "HOLDER_WAIT_SECONDS",
    "LINK_CODE_LIFETIME",
    "MAX_PINNED_ROOTS",
    "REMEMBER_CHOICES",
    "REPLAY_WINDOW",
    "SAFETY_FLOOR_DETAIL",
    "TOKEN_LIFETIMES_DAYS",
    "AuditUnavailable",
    "DecideResult",
    "ServiceError",
    "SubmitResult",
    "ToolUseIdReused",
    "agent_create",
    "agent_pin",
    "agent_revoke",
    "agent_touch",
    "autopilot_configure",
    "autopilot_consider",
    "chat_identity_prove",
    "chat_identity_unlink",
    "chat_link_code_burn",
    "chat_link_code_create",
    "default_team",
    "membership_set",
    "person_credentials_changed",
    "person_deactivate",
    "personal_token_create",
    "personal_token_revoke",
    "personal_token_revoke_own",
    "personal_token_touch",
    "request_cancel",
    "request_decide",
    "request_decide_batch",
    "request_expire",
    "request_join_prompt",
    "request_record_result",
    "request_submit",
    "rule_create",
    "rule_delete",
    "rule_update",
    "rule_validate",
    "token_hash",
]
