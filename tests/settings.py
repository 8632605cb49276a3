"""Settings for a test run: the production settings, with a database and a Redis db number of its own.

`claim_test_run()` (tests/support/testrun.py) sets the test defaults in the environment and claims a free Redis db
for this run (for each xdist worker, under pytest-xdist), before the production settings read the environment; the
run id it returns names the test database.
"""

from tests.support.testrun import claim_test_run

RUN_ID = claim_test_run()

from researchsite.settings import *  # noqa: E402,F403
from researchsite.settings import DATABASES  # noqa: E402

# Under pytest-xdist, pytest-django appends the worker's id (test_deepresearch_<run id>_gw0); the run id is the
# worker's own already, claimed with its Redis db.
DATABASES["default"]["TEST"] = {"NAME": f"test_deepresearch_{RUN_ID}"}
