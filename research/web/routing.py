from django.urls import path

from research.web import consumers

# Django's stubs type path() for views; Channels' URLRouter takes ASGI applications in them (its documented use).
websocket_urlpatterns = [
    path("ws/research/", consumers.SidebarConsumer.as_asgi()),  # type: ignore[arg-type]
    path("ws/research/<str:research_id>/", consumers.ResearchConsumer.as_asgi()),  # type: ignore[arg-type]
]
