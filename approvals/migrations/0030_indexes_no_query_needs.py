"""Indexes no query needs, dropped: every audit row appended and every request stored kept
them up (docs/PERFORMANCE.md, twentieth pass).

- The keys another index of the table leads with: an audit row's agent
  (`decision_agent_tool_created`) and team (`decision_team_created`), a request's team
  (`request_team_state_created`), a rule's team (`rule_team_scope`). Only the index goes,
  as in migration 0029.
- PostgreSQL's pattern-matching copies (`varchar_pattern_ops`) Django made beside each
  unique or indexed text column, for `LIKE 'prefix%'`: no query here matches a prefix
  of a hash, a token's hash, a team's name or a reason's type. The backend
  (`gatehouse.postgresql`) makes no new ones.
"""

import django.db.models.deletion
from django.db import migrations, models

KEYS = (  # (table, index, column), the names Django gave them
    ("approvals_decision", "approvals_decision_agent_id_498e9d90", "agent_id"),
    ("approvals_decision", "approvals_decision_team_id_2fe34e2f", "team_id"),
    ("approvals_permissionrequest", "approvals_permissionrequest_team_id_36132850", "team_id"),
    ("approvals_rule", "approvals_rule_team_id_874f453a", "team_id"),
)
PATTERN_INDEXES = (  # PostgreSQL only
    ("approvals_agent", "approvals_agent_token_hash_6c121ff7_like", "token_hash"),
    ("approvals_auditcut", "approvals_auditcut_head_hash_d3776121_like", "head_hash"),
    ("approvals_chatlinkcode", "approvals_chatlinkcode_code_hash_b37c4156_like", "code_hash"),
    ("approvals_decision", "approvals_decision_hash_9546b214_like", "hash"),
    ("approvals_decision", "approvals_decision_prev_hash_dc3db06e_like", "prev_hash"),
    ("approvals_decision", "approvals_decision_reason_type_0636fc56_like", "reason_type"),
    ("approvals_personaltoken", "approvals_personaltoken_token_hash_e9a57338_like", "token_hash"),
    ("approvals_team", "approvals_team_name_e7830326_like", "name"),
)


def drop_pattern_indexes(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for _, index, _ in PATTERN_INDEXES:
            schema_editor.execute(f'DROP INDEX IF EXISTS "{index}"')


def make_pattern_indexes(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table, index, column in PATTERN_INDEXES:
            schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{index}" ON "{table}" ("{column}" varchar_pattern_ops)')


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0029_agent_indexes_in_the_unique_ones"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{index}"', reverse_sql=f'CREATE INDEX "{index}" ON "{table}" ("{column}")'
                )
                for table, index, column in KEYS
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="decision",
                    name="agent",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="decisions",
                        to="approvals.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="decision",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="decisions",
                        to="approvals.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="rule",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="rules",
                        to="approvals.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="permissionrequest",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="requests",
                        to="approvals.team",
                    ),
                ),
            ],
        ),
        migrations.RunPython(drop_pattern_indexes, make_pattern_indexes),
    ]
