from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0017_pause"),
    ]

    operations = [
        migrations.AddField(
            model_name="team",
            name="deferred_ask_timeout",
            field=models.PositiveIntegerField(default=86400),
        ),
        migrations.AddField(
            model_name="permissionrequest",
            name="call_context",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
