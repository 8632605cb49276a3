"""Settings for a test run: the production settings, with a database and a Redis db number of its own.

`claim_test_run()` (tests/support/testrun.py) sets the test defaults in the environment and claims a free Redis db
for this run, before the production settings read the environment; the run id it returns names the test database.
"""

from tests.support.testrun import claim_test_run

RUN_ID = claim_test_run()

from researchsite.settings import *  # noqa: E402,F403
from researchsite.settings import DATABASES  # noqa: E402

DATABASES["default"]["TEST"] = {"NAME": f"test_deepresearch_{RUN_ID}"}
