"""The Celery application: configured from Django settings (CELERY_*), tasks discovered in `workers`."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "researchsite.settings")

app = Celery("researchsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["workers"])
