"""Dashboard pages."""

from django.urls import path

from approvals import learning_views, people_views, team_views, views

urlpatterns = [
    path("", views.queue, name="queue"),
    path("manifest.webmanifest", views.manifest, name="manifest"),
    path("agent/gatehouse-hook.pyz", views.hook_bundle, name="hook-bundle"),
    path("requests/decide-batch", views.requests_decide_batch, name="requests-decide-batch"),
    path("requests/<uuid:request_id>/", views.request_detail, name="request-detail"),
    path("requests/<uuid:request_id>/decide", views.request_decide, name="request-decide"),
    path("audit/", views.audit_list, name="audit"),
    path("audit/filters/", views.audit_filter_save, name="audit-filter-save"),
    path("audit/filters/<int:filter_id>/delete/", views.audit_filter_delete, name="audit-filter-delete"),
    path("audit/<int:decision_id>/", views.audit_detail, name="audit-detail"),
    path("denials/", views.denials, name="denials"),
    path("rules/", views.rules, name="rules"),
    path("rules/explain/", views.rules_explain, name="rules-explain"),
    path("rules/what-if/", learning_views.rules_what_if, name="rules-what-if"),
    path("rules/autopilot/", learning_views.autopilot_settings, name="rules-autopilot"),
    path("rules/<int:rule_id>/edit/", views.rule_edit, name="rule-edit"),
    path("rules/<int:rule_id>/delete/", views.rule_delete, name="rule-delete"),
    path("teams/<slug:name>/settings/", team_views.team_settings, name="team-settings"),
    path("agents/", views.agents, name="agents"),
    path("agents/pause/", views.agents_pause, name="agents-pause"),
    path("pauses/<int:pause_id>/resume/", views.pause_resume, name="pause-resume"),
    path("agents/<int:agent_id>/revoke/", views.agent_revoke, name="agent-revoke"),
    path("agents/<int:agent_id>/pins/", views.agent_pin, name="agent-pin"),
    path("people/", people_views.people, name="people"),
    path("people/<slug:team_name>/<int:user_id>/role/", people_views.person_role, name="person-role"),
    path("people/<slug:team_name>/<int:user_id>/remove/", people_views.person_remove, name="person-remove"),
    path("profile/", views.profile, name="profile"),
    path("profile/identities/<int:identity_id>/delete/", views.chat_identity_delete, name="chat-identity-delete"),
]
