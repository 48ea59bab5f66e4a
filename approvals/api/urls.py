"""The HTTP API under /api/v1/."""

from django.urls import path

from approvals.api import (  # noqa: F401  (schema registers the auth scheme)
    analytics,
    audit,
    learning,
    pauses,
    requests,
    rules,
    schema,
    teams,
    tokens,
)
from approvals.api.health import HealthCheckApi
from approvals.api.longpoll import api_route

urlpatterns = [
    path("health", HealthCheckApi.as_view(), name="api-health"),
    path(
        "permission-requests",
        api_route(
            {"get": requests.PermissionRequestListApi, "post": requests.PermissionRequestSubmitApi},
            requests.PermissionRequestCollectionApi,
        ),
        name="api-permission-requests",
    ),
    path(
        "permission-requests/decisions",
        requests.PermissionRequestBatchDecideApi.as_view(),
        name="api-permission-requests-decide-batch",
    ),
    path(
        "permission-requests/<uuid:request_id>",
        api_route({"get": requests.PermissionRequestDetailApi}),
        name="api-permission-request",
    ),
    path(
        "permission-requests/<uuid:request_id>/cancel",
        requests.PermissionRequestCancelApi.as_view(),
        name="api-permission-request-cancel",
    ),
    path(
        "permission-requests/<uuid:request_id>/decision",
        requests.PermissionRequestDecideApi.as_view(),
        name="api-permission-request-decision",
    ),
    path("audit", audit.AuditListApi.as_view(), name="api-audit"),
    path(
        "pauses",
        api_route({"get": pauses.PauseListApi, "post": pauses.PauseCreateApi}, pauses.PauseCollectionApi),
        name="api-pauses",
    ),
    path("pauses/<int:pause_id>", pauses.PauseDeleteApi.as_view(), name="api-pause"),
    path("analytics/approvers", analytics.ApproverAnalyticsApi.as_view(), name="api-analytics-approvers"),
    path("tokens", tokens.PersonalTokenListApi.as_view(), name="api-tokens"),
    path("tokens/<int:token_id>", tokens.PersonalTokenRevokeApi.as_view(), name="api-token"),
    path(
        "teams/<slug:name>/settings",
        api_route({"get": teams.TeamSettingsDetailApi, "patch": teams.TeamSettingsUpdateApi}, teams.TeamSettingsApi),
        name="api-team-settings",
    ),
    path("teams/<slug:name>/groups/<slug:group>", teams.TeamGroupUpdateApi.as_view(), name="api-team-group"),
    path(
        "rules",
        api_route({"get": rules.RuleListApi, "post": rules.RuleCreateApi}, rules.RuleCollectionApi),
        name="api-rules",
    ),
    path("rules/explain", rules.RuleExplainApi.as_view(), name="api-rules-explain"),
    path("rules/what-if", learning.RuleWhatIfApi.as_view(), name="api-rules-what-if"),
    path("rules/suggestions", learning.RuleSuggestionListApi.as_view(), name="api-rules-suggestions"),
    path(
        "rules/autopilot",
        api_route({"get": learning.AutopilotDetailApi, "put": learning.AutopilotUpdateApi}, learning.AutopilotApi),
        name="api-rules-autopilot",
    ),
    path(
        "rules/<int:rule_id>",
        api_route(
            {
                "get": rules.RuleDetailApi,
                "patch": rules.RuleUpdateApi,
                "put": rules.RuleUpdateApi,
                "delete": rules.RuleDeleteApi,
            },
            rules.RuleItemApi,
        ),
        name="api-rule",
    ),
]
