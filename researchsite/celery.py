"""The Celery application: configured from Django settings (CELERY_*), tasks discovered in `workers`."""

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "researchsite.settings")

# kombu's Redis transport with a crash mended (researchsite/broker.py). Every process imports this module
# (researchsite/__init__.py), so all of them resolve the broker URL's scheme the same way.
TRANSPORT_ALIASES["redis"] = TRANSPORT_ALIASES["rediss"] = "researchsite.broker:RedisTransport"

app = Celery("researchsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["workers"])
