"""The migration that adds usage tallies adds up the calls recorded before it, so that no research's spending is
lost on upgrade, and from then on the database adds each new call itself."""

from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.support.migrations import latest, migrate

BEFORE = [("research", "0018_page_fetcher")]
AFTER = [("research", "0019_usage_tally")]


@pytest.mark.django_db(transaction=True)
def test_the_calls_recorded_before_the_tallies_are_added_up_once(user) -> None:
    newest = latest()
    try:
        # given a research with three calls recorded before the migration, one of them of a model without a price
        migrate(BEFORE)
        apps = MigrationExecutor(connection).loader.project_state(BEFORE).apps
        research = apps.get_model("research", "Research").objects.create(owner_id=user.pk, prompt="p", title="t")
        for prompt, completion, cost in ((100, 10, "0.000100"), (200, 20, None), (300, 30, "0.000300")):
            apps.get_model("research", "LlmCall").objects.create(
                research_id=research.pk,
                user_id=user.pk,
                agent="a",
                model="m",
                prompt_tokens=prompt,
                completion_tokens=completion,
                cost_usd=cost,
                outcome="ok",
            )
        research_id = research.pk
        # when the tallies arrive, and one more call is recorded after them
        migrate(AFTER)
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO research_llmcall (research_id, user_id, agent, model, prompt_tokens, completion_tokens, "
                "cost_usd, attempt, outcome, created_at) VALUES (%s, %s, 'a', 'm', 1, 2, 0.000003, 1, 'ok', now())",
                [research_id, user.pk],
            )
            cursor.execute(
                "SELECT sum(prompt_tokens), sum(completion_tokens), sum(cost_usd), sum(unpriced_calls) "
                "FROM research_usagetally WHERE research_id = %s",
                [research_id],
            )
            # then the tallies hold the four calls, the unpriced one counted apart
            assert cursor.fetchone() == (601, 62, Decimal("0.000403"), 1)
    finally:
        migrate(newest)
