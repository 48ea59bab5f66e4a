import django.db.models.deletion
from django.conf import settings

"""Quorum and the escalation ladder: team settings and groups, rule quorums, vote rows.

Audit rows gain a `kind` (decision, vote, reminder, escalation), so a request has many
rows and names its outcome with `PermissionRequest.decision`, filled here for every
request decided so far. New rows are hashed under format 3, which covers the kind.

On SQLite adding a column with a default rebuilds the table, which drops its triggers:
the audit log's UPDATE guard (0003) and the rules' version triggers (0004) are created
again afterwards.
"""

from importlib import import_module
from typing import Any
from django.db import migrations, models


AUDIT_GUARD = import_module("approvals.migrations.0003_audit_no_update_sqlite")
RULE_TRIGGERS = import_module("approvals.migrations.0004_rules_version")


def restore_sqlite_triggers(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(AUDIT_GUARD.CREATE)
        for statement in RULE_TRIGGERS.SQLITE_CREATE:
            schema_editor.execute(statement)


def name_outcomes(apps: Any, schema_editor: Any) -> None:
    # One statement, on the request table only: the audit rows themselves are never updated.
    schema_editor.execute(
        "UPDATE approvals_permissionrequest SET decision_id = "
        "(SELECT d.id FROM approvals_decision d WHERE d.request_id = approvals_permissionrequest.id)"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0018_request_call_context"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="TeamSettings",
            fields=[
                (
                    "team",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="approval_settings",
                        serialize=False,
                        to="approvals.team",
                    ),
                ),
                ("approvals_required", models.PositiveSmallIntegerField(default=1)),
                ("destructive_approvals", models.PositiveSmallIntegerField(default=0)),
                ("protected_path_approvals", models.PositiveSmallIntegerField(default=0)),
                ("approver_group", models.CharField(blank=True, default="", max_length=64)),
                ("exclude_owner", models.BooleanField(default=False)),
                ("ask_timeout", models.PositiveIntegerField(blank=True, null=True)),
                ("deferred_timeout", models.PositiveIntegerField(blank=True, null=True)),
                ("remind_after", models.PositiveIntegerField(blank=True, null=True)),
                ("escalate_after", models.PositiveIntegerField(blank=True, null=True)),
                ("on_call_group", models.CharField(blank=True, default="on_call", max_length=64)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
        ),
        migrations.AddField(
            model_name="decision",
            name="kind",
            field=models.CharField(
                choices=[
                    ("decision", "decision"),
                    ("vote", "vote"),
                    ("reminder", "reminder"),
                    ("escalation", "escalation"),
                ],
                default="decision",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="membership",
            name="groups",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="permissionrequest",
            name="decision",
            field=models.OneToOneField(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="approvals.decision",
            ),
        ),
        migrations.AddField(
            model_name="permissionrequest",
            name="escalate_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="permissionrequest",
            name="remind_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="rule",
            name="approvals_required",
            field=models.PositiveSmallIntegerField(default=1),
        ),
        migrations.AddField(
            model_name="rule",
            name="approver_group",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AlterField(
            model_name="decision",
            name="format",
            field=models.PositiveSmallIntegerField(default=3),
        ),
        migrations.AlterField(
            model_name="decision",
            name="request",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="audit_rows", to="approvals.permissionrequest"
            ),
        ),
        migrations.AddIndex(
            model_name="permissionrequest",
            index=models.Index(fields=["state", "remind_at"], name="request_state_remind"),
        ),
        migrations.AddIndex(
            model_name="permissionrequest",
            index=models.Index(fields=["state", "escalate_at"], name="request_state_escalate"),
        ),
        migrations.AddConstraint(
            model_name="decision",
            constraint=models.UniqueConstraint(
                condition=models.Q(("kind", "decision")), fields=("request",), name="decision_one_outcome_per_request"
            ),
        ),
        migrations.AddConstraint(
            model_name="decision",
            constraint=models.UniqueConstraint(
                condition=models.Q(("kind", "vote")),
                fields=("request", "decided_by_user"),
                name="decision_one_vote_each",
            ),
        ),
        migrations.RunPython(name_outcomes, migrations.RunPython.noop),
        migrations.RunPython(restore_sqlite_triggers, migrations.RunPython.noop),
    ]
