"""Project package: importing it loads the Celery app so shared tasks bind to it."""

from researchsite.celery import app as celery_app

__all__ = ["celery_app"]
