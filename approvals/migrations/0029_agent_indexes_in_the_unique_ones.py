"""A foreign key that leads a unique constraint gets no index of its own.

A request's agent (`request_unique_agent_tool_use_id`), a session's denial state's agent
(`denials_unique_agent_session`), a membership's person (user, team), an agent's team
(team, name) and a saved filter's person (user, name): each unique constraint's index
leads with the key, so the key's own index was a second way to the same rows, and the
worse one: a plan made before the tables had statistics (a prepared
statement's generic plan, kept for the connection's life) took it for a submit's replay
check and read every request of the agent, a cost that grew with the table
(docs/PERFORMANCE.md, nineteenth pass). Only the index goes: the tables are not rebuilt
(SQLite) and the foreign keys are not dropped and checked again (PostgreSQL).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

INDEXES = (  # (table, index, column), the names Django gave them
    ("approvals_permissionrequest", "approvals_permissionrequest_agent_id_e74318ba", "agent_id"),
    ("approvals_sessiondenials", "approvals_sessiondenials_agent_id_a25abd21", "agent_id"),
    ("approvals_membership", "approvals_membership_user_id_500c4ad9", "user_id"),
    ("approvals_agent", "approvals_agent_team_id_0138f093", "team_id"),
    ("approvals_savedauditfilter", "approvals_savedauditfilter_user_id_4cd5f081", "user_id"),
)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0028_request_likeness"),
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
                    model_name="permissionrequest",
                    name="agent",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="requests",
                        to="approvals.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="sessiondenials",
                    name="agent",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="denial_states",
                        to="approvals.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="membership",
                    name="user",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="memberships",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="agent",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="agents",
                        to="approvals.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="savedauditfilter",
                    name="user",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="saved_audit_filters",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
    ]
