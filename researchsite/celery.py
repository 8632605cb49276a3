"""The Celery application: configured from Django settings (CELERY_*), tasks discovered in `workers`."""

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "researchsite.settings")

# kombu's transports with two failures mended (researchsite/broker.py). Every process imports this module
# (researchsite/__init__.py), so all of them resolve the broker URL's scheme the same way.
TRANSPORT_ALIASES["filesystem"] = "researchsite.broker:FilesystemTransport"
TRANSPORT_ALIASES["redis"] = TRANSPORT_ALIASES["rediss"] = "researchsite.broker:RedisTransport"

app = Celery("researchsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["workers"])
