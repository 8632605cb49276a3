from django.urls import path

from research.web import consumers

websocket_urlpatterns = [
    path("ws/research/", consumers.SidebarConsumer.as_asgi()),
    path("ws/research/<str:research_id>/", consumers.ResearchConsumer.as_asgi()),
]
