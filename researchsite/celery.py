"""The Celery application: configured from Django settings (CELERY_*), tasks discovered in `workers`."""

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "researchsite.settings")

# filesystem:// (the embedded mode) is kombu's filesystem transport with whole-message publishing: every process
# imports this module (researchsite/__init__.py), so all of them resolve the name the same way.
TRANSPORT_ALIASES["filesystem"] = "researchsite.broker:Transport"

app = Celery("researchsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["workers"])
