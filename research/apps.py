from django.apps import AppConfig


class ResearchConfig(AppConfig):
    name = "research"
    verbose_name = "Deep research"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_out

        from research.push import close_session_sockets

        user_logged_out.connect(close_session_sockets, dispatch_uid="research.close_session_sockets")
