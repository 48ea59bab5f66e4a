"""A chat route's team (team, surface) and a push subscription's person (user, endpoint)
get no index of their own: each unique constraint's index leads with the key
(approvals' migration 0029 says why)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

INDEXES = (  # (table, index, column), the names Django gave them
    ("relay_chatroute", "relay_chatroute_team_id_cbe05614", "team_id"),
    ("relay_pushsubscription", "relay_pushsubscription_user_id_a560be05", "user_id"),
)


class Migration(migrations.Migration):
    dependencies = [
        ("relay", "0004_webhooks_change_rules_version"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{index}"', reverse_sql=f'CREATE INDEX "{index}" ON "{table}" ("{column}")'
                )
                for table, index, column in INDEXES
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="chatroute",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="chat_routes",
                        to="approvals.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="pushsubscription",
                    name="user",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="push_subscriptions",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
    ]
