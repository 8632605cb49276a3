from django.apps import AppConfig


class ResearchConfig(AppConfig):
    name = "research"
    verbose_name = "Deep research"
