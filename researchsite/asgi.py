"""ASGI entry point for daphne: HTTP through Django (but /mcp, the MCP server over streamable HTTP, which authenticates
its own token), websockets through Channels with login and origin checks."""

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

from research.web.mcp_server import McpHttp  # noqa: E402
from research.web.routing import websocket_urlpatterns  # noqa: E402

mcp_app = McpHttp()


async def http(scope, receive, send) -> None:
    """/mcp to the MCP server, everything else to Django."""
    if scope["path"] in ("/mcp", "/mcp/"):
        await mcp_app(scope, receive, send)
    else:
        await django_asgi_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
