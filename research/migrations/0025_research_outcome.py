"""Research.outcome: how a completed research ended (complete, partial, unanswered), for its badge. Researches
completed before it are read from what they stored: partial where a budget or a cancel stopped them or a branch
failed, unanswered where their report says so, complete otherwise."""

from django.db import migrations, models


def backfill(apps, schema_editor):
    Research = apps.get_model("research", "Research")
    SerpQuery = apps.get_model("research", "SerpQuery")
    Document = apps.get_model("research", "Document")
    completed = Research.objects.filter(status="completed")
    completed.update(outcome="complete")
    failed_branches = SerpQuery.objects.filter(status="failed").values("research_id")
    completed.filter(models.Q(partial=True) | models.Q(pk__in=failed_branches)).update(outcome="partial")
    unanswered = Document.objects.filter(kind="report", stats__outcome="unanswered").values("research_id")
    completed.filter(pk__in=unanswered).update(outcome="unanswered")


class Migration(migrations.Migration):
    dependencies = [
        ("research", "0024_page_standing"),
    ]

    operations = [
        migrations.AddField(
            model_name="research",
            name="outcome",
            field=models.CharField(
                blank=True,
                choices=[("complete", "Completed"), ("partial", "Partial"), ("unanswered", "No answer found")],
                db_default="",
                default="",
                max_length=12,
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
