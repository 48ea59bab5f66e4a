"""The autopilot's per-team setting, and `autopilot` as a rule source."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0006_audit_cut"),
    ]

    operations = [
        migrations.CreateModel(
            name="AutopilotSetting",
            fields=[
                (
                    "team",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="autopilot",
                        serialize=False,
                        to="approvals.team",
                    ),
                ),
                ("enabled", models.BooleanField(default=False)),
                ("approvals", models.PositiveSmallIntegerField(default=5)),
                ("trial_hours", models.PositiveIntegerField(default=24)),
                ("window_days", models.PositiveSmallIntegerField(default=30)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
        ),
        migrations.AlterField(
            model_name="rule",
            name="source",
            field=models.CharField(
                choices=[
                    ("userSettings", "userSettings"),
                    ("projectSettings", "projectSettings"),
                    ("localSettings", "localSettings"),
                    ("flagSettings", "flagSettings"),
                    ("policySettings", "policySettings"),
                    ("cliArg", "cliArg"),
                    ("command", "command"),
                    ("session", "session"),
                    ("autopilot", "autopilot"),
                ],
                max_length=32,
            ),
        ),
    ]
