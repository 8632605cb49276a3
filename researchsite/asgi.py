"""ASGI entry point for daphne: HTTP through Django, websockets through Channels with login and origin checks."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "researchsite.settings")
# No persistent database connections in the web process: under ASGI each request may run in another thread,
# and a connection kept per thread would pile up (Django's deployment advice). Workers keep theirs.
os.environ["DB_CONN_MAX_AGE"] = "0"
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry loaded above)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from research.web.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
